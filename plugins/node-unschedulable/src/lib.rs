//! NodeUnschedulable: filters out nodes with `spec.unschedulable` set, unless the pod
//! tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint, as upstream.

use berth_sdk::events::node_change;
use berth_sdk::{
    ActionType, ClusterEvent, CycleState, EnqueueExtensions, EventRegistration, EventResource,
    Filter, NodeInfo, Object, Plugin, Pod, QueueingHint, Sign, SignFragment, Status, Taint,
    TaintEffect, sign, types::tolerations_tolerate_taint,
};

/// The taint key that stands for `spec.unschedulable`.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// The reason upstream gives.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// The plugin.
pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    const NAME: &'static str = "NodeUnschedulable";
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(NodeUnschedulable)
    }

    /// Node Add and UpdateNodeTaint (Berth, as upstream, reports a change of
    /// `spec.unschedulable` as a taint update), and the pod's own toleration updates,
    /// all with a hint. Upstream adds UpdateNodeLabel only when queueing hints are
    /// off, for its preCheck.
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

/// Whether the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule`.
fn tolerates_unschedulable(pod: &Pod) -> bool {
    let taint = Taint {
        key: TAINT_NODE_UNSCHEDULABLE.to_owned(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    };
    tolerations_tolerate_taint(&pod.tolerations, &taint)
}

impl Filter for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if !node.node.unschedulable || tolerates_unschedulable(pod) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
        }
    }
}

impl NodeUnschedulable {
    /// Upstream's `isSchedulableAfterNodeChange`: Queue when a schedulable node is
    /// added, or a node is uncordoned.
    pub fn is_schedulable_after_node_change(
        &self,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = node_change(old, new)?;
        let helps = !modified.unschedulable && original.is_none_or(|o| o.unschedulable);
        Ok(if helps {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        })
    }

    /// Upstream's `isSchedulableAfterPodTolerationChange`: Queue when the pod itself
    /// now tolerates the unschedulable taint. (Tolerations can only be added, and a
    /// pod that already tolerated it was not rejected by this plugin.)
    pub fn is_schedulable_after_pod_toleration_change(
        &self,
        pod: &Pod,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let modified = match new {
            Some(Object::Pod(p)) => p,
            Some(other) => return Err(format!("expected a pod, got {}", other.describe())),
            None => return Err("the event has no new pod".into()),
        };
        Ok(
            if modified.uid == pod.uid && tolerates_unschedulable(modified) {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            },
        )
    }
}

impl EnqueueExtensions for NodeUnschedulable {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::Node => self.is_schedulable_after_node_change(old, new),
            EventResource::UnscheduledPod => {
                self.is_schedulable_after_pod_toleration_change(pod, new)
            }
            // Not registered: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

impl Sign for NodeUnschedulable {
    /// Filter reads only the pod's tolerations (whether one tolerates the
    /// unschedulable taint).
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::tolerations(pod)])
    }
}

