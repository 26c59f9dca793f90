//! PreScore, Score and NormalizeScore for `ScheduleAnyway` constraints, as upstream's
//! `scoring.go`: a node's raw score grows with the matching pods in its domains, each
//! constraint weighted by how many domains its topology has; normalizing reverses it
//! so the emptiest domains score highest.

use std::collections::HashMap;

use berth_sdk::types::WhenUnsatisfiable;
use berth_sdk::{
    CycleState, MAX_NODE_SCORE, NodeInfo, NormalizeScore, Pod, PreScore, Score, StateKey, Status,
};
use serde::{Deserialize, Serialize};

use crate::common::{
    Constraint, LABEL_HOSTNAME, count_key, node_has_all_keys, required_node_affinity_matches,
    with_count_key,
};
use crate::{CountKey, PodTopologySpread};

/// The CycleState key of what PreScore computes (upstream's key); the per-domain
/// counts live under keys with this prefix.
pub const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";
/// [`PRE_SCORE_STATE_KEY`] with its value.
static PRE_SCORE_STATE: StateKey<PreScoreState> = StateKey::new(PRE_SCORE_STATE_KEY);

/// The raw score of a node that lacks a required topology label (upstream's
/// `invalidScore`); NormalizeScore turns it into 0 and leaves it out of the range.
pub const IGNORED_SCORE: i64 = -1;

/// A soft constraint with its topology's weight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct ScoreConstraint {
    constraint: Constraint,
    weight: f64,
}

/// What PreScore stores under [`PRE_SCORE_STATE_KEY`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct PreScoreState {
    constraints: Vec<ScoreConstraint>,
    /// Nodes missing any topology label are ignored (not with system defaults, so
    /// nodes without a zone still get hostname spreading).
    require_all_topologies: bool,
}

/// Upstream's `topologyNormalizingWeight`: `ln(size + 2)`, so constraints over few
/// domains are not watered down by ones over many.
///
/// `libm::log`, not `f64::ln`: std's calls the platform's C library (glibc natively,
/// wasi-libc in the guest), whose last bit differs from Go's `math.Log` for about 1%
/// of sizes, and between the two for some (size 277860), while a twin must score as
/// its component does. libm's is the FreeBSD algorithm Go's follows, in plain Rust:
/// the same bits on every target, and Go's bits for every size below 10^6.
pub fn topology_normalizing_weight(size: usize) -> f64 {
    libm::log(size as f64 + 2.0)
}

/// Upstream's `scoreForCount`: `maxSkew - 1` is added so that small differences
/// between domains matter less for a tolerant constraint.
pub fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    count as f64 * weight + f64::from(max_skew - 1)
}

fn missing_state() -> Status {
    Status::error(format!(
        "error reading {PRE_SCORE_STATE_KEY:?} from cycleState: not found"
    ))
}

