//! One scheduling attempt: PreFilter, Filter fanned out over the workers from the
//! round-robin start until `numFeasibleNodesToFind` nodes fit, PreScore, Score and
//! NormalizeScore, weights, and a random choice among the best.

use super::batch::{BatchResult, FitFilter, Scored};
use super::record::CycleRecord;
use super::{CyclePod, CycleState, Diagnosis, FitError, Framework, PluginError, lock};
use berth_runtime::cache::Snapshot;
use berth_sdk::{Code, ExtensionPoint, NodeInfo, Pod, Status};
use rand::Rng;
use std::collections::{HashMap, HashSet};

/// The fewest nodes a worker's share of a fanned-out batch holds.
const MIN_NODES_PER_WORKER: usize = 32;
/// Batches smaller than this run inline on the calling thread: waking the workers and
/// handing them the batch costs more than they save. Measured on 2 cores (BENCHMARKS.md):
/// the 256-node rounds of a 500-node cluster and the 500-node rounds of a 5000-node one
/// both ran faster on one thread than split over two.
const INLINE_BELOW: usize = 1024;
/// The fewest nodes one Filter round looks at.
const MIN_ROUND: usize = 256;

/// Which instances run a share of a fanned-out batch.
#[derive(Clone, Copy, Debug)]
pub(super) enum Runner {
    /// The scheduling thread's own set, which PreFilter and PreScore use too: a batch
    /// run inline needs no second set of instances to begin the cycle and catch up.
    Main,
    /// A worker's set.
    Worker(usize),
}

/// What one scheduling attempt decided.
#[derive(Debug)]
pub enum ScheduleOutcome {
    /// The pod should go to `node`.
    Scheduled {
        /// The chosen node.
        node: String,
        /// The cycle's state, for Reserve, Permit and the binding cycle.
        state: CycleState,
        /// How many nodes Filter looked at.
        evaluated: usize,
        /// How many of them fit.
        feasible: usize,
        /// The node came from the batch of an earlier cycle (opportunistic
        /// batching): only it was filtered, nothing was scored.
        batched: bool,
    },
    /// No node fits; PostFilter's verdict when the profile has PostFilter plugins.
    Unschedulable(FitError, Option<super::PostFilterVerdict>),
    /// A plugin failed.
    Error(PluginError),
}

/// Which of the scheduler's cycles an attempt is: its number (one per pod or pod
/// group popped, across the profiles) and when it began on the scheduler's clock
/// (virtual in `simulate` and the bench, so that batching there is repeatable).
#[derive(Clone, Copy, Debug)]
pub struct Cycle {
    /// The cycle's number.
    pub number: u64,
    /// When it began.
    pub at: std::time::Duration,
}

/// How many feasible nodes to find before Filter stops, as upstream: every node
/// below 100; otherwise `percentage` of them (adaptive when 0: 50% minus 1% per 125
/// nodes, at least 5%), and never fewer than 100.
pub fn num_feasible_nodes_to_find(percentage: u32, num_all_nodes: usize) -> usize {
    const MIN_FEASIBLE_NODES: usize = 100;
    const MIN_PERCENTAGE: i64 = 5;
    if num_all_nodes < MIN_FEASIBLE_NODES || percentage >= 100 {
        return num_all_nodes;
    }
    let mut pct = i64::from(percentage);
    if pct == 0 {
        pct = (50 - num_all_nodes as i64 / 125).max(MIN_PERCENTAGE);
    }
    let n = (num_all_nodes as i64 * pct / 100) as usize;
    n.max(MIN_FEASIBLE_NODES)
}

type ChunkResult = Result<ChunkPassed, PluginError>;

/// A chunk's nodes that passed, and those that failed (slot, plugin, status).
type ChunkPassed = (Vec<u32>, Vec<(u32, usize, Status)>);

/// What Score made of the feasible nodes: the plugins that scored (index, weight),
/// each node's total, and every plugin's raw scores when they were kept for the
/// batch (and every plugin scored).
type ScoredNodes = (Vec<(usize, i64)>, Vec<i64>, Option<Vec<Vec<i64>>>);

/// Pods nominated to nodes (by preemption), by node name: later cycles count them
/// on their node.
pub type NominatedPods = HashMap<String, Vec<Pod>>;

/// A node as it would be with the nominated pods of at least the pod's priority
/// added (upstream's `addGENominatedPods`), and the cycle state those additions make
/// when a plugin keeps per-cycle state (`None`: the cycle's state serves).
pub(super) struct Overlay {
    info: NodeInfo,
    state: Option<CycleState>,
}

/// The status label of one Filter batch: Success when every node passed, else the
/// code of the first rejection (a batch covers many nodes, where upstream observes
/// one node per call).
fn batch_code(rejected: &[(u32, Status)]) -> &'static str {
    rejected.first().map_or("Success", |(_, s)| s.code.as_str())
}

