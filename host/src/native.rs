//! Native twins of the built-in plugins: the same plugin crates the components are
//! built from, compiled into the host and run through their [`VTable`]. They serve the
//! wasm/native comparison of `berth bench` (and operators who trust the built-in
//! plugins and want them in-process). A native instance sees the snapshot's
//! `Arc<NodeInfo>`s directly: no replica copy, no boundary.

use crate::cache::Snapshot;
use crate::cluster::storage::Storage;
use crate::cluster::{Binder, Namespaces};
use crate::framework::cycle_state::CycleState as HostState;
use crate::framework::waiting::WaitingPods;
use berth_sdk::{
    AffinityCounts, ClusterEvent, CycleState, EventRegistration, ExtensionPoint, HostApi, Labels,
    LogLevel, NodeInfo, Object, Pod, PostFilterResult, PreFilterResult, QueueingHint, Registered,
    StateStore, Status, VTable,
};
use std::collections::HashMap;
use std::sync::Arc;

/// A plugin type behind one object-safe interface: the batch shapes of the WIT
/// exports, over nodes the caller looks up.
pub trait NativePlugin: Send {
    /// The plugin's name.
    fn name(&self) -> &'static str;
    /// The extension points it implements.
    fn extension_points(&self) -> Vec<ExtensionPoint>;
    /// QueueSort's key (`None` without QueueSort).
    fn sort_key(&self, pod: &Pod) -> Option<Vec<i64>>;
    /// PreEnqueue.
    fn pre_enqueue(&self, pod: &Pod) -> Status;
    /// A queueing hint (Queue without hints).
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String>;
    /// PreFilter over every node.
    fn pre_filter(&self, state: &CycleState, pod: &Pod, nodes: &[&NodeInfo]) -> PreFilterResult;
    /// PreFilterExtensions' AddPod (`add`) or RemovePod.
    fn pod_on_node(
        &self,
        add: bool,
        state: &CycleState,
        pod: &Pod,
        other: &Pod,
        node: &NodeInfo,
    ) -> Status;
    /// PostFilter.
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[(&NodeInfo, Status)],
        dry: &dyn berth_sdk::DryRun,
    ) -> PostFilterResult;
    /// Filter over `slots`: the slots that did not pass, with why.
    fn filter<'n>(
        &self,
        state: &CycleState,
        pod: &Pod,
        slots: &[u32],
        node: &dyn Fn(u32) -> Option<&'n NodeInfo>,
    ) -> Vec<(u32, Status)>;
    /// PreScore.
    fn pre_score(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        all: &[&NodeInfo],
    ) -> Status;
    /// Score over `slots`, in order.
    fn score<'n>(
        &self,
        state: &CycleState,
        pod: &Pod,
        slots: &[u32],
        node: &dyn Fn(u32) -> Option<&'n NodeInfo>,
    ) -> Result<Vec<i64>, Status>;
    /// NormalizeScore.
    fn normalize_score(&self, state: &CycleState, pod: &Pod, scores: &mut [i64]) -> Status;
    /// Reserve.
    fn reserve(&self, state: &CycleState, pod: &Pod, node: &str) -> Status;
    /// Unreserve.
    fn unreserve(&self, state: &CycleState, pod: &Pod, node: &str);
    /// Permit.
    fn permit(&self, state: &CycleState, pod: &Pod, node: &str) -> (Status, std::time::Duration);
    /// PreBind.
    fn pre_bind(&self, state: &CycleState, pod: &Pod, node: &str) -> Status;
    /// Bind.
    fn bind(&self, state: &CycleState, pod: &Pod, node: &str) -> Status;
    /// PostBind.
    fn post_bind(&self, state: &CycleState, pod: &Pod, node: &str);
}

fn not_implemented(point: &str) -> Status {
    Status::error(format!("plugin does not implement {point}"))
}

fn missing_node(slot: u32) -> Status {
    Status::error(format!("node slot {slot} is not in the snapshot"))
}

/// A plugin type and its table.
struct Native<T> {
    plugin: T,
    vtable: VTable<T>,
}

