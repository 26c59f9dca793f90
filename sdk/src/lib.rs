//! # berth-sdk
//!
//! Write a [Berth](https://example.invalid/berth) scheduler plugin in plain Rust. A
//! plugin is a type that implements [`Plugin`] and the traits of the extension points
//! it serves; one line exports it. Built for `wasm32-wasip2`, the crate becomes a
//! WebAssembly component the scheduler loads; built natively, the same code runs in
//! unit tests.
//!
//! ```
//! use berth_sdk::{CycleState, Filter, NodeInfo, Plugin, Pod, Status};
//!
//! /// Keeps pods off nodes labelled `maintenance=true`.
//! struct AvoidMaintenance;
//!
//! impl Plugin for AvoidMaintenance {
//!     const NAME: &'static str = "AvoidMaintenance";
//!     fn new(_args: serde_json::Value) -> Result<Self, String> {
//!         Ok(AvoidMaintenance)
//!     }
//! }
//!
//! impl Filter for AvoidMaintenance {
//!     fn filter(&self, _state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
//!         match node.node.labels.get("maintenance").map(String::as_str) {
//!             Some("true") => Status::unresolvable("node is under maintenance"),
//!             _ => Status::success(),
//!         }
//!     }
//! }
//!
//! berth_sdk::export_plugin!(AvoidMaintenance: filter);
//! # fn main() {}
//! ```
//!
//! The host keeps, inside each plugin instance, a replica of the nodes it works on
//! and sends only what changed, so `filter` and `score` see a `&NodeInfo` at no
//! cost and a batch over many nodes is one call into the sandbox.
//!
//! ## From crate to running plugin
//!
//! - **The crate**: `crate-type = ["cdylib", "rlib"]` and a dependency on
//!   `berth-sdk`; `berth plugin new NAME` writes one.
//! - **Test** with one table of [`testing::Case`]s: [`testing::check_all`] plays it
//!   natively in a unit test, [`check_component!`] plays it through the compiled
//!   component too and checks both answer the same.
//! - **Build**: `cargo build --target wasm32-wasip2 --release` makes
//!   `target/wasm32-wasip2/release/<crate>.wasm`, a component.
//! - **Check**: `berth plugin check <crate>.wasm` loads it as the scheduler would and
//!   makes a trial call.
//! - **Run**: name the file under `berth.modules` of a KubeSchedulerConfiguration and
//!   enable the plugin in a profile; `berth simulate --config FILE CLUSTER.yaml`.
//!
//! The [`guide`] has one example per extension point; the [`contract`] is the WIT
//! package every plugin, in any language, is built against.
#![deny(missing_docs)]

pub mod affinity;
pub mod args;
pub mod contract;
pub mod dra;
pub mod events;
pub mod guide;
pub mod helpers;
pub mod memo;
#[doc(hidden)]
pub mod node_list;
mod plugin;
pub mod points;
pub mod preemption;
pub mod quantity;
pub mod sign;
pub mod testing;
pub mod types;
pub mod validation;
pub mod volumes;
pub mod workload;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod guest;

