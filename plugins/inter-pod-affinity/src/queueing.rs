//! The events that may make a pod InterPodAffinity rejected schedulable, and the
//! hints that sort them, as upstream's `EventsToRegister`,
//! `isSchedulableAfterPodChange` and `isSchedulableAfterNodeChange`.
//!
//! Filter rejects a node when the pod's required affinity finds no matching pod in
//! the node's domain, when its required anti-affinity finds one, or when an existing
//! pod's required anti-affinity matches the pod. So a bound pod that appears,
//! changes labels or goes away may help, as may the pod's own label change, and a
//! node whose topology labels appear, change or go away.

use berth_sdk::events::objects;
use berth_sdk::{
    ActionType, ClusterEvent, EnqueueExtensions, EventRegistration, EventResource, Node, Object,
    Pod, QueueingHint,
};

use crate::InterPodAffinity;
use crate::terms::{self, IncomingNamespace, NamespaceCache, Term, matches_all};

use QueueingHint::{Queue, QueueSkip};

/// The registrations, all with the hint:
/// - AssignedPod Add, UpdatePodLabel, Delete: a bound pod that starts or stops
///   matching a term.
/// - UnscheduledPod UpdatePodLabel: the pod's own labels decide whether existing
///   pods' anti-affinity (and its own affinity to itself) match it. (Upstream
///   registers its `Pod` resource, bound and pending alike; Berth's queue delivers
///   only the pod's own updates as UnscheduledPod events.)
/// - Node Add, UpdateNodeLabel: topology domains appear or change. Upstream adds
///   UpdateNodeTaint only when queueing hints are off (for its preCheck); Berth's
///   queue always asks the hints.
pub fn events() -> Vec<EventRegistration> {
    vec![
        EventRegistration::with_hint(
            EventResource::AssignedPod,
            ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE,
        ),
        EventRegistration::with_hint(EventResource::UnscheduledPod, ActionType::UPDATE_POD_LABEL),
        EventRegistration::with_hint(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
        ),
    ]
}

/// The value of a node's label.
fn value<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.labels.get(key).map(String::as_str)
}

/// Whether some anti-affinity term matched `old` and no longer matches `new` (a
/// domain it blocked may be free now).
fn some_anti_term_released(anti: &[Term], old: &Pod, new: &Pod, ns: &mut NamespaceCache) -> bool {
    anti.iter()
        .any(|t| t.matches(old, &mut *ns) && !t.matches(new, &mut *ns))
}

impl InterPodAffinity {
    /// Upstream's `isSchedulableAfterPodChange`.
    pub fn is_schedulable_after_pod_change(
        &self,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = objects(old, new, Object::as_pod, "pod")?;
        if let Some(m) = modified
            && m.uid == pod.uid
        {
            // The pod itself: new labels may make existing pods' anti-affinity stop
            // matching it, or its affinity to pods like itself hold.
            let relabelled = original.is_none_or(|o| o.labels != m.labels);
            return Ok(if relabelled { Queue } else { QueueSkip });
        }
        if modified.is_some_and(|m| m.node_name.is_empty())
            || original.is_some_and(|o| o.node_name.is_empty())
        {
            // Only bound pods are counted.
            return Ok(QueueSkip);
        }
        let affinity = terms::required(pod, &pod.affinity.pod_affinity.required)?;
        let anti = terms::required(pod, &pod.affinity.pod_anti_affinity.required)?;
        // The pod's terms select namespaces by each other pod's namespace labels.
        let mut ns = NamespaceCache::default();
        match (original, modified) {
            (Some(original), Some(modified)) => {
                // A single pod must match every affinity term.
                if !matches_all(&affinity, original, &mut ns)
                    && matches_all(&affinity, modified, &mut ns)
                {
                    return Ok(Queue);
                }
                if some_anti_term_released(&anti, original, modified, &mut ns) {
                    return Ok(Queue);
                }
                Ok(QueueSkip)
            }
            (None, Some(added)) => Ok(if matches_all(&affinity, added, &mut ns) {
                Queue
            } else {
                QueueSkip
            }),
            (Some(deleted), None) => {
                if anti.iter().any(|t| t.matches(deleted, &mut ns)) {
                    return Ok(Queue);
                }
                // The deleted pod's own anti-affinity may have kept the pod away; its
                // terms select namespaces by the pod's namespace labels.
                let theirs =
                    terms::existing_required(deleted, &deleted.affinity.pod_anti_affinity.required);
                let mut incoming = IncomingNamespace::new(&pod.namespace);
                Ok(if theirs.iter().any(|t| t.matches(pod, &mut incoming)) {
                    Queue
                } else {
                    QueueSkip
                })
            }
            (None, None) => Err("the event has no pod".into()),
        }
    }

