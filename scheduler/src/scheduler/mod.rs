//! The scheduling loop: pop a pod, schedule it against a fresh snapshot, assume it,
//! run Reserve and Permit, and hand it to a binding cycle, which runs on a pool of
//! binding threads while the loop goes on with the next pod. Every outcome is
//! accounted for: a pod ends bound exactly once, or back in the queue with its
//! reason; never lost.
//!
//! The rooms of the scheduler, one job each: this file holds the loop (taking in
//! what the cluster reports, one scheduling cycle, Reserve and Permit, a failed
//! attempt back to the queue); [`binding`] the binding threads and what a binding
//! cycle's end decides; [`preemption`] the cluster side of a preemption
//! (nominations and evictions); [`storage`] the storage objects' bookkeeping; and
//! [`swap`] how a reload's new version is taken in between two cycles.

mod binding;
mod dra;
mod group;
mod group_preemption;
mod pool;
mod preemption;
mod storage;
mod swap;

pub use preemption::PREEMPTION_THREADS;
pub use swap::SwapReport;

use crate::config::Configuration;
use crate::framework::waiting::{WaitState, WaitingPods};
use crate::framework::{
    Cycle, CyclePod, CycleState, ExplainOptions, Explanation, Framework, FrameworkOptions,
    NominatedPods, PermitOutcome, PluginError, ScheduleOutcome,
};
use crate::queue::{
    HintOracle, QueueConfig, QueueName, QueuedPod, SchedulingQueue, node_update_actions,
    pod_update_actions,
};
use crate::reload::{Builder, ReloadError};
use berth_cluster::access;
use berth_cluster::dra::Dra;
use berth_cluster::manifest::PodSelector;
use berth_cluster::pod_groups::{MemberState, PodGroups, WorkloadObject};
use berth_cluster::storage::Storage;
use berth_cluster::{Binder, Budgets, Change, FailureReason, Namespaces, NoRecorder, Recorder};
use berth_runtime::cache::{Cache, CacheError, Snapshot};
use berth_runtime::clock::Clock;
use berth_runtime::metrics::{AttemptResult, Metrics};
use berth_runtime::wasm::Runtime;
use berth_runtime::wasm::module::HostServices;
use berth_sdk::affinity::LabelSelector;
use berth_sdk::{ActionType, ClusterEvent, EventResource, Labels, Node, Object, Pod, QueueingHint};
use binding::{Binding, spawn_binders};
use preemption::Preemptions;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// What happened to a pod this scheduler is responsible for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodOutcome {
    /// `namespace`.
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// The node it was bound to, if any.
    pub node: Option<String>,
    /// The event message: "Successfully assigned ..." or why it is pending.
    pub message: String,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// The last attempt placed it from the batch of an earlier cycle (opportunistic
    /// batching): it was filtered on that node alone and not scored.
    pub batched: bool,
}

/// How the scheduler runs.
#[derive(Clone, Debug)]
pub struct SchedulerOptions {
    /// The framework's options (parallelism, seed, ...).
    pub framework: FrameworkOptions,
    /// Backoff settings.
    pub queue: QueueConfig,
    /// On a virtual clock, a pod that failed this many attempts no longer moves the
    /// clock forward to its backoff (a cluster event can still retry it).
    pub max_attempts: u32,
    /// Binding cycles that may run at once, each on its own thread and plugin
    /// instances. The embedded cluster binds at once, so the default is 1;
    /// `berth run` uses [`DEFAULT_PARALLEL_BINDINGS`].
    pub parallel_bindings: usize,
    /// Keep a bound pod assumed until the cluster reports it bound (a watch event),
    /// as upstream's cache does. The embedded cluster confirms a binding at once.
    pub confirm_bindings: bool,
    /// With `confirm_bindings`, how long a bound pod may stay unconfirmed before the
    /// cache forgets it (with a warning); `None` keeps it until confirmed.
    pub assumed_pod_expiry: Option<Duration>,
    /// Keep each bound pod's outcome for a report (`simulate`, `bench`). A live
    /// scheduler keeps the outcomes of pending pods only, so that its memory follows
    /// what is pending, not every pod it ever bound.
    pub keep_bound_outcomes: bool,
    /// Take in binding results at points the run fixes: before each scheduling cycle
    /// (and each poll) the loop waits until every binding cycle under way has ended
    /// (or waits on the cluster, for a volume controller say) and takes their results
    /// in, in the order the cycles started. So an embedded run places the same pods
    /// on the same nodes whatever the speed of the machine and of its threads (a
    /// binding cycle no longer overlaps the next scheduling cycle). `berth run` turns
    /// it off: against an API server the order of events is the server's anyway, and
    /// the loop must not wait on a bind.
    pub settle_bindings: bool,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            framework: FrameworkOptions::default(),
            queue: QueueConfig::default(),
            max_attempts: 5,
            parallel_bindings: 1,
            confirm_bindings: false,
            assumed_pod_expiry: Some(DEFAULT_ASSUMED_POD_EXPIRY),
            keep_bound_outcomes: true,
            settle_bindings: true,
        }
    }
}

/// Binding cycles in flight at once by default in `berth run`. Upstream starts a
/// goroutine per binding cycle and lets the client's QPS limit them; Berth gives each
/// binding cycle a thread and its own plugin instances, so it bounds them. Plugins see
/// the consequence: two binding cycles may run on different instances, so what a
/// plugin remembers between binding cycles in its own memory is per instance.
pub const DEFAULT_PARALLEL_BINDINGS: usize = 32;

/// Binding cycles that may wait on the cluster at once (a PreBind waiting for its
/// volumes, up to VolumeBinding's `bindTimeoutSeconds`) beyond the binding threads:
/// while one waits, another thread runs the other binding cycles in its place, so
/// that slow volumes do not hold up every bind. Each waiting cycle costs a parked
/// thread and its plugin instances.
pub const MAX_WAITING_BINDINGS: usize = 256;

/// How long a bound pod may wait for the cluster's confirmation by default.
pub const DEFAULT_ASSUMED_POD_EXPIRY: Duration = Duration::from_secs(15 * 60);

/// Wakes whoever drives the scheduler (a binding cycle ended).
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// The PreEnqueue plugin that keeps a pod out, and its message.
type Gate = Option<(String, String)>;

/// The PreEnqueue plugin whose hold the API server itself reports (`SchedulingGated`).
const SCHEDULING_GATES: &str = "SchedulingGates";

/// Why a scheduler could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// The configuration or a module was refused. The message is the loader's or the
    /// configuration check's own (it names the file, the field and the plugin); the
    /// whole report is kept.
    #[error("{}", .0.reason)]
    Refused(ReloadError),
    /// A binding or preemption thread could not be started.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("cannot start a binding or preemption thread: {0}")]
    BindingThread(std::io::Error),
}

/// Why a pod the cluster reported could not be taken in.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    /// The cache refused it (a bound pod added twice, an update of a pod it lacks).
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// A QueueSort or PreEnqueue plugin failed on it.
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

