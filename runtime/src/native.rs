//! Native twins of the built-in plugins: the same plugin crates the components are
//! built from, compiled into the host and run through their [`VTable`]. They serve the
//! wasm/native comparison of `berth bench` (and operators who trust the built-in
//! plugins and want them in-process). A native instance sees the snapshot's
//! `Arc<NodeInfo>`s directly: no replica copy, no boundary.

use crate::cache::Snapshot;
use crate::plugin::CycleState as HostState;
use crate::plugin::group_what_if;
use crate::plugin::waiting::WaitingPods;
use crate::plugin::{CallError, CyclePod, PluginCalls, Simulation, WhatIf};
use crate::wasm::module::FeatureGates;
use berth_cluster::storage::Storage;
use berth_cluster::{Binder, Namespaces};
use berth_sdk::node_list::NodeList;
use berth_sdk::points::{self, Replica};
use berth_sdk::{
    AffinityCounts, ClusterEvent, CycleState, HostApi, Labels, LogLevel, NodeInfo, Object, Pod,
    PostFilterResult, QueueingHint, Registered, StateStore, Status, VTable,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

fn missing_node(slot: u32) -> Status {
    Status::error(format!("node slot {slot} is not in the snapshot"))
}

/// Builds a twin's instance from its args, reaching a host.
type MakeTwin =
    fn(serde_json::Value, Option<Arc<dyn HostApi>>) -> Result<Box<dyn PluginCalls>, String>;

/// A native twin: what its component's metadata says, and how to build it.
#[derive(Clone, Copy)]
pub struct Twin {
    /// The plugin's name.
    pub name: &'static str,
    new: MakeTwin,
    /// The framework takes a plugin's points from its component; the tests compare
    /// the twin's own.
    points: fn() -> Vec<berth_sdk::ExtensionPoint>,
}

impl std::fmt::Debug for Twin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Twin").field("name", &self.name).finish()
    }
}

/// Why a native twin could not be built from its args.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    /// The args are not JSON.
    #[error("args are not JSON: {0}")]
    ArgsNotJson(#[source] serde_json::Error),
    /// The plugin refused them; its own words.
    #[error("{0}")]
    Refused(String),
}

impl Twin {
    /// Builds an instance from its args (JSON; empty is null) whose calls reach
    /// `host` (none: the process-wide one a plugin's own tests install, if any).
    pub fn instantiate(
        &self,
        args_json: &str,
        host: Option<Arc<dyn HostApi>>,
    ) -> Result<Box<dyn PluginCalls>, TwinError> {
        let args = if args_json.trim().is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(args_json).map_err(TwinError::ArgsNotJson)?
        };
        (self.new)(args, host).map_err(TwinError::Refused)
    }

    /// The extension points the plugin type implements (its table's), as its
    /// component's metadata lists them.
    pub fn extension_points(&self) -> Vec<berth_sdk::ExtensionPoint> {
        (self.points)()
    }
}

fn twin<T: Registered + Send>() -> Twin {
    Twin {
        name: T::NAME,
        new: |args, host| {
            // `new` reads its host too (the feature gates), as in a component.
            let plugin = match &host {
                Some(h) => berth_sdk::with_native_host(h, || T::new(args))?,
                None => T::new(args)?,
            };
            Ok(Box::new(NativeInstance {
                plugin,
                vtable: T::vtable(),
                view: View::default(),
                host,
            }))
        },
        points: || T::vtable().extension_points(),
    }
}