impl Framework {
    /// The nodes with nominated pods of at least `pod`'s priority, as they would be
    /// with those pods, by slot. When PreFilter plugins with extensions did not skip
    /// the pod, each such node gets its own copy of the state with AddPod told.
    pub(super) fn nominated_overlays(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        state: &CycleState,
        skip_filter: &HashSet<usize>,
    ) -> Result<HashMap<u32, Overlay>, PluginError> {
        let extensions: Vec<usize> = self
            .at(ExtensionPoint::PreFilter)
            .iter()
            .map(|&(i, _)| i)
            .filter(|i| !skip_filter.contains(i) && self.plugins[*i].extensions)
            .collect();
        let mut out = HashMap::new();
        for (node, pods) in nominated {
            let Some(slot) = snapshot.slot_of(node) else {
                continue;
            };
            let adding: Vec<&Pod> = pods
                .iter()
                .filter(|p| p.uid != pod.uid && p.priority >= pod.priority)
                .collect();
            if adding.is_empty() {
                continue;
            }
            let Some(mut info) = snapshot.node(slot).cloned() else {
                continue;
            };
            let own = (!extensions.is_empty()).then(|| state.deep_clone());
            for p in adding {
                let mut p = p.clone();
                p.node_name = node.clone();
                info.add_pod(&p);
                if let Some(st) = &own {
                    let mut main = lock(&self.instances.main);
                    for &i in &extensions {
                        let inst = main.get(i, &self.plugins)?;
                        inst.sync_for(snapshot, &[], pod)?;
                        let status = inst.pod_on_node(true, st, pod, &p, slot)?;
                        if !status.is_success() {
                            return Err(self.failure(i, &status));
                        }
                    }
                }
            }
            out.insert(slot, Overlay { info, state: own });
        }
        Ok(out)
    }

    /// Splits `items` into one contiguous chunk per worker and runs `f` on each, on
    /// the worker that owns the instances of that index; a small batch runs inline on
    /// the main instances. Results come in item order.
    fn fan_out<R: Send>(&self, items: &[u32], f: impl Fn(Runner, &[u32]) -> R + Sync) -> Vec<R> {
        let workers = self.instances.workers.len();
        match &self.instances.pool {
            Some(pool) if items.len() >= INLINE_BELOW => {
                let per = items.len().div_ceil(workers).max(MIN_NODES_PER_WORKER);
                let chunks: Vec<&[u32]> = items.chunks(per).collect();
                pool.broadcast(|ctx| {
                    chunks
                        .get(ctx.index())
                        .map(|c| f(Runner::Worker(ctx.index()), c))
                })
                .into_iter()
                .flatten()
                .collect()
            }
            _ => vec![f(Runner::Main, items)],
        }
    }

    /// The chunks' results, or the failure that one chunk, had it held every node,
    /// would have stopped at: of the failures of several chunks, the plugin first in
    /// `filters` (each chunk runs the plugins in that order), then the earliest
    /// chunk. So which failure a pod's cycle reports does not depend on how many
    /// workers split the nodes.
    fn first_failure(
        &self,
        results: Vec<ChunkResult>,
        filters: &[usize],
    ) -> Result<Vec<ChunkPassed>, PluginError> {
        let position = |e: &PluginError| {
            filters
                .iter()
                .position(|&i| self.plugins[i].name == e.plugin)
                .unwrap_or(usize::MAX)
        };
        let mut ok = Vec::with_capacity(results.len());
        let mut failure: Option<PluginError> = None;
        for r in results {
            match r {
                Ok(r) => ok.push(r),
                Err(e) => {
                    if failure.as_ref().is_none_or(|f| position(&e) < position(f)) {
                        failure = Some(e);
                    }
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(ok),
        }
    }

    /// The instance set `runner` names.
    fn instance_set(&self, runner: Runner) -> &std::sync::Mutex<super::InstanceSet> {
        match runner {
            Runner::Main => &self.instances.main,
            Runner::Worker(w) => &self.instances.workers[w],
        }
    }

    /// Filter over `chunk` on `runner`'s instances: the nodes that passed, in order,
    /// and each rejection (node, plugin, status), a node's first rejection first.
    /// `every` (explain's view): every plugin runs on every node of the chunk, also
    /// after a node was rejected, and an Error answer is recorded as a rejection;
    /// which nodes pass, and each node's first rejection, are the same as without
    /// it, and [`Framework::cycle_error`] finds the Error the cycle would fail on.
    #[allow(
        clippy::too_many_arguments,
        reason = "the attempt's inputs, the nodes and the plugins"
    )]
    pub(super) fn filter_chunk(
        &self,
        runner: Runner,
        state: &CycleState,
        pod: &CyclePod,
        snapshot: &Snapshot,
        chunk: &[u32],
        filters: &[usize],
        overlays: &HashMap<u32, Overlay>,
        every: bool,
    ) -> ChunkResult {
        let mut set = lock(self.instance_set(runner));
        let mut failures = Vec::new();
        let mut rejected: HashSet<u32> = HashSet::new();
        // Records one plugin's answer over `asked`; an Error fails the attempt, or
        // with `every` is recorded (see `Framework::cycle_error`).
        let take = |i: usize,
                    answer: Vec<(u32, Status)>,
                    rejected: &mut HashSet<u32>,
                    failures: &mut Vec<(u32, usize, Status)>|
         -> Result<(), PluginError> {
            for (slot, status) in answer {
                if status.code == Code::Error && !every {
                    return Err(self.node_failure(i, pod, snapshot, slot, &status));
                }
                rejected.insert(slot);
                failures.push((slot, i, status));
            }
            Ok(())
        };
        // Upstream's two passes: a node with nominated pods must fit the pod with
        // them counted, and without them. Overlaid nodes sharing the cycle's state are
        // filtered in one batch; a node with its own state (AddPod told) alone.
        let mut groups: Vec<(&CycleState, Vec<u32>)> = vec![(state, Vec::new())];
        for s in chunk {
            match overlays.get(s) {
                Some(Overlay {
                    state: Some(own), ..
                }) => groups.push((own, vec![*s])),
                Some(_) => groups[0].1.push(*s),
                None => {}
            }
        }
        for (st, overlaid) in groups {
            for &i in filters {
                let asked: Vec<u32> = overlaid
                    .iter()
                    .copied()
                    .filter(|s| every || !rejected.contains(s))
                    .collect();
                if asked.is_empty() {
                    break;
                }
                let inst = set.get(i, &self.plugins)?;
                let views: Vec<(u32, &NodeInfo)> =
                    asked.iter().map(|s| (*s, &overlays[s].info)).collect();
                inst.sync_for(snapshot, &views, pod)?;
                let t = self.plugin_clock(state);
                let answer = inst.filter(st, pod, &asked)?;
                self.observe_plugin(i, "Filter", batch_code(&answer), t);
                take(i, answer, &mut rejected, &mut failures)?;
            }
        }
        for &i in filters {
            let asked: Vec<u32> = chunk
                .iter()
                .copied()
                .filter(|s| every || !rejected.contains(s))
                .collect();
            if asked.is_empty() {
                break;
            }
            let inst = set.get(i, &self.plugins)?;
            inst.sync_for(snapshot, &[], pod)?;
            let t = self.plugin_clock(state);
            let answer = inst.filter(state, pod, &asked)?;
            self.observe_plugin(i, "Filter", batch_code(&answer), t);
            take(i, answer, &mut rejected, &mut failures)?;
        }
        let survivors = chunk
            .iter()
            .copied()
            .filter(|s| !rejected.contains(s))
            .collect();
        Ok((survivors, failures))
    }