pub use events::{
    ActionType, ClusterEvent, EventRegistration, EventResource, Object, QueueingHint,
};
pub use memo::{DomainCounts, DomainMemo, DomainTotals, NodePart};
pub use plugin::{
    Bind, CycleState, EnqueueExtensions, Filter, MemoryState, NormalizeScore, Permit, Plugin,
    PostBind, PreBind, PreEnqueue, PreFilter, PreFilterResult, PreScore, QueueSort, Registered,
    Reserve, Score, StateKey, StateStore, VTable,
};
pub use preemption::{
    Candidate, DryRun, NodeSimulation, NodeVictims, PodDisruptionBudget, PostFilter,
    PostFilterResult, PreFilterExtensions, SelectVictims, least_budget_violations,
};
pub use serde_json;
pub use sign::{Sign, SignFragment};
pub use types::{
    CPU, ClaimSource, Code, Container, ContainerExtendedResourceRequest, EPHEMERAL_STORAGE,
    ExtensionPoint, HostPort, ImageState, Labels, MEMORY, Node, NodeInfo, PODS, Pod,
    PodExtendedResourceClaimStatus, PodFeature, PodResourceClaim, PodResourceClaimStatus,
    PreemptionPolicy, ResourceList, ResourceRequirements, Resources, Status, Taint, TaintEffect,
    Toleration, TolerationOperator, VolumeMount, is_pod_level_resource,
};
pub use volumes::{
    ANNOTATION_BIND_COMPLETED, ANNOTATION_BOUND_BY_CONTROLLER, ANNOTATION_SELECTED_NODE,
    AccessMode, ClaimPhase, ClaimRef, CsiDriver, CsiNode, CsiNodeDriver, CsiStorageCapacity,
    NO_PROVISIONER, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSource, StorageClass,
    TopologySelectorTerm, Volume, VolumeBindingMode, VolumeMode, VolumePhase, VolumeSource,
};
pub use workload::{
    GroupSimulation, NormalizePlacementScore, PLACEMENT_NODES, Placement, PlacementFeasible,
    PlacementGenerate, PlacementProgress, PlacementScore, PodGroup, PodGroupAssignments,
    PodGroupPostFilter, PodGroupPostFilterResult, PodGroupPreemption, PodGroupState,
    ProposedAssignment, get_pod_group, get_pod_group_preemption, simulate_group,
};

/// The largest score a plugin's normalized score may have, as upstream's `MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;
/// The smallest normalized score.
pub const MIN_NODE_SCORE: i64 = 0;

/// Severity of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// Very detailed.
    Trace,
    /// Detailed.
    Debug,
    /// Normal.
    Info,
    /// Something looks wrong.
    Warn,
    /// Something failed.
    Error,
}