/// Every built-in plugin's native twin, by plugin name.
pub fn registry() -> HashMap<&'static str, Twin> {
    [
        twin::<default_binder::DefaultBinder>(),
        twin::<default_preemption::DefaultPreemption>(),
        twin::<dynamic_resources::DynamicResources>(),
        twin::<gang_scheduling::GangScheduling>(),
        twin::<image_locality::ImageLocality>(),
        twin::<inter_pod_affinity::InterPodAffinity>(),
        twin::<node_affinity::NodeAffinity>(),
        twin::<node_declared_features::NodeDeclaredFeatures>(),
        twin::<node_name::NodeName>(),
        twin::<node_ports::NodePorts>(),
        twin::<node_resources_balanced_allocation::BalancedAllocation>(),
        twin::<node_resources_fit::NodeResourcesFit>(),
        twin::<node_unschedulable::NodeUnschedulable>(),
        twin::<node_volume_limits::NodeVolumeLimits>(),
        twin::<pod_group_pods_count::PodGroupPodsCount>(),
        twin::<pod_topology_spread::PodTopologySpread>(),
        twin::<priority_sort::PrioritySort>(),
        twin::<scheduling_gates::SchedulingGates>(),
        twin::<taint_toleration::TaintToleration>(),
        twin::<topology_placement_generator::TopologyPlacementGenerator>(),
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

/// Runs `f` with the host's cycle state as the SDK's.
fn with_state<R>(state: &HostState, f: impl FnOnce(&CycleState) -> R) -> R {
    let store = Store(state);
    f(&CycleState::new(&store))
}

/// One native plugin instance: the plugin, its table of extension points, and its
/// view of the nodes.
struct NativeInstance<T> {
    plugin: T,
    vtable: VTable<T>,
    view: View,
    /// What the plugin's host calls reach: its scheduler's services, scoped to each
    /// call (see [`berth_sdk::with_native_host`]), so that two schedulers in one
    /// process never answer each other's plugins.
    host: Option<Arc<dyn HostApi>>,
}

impl<T> NativeInstance<T> {
    /// Runs a call into the plugin with its host answering on this thread.
    fn scoped<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.host {
            Some(h) => berth_sdk::with_native_host(h, f),
            None => f(),
        }
    }
}

/// A native instance's view of the nodes: the snapshot's shared node infos by slot
/// (with this cycle's nominated-pod overlays, if any).
#[derive(Default)]
struct View {
    nodes: Vec<Option<Arc<NodeInfo>>>,
    /// Every node of `nodes` in slot order, for PreFilter and PreScore; `set` tells
    /// it of every `Arc` it drops or replaces, before it does.
    all: std::cell::RefCell<NodeList>,
    /// The affinity counts of the pods in `nodes`.
    affinity: AffinityCounts,
    generation: Option<u64>,
    overlaid: Vec<u32>,
}

impl View {
    /// Points the view at the snapshot's node infos that changed since the last sync
    /// (shared, not copied), dropping last cycle's overlays.
    fn sync(&mut self, snapshot: &Snapshot) {
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
        self.all
            .get_mut()
            .set(slot as u32, info.as_ref().map(Arc::as_ptr));
        if let Some(new) = &info {
            self.affinity.add(new);
        }
        if let Some(old) = std::mem::replace(&mut self.nodes[slot], info) {
            self.affinity.remove(&old);
        }
    }

    /// Replaces some nodes, for this cycle only, with versions that count the pods
    /// nominated to them; the next sync puts the snapshot's back.
    fn sync_overlay(&mut self, overlays: &[(u32, &NodeInfo)]) {
        for (slot, info) in overlays {
            let mut copy = (*info).clone();
            // A what-if version: nothing computed from it may be kept.
            copy.stamp = 0;
            self.share_overlay(*slot, Arc::new(copy));
        }
    }

    /// Replaces a node, for this cycle only, with a what-if version other instances
    /// may hold too (its stamp 0); the next sync puts the snapshot's back.
    fn share_overlay(&mut self, slot: u32, overlay: Arc<NodeInfo>) {
        debug_assert_eq!(overlay.stamp, 0, "a what-if node carries no stamp");
        self.set(slot, Some(overlay));
        self.overlaid.push(slot);
    }
}

impl Replica for View {
    fn node(&self, slot: u32) -> Option<&NodeInfo> {
        self.nodes.get(slot as usize)?.as_deref()
    }

    fn missing(&self, slot: u32) -> Status {
        missing_node(slot)
    }

