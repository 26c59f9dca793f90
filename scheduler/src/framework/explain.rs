//! `berth explain`: one pod's scheduling attempt as the cycle would make it now,
//! observed, not re-run: its decisions are the cycle's ([`Framework::attempt`]),
//! shown with every Filter plugin's answer on every node (no stopping at the first
//! failure) and every Score plugin's raw, normalized and weighted score.

use super::{
    CyclePod, CycleRecord, CycleState, Framework, InstanceSet, PluginError, Runner,
    ScheduleOutcome, lock,
};
use berth_cluster::pod_groups::{GroupTemplate, TemplateFound};
use berth_runtime::cache::Snapshot;
use berth_sdk::dra::ResourceClaim;
use berth_sdk::{Code, ExtensionPoint, Status};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One plugin's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PluginStatus {
    /// The plugin.
    pub plugin: String,
    /// The code, spelled as upstream's.
    pub code: String,
    /// The reasons.
    pub reasons: Vec<String>,
}

impl PluginStatus {
    fn new(plugin: &str, status: &Status) -> Self {
        PluginStatus {
            plugin: plugin.to_owned(),
            code: status.code.as_str().to_owned(),
            reasons: status.reasons.clone(),
        }
    }
}

/// One plugin's score on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScoreEntry {
    /// The plugin.
    pub plugin: String,
    /// What Score answered.
    pub raw: i64,
    /// After NormalizeScore (the raw score when the plugin does not normalize).
    pub normalized: i64,
    /// Normalized times the plugin's weight.
    pub weighted: i64,
}

/// What every plugin said about one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeExplanation {
    /// The node.
    pub node: String,
    /// Whether every filter passed.
    pub feasible: bool,
    /// Every Filter plugin's status (and the PreFilter result's, for nodes it left out).
    pub filters: Vec<PluginStatus>,
    /// Every Score plugin's score; empty for infeasible nodes.
    pub scores: Vec<ScoreEntry>,
    /// The sum of the weighted scores.
    pub total: i64,
}

/// The whole explanation, as `berth explain --output json` prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// Every PreFilter plugin's status.
    pub prefilter: Vec<PluginStatus>,
    /// One entry per node, in snapshot order.
    pub nodes: Vec<NodeExplanation>,
    /// The node the scheduling cycle would choose now (among equal totals, the one
    /// the next cycle's random choice would make); `None` when no node fits.
    pub chosen: Option<String>,
    /// The error the scheduling attempt would fail with (a plugin answered Error, or
    /// failed); the pod would be retried after a backoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When no node is feasible: what PostFilter (preemption) would do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_filter: Option<PostFilterExplanation>,
    /// For a member of a pod group: what the group's cycle would make of its waiting
    /// members now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_group: Option<PodGroupExplanation>,
    /// For a pod with ResourceClaims that fits somewhere: the devices its claims
    /// would have on the best node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<DevicesExplanation>,
}

/// The devices a pod's ResourceClaims would have on the node explained: what the
/// Reserve plugins would assume there (Reserve is run, its claims read, and
/// Unreserve run at once; nothing is written).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DevicesExplanation {
    /// The feasible node with the highest total (the first in node order among
    /// equals: the scheduler picks one of them at random).
    pub node: String,
    /// One entry per device of each of the pod's claims, by claim; a claim allocated
    /// before shows the devices it has.
    pub devices: Vec<DeviceReport>,
    /// Why Reserve would fail on the node, when it would.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve_failure: Option<String>,
}

/// A device a ResourceClaim was given (by DynamicResources' Reserve and PreBind),
/// one per device of its allocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceReport {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub claim: String,
    /// The request of the claim it serves (`request/subrequest` for a prioritized
    /// list's choice).
    pub request: String,
    /// `driver/pool/device`.
    pub device: String,
    /// The pods the claim is reserved for, by name.
    pub reserved_for: Vec<String>,
}

/// A claim's name as reports show it: the claim for a pod's extended resources that
/// PreBind has not made yet by the name it will get, its suffix left open.
fn shown_name(c: &ResourceClaim) -> String {
    match &c.controller {
        Some(pod) if berth_sdk::dra::is_in_memory_extended_claim_name(&c.name) => {
            format!("{}-extended-resources-*", pod.name)
        }
        _ => c.name.clone(),
    }
}

