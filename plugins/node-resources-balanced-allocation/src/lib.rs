//! NodeResourcesBalancedAllocation: as upstream's `noderesources` BalancedAllocation
//! plugin, favours nodes whose balance the pod improves. The balance of a node is
//! `(1 - std) * 100` over the fractions `requested / allocatable` of the scored
//! resources; since kube-scheduler 1.36 (kubernetes/kubernetes#135573) the score is
//! the change the pod makes to it, `50 + (50 + with - without) / 2`: about 75 when the
//! pod leaves the balance as it was, towards 100 when it evens the node out, towards
//! 50 when it tips it over.
//!
//! As upstream since best-effort pods were exempted, the pod's and the node's actual
//! requests count (not the non-zero defaults other scorers use), and a pod that
//! requests none of the scored resources is not scored at all (PreScore answers
//! Skip), so best-effort pods do not all pile onto one node.
//!
//! Args (JSON, kube-scheduler's `NodeResourcesBalancedAllocationArgs`):
//!
//! ```json
//! {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
//! ```

pub mod args;

use berth_sdk::helpers::{NodeResource, allocatable_and_requested_of};
use berth_sdk::{
    CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, Pod, PreScore, Score, Sign, SignFragment,
    StateKey, Status, sign,
};

pub use args::{BalancedAllocationArgs, ResourceSpec};
pub use berth_sdk::validation::is_scalar_resource_name;

/// The CycleState key of the pod's requests of the scored resources, written by
/// PreScore (upstream's key).
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeResourcesBalancedAllocation";
/// [`PRE_SCORE_STATE_KEY`] with its value: the pod's requests of the scored resources.
static PRE_SCORE_STATE: StateKey<Vec<i64>> = StateKey::new(PRE_SCORE_STATE_KEY);

/// The plugin.
pub struct BalancedAllocation {
    args: BalancedAllocationArgs,
    /// `args.resources`, resolved once for Score.
    scored: Vec<NodeResource>,
}

impl BalancedAllocation {
    /// Builds the plugin from validated args.
    pub fn with_args(args: BalancedAllocationArgs) -> Self {
        BalancedAllocation {
            scored: NodeResource::of_specs(&args.resources),
            args,
        }
    }

    /// The args in force.
    pub fn args(&self) -> &BalancedAllocationArgs {
        &self.args
    }

    /// The pod's requests of each scored resource, in the order of the args.
    fn pod_requests(&self, pod: &Pod) -> Vec<i64> {
        let requests = pod.requests();
        self.args
            .resources
            .iter()
            .map(|r| requests.get(&r.name))
            .collect()
    }
}

impl Plugin for BalancedAllocation {
    const NAME: &'static str = "NodeResourcesBalancedAllocation";
    fn new(args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        BalancedAllocationArgs::from_json(args).map(BalancedAllocation::with_args)
    }
}

/// Upstream's `calculateResourceAllocatableRequest` with actual requests: the node's
/// allocatable quantity of a resource and what its pods plus this one request;
/// `(0, 0)` leaves the resource out of the balance.
pub fn allocatable_and_requested(node: &NodeInfo, name: &str, pod_request: i64) -> (i64, i64) {
    berth_sdk::helpers::allocatable_and_requested(node, name, pod_request, true)
}

/// Upstream's `balancedResourceScorer`: `(1 - std) * 100`, truncated, over the
/// fractions `requested / allocatable` (capped at 1) of the resources with a non-zero
/// allocatable quantity. Computed in `f64` in upstream's order, so the truncation
/// lands where upstream's does.
pub fn balanced_score(requested: &[i64], allocatable: &[i64]) -> i64 {
    balanced_score_of(requested.iter().copied().zip(allocatable.iter().copied()))
}