/// What a plugin can ask of the scheduler. In the sandbox the host answers through
/// WIT imports; natively (unit tests, native builds run by the host) whoever runs the
/// plugin scopes one to each call with [`with_native_host`] (or installs one for the
/// whole process with [`set_native_host`]).
pub trait HostApi: Send + Sync {
    /// Writes a log line.
    fn log(&self, level: LogLevel, message: &str);
    /// Binds a pod to a node.
    fn bind_pod(&self, pod: &Pod, node: &str) -> Result<(), String>;
    /// The labels of a namespace.
    fn namespace_labels(&self, namespace: &str) -> Option<Labels>;
    /// A kube-scheduler feature gate as the scheduler runs (see [`feature_gate`]).
    fn feature_gate(&self, name: &str) -> Option<bool> {
        let _ = name;
        None
    }
    /// The pods waiting at Permit.
    fn waiting_pods(&self) -> Vec<WaitingPod> {
        Vec::new()
    }
    /// Allows a waiting pod on behalf of a plugin.
    fn allow_waiting_pod(&self, uid: &str, plugin: &str) {
        let _ = (uid, plugin);
    }
    /// Rejects a waiting pod.
    fn reject_waiting_pod(&self, uid: &str, plugin: &str, message: &str) {
        let _ = (uid, plugin, message);
    }
    /// A PersistentVolumeClaim by namespace and name.
    fn persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<PersistentVolumeClaim> {
        let _ = (namespace, name);
        None
    }
    /// A PersistentVolume by name.
    fn persistent_volume(&self, name: &str) -> Option<PersistentVolume> {
        let _ = name;
        None
    }
    /// The PersistentVolumes of a StorageClass (the empty name: those of no class).
    fn persistent_volumes_of_class(&self, storage_class: &str) -> Vec<PersistentVolume> {
        let _ = storage_class;
        Vec::new()
    }
    /// A StorageClass by name.
    fn storage_class(&self, name: &str) -> Option<StorageClass> {
        let _ = name;
        None
    }
    /// A CSINode by name (the node's name).
    fn csi_node(&self, name: &str) -> Option<CsiNode> {
        let _ = name;
        None
    }
    /// A CSIDriver by name.
    fn csi_driver(&self, name: &str) -> Option<CsiDriver> {
        let _ = name;
        None
    }
    /// Assumes a volume bound to a claim (see [`assume_volume_bound`]).
    fn assume_volume_bound(&self, volume: &str, claim: &ClaimRef) -> Result<(), String> {
        let _ = (volume, claim);
        Err(NO_VOLUME_BINDING.into())
    }
    /// Assumes a claim's volume provisioned for a node (see [`assume_claim_provisioned`]).
    fn assume_claim_provisioned(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<(), String> {
        let _ = (namespace, name, node);
        Err(NO_VOLUME_BINDING.into())
    }
    /// Drops what was assumed of a volume.
    fn restore_volume(&self, name: &str) {
        let _ = name;
    }
    /// Drops what was assumed of a claim.
    fn restore_claim(&self, namespace: &str, name: &str) {
        let _ = (namespace, name);
    }
    /// Writes a volume's binding to a claim through the cluster.
    fn bind_volume(&self, volume: &str, claim: &ClaimRef) -> Result<(), String> {
        let _ = (volume, claim);
        Err(NO_VOLUME_BINDING.into())
    }
    /// Writes a claim's selected node through the cluster.
    fn select_node_for_claim(&self, namespace: &str, name: &str, node: &str) -> Result<(), String> {
        let _ = (namespace, name, node);
        Err(NO_VOLUME_BINDING.into())
    }
    /// The CSIStorageCapacities of a StorageClass.
    fn csi_storage_capacities_of_class(&self, storage_class: &str) -> Vec<CsiStorageCapacity> {
        let _ = storage_class;
        Vec::new()
    }
    /// The storage generation (see [`storage_generation`]).
    fn storage_generation(&self) -> u64 {
        0
    }
    /// Waits for a storage change (see [`wait_storage_change`]).
    fn wait_storage_change(&self, after: u64, timeout_ms: u64) -> (u64, u64) {
        let _ = after;
        (0, timeout_ms)
    }
    /// See [`dra::host::device_generation`].
    fn device_generation(&self) -> u64 {
        0
    }
    /// See [`dra::host::claim_generation`].
    fn claim_generation(&self) -> u64 {
        0
    }
    /// See [`dra::host::device_classes`].
    fn device_classes(&self) -> Vec<dra::DeviceClass> {
        Vec::new()
    }
    /// See [`dra::host::device_class`].
    fn device_class(&self, name: &str) -> Option<dra::DeviceClass> {
        let _ = name;
        None
    }
    /// See [`dra::host::resource_slices`].
    fn resource_slices(&self) -> Vec<dra::ResourceSlice> {
        Vec::new()
    }
    /// See [`dra::host::device_taint_rules`].
    fn device_taint_rules(&self) -> Vec<dra::DeviceTaintRule> {
        Vec::new()
    }
    /// See [`dra::host::resource_claim`].
    fn resource_claim(&self, namespace: &str, name: &str) -> Option<dra::ResourceClaim> {
        let _ = (namespace, name);
        None
    }
    /// See [`dra::host::allocated_resource_claims`].
    fn allocated_resource_claims(&self) -> Vec<dra::ResourceClaim> {
        Vec::new()
    }
    /// See [`dra::host::allocated_device_results`]: by default, the results of
    /// [`HostApi::allocated_resource_claims`].
    fn allocated_device_results(&self) -> Vec<(String, dra::DeviceRequestAllocationResult)> {
        dra::device_results_of(&self.allocated_resource_claims())
    }
    /// See [`dra::host::claim_allocation_pending`].
    fn claim_allocation_pending(&self, namespace: &str, name: &str) -> bool {
        let _ = (namespace, name);
        false
    }
    /// See [`dra::host::assume_resource_claim`].
    fn assume_resource_claim(&self, claim: &dra::ResourceClaim) -> Result<(), String> {
        let _ = claim;
        Err(NO_DRA.into())
    }
    /// See [`dra::host::restore_resource_claim`].
    fn restore_resource_claim(&self, namespace: &str, name: &str) {
        let _ = (namespace, name);
    }
    /// See [`dra::host::write_resource_claim_status`].
    fn write_resource_claim_status(
        &self,
        claim: &dra::ResourceClaim,
    ) -> Result<dra::ResourceClaim, String> {
        let _ = claim;
        Err(NO_DRA.into())
    }
    /// See [`dra::host::wait_claim_change`].
    fn wait_claim_change(&self, after: u64, timeout_ms: u64) -> (u64, u64) {
        let _ = after;
        (0, timeout_ms)
    }
    /// See [`dra::host::extended_resource_claim`].
    fn extended_resource_claim(
        &self,
        namespace: &str,
        pod_uid: &str,
    ) -> Option<dra::ResourceClaim> {
        let _ = (namespace, pod_uid);
        None
    }
    /// See [`dra::host::create_extended_resource_claim`].
    fn create_extended_resource_claim(
        &self,
        claim: &dra::ResourceClaim,
    ) -> Result<dra::ResourceClaim, String> {
        let _ = claim;
        Err(NO_DRA.into())
    }
    /// See [`dra::host::delete_extended_resource_claim`].
    fn delete_extended_resource_claim(&self, namespace: &str, name: &str) -> Result<(), String> {
        let _ = (namespace, name);
        Err(NO_DRA.into())
    }
    /// See [`dra::host::write_extended_resource_claim_status`].
    fn write_extended_resource_claim_status(
        &self,
        pod: &Pod,
        status: &PodExtendedResourceClaimStatus,
    ) -> Result<(), String> {
        let _ = (pod, status);
        Err(NO_DRA.into())
    }
    /// A PodGroup with its members counted (see [`get_pod_group`]).
    fn get_pod_group(&self, namespace: &str, name: &str) -> Option<PodGroupState> {
        let _ = (namespace, name);
        None
    }
    /// A PodGroup as preemption reads it (see [`get_pod_group_preemption`]).
    fn get_pod_group_preemption(&self, namespace: &str, name: &str) -> Option<PodGroupPreemption> {
        let _ = (namespace, name);
        None
    }
    /// The what-if of the PodGroupPostFilter call under way on this thread (see
    /// [`simulate_group`]).
    fn simulate_group(&self) -> Result<Box<dyn GroupSimulation>, Status> {
        Err(Status::error(
            "simulate_group is only available during PodGroupPostFilter",
        ))
    }
}

const NO_VOLUME_BINDING: &str = "volume binding needs the Berth host";
pub(crate) const NO_DRA: &str = "device allocation needs the Berth host";

/// A pod that a Permit plugin asked to wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingPod {
    /// UID.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node it is reserved on.
    pub node: String,
    /// The plugins that have not allowed it yet.
    pub pending_plugins: Vec<String>,
}

