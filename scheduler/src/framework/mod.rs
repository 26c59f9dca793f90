//! The framework: a profile's plugins per extension point, their instances (one set
//! for the scheduling thread, one per worker thread, one per binding cycle in flight),
//! and the runner of each extension point in upstream's order.

mod batch;
mod explain;
mod failures;
mod fit_error;
mod group_preemption;
mod placement;
pub mod preemption;
mod record;
pub mod registry;
mod schedule;
mod shadow;

pub use berth_runtime::plugin::group_what_if::{GroupAnswer, GroupAsk, GroupSimulationHandle};
pub use berth_runtime::plugin::{CyclePod, CycleState, PluginCalls, cycle_state, waiting};
pub use explain::{
    DeviceReport, DevicesExplanation, ExplainOptions, Explanation, GroupPreemptionExplanation,
    GroupWorkloadExplanation, MemberExplanation, NodeExplanation, PluginStatus,
    PodGroupExplanation, ScoreEntry,
};
pub use fit_error::{Diagnosis, FitError};
pub use group_preemption::GroupPostFilterVerdict;
pub use placement::{Feasibility, PlacementScores};
pub use preemption::PostFilterVerdict;
pub use schedule::{Cycle, NominatedPods, ScheduleOutcome, num_feasible_nodes_to_find};
// What the observers of an attempt (explain, shadow) take from the cycle.
pub use record::CycleRecord;
use schedule::Runner;
pub use shadow::{Disagreement, RECENT_DISAGREEMENTS, ShadowStats};

use crate::config::Profile;
use berth_runtime::native::Twin;
use berth_runtime::plugin::CallError;
use berth_runtime::wasm::module::{FeatureGates, HostServices};
use berth_runtime::wasm::{Instance, LoadError, Module};
use berth_sdk::{Code, ExtensionPoint, Status};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// Why a profile cannot run.
#[derive(Debug, thiserror::Error)]
pub enum FrameworkError {
    /// A plugin is named at an extension point its module does not implement.
    #[error(
        "profile {profile}: plugin {plugin} is enabled at {point} but its module ({source_name}) implements only [{implemented}]"
    )]
    MissingExtensionPoint {
        /// The profile's scheduler name.
        profile: String,
        /// The plugin.
        plugin: String,
        /// The extension point.
        point: &'static str,
        /// Where the module came from.
        source_name: String,
        /// What it implements.
        implemented: String,
    },
    /// A plugin has no module.
    #[error("profile {profile}: no module for plugin {plugin}")]
    NoModule {
        /// The profile's scheduler name.
        profile: String,
        /// The plugin.
        plugin: String,
    },
    /// An instance could not be made (args refused, link failure).
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// Upstream's default `parallelism`; Berth's default is this or the number of cores,
/// whichever is fewer (each worker keeps an instance of every Filter and Score
/// plugin, so workers beyond the cores cost memory and win nothing).
pub const DEFAULT_PARALLELISM: usize = 16;

/// How the framework runs.
#[derive(Clone, Debug)]
pub struct FrameworkOptions {
    /// Worker threads for Filter and Score (default: 16, or the cores if fewer).
    pub parallelism: usize,
    /// Percentage of nodes to score; 0 is upstream's adaptive default.
    pub percentage_of_nodes_to_score: u32,
    /// Seed of the tie-breaking random choice.
    pub seed: u64,
    /// kube-scheduler's feature gates as Berth runs, which plugins read
    /// (`feature-gate`): filled in by `berth::features`.
    pub gates: FeatureGates,
    /// Run the built-in plugins as their native twins (compiled into the host)
    /// instead of as wasm components; modules a configuration names stay wasm.
    pub native: bool,
    /// Opportunistic batching (upstream's `OpportunisticBatching` feature gate, on
    /// by default): a profile whose filtering and scoring plugins all sign pods
    /// reuses a cycle's ranking for the next pods of the same signature.
    pub batching: bool,
    /// Pod groups scheduled as groups (upstream's `GenericWorkload` feature gate, beta
    /// and off by default in 1.37): when off, Berth neither watches PodGroups nor
    /// Workloads, its default profile has no GangScheduling, and a pod naming a
    /// scheduling group is scheduled like any other pod, as kube-scheduler does.
    pub generic_workload: bool,
}

