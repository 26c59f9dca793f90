//! The events that may make a pod NodeResourcesFit rejected schedulable, and the
//! hints that sort them, as upstream's `EventsToRegister`,
//! `isSchedulableAfterPodEvent` and `isSchedulableAfterNodeChange`.
//!
//! Room on a node grows when a pod bound (or nominated) there goes away or asks for
//! less, and when a node appears or its allocatable grows; the pod itself asking
//! for less may also let it fit.

use berth_sdk::events::objects;
use berth_sdk::{
    ActionType, ClusterEvent, EnqueueExtensions, EventRegistration, EventResource, Node, NodeInfo,
    Object, Pod, QueueingHint, Resources,
};

use crate::{NodeResourcesFit, fits_request};
use std::collections::BTreeSet;

use QueueingHint::{Queue, QueueSkip};

/// The registrations, all with the hint:
/// - AssignedPod Delete and UpdatePodScaleDown: a bound pod frees what it asked for.
/// - UnscheduledPod UpdatePodScaleDown: the pod itself asks for less. (Upstream
///   registers its `Pod` resource, bound and pending alike, and scale-downs only
///   with in-place pod resizing on; Berth's host reports every request decrease.)
/// - Node Add and UpdateNodeAllocatable. Upstream adds UpdateNodeTaint and
///   UpdateNodeLabel only when queueing hints are off, for its preCheck.
/// - DeviceClass Add and Update: a class may come to back an extended resource the
///   pod requests (DRAExtendedResource).
pub fn events() -> Vec<EventRegistration> {
    vec![
        EventRegistration::with_hint(
            EventResource::AssignedPod,
            ActionType::DELETE | ActionType::UPDATE_POD_SCALE_DOWN,
        ),
        EventRegistration::with_hint(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_SCALE_DOWN,
        ),
        EventRegistration::with_hint(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_ALLOCATABLE,
        ),
        EventRegistration::with_hint(
            EventResource::DeviceClass,
            ActionType::ADD | ActionType::UPDATE,
        ),
    ]
}

/// Whether some resource the pod requests grew from `before` to `after` (the
/// resources are those of `wanted` with a non-zero quantity; every scalar resource
/// counts, as Filter checks every one).
fn any_requested_grew(wanted: &Resources, before: &Resources, after: &Resources) -> bool {
    (wanted.milli_cpu > 0 && after.milli_cpu > before.milli_cpu)
        || (wanted.memory > 0 && after.memory > before.memory)
        || (wanted.ephemeral_storage > 0 && after.ephemeral_storage > before.ephemeral_storage)
        || wanted
            .scalar
            .iter()
            .filter(|(_, q)| **q > 0)
            .any(|(name, _)| after.get(name) > before.get(name))
}

/// Upstream's `haveAnyRequestedResourcesIncreased`: more pod slots, or more of a
/// resource the pod requests, or a requested resource a DeviceClass backs that the
/// modified node does not advertise (DynamicResources may give it as devices).
/// `backed` names the requested resources a DeviceClass backs
/// ([`NodeResourcesFit::dra_backed`]).
pub fn have_any_requested_resources_increased(
    pod: &Pod,
    original: &Node,
    modified: &Node,
    backed: &BTreeSet<String>,
) -> bool {
    let (before, after) = (&original.allocatable, &modified.allocatable);
    if after.allowed_pod_number > before.allowed_pod_number {
        return true;
    }
    any_requested_grew(&pod.requests(), before, after)
        || backed.iter().any(|name| after.get(name) == 0)
}

/// Upstream's `isSchedulableAfterDeviceClassEvent`: a class added whose implicit
/// extended resource the pod requests, or a class added or updated whose
/// `extendedResourceName` changed to one the pod requests.
pub fn is_schedulable_after_device_class_event(
    pod: &Pod,
    old: Option<&Object>,
    new: Option<&Object>,
) -> Result<QueueingHint, String> {
    let (original, modified) = objects(old, new, Object::as_device_class, "deviceclass")?;
    let modified = modified.ok_or("the event has no new device class")?;
    let requests = pod.requests();
    let requested = |name: &str| requests.scalar.get(name).is_some_and(|q| *q > 0);
    match original {
        Some(o) if o.extended_resource_name == modified.extended_resource_name => {
            return Ok(QueueSkip);
        }
        Some(_) => {}
        None => {
            let implicit = format!(
                "{}{}",
                berth_sdk::dra::IMPLICIT_EXTENDED_RESOURCE_PREFIX,
                modified.name
            );
            if requested(&implicit) {
                return Ok(Queue);
            }
        }
    }
    Ok(match &modified.extended_resource_name {
        Some(name) if requested(name) => Queue,
        _ => QueueSkip,
    })
}