/// Why a pod could not be explained.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// No profile has the pod's scheduler name.
    #[error("no profile serves scheduler name {scheduler_name:?} of pod {pod}")]
    NoProfile {
        /// The pod's `spec.schedulerName`.
        scheduler_name: String,
        /// The pod, as `namespace/name`.
        pod: String,
    },
    /// A plugin failed while explaining.
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

/// What the scheduler keeps for pods, counted. In a long run each count follows what
/// is live (pending, in a cycle, or bound on a node), never every pod ever seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Bookkeeping {
    /// Pods waiting in a queue (gated included).
    pub queued: usize,
    /// Pods in a scheduling or binding cycle.
    pub in_flight: usize,
    /// Cluster events the queue keeps for the pods in flight.
    pub queue_events: usize,
    /// Pods the cache counts on nodes (bound and assumed).
    pub cached_pods: usize,
    /// Pods' outcomes (pending pods', and bound ones' when a report keeps them).
    pub outcomes: usize,
    /// Binding cycles under way, Permit waits included.
    pub binding: usize,
    /// Bound pods waiting for the cluster to show them bound.
    pub unconfirmed: usize,
    /// Pods whose bind may or may not have happened, waiting for the cluster to say.
    pub doubtful: usize,
    /// Pods nominated to a node by preemption.
    pub nominated: usize,
}

impl std::fmt::Display for Bookkeeping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let counts = [
            ("queued", self.queued),
            ("in flight", self.in_flight),
            ("queue events", self.queue_events),
            ("cached pods", self.cached_pods),
            ("outcomes", self.outcomes),
            ("binding", self.binding),
            ("unconfirmed", self.unconfirmed),
            ("doubtful", self.doubtful),
            ("nominated", self.nominated),
        ];
        let mut any = false;
        for (name, n) in counts.into_iter().filter(|(_, n)| *n > 0) {
            write!(f, "{}{name} {n}", if any { ", " } else { "" })?;
            any = true;
        }
        if !any {
            f.write_str("nothing")?;
        }
        Ok(())
    }
}

/// The scheduler: its profiles, the cluster as it sees it, the queue, the binding
/// cycles. Each part owns one job; see each part's type for what must hold.
pub struct Scheduler {
    /// The profiles' current version and the views of it that others keep.
    profiles: swap::Profiles,
    /// The cluster as the scheduler sees it: nodes, pods and the objects scheduling
    /// reads.
    cluster: ClusterState,
    queue: SchedulingQueue,
    /// What happened to each pod this scheduler is responsible for, by UID (see
    /// [`SchedulerOptions::keep_bound_outcomes`] for the bound ones).
    outcomes: HashMap<String, PodOutcome>,
    /// Pods waiting at Permit (a handle shared with the plugins).
    waiting: WaitingPods,
    /// The pods a PreEnqueue plugin holds back, as last told to the recorder (KEP-5501):
    /// by UID, the pod and its plugin's message.
    not_ready: HashMap<String, (Pod, String)>,
    /// The preemption threads, and the preemptors waiting for them.
    preemption: Preemptions,
    /// Pods nominated to a node by preemption, by node.
    nominated: NominatedPods,
    /// Scheduling cycles run (one per pod or pod group popped): a profile's batch
    /// serves only the cycle right after the one that made or used it.
    cycles: u64,
    /// The binding cycles under way and what the loop knows of their ends.
    bindings: binding::Bindings,
    /// What the scheduler talks to: the clock, the cluster, the recorder, whoever
    /// drives it, the metrics.
    services: Services,
    /// Settings fixed when the scheduler is built.
    settings: Settings,
}

/// The cluster as the scheduler sees it: the nodes and the pods on them, and the
/// other objects a scheduling cycle reads.
///
/// What must hold: `snapshot` is `cache` as of the last
/// [`ClusterState::refresh_snapshot`], which runs before each scheduling cycle (and
/// before a reload or an explanation reads the snapshot): the plugins see the
/// snapshot, not the cache. `namespaces`, `budgets`, `storage`, `dra` and
/// `pod_groups` are handles shared with the plugins' host services (the profiles'
/// builder holds clones): what is set here is what plugins read. The cache tracks
/// `pod_groups` only with the `GenericWorkload` gate on. Besides what the cluster
/// reports, only the scheduler's own assumptions change them (pods assumed on
/// nodes, volumes and claims assumed for them), undone if the pod is not bound.
struct ClusterState {
    /// The nodes and the pods on them, bound and assumed.
    cache: Cache,
    /// The cache's contents as of the last update, which scheduling cycles read.
    snapshot: Snapshot,
    /// The namespaces' labels.
    namespaces: Namespaces,
    /// The PodDisruptionBudgets (preemption reads them).
    budgets: Budgets,
    /// The storage objects: volumes, claims, classes, CSI nodes and drivers,
    /// capacities.
    storage: Storage,
    /// The dynamic resource allocation objects.
    dra: Dra,
    /// The PodGroups and where their members are (the cache tells it of assumed,
    /// bound and forgotten members; pending ones are told here).
    pod_groups: PodGroups,
    /// The selectors of Services and controllers, by namespace, then by kind and
    /// name: a pod's cycle reads its own namespace's, and a relist costs one insert
    /// each.
    selectors: HashMap<String, std::collections::BTreeMap<(String, String), LabelSelector>>,
    /// The kinds the scheduler may not list, with the API server's words: pods whose
    /// scheduling needs one wait (see [`berth_cluster::access`]).
    forbidden: std::collections::BTreeMap<String, String>,
}

impl ClusterState {
    /// Brings the snapshot up to date with the cache.
    fn refresh_snapshot(&mut self) {
        self.cache.update_snapshot(&mut self.snapshot);
    }
}

/// What the scheduler talks to, each a handle fixed when the scheduler is built but
/// for the recorder ([`Scheduler::set_recorder`]). The waker is shared with the
/// binding and preemption threads, which call it; [`Scheduler::set_waker`] fills it.
struct Services {
    /// The time the queue, Permit waits and bindings go by (virtual in a simulation).
    clock: Arc<dyn Clock>,
    /// The cluster: binds, evictions, lookups, storage and claim writes.
    binder: Arc<dyn Binder>,
    /// Where events and pod status go.
    recorder: Arc<dyn Recorder>,
    /// Wakes whoever drives the scheduler when a binding or preemption thread ends a
    /// job (shared with those threads).
    waker: Arc<RwLock<Option<Waker>>>,
    /// The metrics (a handle shared with the queue and the plugins' host services).
    metrics: Metrics,
}

/// Settings fixed when the scheduler is built, from [`SchedulerOptions`] and the
/// framework options.
struct Settings {
    /// See [`SchedulerOptions::max_attempts`] (at least 1).
    max_attempts: u32,
    /// See [`SchedulerOptions::keep_bound_outcomes`].
    keep_bound_outcomes: bool,
    /// The `GenericWorkload` gate: off, PodGroups and Workloads are ignored and every
    /// pod is scheduled alone, as kube-scheduler 1.37 does by default.
    generic_workload: bool,
}

/// Asks the frameworks' plugins for queueing hints.
struct Oracle<'a>(&'a [Arc<Framework>]);