impl DeviceReport {
    /// One entry per device of each allocated claim, by claim, then in the
    /// allocation's order.
    pub fn of(claims: &[Arc<ResourceClaim>]) -> Vec<DeviceReport> {
        claims
            .iter()
            .flat_map(|c| {
                let reserved_for: Vec<String> = c
                    .status
                    .reserved_for
                    .iter()
                    .map(|r| r.name.clone())
                    .collect();
                c.status
                    .allocation
                    .iter()
                    .flat_map(|a| &a.devices)
                    .map(move |d| DeviceReport {
                        namespace: c.namespace.clone(),
                        claim: shown_name(c),
                        request: d.request.clone(),
                        device: d.device_id().to_string(),
                        reserved_for: reserved_for.clone(),
                    })
            })
            .collect()
    }

    /// `namespace/claim  request R: device D (for pods)`, one line.
    pub fn to_text(&self) -> String {
        let reserved = if self.reserved_for.is_empty() {
            String::new()
        } else {
            format!(" (for {})", self.reserved_for.join(", "))
        };
        format!(
            "{}/{}  request {}: device {}{reserved}\n",
            self.namespace, self.claim, self.request, self.device
        )
    }
}

/// What a pod group's cycle would make of its waiting members (the members are
/// tried together, and bind only when the group can be placed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PodGroupExplanation {
    /// `namespace/name`.
    pub group: String,
    /// `gang, minCount N` or `basic`.
    pub policy: String,
    /// The Workload template the group was made from, when its PodGroup names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<GroupWorkloadExplanation>,
    /// Members bound or assumed before the cycle.
    pub scheduled_before: u32,
    /// The placement (of the profile's PlacementGenerate plugins) the members are
    /// shown within: the chosen one, or, when none can take the group, the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// The members the cycle would try, in its order.
    pub members: Vec<MemberExplanation>,
    /// Whether the group would be placed.
    pub feasible: bool,
    /// The verdict: `feasible`, or why not.
    pub verdict: String,
    /// What workload-aware preemption (PodGroupPostFilter) would do for a group
    /// that is not feasible; none when the profile has no such plugin or the group
    /// is feasible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<GroupPreemptionExplanation>,
}

/// What PodGroupPostFilter would do for a pod group (nothing of it carried out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupPreemptionExplanation {
    /// The plugin that answered last.
    pub plugin: String,
    /// Whether it would make room.
    pub found_room: bool,
    /// Why not, when it would not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The pods it would evict, `namespace/name`, most important first.
    pub victims: Vec<String>,
    /// Each member it would nominate, `namespace/name`, and the node.
    pub nominations: Vec<(String, String)>,
}

/// The Workload template a pod group was made from
/// (`spec.workloadRef` of its PodGroup).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupWorkloadExplanation {
    /// The Workload, `namespace/name`.
    pub workload: String,
    /// The template's name.
    pub template: String,
    /// Whether the cluster has that Workload with that template. The group is
    /// scheduled either way: its PodGroup carries the template's policy.
    pub known: bool,
    /// When not known: what is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

impl From<GroupTemplate> for GroupWorkloadExplanation {
    fn from(t: GroupTemplate) -> Self {
        GroupWorkloadExplanation {
            workload: format!("{}/{}", t.namespace, t.workload),
            missing: t.missing(),
            known: t.found == TemplateFound::Yes,
            template: t.template,
        }
    }
}

/// One member of a pod group's cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberExplanation {
    /// `namespace/name`.
    pub pod: String,
    /// The node it would be placed on, if any.
    pub node: Option<String>,
    /// Why it would not (no node fits; the cycle stopped before it).
    pub reason: Option<String>,
}

/// What PostFilter answered for a pod that fits no node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PostFilterExplanation {
    /// The plugin.
    pub plugin: String,
    /// Its status.
    pub status: PluginStatus,
    /// The node it would nominate.
    pub nominated_node: Option<String>,
    /// The candidates it considered, best first: node, victims (`namespace/name`),
    /// how many victims a PodDisruptionBudget protects.
    pub candidates: Vec<CandidateExplanation>,
}

