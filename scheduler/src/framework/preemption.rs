//! PostFilter, and the what-if it may ask the host for: a copy of one node and of the
//! cycle state, pods removed and added back (each change told to the PreFilter
//! extensions), and whether the pod would then pass every Filter plugin.
//!
//! The what-if runs on the instances of worker 0, which are idle once Filter is done:
//! the set is lent to the PostFilter call (moved into the calling wasm instance's
//! host context, or wrapped for a native plugin) and given back when it returns.
//! Each Filter call of a what-if overlays the copy of the node on that node's slot of
//! the instance's replica, so the plugins' own code judges the copy; the next sync of
//! the instance puts the snapshot's node back.

use super::{
    CyclePod, CycleState, Framework, InstanceSet, PluginError, PluginInstance, PluginSlot, lock,
};
use berth_cluster::Budgets;
use berth_runtime::cache::Snapshot;
use berth_runtime::plugin::{PluginCalls, Simulation, WhatIf};
use berth_sdk::{
    Candidate, Code, EventResource, ExtensionPoint, NodeInfo, NodeVictims, Pod,
    PodDisruptionBudget, Status,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What the host lends a PostFilter call: the instances the what-ifs run on and what
/// they need to know of the cycle.
pub(crate) struct DryRun {
    set: InstanceSet,
    plugins: Arc<[PluginSlot]>,
    /// Filter plugins that did not skip the pod at PreFilter, each with whether it
    /// is blind to the pods on a node ([`blind_to_pods`]).
    filters: Vec<(usize, bool)>,
    /// What the pod-blind Filter plugins answered for a node in this dry run: the
    /// same for every what-if of the node, so each is asked once per node.
    blind_verdicts: HashMap<(usize, u32), Status>,
    /// PreFilter plugins with extensions that did not skip the pod.
    extensions: Vec<usize>,
    pod: Arc<CyclePod>,
    state: CycleState,
    snapshot: Snapshot,
    /// Pods nominated to each slot with at least the pod's priority (not the pod).
    /// Shared with the workers' what-ifs.
    nominated: Arc<HashMap<u32, Vec<Pod>>>,
    budgets: Budgets,
    /// The native twins given the what-if node in the current Filter pass (kept to
    /// reuse its allocation).
    lent: Vec<usize>,
    /// The PostFilter plugin the what-if is lent to.
    caller: Option<usize>,
    /// The other workers' instance sets and the pool that runs SelectVictimsOnNode
    /// over them; `None` for a worker's own what-if, or with one worker.
    spread: Option<Spread>,
}

/// What a parallel dry run needs beside worker 0's instance set.
struct Spread {
    pool: Arc<rayon::ThreadPool>,
    /// Workers 1.., each with its own instance set.
    others: Vec<InstanceSet>,
}

/// One worker's share of a batch: its what-if (with its instance set), the nodes and
/// their answers.
struct Share<'a> {
    /// Taken while lent to the plugin's calls.
    dry: Option<Box<DryRun>>,
    nodes: &'a [&'a str],
    out: Vec<Result<NodeVictims, Status>>,
}