impl HintOracle for Oracle<'_> {
    fn hint(
        &self,
        plugin: &str,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> QueueingHint {
        // A pod waiting for a kind the scheduler may not list moves when the kind is
        // allowed (`Scheduler::allow_kind`), not on a plugin's event.
        if plugin == access::LIST_ACCESS {
            return QueueingHint::QueueSkip;
        }
        match self
            .0
            .iter()
            .find(|f| f.scheduler_name() == pod.scheduler_name)
        {
            Some(fw) => fw.queueing_hint(plugin, event, pod, old, new),
            None => QueueingHint::Queue,
        }
    }
}

impl Scheduler {
    /// Builds a scheduler for a configuration; `file` names the configuration in
    /// errors. Modules are loaded (and compiled or taken from the cache) here.
    pub fn new(
        runtime: &Arc<Runtime>,
        config: &Configuration,
        file: &str,
        options: &SchedulerOptions,
        binder: Arc<dyn Binder>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, SchedulerError> {
        let metrics = Metrics::new();
        let services = HostServices {
            binder: Some(binder.clone()),
            claim_writer: Some(binder.clone()),
            namespaces: Namespaces::new(),
            waiting: WaitingPods::new(),
            metrics: Some(metrics.clone()),
            budgets: Budgets::new(),
            storage: Storage::new(),
            pod_groups: PodGroups::new(),
            dra: Dra::new(),
            // The framework gives its plugins its options' gates.
            gates: Default::default(),
        };
        let builder = Builder {
            runtime: runtime.clone(),
            services: services.clone(),
            options: options.framework.clone(),
        };
        runtime.memory().set_limit(config.total_memory_limit());
        // The messages of a first build are the loader's and the configuration's own.
        let built = builder
            .build(config, file, None, None)
            .map_err(SchedulerError::Refused)?;
        let generation = Arc::new(built.generation);
        let frameworks = generation.frameworks.clone();
        binder.attach_storage(&services.storage);
        binder.attach_dra(&services.dra);
        // A binding cycle waiting for its volumes or claims lets another binding
        // thread run.
        services.storage.on_blocking(Arc::new(pool::park_current));
        services.dra.on_blocking(Arc::new(pool::park_current));
        let waker = Arc::new(RwLock::new(None));
        let (bind_tx, bind_rx) =
            spawn_binders(options.parallel_bindings, binder.clone(), waker.clone())?;
        // The embedded cluster evicts on the loop's thread; one idle thread stands by.
        let preemption_threads = if binder.reports_deletions() {
            PREEMPTION_THREADS
        } else {
            1
        };
        let preemption = Preemptions::start(preemption_threads, binder.clone(), waker.clone())
            .map_err(SchedulerError::BindingThread)?;
        let mut queue = SchedulingQueue::new(config.queue_config(options.queue));
        queue.set_metrics(metrics.clone());
        let plugins_view = Arc::new(RwLock::new(generation.describe()));
        let shadows_view = Arc::new(RwLock::new(generation.shadow_stats()));
        let followed_view = Arc::new(RwLock::new(generation.followed_tags()));
        Ok(Scheduler {
            profiles: swap::Profiles {
                frameworks,
                generation,
                builder,
                plugins_view,
                followed_view,
                shadows_view,
            },
            cluster: ClusterState {
                cache: {
                    let mut cache = Cache::new();
                    // With GenericWorkload off no group is known, so members count in none.
                    if options.framework.generic_workload {
                        cache.track_groups(services.pod_groups.clone());
                    }
                    cache
                },
                snapshot: Snapshot::default(),
                namespaces: services.namespaces,
                budgets: services.budgets,
                storage: services.storage,
                dra: services.dra,
                pod_groups: services.pod_groups,
                selectors: HashMap::new(),
                forbidden: std::collections::BTreeMap::new(),
            },
            queue,
            outcomes: HashMap::new(),
            waiting: services.waiting,
            not_ready: HashMap::new(),
            preemption,
            nominated: NominatedPods::new(),
            cycles: 0,
            bindings: binding::Bindings {
                bind_tx,
                bind_rx,
                bind_jobs_sent: 0,
                bind_arrived: std::collections::BTreeMap::new(),
                settle: options.settle_bindings,
                binding: HashMap::new(),
                bindings_in_flight: 0,
                confirm_bindings: options.confirm_bindings,
                assumed_pod_expiry: options.assumed_pod_expiry,
                unconfirmed: HashMap::new(),
                doubtful: HashMap::new(),
            },
            services: Services {
                clock,
                binder,
                recorder: Arc::new(NoRecorder),
                waker,
                metrics,
            },
            settings: Settings {
                max_attempts: options.max_attempts.max(1),
                keep_bound_outcomes: options.keep_bound_outcomes,
                generic_workload: options.framework.generic_workload,
            },
        })
    }

    /// Where events and pod status go (the embedded cluster records nothing).
    pub fn set_recorder(&mut self, recorder: Arc<dyn Recorder>) {
        self.services.recorder = recorder;
    }

    /// Called whenever a binding cycle ends, so that a loop waiting for input wakes.
    pub fn set_waker(&self, waker: Waker) {
        *self
            .services
            .waker
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(waker);
    }

    /// Applies a change a cluster source reported.
    pub fn apply(&mut self, change: Change) -> Result<(), PodError> {
        match change {
            Change::Node(node) => self.add_or_update_node(node),
            Change::NodeDeleted(name) => self.remove_node(&name),
            Change::Pod(pod) => {
                if self.knows_pod(&pod.uid) {
                    self.update_pod(pod)?;
                } else {
                    self.add_pod(pod)?;
                }
            }
            Change::PodDeleted(uid) => self.delete_pod(&uid),
            Change::Namespace(name, labels) => self.add_or_update_namespace(&name, labels),
            Change::NamespaceDeleted(name) => self.cluster.namespaces.remove(&name),
            Change::Budget(b) => self.cluster.budgets.set(b),
            Change::BudgetDeleted { namespace, name } => {
                self.cluster.budgets.remove(&namespace, &name)
            }
            Change::Selector(s) => self.add_or_update_selector(s),
            Change::SelectorDeleted {
                kind,
                namespace,
                name,
            } => self.remove_selector(&kind, &namespace, &name),
            Change::Claim(c) => self.add_or_update_claim(c),
            Change::ClaimDeleted { namespace, name } => self.remove_claim(&namespace, &name),
            Change::Volume(v) => self.add_or_update_volume(v),
            Change::VolumeDeleted(name) => self.remove_volume(&name),
            Change::StorageClass(c) => self.add_or_update_storage_class(c),
            Change::StorageClassDeleted(name) => self.remove_storage_class(&name),
            Change::CsiNode(n) => self.add_or_update_csi_node(n),
            Change::CsiNodeDeleted(name) => self.remove_csi_node(&name),
            Change::CsiDriver(d) => self.add_or_update_csi_driver(d),
            Change::CsiDriverDeleted(name) => self.remove_csi_driver(&name),
            Change::CsiStorageCapacity(c) => self.add_or_update_storage_capacity(c),
            Change::CsiStorageCapacityDeleted { namespace, name } => {
                self.remove_storage_capacity(&namespace, &name)
            }
            Change::PodGroup(g) => self.add_or_update_pod_group(g),
            Change::PodGroupDeleted { namespace, name } => self.remove_pod_group(&namespace, &name),
            Change::SchedulingWorkload(w) => self.add_or_update_workload(w),
            Change::SchedulingWorkloadDeleted { namespace, name } => {
                self.remove_workload(&namespace, &name)
            }
            Change::Dra(c) => self.apply_dra(c),
            Change::Synced => {}
            Change::KindForbidden { kind, message } => self.forbid_kind(kind, message),
            Change::KindAllowed(kind) => self.allow_kind(&kind),
        }
        Ok(())
    }

    /// The scheduler may not list `kind`: pods whose scheduling needs it wait, from
    /// their next attempt on.
    pub fn forbid_kind(&mut self, kind: String, message: String) {
        self.services.metrics.set_kind_forbidden(&kind, true);
        self.cluster.forbidden.insert(kind, message);
        // Pods a PreEnqueue plugin holds back for want of the kind's objects are let
        // in, to wait for the kind itself (see `gate`).
        let gates: BTreeSet<String> = self
            .queue
            .waiting()
            .filter_map(|q| q.gated_by.clone())
            .collect();
        let now = self.services.clock.now();
        for pod in self.queue.gated_by(&gates) {
            if !pod.scheduling_gates.is_empty()
                || access::waiting_message(&pod, &self.cluster.forbidden).is_none()
            {
                continue;
            }
            let Some(fw) = self.framework_for(&pod.scheduler_name).cloned() else {
                continue;
            };
            match self.gate(&fw, &pod) {
                Ok((key, gate)) => {
                    self.queue
                        .update(pod, key, gate, now, &Oracle(&self.profiles.frameworks))
                }
                Err(e) => self.enqueue_failed(pod, &e),
            }
        }
    }

    /// `kind` is listed again: the pods that waited for it are tried again.
    pub fn allow_kind(&mut self, kind: &str) {
        self.services.metrics.set_kind_forbidden(kind, false);
        if self.cluster.forbidden.remove(kind).is_some() {
            let waiting = BTreeSet::from([access::LIST_ACCESS.to_owned()]);
            let now = self.services.clock.now();
            let moved = self.queue.move_rejected_by(&waiting, now, "KindAllowed");
            tracing::debug!(kind, moved, "may list it again: its pods are tried again");
        }
    }

    /// A `scheduling.k8s.io` Workload appeared or changed. Scheduling does not read
    /// it (a PodGroup carries its template's policy), so no pod moves: `explain` and
    /// `simulate` say which template each group was made from.
    /// With GenericWorkload off the scheduler knows no Workloads, as upstream's.
    pub fn add_or_update_workload(&mut self, workload: WorkloadObject) {
        if self.settings.generic_workload {
            self.cluster.pod_groups.set_workload(workload);
        }
    }

    /// A Workload is gone; the PodGroups made from it stay and are scheduled.
    pub fn remove_workload(&mut self, namespace: &str, name: &str) {
        if self.settings.generic_workload {
            self.cluster.pod_groups.remove_workload(namespace, name);
        }
    }

    /// Whether pod groups are scheduled as groups (the `GenericWorkload` gate).
    pub fn generic_workload(&self) -> bool {
        self.settings.generic_workload
    }

    /// The pod with this UID as the scheduler has it now: on a node or assumed, or
    /// queued (not while a cycle holds it).
    pub fn pod(&self, uid: &str) -> Option<&Pod> {
        self.cluster
            .cache
            .pod(uid)
            .or_else(|| self.queue.get(uid).map(|q| &q.pod))
    }

    /// Whether the scheduler has this pod: on a node, assumed, queued, in a
    /// scheduling or binding cycle.
    pub fn knows_pod(&self, uid: &str) -> bool {
        self.cluster.cache.pod(uid).is_some()
            || self.bindings.binding.contains_key(uid)
            || self.bindings.doubtful.contains_key(uid)
            || self.queue.is_in_flight(uid)
            || self.queue.queue_of(uid).is_some()
    }

    /// Takes in what happened meanwhile: Permit waits decided, binding results, and
    /// bound pods the cluster never confirmed forgotten.
    pub fn poll(&mut self, now: Duration) {
        self.resolve_waiting(now);
        self.drain_bind_results(false);
        self.recheck_doubtful(now);
        self.expire_unconfirmed(now);
    }

    /// Moves pods whose backoff ended to activeQ (call it every second, as upstream).
    pub fn flush_backoff(&mut self, now: Duration) {
        self.queue.flush_backoff(now);
    }

    /// Retries pods unschedulable for longer than the limit (call it every 30 s).
    pub fn flush_unschedulable_leftover(&mut self, now: Duration) {
        self.queue.flush_unschedulable_leftover(now);
    }

    /// The earliest Permit wait to end, if any.
    pub fn next_permit_deadline(&self) -> Option<Duration> {
        self.waiting.next_deadline()
    }

    fn expire_unconfirmed(&mut self, now: Duration) {
        let Some(ttl) = self.bindings.assumed_pod_expiry else {
            return;
        };
        let expired: Vec<String> = self
            .bindings
            .unconfirmed
            .iter()
            .filter(|(_, at)| now.saturating_sub(**at) > ttl)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in expired {
            self.bindings.unconfirmed.remove(&uid);
            if self.cluster.cache.is_assumed(&uid) {
                let key = self
                    .cluster
                    .cache
                    .pod(&uid)
                    .map(|p| p.key())
                    .unwrap_or_default();
                tracing::warn!(
                    pod = %key,
                    "the cluster never confirmed the binding within {ttl:?}; forgetting the assumed pod"
                );
                let _ = self.cluster.cache.forget_pod(&uid);
            }
        }
    }

    /// What the scheduler keeps for pods now, counted.
    pub fn bookkeeping(&self) -> Bookkeeping {
        Bookkeeping {
            queued: self.queue.waiting_len(),
            in_flight: self.queue.in_flight_len(),
            queue_events: self.queue.events_kept(),
            cached_pods: self.cluster.cache.pod_count(),
            outcomes: self.outcomes.len(),
            binding: self.bindings.binding.len(),
            unconfirmed: self.bindings.unconfirmed.len(),
            doubtful: self.bindings.doubtful.len(),
            nominated: self.nominated.values().map(Vec::len).sum(),
        }
    }

    /// Bound pods still waiting for the cluster to confirm them.
    pub fn unconfirmed(&self) -> usize {
        self.bindings.unconfirmed.len()
    }

    /// The cache (read-only).
    pub fn cache(&self) -> &Cache {
        &self.cluster.cache
    }

    /// The queue (read-only).
    pub fn queue(&self) -> &SchedulingQueue {
        &self.queue
    }

    /// The PodGroups and where their members are.
    pub fn pod_groups(&self) -> &PodGroups {
        &self.cluster.pod_groups
    }

    /// The metrics, in the Prometheus text format.
    pub fn metrics_text(&self) -> String {
        self.publish_metrics();
        self.services.metrics.render()
    }

    /// The metrics (a handle that clones share: an HTTP server can render it while
    /// the loop schedules).
    pub fn metrics(&self) -> &Metrics {
        &self.services.metrics
    }

    /// Tells the recorder which pods a PreEnqueue plugin holds back, and with what
    /// message, as KEP-5501 has the pod's status say: a pod newly held (or held with
    /// a new message) is reported, a pod let past that still waits is reported let
    /// past, a pod gone is forgotten. SchedulingGates is left out: the API server
    /// itself says `SchedulingGated` for a pod with gates. Computed from the queue's
    /// contents, as the gauges are, so that no transition is missed; the live loop
    /// calls it with [`Scheduler::publish_metrics`].
    pub fn publish_not_ready(&mut self) {
        let mut held: HashMap<String, (Pod, String)> = HashMap::new();
        for qp in self.queue.waiting() {
            let Some(plugin) = qp.gated_by.as_deref() else {
                continue;
            };
            if plugin == SCHEDULING_GATES {
                continue;
            }
            // The gate's message is `PLUGIN: MESSAGE`; the status carries MESSAGE.
            let message = qp.last_failure.as_deref().unwrap_or_default();
            let message = message
                .strip_prefix(plugin)
                .and_then(|m| m.strip_prefix(": "))
                .unwrap_or(message);
            // A hold already told keeps its entry; only a new or changed one is told
            // (and its pod copied).
            let entry = match self.not_ready.remove(&qp.pod.uid) {
                Some(told) if told.1 == message => told,
                _ => {
                    self.services.recorder.not_ready(&qp.pod, Some(message));
                    (qp.pod.clone(), message.to_owned())
                }
            };
            held.insert(qp.pod.uid.clone(), entry);
        }
        // What is left was held and no longer is.
        for (uid, (pod, _)) in self.not_ready.drain() {
            if self.queue.get(&uid).is_some() || self.queue.is_in_flight(&uid) {
                self.services.recorder.not_ready(&pod, None);
            }
        }
        self.not_ready = held;
    }

    /// Brings the gauges that mirror the queue up to date.
    pub fn publish_metrics(&self) {
        let pending = self.queue.pending();
        self.services
            .metrics
            .set_pending(pending.iter().map(|(q, n)| (q.as_str(), *n)));
        self.services
            .metrics
            .set_unschedulable(&self.queue.unschedulable_by_plugin());
    }

    fn framework_for(&self, scheduler_name: &str) -> Option<&Arc<Framework>> {
        self.profiles
            .frameworks
            .iter()
            .find(|f| f.scheduler_name() == scheduler_name)
    }

    /// Whether one of the profiles serves this scheduler name.
    pub fn serves(&self, scheduler_name: &str) -> bool {
        self.framework_for(scheduler_name).is_some()
    }

    fn event(&mut self, event: ClusterEvent, old: Option<Object>, new: Option<Object>) {
        let now = self.services.clock.now();
        self.queue
            .on_event(event, old, new, now, &Oracle(&self.profiles.frameworks));
    }

    /// A Service or controller appeared or changed: its selector feeds the default
    /// selector of the pods it selects.
    pub fn add_or_update_selector(&mut self, selector: PodSelector) {
        self.cluster
            .selectors
            .entry(selector.namespace)
            .or_default()
            .insert((selector.kind, selector.name), selector.selector);
    }

    /// A Service or controller is gone.
    pub fn remove_selector(&mut self, kind: &str, namespace: &str, name: &str) {
        if let Some(of_namespace) = self.cluster.selectors.get_mut(namespace) {
            of_namespace.remove(&(kind.to_owned(), name.to_owned()));
            if of_namespace.is_empty() {
                self.cluster.selectors.remove(namespace);
            }
        }
    }

    /// Upstream's `DefaultSelector`: the merged selectors of the Services and
    /// controllers in the pod's namespace that select it. Berth matches controllers by
    /// their selector rather than the pod's owner reference, which agrees for pods a
    /// controller made.
    fn default_selector(&self, pod: &Pod) -> Option<LabelSelector> {
        let mut merged: Option<LabelSelector> = None;
        for selector in self.cluster.selectors.get(&pod.namespace)?.values() {
            if selector.is_empty() || !selector.matches(&pod.labels) {
                continue;
            }
            let m = merged.get_or_insert_with(LabelSelector::default);
            m.match_labels.extend(selector.match_labels.clone());
            m.match_expressions
                .extend(selector.match_expressions.iter().cloned());
        }
        merged
    }

    /// A PodDisruptionBudget appeared or changed (preemption reads them).
    pub fn add_or_update_budget(&mut self, budget: berth_sdk::PodDisruptionBudget) {
        self.cluster.budgets.set(budget);
    }

    /// A namespace appeared or changed (its labels feed namespace selectors).
    pub fn add_or_update_namespace(&mut self, name: &str, labels: Labels) {
        let known = self.cluster.namespaces.labels(name).is_some();
        self.cluster.namespaces.set(name, labels);
        let actions = if known {
            ActionType::UPDATE_OTHER
        } else {
            ActionType::ADD
        };
        self.event(
            ClusterEvent::new(EventResource::Namespace, actions),
            None,
            None,
        );
    }

    /// A node appeared or changed.
    pub fn add_or_update_node(&mut self, node: Node) {
        let old = self.cluster.cache.node(&node.name).map(|n| n.node.clone());
        self.cluster.cache.add_or_update_node(node.clone());
        let actions = match &old {
            Some(o) => node_update_actions(o, &node),
            None => ActionType::ADD,
        };
        self.event(
            ClusterEvent::new(EventResource::Node, actions),
            old.map(Object::Node),
            Some(Object::Node(node)),
        );
    }

    /// A node is gone.
    pub fn remove_node(&mut self, name: &str) {
        let old = self.cluster.cache.node(name).map(|n| n.node.clone());
        self.cluster.cache.remove_node(name);
        if let Some(old) = old {
            self.event(
                ClusterEvent::new(EventResource::Node, ActionType::DELETE),
                Some(Object::Node(old)),
                None,
            );
        }
    }

    fn gate(&mut self, fw: &Framework, pod: &Pod) -> Result<(Vec<i64>, Gate), PluginError> {
        let wpod = CyclePod::new(pod.clone());
        let key = fw.sort_key(&wpod)?;
        self.key_group_of(fw, pod)?;
        if pod.scheduling_gates.is_empty()
            && access::waiting_message(pod, &self.cluster.forbidden).is_some()
        {
            // PreEnqueue plugins would judge it on a view without the kind
            // (DynamicResources: its claim "not found"); its cycle says what it waits
            // for instead.
            return Ok((key, None));
        }
        let gate = fw
            .pre_enqueue(&wpod)?
            .map(|(plugin, status)| (plugin.clone(), format!("{plugin}: {}", status.message())))
            .or_else(|| {
                // The PostFilter plugin's own PreEnqueue, as upstream's
                // DefaultPreemption has: its preemption is under way.
                self.preempting(&pod.uid)
                    .map(|plugin| (plugin.to_owned(), preemption::preempting_message(plugin)))
            });
        Ok((key, gate))
    }

    /// A pod whose QueueSort key or PreEnqueue gate failed (a plugin trapped or
    /// missed its deadline) is not dropped: it backs off as after an error, with a
    /// FailedScheduling event naming the plugin, and both are asked again when its
    /// backoff ends (see [`Scheduler::regate`]).
    fn enqueue_failed(&mut self, pod: Pod, e: &PluginError) {
        let attempts = self.queue.get(&pod.uid).map_or(0, |q| q.attempts) + 1;
        let message = self.enqueue_failure(&pod, e, attempts);
        let now = self.services.clock.now();
        self.queue.add_failed(pod, message, now);
    }

    /// Says that `pod`'s key or gate failed (log, event, outcome); the message.
    fn enqueue_failure(&mut self, pod: &Pod, e: &PluginError, attempts: u32) -> String {
        let message = format!("cannot enqueue the pod: {e}");
        tracing::warn!(pod = %pod.key(), "{message}");
        self.services.recorder.failed(
            &pod.scheduler_name,
            pod,
            FailureReason::SchedulerError,
            &message,
        );
        self.set_outcome(pod, None, message.clone(), attempts);
        message
    }

    /// Asks again the key and gate of the pods whose last ones failed and whose
    /// backoff has ended: in they go (or gated), or back they back off.
    fn regate(&mut self) {
        for qp in self.queue.take_regating() {
            let Some(fw) = self.framework_for(&qp.pod.scheduler_name).cloned() else {
                continue;
            };
            match self.gate(&fw, &qp.pod) {
                Ok((key, gate)) => {
                    if let Some(o) = self.outcomes.get_mut(&qp.pod.uid) {
                        o.message = enqueue_message(&gate);
                    }
                    self.queue.regated(qp, key, gate, "PreEnqueueRetry");
                }
                Err(e) => {
                    let pod = qp.pod.clone();
                    let message = self.enqueue_failure(&pod, &e, qp.attempts + 1);
                    let now = self.services.clock.now();
                    self.queue.regate_failed(qp, message, now);
                }
            }
        }
    }

    fn set_outcome(&mut self, pod: &Pod, node: Option<String>, message: String, attempts: u32) {
        self.outcomes.insert(
            pod.uid.clone(),
            PodOutcome {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                node,
                message,
                attempts,
                batched: false,
            },
        );
    }

    /// A pod appeared: a bound pod is counted on its node; a pending pod for one of
    /// the profiles is queued (or gated); others are ignored.
    pub fn add_pod(&mut self, pod: Pod) -> Result<(), PodError> {
        if !pod.node_name.is_empty() {
            if self.cluster.cache.is_assumed(&pod.uid) {
                self.confirm(pod);
                return Ok(());
            }
            self.cluster.cache.add_pod(&pod)?;
            self.event(
                ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
                None,
                Some(Object::Pod(pod)),
            );
            return Ok(());
        }
        let Some(fw) = self.framework_for(&pod.scheduler_name).cloned() else {
            return Ok(());
        };
        // A member counts in its group before its own gate is asked (GangScheduling
        // lets it in once enough members exist, itself included). With GenericWorkload
        // off a pod's schedulingGroup means nothing to the scheduler.
        if let Some(group) = &pod.scheduling_group
            && self.settings.generic_workload
        {
            self.cluster.pod_groups.set_member(
                &pod.uid,
                &pod.namespace,
                group,
                MemberState::Pending,
            );
        }
        let (key, gate) = match self.gate(&fw, &pod) {
            Ok(g) => g,
            Err(e) => {
                self.enqueue_failed(pod, &e);
                return Ok(());
            }
        };
        let message = enqueue_message(&gate);
        self.set_outcome(&pod, None, message, 0);
        self.nominate(&pod);
        let now = self.services.clock.now();
        self.queue.add(pod.clone(), key, gate, now);
        // Upstream's UnscheduledPod/Add, which GangScheduling registers: a new member
        // may complete a gang that waits. Upstream sends it only with GenericWorkload on.
        if self.settings.generic_workload {
            self.event(
                ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD),
                None,
                Some(Object::Pod(pod)),
            );
        }
        Ok(())
    }

