//! NodeName: a pod whose `spec.nodeName` is set fits only the node of that name, as
//! upstream's `nodename` plugin.

use berth_sdk::{CycleState, Filter, NodeInfo, Plugin, Pod, Status};

/// The reason upstream gives.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// The plugin.
pub struct NodeName;

impl Plugin for NodeName {
    const NAME: &'static str = "NodeName";
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(NodeName)
    }
}

/// Whether the pod may run on the node: it names no node, or names this one.
pub fn fits(pod: &Pod, node: &NodeInfo) -> bool {
    pod.node_name.is_empty() || pod.node_name == node.name()
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

berth_sdk::export_plugin!(NodeName: filter);

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
}
