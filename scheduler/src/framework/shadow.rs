//! Shadow runs: a candidate module beside a live plugin, run on the same cycles with
//! the same inputs, its answers compared with the live plugin's and never used.
//!
//! What is compared, per scheduling cycle of a pod:
//! - **filter**: PreFilter's verdict and node list, and Filter's verdict on every node
//!   the live plugin was asked about (the nodes that reached it in the profile's
//!   Filter order; nodes with nominated pods overlaid are left out);
//! - **score**: the normalized scores of the nodes the cycle found feasible (when
//!   there were at least two, as upstream scores only then);
//! - **node**: whether the node the cycle picked would still be among the best,
//!   among the feasible nodes the candidate lets through, with the candidate's scores
//!   in place of the live plugin's (weight unchanged);
//! - **error**: the candidate failed (an Error status, a trap, a bad answer).
//!
//! The candidate runs on the scheduling thread after the cycle decided, in its own
//! instance with its own cycle state, and its failures are only counted: the pod's
//! placement is the live plugin's. Its Reserve, Permit and binding points never run.

use super::{
    CyclePod, CycleRecord, CycleState, Framework, InstanceSet, PluginError, PluginInstance,
    PluginSlot, lock,
};
use berth_runtime::cache::Snapshot;
use berth_sdk::{Code, ExtensionPoint, MAX_NODE_SCORE, MIN_NODE_SCORE};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

/// How many disagreements a shadow keeps to show (the oldest go first).
pub const RECENT_DISAGREEMENTS: usize = 1000;
/// How many nodes a disagreement's detail names before "and N more".
const NAMED_NODES: usize = 3;

/// A candidate module beside a live plugin of a profile.
pub(super) struct ShadowSlot {
    /// The live plugin's index in the profile.
    pub live: usize,
    /// The candidate, as a one-plugin set (so instances are made and remade as the
    /// live ones are).
    pub candidate: Box<[PluginSlot]>,
    pub instances: Mutex<InstanceSet>,
    pub stats: Arc<Mutex<ShadowStats>>,
}

/// One pod's disagreement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disagreement {
    /// `namespace/name`.
    pub pod: String,
    /// The pod's uid.
    pub uid: String,
    /// What disagreed: `filter`, `score`, `node`, `error`.
    pub kinds: Vec<&'static str>,
    /// What each side answered, in words.
    pub detail: String,
}

/// What a shadow has seen so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowStats {
    /// The profile's scheduler name.
    pub profile: String,
    /// The live plugin.
    pub plugin: String,
    /// The candidate module (its path).
    pub candidate: String,
    /// Its sha256.
    pub sha256: String,
    /// Its version.
    pub version: String,
    /// Cycles the candidate was compared on.
    pub cycles: u64,
    /// Cycles in which it disagreed (on anything).
    pub disagreeing_cycles: u64,
    /// Disagreements by kind.
    pub by_kind: BTreeMap<&'static str, u64>,
    /// The latest disagreements, oldest first (at most [`RECENT_DISAGREEMENTS`]).
    pub recent: VecDeque<Disagreement>,
}

/// What one comparison found.
#[derive(Default)]
struct Findings {
    kinds: Vec<&'static str>,
    details: Vec<String>,
}

impl Findings {
    fn add(&mut self, kind: &'static str, detail: String) {
        if !self.kinds.contains(&kind) {
            self.kinds.push(kind);
        }
        self.details.push(detail);
    }
}

fn rejects(code: Code) -> bool {
    matches!(
        code,
        Code::Unschedulable | Code::UnschedulableAndUnresolvable
    )
}

fn names(slots: &[u32], snapshot: &Snapshot) -> String {
    let mut out: Vec<&str> = slots
        .iter()
        .take(NAMED_NODES)
        .map(|s| snapshot.node(*s).map_or("<gone>", |n| n.name()))
        .collect();
    out.dedup();
    let more = slots.len().saturating_sub(NAMED_NODES);
    if more > 0 {
        format!("{} and {more} more", out.join(", "))
    } else {
        out.join(", ")
    }
}

impl Framework {
    /// The shadows' statistics, one per shadow of the profile.
    pub fn shadow_stats(&self) -> Vec<Arc<Mutex<ShadowStats>>> {
        self.shadows.iter().map(|s| s.stats.clone()).collect()
    }