impl Default for FrameworkOptions {
    fn default() -> Self {
        FrameworkOptions {
            parallelism: DEFAULT_PARALLELISM
                .min(std::thread::available_parallelism().map_or(1, |n| n.get())),
            percentage_of_nodes_to_score: 0,
            seed: 0,
            gates: FeatureGates::default(),
            native: false,
            batching: true,
            generic_workload: false,
        }
    }
}

/// Observes an extension point's duration when dropped (see
/// [`Framework::time_point`]).
pub(crate) struct PointTimer<'a> {
    metrics: Option<&'a berth_runtime::metrics::Metrics>,
    profile: &'a str,
    point: &'static str,
    /// The status label: set it before the guard drops.
    pub(crate) status: &'static str,
    started: std::time::Instant,
}

impl Drop for PointTimer<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.metrics {
            m.observe_extension_point(
                self.point,
                self.status,
                self.profile,
                self.started.elapsed(),
            );
        }
    }
}

/// A plugin of the profile: its module and args.
struct PluginSlot {
    name: String,
    module: Arc<Module>,
    args_json: String,
    normalizes: bool,
    /// The plugin has PreFilterExtensions (AddPod/RemovePod).
    extensions: bool,
    /// `failurePolicy: FailOpen`: a failure drops the plugin's scores for the cycle.
    fail_open: bool,
    /// The native twin to run instead of the module, in native mode.
    native: Option<Twin>,
    /// The features a pod needs for the plugin to take part in its cycles, as its
    /// configured instance declares them (empty: every pod).
    only_for: Vec<berth_sdk::PodFeature>,
}

/// One live plugin instance: the framework calls it through [`PluginCalls`] (by
/// dereference), and tells the two kinds apart only to know when to remake one.
#[allow(
    clippy::large_enum_variant,
    reason = "a handful per worker, called in the hot path: no indirection wanted"
)]
enum PluginInstance {
    /// A sandboxed component instance.
    Wasm(Instance),
    /// A native twin.
    Native(Box<dyn PluginCalls>),
}

impl std::ops::Deref for PluginInstance {
    type Target = dyn PluginCalls;
    fn deref(&self) -> &Self::Target {
        match self {
            PluginInstance::Wasm(i) => i,
            PluginInstance::Native(n) => n.as_ref(),
        }
    }
}

impl std::ops::DerefMut for PluginInstance {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            PluginInstance::Wasm(i) => i,
            PluginInstance::Native(n) => n.as_mut(),
        }
    }
}

/// Live instances, one per plugin of the profile, made on first use and remade after
/// a trap.
struct InstanceSet {
    instances: Vec<Option<PluginInstance>>,
    services: HostServices,
}

impl InstanceSet {
    fn new(n: usize, services: HostServices) -> Self {
        InstanceSet {
            instances: (0..n).map(|_| None).collect(),
            services,
        }
    }

    /// The instance of plugin `i`, taken out of the set (made if need be), for a call
    /// that lends the set itself to the instance (SelectVictimsOnNode's what-ifs);
    /// [`InstanceSet::put`] gives it back.
    fn take(&mut self, i: usize, plugins: &[PluginSlot]) -> Result<PluginInstance, PluginError> {
        self.get(i, plugins)?;
        Ok(self.instances[i].take().expect("get made the instance"))
    }

    /// Gives back an instance [`InstanceSet::take`] took, unless the set made another
    /// meanwhile.
    fn put(&mut self, i: usize, inst: PluginInstance) {
        if self.instances[i].is_none() {
            self.instances[i] = Some(inst);
        }
    }