/// The pods waiting at Permit (for plugins that release pods in groups).
pub fn waiting_pods() -> Vec<WaitingPod> {
    #[cfg(target_arch = "wasm32")]
    return guest::waiting_pods();
    #[cfg(not(target_arch = "wasm32"))]
    native_host().map(|h| h.waiting_pods()).unwrap_or_default()
}

/// Allows a waiting pod on behalf of `plugin`; it binds once every plugin it waits for
/// has allowed it.
pub fn allow_waiting_pod(uid: &str, plugin: &str) {
    #[cfg(target_arch = "wasm32")]
    guest::allow_waiting_pod(uid, plugin);
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(h) = native_host() {
        h.allow_waiting_pod(uid, plugin);
    }
}

/// Rejects a waiting pod: it is unreserved and requeued.
pub fn reject_waiting_pod(uid: &str, plugin: &str, message: &str) {
    #[cfg(target_arch = "wasm32")]
    guest::reject_waiting_pod(uid, plugin, message);
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(h) = native_host() {
        h.reject_waiting_pod(uid, plugin, message);
    }
}

/// How many pods on the nodes a plugin sees have inter-pod affinity terms: what lets
/// a plugin skip walking every node when no pod anywhere has the terms it cares about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AffinityCounts {
    /// Pods with any pod affinity or anti-affinity term (upstream's
    /// `PodsWithAffinity`).
    pub with_affinity: usize,
    /// Pods with a required pod anti-affinity term (upstream's
    /// `PodsWithRequiredAntiAffinity`).
    pub with_required_anti_affinity: usize,
}

