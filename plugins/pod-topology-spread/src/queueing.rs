//! The events that may make a pod PodTopologySpread rejected schedulable, and the
//! hints that sort them, as upstream's `EventsToRegister`,
//! `isSchedulableAfterPodChange` and `isSchedulableAfterNodeChange`.
//!
//! Only the pod's `DoNotSchedule` constraints (its own, or the defaults) can reject
//! it, so the hints look at those: a bound pod in its namespace that starts or stops
//! counting for one of them, the pod itself getting labels or tolerations that change
//! how it counts, or a node that joins, leaves or moves between domains.

use berth_sdk::events::objects;
use berth_sdk::types::WhenUnsatisfiable;
use berth_sdk::{
    ActionType, ClusterEvent, EnqueueExtensions, EventRegistration, EventResource, Labels, Node,
    Object, Pod, QueueingHint,
};

use crate::PodTopologySpread;
use crate::common::{Constraint, node_has_all_keys};

/// The registrations:
/// - AssignedPod Add, UpdatePodLabel, Delete: a bound pod that starts or stops
///   counting in a domain changes the skew.
/// - UnscheduledPod UpdatePodLabel, UpdatePodToleration: the pod's own labels decide
///   whether it counts for itself (and `matchLabelKeys`); its tolerations decide which
///   nodes a `nodeTaintsPolicy: Honor` constraint counts. (Upstream registers its
///   `Pod` resource, bound and pending alike, with UpdatePodToleration only when
///   queueing hints are on; Berth's queue always uses them, and delivers only the
///   pod's own updates as UnscheduledPod events.)
/// - Node Add, Delete, UpdateNodeLabel, UpdateNodeTaint: domains appear, vanish or
///   move, and taints change which nodes count.
pub fn events() -> Vec<EventRegistration> {
    vec![
        EventRegistration::with_hint(
            EventResource::AssignedPod,
            ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE,
        ),
        EventRegistration::with_hint(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_LABEL | ActionType::UPDATE_POD_TOLERATION,
        ),
        EventRegistration::with_hint(
            EventResource::Node,
            ActionType::ADD
                | ActionType::DELETE
                | ActionType::UPDATE_NODE_LABEL
                | ActionType::UPDATE_NODE_TAINT,
        ),
    ]
}

/// Upstream's `involvedInTopologySpreading`: the other pod is the pod itself, or a
/// bound pod of its namespace (only those are counted).
fn involved(other: &Pod, pod: &Pod) -> bool {
    other.uid == pod.uid || (!other.node_name.is_empty() && other.namespace == pod.namespace)
}

/// Upstream's `podLabelsMatchSpreadConstraints`: whether some constraint's selector
/// selects these labels.
fn labels_match_any(constraints: &[Constraint], labels: &Labels) -> bool {
    constraints.iter().any(|c| c.self_matches(labels))
}

/// Upstream's `checkTopologyKeyLabelsChanged`: whether some constraint's topology
/// label differs (an absent label reads as empty).
fn topology_labels_changed(old: &Labels, new: &Labels, constraints: &[Constraint]) -> bool {
    constraints.iter().any(|c| {
        let (was, is) = (old.get(&c.topology_key), new.get(&c.topology_key));
        was.map_or("", String::as_str) != is.map_or("", String::as_str)
    })
}

impl PodTopologySpread {
    /// Upstream's `isSchedulableAfterPodChange`.
    pub fn is_schedulable_after_pod_change(
        &self,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        use QueueingHint::{Queue, QueueSkip};
        let (original, modified) = objects(old, new, Object::as_pod, "pod")?;
        if modified.is_some_and(|m| !involved(m, pod))
            || original.is_some_and(|o| !involved(o, pod))
        {
            // Pending elsewhere, or in another namespace: never counted.
            return Ok(QueueSkip);
        }
        let constraints = self.constraints(pod, WhenUnsatisfiable::DoNotSchedule);
        match (original, modified) {
            (Some(original), Some(modified)) => {
                if modified.uid == pod.uid
                    && modified.tolerations != original.tolerations
                    && constraints.iter().any(|c| c.honor_node_taints)
                {
                    // New tolerations may let tainted nodes count.
                    return Ok(Queue);
                }
                if modified.labels == original.labels {
                    return Ok(QueueSkip);
                }
                // A label change matters when it makes the pod match, or stop
                // matching, some constraint's selector.
                let flips = constraints
                    .iter()
                    .any(|c| c.self_matches(&original.labels) != c.self_matches(&modified.labels));
                Ok(if flips { Queue } else { QueueSkip })
            }
            // Added: it counts if some selector selects it.
            (None, Some(added)) => Ok(if labels_match_any(&constraints, &added.labels) {
                Queue
            } else {
                QueueSkip
            }),
            // Deleted: it counted if some selector selected it.
            (Some(deleted), None) => Ok(if labels_match_any(&constraints, &deleted.labels) {
                Queue
            } else {
                QueueSkip
            }),
            (None, None) => Err("the event has no pod".into()),
        }
    }