    /// A pod changed. A bound pod is recounted; a pending one is updated in the queue
    /// (its gates checked again); a pending pod that someone else bound leaves the
    /// queue and is counted on its node.
    pub fn update_pod(&mut self, pod: Pod) -> Result<(), PodError> {
        if let Some(old) = self.cluster.cache.pod(&pod.uid).cloned() {
            if self.cluster.cache.is_assumed(&pod.uid) {
                if pod.node_name.is_empty() || !self.bindings.confirm_bindings {
                    // Ours, being bound: the binding cycle will confirm it.
                    return Ok(());
                }
                // The cluster shows it bound: counted for good, where the cluster
                // put it.
                self.confirm(pod);
                return Ok(());
            }
            self.cluster.cache.update_pod(&pod)?;
            let actions = pod_update_actions(&old, &pod);
            self.event(
                ClusterEvent::new(EventResource::AssignedPod, actions),
                Some(Object::Pod(old)),
                Some(Object::Pod(pod)),
            );
            return Ok(());
        }
        if !pod.node_name.is_empty() {
            // Bound by someone else while pending here.
            self.queue.delete(&pod.uid);
            self.outcomes.remove(&pod.uid);
            return self.add_pod(pod);
        }
        let Some(fw) = self.framework_for(&pod.scheduler_name).cloned() else {
            return Ok(());
        };
        let (key, gate) = match self.gate(&fw, &pod) {
            Ok(g) => g,
            Err(e) => {
                if self.queue.is_in_flight(&pod.uid) {
                    // Its cycle goes on with the version it has; the next failure
                    // or success decides.
                    return Ok(());
                }
                self.enqueue_failed(pod, &e);
                return Ok(());
            }
        };
        if let Some(o) = self.outcomes.get_mut(&pod.uid) {
            if let Some((_, m)) = &gate {
                o.message = format!("waiting at PreEnqueue: {m}");
            }
        } else {
            self.set_outcome(&pod, None, "pending".into(), 0);
        }
        self.nominate(&pod);
        let now = self.services.clock.now();
        self.queue
            .update(pod, key, gate, now, &Oracle(&self.profiles.frameworks));
        Ok(())
    }