    /// The failure of an attempt whose Filter answers, every one recorded
    /// (`filter_chunk` with `every`), are `failed`: a node whose first rejection is
    /// an Error, as the cycle (which asks a node no further once it is rejected)
    /// would have stopped at; of several, the plugin first in `filters`.
    fn cycle_error(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        failed: &[(u32, usize, Status)],
        filters: &[usize],
    ) -> Option<PluginError> {
        let mut seen: HashSet<u32> = HashSet::new();
        failed
            .iter()
            .filter(|(slot, _, _)| seen.insert(*slot))
            .filter(|(_, _, status)| status.code == Code::Error)
            .min_by_key(|(_, i, _)| filters.iter().position(|f| f == i))
            .map(|(slot, i, status)| self.node_failure(*i, pod, snapshot, *slot, status))
    }

    /// Runs the PreScore plugins over `feasible`: the plugins that will not score
    /// this cycle (they do not take part, answered Skip, or failed open).
    pub(super) fn run_pre_score(
        &self,
        pod: &CyclePod,
        state: &CycleState,
        snapshot: &Snapshot,
        feasible: &[u32],
    ) -> Result<HashSet<usize>, PluginError> {
        let mut skip_score: HashSet<usize> = HashSet::new();
        let mut timer = self.time_point("PreScore");
        let mut main = lock(&self.instances.main);
        for &(i, _) in self.at(ExtensionPoint::PreScore) {
            if !self.takes_part(i, pod, state) {
                skip_score.insert(i);
                continue;
            }
            let mut pre_score = || -> Result<Status, PluginError> {
                let inst = main.get(i, &self.plugins)?;
                inst.sync_for(snapshot, &[], pod)?;
                let t = self.plugin_clock(state);
                let status = inst.pre_score(state, pod, feasible)?;
                self.observe_plugin(i, "PreScore", status.code.as_str(), t);
                match status.code {
                    Code::Success | Code::Skip => Ok(status),
                    _ => Err(self.pod_failure(i, "PreScore", pod, &status)),
                }
            };
            match pre_score() {
                Ok(status) if status.code == Code::Success => {}
                Ok(_) => {
                    skip_score.insert(i);
                }
                Err(e) => {
                    // Fail-open: the plugin does not score this cycle.
                    self.scoring_failed(i, pod, e)?;
                    skip_score.insert(i);
                }
            }
        }
        timer.status = "Success";
        Ok(skip_score)
    }

    /// The Score plugins (index, weight) that score this cycle: all but `skip`.
    pub(super) fn scorers(&self, skip: &HashSet<usize>) -> Vec<(usize, i64)> {
        self.at(ExtensionPoint::Score)
            .iter()
            .copied()
            .filter(|(i, _)| !skip.contains(i))
            .collect()
    }

    /// Score of `chunk` by `scorers` on `runner`'s instances: per scorer, its scores
    /// or its failure.
    pub(super) fn score_chunk(
        &self,
        runner: Runner,
        state: &CycleState,
        pod: &CyclePod,
        snapshot: &Snapshot,
        chunk: &[u32],
        scorers: &[(usize, i64)],
    ) -> Vec<Result<Vec<i64>, PluginError>> {
        let mut set = lock(self.instance_set(runner));
        let mut out = Vec::with_capacity(scorers.len());
        for &(i, _) in scorers {
            let mut score = || -> Result<Vec<i64>, PluginError> {
                let inst = set.get(i, &self.plugins)?;
                inst.sync_for(snapshot, &[], pod)?;
                let t = self.plugin_clock(state);
                let scored = inst.score(state, pod, chunk)?;
                let code = scored
                    .as_ref()
                    .map_or_else(|e| e.code.as_str(), |_| "Success");
                self.observe_plugin(i, "Score", code, t);
                scored.map_err(|status| self.pod_failure(i, "Score", pod, &status))
            };
            // One plugin's failure does not stop the others: it may fail open.
            out.push(score());
        }
        out
    }