    /// Upstream's `isSchedulableAfterNodeChange`. For the pod's affinity terms: a
    /// node added with a term's topology key, or updated to gain the key or change
    /// its value. For its anti-affinity terms: any node added (a node without the key
    /// never violates anti-affinity), or a node updated to lose a term's key or
    /// change its value.
    pub fn is_schedulable_after_node_change(
        &self,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = objects(old, new, Object::as_node, "node")?;
        let modified = modified.ok_or("the event has no new node")?;
        let affinity = terms::required(pod, &pod.affinity.pod_affinity.required)?;
        for t in &affinity {
            let is = value(modified, t.topology_key);
            let helps = match original {
                None => is.is_some(),
                Some(original) => is.is_some() && value(original, t.topology_key) != is,
            };
            if helps {
                return Ok(Queue);
            }
        }
        let anti = terms::required(pod, &pod.affinity.pod_anti_affinity.required)?;
        for t in &anti {
            let Some(original) = original else {
                return Ok(Queue);
            };
            let was = value(original, t.topology_key);
            if was.is_some() && value(modified, t.topology_key) != was {
                return Ok(Queue);
            }
        }
        Ok(QueueSkip)
    }
}

impl EnqueueExtensions for InterPodAffinity {
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
            _ => Ok(Queue),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Upstream's `Test_isSchedulableAfterPodChange` and
    //! `Test_isSchedulableAfterNodeChange`, and Berth's own cases.

    use super::*;
    use berth_sdk::types::{
        LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, PodAffinityTerm,
    };
    use berth_sdk::{Labels, Plugin, serde_json::Value};

    fn plugin() -> InterPodAffinity {
        InterPodAffinity::new(Value::Null).unwrap()
    }

