//! The events that may make a pod NodeAffinity rejected schedulable, and the hint
//! that sorts them, as upstream's `EventsToRegister` and
//! `isSchedulableAfterNodeChange`.
//!
//! Only a node's labels (and name) decide whether it matches, so only a node that
//! appears or whose labels change may help; and only when it now matches what the
//! pod requires (and the scheduler-enforced `addedAffinity`) and, for an update, did
//! not before.

use berth_sdk::events::node_change;
use berth_sdk::{
    ActionType, ClusterEvent, EnqueueExtensions, EventRegistration, EventResource, Node, Object,
    Pod, QueueingHint,
};

use crate::selector::{is_empty_term, selector_matches, term_errors};
use crate::{NodeAffinity, matches_node, required_terms};

/// Node Add and UpdateNodeLabel, with the hint. Upstream adds UpdateNodeTaint only
/// when queueing hints are off (its preCheck may drop a Node/Add); Berth's queue
/// always asks the hints, so it is not needed.
pub fn events() -> Vec<EventRegistration> {
    vec![EventRegistration::with_hint(
        EventResource::Node,
        ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
    )]
}

/// Upstream's `RequiredNodeAffinity.Match` reports the parse errors of the pod's
/// required terms when no valid term matches; Berth's matching ignores bad terms, so
/// the errors are looked for here.
fn required_terms_error(pod: &Pod) -> Option<String> {
    let terms = required_terms(pod)?;
    let errs: Vec<String> = terms
        .iter()
        .enumerate()
        .filter(|(_, t)| !is_empty_term(t))
        .flat_map(|(i, t)| term_errors(t, &format!("nodeSelectorTerms[{i}]")))
        .collect();
    crate::selector::aggregate(errs)
}

/// Whether the node matches what the pod requires; an error when it does not and
/// some required term does not parse (upstream then requeues the pod).
fn pod_matches(pod: &Pod, node: &Node) -> Result<bool, String> {
    if matches_node(pod, node) {
        return Ok(true);
    }
    match required_terms_error(pod) {
        Some(e) => Err(e),
        None => Ok(false),
    }
}

impl NodeAffinity {
    /// Upstream's `isSchedulableAfterNodeChange`.
    pub fn is_schedulable_after_node_change(
        &self,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = node_change(old, new)?;
        if let Some(added) = &self.args().added_required
            && !selector_matches(added, &modified.labels, &modified.name)
        {
            // The node does not match the scheduler-enforced affinity.
            return Ok(QueueingHint::QueueSkip);
        }
        if !pod_matches(pod, modified)? {
            return Ok(QueueingHint::QueueSkip);
        }
        let Some(original) = original else {
            // A new node that matches.
            return Ok(QueueingHint::Queue);
        };
        // An update helps only when the node did not match before.
        if pod_matches(pod, original)? {
            Ok(QueueingHint::QueueSkip)
        } else {
            Ok(QueueingHint::Queue)
        }
    }
}

impl EnqueueExtensions for NodeAffinity {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::Node => self.is_schedulable_after_node_change(pod, old, new),
            // Not registered: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Upstream's `Test_isSchedulableAfterNodeChange`, and Berth's own cases.

    use super::*;
    use berth_sdk::affinity::{
        NodeAffinity as PodNodeAffinity, NodeSelectorOperator, NodeSelectorRequirement,
        NodeSelectorTerm,
    };
    use berth_sdk::serde_json::{Value, json};
    use berth_sdk::{Plugin, Resources, types::Labels};

    use QueueingHint::{Queue, QueueSkip};

    fn plugin(args: Value) -> NodeAffinity {
        NodeAffinity::new(args).unwrap()
    }

    fn node(labels: &[(&str, &str)]) -> Object {
        Object::Node(Node {
            name: "node".into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            ..Node::default()
        })
    }