    /// Runs `f` over every node of the view, in slot order, with the view's affinity
    /// counts answering [`berth_sdk::replica_affinity_counts`].
    fn with_all<R>(&self, f: impl FnOnce(&[&NodeInfo]) -> R) -> R {
        let mut all = self.all.borrow_mut();
        all.refresh(self.nodes.iter().map(|n| n.as_ref().map(Arc::as_ptr)));
        // SAFETY: every pointer is into an `Arc` that `nodes` holds, and `set` (which
        // takes `&mut self`, so cannot run while this borrow lives) tells the list
        // before it drops or replaces one.
        let all = unsafe { all.nodes() };
        berth_sdk::with_view_affinity_counts(self.affinity, || f(all))
    }
}

/// Implements [`PluginCalls`] for a native twin: the calls of the table of extension
/// points ([`berth_sdk::for_each_extension_point!`]) run the SDK's dispatch of each
/// point (as the component does) on the view of the snapshot; beside the calls
/// written here.
macro_rules! native_calls {
    ( ( $($hand:tt)* )
      $( $gen:ident interface $iface:ident {
            points: [ $( $P:ident $pf:ident $pname:literal $pdoc:literal ),* ],
            also: [ $( $A:ident $af:ident $aname:literal $adoc:literal ),* ],
            calls: [ $( $kind:ident $body:tt ),* $(,)? ],
      } )*
    ) => {
        impl<T: Registered + Send> PluginCalls for NativeInstance<T> {
            $($hand)*
            $( $( native_calls!(@$kind $body); )* )*
        }
    };
    (@pod { $method:ident $label:literal $wit:ident $call:ident $getter:ident -> $ret:ty }) => {
        fn $method(&mut self, pod: &CyclePod) -> Result<$ret, CallError> {
            Ok(self.scoped(|| points::$method(&self.plugin, &self.vtable, pod.pod())))
        }
    };
    (@cycle { $method:ident $label:literal $wit:ident $call:ident $getter:ident
              ( $($arg:ident : $aty:ty),* ) -> $ret:ty $([len $larg:ident $what:literal])? }) => {
        fn $method(
            &mut self,
            state: &HostState,
            pod: &CyclePod,
            $($arg: &$aty),*
        ) -> Result<$ret, CallError> {
            Ok(self.scoped(|| with_state(state, |st| {
                points::$method(&self.plugin, &self.vtable, st, Some(pod.pod()), &self.view $(, $arg)*)
            })))
        }
    };
    (@dry { $method:ident $label:literal $wit:ident $call:ident $getter:ident
            ( $($arg:ident : $aty:ty),* ) -> $ret:ty }) => {
        fn $method(
            &mut self,
            state: &HostState,
            pod: &CyclePod,
            $($arg: $aty,)*
            mut dry: Box<dyn WhatIf>,
        ) -> (Box<dyn WhatIf>, Result<$ret, CallError>) {
            let lent = NativeDryRun(RefCell::new(&mut *dry));
            let r = self.scoped(|| with_state(state, |st| {
                points::$method(&self.plugin, &self.vtable, st, Some(pod.pod()), &self.view $(, $arg)*, &lent)
            }));
            (dry, Ok(r))
        }
    };
    (@group { $method:ident $label:literal $wit:ident $call:ident $getter:ident
              ( $($arg:ident : $aty:ty),* ) -> $ret:ty $([len $larg:ident $what:literal])? }) => {
        fn $method(
            &mut self,
            state: &HostState,
            group: &berth_sdk::PodGroup,
            $($arg: &$aty),*
        ) -> Result<$ret, CallError> {
            Ok(self.scoped(|| with_state(state, |st| {
                points::$method(&self.plugin, &self.vtable, st, group, &self.view $(, $arg)*)
            })))
        }
    };
}