    fn confirm(&mut self, pod: Pod) {
        self.bindings.unconfirmed.remove(&pod.uid);
        if let Err(e) = self.cluster.cache.add_pod(&pod) {
            tracing::warn!(pod = %pod.key(), "confirming the binding: {e}");
            return;
        }
        self.event(
            ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
            None,
            Some(Object::Pod(pod)),
        );
    }

    /// A pod is gone: it leaves the queue, the binding cycle or its node.
    pub fn delete_pod(&mut self, uid: &str) {
        self.unnominate(uid);
        self.bindings.unconfirmed.remove(uid);
        self.services.recorder.forget(uid);
        self.cluster.pod_groups.remove_member(uid);
        if self.bindings.binding.contains_key(uid) {
            if self.waiting.remove(uid) {
                // Waiting at Permit: give back what it reserved.
                let b = self.bindings.binding.remove(uid).expect("checked");
                b.framework
                    .unreserve(&b.state, &CyclePod::new(b.assumed.clone()), &b.node);
                let _ = self.cluster.cache.forget_pod(uid);
                self.queue.done(uid);
                self.outcomes.remove(uid);
                return;
            }
            // Being bound: the binding cycle's result decides; note the deletion, and
            // end what its PreBind waits for in the cluster (its volumes, its
            // claims' binding conditions).
            self.queue.delete(uid);
            self.cluster.storage.end_waits_of(uid);
            self.cluster.dra.end_waits_of(uid);
            return;
        }
        if self.queue.delete(uid) && !self.queue.is_in_flight(uid) {
            self.outcomes.remove(uid);
        }
        if let Ok(pod) = self.cluster.cache.remove_pod(uid) {
            self.event(
                ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                Some(Object::Pod(pod)),
                None,
            );
        }
    }