    /// Whether the profile runs shadows (the cycle then records what they need).
    pub(super) fn has_shadows(&self) -> bool {
        !self.shadows.is_empty()
    }

    /// Runs every shadow on the cycle `record` describes and counts what it found.
    pub(super) fn run_shadows(&self, pod: &CyclePod, snapshot: &Snapshot, record: &CycleRecord) {
        for shadow in &self.shadows {
            let Some(findings) = self.compare(shadow, pod, snapshot, record) else {
                continue;
            };
            let mut stats = lock(&shadow.stats);
            stats.cycles += 1;
            if let Some(m) = &self.metrics {
                m.count_shadow_cycle(&stats.plugin);
            }
            if findings.kinds.is_empty() {
                continue;
            }
            stats.disagreeing_cycles += 1;
            for k in &findings.kinds {
                *stats.by_kind.entry(k).or_default() += 1;
                if let Some(m) = &self.metrics {
                    m.count_shadow_disagreement(&stats.plugin, k);
                }
            }
            let detail = findings.details.join("; ");
            tracing::info!(
                plugin = %stats.plugin,
                candidate = %stats.candidate,
                pod = %pod.key(),
                kinds = %findings.kinds.join(","),
                "shadow disagrees: {detail}"
            );
            if stats.recent.len() == RECENT_DISAGREEMENTS {
                stats.recent.pop_front();
            }
            stats.recent.push_back(Disagreement {
                pod: pod.key(),
                uid: pod.uid.clone(),
                kinds: findings.kinds,
                detail,
            });
        }
    }

    /// Whether the live plugin is enabled at `point` in this profile, and where.
    fn position_at(&self, point: ExtensionPoint, plugin: usize) -> Option<usize> {
        self.at(point).iter().position(|&(i, _)| i == plugin)
    }

    /// One shadow's comparison: `None` when the live plugin was not asked (an earlier
    /// PreFilter rejected the pod).
    fn compare(
        &self,
        shadow: &ShadowSlot,
        pod: &CyclePod,
        snapshot: &Snapshot,
        record: &CycleRecord,
    ) -> Option<Findings> {
        let live = shadow.live;
        let live_pre_filter = record
            .pre_filter
            .get(&live)
            .map(|(status, names)| (status.code, names.clone()));
        if self.position_at(ExtensionPoint::PreFilter, live).is_some() && live_pre_filter.is_none()
        {
            return None;
        }
        if live_pre_filter.is_none() && !record.reached_filter {
            return None;
        }
        let mut c = Comparison {
            shadow,
            pod,
            snapshot,
            record,
            state: CycleState::new(),
            found: Findings::default(),
        };
        // A phase that finds what ends the comparison (an error, a rejection) says so
        // in the findings and stops the rest.
        let _ = self.compare_phases(&mut c, live_pre_filter);
        Some(c.found)
    }