berth_sdk::export_plugin!(NodeUnschedulable: queueing_hint, filter, sign_pod);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Code, MemoryState, Node, Toleration, TolerationOperator};

    fn run(unschedulable: bool, tolerations: Vec<Toleration>) -> Code {
        let store = MemoryState::default();
        let pod = Pod {
            tolerations,
            ..Pod::default()
        };
        let node = NodeInfo::new(Node {
            unschedulable,
            ..Node::default()
        });
        NodeUnschedulable
            .filter(&CycleState::new(&store), &pod, &node)
            .code
    }

    fn tol(key: &str, effect: Option<TaintEffect>) -> Toleration {
        Toleration {
            key: key.into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect,
            toleration_seconds: None,
        }
    }

    #[test]
    fn signs_the_tolerations_alone() {
        let sign = |p: &Pod| NodeUnschedulable.sign_pod(p).unwrap();
        let tolerating = Pod {
            tolerations: vec![tol(TAINT_NODE_UNSCHEDULABLE, Some(TaintEffect::NoSchedule))],
            ..Pod::default()
        };
        assert_ne!(sign(&tolerating), sign(&Pod::default()));
        let elsewhere = Pod {
            name: "other".into(),
            labels: [("app".to_owned(), "x".to_owned())].into(),
            node_name: "n1".into(),
            ..tolerating.clone()
        };
        assert_eq!(sign(&tolerating), sign(&elsewhere));
    }

    #[test]
    fn schedulable_node_passes() {
        assert_eq!(run(false, vec![]), Code::Success);
    }

    #[test]
    fn cordoned_node_is_unresolvable() {
        assert_eq!(run(true, vec![]), Code::UnschedulableAndUnresolvable);
    }

    #[test]
    fn toleration_of_the_unschedulable_taint_passes() {
        let t = tol(TAINT_NODE_UNSCHEDULABLE, Some(TaintEffect::NoSchedule));
        assert_eq!(run(true, vec![t]), Code::Success);
        assert_eq!(run(true, vec![tol("", None)]), Code::Success);
        let wrong = tol(TAINT_NODE_UNSCHEDULABLE, Some(TaintEffect::NoExecute));
        assert_eq!(run(true, vec![wrong]), Code::UnschedulableAndUnresolvable);
    }

    // Upstream's TestIsSchedulableAfterNodeChange.
    fn node(unschedulable: bool) -> Object {
        Object::Node(Node {
            unschedulable,
            ..Node::default()
        })
    }

    fn node_hint(old: Option<&Object>, new: &Object) -> Result<QueueingHint, String> {
        let actions = if old.is_some() {
            ActionType::UPDATE_NODE_TAINT
        } else {
            ActionType::ADD
        };
        let event = ClusterEvent::new(EventResource::Node, actions);
        NodeUnschedulable.queueing_hint(&event, &Pod::default(), old, Some(new))
    }

    #[test]
    fn backoff_wrong_objects() {
        let not_a_node = Object::Pod(Pod::default());
        assert!(node_hint(None, &not_a_node).is_err());
        assert!(node_hint(Some(&not_a_node), &node(true)).is_err());
    }

    #[test]
    fn skip_queue_on_unschedulable_node_added() {
        assert_eq!(node_hint(None, &node(true)), Ok(QueueingHint::QueueSkip));
    }

    #[test]
    fn queue_on_schedulable_node_added() {
        assert_eq!(node_hint(None, &node(false)), Ok(QueueingHint::Queue));
    }

    #[test]
    fn skip_unrelated_change() {
        let mut tainted = Node {
            unschedulable: true,
            ..Node::default()
        };
        tainted.taints.push(Taint {
            key: "node.kubernetes.io/not-ready".into(),
            value: String::new(),
            effect: TaintEffect::NoExecute,
        });
        assert_eq!(
            node_hint(Some(&node(true)), &Object::Node(tainted)),
            Ok(QueueingHint::QueueSkip)
        );
    }

    #[test]
    fn queue_on_unschedulable_field_change() {
        assert_eq!(
            node_hint(Some(&node(true)), &node(false)),
            Ok(QueueingHint::Queue)
        );
        // Cordoning never helps.
        assert_eq!(
            node_hint(Some(&node(false)), &node(true)),
            Ok(QueueingHint::QueueSkip)
        );
    }

    // Upstream's isSchedulableAfterPodTolerationChange.
    fn pod_hint(pending: &Pod, new: &Pod) -> Result<QueueingHint, String> {
        let event = ClusterEvent::new(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_TOLERATION,
        );
        let (old, new) = (Object::Pod(pending.clone()), Object::Pod(new.clone()));
        NodeUnschedulable.queueing_hint(&event, pending, Some(&old), Some(&new))
    }

    #[test]
    fn queue_when_the_pod_gets_the_toleration() {
        let pending = Pod {
            uid: "p".into(),
            ..Pod::default()
        };
        let mut updated = pending.clone();
        updated.tolerations = vec![tol(TAINT_NODE_UNSCHEDULABLE, Some(TaintEffect::NoSchedule))];
        assert_eq!(pod_hint(&pending, &updated), Ok(QueueingHint::Queue));
    }

    #[test]
    fn skip_an_unrelated_toleration_or_another_pod() {
        let pending = Pod {
            uid: "p".into(),
            ..Pod::default()
        };
        let mut unrelated = pending.clone();
        unrelated.tolerations = vec![tol("foo", Some(TaintEffect::NoSchedule))];
        assert_eq!(pod_hint(&pending, &unrelated), Ok(QueueingHint::QueueSkip));
        let mut other = pending.clone();
        other.uid = "other".into();
        other.tolerations = vec![tol("", None)];
        assert_eq!(pod_hint(&pending, &other), Ok(QueueingHint::QueueSkip));
    }

    #[test]
    fn registrations() {
        let events = NodeUnschedulable::events().unwrap();
        assert!(events.iter().all(|r| r.has_hint));
        let covered = |resource, actions| {
            berth_sdk::events::is_registered(&events, &ClusterEvent::new(resource, actions))
        };
        assert!(covered(EventResource::Node, ActionType::ADD));
        assert!(covered(EventResource::Node, ActionType::UPDATE_NODE_TAINT));
        assert!(!covered(EventResource::Node, ActionType::UPDATE_NODE_LABEL));
        assert!(!covered(EventResource::Node, ActionType::DELETE));
        assert!(covered(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_TOLERATION
        ));
        assert!(!covered(EventResource::AssignedPod, ActionType::ALL));
    }
}