    fn selector(key: &str, op: LabelSelectorOperator, values: &[&str]) -> LabelSelector {
        LabelSelector {
            match_labels: Labels::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: key.into(),
                operator: op,
                values: values.iter().map(|v| (*v).into()).collect(),
            }],
        }
    }

    fn term(selector: LabelSelector, topology_key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(selector),
            topology_key: topology_key.into(),
            ..PodAffinityTerm::default()
        }
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

    /// The `service In (securityscan, value2)` selector of upstream's cases.
    fn securityscan() -> LabelSelector {
        selector(
            "service",
            LabelSelectorOperator::In,
            &["securityscan", "value2"],
        )
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
        fn affinity(mut self, selector: LabelSelector, key: &str) -> P {
            self.0
                .affinity
                .pod_affinity
                .required
                .push(term(selector, key));
            self
        }
        fn anti_affinity(mut self, selector: LabelSelector, key: &str) -> P {
            self.0
                .affinity
                .pod_anti_affinity
                .required
                .push(term(selector, key));
            self
        }
        fn affinity_exists(self, label: &str, key: &str) -> P {
            self.affinity(selector(label, LabelSelectorOperator::Exists, &[]), key)
        }
        fn obj(self) -> Object {
            Object::Pod(self.0)
        }
    }

    fn pod_hint(pending: &P, old: Option<P>, new: Option<P>) -> QueueingHint {
        let actions = match (&old, &new) {
            (Some(_), Some(_)) => ActionType::UPDATE_POD_LABEL,
            (None, _) => ActionType::ADD,
            (_, None) => ActionType::DELETE,
        };
        let resource = if new
            .as_ref()
            .or(old.as_ref())
            .unwrap()
            .0
            .node_name
            .is_empty()
        {
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

    fn node_hint(pending: &P, old: Option<Node>, new: Node) -> QueueingHint {
        let actions = if old.is_some() {
            ActionType::UPDATE_NODE_LABEL
        } else {
            ActionType::ADD
        };
        let (old, new) = (old.map(Object::Node), Object::Node(new));
        plugin()
            .queueing_hint(
                &ClusterEvent::new(EventResource::Node, actions),
                &pending.0,
                old.as_ref(),
                Some(&new),
            )
            .unwrap()
    }

    /// The pending pod of upstream's affinity cases: affinity to securityscan pods
    /// by region.
    fn with_affinity() -> P {
        pod("p").affinity(securityscan(), "region")
    }

    /// The pending pod of upstream's anti-affinity cases.
    fn with_anti_affinity() -> P {
        pod("p").anti_affinity(securityscan(), "region")
    }

    // Test_isSchedulableAfterPodChange.

    #[test]
    fn add_a_pod_which_matches_the_pod_affinity() {
        let new = pod("other")
            .node("fake-node")
            .label("service", "securityscan");
        assert_eq!(pod_hint(&with_affinity(), None, Some(new)), Queue);
    }

    #[test]
    fn add_an_unscheduled_pod() {
        let new = pod("other").label("service", "securityscan");
        assert_eq!(pod_hint(&with_affinity(), None, Some(new)), QueueSkip);
    }

    #[test]
    fn add_a_pod_which_does_not_match_the_pod_affinity() {
        let new = pod("other").node("fake-node").label("aaa", "a");
        assert_eq!(pod_hint(&with_affinity(), None, Some(new)), QueueSkip);
    }

    #[test]
    fn update_a_pod_from_non_match_to_match_pod_affinity() {
        let old = pod("other").node("fake-node").label("aaa", "a");
        let new = pod("other")
            .node("fake-node")
            .label("service", "securityscan");
        assert_eq!(pod_hint(&with_affinity(), Some(old), Some(new)), Queue);
    }

    #[test]
    fn the_updating_pod_matches_before_and_after() {
        let old = pod("other").node("fake-node").label("service", "value2");
        let new = pod("other")
            .node("fake-node")
            .label("service", "securityscan");
        assert_eq!(pod_hint(&with_affinity(), Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn update_an_unscheduled_pod() {
        let old = pod("other").label("aaa", "a");
        let new = pod("other").label("service", "securityscan");
        assert_eq!(pod_hint(&with_affinity(), Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn update_a_pod_from_match_to_non_match_the_pod_affinity() {
        let old = pod("other")
            .node("fake-node")
            .label("service", "securityscan");
        let new = pod("other").node("fake-node").label("aaa", "a");
        assert_eq!(pod_hint(&with_affinity(), Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn update_a_pod_from_match_to_non_match_multiple_terms() {
        let pending = pod("p")
            .affinity_exists("aaa", "hostname")
            .affinity_exists("bbb", "hostname");
        let old = pod("other").node("fake-node").label("aaa", "a");
        let new = pod("other")
            .node("fake-node")
            .label("service", "securityscan");
        assert_eq!(pod_hint(&pending, Some(old), Some(new)), QueueSkip);
    }

    #[test]
    fn update_a_pod_from_non_match_to_match_multiple_terms() {
        let pending = pod("p")
            .affinity_exists("aaa", "hostname")
            .affinity_exists("bbb", "hostname");
        let old = pod("other").node("fake-node").label("aaa", "a");
        let new = pod("other")
            .node("fake-node")
            .label("aaa", "")
            .label("bbb", "");
        assert_eq!(pod_hint(&pending, Some(old), Some(new)), Queue);
    }

    #[test]
    fn updated_pod_is_the_target_pod() {
        let pending = pod("p").label("foo", "baz");
        let old = pod("p").label("foo", "bar");
        let new = pod("p").label("foo", "baz");
        assert_eq!(pod_hint(&pending, Some(old), Some(new)), Queue);
    }

    #[test]
    fn pod_label_changes_from_matching_anti_affinity_to_not() {
        let old = pod("other")
            .node("fake-node")
            .label("service", "securityscan");
        let new = pod("other").node("fake-node").label("service", "aaaa");
        assert_eq!(pod_hint(&with_anti_affinity(), Some(old), Some(new)), Queue);
    }

    #[test]
    fn pod_label_changes_from_not_matching_anti_affinity_to_matching() {
        let old = pod("other").node("fake-node").label("service", "bbb");
        let new = pod("other")
            .node("fake-node")
            .label("service", "securityscan");
        assert_eq!(
            pod_hint(&with_anti_affinity(), Some(old), Some(new)),
            QueueSkip
        );
    }

    #[test]
    fn delete_a_pod_which_does_not_match_anti_affinity() {
        let old = pod("other").node("fake-node").label("aaa", "a");
        assert_eq!(pod_hint(&with_anti_affinity(), Some(old), None), QueueSkip);
    }

    #[test]
    fn delete_a_pod_which_matches_anti_affinity() {
        let old = pod("other")
            .node("fake-node")
            .label("service", "securityscan");
        assert_eq!(pod_hint(&with_anti_affinity(), Some(old), None), Queue);
    }

    #[test]
    fn delete_a_pod_with_anti_affinity_that_matches_the_pending_pod() {
        let pending = pod("p").label("service", "securityscan");
        let old = pod("other")
            .node("fake-node")
            .anti_affinity(securityscan(), "region");
        assert_eq!(pod_hint(&pending, Some(old), None), Queue);
    }

    #[test]
    fn delete_a_pod_with_anti_affinity_that_does_not_match_the_pending_pod() {
        let pending = pod("p").label("service", "foo");
        let old = pod("other")
            .node("fake-node")
            .anti_affinity(securityscan(), "region");
        assert_eq!(pod_hint(&pending, Some(old), None), QueueSkip);
    }

    #[test]
    fn delete_a_pod_neither_matching_nor_matched_by_anti_affinity() {
        let pending = with_anti_affinity().label("service", "foo");
        let old = pod("other")
            .node("fake-node")
            .anti_affinity(securityscan(), "region")
            .label("service", "foo");
        assert_eq!(pod_hint(&pending, Some(old), None), QueueSkip);
    }

    // Berth's own pod cases.

    #[test]
    fn pods_of_other_namespaces_do_not_match_default_terms() {
        let new = pod("other")
            .node("fake-node")
            .namespace("elsewhere")
            .label("service", "securityscan");
        assert_eq!(pod_hint(&with_affinity(), None, Some(new)), QueueSkip);
        let old = pod("other")
            .node("fake-node")
            .namespace("elsewhere")
            .anti_affinity(securityscan(), "region");
        let pending = pod("p").label("service", "securityscan");
        assert_eq!(pod_hint(&pending, Some(old), None), QueueSkip);
    }

    #[test]
    fn one_released_anti_affinity_term_is_enough() {
        // Upstream asks that the pod match every anti-affinity term; each term blocks
        // its domains on its own, so releasing one may help.
        let pending = with_anti_affinity()
            .anti_affinity(selector("tier", LabelSelectorOperator::Exists, &[]), "zone");
        let gone = pod("other").node("fake-node").label("tier", "db");
        assert_eq!(pod_hint(&pending, Some(gone.clone()), None), Queue);
        let relabelled = pod("other").node("fake-node").label("role", "db");
        assert_eq!(pod_hint(&pending, Some(gone), Some(relabelled)), Queue);
    }

    #[test]
    fn the_target_pod_updated_without_label_change_is_skipped() {
        let pending = pod("p").label("foo", "bar");
        let old = pod("p").label("foo", "bar");
        assert_eq!(pod_hint(&pending, Some(old.clone()), Some(old)), QueueSkip);
    }

    #[test]
    fn a_selector_that_does_not_parse_is_an_error() {
        let pending =
            pod("p").affinity(selector("service", LabelSelectorOperator::In, &[]), "zone");
        let new = pod("other").node("fake-node").obj();
        assert!(
            plugin()
                .is_schedulable_after_pod_change(&pending.0, None, Some(&new))
                .is_err()
        );
        assert!(
            plugin()
                .is_schedulable_after_node_change(&pending.0, None, Some(&Object::Node(node(&[]))))
                .is_err()
        );
    }

    // Test_isSchedulableAfterNodeChange.

    fn zone_affinity() -> P {
        pod("p").affinity(securityscan(), "zone")
    }

    fn zone_anti_affinity() -> P {
        let another = LabelSelector {
            match_labels: [("another".to_owned(), "label".to_owned())].into(),
            match_expressions: vec![],
        };
        pod("p").anti_affinity(another, "zone")
    }

    #[test]
    fn add_a_node_with_the_affinity_topology_key() {
        assert_eq!(
            node_hint(&zone_affinity(), None, node(&[("zone", "zone1")])),
            Queue
        );
    }

    #[test]
    fn add_a_node_without_the_affinity_topology_key() {
        let pending = pod("p").affinity(securityscan(), "region");
        assert_eq!(
            node_hint(&pending, None, node(&[("zone", "zone1")])),
            QueueSkip
        );
    }

    #[test]
    fn update_node_label_but_not_topology_key() {
        let (old, new) = (node(&[("aaa", "a")]), node(&[("aaa", "b")]));
        assert_eq!(node_hint(&zone_affinity(), Some(old), new), QueueSkip);
    }

    #[test]
    fn update_node_label_unrelated_to_affinity() {
        let old = node(&[("zone", "zone1")]);
        let new = node(&[("zone", "zone1"), ("unrelated-label", "unrelated")]);
        assert_eq!(node_hint(&zone_affinity(), Some(old), new), QueueSkip);
    }

    #[test]
    fn update_node_with_different_affinity_topology_value() {
        let (old, new) = (node(&[("zone", "zone1")]), node(&[("zone", "zone2")]));
        assert_eq!(node_hint(&zone_affinity(), Some(old), new), Queue);
    }

    #[test]
    fn update_node_to_have_the_affinity_topology_label() {
        let (old, new) = (node(&[("aaa", "a")]), node(&[("zone", "zone1")]));
        assert_eq!(node_hint(&zone_affinity(), Some(old), new), Queue);
    }

    #[test]
    fn add_a_node_with_the_anti_affinity_topology_key() {
        assert_eq!(
            node_hint(&zone_anti_affinity(), None, node(&[("zone", "zone1")])),
            Queue
        );
    }

    #[test]
    fn add_a_node_without_the_anti_affinity_topology_key() {
        assert_eq!(node_hint(&zone_anti_affinity(), None, node(&[])), Queue);
    }

    #[test]
    fn update_node_label_unrelated_to_anti_affinity() {
        let old = node(&[("zone", "zone1")]);
        let new = node(&[("zone", "zone1"), ("unrelated-label", "unrelated")]);
        assert_eq!(node_hint(&zone_anti_affinity(), Some(old), new), QueueSkip);
    }

    #[test]
    fn update_node_with_different_anti_affinity_topology_value() {
        let (old, new) = (node(&[("zone", "zone1")]), node(&[("zone", "zone2")]));
        assert_eq!(node_hint(&zone_anti_affinity(), Some(old), new), Queue);
    }

    #[test]
    fn update_node_to_have_the_anti_affinity_topology_label() {
        let (old, new) = (node(&[("aaa", "a")]), node(&[("zone", "zone1")]));
        assert_eq!(node_hint(&zone_anti_affinity(), Some(old), new), QueueSkip);
    }

    #[test]
    fn update_node_to_lose_the_anti_affinity_topology_label() {
        let (old, new) = (node(&[("zone", "zone1")]), node(&[("aaa", "a")]));
        assert_eq!(node_hint(&zone_anti_affinity(), Some(old), new), Queue);
    }

    // Berth's own node cases.

    #[test]
    fn a_pod_without_terms_skips_node_events() {
        assert_eq!(
            node_hint(&pod("p"), None, node(&[("zone", "a")])),
            QueueSkip
        );
    }

    #[test]
    fn wrong_objects_are_errors() {
        let pl = plugin();
        let a_pod = Object::Pod(Pod::default());
        let a_node = Object::Node(Node::default());
        let p = zone_affinity().0;
        assert!(
            pl.is_schedulable_after_node_change(&p, None, Some(&a_pod))
                .is_err()
        );
        assert!(
            pl.is_schedulable_after_node_change(&p, Some(&a_node), None)
                .is_err()
        );
        assert!(
            pl.is_schedulable_after_pod_change(&p, Some(&a_node), None)
                .is_err()
        );
    }

    #[test]
    fn registrations() {
        let events = InterPodAffinity::events().unwrap();
        assert!(events.iter().all(|r| r.has_hint));
        let covered = |resource, actions| {
            berth_sdk::events::is_registered(&events, &ClusterEvent::new(resource, actions))
        };
        use ActionType as A;
        use EventResource as R;
        for a in [A::ADD, A::UPDATE_POD_LABEL, A::DELETE] {
            assert!(covered(R::AssignedPod, a));
        }
        assert!(covered(R::UnscheduledPod, A::UPDATE_POD_LABEL));
        assert!(!covered(R::UnscheduledPod, A::UPDATE_POD_TOLERATION));
        assert!(covered(R::Node, A::ADD));
        assert!(covered(R::Node, A::UPDATE_NODE_LABEL));
        assert!(!covered(R::Node, A::UPDATE_NODE_TAINT));
        assert!(!covered(R::Node, A::DELETE));
    }
}