/// One preemption candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CandidateExplanation {
    /// The node.
    pub node: String,
    /// The pods that would be evicted, most important first.
    pub victims: Vec<String>,
    /// How many of them a PodDisruptionBudget protects.
    pub pdb_violations: u32,
}

/// What to explain.
#[derive(Clone, Debug, Default)]
pub struct ExplainOptions {
    /// Score exactly these nodes, in this order, feasible or not (conformance tests
    /// do, as upstream's score tests); `None` scores the feasible nodes.
    pub score_nodes: Option<Vec<String>>,
}

/// The PreFilter answers an explanation shows: the cycle's, then those of the
/// plugins after a rejection (run to show them; they decide nothing).
struct PreFilterView {
    /// Every PreFilter plugin's status, in profile order.
    shown: Vec<PluginStatus>,
    /// Plugins whose Filter does not run (Skip, or sat out).
    skip: HashSet<usize>,
    /// Plugins that rejected the pod, and how.
    rejected_by: HashMap<usize, Status>,
    /// Plugins that narrowed the nodes, and to which.
    narrowing: Vec<(usize, HashSet<String>)>,
}

impl Framework {
    /// Explains how the profile sees `pod` on every node of the snapshot, with
    /// `nominated` pods counted on their nodes as the cycle counts them. The
    /// decisions (which nodes fit, the scores the cycle gave, the node it would
    /// choose, PostFilter's verdict) are the scheduling attempt's own
    /// ([`Framework::attempt`] with an explaining record); what the cycle did not
    /// need is run beside it to be shown: every Filter plugin on every node, the
    /// PreFilter plugins after a rejection, and the scores of a lone feasible node.
    pub fn explain(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        nominated: &super::NominatedPods,
        options: &ExplainOptions,
    ) -> Result<Explanation, PluginError> {
        let state = CycleState::new().with_participants(self.participants(pod, snapshot));
        let mut record = Some(CycleRecord::explaining());
        let (outcome, state) = self.attempt(
            pod,
            snapshot,
            nominated,
            true,
            None,
            None,
            state,
            &mut record,
        );
        let rec = record.unwrap_or_default();
        let (chosen, verdict, error) = match outcome {
            ScheduleOutcome::Scheduled { node, .. } => (Some(node), None, None),
            ScheduleOutcome::Unschedulable(_, verdict) => (None, verdict, None),
            // What the cycle saw before it failed is shown with the failure.
            ScheduleOutcome::Error(e) => (None, None, Some(e.to_string())),
        };
        let pre = self.pre_filter_view(pod, snapshot, &state, &rec)?;
        let mut filters = self.filter_view(pod, snapshot, nominated, &state, &rec, &pre)?;
        let prefilter_rejected = !pre.rejected_by.is_empty() || rec.unallocated.is_some();
        let feasible_of = |s: u32, filters: &HashMap<u32, Vec<PluginStatus>>| {
            !prefilter_rejected
                && filters
                    .get(&s)
                    .is_none_or(|f| f.iter().all(|p| p.code == "Success"))
        };
        let slots: Vec<u32> = snapshot.slots().to_vec();
        let name_of = |slot: u32| {
            snapshot
                .node(slot)
                .map(|n| n.name().to_owned())
                .unwrap_or_default()
        };

        // The scores the cycle gave; a lone feasible node's (the cycle does not
        // score it), or the nodes asked for, scored to be shown.
        let mut scores = match &options.score_nodes {
            Some(names) => {
                let asked: Vec<u32> = names.iter().filter_map(|n| snapshot.slot_of(n)).collect();
                self.scores_shown(&state, pod, snapshot, &asked)?
            }
            None if rec.scored => self.cycle_scores(&rec),
            None => {
                let feasible: Vec<u32> = slots
                    .iter()
                    .copied()
                    .filter(|&s| feasible_of(s, &filters))
                    .collect();
                self.scores_shown(&state, pod, snapshot, &feasible)?
            }
        };

        // The devices of the pod's claims on the node the cycle would choose, as
        // Reserve would assume them. A pod group's members reserve in their group's
        // cycle, not alone.
        let mut claims = berth_runtime::wasm::capability::resource_claim_names(pod.pod());
        // The claim DynamicResources would make for the pod's extended resources
        // backed by DRA, under the name Reserve assumes it by (shown only if it did).
        if berth_sdk::PodFeature::ResourceClaims.of(pod.pod(), false) {
            claims.push(berth_sdk::dra::in_memory_extended_claim_name(
                &pod.pod().uid,
            ));
        }
        let in_group = self.generic_workload && pod.pod().scheduling_group.is_some();
        let devices = match &chosen {
            Some(node) if !claims.is_empty() && !in_group => {
                let mut main = lock(&self.instances.main);
                Some(self.reserved_devices(&mut main, &state, pod, node, &claims)?)
            }
            _ => None,
        };
        let post_filter = verdict.map(|v| post_filter_shown(&v, snapshot));
        let nodes = slots
            .iter()
            .map(|&s| {
                let scores = scores.remove(&s).unwrap_or_default();
                NodeExplanation {
                    node: name_of(s),
                    feasible: feasible_of(s, &filters),
                    filters: filters.remove(&s).unwrap_or_default(),
                    total: scores.iter().map(|e| e.weighted).sum(),
                    scores,
                }
            })
            .collect();
        Ok(Explanation {
            pod: format!("{}/{}", pod.namespace, pod.name),
            prefilter: pre.shown,
            nodes,
            chosen,
            error,
            post_filter,
            pod_group: None,
            devices,
        })
    }