impl<T: Registered + Send> NativePlugin for Native<T> {
    fn name(&self) -> &'static str {
        T::NAME
    }
    fn extension_points(&self) -> Vec<ExtensionPoint> {
        self.vtable.extension_points()
    }
    fn sort_key(&self, pod: &Pod) -> Option<Vec<i64>> {
        self.vtable.sort_key.map(|f| f(&self.plugin, pod))
    }
    fn pre_enqueue(&self, pod: &Pod) -> Status {
        match self.vtable.pre_enqueue {
            Some(f) => f(&self.plugin, pod),
            None => not_implemented("preEnqueue"),
        }
    }
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match self.vtable.queueing_hint {
            Some(f) => f(&self.plugin, event, pod, old, new),
            None => Ok(QueueingHint::Queue),
        }
    }
    fn pre_filter(&self, state: &CycleState, pod: &Pod, nodes: &[&NodeInfo]) -> PreFilterResult {
        match self.vtable.pre_filter {
            Some(f) => f(&self.plugin, state, pod, nodes),
            None => not_implemented("preFilter").into(),
        }
    }
    fn pod_on_node(
        &self,
        add: bool,
        state: &CycleState,
        pod: &Pod,
        other: &Pod,
        node: &NodeInfo,
    ) -> Status {
        match self.vtable.pre_filter_extensions {
            Some((a, r)) => (if add { a } else { r })(&self.plugin, state, pod, other, node),
            None => not_implemented("preFilterExtensions"),
        }
    }
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[(&NodeInfo, Status)],
        dry: &dyn berth_sdk::DryRun,
    ) -> PostFilterResult {
        match self.vtable.post_filter {
            Some(f) => f(&self.plugin, state, pod, nodes, dry),
            None => not_implemented("postFilter").into(),
        }
    }
    fn filter<'n>(
        &self,
        state: &CycleState,
        pod: &Pod,
        slots: &[u32],
        node: &dyn Fn(u32) -> Option<&'n NodeInfo>,
    ) -> Vec<(u32, Status)> {
        let Some(f) = self.vtable.filter else {
            return slots
                .iter()
                .map(|&s| (s, not_implemented("filter")))
                .collect();
        };
        let mut out = Vec::new();
        for &slot in slots {
            let status = match node(slot) {
                Some(n) => f(&self.plugin, state, pod, n),
                None => missing_node(slot),
            };
            if !status.is_success() {
                out.push((slot, status));
            }
        }
        out
    }
    fn pre_score(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        all: &[&NodeInfo],
    ) -> Status {
        match self.vtable.pre_score {
            Some(f) => f(&self.plugin, state, pod, nodes, all),
            None => not_implemented("preScore"),
        }
    }
    fn score<'n>(
        &self,
        state: &CycleState,
        pod: &Pod,
        slots: &[u32],
        node: &dyn Fn(u32) -> Option<&'n NodeInfo>,
    ) -> Result<Vec<i64>, Status> {
        let Some(f) = self.vtable.score else {
            return Err(not_implemented("score"));
        };
        slots
            .iter()
            .map(|&slot| match node(slot) {
                Some(n) => f(&self.plugin, state, pod, n),
                None => Err(missing_node(slot)),
            })
            .collect()
    }
    fn normalize_score(&self, state: &CycleState, pod: &Pod, scores: &mut [i64]) -> Status {
        match self.vtable.normalize_score {
            Some(f) => f(&self.plugin, state, pod, scores),
            None => not_implemented("normalizeScore"),
        }
    }
    fn reserve(&self, state: &CycleState, pod: &Pod, node: &str) -> Status {
        match self.vtable.reserve {
            Some((f, _)) => f(&self.plugin, state, pod, node),
            None => not_implemented("reserve"),
        }
    }
    fn unreserve(&self, state: &CycleState, pod: &Pod, node: &str) {
        if let Some((_, f)) = self.vtable.reserve {
            f(&self.plugin, state, pod, node)
        }
    }
    fn permit(&self, state: &CycleState, pod: &Pod, node: &str) -> (Status, std::time::Duration) {
        match self.vtable.permit {
            Some(f) => f(&self.plugin, state, pod, node),
            None => (not_implemented("permit"), std::time::Duration::ZERO),
        }
    }
    fn pre_bind(&self, state: &CycleState, pod: &Pod, node: &str) -> Status {
        match self.vtable.pre_bind {
            Some(f) => f(&self.plugin, state, pod, node),
            None => not_implemented("preBind"),
        }
    }
    fn bind(&self, state: &CycleState, pod: &Pod, node: &str) -> Status {
        match self.vtable.bind {
            Some(f) => f(&self.plugin, state, pod, node),
            None => not_implemented("bind"),
        }
    }
    fn post_bind(&self, state: &CycleState, pod: &Pod, node: &str) {
        if let Some(f) = self.vtable.post_bind {
            f(&self.plugin, state, pod, node)
        }
    }
}