berth_sdk::for_each_extension_point!(native_calls (
    fn sync(&mut self, snapshot: &Snapshot) -> Result<(), CallError> {
        self.view.sync(snapshot);
        Ok(())
    }

    fn sync_overlaid(
        &mut self,
        snapshot: &Snapshot,
        overlays: &[(u32, &NodeInfo)],
    ) -> Result<(), CallError> {
        self.view.sync(snapshot);
        self.view.sync_overlay(overlays);
        Ok(())
    }

    fn sync_overlaid_shared(
        &mut self,
        snapshot: &Snapshot,
        slot: u32,
        overlay: &Arc<NodeInfo>,
    ) -> Result<(), CallError> {
        self.view.sync(snapshot);
        self.view.share_overlay(slot, overlay.clone());
        Ok(())
    }

    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        berth_sdk::Plugin::only_for_pods_with(&self.plugin)
    }

    fn queueing_hint(
        &mut self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<Result<QueueingHint, String>, CallError> {
        Ok(self.scoped(|| points::queueing_hint(&self.plugin, &self.vtable, event, pod, old, new)))
    }

    fn pod_on_node(
        &mut self,
        add: bool,
        state: &HostState,
        pod: &CyclePod,
        other: &Pod,
        slot: u32,
    ) -> Result<Status, CallError> {
        Ok(self.scoped(|| with_state(state, |st| {
            points::pod_on_node(&self.plugin, &self.vtable, st, Some(pod.pod()), &self.view, add, other, slot)
        })))
    }

    fn post_filter(
        &mut self,
        state: &HostState,
        pod: &CyclePod,
        statuses: &[(u32, Status)],
        mut dry: Box<dyn WhatIf>,
    ) -> (Box<dyn WhatIf>, Result<PostFilterResult, CallError>) {
        let lent = NativeDryRun(RefCell::new(&mut *dry));
        let r = self.scoped(|| with_state(state, |st| {
            points::post_filter(&self.plugin, &self.vtable, st, Some(pod.pod()), &self.view, statuses, &lent)
        }));
        (dry, Ok(r))
    }
));

/// The what-if the host lends PostFilter as the SDK's [`berth_sdk::DryRun`], for
/// native PostFilter plugins.
struct NativeDryRun<'a>(RefCell<&'a mut dyn WhatIf>);

struct NativeSimulation<'a, 'b> {
    dry: &'b NativeDryRun<'a>,
    sim: Simulation,
}

impl berth_sdk::NodeSimulation for NativeSimulation<'_, '_> {
    fn remove_pod(&mut self, uid: &str) -> Status {
        self.dry.0.borrow_mut().remove_pod(&mut self.sim, uid)
    }
    fn add_pod(&mut self, uid: &str) -> Status {
        self.dry.0.borrow_mut().add_pod(&mut self.sim, uid)
    }
    fn fits(&mut self) -> Status {
        self.dry.0.borrow_mut().fits(&self.sim)
    }
}

impl berth_sdk::DryRun for NativeDryRun<'_> {
    fn pod_disruption_budgets(&self) -> Vec<berth_sdk::PodDisruptionBudget> {
        self.0.borrow().budgets()
    }
    fn simulate(&self, node: &str) -> Result<Box<dyn berth_sdk::NodeSimulation + '_>, Status> {
        let sim = self.0.borrow_mut().simulate(node)?;
        Ok(Box::new(NativeSimulation { dry: self, sim }))
    }
    fn select_victims_on_nodes(
        &self,
        nodes: &[&str],
    ) -> Option<Vec<Result<berth_sdk::NodeVictims, Status>>> {
        self.0.borrow_mut().select_victims_on_nodes(nodes)
    }
}

/// The what-if lent to a native PodGroupPostFilter call, as the SDK's
/// [`berth_sdk::GroupSimulation`]: the one lent to the calling thread.
struct NativeGroupSimulation;

impl berth_sdk::GroupSimulation for NativeGroupSimulation {
    fn pod_disruption_budgets(&self) -> Vec<berth_sdk::PodDisruptionBudget> {
        group_what_if::budgets()
    }
    fn remove_pod(&mut self, uid: &str) -> Status {
        group_what_if::status_of(group_what_if::ask(group_what_if::GroupAsk::Remove(
            uid.to_owned(),
        )))
    }
    fn add_pod(&mut self, uid: &str) -> Status {
        group_what_if::status_of(group_what_if::ask(group_what_if::GroupAsk::Add(
            uid.to_owned(),
        )))
    }
    fn schedule(&mut self) -> Result<Vec<berth_sdk::ProposedAssignment>, Status> {
        group_what_if::placed_of(group_what_if::ask(group_what_if::GroupAsk::Schedule))
    }
    fn fits(&mut self, assignments: &[berth_sdk::ProposedAssignment]) -> Status {
        group_what_if::status_of(group_what_if::ask(group_what_if::GroupAsk::Fits(
            assignments.to_vec(),
        )))
    }
}