    /// Every PreFilter plugin's answer: the cycle's, and those the cycle did not ask
    /// (after a rejection, or when no plugin allocates the pod's claims) asked now.
    fn pre_filter_view(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        state: &CycleState,
        rec: &CycleRecord,
    ) -> Result<PreFilterView, PluginError> {
        let mut view = PreFilterView {
            shown: Vec::new(),
            skip: HashSet::new(),
            rejected_by: HashMap::new(),
            narrowing: Vec::new(),
        };
        if let Some((plugin, status)) = &rec.unallocated {
            view.shown.push(PluginStatus::new(plugin, status));
        }
        let mut main = lock(&self.instances.main);
        for &(i, _) in self.at(ExtensionPoint::PreFilter) {
            let (status, names) = match rec.pre_filter.get(&i) {
                Some((status, names)) => (
                    status.clone(),
                    names.as_ref().map(|n| n.iter().cloned().collect()),
                ),
                None if !self.takes_part(i, pod, state) => {
                    (Status::new(Code::Skip, Vec::new()), None)
                }
                None => {
                    let inst = main.get(i, &self.plugins)?;
                    inst.sync_for(snapshot, &[], pod)?;
                    let r = inst.pre_filter(state, pod)?;
                    (r.status, r.node_names.map(|n| n.into_iter().collect()))
                }
            };
            view.shown
                .push(PluginStatus::new(&self.plugins[i].name, &status));
            match status.code {
                Code::Skip => {
                    view.skip.insert(i);
                }
                Code::Success => {
                    if let Some(names) = names {
                        view.narrowing.push((i, names));
                    }
                }
                _ => {
                    view.rejected_by.insert(i, status);
                }
            }
        }
        Ok(view)
    }