impl AffinityCounts {
    /// The counts of one node's pods.
    pub fn of(node: &NodeInfo) -> Self {
        let mut c = AffinityCounts::default();
        for p in &node.pods {
            let a = &p.affinity;
            if !a.pod_affinity.is_empty() || !a.pod_anti_affinity.is_empty() {
                c.with_affinity += 1;
            }
            if !a.pod_anti_affinity.required.is_empty() {
                c.with_required_anti_affinity += 1;
            }
        }
        c
    }

    /// Counts the pods of `node` in.
    pub fn add(&mut self, node: &NodeInfo) {
        let c = AffinityCounts::of(node);
        self.with_affinity += c.with_affinity;
        self.with_required_anti_affinity += c.with_required_anti_affinity;
    }

    /// Counts the pods of `node` out again.
    pub fn remove(&mut self, node: &NodeInfo) {
        let c = AffinityCounts::of(node);
        self.with_affinity = self.with_affinity.saturating_sub(c.with_affinity);
        self.with_required_anti_affinity = self
            .with_required_anti_affinity
            .saturating_sub(c.with_required_anti_affinity);
    }
}

/// The [`AffinityCounts`] over every node of the plugin's view, when it is kept: a
/// wasm plugin's replica keeps them, updating them as nodes change, so the answer
/// costs nothing per call. It counts the pods the replica holds, so it is useful only
/// to a plugin whose [`Plugin::WANTS_PODS`] is set. Natively, the host's view keeps
/// them during the PreFilter and PreScore calls it makes
/// ([`with_view_affinity_counts`]); `None` elsewhere, where a plugin walks the nodes
/// it is given.
pub fn replica_affinity_counts() -> Option<AffinityCounts> {
    #[cfg(target_arch = "wasm32")]
    return Some(guest::affinity_counts());
    #[cfg(not(target_arch = "wasm32"))]
    VIEW_AFFINITY.get()
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static VIEW_AFFINITY: std::cell::Cell<Option<AffinityCounts>> =
        const { std::cell::Cell::new(None) };
}

/// Runs `f` (a native PreFilter or PreScore over every node of a view) with `counts`,
/// the view's [`AffinityCounts`], answering [`replica_affinity_counts`] on this
/// thread. For hosts that run plugins natively.
#[cfg(not(target_arch = "wasm32"))]
pub fn with_view_affinity_counts<R>(counts: AffinityCounts, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<AffinityCounts>);
    impl Drop for Restore {
        fn drop(&mut self) {
            VIEW_AFFINITY.set(self.0);
        }
    }
    let _restore = Restore(VIEW_AFFINITY.replace(Some(counts)));
    f()
}

#[cfg(not(target_arch = "wasm32"))]
static NATIVE_HOST: std::sync::RwLock<Option<std::sync::Arc<dyn HostApi>>> =
    std::sync::RwLock::new(None);

