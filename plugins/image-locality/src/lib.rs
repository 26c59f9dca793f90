//! ImageLocality: as upstream's `imagelocality` plugin, favours nodes that already
//! hold the images of the pod's containers (init containers included), weighing each
//! image by its size and by how widely it has spread over the cluster, so that one
//! node holding a big image does not attract every pod that uses it.
//!
//! Upstream reads the number of nodes in the snapshot in Score; here PreScore, which
//! sees every node of the snapshot, stores it in the CycleState for Score. The
//! plugin takes no args.

use berth_sdk::helpers::{wide_div, wide_mul};
use berth_sdk::{
    CycleState, ImageState, MAX_NODE_SCORE, NodeInfo, Plugin, Pod, PreScore, Score, Sign,
    SignFragment, StateKey, Status, sign,
};

/// A mebibyte.
pub const MB: i64 = 1024 * 1024;
/// Image scores below this sum count as nothing (upstream's `minThreshold`).
pub const MIN_THRESHOLD: i64 = 23 * MB;
/// Per container, image scores above this sum count as the maximum (upstream's
/// `maxContainerThreshold`).
pub const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;
/// The CycleState key of the number of nodes in the snapshot, written by PreScore.
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreImageLocality";
/// [`PRE_SCORE_STATE_KEY`] with its value.
static PRE_SCORE_STATE: StateKey<PreScoreState> = StateKey::new(PRE_SCORE_STATE_KEY);

/// What PreScore computes once for every node's Score.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PreScoreState {
    /// The number of nodes in the snapshot.
    pub total_nodes: u32,
    /// The normalized names of the pod's images, init containers first.
    pub images: Vec<String>,
}

/// The plugin.
pub struct ImageLocality;

impl Plugin for ImageLocality {
    const NAME: &'static str = "ImageLocality";
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(ImageLocality)
    }
}

/// The name a container runtime reports for an image reference, as upstream's
/// `normalizedImageName`: `:latest` is added when the reference has neither a tag nor
/// a digest (a `:` after the last `/` is a tag; one before it is a registry port).
pub fn normalized_image_name(name: &str) -> String {
    let last = |c: char| name.rfind(c).map_or(-1, |i| i as i64);
    if last(':') <= last('/') {
        format!("{name}:latest")
    } else {
        name.to_owned()
    }
}

/// An image's size scaled by its spread, the share of the cluster's nodes that hold
/// it, as upstream's `scaledImageScore` (in `f64`, truncated, as upstream).
pub fn scaled_image_score(image: &ImageState, total_nodes: u32) -> i64 {
    if total_nodes == 0 {
        return 0;
    }
    let spread = f64::from(image.num_nodes) / f64::from(total_nodes);
    (image.size_bytes as f64 * spread) as i64
}

/// The sum of the scaled scores of the pod's images (init containers first, as
/// upstream) that the node holds under their normalized name.
pub fn sum_image_scores(node: &NodeInfo, pod: &Pod, total_nodes: u32) -> i64 {
    sum_scores_of(node, &pod_images(pod), total_nodes)
}

/// The normalized names of the pod's images, init containers first.
pub fn pod_images(pod: &Pod) -> Vec<String> {
    pod.init_containers
        .iter()
        .chain(&pod.containers)
        .map(|c| normalized_image_name(&c.image))
        .collect()
}

/// [`sum_image_scores`] of images already normalized.
fn sum_scores_of(node: &NodeInfo, images: &[String], total_nodes: u32) -> i64 {
    images
        .iter()
        .filter_map(|wanted| {
            // Upstream keys a node's images by each of their names.
            node.node
                .images
                .iter()
                .find(|img| img.names.contains(wanted))
        })
        .map(|img| scaled_image_score(img, total_nodes))
        .sum()
}