    /// The outcome of a pod by UID.
    pub fn outcome(&self, uid: &str) -> Option<&PodOutcome> {
        self.outcomes.get(uid)
    }

    /// A pod waiting in the queue (activeQ, backoffQ, unschedulable or gated), by
    /// `namespace/name`: its latest version and its attempts so far.
    pub fn waiting_pod(&self, key: &str) -> Option<(&Pod, u32)> {
        self.queue
            .waiting()
            .find(|qp| qp.pod.key() == key)
            .map(|qp| (&qp.pod, qp.attempts))
    }

    /// Explains how the pod's profile sees it on every node (see
    /// [`Framework::explain`]).
    pub fn explain(
        &mut self,
        pod: &Pod,
        options: &ExplainOptions,
    ) -> Result<Explanation, ExplainError> {
        let fw = self
            .framework_for(&pod.scheduler_name)
            .cloned()
            .ok_or_else(|| ExplainError::NoProfile {
                scheduler_name: pod.scheduler_name.clone(),
                pod: pod.key(),
            })?;
        self.cluster.refresh_snapshot();
        let mut pod = pod.clone();
        pod.default_selector = self.default_selector(&pod);
        let mut explanation = fw.explain(
            &CyclePod::new(pod.clone()),
            &self.cluster.snapshot,
            &self.nominated,
            options,
        )?;
        explanation.pod_group = self.explain_group(&fw, &pod);
        Ok(explanation)
    }