/// Installs the host that native runs of plugins talk to when no call has a host of
/// its own ([`with_native_host`]): process-wide, for a plugin's own native tests.
#[cfg(not(target_arch = "wasm32"))]
pub fn set_native_host(host: std::sync::Arc<dyn HostApi>) {
    *NATIVE_HOST.write().unwrap_or_else(|e| e.into_inner()) = Some(host);
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static SCOPED_HOST: std::cell::RefCell<Option<std::sync::Arc<dyn HostApi>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` (a native call into a plugin) with `host` answering the plugin's host
/// calls on this thread. A host that runs several schedulers in one process (tests,
/// a what-if beside a live scheduler) scopes each plugin call to its own scheduler's
/// host this way, rather than sharing one process-wide.
#[cfg(not(target_arch = "wasm32"))]
pub fn with_native_host<R>(host: &std::sync::Arc<dyn HostApi>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<std::sync::Arc<dyn HostApi>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            SCOPED_HOST.with(|h| *h.borrow_mut() = before);
        }
    }
    let _restore = Restore(SCOPED_HOST.with(|h| h.borrow_mut().replace(host.clone())));
    f()
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn native_host() -> Option<std::sync::Arc<dyn HostApi>> {
    SCOPED_HOST.with(|h| h.borrow().clone()).or_else(|| {
        NATIVE_HOST
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    })
}

/// The CSIStorageCapacities of a StorageClass (what its provisioner can still make,
/// by topology); empty where the cluster serves none, or natively with no host.
pub fn csi_storage_capacities_of_class(storage_class: &str) -> Vec<CsiStorageCapacity> {
    #[cfg(target_arch = "wasm32")]
    return guest::csi_storage_capacities_of_class(storage_class);
    #[cfg(not(target_arch = "wasm32"))]
    native_host()
        .map(|h| h.csi_storage_capacities_of_class(storage_class))
        .unwrap_or_default()
}

/// Sends a line to the scheduler's log, tagged with the plugin's name. Natively, with
/// no host installed, it goes to standard error.
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    guest::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    match native_host() {
        Some(h) => h.log(level, message),
        None => eprintln!("{level:?}: {message}"),
    }
}

/// Binds a pod to a node through the cluster (the `pods/binding` subresource); what a
/// Bind plugin calls. Natively, with no host installed, it fails.
pub fn bind_pod(pod: &Pod, node: &str) -> Result<(), String> {
    #[cfg(target_arch = "wasm32")]
    return guest::bind_pod(pod, node);
    #[cfg(not(target_arch = "wasm32"))]
    match native_host() {
        Some(h) => h.bind_pod(pod, node),
        None => Err("bind_pod needs the Berth host".to_owned()),
    }
}

/// The labels of a namespace, for namespace selectors; `None` when the cluster has no
/// such namespace (or, natively, when no host is installed).
pub fn namespace_labels(namespace: &str) -> Option<Labels> {
    #[cfg(target_arch = "wasm32")]
    return guest::namespace_labels(namespace);
    #[cfg(not(target_arch = "wasm32"))]
    native_host().and_then(|h| h.namespace_labels(namespace))
}

/// The value of one of kube-scheduler 1.37's feature gates (`"DRAPartitionableDevices"`)
/// as the scheduler runs: the value `--feature-gates` set, else the value the host
/// behaves as with, else the gate's default. `None` for a name kube-scheduler does
/// not know, from a host older than WIT 0.9.4's, or natively with no host (a
/// plugin's own tests): then the plugin keeps kube-scheduler's default. The answer
/// does not change while the scheduler runs, so `Plugin::new` may read it once.
pub fn feature_gate(name: &str) -> Option<bool> {
    #[cfg(target_arch = "wasm32")]
    return guest::feature_gate(name);
    #[cfg(not(target_arch = "wasm32"))]
    native_host().and_then(|h| h.feature_gate(name))
}

/// A PersistentVolumeClaim of the cluster, by namespace and name; `None` when there
/// is none (or, natively, when no host is installed).
pub fn persistent_volume_claim(namespace: &str, name: &str) -> Option<PersistentVolumeClaim> {
    #[cfg(target_arch = "wasm32")]
    return guest::persistent_volume_claim(namespace, name);
    #[cfg(not(target_arch = "wasm32"))]
    native_host().and_then(|h| h.persistent_volume_claim(namespace, name))
}

/// A PersistentVolume of the cluster, by name.
pub fn persistent_volume(name: &str) -> Option<PersistentVolume> {
    #[cfg(target_arch = "wasm32")]
    return guest::persistent_volume(name);
    #[cfg(not(target_arch = "wasm32"))]
    native_host().and_then(|h| h.persistent_volume(name))
}

/// The PersistentVolumes whose `storageClassName` is `storage_class` (the empty name:
/// the volumes of no class), by name: the index VolumeBinding matches claims with.
pub fn persistent_volumes_of_class(storage_class: &str) -> Vec<PersistentVolume> {
    #[cfg(target_arch = "wasm32")]
    return guest::persistent_volumes_of_class(storage_class);
    #[cfg(not(target_arch = "wasm32"))]
    native_host()
        .map(|h| h.persistent_volumes_of_class(storage_class))
        .unwrap_or_default()
}

/// A StorageClass of the cluster, by name.
pub fn storage_class(name: &str) -> Option<StorageClass> {
    #[cfg(target_arch = "wasm32")]
    return guest::storage_class(name);
    #[cfg(not(target_arch = "wasm32"))]
    native_host().and_then(|h| h.storage_class(name))
}

/// The CSINode of a node, by the node's name.
pub fn csi_node(name: &str) -> Option<CsiNode> {
    #[cfg(target_arch = "wasm32")]
    return guest::csi_node(name);
    #[cfg(not(target_arch = "wasm32"))]
    native_host().and_then(|h| h.csi_node(name))
}

/// A CSIDriver of the cluster, by name.
pub fn csi_driver(name: &str) -> Option<CsiDriver> {
    #[cfg(target_arch = "wasm32")]
    return guest::csi_driver(name);
    #[cfg(not(target_arch = "wasm32"))]
    native_host().and_then(|h| h.csi_driver(name))
}

/// Assumes `volume` bound to `claim` in the host's view until the cluster's copy
/// changes or [`restore_volume`]: other cycles see it taken (its `claimRef` set). What
/// VolumeBinding's Reserve does; an error when the volume is unknown or taken.
pub fn assume_volume_bound(volume: &str, claim: &ClaimRef) -> Result<(), String> {
    #[cfg(target_arch = "wasm32")]
    return guest::assume_volume_bound(volume, claim);
    #[cfg(not(target_arch = "wasm32"))]
    match native_host() {
        Some(h) => h.assume_volume_bound(volume, claim),
        None => Err(NO_VOLUME_BINDING.into()),
    }
}

/// Assumes the claim annotated with the node its volume is to be provisioned for
/// ([`ANNOTATION_SELECTED_NODE`](volumes::ANNOTATION_SELECTED_NODE)), until the
/// cluster's copy changes or [`restore_claim`].
pub fn assume_claim_provisioned(namespace: &str, name: &str, node: &str) -> Result<(), String> {
    #[cfg(target_arch = "wasm32")]
    return guest::assume_claim_provisioned(namespace, name, node);
    #[cfg(not(target_arch = "wasm32"))]
    match native_host() {
        Some(h) => h.assume_claim_provisioned(namespace, name, node),
        None => Err(NO_VOLUME_BINDING.into()),
    }
}

/// Drops what was assumed of a volume: the cluster's copy shows again.
pub fn restore_volume(name: &str) {
    #[cfg(target_arch = "wasm32")]
    guest::restore_volume(name);
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(h) = native_host() {
        h.restore_volume(name);
    }
}

/// Drops what was assumed of a claim.
pub fn restore_claim(namespace: &str, name: &str) {
    #[cfg(target_arch = "wasm32")]
    guest::restore_claim(namespace, name);
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(h) = native_host() {
        h.restore_claim(namespace, name);
    }
}

/// Binding cycle only: writes `volume`'s `claimRef` through the cluster; the
/// PersistentVolume controller then binds the claim to it.
pub fn bind_volume(volume: &str, claim: &ClaimRef) -> Result<(), String> {
    #[cfg(target_arch = "wasm32")]
    return guest::bind_volume(volume, claim);
    #[cfg(not(target_arch = "wasm32"))]
    match native_host() {
        Some(h) => h.bind_volume(volume, claim),
        None => Err(NO_VOLUME_BINDING.into()),
    }
}

/// Binding cycle only: writes the claim's selected node through the cluster, which
/// then provisions a volume for it there.
pub fn select_node_for_claim(namespace: &str, name: &str, node: &str) -> Result<(), String> {
    #[cfg(target_arch = "wasm32")]
    return guest::select_node_for_claim(namespace, name, node);
    #[cfg(not(target_arch = "wasm32"))]
    match native_host() {
        Some(h) => h.select_node_for_claim(namespace, name, node),
        None => Err(NO_VOLUME_BINDING.into()),
    }
}

/// A number that grows whenever a storage object changes in the host's view.
pub fn storage_generation() -> u64 {
    #[cfg(target_arch = "wasm32")]
    return guest::storage_generation();
    #[cfg(not(target_arch = "wasm32"))]
    native_host().map(|h| h.storage_generation()).unwrap_or(0)
}

/// Binding cycle only: waits until the storage generation passes `after` or
/// `timeout_ms` pass; answers the generation then and the milliseconds waited. The
/// wait does not count against the plugin's call deadline.
pub fn wait_storage_change(after: u64, timeout_ms: u64) -> (u64, u64) {
    #[cfg(target_arch = "wasm32")]
    return guest::wait_storage_change(after, timeout_ms);
    #[cfg(not(target_arch = "wasm32"))]
    native_host()
        .map(|h| h.wait_storage_change(after, timeout_ms))
        .unwrap_or((0, timeout_ms))
}

/// Exports a plugin type as the component's plugin, naming the extension points it
/// implements: `export_plugin!(NodeResourcesFit: pre_filter, filter, score);`.
///
/// Names: `queueing_hint`, `pre_enqueue`, `queue_sort`, `pre_filter`,
/// `pre_filter_extensions`, `filter`, `post_filter`, `pre_score`, `score`,
/// `normalize_score`, `reserve`, `permit`, `pre_bind`, `bind`, `post_bind`. Natively
/// it only implements [`Registered`], so the host can run the same type in-process.
#[macro_export]
macro_rules! export_plugin {
    ($t:ty : $($ep:ident),* $(,)?) => {
        $crate::plugin_vtable!($t : $($ep),*);

        #[cfg(target_arch = "wasm32")]
        const _: () = {
            type __BerthExport = $crate::guest::Export<$t>;
            $crate::__export_scheduler_plugin_impl!(__BerthExport with_types_in $crate::guest::wit);

            // The plugin crate's version, in a custom section of the module, where
            // `berth plugin check` reads it without running anything.
            const __BERTH_VERSION: &str = env!("CARGO_PKG_VERSION");
            #[used]
            #[unsafe(link_section = "berth:plugin-version")]
            static __BERTH_PLUGIN_VERSION: [u8; __BERTH_VERSION.len()] =
                $crate::__version_bytes(__BERTH_VERSION);
        };
    };
}

/// The bytes of a version string as an array, for the custom section
/// [`export_plugin!`] writes.
#[doc(hidden)]
pub const fn __version_bytes<const N: usize>(version: &str) -> [u8; N] {
    let bytes = version.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

/// The name of the custom section in which [`export_plugin!`] records the plugin
/// crate's version (`CARGO_PKG_VERSION`), UTF-8.
pub const VERSION_SECTION: &str = "berth:plugin-version";
