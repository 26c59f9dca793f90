//! GangScheduling: the members of a PodGroup with the `gang` policy are scheduled
//! all together or not at all, as kube-scheduler's plugin of the same name
//! (workload-aware scheduling, 1.35 to 1.37):
//!
//! - PreEnqueue holds a member back while its PodGroup does not exist, or while
//!   fewer than `minCount` members exist (bound ones counted);
//! - PlacementFeasible decides, member after member of the pod group's cycle,
//!   whether `minCount` can still be met (unschedulable), is not met yet (wait) or is
//!   met (success);
//! - a new member (pending or bound) of the same group requeues the held ones.
//!   PodGroup events (the group created, its `minCount` lowered) reach the queue from
//!   the host, which moves the group's members itself: the WIT's events have no
//!   PodGroup resource on this track.
//!
//! The pod group cycle places the members together and binds them only when the
//! group is feasible, so no member waits at Permit (upstream's plugin dropped its
//! Permit with the cycle). A pod without `spec.schedulingGroup` is none of its
//! business; a group with the `basic` policy needs one member placed.

use berth_sdk::{
    ActionType, ClusterEvent, Code, CycleState, EnqueueExtensions, EventRegistration,
    EventResource, Object, PlacementFeasible, PlacementProgress, Plugin, Pod, PodGroup, PreEnqueue,
    QueueingHint, Status, get_pod_group,
};

/// The plugin.
pub struct GangScheduling;

impl Plugin for GangScheduling {
    const NAME: &'static str = "GangScheduling";

    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(GangScheduling)
    }

    fn events() -> Option<Vec<EventRegistration>> {
        // A new member, pending or bound, may complete a gang (the group a pod names
        // never changes, so updates do not matter).
        Some(vec![
            EventRegistration::with_hint(EventResource::UnscheduledPod, ActionType::ADD),
            EventRegistration::with_hint(EventResource::AssignedPod, ActionType::ADD),
        ])
    }
}

/// Whether two pods name the same pod group.
fn same_group(a: &Pod, b: &Pod) -> bool {
    a.scheduling_group.is_some()
        && a.namespace == b.namespace
        && a.scheduling_group == b.scheduling_group
}

impl EnqueueExtensions for GangScheduling {
    fn queueing_hint(
        &self,
        _event: &ClusterEvent,
        pod: &Pod,
        _old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        Ok(match new {
            Some(Object::Pod(added)) if same_group(pod, added) => QueueingHint::Queue,
            _ => QueueingHint::QueueSkip,
        })
    }
}

impl PreEnqueue for GangScheduling {
    fn pre_enqueue(&self, pod: &Pod) -> Status {
        let Some(group) = &pod.scheduling_group else {
            return Status::success();
        };
        let Some(state) = get_pod_group(&pod.namespace, group) else {
            return Status::unresolvable(format!(
                "waiting for pods's pod group {group:?} to appear in scheduling queue"
            ));
        };
        let Some(min_count) = state.min_count else {
            return Status::success();
        };
        if state.all_pods < min_count {
            return Status::unresolvable(
                "waiting for minCount pods from a gang to appear in scheduling queue",
            );
        }
        Status::success()
    }
}

impl PlacementFeasible for GangScheduling {
    fn placement_feasible(
        &self,
        _state: &CycleState,
        group: &PodGroup,
        progress: &PlacementProgress,
    ) -> Status {
        // A basic group is placed once one member is.
        let min_count = group.min_count.unwrap_or(1);
        let PlacementProgress {
            scheduled,
            remaining,
        } = *progress;
        if u64::from(remaining) + u64::from(scheduled) < u64::from(min_count) {
            return Status::unschedulable(format!(
                "minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
            ));
        }
        if scheduled < min_count {
            return Status::new(
                Code::Wait,
                vec![format!(
                    "minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"
                )],
            );
        }
        Status::success()
    }
}

