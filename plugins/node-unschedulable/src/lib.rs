//! NodeUnschedulable: filters out nodes with `spec.unschedulable` set, unless the pod
//! tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint, as upstream.

use berth_sdk::{
    CycleState, Filter, NodeInfo, Plugin, Pod, Status, Taint, TaintEffect,
    types::tolerations_tolerate_taint,
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
}

impl Filter for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if !node.node.unschedulable {
            return Status::success();
        }
        let taint = Taint {
            key: TAINT_NODE_UNSCHEDULABLE.to_owned(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        };
        if tolerations_tolerate_taint(&pod.tolerations, &taint) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
        }
    }
}

berth_sdk::export_plugin!(NodeUnschedulable: filter);

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
}