/// [`balanced_score`] over `(requested, allocatable)` pairs, without allocating: Score
/// runs it once per node.
fn balanced_score_of(resources: impl Iterator<Item = (i64, i64)> + Clone) -> i64 {
    let fractions = resources
        .filter(|&(_, alloc)| alloc != 0)
        .map(|(req, alloc)| (req as f64 / alloc as f64).min(1.0));
    let (mut n, mut total, mut first_two) = (0usize, 0.0f64, [0.0f64; 2]);
    for fraction in fractions.clone() {
        if let Some(slot) = first_two.get_mut(n) {
            *slot = fraction;
        }
        n += 1;
        total += fraction;
    }
    let std = match n {
        // With two resources the deviation is half their difference.
        2 => ((first_two[0] - first_two[1]) / 2.0).abs(),
        n if n > 2 => {
            let mean = total / n as f64;
            let sum: f64 = fractions.map(|f| (f - mean) * (f - mean)).sum();
            (sum / n as f64).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// Upstream's `balancedResourceScorer` since 1.36: how much placing the pod changes
/// the node's balance, from the balance with the pod and without it (each a
/// [`balanced_score`] in `[50, 100]`), brought back into `[50, 100]`. Integer
/// arithmetic, truncating, as upstream's.
pub fn balance_change_score(with_pod: i64, without_pod: i64) -> i64 {
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with_pod - without_pod) / 2
}

impl PreScore for BalancedAllocation {
    fn pre_score(
        &self,
        state: &CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        _all_nodes: &[&NodeInfo],
    ) -> Status {
        let requests = self.pod_requests(pod);
        // Best-effort pods would otherwise all favour the same emptiest-looking node.
        if requests.iter().all(|&r| r == 0) {
            return Status::skip();
        }
        state.set(&PRE_SCORE_STATE, &requests);
        Status::success()
    }
}

impl Score for BalancedAllocation {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        // As upstream, Score works without PreScore by computing the requests itself.
        let requests = match state.value(&PRE_SCORE_STATE) {
            Some(r) if r.len() == self.args.resources.len() => r,
            _ => {
                let r = self.pod_requests(pod);
                if r.iter().all(|&q| q == 0) {
                    return Ok(0);
                }
                std::rc::Rc::new(r)
            }
        };
        // Per scored resource: (requested with the pod, held without it, allocatable).
        let resources = self
            .scored
            .iter()
            .zip(requests.iter())
            .map(|(resource, &pod_request)| {
                let (alloc, req) = allocatable_and_requested_of(node, resource, pod_request, true);
                // A resource the node does not have counts as neither requested nor
                // held.
                if alloc == 0 {
                    (0, 0, 0)
                } else {
                    (req, req - pod_request, alloc)
                }
            });
        let with_pod = balanced_score_of(resources.clone().map(|(req, _, alloc)| (req, alloc)));
        let without_pod = balanced_score_of(resources.map(|(_, held, alloc)| (held, alloc)));
        Ok(balance_change_score(with_pod, without_pod))
    }
}

impl Sign for BalancedAllocation {
    /// PreScore and Score read the pod's effective requests (containers, init
    /// containers and sidecars, resize state, pod-level resources, overhead), signed
    /// as computed ([`sign::resources`], which NodeResourcesFit shares).
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::resources(pod)])
    }
}

