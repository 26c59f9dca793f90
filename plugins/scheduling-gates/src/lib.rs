//! SchedulingGates: a pod with `spec.schedulingGates` waits outside the active queue
//! until every gate is removed, as upstream's plugin.

use berth_sdk::{
    ActionType, ClusterEvent, EnqueueExtensions, EventRegistration, EventResource, Object, Plugin,
    Pod, PreEnqueue, QueueingHint, Status,
};

/// The plugin.
pub struct SchedulingGates;

impl Plugin for SchedulingGates {
    const NAME: &'static str = "SchedulingGates";

    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(SchedulingGates)
    }

    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![EventRegistration::with_hint(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
        )])
    }
}

impl PreEnqueue for SchedulingGates {
    fn pre_enqueue(&self, pod: &Pod) -> Status {
        if pod.scheduling_gates.is_empty() {
            return Status::success();
        }
        Status::unresolvable(format!(
            "waiting for scheduling gates: [{}]",
            pod.scheduling_gates.join(" ")
        ))
    }
}

impl EnqueueExtensions for SchedulingGates {
    fn queueing_hint(
        &self,
        _event: &ClusterEvent,
        pod: &Pod,
        _old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        // Only the pod's own update can lift its gates.
        match new {
            Some(Object::Pod(p)) if p.uid == pod.uid && p.scheduling_gates.is_empty() => {
                Ok(QueueingHint::Queue)
            }
            _ => Ok(QueueingHint::QueueSkip),
        }
    }
}

berth_sdk::export_plugin!(SchedulingGates: pre_enqueue, queueing_hint);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::Code;

    fn pod(gates: &[&str]) -> Pod {
        Pod {
            uid: "u".into(),
            scheduling_gates: gates.iter().map(|g| (*g).to_owned()).collect(),
            ..Pod::default()
        }
    }

    #[test]
    fn gated_pods_wait_with_upstreams_message() {
        assert_eq!(SchedulingGates.pre_enqueue(&pod(&[])).code, Code::Success);
        let s = SchedulingGates.pre_enqueue(&pod(&["a", "b"]));
        assert_eq!(s.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(s.reasons, ["waiting for scheduling gates: [a b]"]);
    }

    #[test]
    fn only_removing_every_gate_of_the_pod_requeues_it() {
        let event = ClusterEvent::new(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
        );
        let hint = |new: Pod| {
            SchedulingGates
                .queueing_hint(&event, &pod(&["a"]), None, Some(&Object::Pod(new)))
                .unwrap()
        };
        assert_eq!(hint(pod(&[])), QueueingHint::Queue);
        assert_eq!(hint(pod(&["a"])), QueueingHint::QueueSkip);
        let other = Pod {
            uid: "other".into(),
            ..pod(&[])
        };
        assert_eq!(hint(other), QueueingHint::QueueSkip);
    }
}
