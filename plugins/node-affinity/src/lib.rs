//! NodeAffinity: as upstream's `nodeaffinity` plugin, keeps the pod on nodes that
//! match its `nodeSelector` and one of its required node affinity terms (and the
//! scheduler-enforced `addedAffinity`), and scores nodes by the summed weights of the
//! preferred terms they match.
//!
//! PreFilter narrows the nodes to those a term names through `matchFields` on
//! `metadata.name`, when every term does. Args (JSON, kube-scheduler's
//! `NodeAffinityArgs`):
//!
//! ```json
//! {
//!   "addedAffinity": {
//!     "requiredDuringSchedulingIgnoredDuringExecution": {
//!       "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}]
//!     },
//!     "preferredDuringSchedulingIgnoredDuringExecution": [
//!       {"weight": 10, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}
//!     ]
//!   }
//! }
//! ```

pub mod args;
pub mod queueing;
pub mod selector;

use std::collections::BTreeSet;

use berth_sdk::affinity::{NodeSelectorOperator, NodeSelectorTerm, PreferredSchedulingTerm};
use berth_sdk::{
    CycleState, Filter, MAX_NODE_SCORE, Node, NodeInfo, NormalizeScore, Plugin, Pod, PreFilter,
    PreFilterResult, PreScore, Score, Sign, SignFragment, Status, helpers::default_normalize_score,
    sign,
};

pub use args::NodeAffinityArgs;
use selector::{NODE_NAME_FIELD, preferred_score, selector_matches, usable_preferred_terms};

/// The reason when the node does not match the pod's node selector or affinity.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// The reason when the node does not match the args' `addedAffinity`.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// The reason when the pod's terms name no node at all.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// The plugin.
pub struct NodeAffinity {
    args: NodeAffinityArgs,
}

impl NodeAffinity {
    /// Builds the plugin from validated args.
    pub fn with_args(args: NodeAffinityArgs) -> Self {
        NodeAffinity { args }
    }

    /// The args in force.
    pub fn args(&self) -> &NodeAffinityArgs {
        &self.args
    }
}

impl Plugin for NodeAffinity {
    const NAME: &'static str = "NodeAffinity";
    fn new(args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        NodeAffinityArgs::from_json(args).map(NodeAffinity::with_args)
    }

    // Without a selector or affinity of the pod's own, PreFilter and PreScore answer
    // Skip, unless `addedAffinity` applies to every pod.
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        if self.args.added_required.is_some() || self.args.added_preferred.is_some() {
            &[]
        } else {
            &[berth_sdk::PodFeature::NodeAffinity]
        }
    }

    fn events() -> Option<Vec<berth_sdk::EventRegistration>> {
        Some(queueing::events())
    }
}

/// The pod's required node affinity terms; `None` when it has none (not even an empty
/// list).
fn required_terms(pod: &Pod) -> Option<&[NodeSelectorTerm]> {
    pod.affinity
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_deref())
}

/// The pod's preferred node affinity terms.
fn preferred_terms(pod: &Pod) -> &[PreferredSchedulingTerm] {
    pod.affinity
        .node_affinity
        .as_ref()
        .map_or(&[], |a| a.preferred.as_slice())
}

/// Whether the node matches the pod's `nodeSelector` (every label, exactly) and, if
/// it has any, its required node affinity terms (ORed), as upstream's
/// `RequiredNodeAffinity.Match`.
pub fn matches_pod_requirements(pod: &Pod, node: &NodeInfo) -> bool {
    matches_node(pod, &node.node)
}

/// [`matches_pod_requirements`] on a bare node (queueing hints see nodes, not node
/// infos).
pub fn matches_node(pod: &Pod, node: &Node) -> bool {
    let labels = &node.labels;
    pod.node_selector
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && required_terms(pod).is_none_or(|terms| selector_matches(terms, labels, &node.name))
}

/// The nodes the pod's required terms name through `matchFields` (`metadata.name`
/// `In`), as upstream's PreFilter: `None` when some term leaves the name free (the
/// terms are ORed); an empty set when the terms name no node at all.
pub fn node_names_from_terms(terms: &[NodeSelectorTerm]) -> Option<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for term in terms {
        let mut term_names: Option<BTreeSet<String>> = None;
        for r in &term.match_fields {
            if r.key == NODE_NAME_FIELD && r.operator == NodeSelectorOperator::In {
                let values: BTreeSet<String> = r.values.iter().cloned().collect();
                // The requirements of a term are ANDed.
                term_names = Some(match term_names {
                    None => values,
                    Some(seen) => seen.intersection(&values).cloned().collect(),
                });
            }
        }
        names.extend(term_names?);
    }
    Some(names)
}

impl PreFilter for NodeAffinity {
    fn pre_filter(&self, _state: &CycleState, pod: &Pod, _nodes: &[&NodeInfo]) -> PreFilterResult {
        let required = required_terms(pod);
        // Filter has nothing to check. An empty nodeSelector counts as none: Berth's
        // pod cannot tell `{}` from an absent one, and both select every node.
        if required.is_none() && self.args.added_required.is_none() && pod.node_selector.is_empty()
        {
            return Status::skip().into();
        }
        // Filter recomputes the match from the pod, so no state is written.
        let Some(terms) = required.filter(|t| !t.is_empty()) else {
            return Status::success().into();
        };
        match node_names_from_terms(terms) {
            None => Status::success().into(),
            Some(names) if names.is_empty() => Status::unresolvable(ERR_REASON_CONFLICT).into(),
            Some(names) => PreFilterResult {
                status: Status::success(),
                node_names: Some(names.into_iter().collect()),
            },
        }
    }
}

impl Filter for NodeAffinity {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if let Some(terms) = &self.args.added_required
            && !selector_matches(terms, &node.node.labels, node.name())
        {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
        // Terms upstream cannot parse match nothing; their errors are not reported.
        if matches_pod_requirements(pod, node) {
            Status::success()
        } else {
            // Preemption cannot change a node's labels.
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl PreScore for NodeAffinity {
    fn pre_score(
        &self,
        _state: &CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        _all_nodes: &[&NodeInfo],
    ) -> Status {
        let preferred = preferred_terms(pod);
        if let Err(err) = usable_preferred_terms(preferred, "") {
            return Status::error(err);
        }
        // An empty list counts as none: Berth's pod cannot tell it from an absent one.
        if preferred.is_empty() && self.args.added_preferred.is_none() {
            return Status::skip();
        }
        // Score recomputes the weights from the pod, so no state is written.
        Status::success()
    }
}

impl Score for NodeAffinity {
    fn score(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let (labels, name) = (&node.node.labels, node.name());
        let added: Vec<&PreferredSchedulingTerm> =
            self.args.added_preferred.iter().flatten().collect();
        let pod_terms = usable_preferred_terms(preferred_terms(pod), "").map_err(Status::error)?;
        Ok(preferred_score(&added, labels, name) + preferred_score(&pod_terms, labels, name))
    }
}

impl NormalizeScore for NodeAffinity {
    fn normalize_score(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        // More matched weight is better.
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

impl Sign for NodeAffinity {
    /// PreFilter, Filter, PreScore and Score read the pod's `nodeSelector` and node
    /// affinity; `addedAffinity` is the instance's, the same for every pod.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::node_affinity(pod)])
    }
}

berth_sdk::export_plugin!(
    NodeAffinity: queueing_hint,
    pre_filter,
    filter,
    pre_score,
    score,
    normalize_score,
    sign_pod
);

#[cfg(test)]
mod tests;