    /// The comparison's phases in the cycle's order: PreFilter, Filter on the nodes
    /// the live plugin was asked about, PreScore and Score on the feasible nodes, and
    /// the node picked. `None` when a phase ended it.
    fn compare_phases(
        &self,
        c: &mut Comparison<'_>,
        live_pre_filter: Option<(Code, Option<BTreeSet<String>>)>,
    ) -> Option<()> {
        let live = c.shadow.live;
        let points = c.shadow.candidate[0].module.extension_points();
        let at_filter = self.position_at(ExtensionPoint::Filter, live);
        let at_score = self
            .at(ExtensionPoint::Score)
            .iter()
            .find(|&&(i, _)| i == live)
            .map(|&(_, w)| w);
        let mut set = lock(&c.shadow.instances);
        let inst = match set.get(0, &c.shadow.candidate) {
            Ok(i) => i,
            Err(e) => return c.stop(format!("candidate: {}", e.message)),
        };
        if let Err(e) = inst.sync(c.snapshot) {
            return c.stop(format!("candidate: {}", PluginError::from(e).message));
        }
        // PreFilter: run when the candidate has it and the live plugin filters or was
        // asked at PreFilter (what multiPoint would enable once it is promoted).
        let mut candidate_skips = false;
        if points.contains(&ExtensionPoint::PreFilter)
            && (at_filter.is_some() || live_pre_filter.is_some())
        {
            candidate_skips = compare_pre_filter(c, inst, live_pre_filter)?;
        } else if let Some((code, _)) = live_pre_filter.filter(|(code, _)| rejects(*code)) {
            c.found.add(
                "filter",
                format!(
                    "PreFilter: live {}, candidate has no PreFilter",
                    code.as_str()
                ),
            );
            return None;
        }
        if !c.record.reached_filter {
            return None;
        }
        let candidate_rejected = match at_filter {
            Some(pos) => self.compare_filter(c, inst, pos, candidate_skips)?,
            None => HashSet::new(),
        };
        let Some(weight) = at_score.filter(|_| c.record.scored) else {
            if let Some(picked) = c.record.picked {
                let found = &mut c.found;
                self.compare_pick(
                    picked,
                    &c.record.feasible,
                    None,
                    &candidate_rejected,
                    c.snapshot,
                    found,
                );
            }
            return Some(());
        };
        let mut skipped = false;
        if points.contains(&ExtensionPoint::PreScore) {
            match inst.pre_score(&c.state, c.pod, &c.record.feasible) {
                Ok(s) if s.code == Code::Success => {}
                Ok(s) if s.code == Code::Skip => skipped = true,
                Ok(s) => {
                    return c.stop(format!(
                        "candidate PreScore: {}: {}",
                        s.code.as_str(),
                        s.message()
                    ));
                }
                Err(e) => {
                    return c.stop(format!(
                        "candidate PreScore: {}",
                        PluginError::from(e).message
                    ));
                }
            }
        }
        let candidate_scores = if skipped {
            None
        } else {
            match self.candidate_scores(c.shadow, &mut set, &c.state, c.pod, &c.record.feasible) {
                Ok(s) => Some(s),
                Err(why) => return c.stop(format!("candidate Score: {why}")),
            }
        };
        self.compare_scores(c, weight, candidate_scores, &candidate_rejected);
        Some(())
    }

    /// Filter, on the nodes the live plugin (at position `pos` of the profile's
    /// Filter plugins) was asked about: the nodes the candidate rejects, or `None`
    /// when it failed.
    fn compare_filter(
        &self,
        c: &mut Comparison<'_>,
        inst: &mut PluginInstance,
        pos: usize,
        candidate_skips: bool,
    ) -> Option<HashSet<u32>> {
        let (record, snapshot, live) = (c.record, c.snapshot, c.shadow.live);
        let order = |i: usize| {
            self.position_at(ExtensionPoint::Filter, i)
                .unwrap_or(usize::MAX)
        };
        let asked: Vec<u32> = record
            .filtered
            .iter()
            .filter(|(s, _)| !record.overlaid.contains(s))
            .filter(|(_, by)| by.is_none_or(|p| order(p) >= pos))
            .map(|(s, _)| *s)
            .collect();
        let live_rejected: BTreeSet<u32> = record
            .filtered
            .iter()
            .filter(|(s, by)| !record.overlaid.contains(s) && **by == Some(live))
            .map(|(s, _)| *s)
            .collect();
        let mut candidate_rejected: HashSet<u32> = HashSet::new();
        if !candidate_skips && !asked.is_empty() {
            match inst.filter(&c.state, c.pod, &asked) {
                Ok(rejected) => {
                    for (slot, status) in rejected {
                        if status.code == Code::Error {
                            let node = snapshot.node(slot).map_or("<gone>", |n| n.name());
                            return c
                                .stop(format!("candidate Filter on {node}: {}", status.message()));
                        }
                        candidate_rejected.insert(slot);
                    }
                }
                Err(e) => {
                    return c.stop(format!(
                        "candidate Filter: {}",
                        PluginError::from(e).message
                    ));
                }
            }
        }
        let only_candidate: Vec<u32> = asked
            .iter()
            .copied()
            .filter(|s| candidate_rejected.contains(s) && !live_rejected.contains(s))
            .collect();
        let only_live: Vec<u32> = live_rejected
            .iter()
            .copied()
            .filter(|s| !candidate_rejected.contains(s))
            .collect();
        if !only_candidate.is_empty() {
            c.found.add(
                "filter",
                format!(
                    "Filter: candidate rejects {} node(s) live lets through ({})",
                    only_candidate.len(),
                    names(&only_candidate, snapshot)
                ),
            );
        }
        if !only_live.is_empty() {
            c.found.add(
                "filter",
                format!(
                    "Filter: candidate lets through {} node(s) live rejects ({})",
                    only_live.len(),
                    names(&only_live, snapshot)
                ),
            );
        }
        Some(candidate_rejected)
    }