    /// Every Filter plugin's status on every node: the cycle's on the nodes it
    /// filtered (it ran every plugin on them), the rest run now to be shown; a
    /// PreFilter rejection stands for its plugin on every node, and a node a
    /// PreFilter result left out has that plugin's status saying so.
    fn filter_view(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        nominated: &super::NominatedPods,
        state: &CycleState,
        rec: &CycleRecord,
        pre: &PreFilterView,
    ) -> Result<HashMap<u32, Vec<PluginStatus>>, PluginError> {
        let slots = snapshot.slots();
        let mut shown: HashMap<u32, Vec<PluginStatus>> = HashMap::new();
        if let Some((plugin, status)) = &rec.unallocated {
            for &s in slots {
                shown
                    .entry(s)
                    .or_default()
                    .push(PluginStatus::new(plugin, status));
            }
        }
        for (i, names) in &pre.narrowing {
            let name = &self.plugins[*i].name;
            let left_out =
                Status::unresolvable(format!("node(s) didn't satisfy plugin(s) [{name}]"));
            for &s in slots {
                if snapshot.node(s).is_some_and(|n| !names.contains(n.name())) {
                    shown
                        .entry(s)
                        .or_default()
                        .push(PluginStatus::new(name, &left_out));
                }
            }
        }
        let run: Vec<usize> = self
            .at(ExtensionPoint::Filter)
            .iter()
            .map(|&(i, _)| i)
            .filter(|i| !pre.skip.contains(i) && !pre.rejected_by.contains_key(i))
            .collect();
        // The nodes the cycle did not filter, filtered now by every plugin.
        let unvisited: Vec<u32> = slots
            .iter()
            .copied()
            .filter(|s| !rec.filtered.contains_key(s))
            .collect();
        let mut verdicts: HashMap<u32, Vec<(usize, Status)>> =
            rec.verdicts.iter().map(|(s, v)| (*s, v.clone())).collect();
        if !unvisited.is_empty() && !run.is_empty() {
            let overlays = self.nominated_overlays(pod, snapshot, nominated, state, &pre.skip)?;
            let (_, failed) = self.filter_chunk(
                Runner::Main,
                state,
                pod,
                snapshot,
                &unvisited,
                &run,
                &overlays,
                true,
            )?;
            for (s, i, status) in failed {
                verdicts.entry(s).or_default().push((i, status));
            }
        }
        for &(i, _) in self.at(ExtensionPoint::Filter) {
            if pre.skip.contains(&i) {
                continue;
            }
            let name = &self.plugins[i].name;
            for &s in slots {
                let status = match pre.rejected_by.get(&i) {
                    // Its PreFilter already rejected the pod everywhere.
                    Some(status) => status.clone(),
                    None => verdicts
                        .get(&s)
                        .and_then(|v| v.iter().find(|(p, _)| *p == i))
                        .map_or_else(Status::success, |(_, status)| status.clone()),
                };
                let entry = shown.entry(s).or_default();
                // A node the PreFilter result left out already has that plugin's entry.
                if !entry.iter().any(|e| &e.plugin == name) {
                    entry.push(PluginStatus::new(name, &status));
                }
            }
        }
        Ok(shown)
    }

    /// The scores the cycle gave its feasible nodes, every Score plugin's: its raw,
    /// normalized and weighted score, zeros for a plugin that did not score (sat
    /// out, or Skip at PreScore); a plugin that failed open is left out.
    fn cycle_scores(&self, rec: &CycleRecord) -> HashMap<u32, Vec<ScoreEntry>> {
        let mut scores: HashMap<u32, Vec<ScoreEntry>> = HashMap::new();
        for &(i, weight) in self.at(ExtensionPoint::Score) {
            let (raw, normalized) = match (rec.raw.get(&i), rec.scores.get(&i)) {
                (Some(r), Some(n)) => (r.clone(), n.clone()),
                _ if rec.skipped_score.contains(&i) => {
                    (vec![0; rec.feasible.len()], vec![0; rec.feasible.len()])
                }
                _ => continue,
            };
            for (k, &s) in rec.feasible.iter().enumerate() {
                scores.entry(s).or_default().push(ScoreEntry {
                    plugin: self.plugins[i].name.clone(),
                    raw: raw[k],
                    normalized: normalized[k],
                    weighted: normalized[k] * weight,
                });
            }
        }
        scores
    }

