//! What one scheduling attempt did, as its observers need it: the cycle fills a
//! [`CycleRecord`] as it runs when asked to (a profile with shadow runs, or
//! `explain`), and shadows and `explain` read the decisions from it instead of
//! computing them again.

use berth_sdk::Status;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// What a cycle did, phase by phase.
#[derive(Debug, Default)]
pub struct CycleRecord {
    /// Explain's view: every Filter plugin runs on every node Filter visits, also
    /// after an earlier plugin rejected it (`verdicts` holds them all), and the
    /// attempt leaves the scheduler's round-robin start, batch and random source as
    /// they were (its pick among equal totals is the one the next cycle would make).
    /// Which nodes fit, and what the cycle decides, are the same as without it.
    pub explaining: bool,
    /// No plugin of the profile allocates the pod's claims: the plugin named in the
    /// verdict and its status (the attempt stopped before PreFilter).
    pub unallocated: Option<(&'static str, Status)>,
    /// The PreFilter answer of each plugin the cycle asked (Skip for a plugin that
    /// sits the pod out): its status and the nodes it narrowed to.
    pub pre_filter: BTreeMap<usize, (Status, Option<BTreeSet<String>>)>,
    /// The PreFilter plugin whose rejection ended the attempt.
    pub pre_filter_rejected: Option<usize>,
    /// Whether the cycle got to Filter.
    pub reached_filter: bool,
    /// Every node Filter ran on, and the plugin that rejected it first (`None`: it
    /// passed).
    pub filtered: BTreeMap<u32, Option<usize>>,
    /// When explaining: every rejection of each node Filter ran on (plugin,
    /// status), the first first; a plugin not listed let the node pass.
    pub verdicts: BTreeMap<u32, Vec<(usize, Status)>>,
    /// Nodes filtered with nominated pods counted.
    pub overlaid: HashSet<u32>,
    /// The feasible nodes, in the order scores are given.
    pub feasible: Vec<u32>,
    /// Whether Score ran (two feasible nodes or more).
    pub scored: bool,
    /// The Score plugins that did not score (sat out, Skip at PreScore, failed open
    /// at PreScore).
    pub skipped_score: HashSet<usize>,
    /// The raw scores of each plugin that scored, over `feasible`.
    pub raw: BTreeMap<usize, Vec<i64>>,
    /// The final (normalized, unweighted) scores of each plugin that scored; absent:
    /// it skipped at PreScore or failed open.
    pub scores: BTreeMap<usize, Vec<i64>>,
    /// The weighted totals of the feasible nodes.
    pub totals: Vec<i64>,
    /// The node the cycle picked.
    pub picked: Option<u32>,
}

impl CycleRecord {
    /// A record for `explain` (see [`CycleRecord::explaining`]).
    pub fn explaining() -> Self {
        CycleRecord {
            explaining: true,
            ..CycleRecord::default()
        }
    }

    /// Records one Filter round over `round`: each node's first rejection among
    /// `failed` (node, plugin, status; a node's first first), and when explaining
    /// every one of them.
    pub fn filtered_round(&mut self, round: &[u32], failed: &[(u32, usize, Status)]) {
        for &slot in round {
            self.filtered.entry(slot).or_insert(None);
        }
        for (slot, plugin, status) in failed {
            let first = self.filtered.entry(*slot).or_insert(None);
            if first.is_none() {
                *first = Some(*plugin);
            }
            if self.explaining {
                self.verdicts
                    .entry(*slot)
                    .or_default()
                    .push((*plugin, status.clone()));
            }
        }
    }
}