    fn get(
        &mut self,
        i: usize,
        plugins: &[PluginSlot],
    ) -> Result<&mut PluginInstance, PluginError> {
        let p = &plugins[i];
        let stale = match &self.instances[i] {
            None => true,
            Some(PluginInstance::Wasm(inst)) => {
                p.native.is_some() || inst.is_broken() || !Arc::ptr_eq(inst.module(), &p.module)
            }
            Some(PluginInstance::Native(_)) => p.native.is_none(),
        };
        if stale {
            let inst = match &p.native {
                Some(twin) => twin
                    .instantiate(
                        &p.args_json,
                        berth_runtime::native::NativeHost::of(&self.services),
                    )
                    .map(PluginInstance::Native)
                    .map_err(|e| PluginError {
                        plugin: p.name.clone(),
                        message: e.to_string(),
                    })?,
                None => p
                    .module
                    .instantiate(&p.args_json, self.services.clone())
                    .map(PluginInstance::Wasm)
                    .map_err(|e| PluginError {
                        plugin: p.name.clone(),
                        // The plugin's own words: whoever reports the error names
                        // the plugin and says that it refused its args.
                        message: match e {
                            LoadError::Configure { message, .. } => message,
                            e => e.to_string(),
                        },
                    })?,
            };
            self.instances[i] = Some(inst);
        }
        Ok(self.instances[i].as_mut().expect("just made"))
    }
}

/// The longest a pod may wait at Permit, as upstream.
pub const MAX_PERMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// What Permit decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PermitOutcome {
    /// Bind now.
    Allow,
    /// Wait until these plugins allow the pod, at most this long.
    Wait(BTreeSet<String>, std::time::Duration),
}

/// A plugin failed (an Error status, a trap, an instance that cannot be made).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("plugin {plugin}: {message}")]
pub struct PluginError {
    /// The plugin's name.
    pub plugin: String,
    /// What went wrong.
    pub message: String,
}

impl From<CallError> for PluginError {
    fn from(e: CallError) -> Self {
        let message = e.describe();
        match e {
            CallError::Trap { plugin, .. }
            | CallError::BadAnswer { plugin, .. }
            | CallError::Refused { plugin, .. }
            | CallError::PodGone { plugin, .. } => PluginError { plugin, message },
        }
    }
}

/// One profile, ready to schedule.
pub struct Framework {
    scheduler_name: String,
    metrics: Option<berth_runtime::metrics::Metrics>,
    plugins: Arc<[PluginSlot]>,
    points: HashMap<ExtensionPoint, Vec<(usize, i64)>>,
    /// The plugin instances the profile's calls run on.
    instances: Instances,
    budgets: berth_cluster::Budgets,
    /// Where a cycle's search for feasible nodes starts, and how far it goes.
    search: Search,
    /// Candidates run beside live plugins (shadow runs).
    shadows: Vec<shadow::ShadowSlot>,
    /// The `GenericWorkload` gate: whether a pod with a scheduling group is scheduled
    /// in its group's cycle rather than alone.
    generic_workload: bool,
    /// What placing pods from a batch needs.
    batching: batch::Batching,
}

/// The plugin instances of a profile, one set per place a plugin call can run: the
/// scheduling thread, each worker, PodGroupPostFilter's thread, and the binding
/// cycles. Each set holds one instance of every plugin of `Framework::plugins` (made
/// when first called), in the same order, and is locked by whoever runs on it: a
/// set's instances never run two calls at once. Only the binding cycles' sets may
/// bind (they alone are given a binder).
struct Instances {
    /// The scheduling thread's set; every plugin is made on it once when the
    /// framework is built, so args it refuses are refused then.
    main: Mutex<InstanceSet>,
    /// One set per worker (as many as the parallelism, at least one): worker `i` of
    /// `pool` runs on `workers[i]`, and preemption's dry runs use them too.
    workers: Vec<Mutex<InstanceSet>>,
    /// The instances PodGroupPostFilter calls run on (on a thread of their own).
    group_post_filter: Mutex<InstanceSet>,
    /// Idle binding-cycle instance sets: a binding cycle takes one (or makes one) and
    /// gives it back, so there are as many as binding cycles ever ran at once.
    binding: Mutex<Vec<InstanceSet>>,
    /// The services a binding-cycle set is made with (the binder included).
    binding_services: HostServices,
    /// The worker threads, when the parallelism is above one; worker `i` runs on
    /// `workers[i]`.
    pool: Option<Arc<rayon::ThreadPool>>,
}