    /// Runs one scheduling attempt for `pod` (given as its WIT record) against the
    /// snapshot, counting `nominated` pods of at least its priority on their nodes.
    /// When no node fits, the PostFilter plugins (preemption) run if `post_filter`
    /// says so: a pod group's cycle tries its members without them, as upstream's.
    /// `within` restricts the nodes to a pod group's placement: the others are not
    /// candidates, nor counted in the FitError, and PreFilter and PreScore plugins see
    /// the placement's nodes as the whole cluster (`berth_sdk::PLACEMENT_NODES`), as
    /// upstream runs such a cycle on a snapshot of the placement. With `cycle` (the
    /// scheduler's count and clock) the attempt may batch ([`super::batch`]); without
    /// it (a pod group's member) it runs in full and leaves the batch alone.
    pub fn schedule_pod(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        post_filter: bool,
        within: Option<&HashSet<String>>,
        cycle: Option<Cycle>,
    ) -> ScheduleOutcome {
        let state = CycleState::sampled().with_participants(self.participants(pod, snapshot));
        let mut record = self.has_shadows().then(CycleRecord::default);
        let (outcome, _) = self.attempt(
            pod,
            snapshot,
            nominated,
            post_filter,
            within,
            cycle,
            state,
            &mut record,
        );
        outcome
    }

    /// [`Framework::schedule_pod`] with a record of what the attempt did (as a
    /// profile's shadows get it), for tests that hold an observer to the cycle.
    /// For the tests of the crates above this one (not a scheduler's API).
    #[doc(hidden)]
    pub fn schedule_pod_recorded(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
    ) -> (ScheduleOutcome, CycleRecord) {
        let state = CycleState::sampled().with_participants(self.participants(pod, snapshot));
        let mut record = Some(CycleRecord::default());
        let (outcome, _) = self.attempt(
            pod,
            snapshot,
            nominated,
            true,
            None,
            None,
            state,
            &mut record,
        );
        (outcome, record.unwrap_or_default())
    }

    /// A plugin's name by its index in the profile.
    /// For the tests of the crates above this one (not a scheduler's API).
    #[doc(hidden)]
    pub fn plugin_name(&self, i: usize) -> &str {
        &self.plugins[i].name
    }