    /// Upstream's `isSchedulableAfterNodeChange`: Queue when a node that has every
    /// topology key is added or deleted, when an update makes a node gain or lose a
    /// key, or when a node with every key changes a key's value or its taints.
    pub fn is_schedulable_after_node_change(
        &self,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        use QueueingHint::{Queue, QueueSkip};
        let (original, modified) = objects(old, new, Object::as_node, "node")?;
        let constraints = self.constraints(pod, WhenUnsatisfiable::DoNotSchedule);
        let matching =
            |n: Option<&Node>| n.is_some_and(|n| node_has_all_keys(&n.labels, &constraints));
        let (was, is) = (matching(original), matching(modified));
        let hint = match (original, modified) {
            (Some(original), Some(modified)) => {
                if was != is
                    || (is
                        && (topology_labels_changed(
                            &original.labels,
                            &modified.labels,
                            &constraints,
                        ) || original.taints != modified.taints))
                {
                    Queue
                } else {
                    QueueSkip
                }
            }
            (None, Some(_)) if is => Queue,
            (Some(_), None) if was => Queue,
            (None, None) => return Err("the event has no node".into()),
            _ => QueueSkip,
        };
        Ok(hint)
    }
}

impl EnqueueExtensions for PodTopologySpread {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::AssignedPod | EventResource::UnscheduledPod => {
                self.is_schedulable_after_pod_change(pod, old, new)
            }
            EventResource::Node => self.is_schedulable_after_node_change(pod, old, new),
            // Not registered: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Upstream's `Test_isSchedulableAfterNodeChange` and
    //! `Test_isSchedulableAfterPodChange` (with `DefaultingType: List` and no default
    //! constraints), and Berth's own cases.

    use super::*;
    use crate::SpreadArgs;
    use berth_sdk::Plugin;
    use berth_sdk::serde_json::json;
    use berth_sdk::types::{
        LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, NodeInclusionPolicy,
        TopologySpreadConstraint,
    };
    use berth_sdk::{Taint, TaintEffect, Toleration, TolerationOperator};

    use QueueingHint::{Queue, QueueSkip};

    fn plugin() -> PodTopologySpread {
        PodTopologySpread::with_args(
            SpreadArgs::from_json(json!({"defaultingType": "List"})).unwrap(),
        )
    }