    /// The attempt [`Scheduler::schedule_one`] would make for `pod` now, recorded
    /// and not acted on (nothing assumed, bound or nominated), with its framework;
    /// `None` when no profile has the pod's scheduler name.
    /// For the tests of the crates above this one (not a scheduler's API).
    #[doc(hidden)]
    pub fn attempt_recorded(
        &mut self,
        pod: &Pod,
    ) -> Option<(
        Arc<Framework>,
        ScheduleOutcome,
        crate::framework::CycleRecord,
    )> {
        let fw = self.framework_for(&pod.scheduler_name).cloned()?;
        let mut pod = pod.clone();
        pod.default_selector = self.default_selector(&pod);
        self.cluster.refresh_snapshot();
        let (outcome, record) =
            fw.schedule_pod_recorded(&CyclePod::new(pod), &self.cluster.snapshot, &self.nominated);
        Some((fw, outcome, record))
    }

    /// Waits for every binding cycle in flight to end and takes in its result, as
    /// the loop does before its next cycle.
    /// For the tests of the crates above this one (not a scheduler's API).
    #[doc(hidden)]
    pub fn finish_bindings(&mut self) {
        while self.bindings.bindings_in_flight > 0 {
            self.drain_bind_results(true);
        }
        self.drain_bind_results(false);
    }

    /// The name of the node at `slot` of the scheduler's snapshot.
    /// For the tests of the crates above this one (not a scheduler's API).
    #[doc(hidden)]
    pub fn node_at(&self, slot: u32) -> String {
        self.cluster
            .snapshot
            .node(slot)
            .map(|n| n.name().to_owned())
            .unwrap_or_default()
    }