    /// The one scheduling attempt that [`Framework::schedule_pod`] runs and its
    /// observers watch: `record` (a profile's shadows', or `explain`'s) is filled as
    /// it runs, and the attempt's cycle state is returned beside its outcome. The
    /// shadows run on a record that is not explaining.
    #[allow(
        clippy::too_many_arguments,
        reason = "schedule_pod's inputs, the attempt's state and its record"
    )]
    pub(super) fn attempt(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        post_filter: bool,
        within: Option<&HashSet<String>>,
        cycle: Option<Cycle>,
        state: CycleState,
        record: &mut Option<CycleRecord>,
    ) -> (ScheduleOutcome, CycleState) {
        let mut skip_filter: HashSet<usize> = HashSet::new();
        let outcome = match self.try_schedule(
            pod,
            snapshot,
            nominated,
            &state,
            &mut skip_filter,
            record,
            within,
            cycle,
        ) {
            Ok(o) => o,
            Err(e) => return (ScheduleOutcome::Error(e), state),
        };
        if let Some(r) = record.as_ref().filter(|r| !r.explaining) {
            self.run_shadows(pod, snapshot, r);
        }
        let ScheduleOutcome::Unschedulable(mut fit, _) = outcome else {
            return (outcome, state);
        };
        if fit.num_all_nodes == 0 || !post_filter || !self.has_post_filter() {
            return (ScheduleOutcome::Unschedulable(fit, None), state);
        }
        let statuses = fit.statuses_by_slot(snapshot);
        let outcome = match self.post_filter(
            &state,
            pod,
            snapshot,
            nominated,
            &statuses,
            &skip_filter,
            &self.budgets,
        ) {
            Ok(verdict) => {
                if let Some(v) = &verdict
                    && !v.status.is_success()
                {
                    fit.diagnosis.post_filter_msg = Some(v.status.message());
                }
                ScheduleOutcome::Unschedulable(fit, verdict)
            }
            Err(e) => ScheduleOutcome::Error(e),
        };
        (outcome, state)
    }

    /// When the pod has ResourceClaims (`spec.resourceClaims`) and no plugin of the
    /// profile is DynamicResources, the attempt's verdict in DynamicResources' name:
    /// UnschedulableAndUnresolvable, naming the claims. A profile may leave
    /// DynamicResources out; placing the pod as if it claimed nothing would put it
    /// where its devices may not be.
    pub(super) fn unallocated_claims(
        &self,
        pod: &berth_sdk::Pod,
    ) -> Option<(&'static str, Status)> {
        const DYNAMIC_RESOURCES: &str = "DynamicResources";
        if pod.resource_claims.is_empty()
            || self.plugins.iter().any(|p| p.name == DYNAMIC_RESOURCES)
        {
            return None;
        }
        let names: Vec<String> = pod
            .resource_claims
            .iter()
            .map(|c| format!("{:?}", c.name))
            .collect();
        Some((
            DYNAMIC_RESOURCES,
            Status::unresolvable(format!(
                "pod has ResourceClaims ({}) and the profile has no {DYNAMIC_RESOURCES} plugin to allocate their devices",
                names.join(", ")
            )),
        ))
    }

    /// PreFilter, in profile order, over the attempt's nodes: the nodes left for
    /// Filter (all of them, or those every narrowing plugin named) with the
    /// diagnosis of those left out, or the FitError of a rejection.
    fn run_pre_filter(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        state: &CycleState,
        all_slots: &[u32],
        skip_filter: &mut HashSet<usize>,
        record: &mut Option<CycleRecord>,
    ) -> Result<Result<(Vec<u32>, Diagnosis), FitError>, PluginError> {
        let num_all = all_slots.len();
        let mut narrowed: Option<HashSet<String>> = None;
        let mut narrowing_plugins: Vec<String> = Vec::new();
        let mut timer = self.timer("PreFilter", record);
        let mut main = lock(&self.instances.main);
        for &(i, _) in self.at(ExtensionPoint::PreFilter) {
            if !self.takes_part(i, pod, state) {
                // As if it answered Skip, without a call.
                if let Some(rec) = record.as_mut() {
                    rec.pre_filter
                        .insert(i, (Status::new(Code::Skip, Vec::new()), None));
                }
                skip_filter.insert(i);
                continue;
            }
            let inst = main.get(i, &self.plugins)?;
            inst.sync_for(snapshot, &[], pod)?;
            let t = self.plugin_clock(state);
            let r = inst.pre_filter(state, pod)?;
            self.observe_plugin(i, "PreFilter", r.status.code.as_str(), t);
            if let Some(rec) = record.as_mut() {
                let names = r.node_names.as_ref().map(|n| n.iter().cloned().collect());
                rec.pre_filter.insert(i, (r.status.clone(), names));
            }
            match r.status.code {
                Code::Success => {}
                Code::Skip => {
                    skip_filter.insert(i);
                    continue;
                }
                Code::Unschedulable | Code::UnschedulableAndUnresolvable => {
                    timer.status = r.status.code.as_str();
                    if let Some(rec) = record.as_mut() {
                        rec.pre_filter_rejected = Some(i);
                    }
                    return Ok(Err(FitError {
                        num_all_nodes: num_all,
                        diagnosis: Diagnosis {
                            pre_filter_msg: Some(r.status.message()),
                            pre_filter_code: Some(r.status.code),
                            unschedulable_plugins: vec![self.plugins[i].name.clone()],
                            ..Diagnosis::default()
                        },
                    }));
                }
                _ => return Err(self.failure(i, &r.status)),
            }
            if let Some(names) = r.node_names {
                let names: HashSet<String> = names.into_iter().collect();
                narrowed = Some(match narrowed {
                    Some(prev) => prev.intersection(&names).cloned().collect(),
                    None => names,
                });
                narrowing_plugins.push(self.plugins[i].name.clone());
            }
        }
        timer.status = "Success";

        let Some(names) = narrowed else {
            return Ok(Ok((all_slots.to_vec(), Diagnosis::default())));
        };
        let candidates: Vec<u32> = all_slots
            .iter()
            .copied()
            .filter(|&s| snapshot.node(s).is_some_and(|n| names.contains(n.name())))
            .collect();
        // Nodes the PreFilter result left out, as upstream reports them.
        let mut diagnosis = Diagnosis::default();
        let reason = format!(
            "node(s) didn't satisfy plugin(s) [{}]",
            narrowing_plugins.join(", ")
        );
        // `candidates` keeps the order of the slots it was taken from.
        let mut next_candidate = candidates.iter().peekable();
        for &s in all_slots {
            if next_candidate.next_if_eq(&&s).is_none() {
                diagnosis
                    .node_statuses
                    .push((s, Status::unresolvable(reason.clone())));
            }
        }
        diagnosis.unschedulable_plugins = narrowing_plugins;
        Ok(Ok((candidates, diagnosis)))
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the attempt's inputs and the two records it leaves for PostFilter and the observers"
    )]
    fn try_schedule(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        state: &CycleState,
        skip_filter: &mut HashSet<usize>,
        record: &mut Option<CycleRecord>,
        within: Option<&HashSet<String>>,
        cycle: Option<Cycle>,
    ) -> Result<ScheduleOutcome, PluginError> {
        // The nodes of the attempt: every node, or a pod group's placement's.
        let placement_slots = within.map(|w| placement_slots(snapshot, w));
        let all_slots: &[u32] = placement_slots.as_deref().unwrap_or(snapshot.slots());
        let num_all = all_slots.len();
        let state = state.clone();
        let unschedulable = |diagnosis: Diagnosis| -> Result<ScheduleOutcome, PluginError> {
            Ok(ScheduleOutcome::Unschedulable(
                FitError {
                    num_all_nodes: num_all,
                    diagnosis,
                },
                None,
            ))
        };
        // PreFilter and PreScore see the placement's nodes as the cluster.
        if let Some(slots) = &placement_slots {
            berth_sdk::CycleState::new(&state).set(&berth_sdk::PLACEMENT_NODES, slots);
        }
        if num_all == 0 {
            return unschedulable(Diagnosis::default());
        }

        // A pod whose devices no plugin of the profile allocates is not placed as if
        // it had no claims.
        if let Some(diagnosis) = self.unallocated_diagnosis(pod, record) {
            return unschedulable(diagnosis);
        }

        let (candidates, mut diagnosis) =
            match self.run_pre_filter(pod, snapshot, &state, all_slots, skip_filter, record)? {
                Ok(c) => c,
                Err(fit) => return Ok(ScheduleOutcome::Unschedulable(fit, None)),
            };
        if candidates.is_empty() {
            return unschedulable(diagnosis);
        }

        let overlays = self.nominated_overlays(pod, snapshot, nominated, &state, skip_filter)?;
        let every = record.as_ref().is_some_and(|r| r.explaining);
        if let Some(rec) = record.as_mut() {
            rec.reached_filter = true;
            rec.overlaid = overlays.keys().copied().collect();
        }
        let filters: Vec<usize> = self
            .at(ExtensionPoint::Filter)
            .iter()
            .map(|&(i, _)| i)
            .filter(|i| !skip_filter.contains(i))
            .collect();
        let filter = |slots: &[u32]| {
            self.filter_chunk(
                Runner::Main,
                &state,
                pod,
                snapshot,
                slots,
                &filters,
                &overlays,
                every,
            )
        };

        // A pod nominated to a node (by an earlier preemption) tries that node first;
        // if it fits, it goes there without scoring, as upstream.
        if self.nominated_node_fits(pod, snapshot, &candidates, &filters, &filter, record)? {
            return Ok(ScheduleOutcome::Scheduled {
                node: pod.nominated_node_name.clone(),
                state,
                evaluated: 1,
                feasible: 1,
                batched: false,
            });
        }

        // Opportunistic batching: a pod signed like the last one may go to the node
        // the last full cycle ranked next, filtered alone.
        let batching = cycle.filter(|_| within.is_none() && record.is_none() && self.batchable());
        let signature = match batching {
            Some(_) => self.sign(pod, &state, snapshot)?,
            None => None,
        };
        let mut hinted = false;
        if let (Some(c), Some(sig)) = (batching, signature.as_deref()) {
            let mut fitting =
                |slots: &[u32]| -> Result<Vec<u32>, PluginError> { Ok(filter(slots)?.0) };
            match self.batched_node(pod, sig, c, &state, snapshot, &candidates, &mut fitting)? {
                Some(Some(node)) => {
                    self.store_batch(
                        signature,
                        c,
                        &node,
                        BatchResult::HintUsed,
                        &[],
                        None,
                        snapshot,
                    );
                    return Ok(ScheduleOutcome::Scheduled {
                        node,
                        state,
                        evaluated: 1,
                        feasible: 1,
                        batched: true,
                    });
                }
                Some(None) => hinted = true,
                None => {}
            }
        }
        let batch_result = if hinted {
            BatchResult::HintNotUsed
        } else {
            BatchResult::NoHint
        };

        let (feasible, processed) = self.find_feasible(
            pod,
            snapshot,
            &state,
            &candidates,
            &filters,
            &overlays,
            &mut diagnosis,
            record,
        )?;
        if feasible.is_empty() {
            return unschedulable(diagnosis);
        }
        self.pick(
            pod,
            snapshot,
            state,
            &feasible,
            processed,
            batching.map(|c| (c, signature, batch_result)),
            record,
        )
    }

    /// The node of a pod with `feasible` nodes (`processed` were filtered): the only
    /// one, else the best scored (ties broken at random); the batch, when batching,
    /// keeps the ranking for the next pods signed alike.
    #[allow(
        clippy::too_many_arguments,
        reason = "the cycle's state after Filter, and the records it leaves"
    )]
    fn pick(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        state: CycleState,
        feasible: &[u32],
        processed: usize,
        batching: Option<(Cycle, Option<String>, BatchResult)>,
        record: &mut Option<CycleRecord>,
    ) -> Result<ScheduleOutcome, PluginError> {
        let name_of = |slot: u32| {
            snapshot
                .node(slot)
                .map(|n| n.name().to_owned())
                .unwrap_or_default()
        };
        if let Some(rec) = record.as_mut() {
            rec.feasible = feasible.to_vec();
            rec.picked = (feasible.len() == 1).then(|| feasible[0]);
        }
        if feasible.len() == 1 {
            let node = name_of(feasible[0]);
            if let Some((c, signature, batch_result)) = batching {
                self.store_batch(signature, c, &node, batch_result, feasible, None, snapshot);
            }
            return Ok(ScheduleOutcome::Scheduled {
                node,
                state,
                evaluated: processed,
                feasible: 1,
                batched: false,
            });
        }

        let (scorers, totals, raw) = self.score_feasible(
            pod,
            snapshot,
            &state,
            feasible,
            batching.as_ref().is_some_and(|(_, sig, _)| sig.is_some()),
            record,
        )?;
        let every = record.as_ref().is_some_and(|r| r.explaining);
        let best = self.select(&totals, every);
        let node = name_of(feasible[best]);
        if let Some((c, signature, batch_result)) = batching {
            let scored = raw.map(|raw| Scored {
                scorers: scorers.clone(),
                raw,
                totals: totals.clone(),
            });
            self.store_batch(
                signature,
                c,
                &node,
                batch_result,
                feasible,
                scored,
                snapshot,
            );
        }
        if let Some(rec) = record.as_mut() {
            rec.scored = true;
            rec.totals = totals;
            rec.picked = Some(feasible[best]);
        }
        Ok(ScheduleOutcome::Scheduled {
            node,
            state,
            evaluated: processed,
            feasible: feasible.len(),
            batched: false,
        })
    }

    /// The diagnosis of a pod whose devices no plugin of the profile allocates (it is
    /// not placed as if it had no claims), recorded.
    fn unallocated_diagnosis(
        &self,
        pod: &CyclePod,
        record: &mut Option<CycleRecord>,
    ) -> Option<Diagnosis> {
        let (plugin, status) = self.unallocated_claims(pod.pod())?;
        if let Some(rec) = record.as_mut() {
            rec.unallocated = Some((plugin, status.clone()));
        }
        Some(Diagnosis {
            pre_filter_msg: Some(status.message()),
            pre_filter_code: Some(status.code),
            unschedulable_plugins: vec![plugin.to_owned()],
            ..Diagnosis::default()
        })
    }

    /// Whether the node the pod is nominated to (by an earlier preemption), if it is
    /// among `candidates`, passes Filter alone (recorded as a round of its own).
    fn nominated_node_fits(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        candidates: &[u32],
        filters: &[usize],
        filter: &dyn Fn(&[u32]) -> ChunkResult,
        record: &mut Option<CycleRecord>,
    ) -> Result<bool, PluginError> {
        let Some(slot) = snapshot
            .slot_of(&pod.nominated_node_name)
            .filter(|s| candidates.contains(s))
        else {
            return Ok(false);
        };
        let (ok, bad) = filter(&[slot])?;
        if let Some(rec) = record.as_mut() {
            rec.filtered_round(&[slot], &bad);
            if let Some(e) = self.cycle_error(pod, snapshot, &bad, filters) {
                return Err(e);
            }
            if !ok.is_empty() {
                rec.feasible = vec![slot];
                rec.picked = Some(slot);
            }
        }
        Ok(!ok.is_empty())
    }

    /// The node the batch offers a pod signed `signature`: `None` without an offer,
    /// `Some(None)` when the offered node does not fit, else `Some(Some(node))`.
    #[allow(
        clippy::too_many_arguments,
        reason = "the cycle's inputs the batch's offer is checked against"
    )]
    fn batched_node(
        &self,
        pod: &CyclePod,
        signature: &str,
        cycle: Cycle,
        state: &CycleState,
        snapshot: &Snapshot,
        candidates: &[u32],
        fitting: &mut FitFilter<'_>,
    ) -> Result<Option<Option<String>>, PluginError> {
        let Some(hint) = self.batch_hint(pod, signature, cycle, state, snapshot, fitting)? else {
            return Ok(None);
        };
        let fits = candidates.contains(&hint.slot)
            && match hint.fits {
                Some(known) => known,
                None => !fitting(&[hint.slot])?.is_empty(),
            };
        Ok(Some(fits.then(|| {
            snapshot
                .node(hint.slot)
                .map(|n| n.name().to_owned())
                .unwrap_or_default()
        })))
    }

    /// Filter over `candidates`, from the round-robin start, until enough nodes fit
    /// (`numFeasibleNodesToFind`): the feasible nodes in round order and how many
    /// nodes were processed; each rejected node's first rejection goes into
    /// `diagnosis`. An explaining record leaves the round-robin start as it was.
    #[allow(
        clippy::too_many_arguments,
        reason = "the attempt's inputs, its diagnosis and its record"
    )]
    fn find_feasible(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        state: &CycleState,
        candidates: &[u32],
        filters: &[usize],
        overlays: &HashMap<u32, Overlay>,
        diagnosis: &mut Diagnosis,
        record: &mut Option<CycleRecord>,
    ) -> Result<(Vec<u32>, usize), PluginError> {
        let every = record.as_ref().is_some_and(|r| r.explaining);
        let n = candidates.len();
        let to_find = num_feasible_nodes_to_find(self.search.percentage_of_nodes_to_score, n);
        let start = *lock(&self.search.next_start) % n;
        let mut feasible: Vec<u32> = Vec::new();
        let mut processed = 0usize;
        while processed < n && feasible.len() < to_find {
            let want = to_find - feasible.len();
            let take = (n - processed).min(want.max(MIN_ROUND));
            let begin = (start + processed) % n;
            let round: Vec<u32> = candidates[begin..]
                .iter()
                .chain(&candidates[..begin])
                .take(take)
                .copied()
                .collect();
            let results = self.fan_out(&round, |w, chunk| {
                self.filter_chunk(w, state, pod, snapshot, chunk, filters, overlays, every)
            });
            // In round order: the chunks come back in order, each with its nodes that
            // passed in order.
            let mut passed: Vec<u32> = Vec::with_capacity(round.len());
            let mut failed: Vec<(u32, usize, Status)> = Vec::new();
            for (ok, bad) in self.first_failure(results, filters)? {
                passed.extend(ok);
                failed.extend(bad);
            }
            if let Some(rec) = record.as_mut() {
                rec.filtered_round(&round, &failed);
            }
            if let Some(e) = every
                .then(|| self.cycle_error(pod, snapshot, &failed, filters))
                .flatten()
            {
                return Err(e);
            }
            // Keep only the nodes up to the one that completed the count, as
            // upstream counts processed nodes.
            let mut cut = round.len();
            let mut next_passed = passed.iter().peekable();
            for (k, slot) in round.iter().enumerate() {
                if next_passed.next_if_eq(&slot).is_some() {
                    feasible.push(*slot);
                    if feasible.len() == to_find {
                        cut = k + 1;
                        break;
                    }
                }
            }
            debug_assert!(
                cut < round.len() || next_passed.next().is_none(),
                "the nodes that passed are not in round order"
            );
            let mut kept: Vec<u32> = round[..cut].to_vec();
            kept.sort_unstable();
            // A node's first rejection is the cycle's (an explaining cycle has them
            // all, the first first).
            let mut seen: HashSet<u32> = HashSet::new();
            for (slot, plugin, status) in failed {
                if kept.binary_search(&slot).is_ok() && seen.insert(slot) {
                    let name = &self.plugins[plugin].name;
                    if !diagnosis.unschedulable_plugins.contains(name) {
                        diagnosis.unschedulable_plugins.push(name.clone());
                    }
                    diagnosis.node_statuses.push((slot, status));
                }
            }
            processed += cut;
        }
        if !every {
            *lock(&self.search.next_start) = (start + processed) % n;
        }
        Ok((feasible, processed))
    }

    /// PreScore, Score, NormalizeScore and the weights over `feasible`: the plugins
    /// that scored, each node's total, and (with `keep_raw`) every plugin's raw
    /// scores for the batch when every plugin scored.
    fn score_feasible(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        state: &CycleState,
        feasible: &[u32],
        keep_raw: bool,
        record: &mut Option<CycleRecord>,
    ) -> Result<ScoredNodes, PluginError> {
        let skip_score = self.run_pre_score(pod, state, snapshot, feasible)?;
        if let Some(rec) = record.as_mut() {
            rec.skipped_score.clone_from(&skip_score);
        }
        let scorers = self.scorers(&skip_score);
        let mut totals = vec![0i64; feasible.len()];
        let mut kept_raw: Option<Vec<Vec<i64>>> = keep_raw.then(Vec::new);
        let mut timer = self.timer("Score", record);
        if !scorers.is_empty() {
            let chunks = self.fan_out(feasible, |w, chunk| {
                self.score_chunk(w, state, pod, snapshot, chunk, &scorers)
            });
            let mut per_plugin: Vec<Result<Vec<i64>, PluginError>> = (0..scorers.len())
                .map(|_| Ok(Vec::with_capacity(feasible.len())))
                .collect();
            for chunk in chunks {
                for (p, scores) in chunk.into_iter().enumerate() {
                    match (&mut per_plugin[p], scores) {
                        (Ok(all), Ok(s)) => all.extend(s),
                        (slot, Err(e)) if slot.is_ok() => *slot = Err(e),
                        _ => {}
                    }
                }
            }
            let mut main = lock(&self.instances.main);
            for (p, &(i, weight)) in scorers.iter().enumerate() {
                let raw = std::mem::replace(&mut per_plugin[p], Ok(Vec::new()));
                let raw_ok = raw.as_ref().ok().cloned();
                if let Some(kept) = kept_raw.as_mut() {
                    match &raw_ok {
                        Some(r) => kept.push(r.clone()),
                        None => kept_raw = None,
                    }
                }
                let final_scores =
                    self.final_scores(&mut main, state, pod, i, raw, feasible, snapshot)?;
                if final_scores.is_none() {
                    // Failed open: the others decide, and the batch keeps nothing.
                    kept_raw = None;
                }
                if let (Some(rec), Some(s), Some(r)) = (record.as_mut(), &final_scores, raw_ok) {
                    rec.scores.insert(i, s.clone());
                    rec.raw.insert(i, r);
                }
                for (k, s) in final_scores.iter().flatten().enumerate() {
                    totals[k] += s * weight;
                }
            }
        }
        timer.status = "Success";
        Ok((scorers, totals, kept_raw))
    }

    /// The index of the best total; ties broken uniformly at random (reservoir
    /// sampling). `explaining`: on a copy of the random source, which then picks as
    /// the next cycle would and leaves it as it was.
    fn select(&self, totals: &[i64], explaining: bool) -> usize {
        let mut copy;
        let mut shared;
        let rng: &mut rand::rngs::StdRng = if explaining {
            copy = lock(&self.search.rng).clone();
            &mut copy
        } else {
            shared = lock(&self.search.rng);
            &mut shared
        };
        let mut best = 0usize;
        let mut ties = 0u32;
        for (k, &t) in totals.iter().enumerate() {
            if t > totals[best] {
                best = k;
                ties = 1;
            } else if t == totals[best] {
                ties += 1;
                if rng.random_range(0..ties) == 0 {
                    best = k;
                }
            }
        }
        best
    }
}

/// The slots of the nodes named in `within` (a pod group's placement), in the
/// snapshot's order.
fn placement_slots(snapshot: &Snapshot, within: &HashSet<String>) -> Vec<u32> {
    snapshot
        .slots()
        .iter()
        .copied()
        .filter(|&s| snapshot.node(s).is_some_and(|n| within.contains(n.name())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feasible_nodes_to_find_follows_upstream() {
        assert_eq!(num_feasible_nodes_to_find(0, 10), 10);
        assert_eq!(num_feasible_nodes_to_find(0, 99), 99);
        assert_eq!(num_feasible_nodes_to_find(0, 100), 100);
        // 50 - 1000/125 = 42%.
        assert_eq!(num_feasible_nodes_to_find(0, 1000), 420);
        // 50 - 5000/125 = 10%.
        assert_eq!(num_feasible_nodes_to_find(0, 5000), 500);
        // Adaptive never goes below 5%.
        assert_eq!(num_feasible_nodes_to_find(0, 10_000), 500);
        assert_eq!(num_feasible_nodes_to_find(1, 1000), 100);
        assert_eq!(num_feasible_nodes_to_find(30, 1000), 300);
        assert_eq!(num_feasible_nodes_to_find(100, 1000), 1000);
    }
}