berth_sdk::export_plugin!(GangScheduling: pre_enqueue, queueing_hint, placement_feasible);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{HostApi, LogLevel, MemoryState, PodGroupState};
    use std::sync::{Arc, Mutex};

    fn member(uid: &str, group: Option<&str>) -> Pod {
        Pod {
            uid: uid.into(),
            name: uid.into(),
            namespace: "default".into(),
            scheduling_group: group.map(str::to_owned),
            ..Pod::default()
        }
    }

    fn gang(min_count: Option<u32>) -> PodGroup {
        PodGroup {
            namespace: "default".into(),
            name: "g".into(),
            min_count,
            ..PodGroup::default()
        }
    }

    fn feasible(min: Option<u32>, scheduled: u32, remaining: u32) -> Status {
        let state = MemoryState::default();
        GangScheduling.placement_feasible(
            &CycleState::new(&state),
            &gang(min),
            &PlacementProgress {
                scheduled,
                remaining,
            },
        )
    }

    /// Upstream's PlacementFeasible table: the verdict on minCount from what is
    /// scheduled and what is left to try.
    #[test]
    fn placement_feasible_follows_min_count() {
        let s = feasible(Some(3), 1, 1);
        assert_eq!(s.code, Code::Unschedulable);
        assert_eq!(
            s.reasons,
            ["minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"]
        );
        let s = feasible(Some(3), 1, 2);
        assert_eq!(s.code, Code::Wait);
        assert_eq!(
            s.reasons,
            ["minCount (3) is not yet satisfied: 1 scheduled, 2 remaining"]
        );
        assert_eq!(feasible(Some(3), 3, 0).code, Code::Success);
        assert_eq!(feasible(Some(3), 4, 2).code, Code::Success);
        assert_eq!(feasible(Some(0), 0, 0).code, Code::Success);
        // A basic group needs one member placed.
        assert_eq!(feasible(None, 0, 0).code, Code::Unschedulable);
        assert_eq!(feasible(None, 0, 2).code, Code::Wait);
        assert_eq!(feasible(None, 1, 1).code, Code::Success);
    }

    #[test]
    fn only_a_new_member_of_the_same_group_requeues() {
        let event = ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD);
        let hint = |pod: &Pod, added: Pod| {
            GangScheduling
                .queueing_hint(&event, pod, None, Some(&Object::Pod(added)))
                .unwrap()
        };
        let held = member("a", Some("g"));
        assert_eq!(hint(&held, member("b", Some("g"))), QueueingHint::Queue);
        assert_eq!(hint(&held, member("b", Some("h"))), QueueingHint::QueueSkip);
        assert_eq!(hint(&held, member("b", None)), QueueingHint::QueueSkip);
        let elsewhere = Pod {
            namespace: "other".into(),
            ..member("b", Some("g"))
        };
        assert_eq!(hint(&held, elsewhere), QueueingHint::QueueSkip);
        // A pod of no group is never held by this plugin.
        assert_eq!(
            hint(&member("a", None), member("b", None)),
            QueueingHint::QueueSkip
        );
    }

    /// A host that answers one pod group.
    #[derive(Default)]
    struct Groups {
        state: Mutex<Option<PodGroupState>>,
    }

    impl HostApi for Groups {
        fn log(&self, _: LogLevel, _: &str) {}
        fn bind_pod(&self, _: &Pod, _: &str) -> Result<(), String> {
            Ok(())
        }
        fn namespace_labels(&self, _: &str) -> Option<berth_sdk::Labels> {
            None
        }
        fn get_pod_group(&self, namespace: &str, name: &str) -> Option<PodGroupState> {
            assert_eq!((namespace, name), ("default", "g"));
            self.state.lock().unwrap().clone()
        }
    }

    /// One test owns the process-wide native host, so that no other test sees it.
    #[test]
    fn pre_enqueue_reads_the_group() {
        let host = Arc::new(Groups::default());
        berth_sdk::set_native_host(host.clone());
        let set = |s: Option<PodGroupState>| *host.state.lock().unwrap() = s;
        let pod = member("a", Some("g"));

        // PreEnqueue: no PodGroup, too few members, enough.
        set(None);
        let s = GangScheduling.pre_enqueue(&pod);
        assert_eq!(s.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(
            s.reasons,
            ["waiting for pods's pod group \"g\" to appear in scheduling queue"]
        );
        set(Some(PodGroupState {
            min_count: Some(3),
            all_pods: 2,
            ..PodGroupState::default()
        }));
        let s = GangScheduling.pre_enqueue(&pod);
        assert_eq!(s.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(
            s.reasons,
            ["waiting for minCount pods from a gang to appear in scheduling queue"]
        );
        set(Some(PodGroupState {
            min_count: Some(3),
            all_pods: 3,
            ..PodGroupState::default()
        }));
        assert!(GangScheduling.pre_enqueue(&pod).is_success());
        set(Some(PodGroupState::default()));
        assert!(
            GangScheduling.pre_enqueue(&pod).is_success(),
            "basic policy"
        );
        assert!(GangScheduling.pre_enqueue(&member("x", None)).is_success());
    }
}