/// What native plugins reach through the SDK's host API: the cluster's binder, the
/// namespaces, the pods waiting at Permit; one per instance set, made from its
/// services ([`NativeHost::of`]).
pub struct NativeHost {
    /// Where bindings go.
    pub binder: Arc<dyn Binder>,
    /// The namespaces' labels.
    pub namespaces: Namespaces,
    /// The pods waiting at Permit.
    pub waiting: WaitingPods,
    /// The storage objects.
    pub storage: Storage,
    /// The PodGroups and their members.
    pub pod_groups: berth_cluster::pod_groups::PodGroups,
    /// The dynamic resource allocation objects.
    pub dra: berth_cluster::dra::Dra,
    /// kube-scheduler's feature gates as the scheduler runs.
    pub gates: FeatureGates,
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
        self.binder.bind(pod, node).map_err(|e| e.to_string())
    }
    fn namespace_labels(&self, namespace: &str) -> Option<Labels> {
        self.namespaces.labels(namespace)
    }
    fn feature_gate(&self, name: &str) -> Option<bool> {
        self.gates.get(name)
    }
    fn waiting_pods(&self) -> Vec<berth_sdk::WaitingPod> {
        self.waiting.list()
    }
    fn get_pod_group(&self, namespace: &str, name: &str) -> Option<berth_sdk::PodGroupState> {
        self.pod_groups.state(namespace, name)
    }
    fn get_pod_group_preemption(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<berth_sdk::PodGroupPreemption> {
        self.pod_groups
            .get(namespace, name)
            .map(|g| berth_sdk::PodGroupPreemption {
                priority: g.priority,
                preemption_policy: g.preemption_policy,
                disruption_all: g.disruption_all,
            })
    }
    fn simulate_group(&self) -> Result<Box<dyn berth_sdk::GroupSimulation>, Status> {
        if !group_what_if::lent() {
            return Err(Status::error(
                "simulate_group is only available during PodGroupPostFilter",
            ));
        }
        Ok(Box::new(NativeGroupSimulation))
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
    fn csi_storage_capacities_of_class(&self, class: &str) -> Vec<berth_sdk::CsiStorageCapacity> {
        self.storage.capacities_of_class(class)
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
        self.storage
            .assume_volume_bound(volume, claim)
            .map_err(|e| e.to_string())
    }
    fn assume_claim_provisioned(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<(), String> {
        self.storage
            .assume_claim_provisioned(namespace, name, node)
            .map_err(|e| e.to_string())
    }
    fn restore_volume(&self, name: &str) {
        self.storage.restore_volume(name);
    }
    fn restore_claim(&self, namespace: &str, name: &str) {
        self.storage.restore_claim(namespace, name);
    }
    fn bind_volume(&self, volume: &str, claim: &berth_sdk::ClaimRef) -> Result<(), String> {
        self.binder
            .bind_volume(volume, claim)
            .map_err(|e| e.to_string())
    }
    fn select_node_for_claim(&self, namespace: &str, name: &str, node: &str) -> Result<(), String> {
        self.binder
            .select_node_for_claim(namespace, name, node)
            .map_err(|e| e.to_string())
    }
    fn storage_generation(&self) -> u64 {
        self.storage.generation()
    }
    fn wait_storage_change(&self, after: u64, timeout_ms: u64) -> (u64, u64) {
        // A native plugin's call has no cycle pod the host knows of: its waits end
        // on a change or the timeout only.
        let end =
            self.storage
                .wait_for_change(after, std::time::Duration::from_millis(timeout_ms), None);
        (
            end.generation,
            u64::try_from(end.waited.as_millis()).unwrap_or(u64::MAX),
        )
    }
    // The DRA calls. Native twins are Berth's own code: their calls have no per-call
    // scope (no extension point or pod the host checks), as the storage writes above.
    fn device_generation(&self) -> u64 {
        self.dra.device_generation()
    }
    fn claim_generation(&self) -> u64 {
        self.dra.claim_generation()
    }
    fn device_classes(&self) -> Vec<berth_sdk::dra::DeviceClass> {
        self.dra.classes().iter().map(|c| (**c).clone()).collect()
    }
    fn device_class(&self, name: &str) -> Option<berth_sdk::dra::DeviceClass> {
        self.dra.class(name).map(|c| (*c).clone())
    }
    fn resource_slices(&self) -> Vec<berth_sdk::dra::ResourceSlice> {
        self.dra.slices().iter().map(|s| (**s).clone()).collect()
    }
    fn device_taint_rules(&self) -> Vec<berth_sdk::dra::DeviceTaintRule> {
        self.dra
            .taint_rules()
            .iter()
            .map(|r| (**r).clone())
            .collect()
    }
    fn resource_claim(&self, namespace: &str, name: &str) -> Option<berth_sdk::dra::ResourceClaim> {
        self.dra.claim(namespace, name).map(|c| (*c).clone())
    }
    fn allocated_resource_claims(&self) -> Vec<berth_sdk::dra::ResourceClaim> {
        self.dra
            .allocated_claims()
            .iter()
            .map(|c| (**c).clone())
            .collect()
    }
    fn allocated_device_results(
        &self,
    ) -> Vec<(String, berth_sdk::dra::DeviceRequestAllocationResult)> {
        self.dra.allocated_device_results()
    }
    fn claim_allocation_pending(&self, namespace: &str, name: &str) -> bool {
        self.dra.allocation_pending(namespace, name)
    }
    fn assume_resource_claim(&self, claim: &berth_sdk::dra::ResourceClaim) -> Result<(), String> {
        self.dra
            .assume_claim(claim.clone())
            .map_err(|e| e.to_string())
    }
    fn restore_resource_claim(&self, namespace: &str, name: &str) {
        self.dra.restore_claim(namespace, name);
    }
    fn write_resource_claim_status(
        &self,
        claim: &berth_sdk::dra::ResourceClaim,
    ) -> Result<berth_sdk::dra::ResourceClaim, String> {
        let written = self
            .binder
            .write_claim_status(claim)
            .map_err(|e| e.to_string())?;
        // Shown at once, before the watch brings it.
        self.dra.assume_written(written.clone());
        Ok(written)
    }
    fn extended_resource_claim(
        &self,
        namespace: &str,
        pod_uid: &str,
    ) -> Option<berth_sdk::dra::ResourceClaim> {
        self.dra
            .extended_claim(namespace, pod_uid)
            .map(|c| (*c).clone())
    }
    fn create_extended_resource_claim(
        &self,
        claim: &berth_sdk::dra::ResourceClaim,
    ) -> Result<berth_sdk::dra::ResourceClaim, String> {
        let created = self
            .binder
            .create_extended_resource_claim(claim)
            .map_err(|e| e.to_string())?;
        self.dra.assume_written(created.clone());
        Ok(created)
    }
    fn delete_extended_resource_claim(&self, namespace: &str, name: &str) -> Result<(), String> {
        self.binder
            .delete_extended_resource_claim(namespace, name)
            .map_err(|e| e.to_string())?;
        self.dra.remove_claim(namespace, name);
        Ok(())
    }
    fn write_extended_resource_claim_status(
        &self,
        pod: &berth_sdk::Pod,
        status: &berth_sdk::PodExtendedResourceClaimStatus,
    ) -> Result<(), String> {
        self.binder
            .write_extended_resource_claim_status(&pod.namespace, &pod.name, &pod.uid, status)
            .map_err(|e| e.to_string())
    }
    fn wait_claim_change(&self, after: u64, timeout_ms: u64) -> (u64, u64) {
        // As wait_storage_change: no cycle pod, so a change or the timeout ends it.
        let end = self.dra.wait_for_claim_change(
            after,
            std::time::Duration::from_millis(timeout_ms),
            None,
        );
        (
            end.generation,
            u64::try_from(end.waited.as_millis()).unwrap_or(u64::MAX),
        )
    }
}

impl NativeHost {
    /// The host a native instance of an instance set with `services` talks to: its
    /// scheduler's cluster, views and waiting pods. When the set reaches no cluster
    /// (a trial instance), a host of the feature gates alone, so that a plugin reads
    /// the same gates as its component would; none when there are no gates either. A
    /// native twin is trusted: a scheduling set's instance reaches the binder a
    /// binding set's does.
    pub fn of(services: &crate::wasm::module::HostServices) -> Option<Arc<dyn HostApi>> {
        let Some(binder) = services
            .binder
            .clone()
            .or_else(|| services.claim_writer.clone())
        else {
            if services.gates == FeatureGates::default() {
                return None;
            }
            return Some(Arc::new(GatesOnly(services.gates.clone())));
        };
        Some(Arc::new(NativeHost {
            binder,
            namespaces: services.namespaces.clone(),
            waiting: services.waiting.clone(),
            storage: services.storage.clone(),
            pod_groups: services.pod_groups.clone(),
            dra: services.dra.clone(),
            gates: services.gates.clone(),
        }))
    }
}

/// The host of a native instance that reaches no cluster: it answers the feature
/// gates, and nothing else.
struct GatesOnly(FeatureGates);

impl HostApi for GatesOnly {
    fn log(&self, level: LogLevel, message: &str) {
        match level {
            LogLevel::Trace => tracing::trace!(native = true, "{message}"),
            LogLevel::Debug => tracing::debug!(native = true, "{message}"),
            LogLevel::Info => tracing::info!(native = true, "{message}"),
            LogLevel::Warn => tracing::warn!(native = true, "{message}"),
            LogLevel::Error => tracing::error!(native = true, "{message}"),
        }
    }
    fn bind_pod(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Err("a trial instance binds nothing".to_owned())
    }
    fn namespace_labels(&self, _namespace: &str) -> Option<Labels> {
        None
    }
    fn feature_gate(&self, name: &str) -> Option<bool> {
        self.0.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_cluster::dra::Dra;
    use berth_cluster::memory::MemoryCluster;
    use berth_sdk::dra::{AllocationResult, ConsumerReference, ResourceClaim};

    fn host(dra: &Dra) -> NativeHost {
        let cluster = MemoryCluster::new();
        cluster.attach_dra(dra);
        NativeHost {
            binder: Arc::new(cluster),
            namespaces: Namespaces::default(),
            waiting: WaitingPods::default(),
            storage: Storage::new(),
            pod_groups: berth_cluster::pod_groups::PodGroups::default(),
            dra: dra.clone(),
            gates: FeatureGates::default(),
        }
    }

    #[test]
    fn native_dra_calls_assume_write_and_restore_as_the_wasm_imports_do() {
        let dra = Dra::new();
        let h = host(&dra);
        let claim = ResourceClaim {
            namespace: "ns".into(),
            name: "gpu".into(),
            uid: "c1".into(),
            resource_version: "1".into(),
            ..ResourceClaim::default()
        };
        dra.set_claim(claim.clone());
        let mut wanted = claim.clone();
        wanted.status.allocation = Some(AllocationResult::default());
        wanted.status.reserved_for = vec![ConsumerReference::pod("p", "u1")];
        let g = h.claim_generation();
        h.assume_resource_claim(&wanted).unwrap();
        assert!(h.claim_generation() > g);
        assert!(h.claim_allocation_pending("ns", "gpu"));
        assert_eq!(h.allocated_resource_claims(), [wanted.clone()]);
        h.restore_resource_claim("ns", "gpu");
        assert!(!h.claim_allocation_pending("ns", "gpu"));
        assert!(h.allocated_resource_claims().is_empty());
        h.assume_resource_claim(&wanted).unwrap();
        let written = h.write_resource_claim_status(&wanted).unwrap();
        assert_eq!(written.resource_version, "2");
        assert_eq!(h.resource_claim("ns", "gpu"), Some(written));
        assert!(!h.claim_allocation_pending("ns", "gpu"));
        // From the version before: the cluster's conflict.
        assert!(h.write_resource_claim_status(&wanted).is_err());
        assert!(h.device_classes().is_empty() && h.resource_slices().is_empty());
        assert!(h.csi_storage_capacities_of_class("fast").is_empty());
    }
}