impl NodeResourcesFit {
    /// Upstream's `isFit`: whether the pod fits the empty node, by Filter's own
    /// checks (the ignored resources included).
    pub fn fits_empty_node(&self, pod: &Pod, node: &Node) -> bool {
        let requests = pod.requests();
        let backed = self.dra_backed(&requests);
        fits_request(
            &requests,
            &NodeInfo::new(node.clone()),
            &self.ignored_resources,
            &self.ignored_resource_groups,
            &backed,
        )
        .is_empty()
    }

    /// Upstream's `isSchedulableAfterPodEvent`: a deleted pod that was bound or
    /// nominated frees room; a scale-down helps when it is the pod's own, or when a
    /// bound pod asks for less of something the pod requests.
    pub fn is_schedulable_after_pod_event(
        &self,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = objects(old, new, Object::as_pod, "pod")?;
        let Some(modified) = modified else {
            let deleted = original.ok_or("the event has no pod")?;
            return Ok(
                if deleted.node_name.is_empty() && deleted.nominated_node_name.is_empty() {
                    QueueSkip
                } else {
                    Queue
                },
            );
        };
        if modified.uid == pod.uid {
            // The pod itself asks for less.
            return Ok(Queue);
        }
        if modified.node_name.is_empty() {
            // A pending pod holds nothing.
            return Ok(QueueSkip);
        }
        let original = original.ok_or("the update has no old pod")?;
        // A scale-down: what the bound pod asked for before exceeds what it asks for
        // now, in something the pod requests.
        let wanted = pod.requests();
        Ok(
            if any_requested_grew(&wanted, &modified.requests(), &original.requests()) {
                Queue
            } else {
                QueueSkip
            },
        )
    }

    /// Upstream's `isSchedulableAfterNodeChange`: the pod fits the (empty) new node,
    /// and it is new or has more of something the pod requests.
    pub fn is_schedulable_after_node_change(
        &self,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = objects(old, new, Object::as_node, "node")?;
        let modified = modified.ok_or("the event has no new node")?;
        if !self.fits_empty_node(pod, modified) {
            return Ok(QueueSkip);
        }
        Ok(match original {
            None => Queue,
            Some(original)
                if have_any_requested_resources_increased(
                    pod,
                    original,
                    modified,
                    &self.dra_backed(&pod.requests()),
                ) =>
            {
                Queue
            }
            Some(_) => QueueSkip,
        })
    }
}

impl EnqueueExtensions for NodeResourcesFit {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::AssignedPod | EventResource::UnscheduledPod => {
                self.is_schedulable_after_pod_event(pod, old, new)
            }
            EventResource::Node => self.is_schedulable_after_node_change(pod, old, new),
            EventResource::DeviceClass => is_schedulable_after_device_class_event(pod, old, new),
            // Not registered: requeue rather than guess.
            _ => Ok(Queue),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Upstream's `Test_isSchedulableAfterPodChange`,
    //! `Test_isSchedulableAfterNodeChange` and `TestHaveAnyRequestedResourcesIncreased`
    //! (without pod-level resources and DRA), and Berth's own cases. Quantities are in
    //! Berth's units: CPU in millicores, so upstream's "1" CPU is 1000.

    use super::*;
    use berth_sdk::serde_json::{Value, json};
    use berth_sdk::{Container, Plugin, ResourceList};

    const EXT_A: &str = "example.com/aaa";
    const EXT_B: &str = "example.com/bbb";

    fn plugin() -> NodeResourcesFit {
        NodeResourcesFit::new(Value::Null).unwrap()
    }

