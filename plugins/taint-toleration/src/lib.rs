//! TaintToleration: as upstream's `tainttoleration` plugin, filters out nodes with a
//! `NoSchedule` or `NoExecute` taint the pod does not tolerate, and prefers nodes
//! with fewer untolerated `PreferNoSchedule` taints.

use berth_sdk::{
    CycleState, Filter, MAX_NODE_SCORE, NodeInfo, NormalizeScore, Plugin, Pod, PreScore, Score,
    Status, Taint, TaintEffect, Toleration, helpers::default_normalize_score,
    types::find_untolerated_taint,
};

/// The CycleState key of what PreScore computes (upstream's key).
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreTaintToleration";

/// The plugin.
pub struct TaintToleration;

impl Plugin for TaintToleration {
    const NAME: &'static str = "TaintToleration";
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(TaintToleration)
    }
}

/// The reason upstream gives for an untolerated taint.
pub fn err_reason_untolerated(taint: &Taint) -> String {
    format!(
        "node(s) had untolerated taint {{{}: {}}}",
        taint.key, taint.value
    )
}

impl Filter for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        // PreferNoSchedule taints only lower the score.
        let hard = |t: &Taint| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute);
        match find_untolerated_taint(&node.node.taints, &pod.tolerations, hard) {
            None => Status::success(),
            // Preemption cannot remove a taint.
            Some(taint) => Status::unresolvable(err_reason_untolerated(taint)),
        }
    }
}

/// Indices of the pod's tolerations that can tolerate a `PreferNoSchedule` taint:
/// those with that effect or with none (which matches every effect).
fn prefer_no_schedule_tolerations(pod: &Pod) -> Vec<u32> {
    (0u32..)
        .zip(&pod.tolerations)
        .filter(|(_, t)| matches!(t.effect, None | Some(TaintEffect::PreferNoSchedule)))
        .map(|(i, _)| i)
        .collect()
}

/// How many `PreferNoSchedule` taints none of the tolerations tolerates.
fn count_intolerable_prefer_no_schedule<'a>(
    taints: &[Taint],
    tolerations: impl Iterator<Item = &'a Toleration> + Clone,
) -> i64 {
    let count = taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
        .filter(|t| !tolerations.clone().any(|tol| tol.tolerates(t)))
        .count();
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl PreScore for TaintToleration {
    fn pre_score(
        &self,
        state: &CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        _all_nodes: &[&NodeInfo],
    ) -> Status {
        // Stored as indices into the pod's tolerations: Score sees the same pod.
        state.write(PRE_SCORE_STATE_KEY, &prefer_no_schedule_tolerations(pod));
        Status::success()
    }
}

impl Score for TaintToleration {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        // Without PreScore's state the same list is computed here; the score is equal.
        let indices = state
            .read::<Vec<u32>>(PRE_SCORE_STATE_KEY)
            .unwrap_or_else(|| prefer_no_schedule_tolerations(pod));
        let tolerations = indices
            .iter()
            .filter_map(|&i| pod.tolerations.get(i as usize));
        Ok(count_intolerable_prefer_no_schedule(
            &node.node.taints,
            tolerations,
        ))
    }
}

