//! `berth explain`: one pod against every node, with every Filter plugin's answer on
//! every node (no stopping at the first failure) and every Score plugin's raw,
//! normalized and weighted score over the feasible nodes (no sampling).

use super::{CyclePod, CycleState, Framework, InstanceSet, PluginError, lock};
use crate::cache::Snapshot;
use crate::cluster::pod_groups::{GroupTemplate, TemplateFound};
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

impl Framework {
    /// Explains how the profile sees `pod` on every node of the snapshot.
    pub fn explain(
        &self,
        pod: &CyclePod,
        snapshot: &Snapshot,
        options: &ExplainOptions,
    ) -> Result<Explanation, PluginError> {
        let state = CycleState::new();
        let mut main = lock(&self.main);
        let slots: Vec<u32> = snapshot.slots().to_vec();
        let name_of = |slot: u32| {
            snapshot
                .node(slot)
                .map(|n| n.name().to_owned())
                .unwrap_or_default()
        };
        let mut filters: HashMap<u32, Vec<PluginStatus>> = HashMap::new();

        // PreFilter: every plugin, recorded.
        let mut prefilter = Vec::new();
        let mut skip: HashSet<usize> = HashSet::new();
        let mut rejected_by: HashMap<usize, Status> = HashMap::new();
        for &(i, _) in self.at(ExtensionPoint::PreFilter) {
            let inst = main.get(i, &self.plugins)?;
            inst.sync(snapshot)?;
            let r = inst.pre_filter(&state, pod)?;
            let name = &self.plugins[i].name;
            prefilter.push(PluginStatus::new(name, &r.status));
            match r.status.code {
                Code::Skip => {
                    skip.insert(i);
                }
                Code::Success => {
                    if let Some(names) = r.node_names {
                        let names: HashSet<String> = names.into_iter().collect();
                        let left_out = Status::unresolvable(format!(
                            "node(s) didn't satisfy plugin(s) [{name}]"
                        ));
                        for &s in &slots {
                            if !names.contains(&name_of(s)) {
                                filters
                                    .entry(s)
                                    .or_default()
                                    .push(PluginStatus::new(name, &left_out));
                            }
                        }
                    }
                }
                _ => {
                    rejected_by.insert(i, r.status);
                }
            }
        }

        // Claims no plugin allocates: rejected everywhere, in DynamicResources' name,
        // as the scheduling cycle rejects them.
        let unallocated = self.unallocated_claims(pod.pod());
        if let Some((plugin, status)) = &unallocated {
            prefilter.insert(0, PluginStatus::new(plugin, status));
            for &s in &slots {
                filters
                    .entry(s)
                    .or_default()
                    .push(PluginStatus::new(plugin, status));
            }
        }

        // Filter: every plugin on every node.
        for &(i, _) in self.at(ExtensionPoint::Filter) {
            if skip.contains(&i) {
                continue;
            }
            let name = &self.plugins[i].name;
            if let Some(status) = rejected_by.get(&i) {
                // Its PreFilter already rejected the pod everywhere.
                for &s in &slots {
                    filters
                        .entry(s)
                        .or_default()
                        .push(PluginStatus::new(name, status));
                }
                continue;
            }
            let inst = main.get(i, &self.plugins)?;
            inst.sync(snapshot)?;
            let failed: HashMap<u32, Status> =
                inst.filter(&state, pod, &slots)?.into_iter().collect();
            for &s in &slots {
                let status = failed.get(&s).cloned().unwrap_or_else(Status::success);
                let entry = filters.entry(s).or_default();
                // A node the PreFilter result left out already has that plugin's entry.
                if !entry.iter().any(|e| &e.plugin == name) {
                    entry.push(PluginStatus::new(name, &status));
                }
            }
        }
        let prefilter_rejected = !rejected_by.is_empty() || unallocated.is_some();
        let feasible_of = |s: u32, filters: &HashMap<u32, Vec<PluginStatus>>| {
            !prefilter_rejected
                && filters
                    .get(&s)
                    .is_none_or(|f| f.iter().all(|p| p.code == "Success"))
        };

        // Score over the feasible nodes, or the nodes asked for.
        let score_slots: Vec<u32> = match &options.score_nodes {
            Some(names) => names.iter().filter_map(|n| snapshot.slot_of(n)).collect(),
            None => slots
                .iter()
                .copied()
                .filter(|&s| feasible_of(s, &filters))
                .collect(),
        };
        let mut scores: HashMap<u32, Vec<ScoreEntry>> = HashMap::new();
        if !score_slots.is_empty() {
            let mut skip_score: HashSet<usize> = HashSet::new();
            for &(i, _) in self.at(ExtensionPoint::PreScore) {
                let inst = main.get(i, &self.plugins)?;
                inst.sync(snapshot)?;
                let status = inst.pre_score(&state, pod, &score_slots)?;
                match status.code {
                    Code::Success => {}
                    Code::Skip => {
                        skip_score.insert(i);
                    }
                    _ => return Err(self.failure(i, &status)),
                }
            }
            for &(i, weight) in self.at(ExtensionPoint::Score) {
                let name = &self.plugins[i].name;
                let (raw, normalized) = if skip_score.contains(&i) {
                    (vec![0; score_slots.len()], vec![0; score_slots.len()])
                } else {
                    let inst = main.get(i, &self.plugins)?;
                    inst.sync(snapshot)?;
                    let raw = inst
                        .score(&state, pod, &score_slots)?
                        .map_err(|s| self.failure(i, &s))?;
                    let normalized = if self.plugins[i].normalizes {
                        inst.normalize_score(&state, pod, &raw)?
                            .map_err(|s| self.failure(i, &s))?
                    } else {
                        raw.clone()
                    };
                    (raw, normalized)
                };
                for (k, &s) in score_slots.iter().enumerate() {
                    scores.entry(s).or_default().push(ScoreEntry {
                        plugin: name.clone(),
                        raw: raw[k],
                        normalized: normalized[k],
                        weighted: normalized[k] * weight,
                    });
                }
            }
        }

        // The devices of the pod's claims on the best node, as Reserve would assume
        // them. A pod group's members reserve in their group's cycle, not alone.
        let best = slots
            .iter()
            .copied()
            .filter(|&s| feasible_of(s, &filters))
            .map(|s| {
                let total: i64 = scores
                    .get(&s)
                    .map_or(0, |e| e.iter().map(|e| e.weighted).sum());
                (s, total)
            })
            .reduce(|a, b| if b.1 > a.1 { b } else { a })
            .map(|(s, _)| name_of(s));
        let mut claims = crate::wasm::capability::resource_claim_names(pod.pod());
        // The claim DynamicResources would make for the pod's extended resources
        // backed by DRA, under the name Reserve assumes it by (shown only if it did).
        if berth_sdk::PodFeature::ResourceClaims.of(pod.pod(), false) {
            claims.push(berth_sdk::dra::in_memory_extended_claim_name(
                &pod.pod().uid,
            ));
        }
        // A group's member reserves its devices in the group's cycle, not alone.
        let in_group = self.generic_workload && pod.pod().scheduling_group.is_some();
        let devices = match best {
            Some(node) if !claims.is_empty() && !in_group => {
                Some(self.reserved_devices(&mut main, &state, pod, &node, &claims)?)
            }
            _ => None,
        };

        drop(main);
        let any_feasible = slots.iter().any(|&s| feasible_of(s, &filters));
        let post_filter = if any_feasible || slots.is_empty() || !self.has_post_filter() {
            None
        } else {
            // Each node's first rejection, or the PreFilter rejection, as PostFilter
            // receives them in a cycle: the first in profile order, as the cycle stops
            // at it.
            let prefilter_status = self
                .at(ExtensionPoint::PreFilter)
                .iter()
                .find_map(|(i, _)| rejected_by.get(i))
                .cloned();
            let statuses: Vec<(u32, Status)> = slots
                .iter()
                .map(|&s| {
                    let first = filters
                        .get(&s)
                        .and_then(|f| f.iter().find(|p| p.code != "Success"));
                    let status = match (first, &prefilter_status) {
                        (_, Some(p)) => p.clone(),
                        (Some(p), None) => Status::new(code_named(&p.code), p.reasons.clone()),
                        (None, None) => Status::success(),
                    };
                    (s, status)
                })
                .collect();
            let verdict = self.post_filter(
                &state,
                pod,
                snapshot,
                &super::NominatedPods::new(),
                &statuses,
                &skip,
                &self.budgets,
            )?;
            verdict.map(|v| {
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
            })
        };
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
            prefilter,
            nodes,
            post_filter,
            pod_group: None,
            devices,
        })
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
        let dra = &self.binding_services.dra;
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

/// The code of a recorded status (spelled as upstream's).
fn code_named(name: &str) -> Code {
    [
        Code::Success,
        Code::Error,
        Code::Unschedulable,
        Code::UnschedulableAndUnresolvable,
        Code::Wait,
        Code::Skip,
        Code::Pending,
    ]
    .into_iter()
    .find(|c| c.as_str() == name)
    .unwrap_or(Code::Error)
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
                "Devices on {} (the best-scoring node), as Reserve would assume them:\n",
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