    /// Every Score plugin's scores over `slots`, feasible or not, run to be shown:
    /// the lone feasible node the cycle does not score, or the nodes a conformance
    /// test asks for (as upstream's score tests score exactly the nodes they list).
    fn scores_shown(
        &self,
        state: &CycleState,
        pod: &CyclePod,
        snapshot: &Snapshot,
        slots: &[u32],
    ) -> Result<HashMap<u32, Vec<ScoreEntry>>, PluginError> {
        let mut scores: HashMap<u32, Vec<ScoreEntry>> = HashMap::new();
        if slots.is_empty() {
            return Ok(scores);
        }
        // PreScore as the cycle runs it (a plugin that sits the pod out, answers
        // Skip or fails does not score).
        let skip_score = self.run_pre_score(pod, state, snapshot, slots)?;
        let mut main = lock(&self.instances.main);
        for &(i, weight) in self.at(ExtensionPoint::Score) {
            let (raw, normalized) = if skip_score.contains(&i) {
                (vec![0; slots.len()], vec![0; slots.len()])
            } else {
                let inst = main.get(i, &self.plugins)?;
                inst.sync_for(snapshot, &[], pod)?;
                let raw = inst
                    .score(state, pod, slots)?
                    .map_err(|s| self.failure(i, &s))?;
                let normalized = if self.plugins[i].normalizes {
                    inst.normalize_score(state, pod, &raw)?
                        .map_err(|s| self.failure(i, &s))?
                } else {
                    raw.clone()
                };
                (raw, normalized)
            };
            for (k, &s) in slots.iter().enumerate() {
                scores.entry(s).or_default().push(ScoreEntry {
                    plugin: self.plugins[i].name.clone(),
                    raw: raw[k],
                    normalized: normalized[k],
                    weighted: normalized[k] * weight,
                });
            }
        }
        Ok(scores)
    }

    /// Runs Reserve for `pod` on `node`, reads the claims named `claims` as the
    /// view then shows them, and runs Unreserve: the devices the claims would have
    /// there, or why Reserve would fail.
    fn reserved_devices(
        &self,
        main: &mut InstanceSet,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
        claims: &[String],
    ) -> Result<DevicesExplanation, PluginError> {
        let reserve: Vec<usize> = self
            .at(ExtensionPoint::Reserve)
            .iter()
            .map(|&(i, _)| i)
            .filter(|&i| self.takes_part(i, pod, state))
            .collect();
        let mut reserve_failure = None;
        for &i in &reserve {
            let status = main.get(i, &self.plugins)?.reserve(state, pod, node)?;
            if !status.is_success() {
                reserve_failure = Some(self.failure(i, &status).to_string());
                break;
            }
        }
        let dra = &self.instances.binding_services.dra;
        let shown: Vec<Arc<ResourceClaim>> = claims
            .iter()
            .filter_map(|name| dra.claim(&pod.namespace, name))
            .collect();
        let devices = DeviceReport::of(&shown);
        // As the cycle does after a failed Reserve: every Reserve plugin, in reverse.
        for &i in reserve.iter().rev() {
            if let Err(e) = main
                .get(i, &self.plugins)
                .and_then(|inst| inst.unreserve(state, pod, node).map_err(PluginError::from))
            {
                tracing::warn!(pod = %pod.key(), node, "explain: unreserve failed: {e}");
            }
        }
        Ok(DevicesExplanation {
            node: node.to_owned(),
            devices,
            reserve_failure,
        })
    }
}

/// PostFilter's verdict as an explanation shows it: the victims by
/// `namespace/name`.
fn post_filter_shown(v: &super::PostFilterVerdict, snapshot: &Snapshot) -> PostFilterExplanation {
    let key_of = |node: &str, uid: &str| {
        snapshot
            .node_by_name(node)
            .and_then(|n| n.pods.iter().find(|p| p.uid == uid))
            .map_or_else(|| uid.to_owned(), |p| p.key())
    };
    PostFilterExplanation {
        plugin: v.plugin.clone(),
        status: PluginStatus::new(&v.plugin, &v.status),
        nominated_node: v.nominated_node_name.clone().filter(|n| !n.is_empty()),
        candidates: v
            .candidates
            .iter()
            .map(|c| CandidateExplanation {
                node: c.node.clone(),
                victims: c.victims.iter().map(|u| key_of(&c.node, u)).collect(),
                pdb_violations: c.pdb_violations,
            })
            .collect(),
    }
}

