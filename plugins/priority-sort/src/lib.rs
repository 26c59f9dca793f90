//! PrioritySort: orders the scheduling queue by pod priority, highest first, as
//! upstream's `queuesort` plugin. Pods of equal priority keep their enqueue order,
//! which the host applies to equal keys. A pod group is sorted by the PodGroup's
//! priority: the host asks the key of the pod that stands for the group, which
//! carries it.

use berth_sdk::{Plugin, Pod, QueueSort};

/// The plugin.
pub struct PrioritySort;

impl Plugin for PrioritySort {
    const NAME: &'static str = "PrioritySort";
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(PrioritySort)
    }
}

impl QueueSort for PrioritySort {
    fn sort_key(&self, pod: &Pod) -> Vec<i64> {
        // Lower keys pop first, so the priority is negated; widening first keeps
        // -i32::MIN representable.
        vec![-i64::from(pod.priority)]
    }
}

berth_sdk::export_plugin!(PrioritySort: queue_sort);

#[cfg(test)]
mod tests {
    use super::*;

    fn key(priority: i32) -> Vec<i64> {
        let pod = Pod {
            priority,
            ..Pod::default()
        };
        PrioritySort.sort_key(&pod)
    }

    /// Upstream's `Less(p1, p2)`: p1 pops first. Ties fall to the host's enqueue order.
    fn less(p1: i32, p2: i32) -> bool {
        key(p1) < key(p2)
    }

    #[test]
    fn higher_priority_pops_first() {
        assert!(!less(10, 100));
        assert!(less(100, 10));
    }

    #[test]
    fn equal_priorities_tie() {
        assert_eq!(key(100), key(100));
        assert!(!less(100, 100));
    }

    #[test]
    fn extreme_priorities_do_not_overflow() {
        assert_eq!(key(i32::MIN), vec![2_147_483_648]);
        assert!(less(i32::MAX, i32::MIN));
        assert!(less(0, -5));
    }

    #[test]
    fn a_pod_group_is_sorted_by_its_own_priority() {
        let group = Pod::standing_for_pod_group("default", "train", 1000);
        assert!(group.stands_for_pod_group());
        assert_eq!(PrioritySort.sort_key(&group), key(1000));
        let member = Pod {
            uid: "u".into(),
            name: "train-0".into(),
            scheduling_group: Some("train".into()),
            ..Pod::default()
        };
        assert!(!member.stands_for_pod_group());
    }

    #[test]
    fn exports_only_queue_sort() {
        use berth_sdk::{ExtensionPoint, Registered};
        assert_eq!(
            PrioritySort::vtable().extension_points(),
            [ExtensionPoint::QueueSort]
        );
    }
}
