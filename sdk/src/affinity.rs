//! Node affinity, pod (anti-)affinity, label selectors and topology spread
//! constraints, with the matching rules of Kubernetes.

use crate::types::Labels;
use serde::{Deserialize, Serialize};

/// The operator of a node selector requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeSelectorOperator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label exists.
    Exists,
    /// The label does not exist.
    DoesNotExist,
    /// The label's value, as an integer, is greater than the one value.
    Gt,
    /// The label's value, as an integer, is less than the one value.
    Lt,
}

/// One requirement of a node selector term.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSelectorRequirement {
    /// The label key (or, in `match_fields`, the field: only `metadata.name`).
    pub key: String,
    /// The operator.
    pub operator: NodeSelectorOperator,
    /// The values.
    pub values: Vec<String>,
}

impl NodeSelectorRequirement {
    /// Whether a value (None: the key is absent) satisfies the requirement.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        use NodeSelectorOperator::*;
        match self.operator {
            In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Exists => value.is_some(),
            DoesNotExist => value.is_none(),
            Gt | Lt => {
                let (Some(v), [bound]) = (value, self.values.as_slice()) else {
                    return false;
                };
                match (v.parse::<i64>(), bound.parse::<i64>()) {
                    (Ok(v), Ok(b)) if self.operator == Gt => v > b,
                    (Ok(v), Ok(b)) => v < b,
                    _ => false,
                }
            }
        }
    }
}

/// A node selector term: every requirement must hold (an empty term matches nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSelectorTerm {
    /// Requirements on node labels.
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// Requirements on node fields (`metadata.name`).
    pub match_fields: Vec<NodeSelectorRequirement>,
}

impl NodeSelectorTerm {
    /// Whether the node (its labels and name) satisfies the term, as upstream's
    /// `nodeaffinity` helpers: a term with no requirements matches nothing.
    pub fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        self.match_expressions
            .iter()
            .all(|r| r.matches_value(labels.get(&r.key).map(String::as_str)))
            && self
                .match_fields
                .iter()
                .all(|r| r.key == "metadata.name" && r.matches_value(Some(node_name)))
    }
}

/// A preferred node selector term with its weight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreferredSchedulingTerm {
    /// 1..=100.
    pub weight: i32,
    /// The term.
    pub preference: NodeSelectorTerm,
}

/// `spec.affinity.nodeAffinity`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAffinity {
    /// `requiredDuringSchedulingIgnoredDuringExecution`: any term must match (ORed).
    /// `None` when not set; `Some(vec![])` matches no node.
    pub required: Option<Vec<NodeSelectorTerm>>,
    /// `preferredDuringSchedulingIgnoredDuringExecution`.
    pub preferred: Vec<PreferredSchedulingTerm>,
}

/// The operator of a label selector requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LabelSelectorOperator {
    /// The value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label exists.
    Exists,
    /// The label does not exist.
    DoesNotExist,
}

/// A requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: LabelSelectorOperator,
    /// The values.
    pub values: Vec<String>,
}

/// A label selector (`metav1.LabelSelector`): every part must hold; an empty selector
/// matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelector {
    /// `matchLabels`.
    pub match_labels: Labels,
    /// `matchExpressions`.
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// Whether the labels satisfy the selector.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator {
                    LabelSelectorOperator::In => value.is_some_and(|v| r.values.contains(v)),
                    LabelSelectorOperator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                    LabelSelectorOperator::Exists => value.is_some(),
                    LabelSelectorOperator::DoesNotExist => value.is_none(),
                }
            })
    }

    /// Whether the selector has no requirements (it matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// A pod (anti-)affinity term.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodAffinityTerm {
    /// Which pods; `None` matches no pod (as upstream: a nil selector selects nothing).
    pub label_selector: Option<LabelSelector>,
    /// Namespaces to look in; with no namespaces and no namespace selector, the pod's
    /// own namespace.
    pub namespaces: Vec<String>,
    /// Namespaces to look in, by their labels; an empty selector means every
    /// namespace.
    pub namespace_selector: Option<LabelSelector>,
    /// The node label that defines the topology domain.
    pub topology_key: String,
    /// Label keys whose values, taken from the incoming pod, are added to the selector
    /// with `In`.
    pub match_label_keys: Vec<String>,
    /// Label keys whose values, taken from the incoming pod, are added with `NotIn`.
    pub mismatch_label_keys: Vec<String>,
}