berth_sdk::export_plugin!(BalancedAllocation: pre_score, score, sign_pod);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Code, Container, MemoryState, Node, ResourceList, Resources};

    const GPU: &str = "nvidia.com/gpu";

    fn list(items: &[(&str, i64)]) -> ResourceList {
        items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    /// A pod with one container per request list.
    fn pod(containers: &[&[(&str, i64)]]) -> Pod {
        Pod {
            name: "pod".into(),
            containers: containers
                .iter()
                .map(|c| Container {
                    name: "c".into(),
                    requests: list(c),
                    ..Container::default()
                })
                .collect(),
            ..Pod::default()
        }
    }

    /// Upstream's `makeNode`: millicores, bytes and scalar resources.
    fn node(
        name: &str,
        milli_cpu: i64,
        memory: i64,
        scalar: &[(&str, i64)],
        pods: &[&Pod],
    ) -> NodeInfo {
        let mut alloc = list(scalar);
        alloc.insert("cpu".into(), milli_cpu);
        alloc.insert("memory".into(), memory);
        let mut info = NodeInfo::new(Node {
            name: name.into(),
            allocatable: Resources::from_list(&alloc),
            ..Node::default()
        });
        for p in pods {
            info.add_pod(p);
        }
        info
    }

    fn cpu_and_memory() -> Pod {
        pod(&[
            &[("cpu", 1000), ("memory", 2000)],
            &[("cpu", 2000), ("memory", 3000)],
        ])
    }

    fn cpu_only() -> Pod {
        pod(&[
            &[("cpu", 1000), ("memory", 0)],
            &[("cpu", 2000), ("memory", 0)],
        ])
    }

    fn cpu_and_memory_and_gpu() -> Pod {
        pod(&[
            &[("cpu", 1000), ("memory", 2000)],
            &[("cpu", 2000), ("memory", 3000), (GPU, 3)],
        ])
    }

    fn with_gpu() -> BalancedAllocation {
        BalancedAllocation::new(berth_sdk::serde_json::json!({
            "resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}],
        }))
        .unwrap()
    }

    /// PreScore then Score on each node, as upstream's test; `None` when PreScore
    /// skips.
    fn scores(plugin: &BalancedAllocation, p: &Pod, nodes: &[NodeInfo]) -> Option<Vec<i64>> {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let status = plugin.pre_score(&state, p, &refs, &refs);
        if status.code == Code::Skip {
            return None;
        }
        assert!(status.is_success(), "{status:?}");
        Some(
            nodes
                .iter()
                .map(|n| plugin.score(&state, p, n).unwrap())
                .collect(),
        )
    }

    fn default_plugin() -> BalancedAllocation {
        BalancedAllocation::with_args(BalancedAllocationArgs::default())
    }

    #[test]
    fn signs_the_requests_it_scores() {
        let plugin = default_plugin();
        let sign = |p: &Pod| plugin.sign_pod(p).unwrap();
        assert_ne!(sign(&cpu_and_memory()), sign(&cpu_only()));
        let mut pod_level = cpu_only();
        pod_level.resources = Some(berth_sdk::ResourceRequirements {
            requests: list(&[("memory", 5000)]),
            limits: ResourceList::new(),
        });
        assert_ne!(sign(&cpu_only()), sign(&pod_level));
        // The same requests in one container, on another pod: the same fragments and
        // the same scores.
        let mut merged = pod(&[&[("cpu", 3000), ("memory", 5000)]]);
        merged.name = "other".into();
        merged.labels = [("app".to_owned(), "x".to_owned())].into();
        assert_eq!(sign(&cpu_and_memory()), sign(&merged));
        let nodes = [node("n", 4000, 10000, &[], &[&cpu_only()])];
        assert_eq!(
            scores(&plugin, &cpu_and_memory(), &nodes),
            scores(&plugin, &merged, &nodes)
        );
    }

    // The cases of upstream's TestNodeResourcesBalancedAllocation.
    #[test]
    fn best_effort_pods_are_skipped() {
        let nodes = [
            node("node1", 4000, 10000, &[], &[]),
            node("node2", 4000, 10000, &[], &[]),
        ];
        assert_eq!(scores(&default_plugin(), &Pod::default(), &nodes), None);
        // Containers that request nothing make a best-effort pod too.
        assert_eq!(scores(&default_plugin(), &pod(&[&[]]), &nodes), None);
    }

    #[test]
    fn nothing_scheduled_resources_requested_differently_sized_nodes() {
        let nodes = [
            node("node1", 4000, 10000, &[], &[]),
            node("node2", 6000, 10000, &[], &[]),
        ];
        assert_eq!(
            scores(&default_plugin(), &cpu_and_memory(), &nodes),
            // Balance 100 -> 87 and 100 -> 100.
            Some(vec![68, 75])
        );
    }

    #[test]
    fn resources_requested_pods_scheduled_with_resources() {
        let nodes = [
            node("node1", 10000, 20000, &[], &[&cpu_only()]),
            node("node2", 10000, 20000, &[], &[&cpu_and_memory()]),
        ];
        assert_eq!(
            scores(&default_plugin(), &cpu_and_memory(), &nodes),
            // Balance 85 -> 82 and 97 -> 95.
            Some(vec![73, 74])
        );
    }

    #[test]
    fn resources_requested_pods_scheduled_differently_sized_nodes() {
        let nodes = [
            node("node1", 10000, 20000, &[], &[&cpu_only()]),
            node("node2", 10000, 50000, &[], &[&cpu_and_memory()]),
        ];
        assert_eq!(
            scores(&default_plugin(), &cpu_and_memory(), &nodes),
            // Balance 85 -> 82 and 90 -> 80.
            Some(vec![73, 70])
        );
    }

    #[test]
    fn requested_resources_at_node_capacity() {
        let nodes = [
            node("node1", 6000, 10000, &[], &[&cpu_only()]),
            node("node2", 6000, 10000, &[], &[&cpu_and_memory()]),
        ];
        assert_eq!(
            scores(&default_plugin(), &cpu_only(), &nodes),
            // Balance 75 -> 50 and 100 -> 75.
            Some(vec![62, 62])
        );
    }

    #[test]
    fn a_pod_that_evens_a_node_out_scores_highest() {
        let nodes = [
            node("node1", 3000, 5000, &[], &[&pod(&[&[("cpu", 3000)]])]),
            node("node2", 3000, 5000, &[], &[]),
        ];
        let p = pod(&[&[("memory", 5000)]]);
        // Balance 50 -> 100 and 100 -> 50.
        assert_eq!(scores(&default_plugin(), &p, &nodes), Some(vec![100, 50]));
    }

    #[test]
    fn scalar_resource_on_the_node_is_balanced_too() {
        let gpu8 = [(GPU, 8)];
        let nodes = [
            node("node1", 3500, 40000, &gpu8, &[&cpu_and_memory_and_gpu()]),
            node("node2", 3500, 40000, &gpu8, &[&cpu_and_memory()]),
        ];
        let p = pod(&[&[("memory", 0), (GPU, 1)]]);
        // Balance 69 -> 70 and 62 -> 65.
        assert_eq!(scores(&with_gpu(), &p, &nodes), Some(vec![75, 76]));
    }

    #[test]
    fn a_scalar_resource_the_pod_does_not_request_is_left_out() {
        let nodes = [
            node("node1", 3500, 40000, &[(GPU, 8)], &[]),
            node("node2", 3500, 40000, &[], &[]),
        ];
        assert_eq!(
            scores(&with_gpu(), &cpu_and_memory(), &nodes),
            // Balance 100 -> 63 on both.
            Some(vec![56, 56])
        );
    }

    #[test]
    fn score_without_pre_score_computes_the_requests() {
        let nodes = [
            node("node1", 10000, 20000, &[], &[&cpu_only()]),
            node("node2", 10000, 20000, &[], &[&cpu_and_memory()]),
        ];
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let p = cpu_and_memory();
        let got: Vec<i64> = nodes
            .iter()
            .map(|n| default_plugin().score(&state, &p, n).unwrap())
            .collect();
        assert_eq!(got, [73, 74]);
        // A best-effort pod scores 0 there.
        assert_eq!(
            default_plugin().score(&state, &Pod::default(), &nodes[0]),
            Ok(0)
        );
    }

    // Beyond upstream's table: the pieces of the computation.
    #[test]
    fn best_effort_pods_on_the_node_do_not_count() {
        // Actual requests, not the non-zero defaults: a best-effort pod adds nothing.
        let empty = node("node1", 4000, 10000, &[], &[]);
        let busy = node("node2", 4000, 10000, &[], &[&pod(&[&[]])]);
        assert_eq!(
            scores(&default_plugin(), &cpu_and_memory(), &[empty, busy]),
            Some(vec![68, 68])
        );
    }

    #[test]
    fn overcommitted_fractions_are_capped_at_1() {
        assert_eq!(balanced_score(&[8000, 5000], &[4000, 10000]), 75);
        assert_eq!(balanced_score(&[8000, 20000], &[4000, 10000]), 100);
    }

    #[test]
    fn the_change_in_balance_is_brought_back_into_50_to_100() {
        assert_eq!(balance_change_score(100, 100), 75);
        assert_eq!(balance_change_score(100, 50), 100);
        assert_eq!(balance_change_score(50, 100), 50);
        // Truncated as upstream's integer arithmetic: 50 + 37 / 2.
        assert_eq!(balance_change_score(87, 100), 68);
    }

    #[test]
    fn one_resource_or_none_is_perfectly_balanced() {
        assert_eq!(balanced_score(&[3000], &[4000]), 100);
        assert_eq!(balanced_score(&[3000, 5], &[4000, 0]), 100);
        assert_eq!(balanced_score(&[], &[]), 100);
    }

    #[test]
    fn init_containers_and_overhead_count() {
        let mut p = pod(&[&[("cpu", 1000), ("memory", 1000)]]);
        p.init_containers = vec![Container {
            name: "init".into(),
            requests: list(&[("cpu", 3000)]),
            ..Container::default()
        }];
        p.overhead = list(&[("memory", 4000)]);
        // cpu 3000/4000 = 0.75, memory 5000/10000 = 0.5: std 0.125, balance 87
        // where the empty node's is 100.
        let nodes = [node("node1", 4000, 10000, &[], &[])];
        assert_eq!(scores(&default_plugin(), &p, &nodes), Some(vec![68]));
    }

    #[test]
    fn scalar_resource_names() {
        for yes in [
            GPU,
            "hugepages-2Mi",
            "kubernetes.io/foo",
            "attachable-volumes-aws-ebs",
        ] {
            assert!(is_scalar_resource_name(yes), "{yes}");
        }
        for no in [
            "cpu",
            "memory",
            "pods",
            "foo",
            "requests.example.com/x",
            "a/b/c",
        ] {
            assert!(!is_scalar_resource_name(no), "{no}");
        }
    }

    #[test]
    fn ephemeral_storage_can_be_balanced() {
        let plugin = BalancedAllocation::new(berth_sdk::serde_json::json!({
            "resources": [{"name": "cpu"}, {"name": "ephemeral-storage"}],
        }))
        .unwrap();
        let mut n = node("node1", 4000, 10000, &[], &[]);
        n.node.allocatable.ephemeral_storage = 1000;
        let p = pod(&[&[("cpu", 2000), ("ephemeral-storage", 100)]]);
        // cpu 0.5, storage 0.1: std 0.2, balance 80 where the empty node's is 100.
        assert_eq!(scores(&plugin, &p, &[n]), Some(vec![65]));
    }
}