impl Share<'_> {
    /// SelectVictimsOnNode of plugin `caller` for each node of the share, on the
    /// worker's instance of the plugin.
    fn run(&mut self, caller: usize) {
        if self.nodes.is_empty() {
            return;
        }
        let mut dry = self.dry.take().expect("a share's what-if is its own");
        let plugins = dry.plugins.clone();
        let name = &plugins[caller].name;
        let failed = |e: &str| Status::error(format!("plugin {name}: {e}"));
        let mut inst = match dry.set.take(caller, &plugins) {
            Ok(inst) => inst,
            Err(e) => {
                self.out = vec![Err(failed(&e.message)); self.nodes.len()];
                self.dry = Some(dry);
                return;
            }
        };
        if let Err(e) = inst.sync(&dry.snapshot) {
            self.out = vec![Err(failed(&e.describe())); self.nodes.len()];
            dry.set.put(caller, inst);
            self.dry = Some(dry);
            return;
        }
        let pod = dry.pod.clone();
        let state = dry.state.clone();
        let snapshot = dry.snapshot.clone();
        let mut lent: Box<dyn WhatIf> = dry;
        for node in self.nodes {
            let Some(slot) = snapshot.slot_of(node) else {
                self.out.push(Err(Status::error(format!(
                    "node {node} is not in the snapshot"
                ))));
                continue;
            };
            let (back, r) = inst.select_victims_on_node(&state, &pod, slot, lent);
            lent = back;
            self.out.push(match r {
                Ok(r) => r,
                Err(e) => Err(failed(&e.describe())),
            });
        }
        let mut dry = lent
            .into_any()
            .downcast::<DryRun>()
            .expect("the call gives back what it was lent");
        dry.set.put(caller, inst);
        self.dry = Some(dry);
    }
}

impl std::fmt::Debug for DryRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DryRun")
            .field("pod", &self.pod.key())
            .finish_non_exhaustive()
    }
}

/// Whether a Filter plugin answers the same for a node whatever pods are on it: it
/// registers no event of assigned pods (a pod it rejected could not become
/// schedulable by pods coming or going, so its verdict does not depend on them) and
/// keeps no PreFilter state that pods on a node change (no PreFilter extensions). A
/// plugin that registers every event (no list) is not. The dry run then asks it once
/// per node instead of once per what-if (NodeUnschedulable, NodeName, TaintToleration
/// and NodeAffinity are such plugins).
fn blind_to_pods(module: &berth_runtime::wasm::Module) -> bool {
    !module.pre_filter_extensions()
        && module.events().is_some_and(|events| {
            !events
                .iter()
                .any(|r| r.event.resource == EventResource::AssignedPod)
        })
}

fn error_status(e: impl std::fmt::Display) -> Status {
    Status::error(e.to_string())
}

impl WhatIf for DryRun {
    fn budgets(&self) -> Vec<PodDisruptionBudget> {
        self.budgets.list()
    }

    fn simulate(&mut self, node: &str) -> Result<Simulation, Status> {
        let slot = self
            .snapshot
            .slot_of(node)
            .ok_or_else(|| Status::error(format!("node {node} is not in the snapshot")))?;
        let info = self
            .snapshot
            .node(slot)
            .map(|info| NodeInfo {
                stamp: 0,
                ..info.clone()
            })
            .ok_or_else(|| Status::error(format!("node {node} is not in the snapshot")))?;
        Ok(Simulation {
            slot,
            info: Arc::new(info),
            state: self.state.deep_clone(),
            removed: Vec::new(),
        })
    }

    fn remove_pod(&mut self, sim: &mut Simulation, uid: &str) -> Status {
        let Some(pod) = sim.info.pods.iter().find(|p| p.uid == uid).cloned() else {
            return Status::error(format!("pod {uid} is not on node {}", sim.info.name()));
        };
        Arc::make_mut(&mut sim.info).remove_pod(&pod);
        let status = self.tell_extensions(false, &sim.state, &pod, sim.slot);
        sim.removed.push(pod);
        status
    }

    fn add_pod(&mut self, sim: &mut Simulation, uid: &str) -> Status {
        let Some(i) = sim.removed.iter().position(|p| p.uid == uid) else {
            return Status::error(format!(
                "pod {uid} was not removed from node {}",
                sim.info.name()
            ));
        };
        let pod = sim.removed.swap_remove(i);
        Arc::make_mut(&mut sim.info).add_pod(&pod);
        self.tell_extensions(true, &sim.state, &pod, sim.slot)
    }