/// Upstream's `calculatePriority`: the sum clamped to
/// `[MIN_THRESHOLD, MAX_CONTAINER_THRESHOLD * containers]` and mapped linearly onto
/// `0..=100`, rounding down.
pub fn calculate_priority(sum_scores: i64, num_containers: usize) -> i64 {
    let max_threshold =
        MAX_CONTAINER_THRESHOLD.saturating_mul(i64::try_from(num_containers).unwrap_or(i64::MAX));
    // Upstream's order of the two bounds, which matters only with no containers.
    let sum = if sum_scores < MIN_THRESHOLD {
        MIN_THRESHOLD
    } else if sum_scores > max_threshold {
        max_threshold
    } else {
        sum_scores
    };
    let range = i128::from(max_threshold) - i128::from(MIN_THRESHOLD);
    if range == 0 {
        return 0;
    }
    wide_div(
        wide_mul(MAX_NODE_SCORE, sum) - wide_mul(MAX_NODE_SCORE, MIN_THRESHOLD),
        range,
    )
}

impl PreScore for ImageLocality {
    fn pre_score(
        &self,
        state: &CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        all_nodes: &[&NodeInfo],
    ) -> Status {
        // Spread is over the whole snapshot, not only the feasible nodes.
        let total = u32::try_from(all_nodes.len()).unwrap_or(u32::MAX);
        state.set(
            &PRE_SCORE_STATE,
            &PreScoreState {
                total_nodes: total,
                images: pod_images(pod),
            },
        );
        Status::success()
    }
}

impl Score for ImageLocality {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        // Score alone cannot know how many nodes the cluster has.
        let Some(pre) = state.value(&PRE_SCORE_STATE) else {
            return Err(Status::error(format!(
                "reading {PRE_SCORE_STATE_KEY:?} from cycleState: not found \
                 (ImageLocality needs its PreScore)"
            )));
        };
        let sum = sum_scores_of(node, &pre.images, pre.total_nodes);
        Ok(calculate_priority(
            sum,
            pod.init_containers.len() + pod.containers.len(),
        ))
    }
}

impl Sign for ImageLocality {
    /// PreScore and Score read the images of the containers and init containers,
    /// and how many there are ([`sign::images`]).
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::images(pod)])
    }
}