/// Builds a native instance of a plugin from its args.
pub type Constructor = fn(serde_json::Value) -> Result<Box<dyn NativePlugin>, String>;

fn construct<T: Registered + Send>(
    args: serde_json::Value,
) -> Result<Box<dyn NativePlugin>, String> {
    Ok(Box::new(Native {
        plugin: T::new(args)?,
        vtable: T::vtable(),
    }))
}

/// A native twin: what its component's metadata says, and how to build it.
#[derive(Clone, Copy)]
pub struct Twin {
    /// The plugin's name.
    pub name: &'static str,
    /// Whether it reads the pods of each node.
    pub wants_pods: bool,
    /// Its events (`None`: every event).
    pub events: fn() -> Option<Vec<EventRegistration>>,
    /// Builds an instance.
    pub new: Constructor,
}

impl std::fmt::Debug for Twin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Twin").field("name", &self.name).finish()
    }
}

fn twin<T: Registered + Send>() -> Twin {
    Twin {
        name: T::NAME,
        wants_pods: T::WANTS_PODS,
        events: T::events,
        new: construct::<T>,
    }
}

/// Every built-in plugin's native twin, by plugin name.
pub fn registry() -> HashMap<&'static str, Twin> {
    [
        twin::<default_binder::DefaultBinder>(),
        twin::<default_preemption::DefaultPreemption>(),
        twin::<image_locality::ImageLocality>(),
        twin::<inter_pod_affinity::InterPodAffinity>(),
        twin::<node_affinity::NodeAffinity>(),
        twin::<node_name::NodeName>(),
        twin::<node_ports::NodePorts>(),
        twin::<node_resources_balanced_allocation::BalancedAllocation>(),
        twin::<node_resources_fit::NodeResourcesFit>(),
        twin::<node_unschedulable::NodeUnschedulable>(),
        twin::<node_volume_limits::NodeVolumeLimits>(),
        twin::<pod_topology_spread::PodTopologySpread>(),
        twin::<priority_sort::PrioritySort>(),
        twin::<scheduling_gates::SchedulingGates>(),
        twin::<taint_toleration::TaintToleration>(),
        twin::<volume_binding::VolumeBinding>(),
        twin::<volume_restrictions::VolumeRestrictions>(),
        twin::<volume_zone::VolumeZone>(),
    ]
    .into_iter()
    .map(|t| (t.name, t))
    .collect()
}

/// The host's cycle state as the SDK's store.
struct Store<'a>(&'a HostState);

impl StateStore for Store<'_> {
    fn read(&self, key: &str) -> Option<Vec<u8>> {
        self.0.read(key)
    }
    fn write(&self, key: &str, value: &[u8]) {
        self.0.write(key, value.to_vec())
    }
    fn delete(&self, key: &str) {
        self.0.delete(key)
    }
}

/// One native plugin instance and its view of the nodes: the snapshot's shared node
/// infos by slot (with this cycle's nominated-pod overlays, if any).
pub struct NativeInstance {
    plugin: Box<dyn NativePlugin>,
    nodes: Vec<Option<Arc<NodeInfo>>>,
    /// Every node of `nodes` in slot order, for PreFilter and PreScore; empty when
    /// it must be rebuilt.
    all: AllNodes,
    /// The affinity counts of the pods in `nodes`.
    affinity: AffinityCounts,
    generation: Option<u64>,
    overlaid: Vec<u32>,
}

/// Pointers to the node infos of a [`NativeInstance`]'s view, in slot order.
#[derive(Default)]
struct AllNodes(std::cell::RefCell<Vec<*const NodeInfo>>);

// SAFETY: the pointers are into `Arc<NodeInfo>`s (which are `Send` and `Sync`) that
// the same instance owns; they move between threads only with it.
unsafe impl Send for AllNodes {}

impl std::fmt::Debug for NativeInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeInstance")
            .field("plugin", &self.plugin.name())
            .finish_non_exhaustive()
    }
}