    fn exists(key: &str) -> Option<LabelSelector> {
        Some(LabelSelector {
            match_labels: Labels::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: key.into(),
                operator: LabelSelectorOperator::Exists,
                values: vec![],
            }],
        })
    }

    /// A pod under construction, as upstream's `st.MakePod()`.
    #[derive(Clone)]
    struct P(Pod);

    fn pod(uid: &str) -> P {
        P(Pod {
            uid: uid.into(),
            name: uid.into(),
            ..Pod::default()
        })
    }

    impl P {
        fn label(mut self, k: &str, v: &str) -> P {
            self.0.labels.insert(k.into(), v.into());
            self
        }
        fn node(mut self, n: &str) -> P {
            self.0.node_name = n.into();
            self
        }
        fn namespace(mut self, ns: &str) -> P {
            self.0.namespace = ns.into();
            self
        }
        fn spread(
            mut self,
            key: &str,
            selector: Option<LabelSelector>,
            taints_policy: Option<NodeInclusionPolicy>,
        ) -> P {
            self.0
                .topology_spread_constraints
                .push(TopologySpreadConstraint {
                    max_skew: 1,
                    topology_key: key.into(),
                    when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                    label_selector: selector,
                    min_domains: None,
                    node_affinity_policy: None,
                    node_taints_policy: taints_policy,
                    match_label_keys: vec![],
                });
            self
        }
        fn toleration(mut self, key: &str) -> P {
            self.0.tolerations.push(Toleration {
                key: key.into(),
                operator: TolerationOperator::Exists,
                value: String::new(),
                effect: Some(TaintEffect::NoSchedule),
                toleration_seconds: None,
            });
            self
        }
        fn obj(self) -> Object {
            Object::Pod(self.0)
        }
    }

    /// The pending pod of upstream's pod cases: `foo` label, zone constraint on foo.
    fn target() -> P {
        pod("p")
            .label("foo", "")
            .spread("zone", exists("foo"), None)
    }

    /// The pending pod with a zone constraint on foo and a node constraint on bar.
    fn target_two() -> P {
        target().spread("node", exists("bar"), None)
    }

    fn pod_hint(pending: &P, old: Option<P>, new: Option<P>) -> QueueingHint {
        let actions = match (&old, &new) {
            (Some(_), Some(_)) => ActionType::UPDATE_POD_LABEL,
            (None, _) => ActionType::ADD,
            (_, None) => ActionType::DELETE,
        };
        let resource = if new.as_ref().or(old.as_ref()).unwrap().0.uid == pending.0.uid {
            EventResource::UnscheduledPod
        } else {
            EventResource::AssignedPod
        };
        let (old, new) = (old.map(P::obj), new.map(P::obj));
        plugin()
            .queueing_hint(
                &ClusterEvent::new(resource, actions),
                &pending.0,
                old.as_ref(),
                new.as_ref(),
            )
            .unwrap()
    }

    fn node(labels: &[(&str, &str)]) -> Node {
        Node {
            name: "node-a".into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            ..Node::default()
        }
    }

    fn tainted(mut n: Node, key: &str) -> Node {
        n.taints.push(Taint {
            key: key.into(),
            value: "bbb".into(),
            effect: TaintEffect::NoSchedule,
        });
        n
    }

    fn node_hint(pending: &P, old: Option<Node>, new: Option<Node>) -> QueueingHint {
        let actions = match (&old, &new) {
            (Some(_), Some(_)) => ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_TAINT,
            (None, _) => ActionType::ADD,
            (_, None) => ActionType::DELETE,
        };
        let (old, new) = (old.map(Object::Node), new.map(Object::Node));
        plugin()
            .queueing_hint(
                &ClusterEvent::new(EventResource::Node, actions),
                &pending.0,
                old.as_ref(),
                new.as_ref(),
            )
            .unwrap()
    }

    // Test_isSchedulableAfterNodeChange.

    #[test]
    fn node_updates_label_which_matches_topology_key() {
        let p = pod("p").spread("zone", exists("foo"), None);
        let (old, new) = (node(&[("zone", "zone1")]), node(&[("zone", "zone2")]));
        assert_eq!(node_hint(&p, Some(old), Some(new)), Queue);
    }

    #[test]
    fn node_that_does_not_match_updates_non_related_label() {
        let p = pod("p").spread("zone", exists("foo"), None);
        let (old, new) = (node(&[("foo", "bar1")]), node(&[("foo", "bar2")]));
        assert_eq!(node_hint(&p, Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn node_that_matches_adds_non_related_label() {
        let p = pod("p")
            .spread("zone", exists("foo"), None)
            .spread("node", exists("foo"), None);
        let old = node(&[("zone", "zone1"), ("node", "node1"), ("foo", "bar")]);
        let new = node(&[("zone", "zone1"), ("node", "node1")]);
        assert_eq!(node_hint(&p, Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn create_node_with_non_related_labels() {
        let p = pod("p").spread("zone", exists("foo"), None);
        assert_eq!(
            node_hint(&p, None, Some(node(&[("foo", "bar")]))),
            QueueSkip
        );
    }

    #[test]
    fn create_node_with_related_labels() {
        let p = pod("p").spread("zone", exists("foo"), None);
        assert_eq!(node_hint(&p, None, Some(node(&[("zone", "zone1")]))), Queue);
    }

    #[test]
    fn delete_node_with_non_related_labels() {
        let p = pod("p").spread("zone", exists("foo"), None);
        assert_eq!(
            node_hint(&p, Some(node(&[("foo", "bar")])), None),
            QueueSkip
        );
    }

    #[test]
    fn delete_node_with_related_labels() {
        let p = pod("p").spread("zone", exists("foo"), None);
        assert_eq!(node_hint(&p, Some(node(&[("zone", "zone1")])), None), Queue);
    }

    #[test]
    fn add_node_with_related_labels_that_only_match_one_constraint() {
        let p = pod("p")
            .spread("zone", exists("foo"), None)
            .spread("node", exists("foo"), None);
        assert_eq!(
            node_hint(&p, None, Some(node(&[("zone", "zone1")]))),
            QueueSkip
        );
    }

    #[test]
    fn add_node_with_related_labels_that_match_all_constraints() {
        let p = pod("p")
            .spread("zone", exists("foo"), None)
            .spread("node", exists("foo"), None);
        let new = node(&[("zone", "zone1"), ("node", "node1")]);
        assert_eq!(node_hint(&p, None, Some(new)), Queue);
    }

    #[test]
    fn update_node_with_related_labels_that_only_match_one_constraint() {
        let p = pod("p")
            .spread("zone", exists("foo"), None)
            .spread("node", exists("foo"), None);
        let (old, new) = (node(&[("zone", "zone1")]), node(&[("zone", "zone1")]));
        assert_eq!(node_hint(&p, Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn update_node_with_related_labels_that_match_all_constraints() {
        let p = pod("p")
            .spread("zone", exists("foo"), None)
            .spread("node", exists("foo"), None);
        let old = node(&[("zone", "zone1"), ("node", "node1")]);
        let new = node(&[("zone", "zone1"), ("node", "node2")]);
        assert_eq!(node_hint(&p, Some(old), Some(new)), Queue);
    }

    #[test]
    fn update_node_with_different_taints_that_match_all_constraints() {
        let p = pod("p")
            .spread("zone", exists("foo"), None)
            .spread("node", exists("foo"), None);
        let both = node(&[("zone", "zone1"), ("node", "node1")]);
        let (old, new) = (tainted(both.clone(), "aaa"), tainted(both, "ccc"));
        assert_eq!(node_hint(&p, Some(old), Some(new)), Queue);
    }

    #[test]
    fn update_node_with_different_taints_that_only_match_one_constraint() {
        let p = pod("p")
            .spread("zone", exists("foo"), None)
            .spread("node", exists("foo"), None);
        let one = node(&[("node", "node1")]);
        let (old, new) = (tainted(one.clone(), "aaa"), tainted(one, "ccc"));
        assert_eq!(node_hint(&p, Some(old), Some(new)), QueueSkip);
    }

    // Berth's own node cases.

    #[test]
    fn update_node_losing_a_topology_key() {
        let p = pod("p").spread("zone", exists("foo"), None);
        let (old, new) = (node(&[("zone", "zone1")]), node(&[]));
        assert_eq!(node_hint(&p, Some(old), Some(new)), Queue);
    }

    #[test]
    fn cordoning_a_node_is_not_a_taint_change() {
        let p = pod("p").spread("zone", exists("foo"), None);
        let old = node(&[("zone", "zone1")]);
        let mut new = old.clone();
        new.unschedulable = true;
        assert_eq!(node_hint(&p, Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn wrong_objects_are_errors() {
        let pl = plugin();
        let p = target().0;
        let a_pod = Object::Pod(Pod::default());
        let a_node = Object::Node(Node::default());
        assert!(
            pl.is_schedulable_after_node_change(&p, None, Some(&a_pod))
                .is_err()
        );
        assert!(
            pl.is_schedulable_after_pod_change(&p, Some(&a_node), None)
                .is_err()
        );
    }

    // Test_isSchedulableAfterPodChange.

    #[test]
    fn add_pod_with_labels_matching_the_selector() {
        let new = pod("p2").node("fake-node").label("foo", "");
        assert_eq!(pod_hint(&target(), None, Some(new)), Queue);
    }

    #[test]
    fn add_unscheduled_pod() {
        let new = pod("p2").label("foo", "");
        assert_eq!(pod_hint(&target(), None, Some(new)), QueueSkip);
    }

    #[test]
    fn update_unscheduled_pod() {
        let old = pod("p2").label("bar", "");
        let new = pod("p2").label("foo", "");
        assert_eq!(pod_hint(&target(), Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn delete_unscheduled_pod() {
        let old = pod("p2").label("foo", "");
        assert_eq!(pod_hint(&target(), Some(old), None), QueueSkip);
    }

    #[test]
    fn add_pod_with_different_namespace() {
        let new = pod("p2")
            .node("fake-node")
            .namespace("fake-namespace")
            .label("foo", "");
        assert_eq!(pod_hint(&target(), None, Some(new)), QueueSkip);
    }

    #[test]
    fn add_pod_with_labels_not_matching_the_selector() {
        let new = pod("p2").node("fake-node").label("bar", "");
        assert_eq!(pod_hint(&target(), None, Some(new)), QueueSkip);
    }

    #[test]
    fn delete_pod_with_labels_matching_the_selector() {
        let old = pod("p2").node("fake-node").label("foo", "");
        assert_eq!(pod_hint(&target(), Some(old), None), Queue);
    }

    #[test]
    fn delete_pod_with_labels_not_matching_the_selector() {
        let old = pod("p2").node("fake-node").label("bar", "");
        assert_eq!(pod_hint(&target(), Some(old), None), QueueSkip);
    }

    #[test]
    fn update_pods_non_related_label() {
        let old = pod("p2")
            .node("fake-node")
            .label("foo", "")
            .label("bar", "bar1");
        let new = pod("p2")
            .node("fake-node")
            .label("foo", "")
            .label("bar", "bar2");
        assert_eq!(pod_hint(&target(), Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn add_pods_label_that_matches_the_selector() {
        let old = pod("p2").node("fake-node");
        let new = pod("p2").node("fake-node").label("foo", "");
        assert_eq!(pod_hint(&target(), Some(old), Some(new)), Queue);
    }

    #[test]
    fn delete_pods_label_that_matches_the_selector() {
        let old = pod("p2").node("fake-node").label("foo", "");
        let new = pod("p2").node("fake-node");
        assert_eq!(pod_hint(&target(), Some(old), Some(new)), Queue);
    }

    #[test]
    fn change_pods_label_that_matches_the_selector() {
        let old = pod("p2").node("fake-node").label("foo", "foo1");
        let new = pod("p2").node("fake-node").label("foo", "foo2");
        assert_eq!(pod_hint(&target(), Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn change_pods_label_that_does_not_match_the_selector() {
        let old = pod("p2")
            .node("fake-node")
            .label("foo", "")
            .label("bar", "bar1");
        let new = pod("p2")
            .node("fake-node")
            .label("foo", "")
            .label("bar", "bar2");
        assert_eq!(pod_hint(&target(), Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn add_pods_label_that_matches_with_two_constraints() {
        let old = pod("p2").node("fake-node").label("foo", "");
        let new = pod("p2")
            .node("fake-node")
            .label("foo", "")
            .label("bar", "bar2");
        assert_eq!(pod_hint(&target_two(), Some(old), Some(new)), Queue);
    }

    #[test]
    fn change_pods_label_that_does_not_match_with_two_constraints() {
        let old = pod("p2").node("fake-node").label("foo", "");
        let new = pod("p2")
            .node("fake-node")
            .label("foo", "")
            .label("baz", "");
        assert_eq!(pod_hint(&target_two(), Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn change_pods_label_that_matches_with_two_constraints() {
        let old = pod("p2")
            .node("fake-node")
            .label("foo", "")
            .label("bar", "");
        let new = pod("p2")
            .node("fake-node")
            .label("foo", "")
            .label("bar", "bar2");
        assert_eq!(pod_hint(&target_two(), Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn the_pod_gets_a_toleration_with_node_taints_policy_honor() {
        let pending = pod("p")
            .label("foo", "")
            .spread("zone", exists("foo"), Some(NodeInclusionPolicy::Honor))
            .spread("node", exists("bar"), None);
        let old = pod("p").label("foo", "");
        let new = pod("p")
            .label("foo", "")
            .toleration("node.kubernetes.io/unschedulable");
        assert_eq!(pod_hint(&pending, Some(old), Some(new)), Queue);
    }

    #[test]
    fn the_pod_gets_a_toleration_without_node_taints_policy_honor() {
        let pending = pod("p")
            .label("foo", "")
            .spread("zone", exists("foo"), Some(NodeInclusionPolicy::Ignore))
            .spread("node", exists("bar"), None);
        let old = pod("p").label("foo", "");
        let new = pod("p")
            .label("foo", "")
            .toleration("node.kubernetes.io/unschedulable");
        assert_eq!(pod_hint(&pending, Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn the_pod_gets_a_label_matching_a_selector() {
        let pending = pod("p")
            .label("foo", "")
            .spread("zone", exists("foo"), Some(NodeInclusionPolicy::Ignore))
            .spread("node", exists("bar"), None);
        let (old, new) = (pod("p"), pod("p").label("foo", ""));
        assert_eq!(pod_hint(&pending, Some(old), Some(new)), Queue);
    }

    #[test]
    fn the_pod_gets_an_unrelated_label() {
        let pending = pod("p")
            .label("foo", "")
            .spread("zone", exists("foo"), Some(NodeInclusionPolicy::Ignore))
            .spread("node", exists("bar"), None);
        let (old, new) = (pod("p"), pod("p").label("unrelated", ""));
        assert_eq!(pod_hint(&pending, Some(old), Some(new)), QueueSkip);
    }

    // Berth's own pod cases.

    #[test]
    fn default_constraints_select_by_the_default_selector() {
        let pl = PodTopologySpread::with_args(
            SpreadArgs::from_json(json!({
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                        "whenUnsatisfiable": "DoNotSchedule"}]
            }))
            .unwrap(),
        );
        let mut pending = pod("p").label("app", "web").0;
        pending.default_selector = Some(LabelSelector {
            match_labels: [("app".to_owned(), "web".to_owned())].into(),
            match_expressions: vec![],
        });
        let event = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
        let web = pod("w").node("n").label("app", "web").obj();
        let db = pod("d").node("n").label("app", "db").obj();
        assert_eq!(
            pl.queueing_hint(&event, &pending, Some(&web), None),
            Ok(Queue)
        );
        assert_eq!(
            pl.queueing_hint(&event, &pending, Some(&db), None),
            Ok(QueueSkip)
        );
    }

    #[test]
    fn schedule_anyway_constraints_do_not_count() {
        let mut pending = target();
        pending.0.topology_spread_constraints[0].when_unsatisfiable =
            WhenUnsatisfiable::ScheduleAnyway;
        let old = pod("p2").node("fake-node").label("foo", "");
        assert_eq!(pod_hint(&pending, Some(old), None), QueueSkip);
    }

    #[test]
    fn registrations() {
        let events = PodTopologySpread::events().unwrap();
        assert!(events.iter().all(|r| r.has_hint));
        let covered = |resource, actions| {
            berth_sdk::events::is_registered(&events, &ClusterEvent::new(resource, actions))
        };
        use ActionType as A;
        use EventResource as R;
        for a in [A::ADD, A::UPDATE_POD_LABEL, A::DELETE] {
            assert!(covered(R::AssignedPod, a));
        }
        assert!(!covered(R::AssignedPod, A::UPDATE_POD_SCALE_DOWN));
        assert!(covered(R::UnscheduledPod, A::UPDATE_POD_LABEL));
        assert!(covered(R::UnscheduledPod, A::UPDATE_POD_TOLERATION));
        assert!(!covered(R::UnscheduledPod, A::UPDATE_OTHER));
        for a in [
            A::ADD,
            A::DELETE,
            A::UPDATE_NODE_LABEL,
            A::UPDATE_NODE_TAINT,
        ] {
            assert!(covered(R::Node, a));
        }
        assert!(!covered(R::Node, A::UPDATE_NODE_ALLOCATABLE));
        assert!(!covered(R::Namespace, A::ALL));
    }
}
