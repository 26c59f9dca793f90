//! TaintToleration: as upstream's `tainttoleration` plugin, filters out nodes with a
//! `NoSchedule` or `NoExecute` taint the pod does not tolerate, and prefers nodes
//! with fewer untolerated `PreferNoSchedule` taints.

use berth_sdk::events::node_change;
use berth_sdk::{
    ActionType, ClusterEvent, CycleState, EnqueueExtensions, EventRegistration, EventResource,
    Filter, MAX_NODE_SCORE, Node, NodeInfo, NormalizeScore, Object, Plugin, Pod, PreScore,
    QueueingHint, Score, Sign, SignFragment, StateKey, Status, Taint, TaintEffect, Toleration,
    helpers::default_normalize_score, sign, types::find_untolerated_taint,
};

/// The CycleState key of what PreScore computes (upstream's key).
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreTaintToleration";
/// [`PRE_SCORE_STATE_KEY`] with its value: the indices of the pod's PreferNoSchedule
/// tolerations.
static PRE_SCORE_STATE: StateKey<Vec<u32>> = StateKey::new(PRE_SCORE_STATE_KEY);

/// The plugin.
pub struct TaintToleration;

impl Plugin for TaintToleration {
    const NAME: &'static str = "TaintToleration";
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(TaintToleration)
    }

    /// Node Add and UpdateNodeTaint, and the pod's own toleration updates, with
    /// hints. Upstream adds UpdateNodeLabel only when queueing hints are off, for its
    /// preCheck.
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![
            EventRegistration::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_TAINT,
            ),
            EventRegistration::with_hint(
                EventResource::UnscheduledPod,
                ActionType::UPDATE_POD_TOLERATION,
            ),
        ])
    }
}

/// Whether a taint keeps pods that do not tolerate it off the node (what Filter
/// checks; `PreferNoSchedule` only lowers the score).
fn is_hard(t: &Taint) -> bool {
    matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
}

/// Whether the node has a hard taint the pod does not tolerate.
fn untolerated(node: &Node, pod: &Pod) -> bool {
    find_untolerated_taint(&node.taints, &pod.tolerations, is_hard).is_some()
}

impl TaintToleration {
    /// Upstream's `isSchedulableAfterNodeChange`: Queue when the node (added, or
    /// updated from one with an untolerated taint) has no taint the pod does not
    /// tolerate.
    pub fn is_schedulable_after_node_change(
        &self,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = node_change(old, new)?;
        let was_untolerated = original.is_none_or(|n| untolerated(n, pod));
        Ok(if was_untolerated && !untolerated(modified, pod) {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        })
    }

    /// Upstream's `isSchedulableAfterTargetPodTolerationChange`: the pod's own
    /// tolerations changed (they can only be added), which may let it onto a node.
    pub fn is_schedulable_after_pod_toleration_change(
        &self,
        pod: &Pod,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match new {
            Some(Object::Pod(p)) if p.uid == pod.uid => Ok(QueueingHint::Queue),
            Some(Object::Pod(_)) => Ok(QueueingHint::QueueSkip),
            Some(other) => Err(format!("expected a pod, got {}", other.describe())),
            None => Err("the event has no new pod".into()),
        }
    }
}

impl EnqueueExtensions for TaintToleration {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::Node => self.is_schedulable_after_node_change(pod, old, new),
            EventResource::UnscheduledPod => {
                self.is_schedulable_after_pod_toleration_change(pod, new)
            }
            // Not registered: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

/// The reason upstream (1.37) gives for an untolerated taint: the taint itself is
/// not named in a status, which events and pod conditions carry.
pub const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

impl Filter for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        // PreferNoSchedule taints only lower the score.
        match find_untolerated_taint(&node.node.taints, &pod.tolerations, is_hard) {
            None => Status::success(),
            // Preemption cannot remove a taint.
            Some(_) => Status::unresolvable(ERR_REASON_UNTOLERATED),
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
        state.set(&PRE_SCORE_STATE, &prefer_no_schedule_tolerations(pod));
        Status::success()
    }
}

impl Score for TaintToleration {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        // Without PreScore's state the same list is computed here; the score is equal.
        let indices = state
            .value(&PRE_SCORE_STATE)
            .unwrap_or_else(|| std::rc::Rc::new(prefer_no_schedule_tolerations(pod)));
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

impl Sign for TaintToleration {
    /// Filter, PreScore and Score read only the pod's tolerations.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::tolerations(pod)])
    }
}