    /// Score, on the feasible nodes: the candidate's normalized scores (none when it
    /// skips) against the live plugin's, then the node with the candidate's scores
    /// in place of the live plugin's (`weight` unchanged), among the nodes the
    /// candidate lets through.
    fn compare_scores(
        &self,
        c: &mut Comparison<'_>,
        weight: i64,
        candidate_scores: Option<Vec<i64>>,
        candidate_rejected: &HashSet<u32>,
    ) {
        let (record, snapshot) = (c.record, c.snapshot);
        let feasible = &record.feasible;
        let live_scores = record.scores.get(&c.shadow.live);
        match (live_scores, &candidate_scores) {
            (Some(l), Some(cand)) if l != cand => {
                let differ: Vec<String> = feasible
                    .iter()
                    .zip(l.iter().zip(cand))
                    .filter(|(_, (a, b))| a != b)
                    .map(|(s, (a, b))| {
                        let node = snapshot.node(*s).map_or("<gone>", |n| n.name());
                        format!("{node} live {a} candidate {b}")
                    })
                    .collect();
                let shown = differ
                    .iter()
                    .take(NAMED_NODES)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ");
                let more = differ.len().saturating_sub(NAMED_NODES);
                c.found.add(
                    "score",
                    format!(
                        "Score differs on {} of {} node(s): {shown}{}",
                        differ.len(),
                        feasible.len(),
                        if more > 0 {
                            format!(" and {more} more")
                        } else {
                            String::new()
                        }
                    ),
                );
            }
            (Some(_), None) => c
                .found
                .add("score", "Score: candidate skips, live scores".into()),
            (None, Some(_)) => c
                .found
                .add("score", "Score: live skips, candidate scores".into()),
            _ => {}
        }
        if let Some(picked) = record.picked {
            let totals: Vec<i64> = (0..feasible.len())
                .map(|k| {
                    record.totals[k] - live_scores.map_or(0, |l| l[k] * weight)
                        + candidate_scores.as_ref().map_or(0, |s| s[k] * weight)
                })
                .collect();
            self.compare_pick(
                picked,
                feasible,
                Some(&totals),
                candidate_rejected,
                snapshot,
                &mut c.found,
            );
        }
    }

    /// Whether the picked node would still be picked: it must pass the candidate's
    /// Filter and (when the cycle scored) have the best total among the feasible
    /// nodes the candidate lets through.
    fn compare_pick(
        &self,
        picked: u32,
        feasible: &[u32],
        totals: Option<&[i64]>,
        candidate_rejected: &HashSet<u32>,
        snapshot: &Snapshot,
        found: &mut Findings,
    ) {
        let node = |s: u32| snapshot.node(s).map_or("<gone>", |n| n.name()).to_owned();
        let open: Vec<usize> = (0..feasible.len())
            .filter(|&k| !candidate_rejected.contains(&feasible[k]))
            .collect();
        if open.is_empty() {
            found.add(
                "node",
                format!(
                    "Node: live picked {}; the candidate rejects every feasible node",
                    node(picked)
                ),
            );
            return;
        }
        if candidate_rejected.contains(&picked) {
            let best = match totals {
                Some(t) => *open
                    .iter()
                    .max_by_key(|&&k| (t[k], std::cmp::Reverse(k)))
                    .expect("not empty"),
                None => open[0],
            };
            found.add(
                "node",
                format!(
                    "Node: live picked {}, which the candidate rejects; it would pick {}",
                    node(picked),
                    node(feasible[best])
                ),
            );
            return;
        }
        let Some(t) = totals else {
            return;
        };
        let Some(k_picked) = feasible.iter().position(|&s| s == picked) else {
            return;
        };
        let best = *open
            .iter()
            .max_by_key(|&&k| (t[k], std::cmp::Reverse(k)))
            .expect("not empty");
        if t[best] > t[k_picked] {
            found.add(
                "node",
                format!(
                    "Node: live picked {} (total {}), the candidate would pick {} (total {})",
                    node(picked),
                    t[k_picked],
                    node(feasible[best]),
                    t[best]
                ),
            );
        }
    }