impl PreScore for PodTopologySpread {
    fn pre_score(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        all_nodes: &[&NodeInfo],
    ) -> Status {
        if all_nodes.is_empty() {
            return Status::skip();
        }
        let constraints = self.constraints(pod, WhenUnsatisfiable::ScheduleAnyway);
        if constraints.is_empty() {
            return Status::skip();
        }
        let require_all = !pod.topology_spread_constraints.is_empty() || !self.system_defaulted;
        let has_keys =
            |info: &NodeInfo| !require_all || node_has_all_keys(&info.node.labels, &constraints);

        // The domains of the feasible nodes; only they are ever scored. A missing
        // label is domain "" here, as upstream (it only sizes the topology).
        let mut counts: Vec<HashMap<&str, i64>> = vec![HashMap::new(); constraints.len()];
        let mut scored_nodes = 0usize;
        for info in nodes.iter().filter(|n| has_keys(n)) {
            scored_nodes += 1;
            for (c, domains) in constraints.iter().zip(counts.iter_mut()) {
                // Per-node counts are taken in Score.
                if c.topology_key != LABEL_HOSTNAME {
                    let value = info
                        .node
                        .labels
                        .get(&c.topology_key)
                        .map_or("", String::as_str);
                    domains.entry(value).or_insert(0);
                }
            }
        }
        let weights: Vec<f64> = constraints
            .iter()
            .zip(&counts)
            .map(|(c, domains)| {
                let size = if c.topology_key == LABEL_HOSTNAME {
                    scored_nodes
                } else {
                    domains.len()
                };
                topology_normalizing_weight(size)
            })
            .collect();

        // The matching pods of every domain over all nodes, kept node by node across
        // cycles; only the domains of feasible nodes are read.
        self.pre_score_counts.count(
            CountKey::of(pod, &constraints, require_all),
            all_nodes,
            |info, part| {
                if !has_keys(info) {
                    return;
                }
                let node = &info.node;
                let affinity_matches = required_node_affinity_matches(pod, node);
                for (i, c) in constraints.iter().enumerate() {
                    // Per-node counts are taken in Score.
                    if c.topology_key == LABEL_HOSTNAME
                        || !c.includes_node(pod, node, affinity_matches)
                    {
                        continue;
                    }
                    let value = node.labels.get(&c.topology_key).map_or("", String::as_str);
                    part.add(
                        i,
                        &c.topology_key,
                        value,
                        c.count_pods(&info.pods, &pod.namespace),
                    );
                }
            },
            |totals| {
                for (i, (c, domains)) in constraints.iter().zip(counts.iter_mut()).enumerate() {
                    let Some(sums) = totals.table(i).get(&c.topology_key) else {
                        continue;
                    };
                    for (value, total) in domains.iter_mut() {
                        *total += sums.get(*value).copied().unwrap_or(0);
                    }
                }
            },
        );

        let header = PreScoreState {
            constraints: constraints
                .into_iter()
                .zip(weights)
                .map(|(constraint, weight)| ScoreConstraint { constraint, weight })
                .collect(),
            require_all_topologies: require_all,
        };
        state.set(&PRE_SCORE_STATE, &header);
        for (i, domains) in counts.iter().enumerate() {
            // An absent key reads as 0, so empty domains need no write.
            for (value, &n) in domains.iter().filter(|(_, n)| **n != 0) {
                state.write(&count_key(PRE_SCORE_STATE_KEY, i, value), &n);
            }
        }
        Status::success()
    }
}

impl Score for PodTopologySpread {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let s = state.value(&PRE_SCORE_STATE).ok_or_else(missing_state)?;
        let labels = &node.node.labels;
        let all_keys = s
            .constraints
            .iter()
            .all(|c| labels.contains_key(&c.constraint.topology_key));
        if s.require_all_topologies && !all_keys {
            return Ok(IGNORED_SCORE);
        }
        let mut score = 0.0;
        for (i, sc) in s.constraints.iter().enumerate() {
            let c = &sc.constraint;
            let Some(value) = labels.get(&c.topology_key) else {
                continue;
            };
            let count = if c.topology_key == LABEL_HOSTNAME {
                c.count_pods(&node.pods, &pod.namespace)
            } else {
                with_count_key(PRE_SCORE_STATE_KEY, i, value, |key| {
                    state.get::<i64>(key).map_or(0, |n| *n)
                })
            };
            score += score_for_count(count, c.max_skew, sc.weight);
        }
        // Rounds half away from zero, as Go's math.Round.
        Ok(score.round() as i64)
    }
}

impl NormalizeScore for PodTopologySpread {
    fn normalize_score(&self, state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        if state.read::<PreScoreState>(PRE_SCORE_STATE_KEY).is_none() {
            return missing_state();
        }
        let valid = || scores.iter().copied().filter(|s| *s != IGNORED_SCORE);
        let min = valid().min().unwrap_or(i64::MAX);
        let max = valid().fold(0, i64::max);
        for s in scores.iter_mut() {
            *s = if *s == IGNORED_SCORE {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                // Reversed: the fewest matching pods gets the most. Widened so large
                // raw scores cannot overflow.
                let (s0, min, max) = (i128::from(*s), i128::from(min), i128::from(max));
                (i128::from(MAX_NODE_SCORE) * (max + min - s0) / max) as i64
            };
        }
        Status::success()
    }
}