/// The search for feasible nodes: as upstream, a cycle looks at the nodes from where
/// the last one stopped, round the list, until it has found enough, and breaks ties
/// between the best nodes at random. `next_start` and `rng` carry over from cycle to
/// cycle, so placements depend on the order of the cycles and on the seed only.
struct Search {
    /// `percentageOfNodesToScore`: how many feasible nodes a cycle looks for (0 is
    /// upstream's adaptive default).
    percentage_of_nodes_to_score: u32,
    /// Where the next cycle's search starts, as an index in the snapshot's nodes
    /// (taken modulo their number).
    next_start: Mutex<usize>,
    /// Breaks ties between nodes of the same score; seeded from the options.
    rng: Mutex<StdRng>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Framework {
    /// Builds a framework for a profile. Every plugin is instantiated once on the
    /// scheduling thread's set, so bad args are refused here, not mid-cycle.
    pub fn new(
        profile: &Profile,
        modules: &HashMap<String, Arc<Module>>,
        options: &FrameworkOptions,
        services: &HostServices,
    ) -> Result<Self, FrameworkError> {
        // The plugins read the gates of the options the framework runs with.
        let services = &HostServices {
            gates: options.gates.clone(),
            ..services.clone()
        };
        let twins = if options.native {
            berth_runtime::native::registry()
        } else {
            HashMap::new()
        };
        let mut plugins: Vec<PluginSlot> = Vec::new();
        let mut points: HashMap<ExtensionPoint, Vec<(usize, i64)>> = HashMap::new();
        for (point, list) in &profile.points {
            for (name, weight) in list {
                let module = modules.get(name).ok_or_else(|| FrameworkError::NoModule {
                    profile: profile.scheduler_name.clone(),
                    plugin: name.clone(),
                })?;
                if !module.extension_points().contains(point) {
                    return Err(FrameworkError::MissingExtensionPoint {
                        profile: profile.scheduler_name.clone(),
                        plugin: name.clone(),
                        point: point.as_str(),
                        source_name: module.source().to_owned(),
                        implemented: module
                            .extension_points()
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
                let idx = match plugins.iter().position(|p| &p.name == name) {
                    Some(i) => i,
                    None => {
                        let args = profile
                            .args
                            .get(name)
                            .cloned()
                            .unwrap_or(serde_json::Value::Null);
                        plugins.push(PluginSlot {
                            name: name.clone(),
                            module: module.clone(),
                            args_json: args.to_string(),
                            normalizes: module
                                .extension_points()
                                .contains(&ExtensionPoint::NormalizeScore),
                            extensions: module.pre_filter_extensions(),
                            fail_open: profile.fail_open.contains(name),
                            // Only a built-in module has a native twin; a module the
                            // configuration names replaces it and stays wasm.
                            native: if registry::is_builtin(module) {
                                twins.get(name.as_str()).copied()
                            } else {
                                None
                            },
                            only_for: Vec::new(),
                        });
                        plugins.len() - 1
                    }
                };
                points.entry(*point).or_default().push((idx, *weight));
            }
        }
        let parallelism = options.parallelism.max(1);
        let pool = if parallelism > 1 {
            Some(Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(parallelism)
                    .thread_name(|i| format!("berth-worker-{i}"))
                    .build()
                    .map_err(|e| LoadError::Metadata {
                        source_name: "worker pool".into(),
                        message: e.to_string(),
                    })?,
            ))
        } else {
            None
        };
        // Only binding-cycle instances may bind.
        let scheduling_services = HostServices {
            binder: None,
            ..services.clone()
        };
        // Every plugin is made once here, so that args it refuses are refused now;
        // its configured instance says which pods it takes part for.
        let mut main = InstanceSet::new(plugins.len(), scheduling_services.clone());
        for i in 0..plugins.len() {
            let inst = main.get(i, &plugins).map_err(|e| LoadError::Configure {
                plugin: e.plugin,
                source_name: plugins[i].module.source().to_owned(),
                message: e.message,
            })?;
            plugins[i].only_for = inst.only_for_pods_with().to_vec();
        }
        let signers = Self::signers(&points);
        let signers_builtin = signers
            .iter()
            .all(|&i| registry::is_builtin(&plugins[i].module));
        let batchable = options.batching
            && signers.iter().all(|&i| {
                plugins[i]
                    .module
                    .extension_points()
                    .contains(&ExtensionPoint::SignPod)
            });
        let fw = Framework {
            scheduler_name: profile.scheduler_name.clone(),
            metrics: services.metrics.clone(),
            instances: Instances {
                main: Mutex::new(main),
                workers: (0..parallelism)
                    .map(|_| {
                        Mutex::new(InstanceSet::new(plugins.len(), scheduling_services.clone()))
                    })
                    .collect(),
                group_post_filter: Mutex::new(group_preemption::instance_set(
                    plugins.len(),
                    scheduling_services.clone(),
                )),
                binding: Mutex::new(Vec::new()),
                binding_services: services.clone(),
                pool,
            },
            plugins: plugins.into(),
            points,
            budgets: services.budgets.clone(),
            search: Search {
                percentage_of_nodes_to_score: options.percentage_of_nodes_to_score,
                next_start: Mutex::new(0),
                rng: Mutex::new(StdRng::seed_from_u64(options.seed)),
            },
            shadows: Vec::new(),
            generic_workload: options.generic_workload,
            batching: batch::Batching {
                signers,
                batchable,
                signers_builtin,
                templates: Mutex::new(batch::Templates::default()),
                batch: Mutex::new(batch::Batch::default()),
            },
        };
        Ok(fw)
    }

    /// Adds the profile's shadow runs: beside each plugin with a candidate (by plugin
    /// name in `candidates`), the candidate, instantiated once here so that args it
    /// refuses are refused now. A candidate must implement Filter and Score wherever
    /// the live plugin is enabled at them.
    pub fn add_shadows(
        &mut self,
        profile: &Profile,
        candidates: &HashMap<String, Arc<Module>>,
    ) -> Result<(), FrameworkError> {
        for (name, spec) in &profile.shadows {
            let Some(live) = self.plugins.iter().position(|p| &p.name == name) else {
                continue;
            };
            let module = candidates
                .get(name)
                .ok_or_else(|| FrameworkError::NoModule {
                    profile: profile.scheduler_name.clone(),
                    plugin: format!("{name} (shadow candidate)"),
                })?;
            for point in crate::config::SHADOWED_POINTS {
                let enabled = self.at(point).iter().any(|&(i, _)| i == live);
                if enabled && !module.extension_points().contains(&point) {
                    return Err(FrameworkError::MissingExtensionPoint {
                        profile: profile.scheduler_name.clone(),
                        plugin: name.clone(),
                        point: point.as_str(),
                        source_name: format!("shadow candidate {}", module.source()),
                        implemented: module
                            .extension_points()
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
            }
            let candidate: Box<[PluginSlot]> = Box::new([PluginSlot {
                name: name.clone(),
                module: module.clone(),
                args_json: spec.args.to_string(),
                normalizes: module
                    .extension_points()
                    .contains(&ExtensionPoint::NormalizeScore),
                extensions: false,
                fail_open: false,
                native: None,
                only_for: Vec::new(),
            }]);
            let mut instances = InstanceSet::new(
                1,
                HostServices {
                    binder: None,
                    ..self.instances.binding_services.clone()
                },
            );
            instances
                .get(0, &candidate)
                .map_err(|e| LoadError::Configure {
                    plugin: e.plugin,
                    source_name: module.source().to_owned(),
                    message: e.message,
                })?;
            let stats = ShadowStats {
                profile: self.scheduler_name.clone(),
                plugin: name.clone(),
                candidate: module.source().to_owned(),
                sha256: module.sha256().to_owned(),
                version: module.version().unwrap_or_default().to_owned(),
                ..ShadowStats::default()
            };
            self.shadows.push(shadow::ShadowSlot {
                live,
                candidate,
                instances: Mutex::new(instances),
                stats: Arc::new(Mutex::new(stats)),
            });
        }
        Ok(())
    }

    /// Makes every scheduling instance (the scheduling thread's and each worker's) and
    /// brings its node replica up to `snapshot`, so that a framework built for a hot
    /// swap starts its first cycle with replicas that need only what changed since.
    /// Binding-cycle instances keep no replica and are made on first use.
    pub fn warm(&self, snapshot: &berth_runtime::cache::Snapshot) -> Result<(), PluginError> {
        for set in std::iter::once(&self.instances.main).chain(&self.instances.workers) {
            let mut set = lock(set);
            for i in 0..self.plugins.len() {
                set.get(i, &self.plugins)?.sync(snapshot)?;
            }
        }
        Ok(())
    }

    /// The plugins of the profile, once each, with their modules, in the order the
    /// profile first names them.
    pub fn plugins(&self) -> impl Iterator<Item = (&str, &Arc<Module>)> {
        self.plugins.iter().map(|p| (p.name.as_str(), &p.module))
    }

    /// The scheduler name this profile serves.
    pub fn scheduler_name(&self) -> &str {
        &self.scheduler_name
    }

    /// How many worker threads Filter and Score use.
    pub fn parallelism(&self) -> usize {
        self.instances.workers.len()
    }

    fn at(&self, point: ExtensionPoint) -> &[(usize, i64)] {
        self.points.get(&point).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Which plugins take part in `pod`'s cycles, by plugin index: a plugin that
    /// declares the pod features it needs (`only-for-pods-with`) is left out of the
    /// cycles of pods without any of them. The snapshot says whether a pod in the
    /// cluster has inter-pod affinity terms.
    fn participants(
        &self,
        pod: &berth_sdk::Pod,
        snapshot: &berth_runtime::cache::Snapshot,
    ) -> Arc<[bool]> {
        let cluster_has_affinity = snapshot.affinity_counts().with_affinity > 0;
        self.plugins
            .iter()
            .map(|p| berth_sdk::PodFeature::takes_part(&p.only_for, pod, cluster_has_affinity))
            .collect()
    }

    /// Whether plugin `i` takes part in `pod`'s cycles, as the state's scheduling
    /// attempt decided; for a state made outside a scheduling attempt (a test
    /// harness's), the pod's features decide, with the cluster counted as having
    /// affinity pods.
    fn takes_part(&self, i: usize, pod: &berth_sdk::Pod, state: &CycleState) -> bool {
        state.takes_part(i).unwrap_or_else(|| {
            berth_sdk::PodFeature::takes_part(&self.plugins[i].only_for, pod, true)
        })
    }

    /// The QueueSort key of a pod, computed once when it is enqueued.
    pub fn sort_key(&self, pod: &CyclePod) -> Result<Vec<i64>, PluginError> {
        let Some(&(i, _)) = self.at(ExtensionPoint::QueueSort).first() else {
            return Ok(vec![-i64::from(pod.priority)]);
        };
        let mut main = lock(&self.instances.main);
        Ok(main.get(i, &self.plugins)?.sort_key(pod)?)
    }

    /// Runs PreEnqueue plugins: `Ok(None)` lets the pod in, `Ok(Some(..))` names the
    /// plugin that keeps it out and why.
    pub fn pre_enqueue(&self, pod: &CyclePod) -> Result<Option<(String, Status)>, PluginError> {
        let mut main = lock(&self.instances.main);
        for &(i, _) in self.at(ExtensionPoint::PreEnqueue) {
            let status = main.get(i, &self.plugins)?.pre_enqueue(pod)?;
            if !status.is_success() {
                return Ok(Some((self.plugins[i].name.clone(), status)));
            }
        }
        Ok(None)
    }

    /// Reserve, in order; on failure the caller must run [`Framework::unreserve`].
    pub fn reserve(
        &self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(), PluginError> {
        let mut timer = self.time_point("Reserve");
        let mut main = lock(&self.instances.main);
        for &(i, _) in self.at(ExtensionPoint::Reserve) {
            if !self.takes_part(i, pod, state) {
                continue;
            }
            let t = self.plugin_clock(state);
            let status = main.get(i, &self.plugins)?.reserve(state, pod, node)?;
            self.observe_plugin(i, "Reserve", status.code.as_str(), t);
            if !status.is_success() {
                timer.status = status.code.as_str();
                return Err(self.failure(i, &status));
            }
        }
        timer.status = "Success";
        Ok(())
    }

    /// Unreserve, in reverse order; failures are logged, as upstream.
    pub fn unreserve(&self, state: &CycleState, pod: &CyclePod, node: &str) {
        let mut timer = self.time_point("Unreserve");
        timer.status = "Success";
        let mut main = lock(&self.instances.main);
        for &(i, _) in self.at(ExtensionPoint::Reserve).iter().rev() {
            if !self.takes_part(i, pod, state) {
                continue;
            }
            let t = self.plugin_clock(state);
            let r = main
                .get(i, &self.plugins)
                .and_then(|inst| inst.unreserve(state, pod, node).map_err(PluginError::from));
            self.observe_plugin(
                i,
                "Unreserve",
                if r.is_ok() { "Success" } else { "Error" },
                t,
            );
            if let Err(e) = r {
                tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name), "unreserve failed: {e}");
            }
        }
    }

    /// Permit: every plugin allows the pod, some ask it to wait, or one rejects it.
    pub fn permit(
        &self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<PermitOutcome, PluginError> {
        let mut timer = self.time_point("Permit");
        let mut main = lock(&self.instances.main);
        let mut waiting: BTreeSet<String> = BTreeSet::new();
        let mut timeout = MAX_PERMIT_TIMEOUT;
        for &(i, _) in self.at(ExtensionPoint::Permit) {
            if !self.takes_part(i, pod, state) {
                continue;
            }
            let clock = self.plugin_clock(state);
            let (status, t) = main.get(i, &self.plugins)?.permit(state, pod, node)?;
            self.observe_plugin(i, "Permit", status.code.as_str(), clock);
            match status.code {
                Code::Success => {}
                Code::Wait => {
                    waiting.insert(self.plugins[i].name.clone());
                    timeout = timeout.min(t);
                }
                _ => {
                    timer.status = status.code.as_str();
                    return Err(self.failure(i, &status));
                }
            }
        }
        timer.status = if waiting.is_empty() {
            "Success"
        } else {
            "Wait"
        };
        Ok(if waiting.is_empty() {
            PermitOutcome::Allow
        } else {
            PermitOutcome::Wait(waiting, timeout)
        })
    }

    /// Asks `plugin` whether `event` may make `pod` schedulable: QueueSkip when the
    /// plugin did not register the event, Queue when it registered it without a hint
    /// or registered every event, else its hint (a failing hint counts as Queue).
    pub fn queueing_hint(
        &self,
        plugin: &str,
        event: &berth_sdk::ClusterEvent,
        pod: &berth_sdk::Pod,
        old: Option<&berth_sdk::Object>,
        new: Option<&berth_sdk::Object>,
    ) -> berth_sdk::QueueingHint {
        use berth_sdk::QueueingHint::{Queue, QueueSkip};
        let Some(i) = self.plugins.iter().position(|p| p.name == plugin) else {
            return Queue;
        };
        let Some(events) = self.plugins[i].module.events() else {
            return Queue;
        };
        let Some(reg) = events.iter().find(|r| r.event.covers(event)) else {
            return QueueSkip;
        };
        if !reg.has_hint {
            return Queue;
        }
        let mut main = lock(&self.instances.main);
        match main.get(i, &self.plugins).and_then(|inst| {
            inst.queueing_hint(event, pod, old, new)
                .map_err(PluginError::from)
        }) {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                tracing::debug!(plugin, "queueing hint failed, requeueing: {e}");
                Queue
            }
            Err(e) => {
                tracing::debug!(plugin, "queueing hint failed, requeueing: {e}");
                Queue
            }
        }
    }

    /// The binding cycle: PreBind, Bind (until a plugin does not Skip), PostBind. Runs
    /// on its own instances, so several binding cycles may run at once.
    pub fn bind(&self, state: &CycleState, pod: &CyclePod, node: &str) -> Result<(), PluginError> {
        let taken = lock(&self.instances.binding).pop();
        let mut set = taken.unwrap_or_else(|| {
            InstanceSet::new(self.plugins.len(), self.instances.binding_services.clone())
        });
        let r = self.bind_with(&mut set, state, pod, node);
        lock(&self.instances.binding).push(set);
        r
    }

    fn bind_with(
        &self,
        set: &mut InstanceSet,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(), PluginError> {
        let mut timer = self.time_point("PreBind");
        for &(i, _) in self.at(ExtensionPoint::PreBind) {
            if !self.takes_part(i, pod, state) {
                continue;
            }
            let t = self.plugin_clock(state);
            let status = set.get(i, &self.plugins)?.pre_bind(state, pod, node)?;
            self.observe_plugin(i, "PreBind", status.code.as_str(), t);
            if !matches!(status.code, Code::Success | Code::Skip) {
                timer.status = status.code.as_str();
                return Err(self.failure(i, &status));
            }
        }
        timer.status = "Success";
        drop(timer);
        let mut timer = self.time_point("Bind");
        let mut bound = false;
        for &(i, _) in self.at(ExtensionPoint::Bind) {
            if !self.takes_part(i, pod, state) {
                // As if it answered Skip.
                continue;
            }
            let t = self.plugin_clock(state);
            let status = set.get(i, &self.plugins)?.bind(state, pod, node)?;
            self.observe_plugin(i, "Bind", status.code.as_str(), t);
            match status.code {
                Code::Skip => continue,
                Code::Success => {
                    bound = true;
                    break;
                }
                _ => {
                    timer.status = status.code.as_str();
                    return Err(self.failure(i, &status));
                }
            }
        }
        if !bound {
            timer.status = "Skip";
            return Err(PluginError {
                plugin: "Bind".into(),
                message: "every bind plugin skipped the pod".into(),
            });
        }
        timer.status = "Success";
        drop(timer);
        let mut timer = self.time_point("PostBind");
        timer.status = "Success";
        for &(i, _) in self.at(ExtensionPoint::PostBind) {
            if !self.takes_part(i, pod, state) {
                continue;
            }
            let t = self.plugin_clock(state);
            let r = set
                .get(i, &self.plugins)
                .and_then(|inst| inst.post_bind(state, pod, node).map_err(PluginError::from));
            self.observe_plugin(
                i,
                "PostBind",
                if r.is_ok() { "Success" } else { "Error" },
                t,
            );
            if let Err(e) = r {
                tracing::warn!("postBind failed: {e}");
            }
        }
        Ok(())
    }

    /// Times an extension point (`scheduler_framework_extension_point_duration_seconds`)
    /// until the guard drops; its status is Error unless set otherwise.
    pub(crate) fn time_point(&self, point: &'static str) -> PointTimer<'_> {
        PointTimer {
            metrics: self.metrics.as_ref(),
            profile: &self.scheduler_name,
            point,
            status: "Error",
            started: std::time::Instant::now(),
        }
    }

    /// [`Framework::time_point`] for a scheduling attempt: an explaining one
    /// records no durations.
    fn timer(&self, point: &'static str, record: &Option<record::CycleRecord>) -> PointTimer<'_> {
        let mut timer = self.time_point(point);
        if record.as_ref().is_some_and(|r| r.explaining) {
            timer.metrics = None;
        }
        timer
    }

    /// When the cycle of `state` records plugin durations: now.
    pub(crate) fn plugin_clock(&self, state: &CycleState) -> Option<std::time::Instant> {
        (self.metrics.is_some() && state.records_plugin_metrics()).then(std::time::Instant::now)
    }

    /// Records one plugin's duration at an extension point, if its cycle is sampled
    /// (`started` from [`Framework::plugin_clock`]).
    pub(crate) fn observe_plugin(
        &self,
        plugin: usize,
        point: &'static str,
        status: &str,
        started: Option<std::time::Instant>,
    ) {
        if let (Some(m), Some(t)) = (&self.metrics, started) {
            m.observe_plugin(&self.plugins[plugin].name, point, status, t.elapsed());
        }
    }

    fn failure(&self, plugin: usize, status: &Status) -> PluginError {
        PluginError {
            plugin: self.plugins[plugin].name.clone(),
            message: format!("{}: {}", status.code.as_str(), status.message()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_plugin_has_a_twin() {
        let reg = berth_runtime::native::registry();
        for name in registry::builtin_plugins().keys() {
            assert!(reg.contains_key(name.as_str()), "no native twin for {name}");
        }
        let fit = &reg["NodeResourcesFit"];
        assert_eq!(fit.name, "NodeResourcesFit");
        assert!(fit.instantiate("", None).is_ok());
        let bad = fit
            .instantiate("{not json", None)
            .err()
            .expect("bad JSON is refused");
        assert!(
            matches!(bad, berth_runtime::native::TwinError::ArgsNotJson(_)),
            "{bad}"
        );
        assert!(bad.to_string().starts_with("args are not JSON: "), "{bad}");
    }
}