impl NormalizeScore for TaintToleration {
    fn normalize_score(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        // Fewer intolerable taints is better, hence reversed.
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

berth_sdk::export_plugin!(TaintToleration: filter, pre_score, score, normalize_score);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Code, MemoryState, Node, TolerationOperator};

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }

    fn tol(
        key: &str,
        operator: TolerationOperator,
        value: &str,
        effect: Option<TaintEffect>,
    ) -> Toleration {
        Toleration {
            key: key.into(),
            operator,
            value: value.into(),
            effect,
            toleration_seconds: None,
        }
    }

    fn pod(tolerations: Vec<Toleration>) -> Pod {
        Pod {
            name: "pod1".into(),
            tolerations,
            ..Pod::default()
        }
    }

    fn node(name: &str, taints: Vec<Taint>) -> NodeInfo {
        NodeInfo::new(Node {
            name: name.into(),
            taints,
            ..Node::default()
        })
    }

    fn filter(pod: &Pod, taints: Vec<Taint>) -> Status {
        let store = MemoryState::default();
        TaintToleration.filter(&CycleState::new(&store), pod, &node("nodeA", taints))
    }

    /// PreScore, Score on each node, NormalizeScore: what the host runs.
    fn scores(pod: &Pod, nodes: &[NodeInfo]) -> Vec<i64> {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        assert!(
            TaintToleration
                .pre_score(&state, pod, &refs, &refs)
                .is_success()
        );
        let mut scores: Vec<i64> = nodes
            .iter()
            .map(|n| TaintToleration.score(&state, pod, n).unwrap())
            .collect();
        let status = TaintToleration.normalize_score(&state, pod, &mut scores);
        assert!(status.is_success());
        scores
    }

    use TaintEffect::{NoExecute, NoSchedule, PreferNoSchedule};
    use TolerationOperator::{Equal, Exists};

    // The cases of upstream's TestTaintTolerationFilter.
    #[test]
    fn no_tolerations_cannot_land_on_a_tainted_node() {
        let status = filter(&pod(vec![]), vec![taint("dedicated", "user1", NoSchedule)]);
        assert_eq!(status.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(
            status.reasons,
            ["node(s) had untolerated taint {dedicated: user1}"]
        );
    }

    #[test]
    fn matching_toleration_passes() {
        let p = pod(vec![tol("dedicated", Equal, "user1", Some(NoSchedule))]);
        let status = filter(&p, vec![taint("dedicated", "user1", NoSchedule)]);
        assert_eq!(status, Status::success());
    }

    #[test]
    fn toleration_for_another_value_fails() {
        let p = pod(vec![tol("dedicated", Equal, "user2", Some(NoSchedule))]);
        let status = filter(&p, vec![taint("dedicated", "user1", NoSchedule)]);
        assert_eq!(
            status,
            Status::unresolvable("node(s) had untolerated taint {dedicated: user1}")
        );
    }

    #[test]
    fn exists_toleration_passes() {
        let p = pod(vec![tol("foo", Exists, "", Some(NoSchedule))]);
        let status = filter(&p, vec![taint("foo", "bar", NoSchedule)]);
        assert_eq!(status, Status::success());
    }

    #[test]
    fn all_of_several_taints_tolerated() {
        let p = pod(vec![
            tol("dedicated", Equal, "user2", Some(NoSchedule)),
            tol("foo", Exists, "", Some(NoSchedule)),
        ]);
        let taints = vec![
            taint("dedicated", "user2", NoSchedule),
            taint("foo", "bar", NoSchedule),
        ];
        assert_eq!(filter(&p, taints), Status::success());
    }

    #[test]
    fn effect_mismatch_fails() {
        let p = pod(vec![tol("foo", Equal, "bar", Some(PreferNoSchedule))]);
        let status = filter(&p, vec![taint("foo", "bar", NoSchedule)]);
        assert_eq!(
            status,
            Status::unresolvable("node(s) had untolerated taint {foo: bar}")
        );
    }

    #[test]
    fn empty_toleration_effect_tolerates_no_schedule() {
        let p = pod(vec![tol("foo", Equal, "bar", None)]);
        assert_eq!(
            filter(&p, vec![taint("foo", "bar", NoSchedule)]),
            Status::success()
        );
    }

    #[test]
    fn prefer_no_schedule_taints_never_filter() {
        let p = pod(vec![tol("dedicated", Equal, "user2", Some(NoSchedule))]);
        let taints = vec![taint("dedicated", "user1", PreferNoSchedule)];
        assert_eq!(filter(&p, taints), Status::success());
        let taints = vec![taint("dedicated", "user1", PreferNoSchedule)];
        assert_eq!(filter(&pod(vec![]), taints), Status::success());
    }

    #[test]
    fn no_execute_taints_filter_and_the_first_untolerated_is_reported() {
        let taints = vec![
            taint("a", "1", PreferNoSchedule),
            taint("b", "2", NoExecute),
            taint("c", "3", NoSchedule),
        ];
        assert_eq!(
            filter(&pod(vec![]), taints),
            Status::unresolvable("node(s) had untolerated taint {b: 2}")
        );
    }

    // The cases of upstream's TestTaintTolerationScore.
    #[test]
    fn tolerated_taints_score_higher_than_intolerable_ones() {
        let p = pod(vec![tol("foo", Equal, "bar", Some(PreferNoSchedule))]);
        let nodes = [
            node("nodeA", vec![taint("foo", "bar", PreferNoSchedule)]),
            node("nodeB", vec![taint("foo", "blah", PreferNoSchedule)]),
        ];
        assert_eq!(scores(&p, &nodes), [MAX_NODE_SCORE, 0]);
    }

    #[test]
    fn the_count_of_tolerated_taints_does_not_matter() {
        let p = pod(vec![
            tol("cpu-type", Equal, "arm64", Some(PreferNoSchedule)),
            tol("disk-type", Equal, "ssd", Some(PreferNoSchedule)),
        ]);
        let nodes = [
            node("nodeA", vec![]),
            node("nodeB", vec![taint("cpu-type", "arm64", PreferNoSchedule)]),
            node(
                "nodeC",
                vec![
                    taint("cpu-type", "arm64", PreferNoSchedule),
                    taint("disk-type", "ssd", PreferNoSchedule),
                ],
            ),
        ];
        assert_eq!(scores(&p, &nodes), [100, 100, 100]);
    }

    #[test]
    fn more_intolerable_taints_score_lower() {
        let p = pod(vec![tol("foo", Equal, "bar", Some(PreferNoSchedule))]);
        let nodes = [
            node("nodeA", vec![]),
            node("nodeB", vec![taint("cpu-type", "arm64", PreferNoSchedule)]),
            node(
                "nodeC",
                vec![
                    taint("cpu-type", "arm64", PreferNoSchedule),
                    taint("disk-type", "ssd", PreferNoSchedule),
                ],
            ),
        ];
        assert_eq!(scores(&p, &nodes), [100, 50, 0]);
    }

    #[test]
    fn only_prefer_no_schedule_taints_and_tolerations_count() {
        let p = pod(vec![
            tol("cpu-type", Equal, "arm64", Some(NoSchedule)),
            tol("disk-type", Equal, "ssd", Some(NoSchedule)),
        ]);
        let nodes = [
            node("nodeA", vec![]),
            node("nodeB", vec![taint("cpu-type", "arm64", NoSchedule)]),
            node(
                "nodeC",
                vec![
                    taint("cpu-type", "arm64", PreferNoSchedule),
                    taint("disk-type", "ssd", PreferNoSchedule),
                ],
            ),
        ];
        assert_eq!(scores(&p, &nodes), [100, 100, 0]);
    }

    #[test]
    fn no_taints_and_no_tolerations_prefers_the_untainted_node() {
        let nodes = [
            node("nodeA", vec![]),
            node("nodeB", vec![taint("cpu-type", "arm64", PreferNoSchedule)]),
        ];
        assert_eq!(scores(&pod(vec![]), &nodes), [100, 0]);
    }

    #[test]
    fn an_effectless_toleration_counts_for_scoring() {
        let p = pod(vec![tol("cpu-type", Exists, "", None)]);
        let nodes = [
            node("nodeA", vec![taint("cpu-type", "arm64", PreferNoSchedule)]),
            node("nodeB", vec![taint("gpu", "yes", PreferNoSchedule)]),
        ];
        assert_eq!(scores(&p, &nodes), [100, 0]);
    }

    #[test]
    fn no_intolerable_taints_anywhere_gives_every_node_the_maximum() {
        let nodes = [node("nodeA", vec![]), node("nodeB", vec![])];
        assert_eq!(scores(&pod(vec![]), &nodes), [100, 100]);
    }

    #[test]
    fn score_without_pre_score_state_matches() {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let p = pod(vec![tol("foo", Equal, "bar", Some(NoSchedule))]);
        let n = node(
            "nodeA",
            vec![
                taint("foo", "bar", PreferNoSchedule),
                taint("x", "y", PreferNoSchedule),
            ],
        );
        assert_eq!(TaintToleration.score(&state, &p, &n), Ok(2));
    }
}
