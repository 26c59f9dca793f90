//! What filtering and scoring share, as upstream's `common.go`: the constraints as the
//! plugin uses them, which pods they count and which nodes take part.

use berth_sdk::types::{
    LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, NodeInclusionPolicy,
    TopologySpreadConstraint, WhenUnsatisfiable, find_untolerated_taint,
};
use berth_sdk::{Labels, Node, Pod, Taint, TaintEffect};
use serde::{Deserialize, Serialize};

/// The well-known hostname label; scoring counts a node's own pods for it.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// The well-known zone label.
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";

/// A spread constraint with its selector resolved, as upstream's internal
/// `topologySpreadConstraint`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Constraint {
    /// The largest allowed skew.
    pub max_skew: i32,
    /// The node label that defines domains.
    pub topology_key: String,
    /// Which pods count; `None` is a nil selector, which selects nothing.
    pub selector: Option<LabelSelector>,
    /// Fewest eligible domains before the global minimum is taken as 0 (default 1).
    pub min_domains: i32,
    /// Only nodes matching the pod's node selector and required node affinity count
    /// (nodeAffinityPolicy Honor, the default).
    pub honor_node_affinity: bool,
    /// Only nodes whose NoSchedule/NoExecute taints the pod tolerates count
    /// (nodeTaintsPolicy Honor; the default is Ignore).
    pub honor_node_taints: bool,
}

impl Constraint {
    /// Whether an existing pod's labels count for this constraint. As upstream's
    /// `countPodsMatchSelector`, an empty selector counts no pod.
    pub fn counts_labels(&self, labels: &Labels) -> bool {
        self.selector
            .as_ref()
            .is_some_and(|s| !s.is_empty() && s.matches(labels))
    }

    /// Whether the incoming pod matches the selector (an empty one matches it).
    pub fn self_matches(&self, labels: &Labels) -> bool {
        self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }

    /// How many of `pods` this constraint counts: in `namespace`, not terminating,
    /// matching the selector.
    pub fn count_pods(&self, pods: &[Pod], namespace: &str) -> i64 {
        let Some(selector) = self.selector.as_ref().filter(|s| !s.is_empty()) else {
            return 0;
        };
        let n = pods
            .iter()
            // Terminating pods are on their way out (upstream #87621).
            .filter(|p| !p.terminating && p.namespace == namespace)
            .filter(|p| selector.matches(&p.labels))
            .count();
        i64::try_from(n).unwrap_or(i64::MAX)
    }

    /// Upstream's `matchNodeInclusionPolicies`: whether the node takes part in this
    /// constraint's counts. `affinity_matches` is the pod's required node affinity
    /// evaluated on the node, computed once per node by the caller.
    pub fn includes_node(&self, pod: &Pod, node: &Node, affinity_matches: bool) -> bool {
        if self.honor_node_affinity && !affinity_matches {
            return false;
        }
        if self.honor_node_taints {
            let hard =
                |t: &Taint| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute);
            if find_untolerated_taint(&node.taints, &pod.tolerations, hard).is_some() {
                return false;
            }
        }
        true
    }
}

/// Whether the node satisfies the pod's `nodeSelector` and required node affinity,
/// as upstream's `GetRequiredNodeAffinity(pod).Match(node)`.
pub fn required_node_affinity_matches(pod: &Pod, node: &Node) -> bool {
    let selector_ok = pod
        .node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    if !selector_ok {
        return false;
    }
    match pod
        .affinity
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
    {
        // The terms are ORed; an empty list matches no node.
        Some(terms) => terms.iter().any(|t| t.matches(&node.labels, &node.name)),
        None => true,
    }
}

/// Whether the node has every constraint's topology label (upstream's
/// `nodeLabelsMatchSpreadConstraints`).
pub fn node_has_all_keys(labels: &Labels, constraints: &[Constraint]) -> bool {
    constraints
        .iter()
        .all(|c| labels.contains_key(&c.topology_key))
}