berth_sdk::export_plugin!(
    TaintToleration: queueing_hint,
    filter,
    pre_score,
    score,
    normalize_score,
    sign_pod
);

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

    #[test]
    fn signs_the_tolerations_alone() {
        let sign = |p: &Pod| TaintToleration.sign_pod(p).unwrap();
        let a = tol("dedicated", TolerationOperator::Equal, "gpu", None);
        let b = tol(
            "spot",
            TolerationOperator::Exists,
            "",
            Some(TaintEffect::PreferNoSchedule),
        );
        let both = pod(vec![a.clone(), b.clone()]);
        assert_ne!(sign(&both), sign(&pod(vec![a.clone()])));
        let mut other_value = a.clone();
        other_value.value = "cpu".into();
        assert_ne!(sign(&both), sign(&pod(vec![other_value, b.clone()])));
        // The order of the tolerations, and what else the pod says, do not count.
        let elsewhere = Pod {
            name: "pod2".into(),
            labels: [("app".to_owned(), "x".to_owned())].into(),
            ..pod(vec![b, a])
        };
        assert_eq!(sign(&both), sign(&elsewhere));
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
        assert_eq!(status.reasons, ["node(s) had untolerated taint(s)"]);
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
            Status::unresolvable("node(s) had untolerated taint(s)")
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
            Status::unresolvable("node(s) had untolerated taint(s)")
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
            Status::unresolvable("node(s) had untolerated taint(s)")
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

    // Upstream's TestIsSchedulableAfterNodeChange.
    fn tainted(taints: Vec<Taint>) -> Object {
        Object::Node(node("nodeA", taints).node)
    }

    fn node_hint(p: &Pod, old: Option<&Object>, new: &Object) -> Result<QueueingHint, String> {
        let actions = if old.is_some() {
            ActionType::UPDATE_NODE_TAINT
        } else {
            ActionType::ADD
        };
        let event = ClusterEvent::new(EventResource::Node, actions);
        TaintToleration.queueing_hint(&event, p, old, Some(new))
    }

    fn user2() -> Pod {
        pod(vec![tol("dedicated", Equal, "user2", Some(NoSchedule))])
    }

    #[test]
    fn backoff_wrong_objects() {
        let not_a_node = Object::Pod(Pod::default());
        assert!(node_hint(&user2(), None, &not_a_node).is_err());
        let new = tainted(vec![taint("dedicated", "user1", NoSchedule)]);
        assert!(node_hint(&user2(), Some(&not_a_node), &new).is_err());
    }

    #[test]
    fn skip_queue_on_untolerated_taint_node_added() {
        let new = tainted(vec![taint("dedicated", "user1", NoSchedule)]);
        assert_eq!(node_hint(&user2(), None, &new), Ok(QueueingHint::QueueSkip));
    }

    #[test]
    fn queue_on_tolerated_taint_node_added() {
        let new = tainted(vec![taint("dedicated", "user2", NoSchedule)]);
        assert_eq!(node_hint(&user2(), None, &new), Ok(QueueingHint::Queue));
    }

    #[test]
    fn skip_unrelated_change() {
        let old = tainted(vec![taint("dedicated", "user1", NoSchedule)]);
        let new = tainted(vec![
            taint("dedicated", "user1", NoSchedule),
            taint("dedicated", "user3", NoSchedule),
        ]);
        assert_eq!(
            node_hint(&user2(), Some(&old), &new),
            Ok(QueueingHint::QueueSkip)
        );
    }

    #[test]
    fn queue_on_taint_change() {
        let old = tainted(vec![taint("dedicated", "user1", NoSchedule)]);
        let new = tainted(vec![taint("dedicated", "user2", NoSchedule)]);
        assert_eq!(
            node_hint(&user2(), Some(&old), &new),
            Ok(QueueingHint::Queue)
        );
    }

    // Berth's own node cases.
    #[test]
    fn prefer_no_schedule_taints_do_not_count() {
        let old = tainted(vec![taint("dedicated", "user1", NoSchedule)]);
        let new = tainted(vec![taint("dedicated", "user1", PreferNoSchedule)]);
        assert_eq!(
            node_hint(&user2(), Some(&old), &new),
            Ok(QueueingHint::Queue)
        );
        // Already tolerated before: nothing new.
        let tolerated = tainted(vec![taint("dedicated", "user2", NoSchedule)]);
        assert_eq!(
            node_hint(&user2(), Some(&tolerated), &new),
            Ok(QueueingHint::QueueSkip)
        );
    }

    // Upstream's Test_isSchedulableAfterTargetPodTolerationChange.
    #[test]
    fn queue_on_toleration_added() {
        let pending = Pod {
            uid: "pod-1".into(),
            ..pod(vec![])
        };
        let updated = Pod {
            tolerations: vec![tol("foo", Exists, "", Some(NoSchedule))],
            ..pending.clone()
        };
        let event = ClusterEvent::new(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_TOLERATION,
        );
        let (old, new) = (Object::Pod(pending.clone()), Object::Pod(updated));
        assert_eq!(
            TaintToleration.queueing_hint(&event, &pending, Some(&old), Some(&new)),
            Ok(QueueingHint::Queue)
        );
        let other = Object::Pod(Pod {
            uid: "pod-2".into(),
            ..pending.clone()
        });
        assert_eq!(
            TaintToleration.queueing_hint(&event, &pending, Some(&old), Some(&other)),
            Ok(QueueingHint::QueueSkip)
        );
    }

    #[test]
    fn registrations() {
        let events = TaintToleration::events().unwrap();
        assert!(events.iter().all(|r| r.has_hint));
        let covered = |resource, actions| {
            berth_sdk::events::is_registered(&events, &ClusterEvent::new(resource, actions))
        };
        assert!(covered(EventResource::Node, ActionType::ADD));
        assert!(covered(EventResource::Node, ActionType::UPDATE_NODE_TAINT));
        assert!(!covered(EventResource::Node, ActionType::UPDATE_NODE_LABEL));
        assert!(covered(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_TOLERATION
        ));
        assert!(!covered(EventResource::AssignedPod, ActionType::ALL));
    }
}