impl NativeInstance {
    /// Builds an instance of a twin from its args (JSON; empty is null).
    pub fn new(twin: &Twin, args_json: &str) -> Result<Self, String> {
        let args = if args_json.trim().is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(args_json).map_err(|e| format!("args are not JSON: {e}"))?
        };
        Ok(NativeInstance {
            plugin: (twin.new)(args)?,
            nodes: Vec::new(),
            all: AllNodes::default(),
            affinity: AffinityCounts::default(),
            generation: None,
            overlaid: Vec::new(),
        })
    }

    /// The plugin's name.
    pub fn name(&self) -> &'static str {
        self.plugin.name()
    }

    /// Points the view at the snapshot's node infos that changed since the last sync
    /// (shared, not copied), dropping last cycle's overlays.
    pub fn sync(&mut self, snapshot: &Snapshot) {
        if self.generation == Some(snapshot.generation()) && self.overlaid.is_empty() {
            return;
        }
        if self.generation != Some(snapshot.generation()) {
            let (updated, removed) = snapshot.changes_since(self.generation);
            for (slot, _) in updated {
                self.set(slot, snapshot.shared(slot).cloned());
            }
            for slot in removed {
                self.set(slot, None);
            }
        }
        for slot in std::mem::take(&mut self.overlaid) {
            self.set(slot, snapshot.shared(slot).cloned());
        }
        self.generation = Some(snapshot.generation());
    }

    fn set(&mut self, slot: u32, info: Option<Arc<NodeInfo>>) {
        let slot = slot as usize;
        if self.nodes.len() <= slot {
            self.nodes.resize(slot + 1, None);
        }
        // Before the old info may be dropped: `all` points into it.
        self.all.0.get_mut().clear();
        if let Some(new) = &info {
            self.affinity.add(new);
        }
        if let Some(old) = std::mem::replace(&mut self.nodes[slot], info) {
            self.affinity.remove(&old);
        }
    }

    /// Replaces some nodes, for this cycle only, with versions that count the pods
    /// nominated to them; the next sync puts the snapshot's back.
    pub fn sync_overlay(&mut self, overlays: &[(u32, &NodeInfo)]) {
        for (slot, info) in overlays {
            self.set(*slot, Some(Arc::new((*info).clone())));
            self.overlaid.push(*slot);
        }
    }

    fn node(&self, slot: u32) -> Option<&NodeInfo> {
        self.nodes.get(slot as usize)?.as_deref()
    }

    /// Runs `f` over every node of the view, in slot order, with the view's affinity
    /// counts answering [`berth_sdk::replica_affinity_counts`].
    fn with_all<R>(&self, f: impl FnOnce(&[&NodeInfo]) -> R) -> R {
        let mut all = self.all.0.borrow_mut();
        if all.is_empty() {
            all.extend(self.nodes.iter().flatten().map(Arc::as_ptr));
        }
        // SAFETY: `*const NodeInfo` and `&NodeInfo` have the same layout; every
        // pointer is into an `Arc` that `nodes` holds, and `set` (which takes
        // `&mut self`, so cannot run while this borrow lives) clears the list before
        // it drops or replaces one.
        let all: &[&NodeInfo] =
            unsafe { std::slice::from_raw_parts(all.as_ptr().cast(), all.len()) };
        berth_sdk::with_view_affinity_counts(self.affinity, || f(all))
    }

    /// QueueSort's key.
    pub fn sort_key(&self, pod: &Pod) -> Vec<i64> {
        self.plugin
            .sort_key(pod)
            .unwrap_or_else(|| vec![-i64::from(pod.priority)])
    }

    /// The queueing hint for an event.
    pub fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        self.plugin.queueing_hint(event, pod, old, new)
    }

    /// PreEnqueue.
    pub fn pre_enqueue(&self, pod: &Pod) -> Status {
        self.plugin.pre_enqueue(pod)
    }

    /// PreFilter.
    pub fn pre_filter(&self, state: &HostState, pod: &Pod) -> PreFilterResult {
        let store = Store(state);
        self.with_all(|nodes| self.plugin.pre_filter(&CycleState::new(&store), pod, nodes))
    }

    /// PreFilterExtensions' AddPod (`add`) or RemovePod of `other` on the node in
    /// `slot`.
    pub fn pod_on_node(
        &self,
        add: bool,
        state: &HostState,
        pod: &Pod,
        other: &Pod,
        slot: u32,
    ) -> Status {
        let store = Store(state);
        match self.node(slot) {
            Some(node) => self
                .plugin
                .pod_on_node(add, &CycleState::new(&store), pod, other, node),
            None => missing_node(slot),
        }
    }

    /// PostFilter over every node's status (by slot), with the what-if API.
    pub fn post_filter(
        &self,
        state: &HostState,
        pod: &Pod,
        statuses: &[(u32, Status)],
        dry: &mut crate::framework::preemption::DryRun,
    ) -> PostFilterResult {
        let store = Store(state);
        let mut nodes = Vec::with_capacity(statuses.len());
        for (slot, status) in statuses {
            match self.node(*slot) {
                Some(n) => nodes.push((n, status.clone())),
                None => return missing_node(*slot).into(),
            }
        }
        let dry = crate::framework::preemption::NativeDryRun(std::cell::RefCell::new(dry));
        self.plugin
            .post_filter(&CycleState::new(&store), pod, &nodes, &dry)
    }

    /// Filter over many nodes; the nodes that did not pass.
    pub fn filter(&self, state: &HostState, pod: &Pod, slots: &[u32]) -> Vec<(u32, Status)> {
        let store = Store(state);
        self.plugin
            .filter(&CycleState::new(&store), pod, slots, &|s| self.node(s))
    }

    /// PreScore.
    pub fn pre_score(&self, state: &HostState, pod: &Pod, slots: &[u32]) -> Status {
        let store = Store(state);
        let mut nodes = Vec::with_capacity(slots.len());
        for &s in slots {
            match self.node(s) {
                Some(n) => nodes.push(n),
                None => return missing_node(s),
            }
        }
        self.with_all(|all| {
            self.plugin
                .pre_score(&CycleState::new(&store), pod, &nodes, all)
        })
    }

    /// Score over many nodes, in order.
    pub fn score(&self, state: &HostState, pod: &Pod, slots: &[u32]) -> Result<Vec<i64>, Status> {
        let store = Store(state);
        self.plugin
            .score(&CycleState::new(&store), pod, slots, &|s| self.node(s))
    }

    /// NormalizeScore.
    pub fn normalize_score(
        &self,
        state: &HostState,
        pod: &Pod,
        scores: &[i64],
    ) -> Result<Vec<i64>, Status> {
        let store = Store(state);
        let mut scores = scores.to_vec();
        let status = self
            .plugin
            .normalize_score(&CycleState::new(&store), pod, &mut scores);
        if status.is_success() {
            Ok(scores)
        } else {
            Err(status)
        }
    }

    /// Reserve.
    pub fn reserve(&self, state: &HostState, pod: &Pod, node: &str) -> Status {
        let store = Store(state);
        self.plugin.reserve(&CycleState::new(&store), pod, node)
    }

    /// Unreserve.
    pub fn unreserve(&self, state: &HostState, pod: &Pod, node: &str) {
        let store = Store(state);
        self.plugin.unreserve(&CycleState::new(&store), pod, node)
    }

    /// Permit.
    pub fn permit(
        &self,
        state: &HostState,
        pod: &Pod,
        node: &str,
    ) -> (Status, std::time::Duration) {
        let store = Store(state);
        self.plugin.permit(&CycleState::new(&store), pod, node)
    }

    /// PreBind.
    pub fn pre_bind(&self, state: &HostState, pod: &Pod, node: &str) -> Status {
        let store = Store(state);
        self.plugin.pre_bind(&CycleState::new(&store), pod, node)
    }

    /// Bind.
    pub fn bind(&self, state: &HostState, pod: &Pod, node: &str) -> Status {
        let store = Store(state);
        self.plugin.bind(&CycleState::new(&store), pod, node)
    }

    /// PostBind.
    pub fn post_bind(&self, state: &HostState, pod: &Pod, node: &str) {
        let store = Store(state);
        self.plugin.post_bind(&CycleState::new(&store), pod, node)
    }
}