/// Upstream's `filterTopologySpreadConstraints`: the constraints with the given
/// action, with defaults applied and `matchLabelKeys` merged into the selector.
pub fn resolve_constraints(
    constraints: &[TopologySpreadConstraint],
    pod_labels: &Labels,
    action: WhenUnsatisfiable,
) -> Vec<Constraint> {
    constraints
        .iter()
        .filter(|c| c.when_unsatisfiable == action)
        .map(|c| Constraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector: c
                .label_selector
                .as_ref()
                .map(|s| merge_match_label_keys(s, &c.match_label_keys, pod_labels)),
            min_domains: c.min_domains.unwrap_or(1),
            honor_node_affinity: c.node_affinity_policy != Some(NodeInclusionPolicy::Ignore),
            honor_node_taints: c.node_taints_policy == Some(NodeInclusionPolicy::Honor),
        })
        .collect()
}

/// ANDs `key In (value)` into the selector for each key the pod has a label for.
/// Added as expressions rather than `matchLabels` so a key the selector already
/// constrains keeps both requirements, as upstream's merged selector does.
fn merge_match_label_keys(
    selector: &LabelSelector,
    keys: &[String],
    pod_labels: &Labels,
) -> LabelSelector {
    let mut merged = selector.clone();
    for key in keys {
        if let Some(value) = pod_labels.get(key) {
            merged.match_expressions.push(LabelSelectorRequirement {
                key: key.clone(),
                operator: LabelSelectorOperator::In,
                values: vec![value.clone()],
            });
        }
    }
    merged
}

/// Upstream's `buildDefaultConstraints`: the default constraints with the action,
/// selecting what the pod's Services, ReplicaSets and StatefulSets select. None
/// apply when nothing selects the pod.
pub fn default_constraints(
    defaults: &[TopologySpreadConstraint],
    pod: &Pod,
    action: WhenUnsatisfiable,
) -> Vec<Constraint> {
    let Some(selector) = pod.default_selector.as_ref().filter(|s| !s.is_empty()) else {
        return Vec::new();
    };
    let mut constraints = resolve_constraints(defaults, &pod.labels, action);
    for c in &mut constraints {
        c.selector = Some(selector.clone());
    }
    constraints
}

/// The pod's constraints with the action: its own, or the defaults when it has none.
pub fn pod_constraints(
    defaults: &[TopologySpreadConstraint],
    pod: &Pod,
    action: WhenUnsatisfiable,
) -> Vec<Constraint> {
    if pod.topology_spread_constraints.is_empty() {
        default_constraints(defaults, pod, action)
    } else {
        resolve_constraints(&pod.topology_spread_constraints, &pod.labels, action)
    }
}

/// The CycleState key of one domain's count: `<prefix>/<constraint index>/<value>`.
/// Counts live under their own keys so Filter and Score read only the domain of the
/// node at hand, however many domains there are.
pub fn count_key(prefix: &str, constraint: usize, value: &str) -> String {
    let mut key = String::with_capacity(prefix.len() + value.len() + 4);
    push_count_key(&mut key, prefix, constraint, value);
    key
}

/// Runs `f` on the [`count_key`] of a domain, built in a buffer kept for the next
/// call: Filter and Score look one up for every node, and an allocation (and a
/// `format!`) per node showed in the profile of the sandboxed plugin.
pub fn with_count_key<R>(
    prefix: &str,
    constraint: usize,
    value: &str,
    f: impl FnOnce(&str) -> R,
) -> R {
    thread_local! {
        static KEY: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    }
    KEY.with_borrow_mut(|key| {
        key.clear();
        push_count_key(key, prefix, constraint, value);
        f(key)
    })
}