    /// With the pods nominated to the node counted and (when there are some) without
    /// them, as the scheduling cycle judges a node (upstream's
    /// `RunFilterPluginsWithNominatedPods`).
    fn fits(&mut self, sim: &Simulation) -> Status {
        if let Some(nominated) = self.nominated.get(&sim.slot).cloned() {
            let mut info = Arc::clone(&sim.info);
            let state = sim.state.deep_clone();
            for p in &nominated {
                let mut p = p.clone();
                p.node_name = info.name().to_owned();
                Arc::make_mut(&mut info).add_pod(&p);
                let s = self.tell_extensions(true, &state, &p, sim.slot);
                if !s.is_success() {
                    return s;
                }
            }
            let s = self.run_filters(&state, sim.slot, &info);
            if !s.is_success() {
                return s;
            }
        }
        self.run_filters(&sim.state, sim.slot, &sim.info)
    }

    fn select_victims_on_nodes(
        &mut self,
        nodes: &[&str],
    ) -> Option<Vec<Result<NodeVictims, Status>>> {
        let caller = self.caller?;
        if !self.plugins[caller]
            .module
            .extension_points()
            .contains(&ExtensionPoint::SelectVictimsOnNode)
        {
            return None;
        }
        let Spread { pool, others } = self.spread.take()?;
        let per = nodes.len().div_ceil(others.len() + 1).max(1);
        let mut chunks = nodes.chunks(per);
        let services = self.set.services.clone();
        let own = std::mem::replace(
            &mut self.set,
            InstanceSet::new(self.plugins.len(), services),
        );
        let mut shares: Vec<Share<'_>> = std::iter::once(own)
            .chain(others)
            .map(|set| Share {
                dry: Some(Box::new(self.for_worker(set))),
                nodes: chunks.next().unwrap_or_default(),
                out: Vec::new(),
            })
            .collect();
        // The first share runs on this thread, the others on the pool.
        pool.in_place_scope(|scope| {
            let (first, rest) = shares.split_first_mut().expect("one share per worker");
            for share in rest {
                if !share.nodes.is_empty() {
                    scope.spawn(move |_| share.run(caller));
                }
            }
            first.run(caller);
        });
        let mut out = Vec::with_capacity(nodes.len());
        let mut sets = Vec::with_capacity(shares.len());
        for share in shares {
            out.extend(share.out);
            sets.push(share.dry.expect("given back after the run").set);
        }
        let mut sets = sets.into_iter();
        self.set = sets.next().expect("one share per worker");
        self.spread = Some(Spread {
            pool,
            others: sets.collect(),
        });
        Some(out)
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl DryRun {
    /// A what-if like this one on a worker's instance set, for that worker's share
    /// of a batch: it runs no batch of its own.
    fn for_worker(&self, set: InstanceSet) -> DryRun {
        DryRun {
            set,
            plugins: self.plugins.clone(),
            filters: self.filters.clone(),
            blind_verdicts: HashMap::new(),
            extensions: self.extensions.clone(),
            pod: self.pod.clone(),
            state: self.state.clone(),
            snapshot: self.snapshot.clone(),
            nominated: Arc::clone(&self.nominated),
            lent: Vec::new(),
            budgets: self.budgets.clone(),
            caller: None,
            spread: None,
        }
    }

    fn tell_extensions(&mut self, add: bool, state: &CycleState, other: &Pod, slot: u32) -> Status {
        for &i in &self.extensions {
            let inst = match self.set.get(i, &self.plugins) {
                Ok(inst) => inst,
                Err(e) => return error_status(e),
            };
            // The extension reads the node's labels from its replica, which this
            // instance may not hold yet (Filter ran its node on another worker).
            if let Err(e) = inst.sync(&self.snapshot) {
                return error_status(e);
            }
            let r = inst.pod_on_node(add, state, &self.pod, other, slot);
            match r {
                Ok(s) if s.is_success() => {}
                Ok(s) => {
                    return Status::error(format!(
                        "plugin {}: {}",
                        self.plugins[i].name,
                        s.message()
                    ));
                }
                Err(e) => return error_status(e),
            }
        }
        Status::success()
    }

    /// Runs the Filter plugins on the what-if node `info` until one rejects it. The
    /// native twins share `info` for the calls and let it go after them, so that the
    /// next change of the what-if does not copy it.
    fn run_filters(&mut self, state: &CycleState, slot: u32, info: &Arc<NodeInfo>) -> Status {
        debug_assert_eq!(info.stamp, 0, "a what-if node carries no stamp");
        let mut lent = std::mem::take(&mut self.lent);
        lent.clear();
        let mut status = self.run_filters_lending(state, slot, info, &mut lent);
        for &i in &lent {
            if let Ok(inst) = self.set.get(i, &self.plugins)
                && let Err(e) = inst.sync(&self.snapshot)
            {
                status = error_status(e);
                break;
            }
        }
        self.lent = lent;
        status
    }

    /// [`DryRun::run_filters`], noting in `lent` the native twins given `info`.
    fn run_filters_lending(
        &mut self,
        state: &CycleState,
        slot: u32,
        info: &Arc<NodeInfo>,
        lent: &mut Vec<usize>,
    ) -> Status {
        for &(i, blind) in &self.filters {
            if blind && let Some(s) = self.blind_verdicts.get(&(i, slot)) {
                if s.is_success() {
                    continue;
                }
                return s.clone();
            }
            let inst = match self.set.get(i, &self.plugins) {
                Ok(inst) => inst,
                Err(e) => return error_status(e),
            };
            let synced = match inst {
                PluginInstance::Native(twin) => {
                    lent.push(i);
                    twin.sync_overlaid_shared(&self.snapshot, slot, info)
                }
                PluginInstance::Wasm(inst) => {
                    PluginCalls::sync_overlaid(inst, &self.snapshot, &[(slot, &**info)])
                }
            };
            if let Err(e) = synced {
                return error_status(e);
            }
            let s = match inst.filter(state, &self.pod, &[slot]) {
                Ok(rejected) => match rejected.into_iter().next() {
                    Some((_, s)) => s,
                    None => Status::success(),
                },
                Err(e) => return error_status(e),
            };
            if blind && s.code != Code::Error {
                self.blind_verdicts.insert((i, slot), s.clone());
            }
            if !s.is_success() {
                return s;
            }
        }
        Status::success()
    }
}

/// What PostFilter decided.
#[derive(Clone, Debug, PartialEq)]
pub struct PostFilterVerdict {
    /// The plugin that answered (the last one run).
    pub plugin: String,
    /// Its status: Success when it nominated a node.
    pub status: Status,
    /// `None` leaves the pod's nomination as it is; `Some("")` clears it.
    pub nominated_node_name: Option<String>,
    /// The pods to evict, as the snapshot has them.
    pub victims: Vec<Pod>,
    /// The candidates the plugin considered, best first.
    pub candidates: Vec<Candidate>,
}

impl Framework {
    /// Whether the profile has a PostFilter plugin.
    pub fn has_post_filter(&self) -> bool {
        !self.at(ExtensionPoint::PostFilter).is_empty()
    }

    /// Runs the PostFilter plugins in order until one nominates a node or fails
    /// (upstream's `RunPostFilterPlugins`); `statuses` holds every node's Filter
    /// status by slot. `None` when the profile has none.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_filter(
        &self,
        state: &CycleState,
        pod: &CyclePod,
        snapshot: &Snapshot,
        nominated: &super::NominatedPods,
        statuses: &[(u32, Status)],
        skip_filter: &HashSet<usize>,
        budgets: &Budgets,
    ) -> Result<Option<PostFilterVerdict>, PluginError> {
        let points = self.at(ExtensionPoint::PostFilter);
        if points.is_empty() {
            return Ok(None);
        }
        let mut timer = self.time_point("PostFilter");
        let filters: Vec<(usize, bool)> = self
            .at(ExtensionPoint::Filter)
            .iter()
            .map(|&(i, _)| i)
            .filter(|i| !skip_filter.contains(i))
            .map(|i| (i, blind_to_pods(&self.plugins[i].module)))
            .collect();
        let extensions: Vec<usize> = self
            .at(ExtensionPoint::PreFilter)
            .iter()
            .map(|&(i, _)| i)
            .filter(|i| !skip_filter.contains(i) && self.plugins[*i].extensions)
            .collect();
        let by_slot = nominated_by_slot(pod, snapshot, nominated);
        let (set, spread) = self.lend_workers();
        let mut dry = Box::new(DryRun {
            set,
            plugins: self.plugins.clone(),
            filters,
            blind_verdicts: HashMap::new(),
            extensions,
            pod: Arc::new(CyclePod::new(pod.pod().clone())),
            state: state.clone(),
            snapshot: snapshot.clone(),
            nominated: Arc::new(by_slot),
            lent: Vec::new(),
            budgets: budgets.clone(),
            caller: None,
            spread,
        });
        let mut verdict = None;
        let mut failure = None;
        {
            let mut main = lock(&self.instances.main);
            for &(i, _) in points {
                // A plugin the pod's features leave out of its cycles (it wrote no
                // PreFilter state for it) has nothing to do after them either.
                if !self.takes_part(i, pod.pod(), state) {
                    continue;
                }
                let inst = match main.get(i, &self.plugins) {
                    Ok(inst) => inst,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                };
                if let Err(e) = inst.sync(snapshot) {
                    failure = Some(e.into());
                    break;
                }
                let t = self.plugin_clock(state);
                dry.caller = Some(i);
                let (back, r) = inst.post_filter(state, pod, statuses, dry);
                dry = back
                    .into_any()
                    .downcast::<DryRun>()
                    .expect("the PostFilter call gives back what it was lent");
                let r = match r {
                    Ok(r) => r,
                    Err(e) => {
                        failure = Some(e.into());
                        break;
                    }
                };
                self.observe_plugin(i, "PostFilter", r.status.code.as_str(), t);
                let code = r.status.code;
                let on_node = r
                    .nominated_node_name
                    .as_deref()
                    .and_then(|node| snapshot.node_by_name(node));
                let victims = r
                    .victims
                    .iter()
                    .filter_map(|uid| on_node?.pods.iter().find(|p| &p.uid == uid).cloned())
                    .collect::<Vec<_>>();
                if code == Code::Success
                    && let Some(why) = refusal(pod, &r, &victims, budgets)
                {
                    let plugin = &self.plugins[i].name;
                    tracing::warn!(plugin = %plugin, pod = %pod.key(), "eviction refused: {why}");
                    if let Some(m) = &self.metrics {
                        m.count_refused_call(plugin, "evict", "PostFilter");
                    }
                    failure = Some(PluginError {
                        plugin: plugin.clone(),
                        message: format!("was refused evictions at PostFilter: {why}"),
                    });
                    break;
                }
                verdict = Some(PostFilterVerdict {
                    plugin: self.plugins[i].name.clone(),
                    status: r.status,
                    nominated_node_name: r.nominated_node_name,
                    victims,
                    candidates: r.candidates,
                });
                if matches!(code, Code::Success | Code::Error) {
                    break;
                }
            }
        }
        self.give_workers_back(*dry);
        if let Some(e) = failure {
            return Err(e);
        }
        if let Some(v) = &verdict {
            timer.status = v.status.code.as_str();
            if v.status.code == Code::Error {
                // As upstream's RunPostFilterPlugins: an Error ends the phase; the
                // cycle logs it and the pod waits with it after its FitError.
                tracing::error!(plugin = %v.plugin, pod = %pod.key(), "PostFilter: {}", v.status.message());
            }
        }
        Ok(verdict)
    }

    /// Lends the workers' instances to a dry run: worker 0's are idle between Filter
    /// and Score; the other workers' too, for a plugin that has its nodes' dry runs
    /// spread over the workers (SelectVictimsOnNode).
    fn lend_workers(&self) -> (InstanceSet, Option<Spread>) {
        let take = |w: &std::sync::Mutex<InstanceSet>| {
            let mut w = lock(w);
            let empty = InstanceSet::new(self.plugins.len(), w.services.clone());
            std::mem::replace(&mut *w, empty)
        };
        let set = take(&self.instances.workers[0]);
        let spread = self.instances.pool.as_ref().map(|pool| Spread {
            pool: pool.clone(),
            others: self.instances.workers[1..].iter().map(take).collect(),
        });
        (set, spread)
    }

    /// Gives the workers' instances a dry run borrowed back.
    fn give_workers_back(&self, dry: DryRun) {
        *lock(&self.instances.workers[0]) = dry.set;
        if let Some(spread) = dry.spread {
            for (w, set) in self.instances.workers[1..].iter().zip(spread.others) {
                *lock(w) = set;
            }
        }
    }
}

/// The pods nominated to each node (by slot) that count against `pod`: of its
/// priority or higher, itself left out.
fn nominated_by_slot(
    pod: &CyclePod,
    snapshot: &Snapshot,
    nominated: &super::NominatedPods,
) -> HashMap<u32, Vec<Pod>> {
    let mut by_slot: HashMap<u32, Vec<Pod>> = HashMap::new();
    for (node, pods) in nominated {
        let Some(slot) = snapshot.slot_of(node) else {
            continue;
        };
        let ge: Vec<Pod> = pods
            .iter()
            .filter(|p| p.uid != pod.uid && p.priority >= pod.priority)
            .cloned()
            .collect();
        if !ge.is_empty() {
            by_slot.insert(slot, ge);
        }
    }
    by_slot
}

/// Why the host refuses a PostFilter plugin's evictions, if it does: the host checks
/// the victims before anything is evicted (on the nominated node, of lower priority
/// than the preemptor, PodDisruptionBudget violations not under-reported).
fn refusal(
    pod: &CyclePod,
    r: &berth_sdk::PostFilterResult,
    victims: &[Pod],
    budgets: &Budgets,
) -> Option<String> {
    if victims.len() != r.victims.len() {
        Some("named victims that are not on the nominated node".to_owned())
    } else if let Some(v) = victims.iter().find(|v| v.priority >= pod.priority) {
        Some(format!(
            "named victim {} of priority {}, not lower than the preemptor's {}",
            v.key(),
            v.priority,
            pod.priority
        ))
    } else {
        // Upstream may violate a budget when nothing else makes room,
        // so violations are not refused; under-reporting them is (the
        // candidates decide and `explain` shows them).
        let node = r.nominated_node_name.as_deref().unwrap_or_default();
        r.candidates.iter().find(|c| c.node == node).and_then(|c| {
            let least =
                berth_sdk::least_budget_violations(victims, &budgets.list());
            (c.pdb_violations < least).then(|| {
                format!(
                    "reported {} PodDisruptionBudget violations on node {node}, but its victims cause at least {least}",
                    c.pdb_violations
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default profile's Filter plugins that read only the node object are asked
    /// once per node in a dry run; those that count pods, ports or volumes on it (or
    /// keep PreFilter state that pods change) on every what-if.
    #[test]
    fn filters_blind_to_pods_are_those_registering_no_assigned_pod_event() {
        let runtime = berth_runtime::wasm::test_runtime();
        let names: Vec<String> = [
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "InterPodAffinity",
            "PodTopologySpread",
            "VolumeRestrictions",
            "NodeVolumeLimits",
        ]
        .map(str::to_owned)
        .to_vec();
        let modules = super::super::registry::load_modules(runtime, &[], &names).unwrap();
        let blind: Vec<&str> = names
            .iter()
            .filter(|n| blind_to_pods(&modules[n.as_str()]))
            .map(String::as_str)
            .collect();
        assert_eq!(
            blind,
            [
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity"
            ]
        );
    }
}
