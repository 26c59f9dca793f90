//! PreScore, Score and NormalizeScore, as upstream's `scoring.go`: PreScore sums, per
//! topology domain, the weights of the terms that tie the incoming pod to existing
//! pods in either direction; Score adds up the domains of a node.

use berth_sdk::{DomainMemo, Labels, MAX_NODE_SCORE, NodeInfo, Pod};
use serde::{Deserialize, Serialize};

use crate::InterPodAffinityArgs;
use crate::filtering::TopologyCounts;
use crate::terms::{self, IncomingNamespace, NamespaceCache, PodKey, PodTerms};

/// The CycleState key of what PreScore computes (upstream's key).
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreInterPodAffinity";
/// The CycleState key of the id of that state (see
/// [`PRE_FILTER_ID_KEY`](crate::PRE_FILTER_ID_KEY)).
pub const PRE_SCORE_ID_KEY: &str = "PreScoreInterPodAffinity/id";

/// What PreScore computes for Score and NormalizeScore (upstream's `preScoreState`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreScoreState {
    /// Summed weights by topology key and value; positive attracts, negative repels.
    pub topology_score: TopologyCounts,
}

/// Whether the incoming pod has preferred affinity or anti-affinity terms.
pub fn has_preferred_terms(pod: &Pod) -> bool {
    !pod.affinity.pod_affinity.preferred.is_empty()
        || !pod.affinity.pod_anti_affinity.preferred.is_empty()
}

/// Sums the weights over every node of the snapshot, from scratch; `None` when no
/// term matched on a node with its topology key, where upstream answers Skip.
pub fn compute(
    args: &InterPodAffinityArgs,
    pod: &Pod,
    terms: &PodTerms,
    all_nodes: &[&NodeInfo],
) -> Option<TopologyCounts> {
    compute_kept(&DomainMemo::new(), args, pod, terms, all_nodes)
}

/// [`compute`], walking again only the nodes that changed since `memo` last summed
/// for a pod with the same [`PodKey`] (the args do not change for an instance).
pub fn compute_kept(
    memo: &DomainMemo<PodKey>,
    args: &InterPodAffinityArgs,
    pod: &Pod,
    terms: &PodTerms,
    all_nodes: &[&NodeInfo],
) -> Option<TopologyCounts> {
    let mut incoming_ns = IncomingNamespace::new(&pod.namespace);
    let mut ns_cache = NamespaceCache::default();
    let hard_weight = i64::from(args.hard_pod_affinity_weight);
    memo.count(
        PodKey::of(pod),
        all_nodes,
        |node, part| {
            let labels = &node.node.labels;
            // A node without labels is in no domain.
            if labels.is_empty() {
                return;
            }
            let mut bump = |key: &str, weight: i64| {
                if let Some(value) = labels.get(key) {
                    part.add(0, key, value, weight);
                }
            };
            for existing in &node.pods {
                // The incoming pod's preferences towards the existing pod.
                for t in &terms.preferred_affinity {
                    if t.matches(existing, &mut ns_cache) {
                        bump(t.topology_key, t.weight);
                    }
                }
                for t in &terms.preferred_anti_affinity {
                    if t.matches(existing, &mut ns_cache) {
                        bump(t.topology_key, -t.weight);
                    }
                }
                // The existing pod's terms towards the incoming pod.
                let a = &existing.affinity;
                if a.pod_affinity.is_empty() && a.pod_anti_affinity.is_empty() {
                    continue;
                }
                if hard_weight > 0 {
                    let required = &a.pod_affinity.required;
                    for t in
                        terms::existing_required_matching(existing, required, pod, &mut incoming_ns)
                    {
                        bump(t.topology_key, hard_weight);
                    }
                }
                let preferred = &a.pod_affinity.preferred;
                for t in
                    terms::existing_preferred_matching(existing, preferred, pod, &mut incoming_ns)
                {
                    bump(t.topology_key, t.weight);
                }
                let preferred = &a.pod_anti_affinity.preferred;
                for t in
                    terms::existing_preferred_matching(existing, preferred, pod, &mut incoming_ns)
                {
                    bump(t.topology_key, -t.weight);
                }
            }
            // Namespace labels change without any node changing.
            if incoming_ns.consulted() || ns_cache.consulted() {
                part.volatile();
            }
        },
        |totals| {
            // A domain some term matched in is there even when its weights sum to 0.
            totals.any().then(|| totals.take_table(0))
        },
    )
}

/// The raw score of a node: the sum of its domains' weights.
pub fn score(topology_score: &TopologyCounts, labels: &Labels) -> i64 {
    topology_score
        .iter()
        .filter_map(|(key, by_value)| by_value.get(labels.get(key)?))
        .sum()
}

/// Min-max normalization to [0, 100], as upstream: the lowest score becomes 0, the
/// highest 100, in float arithmetic truncated towards zero; all 0 when every score is
/// equal.
pub fn normalize(scores: &mut [i64]) {
    let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
        return;
    };
    // Widened so extreme raw scores cannot overflow the difference.
    let diff = i128::from(max) - i128::from(min);
    for s in scores.iter_mut() {
        let f = if diff > 0 {
            MAX_NODE_SCORE as f64 * ((i128::from(*s) - i128::from(min)) as f64 / diff as f64)
        } else {
            0.0
        };
        *s = f as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(scores: &[i64]) -> Vec<i64> {
        let mut s = scores.to_vec();
        normalize(&mut s);
        s
    }

    #[test]
    fn normalization_is_min_max() {
        assert_eq!(normalized(&[2, 10, 0]), [20, 100, 0]);
        assert_eq!(normalized(&[-5, 0, 0]), [0, 100, 100]);
        assert_eq!(normalized(&[8, 8]), [0, 0]);
        assert_eq!(normalized(&[-3, -1, -2]), [0, 100, 50]);
        // Truncated, not rounded.
        assert_eq!(normalized(&[0, 1, 3]), [0, 33, 100]);
        assert_eq!(normalized(&[0, 2, 3]), [0, 66, 100]);
        assert_eq!(normalized(&[i64::MIN, i64::MAX]), [0, 100]);
        assert_eq!(normalized(&[]), Vec::<i64>::new());
    }
}