fn push_count_key(key: &mut String, prefix: &str, constraint: usize, value: &str) {
    use std::fmt::Write;
    key.push_str(prefix);
    // Writing an integer into a String cannot fail.
    let _ = write!(key, "/{constraint}/");
    key.push_str(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::types::{
        NodeAffinity, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm,
    };

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn spread(selector: Option<LabelSelector>, keys: &[&str]) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "zone".into(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            label_selector: selector,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: keys.iter().map(|k| (*k).into()).collect(),
        }
    }

    fn exists(key: &str) -> LabelSelector {
        LabelSelector {
            match_labels: Labels::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: key.into(),
                operator: LabelSelectorOperator::Exists,
                values: vec![],
            }],
        }
    }

    #[test]
    fn defaults_of_a_constraint() {
        let c = &resolve_constraints(
            &[spread(Some(exists("foo")), &[])],
            &Labels::new(),
            WhenUnsatisfiable::DoNotSchedule,
        )[0];
        assert_eq!(c.min_domains, 1);
        assert!(c.honor_node_affinity);
        assert!(!c.honor_node_taints);
        assert!(
            resolve_constraints(
                &[spread(None, &[])],
                &Labels::new(),
                WhenUnsatisfiable::ScheduleAnyway
            )
            .is_empty()
        );
    }

    #[test]
    fn nil_and_empty_selectors() {
        let pod_labels = labels(&[("foo", "")]);
        let nil = &resolve_constraints(
            &[spread(None, &["foo"])],
            &pod_labels,
            WhenUnsatisfiable::DoNotSchedule,
        )[0];
        // A nil selector stays nil even with matchLabelKeys.
        assert_eq!(nil.selector, None);
        assert!(!nil.self_matches(&pod_labels));
        assert!(!nil.counts_labels(&pod_labels));
        let empty = &resolve_constraints(
            &[spread(Some(LabelSelector::default()), &[])],
            &pod_labels,
            WhenUnsatisfiable::DoNotSchedule,
        )[0];
        // An empty selector matches the incoming pod but counts no existing pod.
        assert!(empty.self_matches(&pod_labels));
        assert!(!empty.counts_labels(&pod_labels));
    }

    #[test]
    fn match_label_keys_are_anded() {
        let pod_labels = labels(&[("foo", ""), ("bar", "a")]);
        let c = &resolve_constraints(
            &[spread(Some(exists("foo")), &["bar", "missing"])],
            &pod_labels,
            WhenUnsatisfiable::DoNotSchedule,
        )[0];
        assert!(c.counts_labels(&labels(&[("foo", ""), ("bar", "a")])));
        assert!(!c.counts_labels(&labels(&[("foo", ""), ("bar", "b")])));
        assert!(!c.counts_labels(&labels(&[("foo", "")])));
        // On an empty selector the merged keys make it count pods.
        let c = &resolve_constraints(
            &[spread(Some(LabelSelector::default()), &["bar"])],
            &pod_labels,
            WhenUnsatisfiable::DoNotSchedule,
        )[0];
        assert!(c.counts_labels(&labels(&[("bar", "a")])));
        assert!(!c.counts_labels(&labels(&[("bar", "b")])));
    }

    #[test]
    fn required_node_affinity() {
        let node = Node {
            name: "n1".into(),
            labels: labels(&[("zone", "a"), ("disk", "ssd")]),
            ..Node::default()
        };
        let mut pod = Pod::default();
        assert!(required_node_affinity_matches(&pod, &node));
        pod.node_selector = labels(&[("disk", "ssd")]);
        assert!(required_node_affinity_matches(&pod, &node));
        pod.node_selector = labels(&[("disk", "hdd")]);
        assert!(!required_node_affinity_matches(&pod, &node));
        pod.node_selector = Labels::new();
        let term = |values: &[&str]| NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement {
                key: "zone".into(),
                operator: NodeSelectorOperator::In,
                values: values.iter().map(|v| (*v).into()).collect(),
            }],
            match_fields: vec![],
        };
        pod.affinity.node_affinity = Some(NodeAffinity {
            required: Some(vec![term(&["b"]), term(&["a"])]),
            preferred: vec![],
        });
        assert!(required_node_affinity_matches(&pod, &node));
        pod.affinity.node_affinity = Some(NodeAffinity {
            required: Some(vec![]),
            preferred: vec![],
        });
        assert!(!required_node_affinity_matches(&pod, &node));
    }

    #[test]
    fn count_keys_are_prefix_index_value_however_built() {
        assert_eq!(count_key("PTS/pre", 2, "zone-a"), "PTS/pre/2/zone-a");
        with_count_key("PTS/pre", 2, "zone-a", |k| {
            assert_eq!(k, "PTS/pre/2/zone-a")
        });
        // The buffer is reused: a shorter key leaves nothing of the longer one.
        with_count_key("P", 0, "", |k| assert_eq!(k, "P/0/"));
    }
}