impl Explanation {
    /// A readable table: the PreFilter results, then one block per node.
    pub fn to_text(&self) -> String {
        let mut out = format!("Pod {}\n", self.pod);
        if !self.prefilter.is_empty() {
            out.push_str("PreFilter:\n");
            for p in &self.prefilter {
                out.push_str(&format!(
                    "  {:<32} {}{}\n",
                    p.plugin,
                    p.code,
                    reasons_suffix(&p.reasons)
                ));
            }
        }
        let width = self
            .nodes
            .iter()
            .map(|n| n.node.len())
            .max()
            .unwrap_or(4)
            .max(4);
        out.push_str(&format!(
            "{:<width$}  {:<8}  {:>6}  FAILED FILTERS, or SCORES (raw/normalized/weighted)\n",
            "NODE", "FEASIBLE", "TOTAL"
        ));
        for n in &self.nodes {
            let failing: Vec<String> = n
                .filters
                .iter()
                .filter(|f| f.code != "Success")
                .map(|f| format!("{}: {}{}", f.plugin, f.code, reasons_suffix(&f.reasons)))
                .collect();
            let details = if !failing.is_empty() {
                failing.join("; ")
            } else {
                n.scores
                    .iter()
                    .map(|s| format!("{} {}/{}/{}", s.plugin, s.raw, s.normalized, s.weighted))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let total = if n.feasible {
                n.total.to_string()
            } else {
                "-".into()
            };
            let feasible = if n.feasible { "yes" } else { "no" };
            out.push_str(&format!(
                "{:<width$}  {feasible:<8}  {total:>6}  {details}\n",
                n.node
            ));
        }
        if let Some(node) = &self.chosen {
            out.push_str(&format!("The cycle would choose {node}.\n"));
        }
        if let Some(e) = &self.error {
            out.push_str(&format!("The cycle would fail: {e}\n"));
        }
        if let Some(pf) = &self.post_filter {
            out.push_str(&format!(
                "PostFilter {}: {}{}\n",
                pf.plugin,
                pf.status.code,
                reasons_suffix(&pf.status.reasons)
            ));
            for (k, c) in pf.candidates.iter().enumerate() {
                let chosen = if k == 0 && pf.nominated_node.as_deref() == Some(c.node.as_str()) {
                    "  (nominated)"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "  candidate {}: evict {} ({} PDB violation(s)){chosen}\n",
                    c.node,
                    c.victims.join(", "),
                    c.pdb_violations
                ));
            }
        }
        if let Some(d) = &self.devices {
            out.push_str(&format!(
                "Devices on {} (the node the cycle would choose), as Reserve would assume them:\n",
                d.node
            ));
            for device in &d.devices {
                out.push_str(&format!("  {}", device.to_text()));
            }
            if let Some(why) = &d.reserve_failure {
                out.push_str(&format!("  Reserve would fail: {why}\n"));
            }
        }
        if let Some(g) = &self.pod_group {
            out.push_str(&format!(
                "Pod group {} ({}): {} member(s) scheduled before; its cycle would try {}:\n",
                g.group,
                g.policy,
                g.scheduled_before,
                g.members.len()
            ));
            if let Some(w) = &g.workload {
                out.push_str(&format!(
                    "  made from Workload {}, template {:?}{}\n",
                    w.workload,
                    w.template,
                    match &w.missing {
                        None => String::new(),
                        Some(m) => format!(": not known ({m}); the group is scheduled without it"),
                    }
                ));
            }
            if let Some(p) = &g.placement {
                out.push_str(&format!("  within placement {p:?}\n"));
            }
            let width = g.members.iter().map(|m| m.pod.len()).max().unwrap_or(0);
            for m in &g.members {
                let place = match (&m.node, &m.reason) {
                    (Some(node), _) => node.clone(),
                    (None, Some(reason)) => reason.clone(),
                    (None, None) => String::new(),
                };
                out.push_str(&format!("  {:<width$}  {place}\n", m.pod));
            }
            out.push_str(&format!(
                "  verdict: {}\n",
                if g.feasible {
                    "placed as above"
                } else {
                    g.verdict.as_str()
                }
            ));
            if let Some(p) = &g.preemption {
                match &p.reason {
                    None => {
                        out.push_str(&format!(
                            "  preemption ({}): would evict {}\n",
                            p.plugin,
                            p.victims.join(", ")
                        ));
                        for (pod, node) in &p.nominations {
                            out.push_str(&format!("    nominate {pod} to {node}\n"));
                        }
                    }
                    Some(why) => {
                        out.push_str(&format!("  preemption ({}): {why}\n", p.plugin));
                    }
                }
            }
        }
        out
    }
}

fn reasons_suffix(reasons: &[String]) -> String {
    if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", reasons.join(", "))
    }
}
