//! NodeName: a pod whose `spec.nodeName` is set fits only the node of that name, as
//! upstream's `nodename` plugin.

use berth_sdk::{
    ActionType, ClusterEvent, CycleState, EnqueueExtensions, EventRegistration, EventResource,
    Filter, NodeInfo, Object, Plugin, Pod, QueueingHint, Sign, SignFragment, Status, sign,
};

/// The reason upstream gives.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// The plugin.
pub struct NodeName;

impl Plugin for NodeName {
    const NAME: &'static str = "NodeName";
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(NodeName)
    }

    /// Node Add, with the hint: only a node of the requested name can help, and a
    /// node's name never changes, so updates cannot (upstream registers updates only
    /// when queueing hints are off, for its preCheck).
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![EventRegistration::with_hint(
            EventResource::Node,
            ActionType::ADD,
        )])
    }
}

/// Whether the pod may run on the node: it names no node, or names this one.
pub fn fits(pod: &Pod, node: &NodeInfo) -> bool {
    fits_name(pod, node.name())
}

fn fits_name(pod: &Pod, node_name: &str) -> bool {
    pod.node_name.is_empty() || pod.node_name == node_name
}

impl NodeName {
    /// Upstream's `isSchedulableAfterNodeAdded`: Queue when the added node is the
    /// one the pod asks for.
    pub fn is_schedulable_after_node_added(
        &self,
        pod: &Pod,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let node = match new {
            Some(Object::Node(n)) => n,
            Some(other) => return Err(format!("expected a node, got {}", other.describe())),
            None => return Err("the event has no new node".into()),
        };
        Ok(if fits_name(pod, &node.name) {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        })
    }
}

impl EnqueueExtensions for NodeName {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        _old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::Node => self.is_schedulable_after_node_added(pod, new),
            // Not registered: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

impl Filter for NodeName {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if fits(pod, node) {
            Status::success()
        } else {
            // Preemption cannot change a node's name.
            Status::unresolvable(ERR_REASON)
        }
    }
}

impl Sign for NodeName {
    /// Filter reads only `spec.nodeName`.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::node_name(pod)])
    }
}

berth_sdk::export_plugin!(NodeName: queueing_hint, filter, sign_pod);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{MemoryState, Node};

    fn run(pod_node: &str, node: &str) -> Status {
        let store = MemoryState::default();
        let pod = Pod {
            node_name: pod_node.into(),
            ..Pod::default()
        };
        let node = NodeInfo::new(Node {
            name: node.into(),
            ..Node::default()
        });
        NodeName.filter(&CycleState::new(&store), &pod, &node)
    }

    #[test]
    fn signs_the_node_name_alone() {
        let sign = |p: &Pod| NodeName.sign_pod(p).unwrap();
        let on = |name: &str| Pod {
            node_name: name.into(),
            ..Pod::default()
        };
        assert_ne!(sign(&on("a")), sign(&on("b")));
        assert_ne!(sign(&on("a")), sign(&on("")));
        let elsewhere = Pod {
            name: "other".into(),
            namespace: "ns".into(),
            labels: [("app".to_owned(), "x".to_owned())].into(),
            ..on("a")
        };
        assert_eq!(sign(&on("a")), sign(&elsewhere));
    }

    // The cases of upstream's TestNodeName.
    #[test]
    fn no_host_specified() {
        assert_eq!(run("", ""), Status::success());
        assert_eq!(run("", "foo"), Status::success());
    }

    #[test]
    fn host_matches() {
        assert_eq!(run("foo", "foo"), Status::success());
    }

    #[test]
    fn host_does_not_match() {
        assert_eq!(run("bar", "foo"), Status::unresolvable(ERR_REASON));
        assert_eq!(
            run("bar", "foo").message(),
            "node(s) didn't match the requested node name"
        );
    }

    fn added(pod_node: &str, node: &str) -> Result<QueueingHint, String> {
        let pod = Pod {
            node_name: pod_node.into(),
            ..Pod::default()
        };
        let node = Object::Node(Node {
            name: node.into(),
            ..Node::default()
        });
        let event = ClusterEvent::new(EventResource::Node, ActionType::ADD);
        NodeName.queueing_hint(&event, &pod, None, Some(&node))
    }

    #[test]
    fn queue_when_the_requested_node_is_added() {
        assert_eq!(added("foo", "foo"), Ok(QueueingHint::Queue));
        assert_eq!(added("", "foo"), Ok(QueueingHint::Queue));
    }

    #[test]
    fn skip_when_another_node_is_added() {
        assert_eq!(added("bar", "foo"), Ok(QueueingHint::QueueSkip));
    }

    #[test]
    fn wrong_object_is_an_error() {
        let not_a_node = Object::Pod(Pod::default());
        assert!(
            NodeName
                .is_schedulable_after_node_added(&Pod::default(), Some(&not_a_node))
                .is_err()
        );
        assert!(
            NodeName
                .is_schedulable_after_node_added(&Pod::default(), None)
                .is_err()
        );
    }

    #[test]
    fn registers_node_add_only() {
        let events = NodeName::events().unwrap();
        assert_eq!(events.len(), 1);
        assert!(events[0].has_hint);
        let covers = |a| {
            events[0]
                .event
                .covers(&ClusterEvent::new(EventResource::Node, a))
        };
        assert!(covers(ActionType::ADD));
        assert!(!covers(ActionType::UPDATE));
        assert!(!covers(ActionType::DELETE));
    }
}