    /// The candidate's final scores of the feasible nodes: scored, normalized if it
    /// normalizes, and checked as the live plugin's are.
    fn candidate_scores(
        &self,
        shadow: &ShadowSlot,
        set: &mut InstanceSet,
        state: &CycleState,
        pod: &CyclePod,
        feasible: &[u32],
    ) -> Result<Vec<i64>, String> {
        let slot = &shadow.candidate[0];
        let inst = set.get(0, &shadow.candidate).map_err(|e| e.message)?;
        let mut scores = match inst.score(state, pod, feasible) {
            Ok(Ok(s)) => s,
            Ok(Err(status)) => {
                return Err(format!("{}: {}", status.code.as_str(), status.message()));
            }
            Err(e) => return Err(PluginError::from(e).message),
        };
        if slot.normalizes {
            scores = match inst.normalize_score(state, pod, &scores) {
                Ok(Ok(s)) => s,
                Ok(Err(status)) => {
                    return Err(format!(
                        "NormalizeScore: {}: {}",
                        status.code.as_str(),
                        status.message()
                    ));
                }
                Err(e) => return Err(PluginError::from(e).message),
            };
        }
        if scores.len() != feasible.len() {
            return Err(format!(
                "answered {} scores for {} nodes",
                scores.len(),
                feasible.len()
            ));
        }
        if let Some(s) = scores
            .iter()
            .find(|s| !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(*s))
        {
            return Err(format!(
                "an invalid score {s}: scores must be in [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
            ));
        }
        Ok(scores)
    }
}

/// One shadow's comparison under way: what it compares, the candidate's cycle
/// state, and what it found so far.
struct Comparison<'a> {
    shadow: &'a ShadowSlot,
    pod: &'a CyclePod,
    snapshot: &'a Snapshot,
    record: &'a CycleRecord,
    state: CycleState,
    found: Findings,
}

impl Comparison<'_> {
    /// Ends the comparison on the candidate's failure.
    fn stop<T>(&mut self, why: String) -> Option<T> {
        self.found.add("error", why);
        None
    }
}

/// PreFilter: the candidate's verdict and node list against the live plugin's
/// (`live`, none when it has no PreFilter: Success on all nodes). Whether the
/// candidate skips Filter; `None` when the comparison ends here (the candidate
/// failed, or either rejected the pod).
fn compare_pre_filter(
    c: &mut Comparison<'_>,
    inst: &mut PluginInstance,
    live: Option<(Code, Option<BTreeSet<String>>)>,
) -> Option<bool> {
    let r = match inst.pre_filter(&c.state, c.pod) {
        Ok(r) => r,
        Err(e) => {
            return c.stop(format!(
                "candidate PreFilter: {}",
                PluginError::from(e).message
            ));
        }
    };
    if r.status.code == Code::Error {
        return c.stop(format!("candidate PreFilter: {}", r.status.message()));
    }
    let (live_code, live_names) = live.unwrap_or((Code::Success, None));
    let cand_names: Option<BTreeSet<String>> = r.node_names.map(|n| n.into_iter().collect());
    if rejects(live_code) != rejects(r.status.code) {
        c.found.add(
            "filter",
            format!(
                "PreFilter: live {}, candidate {}{}",
                live_code.as_str(),
                r.status.code.as_str(),
                if r.status.message().is_empty() {
                    String::new()
                } else {
                    format!(" ({})", r.status.message())
                }
            ),
        );
    } else if !rejects(live_code) && live_names != cand_names {
        let show = |n: &Option<BTreeSet<String>>| match n {
            None => "all nodes".to_owned(),
            Some(s) => format!("{} node(s)", s.len()),
        };
        c.found.add(
            "filter",
            format!(
                "PreFilter: live narrows to {}, candidate to {}",
                show(&live_names),
                show(&cand_names)
            ),
        );
    }
    if rejects(live_code) || rejects(r.status.code) {
        return None;
    }
    Some(r.status.code == Code::Skip)
}