    /// Schedules until nothing more can happen: activeQ is empty, no binding is in
    /// flight, and no backoff or Permit wait is left to wait for: a virtual clock jumps
    /// to each, a real one sleeps until it. Returns how many attempts were made.
    pub fn run_until_idle(&mut self) -> usize {
        let mut attempts = 0;
        loop {
            let now = self.services.clock.now();
            self.queue.flush_backoff(now);
            self.resolve_waiting(now);
            self.recheck_doubtful(now);
            while self.schedule_one() {
                attempts += 1;
                self.drain_bind_results(false);
                self.resolve_waiting(self.services.clock.now());
            }
            if self.bindings.bindings_in_flight > 0 {
                self.drain_bind_results(true);
                continue;
            }
            let next = [
                self.queue.next_backoff_flush(self.settings.max_attempts),
                self.waiting.next_deadline(),
                self.bindings
                    .doubtful
                    .values()
                    .filter_map(|(_, _, at)| *at)
                    .min(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if self.services.clock.advance_to(t.max(now)) => {}
                _ => break,
            }
        }
        attempts
    }

    /// Pops one pod and runs its scheduling cycle (the binding cycle goes on apart);
    /// false when activeQ is empty.
    pub fn schedule_one(&mut self) -> bool {
        if self.bindings.settle {
            // The binding cycles of earlier pods end before this cycle begins (see
            // `SchedulerOptions::settle_bindings`).
            self.drain_bind_results(false);
        }
        self.regate();
        let Some(qp) = self.queue.pop() else {
            return false;
        };
        self.cycles += 1;
        let Some(fw) = self.framework_for(&qp.pod.scheduler_name).cloned() else {
            // The profile is gone; nothing here can schedule it.
            self.queue.done(&qp.pod.uid);
            return true;
        };
        if let Some(group) = self.group_of(&qp.pod) {
            self.schedule_group(fw, qp, group);
            return true;
        }
        if let Some(message) = access::waiting_message(&qp.pod, &self.cluster.forbidden) {
            // Placed on a view without the kind, it could land where it cannot run
            // (or take devices or volumes someone else holds): it waits.
            self.services.metrics.observe_attempt(
                AttemptResult::Unschedulable,
                fw.scheduler_name(),
                Duration::ZERO,
            );
            let waiting = BTreeSet::from([access::LIST_ACCESS.to_owned()]);
            self.fail(qp, waiting, FailureReason::Unschedulable, message);
            return true;
        }
        let mut qp = qp;
        qp.pod.default_selector = self.default_selector(&qp.pod);
        let started = Instant::now();
        let started_at = self.services.clock.now();
        self.cluster.refresh_snapshot();
        let wpod = CyclePod::new(qp.pod.clone());
        match fw.schedule_pod(
            &wpod,
            &self.cluster.snapshot,
            &self.nominated,
            true,
            None,
            Some(Cycle {
                number: self.cycles,
                at: started_at,
            }),
        ) {
            ScheduleOutcome::Scheduled {
                node,
                state,
                batched,
                ..
            } => {
                if batched {
                    tracing::debug!(pod = %qp.pod.key(), %node, "placed from the batch of an earlier cycle");
                }
                self.services.metrics.observe_attempt(
                    AttemptResult::Scheduled,
                    fw.scheduler_name(),
                    started.elapsed(),
                );
                self.assume_and_permit(fw, qp, node, state, batched);
            }
            ScheduleOutcome::Unschedulable(fit, verdict) => {
                self.services.metrics.observe_attempt(
                    AttemptResult::Unschedulable,
                    fw.scheduler_name(),
                    started.elapsed(),
                );
                let mut qp = qp;
                let mut preemption = None;
                if let Some(v) = verdict {
                    let plugin = v.plugin;
                    self.services.metrics.count_preemption_attempt();
                    match v.nominated_node_name.as_deref() {
                        Some("") if !qp.pod.nominated_node_name.is_empty() => {
                            qp.pod.nominated_node_name.clear();
                            self.write_nomination(&qp.pod, "");
                        }
                        Some(node) if !node.is_empty() && v.status.is_success() => {
                            qp.pod.nominated_node_name = node.to_owned();
                            preemption = Some((node.to_owned(), v.victims, plugin));
                        }
                        _ => {}
                    }
                }
                let plugins = rejecting_plugins(&fit);
                let preemptor = qp.pod.clone();
                self.fail(qp, plugins, FailureReason::Unschedulable, fit.to_string());
                if let Some((node, victims, plugin)) = preemption {
                    self.preempt(&preemptor, &node, victims, &plugin);
                }
            }
            ScheduleOutcome::Error(e) => {
                self.services.metrics.observe_attempt(
                    AttemptResult::Error,
                    fw.scheduler_name(),
                    started.elapsed(),
                );
                self.fail(
                    qp,
                    BTreeSet::new(),
                    FailureReason::SchedulerError,
                    e.to_string(),
                );
            }
        }
        true
    }

    /// `batched`: the node came from a batch (see [`PodOutcome::batched`]).
    fn assume_and_permit(
        &mut self,
        fw: Arc<Framework>,
        qp: QueuedPod,
        node: String,
        state: CycleState,
        batched: bool,
    ) {
        let mut assumed = qp.pod.clone();
        assumed.node_name = node.clone();
        if let Err(e) = self.cluster.cache.assume_pod(&assumed) {
            self.fail(
                qp,
                BTreeSet::new(),
                FailureReason::SchedulerError,
                format!("cannot assume pod: {e}"),
            );
            return;
        }
        // Assumed on a node, it counts there, not on its nominated node.
        self.unnominate(&assumed.uid);
        let wassumed = CyclePod::new(assumed.clone());
        let permit = fw
            .reserve(&state, &wassumed, &node)
            .and_then(|()| fw.permit(&state, &wassumed, &node));
        let uid = assumed.uid.clone();
        match permit {
            Ok(PermitOutcome::Allow) => {
                self.bindings.binding.insert(
                    uid.clone(),
                    Binding {
                        qp,
                        assumed,
                        node,
                        state,
                        framework: fw,
                        batched,
                    },
                );
                self.start_binding(&uid);
            }
            Ok(PermitOutcome::Wait(plugins, timeout)) => {
                tracing::debug!(pod = %assumed.key(), %node, ?plugins, "waiting at Permit");
                let deadline = self.services.clock.now() + timeout;
                self.waiting.add(
                    &uid,
                    &assumed.namespace,
                    &assumed.name,
                    &node,
                    plugins,
                    deadline,
                );
                let message = format!("waiting at Permit on node {node}");
                self.set_outcome(&assumed, None, message, qp.attempts);
                self.bindings.binding.insert(
                    uid,
                    Binding {
                        qp,
                        assumed,
                        node,
                        state,
                        framework: fw,
                        batched,
                    },
                );
            }
            Err(e) => {
                fw.unreserve(&state, &wassumed, &node);
                let _ = self.cluster.cache.forget_pod(&uid);
                // A Permit rejection names its plugin, which an event may satisfy.
                let plugins = BTreeSet::from([e.plugin.clone()]);
                self.fail(qp, plugins, FailureReason::Unschedulable, e.to_string());
            }
        }
    }

    /// Decides the pods whose wait at Permit ended.
    fn resolve_waiting(&mut self, now: Duration) {
        for (uid, state) in self.waiting.take_decided(now) {
            match state {
                WaitState::Allowed => self.start_binding(&uid),
                WaitState::Rejected(plugin, message) => {
                    if let Some(b) = self.bindings.binding.remove(&uid) {
                        b.framework
                            .unreserve(&b.state, &CyclePod::new(b.assumed.clone()), &b.node);
                        let _ = self.cluster.cache.forget_pod(&uid);
                        let plugins = BTreeSet::from([plugin.clone()]);
                        self.fail(
                            b.qp,
                            plugins,
                            FailureReason::Unschedulable,
                            format!("rejected at Permit by {plugin}: {message}"),
                        );
                    }
                }
                WaitState::Waiting(_) => {}
            }
        }
    }

    fn fail(
        &mut self,
        qp: QueuedPod,
        plugins: BTreeSet<String>,
        reason: FailureReason,
        message: String,
    ) {
        let pod = qp.pod.clone();
        tracing::debug!(pod = %pod.key(), reason = reason.as_str(), "attempt failed: {message}");
        // Back in the queue, its nomination (if any) counts again.
        self.nominate(&pod);
        let attempts = qp.attempts;
        let now = self.services.clock.now();
        let went = self.queue.requeue_failed(
            qp,
            plugins,
            message.clone(),
            now,
            &Oracle(&self.profiles.frameworks),
        );
        match went {
            Some(_) => {
                self.services
                    .recorder
                    .failed(&pod.scheduler_name, &pod, reason, &message);
                self.set_outcome(&pod, None, message, attempts)
            }
            None => {
                self.outcomes.remove(&pod.uid);
            }
        }
    }

    /// Where each pending pod waits (for reports).
    pub fn queue_of(&self, uid: &str) -> Option<QueueName> {
        self.queue.queue_of(uid)
    }

    /// Whether nothing is in flight: no pod in a scheduling or binding cycle, none
    /// waiting at Permit.
    pub fn is_quiet(&self) -> bool {
        self.bindings.binding.is_empty()
            && self.bindings.doubtful.is_empty()
            && self.preemption.is_idle()
            && self.queue.in_flight().is_empty()
            && self.waiting.is_empty()
    }
}

/// The plugins that rejected an attempt no node fitted, which events may make change
/// their minds; a pod rejected by no plugin (no nodes at all) is retried on any event.
fn rejecting_plugins(fit: &crate::framework::FitError) -> BTreeSet<String> {
    let plugins: BTreeSet<String> = fit
        .diagnosis
        .unschedulable_plugins
        .iter()
        .cloned()
        .collect();
    if plugins.is_empty() {
        BTreeSet::from(["*".to_owned()])
    } else {
        plugins
    }
}

/// What a pod's outcome says once it is queued: pending, or held back at PreEnqueue.
fn enqueue_message(gate: &Gate) -> String {
    gate.as_ref().map_or("pending".to_owned(), |(_, m)| {
        format!("waiting at PreEnqueue: {m}")
    })
}