/// A weighted pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightedPodAffinityTerm {
    /// 1..=100.
    pub weight: i32,
    /// The term.
    pub term: PodAffinityTerm,
}

/// `podAffinity` or `podAntiAffinity`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodAffinity {
    /// `requiredDuringSchedulingIgnoredDuringExecution`.
    pub required: Vec<PodAffinityTerm>,
    /// `preferredDuringSchedulingIgnoredDuringExecution`.
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

impl PodAffinity {
    /// Whether there are no terms.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

/// `spec.affinity`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Affinity {
    /// Node affinity, if set.
    pub node_affinity: Option<NodeAffinity>,
    /// Pod affinity.
    pub pod_affinity: PodAffinity,
    /// Pod anti-affinity.
    pub pod_anti_affinity: PodAffinity,
}

/// What to do when a topology spread constraint cannot be met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    /// Filter: do not schedule.
    DoNotSchedule,
    /// Score only.
    ScheduleAnyway,
}

/// Whether node affinity or taints count when computing skew.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeInclusionPolicy {
    /// Only nodes that pass count.
    Honor,
    /// Every node counts.
    Ignore,
}

/// `spec.topologySpreadConstraints[*]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologySpreadConstraint {
    /// The largest allowed difference between domains.
    pub max_skew: i32,
    /// The node label that defines domains.
    pub topology_key: String,
    /// Filter or score.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Which pods count; `None` counts none.
    pub label_selector: Option<LabelSelector>,
    /// The fewest eligible domains (DoNotSchedule only).
    pub min_domains: Option<i32>,
    /// Whether node affinity filters the nodes that count (default Honor).
    pub node_affinity_policy: Option<NodeInclusionPolicy>,
    /// Whether taints filter the nodes that count (default Ignore).
    pub node_taints_policy: Option<NodeInclusionPolicy>,
    /// Label keys whose values from the incoming pod are added to the selector.
    pub match_label_keys: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn req(key: &str, op: NodeSelectorOperator, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op,
            values: values.iter().map(|v| (*v).into()).collect(),
        }
    }

    #[test]
    fn node_selector_operators() {
        use NodeSelectorOperator::*;
        let l = labels(&[("zone", "a"), ("cores", "8")]);
        let term = |r| NodeSelectorTerm {
            match_expressions: vec![r],
            match_fields: vec![],
        };
        assert!(term(req("zone", In, &["a", "b"])).matches(&l, "n"));
        assert!(!term(req("zone", NotIn, &["a"])).matches(&l, "n"));
        assert!(term(req("missing", NotIn, &["a"])).matches(&l, "n"));
        assert!(term(req("zone", Exists, &[])).matches(&l, "n"));
        assert!(term(req("missing", DoesNotExist, &[])).matches(&l, "n"));
        assert!(term(req("cores", Gt, &["4"])).matches(&l, "n"));
        assert!(!term(req("cores", Lt, &["4"])).matches(&l, "n"));
        assert!(!term(req("zone", Gt, &["4"])).matches(&l, "n"));
        assert!(!NodeSelectorTerm::default().matches(&l, "n"));
        let by_name = NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![req("metadata.name", In, &["n"])],
        };
        assert!(by_name.matches(&l, "n"));
        assert!(!by_name.matches(&l, "m"));
    }

    #[test]
    fn label_selectors() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        assert!(LabelSelector::default().matches(&l));
        let s = LabelSelector {
            match_labels: labels(&[("app", "web")]),
            match_expressions: vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: LabelSelectorOperator::NotIn,
                values: vec!["back".into()],
            }],
        };
        assert!(s.matches(&l));
        assert!(!s.matches(&labels(&[("app", "db")])));
    }
}