berth_sdk::export_plugin!(ImageLocality: pre_score, score, sign_pod);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Code, Container, MemoryState, Node};

    fn container(image: &str) -> Container {
        Container {
            name: "c".into(),
            image: image.into(),
            ..Container::default()
        }
    }

    fn pod(images: &[&str]) -> Pod {
        Pod {
            name: "pod".into(),
            containers: images.iter().map(|i| container(i)).collect(),
            ..Pod::default()
        }
    }

    /// A node's image: its names and size in MiB.
    fn image(names: &[&str], mib: i64) -> ImageState {
        ImageState {
            names: names.iter().map(|n| (*n).into()).collect(),
            size_bytes: mib * MB,
            num_nodes: 0,
        }
    }

    fn node(name: &str, images: Vec<ImageState>) -> NodeInfo {
        NodeInfo::new(Node {
            name: name.into(),
            images,
            ..Node::default()
        })
    }

    /// Fills in `num_nodes` as the host does: the nodes listing any of the image's
    /// names.
    fn count_images(nodes: &mut [NodeInfo]) {
        let listed: Vec<Vec<String>> = nodes
            .iter()
            .map(|n| n.node.images.iter().flat_map(|i| i.names.clone()).collect())
            .collect();
        for n in nodes.iter_mut() {
            for img in &mut n.node.images {
                let holders = listed
                    .iter()
                    .filter(|names| img.names.iter().any(|x| names.contains(x)))
                    .count();
                img.num_nodes = holders as u32;
            }
        }
    }

    fn node_40_300_2000(name: &str) -> NodeInfo {
        node(
            name,
            vec![
                image(&["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
                image(&["gcr.io/300:latest", "gcr.io/300:v1"], 300),
                image(&["gcr.io/2000:latest"], 2000),
            ],
        )
    }

    fn node_250_10(name: &str) -> NodeInfo {
        node(
            name,
            vec![
                image(&["gcr.io/250:latest"], 250),
                image(&["gcr.io/10:latest", "gcr.io/10:v1"], 10),
            ],
        )
    }

    fn node_600_40_900(name: &str) -> NodeInfo {
        node(
            name,
            vec![
                image(&["gcr.io/600:latest"], 600),
                image(&["gcr.io/40:latest"], 40),
                image(&["gcr.io/900:latest"], 900),
            ],
        )
    }

    fn node_300_600_900(name: &str) -> NodeInfo {
        node(
            name,
            vec![
                image(&["gcr.io/300:latest"], 300),
                image(&["gcr.io/600:latest"], 600),
                image(&["gcr.io/900:latest"], 900),
            ],
        )
    }

    fn node_4000_30(name: &str) -> NodeInfo {
        node(
            name,
            vec![
                image(&["gcr.io/4000:latest"], 4000),
                image(&["gcr.io/30:latest"], 30),
            ],
        )
    }

    fn node_20_30_40(name: &str) -> NodeInfo {
        node(
            name,
            vec![
                image(&["gcr.io/20:latest"], 20),
                image(&["gcr.io/30:latest"], 30),
                image(&["gcr.io/40:latest"], 40),
            ],
        )
    }

    /// PreScore over every node, then Score on each, as the host runs them.
    #[test]
    fn signs_the_images_of_every_container() {
        let sign = |p: &Pod| ImageLocality.sign_pod(p).unwrap();
        let two = pod(&["gcr.io/40", "gcr.io/300"]);
        assert_ne!(sign(&two), sign(&pod(&["gcr.io/40", "gcr.io/250"])));
        // One container more with an image already asked for: counted again.
        assert_ne!(
            sign(&two),
            sign(&pod(&["gcr.io/40", "gcr.io/300", "gcr.io/40"]))
        );
        let mut with_init = two.clone();
        with_init.init_containers.push(container("gcr.io/2000"));
        assert_ne!(sign(&two), sign(&with_init));
        // The same images in another order, on another pod: the same fragments and
        // scores.
        let mut moved = pod(&["gcr.io/2000", "gcr.io/300"]);
        moved.name = "other".into();
        moved.init_containers.push(container("gcr.io/40"));
        assert_eq!(sign(&with_init), sign(&moved));
        let nodes = || {
            vec![
                node_40_300_2000("a"),
                node_250_10("b"),
                node_600_40_900("c"),
            ]
        };
        assert_eq!(scores(&with_init, nodes()), scores(&moved, nodes()));
    }

    fn scores(p: &Pod, mut nodes: Vec<NodeInfo>) -> Vec<i64> {
        count_images(&mut nodes);
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        assert!(
            ImageLocality
                .pre_score(&state, p, &refs, &refs)
                .is_success()
        );
        nodes
            .iter()
            .map(|n| ImageLocality.score(&state, p, n).unwrap())
            .collect()
    }

    // The cases of upstream's TestImageLocalityPriority.
    #[test]
    fn two_images_spread_on_two_nodes_prefer_the_larger_image() {
        let p = pod(&["gcr.io/40", "gcr.io/250"]);
        let nodes = vec![node_40_300_2000("node1"), node_250_10("node2")];
        assert_eq!(scores(&p, nodes), [0, 5]);
    }

    #[test]
    fn two_images_on_one_node_prefer_this_node() {
        let p = pod(&["gcr.io/40", "gcr.io/300"]);
        let nodes = vec![node_40_300_2000("node1"), node_250_10("node2")];
        assert_eq!(scores(&p, nodes), [7, 0]);
    }

    #[test]
    fn above_the_limit_the_limit_counts() {
        let p = pod(&["gcr.io/10", "gcr.io/4000"]);
        let nodes = vec![node_4000_30("node1"), node_250_10("node2")];
        assert_eq!(scores(&p, nodes), [100, 0]);
    }

    #[test]
    fn above_the_limit_with_a_node_without_images() {
        let p = pod(&["gcr.io/10", "gcr.io/4000"]);
        let nodes = vec![
            node_4000_30("node1"),
            node_250_10("node2"),
            node("node3", vec![]),
        ];
        assert_eq!(scores(&p, nodes), [66, 0, 0]);
    }

    #[test]
    fn multiple_large_images_prefer_the_node_with_all() {
        let p = pod(&["gcr.io/300", "gcr.io/600", "gcr.io/900"]);
        let nodes = vec![
            node_600_40_900("node1"),
            node_300_600_900("node2"),
            node("node3", vec![]),
        ];
        assert_eq!(scores(&p, nodes), [32, 36, 0]);
    }

    #[test]
    fn multiple_small_images() {
        let p = pod(&["gcr.io/30", "gcr.io/40"]);
        let nodes = vec![node_20_30_40("node1"), node_4000_30("node2")];
        assert_eq!(scores(&p, nodes), [1, 0]);
    }

    #[test]
    fn init_container_images_count() {
        let mut p = pod(&["gcr.io/30"]);
        p.init_containers = vec![container("gcr.io/300")];
        let nodes = vec![node_40_300_2000("node1"), node_20_30_40("node2")];
        assert_eq!(scores(&p, nodes), [6, 0]);
    }

    // Upstream's TestNormalizedImageName.
    #[test]
    fn image_names_get_latest_when_they_have_no_tag_or_digest() {
        assert_eq!(normalized_image_name("root"), "root:latest");
        assert_eq!(
            normalized_image_name("gcr.io:5000/root"),
            "gcr.io:5000/root:latest"
        );
        assert_eq!(normalized_image_name("root:tag"), "root:tag");
        let digest = "root@sha256:4c0f8c2fbcb5f1d1b5e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1";
        assert_eq!(normalized_image_name(digest), digest);
    }

    // Beyond upstream's table.
    #[test]
    fn a_tag_other_than_latest_must_be_listed() {
        let p = pod(&["gcr.io/300:v1"]);
        let nodes = vec![node_40_300_2000("node1"), node_300_600_900("node2")];
        // node1's image carries the v1 tag; node2 lists gcr.io/300 only as latest.
        let got = scores(&p, nodes);
        assert!(got[0] > 0 && got[1] == 0, "{got:?}");
        let p = pod(&["gcr.io/300:v1"]);
        let nodes = vec![node_40_300_2000("node1"), node_250_10("node2")];
        // Spread 1/2: (150 - 23) * 100 / 977 = 12.
        assert_eq!(scores(&p, nodes), [12, 0]);
    }

    #[test]
    fn priority_is_clamped_to_the_thresholds() {
        assert_eq!(calculate_priority(0, 1), 0);
        assert_eq!(calculate_priority(MIN_THRESHOLD, 1), 0);
        assert_eq!(calculate_priority(MAX_CONTAINER_THRESHOLD, 1), 100);
        assert_eq!(calculate_priority(5 * MAX_CONTAINER_THRESHOLD, 2), 100);
        assert_eq!(calculate_priority(0, 0), 0);
    }

    #[test]
    fn score_without_pre_score_is_an_error() {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let err = ImageLocality
            .score(&state, &pod(&["gcr.io/40"]), &node_40_300_2000("node1"))
            .unwrap_err();
        assert_eq!(err.code, Code::Error);
    }

    #[test]
    fn the_spread_counts_every_node_of_the_snapshot() {
        let mut nodes = vec![
            node_4000_30("node1"),
            node("node2", vec![]),
            node("node3", vec![]),
            node("node4", vec![]),
        ];
        count_images(&mut nodes);
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let all: Vec<&NodeInfo> = nodes.iter().collect();
        let p = pod(&["gcr.io/4000"]);
        // Only node1 is feasible, but the spread is 1/4: 1000 MiB, the maximum.
        assert!(
            ImageLocality
                .pre_score(&state, &p, &all[..1], &all)
                .is_success()
        );
        assert_eq!(ImageLocality.score(&state, &p, &nodes[0]), Ok(100));
    }
}