    fn list(items: &[(&str, i64)]) -> ResourceList {
        items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    /// A pod with one container requesting `items`.
    fn pod(uid: &str, items: &[(&str, i64)]) -> Pod {
        Pod {
            uid: uid.into(),
            name: uid.into(),
            containers: vec![Container {
                requests: list(items),
                ..Container::default()
            }],
            ..Pod::default()
        }
    }

    fn bound(mut p: Pod) -> Pod {
        p.node_name = "fake".into();
        p
    }

    /// Upstream's `st.MakeNode().Capacity(...)`: 32 pods unless given.
    fn node(items: &[(&str, i64)]) -> Node {
        let mut all = list(&[("pods", 32)]);
        all.extend(list(items));
        Node {
            name: "node".into(),
            allocatable: Resources::from_list(&all),
            ..Node::default()
        }
    }

    fn pod_hint(pending: &Pod, old: Option<Pod>, new: Option<Pod>) -> Result<QueueingHint, String> {
        let actions = if new.is_some() {
            ActionType::UPDATE_POD_SCALE_DOWN
        } else {
            ActionType::DELETE
        };
        let resource = match (&old, &new) {
            (_, Some(n)) if n.uid == pending.uid => EventResource::UnscheduledPod,
            _ => EventResource::AssignedPod,
        };
        let (old, new) = (old.map(Object::Pod), new.map(Object::Pod));
        plugin().queueing_hint(
            &ClusterEvent::new(resource, actions),
            pending,
            old.as_ref(),
            new.as_ref(),
        )
    }

    fn node_hint(pending: &Pod, old: Option<Node>, new: Node) -> Result<QueueingHint, String> {
        let actions = if old.is_some() {
            ActionType::UPDATE_NODE_ALLOCATABLE
        } else {
            ActionType::ADD
        };
        let (old, new) = (old.map(Object::Node), Object::Node(new));
        plugin().queueing_hint(
            &ClusterEvent::new(EventResource::Node, actions),
            pending,
            old.as_ref(),
            Some(&new),
        )
    }

    // Test_isSchedulableAfterPodChange.

    #[test]
    fn backoff_wrong_objects() {
        let pl = plugin();
        let not_a_pod = Object::Node(Node::default());
        let p = Pod::default();
        assert!(
            pl.is_schedulable_after_pod_event(&p, Some(&not_a_pod), None)
                .is_err()
        );
        assert!(
            pl.is_schedulable_after_pod_event(&p, None, Some(&not_a_pod))
                .is_err()
        );
    }

    #[test]
    fn queue_on_other_pod_deleted() {
        let deleted = bound(pod("pod2", &[("cpu", 1000)]));
        assert_eq!(
            pod_hint(&pod("pod1", &[("cpu", 1000)]), Some(deleted), None),
            Ok(Queue)
        );
    }

    #[test]
    fn skip_queue_on_unscheduled_pod_deleted() {
        assert_eq!(
            pod_hint(&Pod::default(), Some(Pod::default()), None),
            Ok(QueueSkip)
        );
    }

    #[test]
    fn skip_queue_on_other_unscheduled_pod() {
        let old = pod("pod2", &[("cpu", 2000)]);
        let new = pod("pod2", &[("cpu", 1000)]);
        assert_eq!(
            pod_hint(&pod("pod1", &[("cpu", 1000)]), Some(old), Some(new)),
            Ok(QueueSkip)
        );
    }

    #[test]
    fn skip_queue_on_other_pod_unrelated_resource_scaled_down() {
        let old = bound(pod("pod2", &[("memory", 2)]));
        let new = bound(pod("pod2", &[("memory", 1)]));
        assert_eq!(
            pod_hint(&pod("pod1", &[("cpu", 1000)]), Some(old), Some(new)),
            Ok(QueueSkip)
        );
    }

    #[test]
    fn queue_on_other_pod_some_resource_scale_down() {
        let old = bound(pod("pod2", &[("cpu", 2000)]));
        let new = bound(pod("pod2", &[("cpu", 1000)]));
        assert_eq!(
            pod_hint(&pod("pod1", &[("cpu", 1000)]), Some(old), Some(new)),
            Ok(Queue)
        );
    }

    #[test]
    fn queue_on_target_pod_some_resource_scale_down() {
        let old = pod("pod1", &[("cpu", 2000)]);
        let new = pod("pod1", &[("cpu", 1000)]);
        assert_eq!(
            pod_hint(&pod("pod1", &[("cpu", 1000)]), Some(old), Some(new)),
            Ok(Queue)
        );
    }

    // Berth's own pod cases.

    #[test]
    fn a_deleted_nominated_pod_frees_room() {
        let mut nominated = pod("pod2", &[("cpu", 1000)]);
        nominated.nominated_node_name = "fake".into();
        assert_eq!(
            pod_hint(&pod("pod1", &[("cpu", 1000)]), Some(nominated), None),
            Ok(Queue)
        );
    }

    #[test]
    fn an_extended_resource_scale_down_counts() {
        let old = bound(pod("pod2", &[(EXT_A, 2), ("cpu", 1000)]));
        let new = bound(pod("pod2", &[(EXT_A, 1), ("cpu", 1000)]));
        assert_eq!(
            pod_hint(
                &pod("pod1", &[(EXT_A, 1)]),
                Some(old.clone()),
                Some(new.clone())
            ),
            Ok(Queue)
        );
        assert_eq!(
            pod_hint(&pod("pod1", &[(EXT_B, 1)]), Some(old), Some(new)),
            Ok(QueueSkip)
        );
    }

    // Test_isSchedulableAfterNodeChange.

    #[test]
    fn backoff_wrong_node_objects() {
        let pl = plugin();
        let not_a_node = Object::Pod(Pod::default());
        let p = Pod::default();
        assert!(
            pl.is_schedulable_after_node_change(&p, None, Some(&not_a_node))
                .is_err()
        );
        let new = Object::Node(Node::default());
        assert!(
            pl.is_schedulable_after_node_change(&p, Some(&not_a_node), Some(&new))
                .is_err()
        );
    }

    #[test]
    fn skip_queue_on_node_add_without_sufficient_resources() {
        let p = pod("p", &[("memory", 2)]);
        assert_eq!(node_hint(&p, None, node(&[("memory", 1)])), Ok(QueueSkip));
    }

    #[test]
    fn skip_queue_on_node_add_without_required_resource_type() {
        let p = pod("p", &[(EXT_A, 1)]);
        assert_eq!(node_hint(&p, None, node(&[(EXT_B, 1)])), Ok(QueueSkip));
    }

    #[test]
    fn queue_on_node_add_with_sufficient_resources() {
        let p = pod("p", &[("memory", 2), (EXT_A, 1)]);
        assert_eq!(
            node_hint(&p, None, node(&[("memory", 4), (EXT_A, 2)])),
            Ok(Queue)
        );
    }

    #[test]
    fn skip_queue_on_node_unrelated_changes() {
        let p = pod("p", &[("memory", 2), (EXT_A, 1)]);
        let old = node(&[("memory", 2), (EXT_A, 2)]);
        let new = node(&[("memory", 2), (EXT_A, 1), (EXT_B, 2)]);
        assert_eq!(node_hint(&p, Some(old), new), Ok(QueueSkip));
    }

    #[test]
    fn queue_on_pod_requested_resources_increase() {
        let p = pod("p", &[("memory", 2), (EXT_A, 1)]);
        let old = node(&[("memory", 2), (EXT_A, 1)]);
        let new = node(&[("memory", 2), (EXT_A, 2)]);
        assert_eq!(node_hint(&p, Some(old), new), Ok(Queue));
    }

    #[test]
    fn skip_queue_on_node_changes_from_suitable_to_unsuitable() {
        let p = pod("p", &[("memory", 2), (EXT_A, 1)]);
        let old = node(&[("memory", 4), (EXT_A, 2)]);
        let new = node(&[("memory", 1), (EXT_A, 2)]);
        assert_eq!(node_hint(&p, Some(old), new), Ok(QueueSkip));
    }

    #[test]
    fn queue_on_node_changes_from_unsuitable_to_suitable() {
        let p = pod("p", &[("memory", 2), (EXT_A, 1)]);
        let old = node(&[("memory", 1), (EXT_A, 2)]);
        let new = node(&[("memory", 4), (EXT_A, 2)]);
        assert_eq!(node_hint(&p, Some(old), new), Ok(Queue));
    }

    // Berth's own node cases.

    #[test]
    fn ignored_resources_do_not_keep_the_pod_waiting() {
        // Filter does not check an ignored resource, so neither does the hint.
        let pl = NodeResourcesFit::new(json!({"ignoredResources": [EXT_A]})).unwrap();
        let p = pod("p", &[(EXT_A, 1), ("cpu", 1000)]);
        let new = Object::Node(node(&[("cpu", 2000)]));
        assert_eq!(
            pl.is_schedulable_after_node_change(&p, None, Some(&new)),
            Ok(Queue)
        );
        assert_eq!(
            plugin().is_schedulable_after_node_change(&p, None, Some(&new)),
            Ok(QueueSkip)
        );
    }

    #[test]
    fn a_node_without_pod_slots_is_skipped() {
        let p = pod("p", &[("cpu", 1000)]);
        let full = node(&[("cpu", 2000), ("pods", 0)]);
        assert_eq!(node_hint(&p, None, full), Ok(QueueSkip));
    }

    // TestHaveAnyRequestedResourcesIncreased.

    fn increased(p: &Pod, old: &[(&str, i64)], new: &[(&str, i64)]) -> bool {
        have_any_requested_resources_increased(p, &node(old), &node(new), &BTreeSet::new())
    }

    fn all_four() -> Pod {
        pod(
            "p",
            &[
                ("cpu", 2),
                ("memory", 2),
                ("ephemeral-storage", 2),
                (EXT_A, 2),
            ],
        )
    }

    #[test]
    fn no_requested_resources() {
        let p = pod("p", &[]);
        let old = [
            ("pods", 1),
            ("cpu", 1000),
            ("memory", 1),
            ("ephemeral-storage", 1),
            (EXT_A, 1),
        ];
        let new = [
            ("pods", 1),
            ("cpu", 2000),
            ("memory", 2),
            ("ephemeral-storage", 2),
            (EXT_A, 2),
        ];
        assert!(!increased(&p, &old, &new));
    }

    #[test]
    fn no_requested_resources_pods_increased() {
        let p = pod("p", &[]);
        let old = [("pods", 1), ("cpu", 1000), ("memory", 1)];
        let new = [("pods", 2), ("cpu", 1000), ("memory", 1)];
        assert!(increased(&p, &old, &new));
    }

    #[test]
    fn scalar_resources_not_in_node() {
        let old = [("cpu", 1000), ("memory", 2), ("ephemeral-storage", 3)];
        let new = [("cpu", 1000), ("memory", 2), ("ephemeral-storage", 1)];
        assert!(!increased(&all_four(), &old, &new));
    }

    #[test]
    fn requested_resources_decreased() {
        let old = [
            ("cpu", 1000),
            ("memory", 2),
            ("ephemeral-storage", 3),
            (EXT_A, 4),
        ];
        let new = [
            ("cpu", 1000),
            ("memory", 2),
            ("ephemeral-storage", 1),
            (EXT_A, 1),
        ];
        assert!(!increased(&all_four(), &old, &new));
    }

    #[test]
    fn requested_resources_increased() {
        let old = [
            ("cpu", 1000),
            ("memory", 2),
            ("ephemeral-storage", 3),
            (EXT_A, 4),
        ];
        let new = [
            ("cpu", 3000),
            ("memory", 4),
            ("ephemeral-storage", 3),
            (EXT_A, 4),
        ];
        assert!(increased(&all_four(), &old, &new));
    }

    #[test]
    fn non_requested_resources_decreased() {
        let p = pod("p", &[("cpu", 2), ("memory", 2)]);
        let old = [
            ("cpu", 1000),
            ("memory", 2),
            ("ephemeral-storage", 3),
            (EXT_A, 4),
        ];
        let new = [
            ("cpu", 1000),
            ("memory", 2),
            ("ephemeral-storage", 1),
            (EXT_A, 1),
        ];
        assert!(!increased(&p, &old, &new));
    }

    #[test]
    fn non_requested_resources_increased() {
        let p = pod("p", &[("cpu", 2), ("memory", 2)]);
        let old = [
            ("cpu", 1000),
            ("memory", 2),
            ("ephemeral-storage", 3),
            (EXT_A, 4),
        ];
        let new = [
            ("cpu", 1000),
            ("memory", 2),
            ("ephemeral-storage", 5),
            (EXT_A, 6),
        ];
        assert!(!increased(&p, &old, &new));
    }

    #[test]
    fn registrations() {
        let events = NodeResourcesFit::events().unwrap();
        assert!(events.iter().all(|r| r.has_hint));
        let covered = |resource, actions| {
            berth_sdk::events::is_registered(&events, &ClusterEvent::new(resource, actions))
        };
        use ActionType as A;
        use EventResource as R;
        assert!(covered(R::AssignedPod, A::DELETE));
        assert!(covered(R::AssignedPod, A::UPDATE_POD_SCALE_DOWN));
        assert!(!covered(R::AssignedPod, A::ADD));
        assert!(!covered(R::AssignedPod, A::UPDATE_POD_LABEL));
        assert!(covered(R::UnscheduledPod, A::UPDATE_POD_SCALE_DOWN));
        assert!(covered(R::Node, A::ADD));
        assert!(covered(R::Node, A::UPDATE_NODE_ALLOCATABLE));
        assert!(!covered(R::Node, A::UPDATE_NODE_TAINT));
        assert!(!covered(R::Node, A::UPDATE_NODE_LABEL));
        assert!(!covered(R::Node, A::DELETE));
    }
}