/// What native plugins reach through the SDK's host API: the cluster's binder, the
/// namespaces, the pods waiting at Permit. Installed process-wide with
/// [`install_host`].
pub struct NativeHost {
    /// Where bindings go.
    pub binder: Arc<dyn Binder>,
    /// The namespaces' labels.
    pub namespaces: Namespaces,
    /// The pods waiting at Permit.
    pub waiting: WaitingPods,
    /// The storage objects.
    pub storage: Storage,
}

impl HostApi for NativeHost {
    fn log(&self, level: LogLevel, message: &str) {
        match level {
            LogLevel::Trace => tracing::trace!(native = true, "{message}"),
            LogLevel::Debug => tracing::debug!(native = true, "{message}"),
            LogLevel::Info => tracing::info!(native = true, "{message}"),
            LogLevel::Warn => tracing::warn!(native = true, "{message}"),
            LogLevel::Error => tracing::error!(native = true, "{message}"),
        }
    }
    fn bind_pod(&self, pod: &Pod, node: &str) -> Result<(), String> {
        self.binder.bind(pod, node)
    }
    fn namespace_labels(&self, namespace: &str) -> Option<Labels> {
        self.namespaces.labels(namespace)
    }
    fn waiting_pods(&self) -> Vec<berth_sdk::WaitingPod> {
        self.waiting
            .list()
            .into_iter()
            .map(|p| berth_sdk::WaitingPod {
                uid: p.uid,
                namespace: p.namespace,
                name: p.name,
                node: p.node,
                pending_plugins: p.pending_plugins,
            })
            .collect()
    }
    fn allow_waiting_pod(&self, uid: &str, plugin: &str) {
        self.waiting.allow(uid, plugin);
    }
    fn reject_waiting_pod(&self, uid: &str, plugin: &str, message: &str) {
        self.waiting.reject(uid, plugin, message);
    }
    fn persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<berth_sdk::PersistentVolumeClaim> {
        self.storage.claim(namespace, name)
    }
    fn persistent_volume(&self, name: &str) -> Option<berth_sdk::PersistentVolume> {
        self.storage.volume(name)
    }
    fn persistent_volumes_of_class(&self, class: &str) -> Vec<berth_sdk::PersistentVolume> {
        self.storage.volumes_of_class(class)
    }
    fn storage_class(&self, name: &str) -> Option<berth_sdk::StorageClass> {
        self.storage.class(name)
    }
    fn csi_node(&self, name: &str) -> Option<berth_sdk::CsiNode> {
        self.storage.csi_node(name)
    }
    fn csi_driver(&self, name: &str) -> Option<berth_sdk::CsiDriver> {
        self.storage.csi_driver(name)
    }
    fn assume_volume_bound(&self, volume: &str, claim: &berth_sdk::ClaimRef) -> Result<(), String> {
        self.storage.assume_volume_bound(volume, claim)
    }
    fn assume_claim_provisioned(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<(), String> {
        self.storage.assume_claim_provisioned(namespace, name, node)
    }
    fn restore_volume(&self, name: &str) {
        self.storage.restore_volume(name);
    }
    fn restore_claim(&self, namespace: &str, name: &str) {
        self.storage.restore_claim(namespace, name);
    }
    fn bind_volume(&self, volume: &str, claim: &berth_sdk::ClaimRef) -> Result<(), String> {
        self.binder.bind_volume(volume, claim)
    }
    fn select_node_for_claim(&self, namespace: &str, name: &str, node: &str) -> Result<(), String> {
        self.binder.select_node_for_claim(namespace, name, node)
    }
    fn storage_generation(&self) -> u64 {
        self.storage.generation()
    }
    fn wait_storage_change(&self, after: u64, timeout_ms: u64) -> (u64, u64) {
        let (generation, waited) = self
            .storage
            .wait_for_change(after, std::time::Duration::from_millis(timeout_ms));
        (
            generation,
            u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        )
    }
}

/// Installs the host API native plugins talk to. The SDK keeps one per process: the
/// last scheduler built with native plugins wins.
pub fn install_host(host: NativeHost) {
    berth_sdk::set_native_host(Arc::new(host));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_plugin_has_a_twin() {
        let reg = registry();
        for name in crate::framework::registry::builtin_plugins().keys() {
            assert!(reg.contains_key(name.as_str()), "no native twin for {name}");
        }
        let fit = NativeInstance::new(&reg["NodeResourcesFit"], "").unwrap();
        assert_eq!(fit.name(), "NodeResourcesFit");
        assert!(NativeInstance::new(&reg["NodeResourcesFit"], "{not json").is_err());
    }
}