    fn term(key: &str, op: NodeSelectorOperator, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement {
                key: key.into(),
                operator: op,
                values: values.iter().map(|v| (*v).into()).collect(),
            }],
            match_fields: vec![],
        }
    }

    /// Upstream's `st.MakePod().NodeAffinityIn("foo", []string{"bar"}, ...)`.
    fn pod_with_node_affinity() -> Pod {
        let mut p = Pod {
            name: "pod".into(),
            ..Pod::default()
        };
        p.affinity.node_affinity = Some(PodNodeAffinity {
            required: Some(vec![term("foo", NodeSelectorOperator::In, &["bar"])]),
            preferred: vec![],
        });
        p
    }

    fn enforced_foo_bar() -> Value {
        json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "foo", "operator": "In", "values": ["bar"]}]}]}}})
    }

    fn hint(
        pl: &NodeAffinity,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> QueueingHint {
        let event = ClusterEvent::new(
            EventResource::Node,
            if old.is_some() {
                ActionType::UPDATE_NODE_LABEL
            } else {
                ActionType::ADD
            },
        );
        pl.queueing_hint(&event, pod, old, new).unwrap()
    }

    #[test]
    fn backoff_wrong_new_object() {
        let pl = plugin(Value::Null);
        let not_a_node = Object::Pod(Pod::default());
        assert!(
            pl.is_schedulable_after_node_change(&pod_with_node_affinity(), None, Some(&not_a_node))
                .is_err()
        );
    }

    #[test]
    fn backoff_wrong_old_object() {
        let pl = plugin(Value::Null);
        let not_a_node = Object::Pod(Pod::default());
        assert!(
            pl.is_schedulable_after_node_change(
                &pod_with_node_affinity(),
                Some(&not_a_node),
                Some(&node(&[]))
            )
            .is_err()
        );
    }

    #[test]
    fn skip_queue_on_add() {
        let pl = plugin(Value::Null);
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), None, Some(&node(&[]))),
            QueueSkip
        );
    }

    #[test]
    fn queue_on_add() {
        let pl = plugin(Value::Null);
        let new = node(&[("foo", "bar")]);
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), None, Some(&new)),
            Queue
        );
    }

    #[test]
    fn skip_unrelated_changes() {
        let pl = plugin(Value::Null);
        let mut changed = Node {
            name: "node".into(),
            ..Node::default()
        };
        changed.allocatable = Resources {
            milli_cpu: 1000,
            ..Resources::default()
        };
        let (old, new) = (node(&[]), Object::Node(changed));
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), Some(&old), Some(&new)),
            QueueSkip
        );
    }

    #[test]
    fn skip_unrelated_changes_on_labels() {
        let pl = plugin(Value::Null);
        let (old, new) = (node(&[]), node(&[("k", "v")]));
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), Some(&old), Some(&new)),
            QueueSkip
        );
    }

    #[test]
    fn skip_labels_changes_on_node_from_suitable_to_unsuitable() {
        let pl = plugin(Value::Null);
        let (old, new) = (node(&[("foo", "bar")]), node(&[("k", "v")]));
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), Some(&old), Some(&new)),
            QueueSkip
        );
    }

    #[test]
    fn queue_on_labels_change_makes_pod_schedulable() {
        let pl = plugin(Value::Null);
        let (old, new) = (node(&[]), node(&[("foo", "bar")]));
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), Some(&old), Some(&new)),
            Queue
        );
    }

    #[test]
    fn skip_queue_on_add_scheduler_enforced_node_affinity() {
        let pl = plugin(enforced_foo_bar());
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), None, Some(&node(&[]))),
            QueueSkip
        );
    }

    #[test]
    fn queue_on_add_scheduler_enforced_node_affinity() {
        let pl = plugin(enforced_foo_bar());
        let new = node(&[("foo", "bar")]);
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), None, Some(&new)),
            Queue
        );
    }

    // Berth's own cases.

    #[test]
    fn node_selector_counts_as_required() {
        let pl = plugin(Value::Null);
        let pod = Pod {
            node_selector: Labels::from([("disk".into(), "ssd".into())]),
            ..Pod::default()
        };
        let (old, new) = (node(&[("disk", "hdd")]), node(&[("disk", "ssd")]));
        assert_eq!(hint(&pl, &pod, Some(&old), Some(&new)), Queue);
        assert_eq!(hint(&pl, &pod, Some(&new), Some(&old)), QueueSkip);
        assert_eq!(hint(&pl, &pod, None, Some(&old)), QueueSkip);
    }

    #[test]
    fn enforced_affinity_skips_an_update_the_pod_would_like() {
        let pl = plugin(
            json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "pool", "operator": "Exists"}]}]}}}),
        );
        let (old, new) = (node(&[]), node(&[("foo", "bar")]));
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), Some(&old), Some(&new)),
            QueueSkip
        );
        let new = node(&[("foo", "bar"), ("pool", "a")]);
        assert_eq!(
            hint(&pl, &pod_with_node_affinity(), Some(&old), Some(&new)),
            Queue
        );
    }

    #[test]
    fn a_term_that_does_not_parse_requeues_with_an_error() {
        let pl = plugin(Value::Null);
        let mut pod = pod_with_node_affinity();
        pod.affinity.node_affinity = Some(PodNodeAffinity {
            required: Some(vec![term("foo", NodeSelectorOperator::Gt, &["x"])]),
            preferred: vec![],
        });
        let new = node(&[("foo", "bar")]);
        let err = pl
            .is_schedulable_after_node_change(&pod, None, Some(&new))
            .unwrap_err();
        assert!(err.contains("must be an integer"), "{err}");
    }

    #[test]
    fn registers_node_add_and_label_updates_with_a_hint() {
        let events = NodeAffinity::events().unwrap();
        assert_eq!(events.len(), 1);
        assert!(events[0].has_hint);
        let covers = |actions| {
            events[0]
                .event
                .covers(&ClusterEvent::new(EventResource::Node, actions))
        };
        assert!(covers(ActionType::ADD));
        assert!(covers(ActionType::UPDATE_NODE_LABEL));
        assert!(!covers(ActionType::UPDATE_NODE_TAINT));
        assert!(!covers(ActionType::DELETE));
        assert!(!events[0].event.covers(&ClusterEvent::new(
            EventResource::AssignedPod,
            ActionType::ADD
        )));
    }
}
