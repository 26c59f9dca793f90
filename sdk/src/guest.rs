//! The guest side: the WIT bindings, the node replica, and the forwarding from the
//! generated exports to a plugin's [`VTable`](crate::VTable). Compiled only for wasm.

use crate::plugin::{CycleState, Registered, StateStore, VTable};
use crate::points::{self, Replica};
use crate::types as sdk;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

#[doc(hidden)]
pub mod wit {
    wit_bindgen::generate!({
        path: "../wit",
        world: "berth:scheduler/scheduler-plugin",
        pub_export_macro: true,
        generate_all,
        features: ["workload-scheduling"],
        // The `workload` interface's kinds, each before an exported function uses it.
        generate_unused_types: true,
    });
}

use wit::berth::scheduler::host;
use wit::berth::scheduler::types as w;
use wit::berth::scheduler::workload as wl;
use wit::exports::berth::scheduler as ex;

/// The version of the WIT package this SDK was built against.
pub const WIT_VERSION: &str = "0.9.4";

/// One live plugin instance and its replica of the nodes, indexed by slot.
struct Instance<T> {
    plugin: T,
    vtable: VTable<T>,
    /// Boxed, so that walking every node (PreFilter, PreScore) reads pointers, not
    /// whole node infos.
    nodes: Vec<Option<Box<sdk::NodeInfo>>>,
    /// Every node of the replica in slot order, as PreFilter and PreScore hand them
    /// to the plugin; each pointer is into a box of `nodes`, and `sync_nodes` tells
    /// the list of every box it drops or replaces, before it does.
    all: RefCell<crate::node_list::NodeList>,
    /// The pod of the current cycle, decoded once when the host begins the cycle.
    pod: Option<sdk::Pod>,
}

impl<T> Replica for Instance<T> {
    fn node(&self, slot: u32) -> Option<&sdk::NodeInfo> {
        self.nodes.get(slot as usize).and_then(Option::as_deref)
    }

    fn missing(&self, slot: u32) -> sdk::Status {
        missing_node(slot)
    }

    fn with_all<R>(&self, f: impl FnOnce(&[&sdk::NodeInfo]) -> R) -> R {
        let mut all = self.all.borrow_mut();
        // A slot may have gained or lost its node since the last walk.
        all.refresh(
            self.nodes
                .iter()
                .map(|n| n.as_deref().map(|n| n as *const sdk::NodeInfo)),
        );
        // SAFETY: every pointer is into a box that `nodes` owns: boxes do not move
        // when `nodes` grows, and `sync_nodes` (which takes `&mut self`, so cannot run
        // while this borrow lives) tells the list before it drops or replaces one.
        f(unsafe { all.nodes() })
    }
}

thread_local! {
    // A component instance is single-threaded; the slot holds `Instance<T>`.
    static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    // The replica's affinity counts, apart from `INSTANCE` so that a plugin can read
    // them while it runs (with `INSTANCE` borrowed).
    static AFFINITY: Cell<crate::AffinityCounts> = const {
        Cell::new(crate::AffinityCounts {
            with_affinity: 0,
            with_required_anti_affinity: 0,
        })
    };
    // The last stamp the replica gave a node (`NodeInfo::stamp`).
    static LAST_STAMP: Cell<u64> = const { Cell::new(0) };
}

/// A stamp no node of this replica had before.
fn next_stamp() -> u64 {
    let s = LAST_STAMP.get() + 1;
    LAST_STAMP.set(s);
    s
}

/// The replica's affinity counts.
pub(crate) fn affinity_counts() -> crate::AffinityCounts {
    AFFINITY.get()
}

fn with_instance<T: Registered, R>(f: impl FnOnce(&mut Instance<T>) -> R) -> R {
    INSTANCE.with(|slot| {
        let mut slot = slot.borrow_mut();
        let inst = slot
            .as_mut()
            .and_then(|b| b.downcast_mut::<Instance<T>>())
            .expect("berth: the host called the plugin before configure");
        f(inst)
    })
}

/// The type the generated exports are implemented for; `export_plugin!` names it.
#[doc(hidden)]
pub struct Export<T>(PhantomData<T>);

/// The host's cycle-state resource as a [`StateStore`].
struct HostState<'a>(&'a host::CycleState);

impl StateStore for HostState<'_> {
    fn read(&self, key: &str) -> Option<Vec<u8>> {
        self.0.read(key)
    }
    fn write(&self, key: &str, value: &[u8]) {
        self.0.write(key, value)
    }
    fn delete(&self, key: &str) {
        self.0.delete(key)
    }
}

/// Sends a line to the scheduler's log, tagged with the plugin's name.
pub fn log(level: crate::LogLevel, message: &str) {
    let level = match level {
        crate::LogLevel::Trace => host::LogLevel::Trace,
        crate::LogLevel::Debug => host::LogLevel::Debug,
        crate::LogLevel::Info => host::LogLevel::Info,
        crate::LogLevel::Warn => host::LogLevel::Warn,
        crate::LogLevel::Error => host::LogLevel::Error,
    };
    host::log(level, message);
}

/// Binds a pod through the cluster's binding API.
pub fn bind_pod(pod: &sdk::Pod, node: &str) -> Result<(), String> {
    host::bind_pod(&pod.namespace, &pod.name, &pod.uid, node)
}

/// The pods waiting at Permit.
pub fn waiting_pods() -> Vec<crate::WaitingPod> {
    host::waiting_pods()
        .into_iter()
        .map(|p| crate::WaitingPod {
            uid: p.uid,
            namespace: p.namespace,
            name: p.name,
            node: p.node,
            pending_plugins: p.pending_plugins,
        })
        .collect()
}

/// A PodGroup with its members counted, if the cluster has it.
pub fn get_pod_group(namespace: &str, name: &str) -> Option<crate::PodGroupState> {
    wl::get_pod_group(namespace, name).map(|g| crate::PodGroupState {
        min_count: g.min_count,
        all_pods: g.all_pods,
        scheduled_pods: g.scheduled_pods,
    })
}

/// A PodGroup as preemption reads it, if the cluster has it.
pub fn get_pod_group_preemption(namespace: &str, name: &str) -> Option<crate::PodGroupPreemption> {
    wl::get_pod_group_preemption(namespace, name).map(|g| crate::PodGroupPreemption {
        priority: g.priority,
        preemption_policy: preemption_policy_from_wit(g.preemption_policy),
        disruption_all: g.disruption_all,
    })
}

/// The what-if of the PodGroupPostFilter call under way.
pub fn simulate_group() -> Result<Box<dyn crate::GroupSimulation>, sdk::Status> {
    match wl::simulate_group() {
        Ok(sim) => Ok(Box::new(HostGroupSimulation(sim))),
        Err(s) => Err(status_from_wit(s)),
    }
}

struct HostGroupSimulation(wl::GroupSimulation);

impl crate::GroupSimulation for HostGroupSimulation {
    fn pod_disruption_budgets(&self) -> Vec<crate::PodDisruptionBudget> {
        crate::DryRun::pod_disruption_budgets(&HostDryRun)
    }
    fn remove_pod(&mut self, uid: &str) -> sdk::Status {
        status_from_wit(self.0.remove_pod(uid))
    }
    fn add_pod(&mut self, uid: &str) -> sdk::Status {
        status_from_wit(self.0.add_pod(uid))
    }
    fn schedule(&mut self) -> Result<Vec<crate::ProposedAssignment>, sdk::Status> {
        match self.0.schedule() {
            Ok(a) => Ok(a
                .into_iter()
                .map(|a| crate::ProposedAssignment {
                    pod_uid: a.pod_uid,
                    node: a.node,
                })
                .collect()),
            Err(s) => Err(status_from_wit(s)),
        }
    }
    fn fits(&mut self, assignments: &[crate::ProposedAssignment]) -> sdk::Status {
        let a: Vec<wl::ProposedAssignment> = assignments
            .iter()
            .map(|a| wl::ProposedAssignment {
                pod_uid: a.pod_uid.clone(),
                node: a.node.clone(),
            })
            .collect();
        status_from_wit(self.0.fits(&a))
    }
}

/// Allows a waiting pod.
pub fn allow_waiting_pod(uid: &str, plugin: &str) {
    host::allow_waiting_pod(uid, plugin)
}

/// Rejects a waiting pod.
pub fn reject_waiting_pod(uid: &str, plugin: &str, message: &str) {
    host::reject_waiting_pod(uid, plugin, message)
}

/// A kube-scheduler feature gate as the host runs.
pub fn feature_gate(name: &str) -> Option<bool> {
    host::feature_gate(name)
}

/// The labels of a namespace, if the host knows it.
pub fn namespace_labels(namespace: &str) -> Option<sdk::Labels> {
    host::namespace_labels(namespace).map(|l| l.into_iter().collect())
}

/// A PersistentVolumeClaim, if the host has it.
pub fn persistent_volume_claim(
    namespace: &str,
    name: &str,
) -> Option<crate::PersistentVolumeClaim> {
    host::get_persistent_volume_claim(namespace, name).map(volumes::claim_from_wit)
}

/// A PersistentVolume, if the host has it.
pub fn persistent_volume(name: &str) -> Option<crate::PersistentVolume> {
    host::get_persistent_volume(name).map(volumes::volume_from_wit)
}

/// The PersistentVolumes of a class.
pub fn persistent_volumes_of_class(class: &str) -> Vec<crate::PersistentVolume> {
    host::persistent_volumes_of_class(class)
        .into_iter()
        .map(volumes::volume_from_wit)
        .collect()
}

/// A StorageClass, if the host has it.
pub fn storage_class(name: &str) -> Option<crate::StorageClass> {
    host::get_storage_class(name).map(volumes::class_from_wit)
}

/// A CSINode, if the host has it.
pub fn csi_node(name: &str) -> Option<crate::CsiNode> {
    host::get_csi_node(name).map(volumes::csi_node_from_wit)
}

/// A CSIDriver, if the host has it.
pub fn csi_driver(name: &str) -> Option<crate::CsiDriver> {
    host::get_csi_driver(name).map(volumes::csi_driver_from_wit)
}

fn claim_ref_to_wit(c: &crate::ClaimRef) -> w::ClaimRef {
    w::ClaimRef {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
        uid: c.uid.clone(),
    }
}

/// Assumes a volume bound to a claim in the host's view.
pub fn assume_volume_bound(volume: &str, claim: &crate::ClaimRef) -> Result<(), String> {
    host::assume_volume_bound(volume, &claim_ref_to_wit(claim))
}

/// Assumes a claim's volume provisioned for a node in the host's view.
pub fn assume_claim_provisioned(namespace: &str, name: &str, node: &str) -> Result<(), String> {
    host::assume_claim_provisioned(namespace, name, node)
}

/// Drops what was assumed of a volume.
pub fn restore_volume(name: &str) {
    host::restore_volume(name)
}

/// Drops what was assumed of a claim.
pub fn restore_claim(namespace: &str, name: &str) {
    host::restore_claim(namespace, name)
}

/// Writes a volume's binding through the cluster.
pub fn bind_volume(volume: &str, claim: &crate::ClaimRef) -> Result<(), String> {
    host::bind_volume(volume, &claim_ref_to_wit(claim))
}

/// Writes a claim's selected node through the cluster.
pub fn select_node_for_claim(namespace: &str, name: &str, node: &str) -> Result<(), String> {
    host::select_node_for_claim(namespace, name, node)
}

/// The host's storage generation.
pub fn storage_generation() -> u64 {
    host::storage_generation()
}

/// Waits for a storage change.
pub fn wait_storage_change(after: u64, timeout_ms: u64) -> (u64, u64) {
    host::wait_storage_change(after, timeout_ms)
}

/// The CSIStorageCapacities of a StorageClass.
pub fn csi_storage_capacities_of_class(class: &str) -> Vec<crate::CsiStorageCapacity> {
    host::csi_storage_capacities_of_class(class)
        .into_iter()
        .map(volumes::capacity_from_wit)
        .collect()
}

#[allow(
    dead_code,
    reason = "the shared conversions include the host's direction of each kind"
)]
pub(crate) mod dra;
use dra::node_term_from_wit;

/// The storage records of the WIT package as the SDK's types.
mod volumes {
    use super::{node_term_from_wit, selector_from_wit, w};
    use crate::volumes as v;

    fn access_mode(m: w::AccessMode) -> v::AccessMode {
        match m {
            w::AccessMode::ReadWriteOnce => v::AccessMode::ReadWriteOnce,
            w::AccessMode::ReadOnlyMany => v::AccessMode::ReadOnlyMany,
            w::AccessMode::ReadWriteMany => v::AccessMode::ReadWriteMany,
            w::AccessMode::ReadWriteOncePod => v::AccessMode::ReadWriteOncePod,
        }
    }

    fn volume_mode(m: w::VolumeMode) -> v::VolumeMode {
        match m {
            w::VolumeMode::Filesystem => v::VolumeMode::Filesystem,
            w::VolumeMode::Block => v::VolumeMode::Block,
        }
    }

    pub(super) fn pod_volume_from_wit(vol: w::Volume) -> v::Volume {
        let source = match vol.source {
            w::VolumeSource::PersistentVolumeClaim((claim_name, read_only)) => {
                v::VolumeSource::PersistentVolumeClaim {
                    claim_name,
                    read_only,
                }
            }
            w::VolumeSource::Ephemeral => v::VolumeSource::Ephemeral,
            w::VolumeSource::Csi(driver) => v::VolumeSource::Csi { driver },
            w::VolumeSource::GcePersistentDisk((pd_name, read_only)) => {
                v::VolumeSource::GcePersistentDisk { pd_name, read_only }
            }
            w::VolumeSource::AwsElasticBlockStore((volume_id, read_only)) => {
                v::VolumeSource::AwsElasticBlockStore {
                    volume_id,
                    read_only,
                }
            }
            w::VolumeSource::Iscsi((iqn, read_only)) => v::VolumeSource::Iscsi { iqn, read_only },
            w::VolumeSource::Rbd(r) => v::VolumeSource::Rbd {
                monitors: r.monitors,
                pool: r.pool,
                image: r.image,
                read_only: r.read_only,
            },
            w::VolumeSource::Other => v::VolumeSource::Other,
        };
        v::Volume {
            name: vol.name,
            source,
        }
    }

    pub(super) fn claim_from_wit(c: w::PersistentVolumeClaim) -> v::PersistentVolumeClaim {
        v::PersistentVolumeClaim {
            namespace: c.namespace,
            name: c.name,
            uid: c.uid,
            annotations: c.annotations.into_iter().collect(),
            controller_uid: c.controller_uid,
            storage_class_name: c.storage_class_name,
            volume_name: c.volume_name,
            access_modes: c.access_modes.into_iter().map(access_mode).collect(),
            requested_storage: c.requested_storage,
            selector: c.selector.map(selector_from_wit),
            volume_mode: volume_mode(c.volume_mode),
            phase: match c.phase {
                w::ClaimPhase::Pending => v::ClaimPhase::Pending,
                w::ClaimPhase::Bound => v::ClaimPhase::Bound,
                w::ClaimPhase::Lost => v::ClaimPhase::Lost,
            },
            terminating: c.terminating,
        }
    }

    pub(super) fn volume_from_wit(pv: w::PersistentVolume) -> v::PersistentVolume {
        v::PersistentVolume {
            name: pv.name,
            labels: pv.labels.into_iter().collect(),
            annotations: pv.annotations.into_iter().collect(),
            storage_class_name: pv.storage_class_name,
            capacity_storage: pv.capacity_storage,
            access_modes: pv.access_modes.into_iter().map(access_mode).collect(),
            volume_mode: volume_mode(pv.volume_mode),
            claim_ref: pv.claim_ref.map(|r| v::ClaimRef {
                namespace: r.namespace,
                name: r.name,
                uid: r.uid,
            }),
            node_affinity: pv
                .node_affinity
                .map(|terms| terms.into_iter().map(node_term_from_wit).collect()),
            phase: match pv.phase {
                w::VolumePhase::Pending => v::VolumePhase::Pending,
                w::VolumePhase::Available => v::VolumePhase::Available,
                w::VolumePhase::Bound => v::VolumePhase::Bound,
                w::VolumePhase::Released => v::VolumePhase::Released,
                w::VolumePhase::Failed => v::VolumePhase::Failed,
            },
            source: match pv.source {
                w::PersistentVolumeSource::Csi((driver, volume_handle)) => {
                    v::PersistentVolumeSource::Csi {
                        driver,
                        volume_handle,
                    }
                }
                w::PersistentVolumeSource::GcePersistentDisk(pd_name) => {
                    v::PersistentVolumeSource::GcePersistentDisk { pd_name }
                }
                w::PersistentVolumeSource::AwsElasticBlockStore(volume_id) => {
                    v::PersistentVolumeSource::AwsElasticBlockStore { volume_id }
                }
                w::PersistentVolumeSource::AzureDisk(disk_uri) => {
                    v::PersistentVolumeSource::AzureDisk { disk_uri }
                }
                w::PersistentVolumeSource::Cinder(volume_id) => {
                    v::PersistentVolumeSource::Cinder { volume_id }
                }
                w::PersistentVolumeSource::Other => v::PersistentVolumeSource::Other,
            },
            terminating: pv.terminating,
        }
    }

    pub(super) fn class_from_wit(c: w::StorageClass) -> v::StorageClass {
        v::StorageClass {
            name: c.name,
            provisioner: c.provisioner,
            volume_binding_mode: match c.volume_binding_mode {
                w::VolumeBindingMode::Immediate => v::VolumeBindingMode::Immediate,
                w::VolumeBindingMode::WaitForFirstConsumer => {
                    v::VolumeBindingMode::WaitForFirstConsumer
                }
            },
            allowed_topologies: c
                .allowed_topologies
                .into_iter()
                .map(|t| v::TopologySelectorTerm {
                    match_label_expressions: t.match_label_expressions,
                })
                .collect(),
            is_default: c.is_default,
        }
    }

    pub(super) fn csi_node_from_wit(n: w::CsiNode) -> v::CsiNode {
        v::CsiNode {
            name: n.name,
            drivers: n
                .drivers
                .into_iter()
                .map(|d| v::CsiNodeDriver {
                    name: d.name,
                    node_id: d.node_id,
                    topology_keys: d.topology_keys,
                    allocatable_count: d.allocatable_count,
                })
                .collect(),
            migrated_plugins: n.migrated_plugins,
        }
    }

    pub(super) fn csi_driver_from_wit(d: w::CsiDriver) -> v::CsiDriver {
        v::CsiDriver {
            name: d.name,
            attach_required: d.attach_required,
            storage_capacity: d.storage_capacity,
        }
    }

    pub(super) fn capacity_from_wit(c: w::CsiStorageCapacity) -> v::CsiStorageCapacity {
        v::CsiStorageCapacity {
            namespace: c.namespace,
            name: c.name,
            storage_class_name: c.storage_class_name,
            node_topology: c.node_topology.map(selector_from_wit),
            capacity: c.capacity,
            maximum_volume_size: c.maximum_volume_size,
        }
    }
}

impl<T: Registered> ex::plugin::Guest for Export<T> {
    fn info() -> w::PluginInfo {
        let mut points: Vec<w::ExtensionPoint> = T::vtable()
            .extension_points()
            .into_iter()
            .filter_map(point_to_wit)
            .collect();
        // Unreserve comes with Reserve; nothing else to add.
        points.dedup();
        w::PluginInfo {
            name: T::NAME.to_owned(),
            extension_points: points,
            wit_version: WIT_VERSION.to_owned(),
            wants_pods: T::WANTS_PODS,
            pre_filter_extensions: T::vtable().pre_filter_extensions.is_some(),
            events: T::events().map(|list| {
                list.into_iter()
                    .map(|r| w::EventRegistration {
                        event: event_to_wit(r.event),
                        has_hint: r.has_hint,
                    })
                    .collect()
            }),
        }
    }

    fn configure(args_json: String) -> Result<w::Configuration, String> {
        let args = if args_json.trim().is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&args_json).map_err(|e| format!("args are not JSON: {e}"))?
        };
        let plugin = T::new(args)?;
        let configuration = w::Configuration {
            only_for_pods_with: plugin
                .only_for_pods_with()
                .iter()
                .map(|f| match f {
                    sdk::PodFeature::Volumes => w::PodFeature::Volumes,
                    sdk::PodFeature::HostPorts => w::PodFeature::HostPorts,
                    sdk::PodFeature::NodeAffinity => w::PodFeature::NodeAffinity,
                    sdk::PodFeature::PodAffinity => w::PodFeature::PodAffinity,
                    sdk::PodFeature::TopologySpread => w::PodFeature::TopologySpread,
                    sdk::PodFeature::DefaultSelector => w::PodFeature::DefaultSelector,
                    sdk::PodFeature::ResourceClaims => w::PodFeature::ResourceClaims,
                })
                .collect(),
        };
        let inst = Instance {
            plugin,
            vtable: T::vtable(),
            nodes: Vec::new(),
            all: Default::default(),
            pod: None,
        };
        AFFINITY.set(crate::AffinityCounts::default());
        INSTANCE.with(|slot| *slot.borrow_mut() = Some(Box::new(inst)));
        Ok(configuration)
    }
}

impl<T: Registered> ex::replica::Guest for Export<T> {
    fn sync_nodes(
        updated: Vec<(u32, w::NodeInfo)>,
        changed: Vec<ex::replica::NodePodsChange>,
        removed: Vec<u32>,
        begin: Option<w::Pod>,
    ) {
        // Decoded before the replica is borrowed, as `begin_cycle` does.
        let begin = begin.map(pod_from_wit);
        with_instance::<T, _>(|inst| {
            if let Some(pod) = begin {
                inst.pod = Some(pod);
            }
            let mut counts = AFFINITY.get();
            for slot in removed {
                // Before the box is dropped: `all` points into it.
                inst.all.get_mut().set(slot, None);
                if let Some(old) = inst.nodes.get_mut(slot as usize).and_then(Option::take) {
                    counts.remove(&old);
                }
            }
            for (slot, info) in updated {
                let slot = slot as usize;
                if inst.nodes.len() <= slot {
                    inst.nodes.resize_with(slot + 1, || None);
                }
                let mut new = Box::new(node_info_from_wit(info));
                new.stamp = next_stamp();
                counts.add(&new);
                inst.all
                    .get_mut()
                    .set(slot as u32, Some(&*new as *const sdk::NodeInfo));
                if let Some(old) = inst.nodes[slot].replace(new) {
                    counts.remove(&old);
                }
            }
            for c in changed {
                let Some(node) = inst.nodes.get_mut(c.slot as usize).and_then(Option::as_mut)
                else {
                    // The host sends a change only for a node it sent before.
                    panic!(
                        "berth: a pods change for slot {}, which the replica does not hold",
                        c.slot
                    );
                };
                counts.remove(node);
                node.requested = resources_from_wit(c.requested);
                node.non_zero_requested = resources_from_wit(c.non_zero_requested);
                node.pod_count = c.pod_count;
                node.used_ports = c.used_ports.into_iter().map(port_from_wit).collect();
                node.apply_pods_change(&c.removed_pods, c.added_pods.into_iter().map(pod_from_wit));
                node.stamp = next_stamp();
                counts.add(node);
            }
            AFFINITY.set(counts);
        });
    }
}

impl<T: Registered> ex::cycle::Guest for Export<T> {
    fn begin_cycle(pod: w::Pod) {
        let pod = pod_from_wit(pod);
        with_instance::<T, _>(|inst| inst.pod = Some(pod));
    }
}

impl<T: Registered> ex::enqueue_extensions::Guest for Export<T> {
    fn hint(
        event: w::ClusterEvent,
        pod: w::Pod,
        old: Option<w::Object>,
        new: Option<w::Object>,
    ) -> Result<w::QueueingHint, String> {
        let event = event_from_wit(event);
        let pod = pod_from_wit(pod);
        let old = old.map(object_from_wit);
        let new = new.map(object_from_wit);
        with_instance::<T, _>(|inst| {
            points::queueing_hint(
                &inst.plugin,
                &inst.vtable,
                &event,
                &pod,
                old.as_ref(),
                new.as_ref(),
            )
        })
        .map(|h| match h {
            crate::QueueingHint::Queue => w::QueueingHint::Queue,
            crate::QueueingHint::QueueSkip => w::QueueingHint::QueueSkip,
        })
    }
}

fn event_to_wit(e: crate::ClusterEvent) -> w::ClusterEvent {
    w::ClusterEvent {
        resource: match e.resource {
            crate::EventResource::AssignedPod => w::EventResource::AssignedPod,
            crate::EventResource::UnscheduledPod => w::EventResource::UnscheduledPod,
            crate::EventResource::Node => w::EventResource::Node,
            crate::EventResource::Namespace => w::EventResource::Namespace,
            crate::EventResource::PersistentVolumeClaim => w::EventResource::PersistentVolumeClaim,
            crate::EventResource::PersistentVolume => w::EventResource::PersistentVolume,
            crate::EventResource::StorageClass => w::EventResource::StorageClass,
            crate::EventResource::CsiNode => w::EventResource::CsiNode,
            crate::EventResource::CsiDriver => w::EventResource::CsiDriver,
            crate::EventResource::CsiStorageCapacity => w::EventResource::CsiStorageCapacity,
            crate::EventResource::ResourceClaim => w::EventResource::ResourceClaim,
            crate::EventResource::ResourceSlice => w::EventResource::ResourceSlice,
            crate::EventResource::DeviceClass => w::EventResource::DeviceClass,
        },
        actions: w::ActionType::from_bits_retain(e.actions.0 as _),
    }
}

fn event_from_wit(e: w::ClusterEvent) -> crate::ClusterEvent {
    crate::ClusterEvent {
        resource: match e.resource {
            w::EventResource::AssignedPod => crate::EventResource::AssignedPod,
            w::EventResource::UnscheduledPod => crate::EventResource::UnscheduledPod,
            w::EventResource::Node => crate::EventResource::Node,
            w::EventResource::Namespace => crate::EventResource::Namespace,
            w::EventResource::PersistentVolumeClaim => crate::EventResource::PersistentVolumeClaim,
            w::EventResource::PersistentVolume => crate::EventResource::PersistentVolume,
            w::EventResource::StorageClass => crate::EventResource::StorageClass,
            w::EventResource::CsiNode => crate::EventResource::CsiNode,
            w::EventResource::CsiDriver => crate::EventResource::CsiDriver,
            w::EventResource::CsiStorageCapacity => crate::EventResource::CsiStorageCapacity,
            w::EventResource::ResourceClaim => crate::EventResource::ResourceClaim,
            w::EventResource::ResourceSlice => crate::EventResource::ResourceSlice,
            w::EventResource::DeviceClass => crate::EventResource::DeviceClass,
        },
        actions: crate::ActionType(e.actions.bits() as u32),
    }
}

fn object_from_wit(o: w::Object) -> crate::Object {
    match o {
        w::Object::Pod(p) => crate::Object::Pod(pod_from_wit(p)),
        w::Object::Node(n) => crate::Object::Node(node_from_wit(n)),
        w::Object::PersistentVolumeClaim(c) => {
            crate::Object::PersistentVolumeClaim(volumes::claim_from_wit(c))
        }
        w::Object::PersistentVolume(v) => {
            crate::Object::PersistentVolume(volumes::volume_from_wit(v))
        }
        w::Object::StorageClass(c) => crate::Object::StorageClass(volumes::class_from_wit(c)),
        w::Object::CsiNode(n) => crate::Object::CsiNode(volumes::csi_node_from_wit(n)),
        w::Object::CsiDriver(d) => crate::Object::CsiDriver(volumes::csi_driver_from_wit(d)),
        w::Object::CsiStorageCapacity(c) => {
            crate::Object::CsiStorageCapacity(volumes::capacity_from_wit(c))
        }
        w::Object::ResourceClaim(c) => crate::Object::ResourceClaim(dra::claim_from_wit(c)),
        w::Object::ResourceSlice(s) => crate::Object::ResourceSlice(dra::slice_from_wit(s)),
        w::Object::DeviceClass(c) => crate::Object::DeviceClass(dra::class_from_wit(c)),
    }
}

impl<T: Registered> ex::pre_filter_extensions::Guest for Export<T> {
    fn add_pod(state: &host::CycleState, pod: w::Pod, slot: u32) -> w::Status {
        pod_on_node::<T>(state, true, pod, slot)
    }

    fn remove_pod(state: &host::CycleState, pod: w::Pod, slot: u32) -> w::Status {
        pod_on_node::<T>(state, false, pod, slot)
    }
}

/// Runs AddPod (`add`) or RemovePod for the cycle's pod.
fn pod_on_node<T: Registered>(
    state: &host::CycleState,
    add: bool,
    other: w::Pod,
    slot: u32,
) -> w::Status {
    let other = pod_from_wit(other);
    let store = HostState(state);
    let state = CycleState::new(&store);
    with_instance::<T, _>(|inst| {
        points::pod_on_node(
            &inst.plugin,
            &inst.vtable,
            &state,
            inst.pod.as_ref(),
            &*inst,
            add,
            &other,
            slot,
        )
    })
    .into_wit()
}

/// The host's what-if API, as PostFilter sees it.
struct HostDryRun;

struct HostSimulation(host::NodeSimulation);

impl crate::NodeSimulation for HostSimulation {
    fn remove_pod(&mut self, uid: &str) -> sdk::Status {
        status_from_wit(self.0.remove_pod(uid))
    }
    fn add_pod(&mut self, uid: &str) -> sdk::Status {
        status_from_wit(self.0.add_pod(uid))
    }
    fn fits(&mut self) -> sdk::Status {
        status_from_wit(self.0.fits())
    }
}

impl crate::DryRun for HostDryRun {
    fn pod_disruption_budgets(&self) -> Vec<crate::PodDisruptionBudget> {
        host::pod_disruption_budgets()
            .into_iter()
            .map(|b| crate::PodDisruptionBudget {
                namespace: b.namespace,
                name: b.name,
                selector: b.selector.map(selector_from_wit),
                disruptions_allowed: b.disruptions_allowed,
                disrupted_pods: b.disrupted_pods.into_iter().collect(),
            })
            .collect()
    }

    fn simulate(&self, node: &str) -> Result<Box<dyn crate::NodeSimulation + '_>, sdk::Status> {
        match host::simulate(node) {
            Ok(sim) => Ok(Box::new(HostSimulation(sim))),
            Err(s) => Err(status_from_wit(s)),
        }
    }

    fn select_victims_on_nodes(
        &self,
        nodes: &[&str],
    ) -> Option<Vec<Result<crate::NodeVictims, sdk::Status>>> {
        let nodes: Vec<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
        let answers = wit::berth::scheduler::dry_run::select_victims_on_nodes(&nodes)?;
        Some(
            answers
                .into_iter()
                .map(|r| {
                    r.map(|v| crate::NodeVictims {
                        pods: v.pods,
                        pdb_violations: v.pdb_violations,
                    })
                    .map_err(status_from_wit)
                })
                .collect(),
        )
    }
}

impl<T: Registered> ex::post_filter::Guest for Export<T> {
    fn post_filter(
        state: &host::CycleState,
        statuses: Vec<ex::filter::NodeStatus>,
    ) -> ex::post_filter::PostFilterResult {
        let statuses: Vec<(u32, sdk::Status)> = statuses
            .into_iter()
            .map(|s| (s.slot, status_from_wit(s.status)))
            .collect();
        let store = HostState(state);
        let state = CycleState::new(&store);
        let r = with_instance::<T, _>(|inst| {
            points::post_filter(
                &inst.plugin,
                &inst.vtable,
                &state,
                inst.pod.as_ref(),
                &*inst,
                &statuses,
                &HostDryRun,
            )
        });
        ex::post_filter::PostFilterResult {
            status: status_to_wit(r.status),
            nominated_node_name: r.nominated_node_name,
            victims: r.victims,
            candidates: r
                .candidates
                .into_iter()
                .map(|c| ex::post_filter::Candidate {
                    node: c.node,
                    victims: c.victims,
                    pdb_violations: c.pdb_violations,
                })
                .collect(),
        }
    }
}

fn missing_node(slot: u32) -> sdk::Status {
    sdk::Status::error(format!("node slot {slot} is not in the plugin's replica"))
}

/// The exports of the table's generated and optional interfaces (see
/// [`crate::points`]), and the extension points' WIT names.
macro_rules! guest_exports {
    ( ()
      $( $gen:ident interface $iface:ident {
            points: [ $( $P:ident $pf:ident $pname:literal $pdoc:literal ),* ],
            also: [ $( $A:ident $af:ident $aname:literal $adoc:literal ),* ],
            calls: [ $( $kind:ident $body:tt ),* $(,)? ],
      } )*
    ) => {
        $( guest_exports!(@interface $gen $iface [ $( $kind $body )* ] [ $( $P )* $( $A )* ]); )*

        /// The point in WIT 0.7.0's `extension-point` enum, which `plugin.info`
        /// lists; `None` for the points of optional interfaces, which their own
        /// `implemented` lists.
        fn point_to_wit(p: sdk::ExtensionPoint) -> Option<w::ExtensionPoint> {
            $( guest_exports!(@enum $gen p [ $( $P )* $( $A )* ]); )*
            None
        }
    };
    (@enum optional $p:ident [ $( $P:ident )* ]) => {};
    (@enum $gen:ident $p:ident [ $( $P:ident )* ]) => {
        $( if $p == sdk::ExtensionPoint::$P {
            return Some(w::ExtensionPoint::$P);
        } )*
    };
    (@interface hand $iface:ident [ $($calls:tt)* ] [ $( $P:ident )* ]) => {};
    (@interface generated $iface:ident [ $( $kind:ident $body:tt )* ] [ $( $P:ident )* ]) => {
        impl<T: Registered> ex::$iface::Guest for Export<T> {
            $( guest_exports!(@$kind $body); )*
        }
    };
    (@interface optional $iface:ident [ $( $kind:ident $body:tt )* ] [ $( $P:ident )* ]) => {
        impl<T: Registered> ex::$iface::Guest for Export<T> {
            fn implemented() -> Vec<String> {
                let mine = [ $( sdk::ExtensionPoint::$P ),* ];
                T::vtable()
                    .extension_points()
                    .into_iter()
                    .filter(|p| mine.contains(p))
                    .map(|p| p.as_str().to_owned())
                    .collect()
            }
            $( guest_exports!(@$kind $body); )*
        }
    };
    (@pod { $method:ident $label:literal $wit:ident $call:ident $getter:ident -> $ret:ty }) => {
        fn $wit(pod: w::Pod) -> <$ret as IntoWit>::Wit {
            let pod = pod_from_wit(pod);
            with_instance::<T, _>(|inst| points::$method(&inst.plugin, &inst.vtable, &pod))
                .into_wit()
        }
    };
    (@cycle { $method:ident $label:literal $wit:ident $call:ident $getter:ident
              ( $($arg:ident : $aty:ty),* ) -> $ret:ty $([len $larg:ident $what:literal])? }) => {
        fn $wit(state: &host::CycleState $(, $arg: <$aty as ToOwned>::Owned)*) -> <$ret as IntoWit>::Wit {
            let store = HostState(state);
            let state = CycleState::new(&store);
            // The type's table, not the instance's copy: a constant, so the compiler
            // calls (and may inline) the plugin's function directly in the loop over
            // the nodes.
            with_instance::<T, _>(|inst| {
                points::$method(&inst.plugin, &T::vtable(), &state, inst.pod.as_ref(), &*inst $(, &$arg)*)
            })
            .into_wit()
        }
    };
    (@dry { $method:ident $label:literal $wit:ident $call:ident $getter:ident
            ( $($arg:ident : $aty:ty),* ) -> $ret:ty }) => {
        fn $wit(state: &host::CycleState $(, $arg: $aty)*) -> <$ret as IntoWit>::Wit {
            let store = HostState(state);
            let state = CycleState::new(&store);
            with_instance::<T, _>(|inst| {
                points::$method(
                    &inst.plugin,
                    &inst.vtable,
                    &state,
                    inst.pod.as_ref(),
                    &*inst
                    $(, $arg)*,
                    &HostDryRun,
                )
            })
            .into_wit()
        }
    };
    (@group { $method:ident $label:literal $wit:ident $call:ident $getter:ident
              ( $($arg:ident : $aty:ty),* ) -> $ret:ty $([len $larg:ident $what:literal])? }) => {
        fn $wit(
            state: &host::CycleState,
            group: wl::PodGroup
            $(, $arg: <$aty as FromWitArg>::Wit)*
        ) -> <$ret as IntoWit>::Wit {
            let store = HostState(state);
            let state = CycleState::new(&store);
            let group = <crate::PodGroup as FromWitArg>::from_wit_arg(group);
            $( let $arg = <$aty as FromWitArg>::from_wit_arg($arg); )*
            with_instance::<T, _>(|inst| {
                points::$method(&inst.plugin, &inst.vtable, &state, &group, &*inst $(, &$arg)*)
            })
            .into_wit()
        }
    };
}

crate::for_each_extension_point!(guest_exports);

/// An SDK answer as the WIT record the host reads.
pub trait IntoWit {
    /// The WIT record.
    type Wit;
    /// Converts.
    fn into_wit(self) -> Self::Wit;
}

impl IntoWit for sdk::Status {
    type Wit = w::Status;
    fn into_wit(self) -> w::Status {
        status_to_wit(self)
    }
}

impl IntoWit for () {
    type Wit = ();
    fn into_wit(self) {}
}

impl IntoWit for Vec<i64> {
    type Wit = Vec<i64>;
    fn into_wit(self) -> Vec<i64> {
        self
    }
}

impl IntoWit for Result<Vec<i64>, sdk::Status> {
    type Wit = Result<Vec<i64>, w::Status>;
    fn into_wit(self) -> Self::Wit {
        self.map_err(status_to_wit)
    }
}

impl IntoWit for Result<Vec<crate::SignFragment>, sdk::Status> {
    type Wit = Result<Vec<ex::sign::SignFragment>, w::Status>;
    fn into_wit(self) -> Self::Wit {
        self.map(|fragments| {
            fragments
                .into_iter()
                .map(|f| ex::sign::SignFragment {
                    key: f.key,
                    value: f.value,
                })
                .collect()
        })
        .map_err(status_to_wit)
    }
}

impl IntoWit for Result<crate::NodeVictims, sdk::Status> {
    type Wit = Result<wit::berth::scheduler::dry_run::Victims, w::Status>;
    fn into_wit(self) -> Self::Wit {
        self.map(|v| wit::berth::scheduler::dry_run::Victims {
            pods: v.pods,
            pdb_violations: v.pdb_violations,
        })
        .map_err(status_to_wit)
    }
}

impl IntoWit for Result<i64, sdk::Status> {
    type Wit = Result<i64, w::Status>;
    fn into_wit(self) -> Self::Wit {
        self.map_err(status_to_wit)
    }
}

/// An argument of a `group` call as the guest receives it, and as the SDK's
/// functions take it (by reference to the owned value).
pub trait FromWitArg: ToOwned {
    /// The WIT value.
    type Wit;
    /// Converts.
    fn from_wit_arg(w: Self::Wit) -> Self::Owned;
}

impl FromWitArg for [i64] {
    type Wit = Vec<i64>;
    fn from_wit_arg(w: Vec<i64>) -> Vec<i64> {
        w
    }
}

impl FromWitArg for crate::PodGroupAssignments {
    type Wit = wl::PodGroupAssignments;
    fn from_wit_arg(a: wl::PodGroupAssignments) -> crate::PodGroupAssignments {
        crate::PodGroupAssignments {
            placement: crate::Placement {
                name: a.placement.name,
                nodes: a.placement.nodes,
            },
            assignments: a
                .assignments
                .into_iter()
                .map(|p| crate::ProposedAssignment {
                    pod_uid: p.pod_uid,
                    node: p.node,
                })
                .collect(),
        }
    }
}

impl FromWitArg for crate::Placement {
    type Wit = wl::Placement;
    fn from_wit_arg(p: wl::Placement) -> crate::Placement {
        crate::Placement {
            name: p.name,
            nodes: p.nodes,
        }
    }
}

impl IntoWit for Result<Vec<crate::Placement>, sdk::Status> {
    type Wit = Result<Vec<wl::Placement>, w::Status>;
    fn into_wit(self) -> Self::Wit {
        self.map(|ps| {
            ps.into_iter()
                .map(|p| wl::Placement {
                    name: p.name,
                    nodes: p.nodes,
                })
                .collect()
        })
        .map_err(status_to_wit)
    }
}

impl FromWitArg for crate::PlacementProgress {
    type Wit = wl::PlacementProgress;
    fn from_wit_arg(p: wl::PlacementProgress) -> crate::PlacementProgress {
        crate::PlacementProgress {
            scheduled: p.scheduled,
            remaining: p.remaining,
        }
    }
}

impl IntoWit for crate::PodGroupPostFilterResult {
    type Wit = ex::pod_group_post_filter::PodGroupPostFilterResult;
    fn into_wit(self) -> Self::Wit {
        ex::pod_group_post_filter::PodGroupPostFilterResult {
            status: status_to_wit(self.status),
            nominations: self
                .nominations
                .into_iter()
                .map(|a| wl::ProposedAssignment {
                    pod_uid: a.pod_uid,
                    node: a.node,
                })
                .collect(),
            victims: self.victims,
        }
    }
}

impl FromWitArg for crate::PodGroup {
    type Wit = wl::PodGroup;
    fn from_wit_arg(g: wl::PodGroup) -> crate::PodGroup {
        crate::PodGroup {
            namespace: g.namespace,
            name: g.name,
            min_count: g.min_count,
            scheduled_count: g.scheduled_count,
            unscheduled_pods: g.unscheduled_pods.into_iter().map(pod_from_wit).collect(),
            topology_keys: g.topology_keys,
            scheduled_nodes: g.scheduled_nodes,
        }
    }
}

impl IntoWit for crate::PreFilterResult {
    type Wit = ex::pre_filter::PreFilterResult;
    fn into_wit(self) -> Self::Wit {
        ex::pre_filter::PreFilterResult {
            status: status_to_wit(self.status),
            node_names: self.node_names,
        }
    }
}

impl IntoWit for Vec<(u32, sdk::Status)> {
    type Wit = Vec<ex::filter::NodeStatus>;
    fn into_wit(self) -> Self::Wit {
        self.into_iter()
            .map(|(slot, status)| ex::filter::NodeStatus {
                slot,
                status: status_to_wit(status),
            })
            .collect()
    }
}

impl IntoWit for (sdk::Status, std::time::Duration) {
    type Wit = ex::permit::PermitResult;
    fn into_wit(self) -> Self::Wit {
        ex::permit::PermitResult {
            status: status_to_wit(self.0),
            timeout_ms: u64::try_from(self.1.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

fn status_to_wit(s: sdk::Status) -> w::Status {
    let code = match s.code {
        sdk::Code::Success => w::Code::Success,
        sdk::Code::Error => w::Code::Error,
        sdk::Code::Unschedulable => w::Code::Unschedulable,
        sdk::Code::UnschedulableAndUnresolvable => w::Code::UnschedulableAndUnresolvable,
        sdk::Code::Wait => w::Code::Wait,
        sdk::Code::Skip => w::Code::Skip,
        sdk::Code::Pending => w::Code::Pending,
    };
    w::Status {
        code,
        reasons: s.reasons,
    }
}

fn status_from_wit(s: w::Status) -> sdk::Status {
    let code = match s.code {
        w::Code::Success => sdk::Code::Success,
        w::Code::Error => sdk::Code::Error,
        w::Code::Unschedulable => sdk::Code::Unschedulable,
        w::Code::UnschedulableAndUnresolvable => sdk::Code::UnschedulableAndUnresolvable,
        w::Code::Wait => sdk::Code::Wait,
        w::Code::Skip => sdk::Code::Skip,
        w::Code::Pending => sdk::Code::Pending,
    };
    sdk::Status {
        code,
        reasons: s.reasons,
    }
}

fn preemption_policy_from_wit(p: w::PreemptionPolicy) -> sdk::PreemptionPolicy {
    match p {
        w::PreemptionPolicy::PreemptLowerPriority => sdk::PreemptionPolicy::PreemptLowerPriority,
        w::PreemptionPolicy::Never => sdk::PreemptionPolicy::Never,
    }
}

fn effect_from_wit(e: w::TaintEffect) -> sdk::TaintEffect {
    match e {
        w::TaintEffect::NoSchedule => sdk::TaintEffect::NoSchedule,
        w::TaintEffect::PreferNoSchedule => sdk::TaintEffect::PreferNoSchedule,
        w::TaintEffect::NoExecute => sdk::TaintEffect::NoExecute,
    }
}

fn resources_from_wit(r: w::Resources) -> sdk::Resources {
    sdk::Resources {
        milli_cpu: r.milli_cpu,
        memory: r.memory,
        ephemeral_storage: r.ephemeral_storage,
        allowed_pod_number: r.allowed_pod_number,
        scalar: r.scalar.into_iter().collect(),
    }
}

fn port_from_wit(p: w::HostPort) -> sdk::HostPort {
    sdk::HostPort {
        host_ip: p.host_ip,
        protocol: p.protocol,
        port: p.port,
    }
}

fn container_from_wit(c: w::Container) -> sdk::Container {
    sdk::Container {
        name: c.name,
        image: c.image,
        requests: c.requests.into_iter().collect(),
        ports: c.ports.into_iter().map(port_from_wit).collect(),
        restartable: c.restartable,
        allocated: c.allocated.map(|l| l.into_iter().collect()),
        actuated: c.actuated.map(|l| l.into_iter().collect()),
        restart_policy_rule_actions: c.restart_policy_rule_actions,
        volume_mounts: c
            .volume_mounts
            .into_iter()
            .map(|m| sdk::VolumeMount {
                name: m.name,
                bind_mount_options: m.bind_mount_options,
            })
            .collect(),
    }
}

fn pod_from_wit(p: w::Pod) -> sdk::Pod {
    sdk::Pod {
        uid: p.uid,
        namespace: p.namespace,
        name: p.name,
        labels: p.labels.into_iter().collect(),
        priority: p.priority,
        scheduler_name: p.scheduler_name,
        node_name: p.node_name,
        nominated_node_name: p.nominated_node_name,
        containers: p.containers.into_iter().map(container_from_wit).collect(),
        init_containers: p
            .init_containers
            .into_iter()
            .map(container_from_wit)
            .collect(),
        overhead: p.overhead.into_iter().collect(),
        node_selector: p.node_selector.into_iter().collect(),
        tolerations: p
            .tolerations
            .into_iter()
            .map(|t| sdk::Toleration {
                key: t.key,
                operator: match t.operator {
                    w::TolerationOperator::Equal => sdk::TolerationOperator::Equal,
                    w::TolerationOperator::Exists => sdk::TolerationOperator::Exists,
                },
                value: t.value,
                effect: t.effect.map(effect_from_wit),
                toleration_seconds: t.toleration_seconds,
            })
            .collect(),
        scheduling_gates: p.scheduling_gates,
        terminating: p.terminating,
        preempted: p.preempted,
        preemption_policy: preemption_policy_from_wit(p.preemption_policy),
        start_time_ms: p.start_time_ms,
        affinity: affinity_from_wit(p.affinity),
        topology_spread_constraints: p
            .topology_spread_constraints
            .into_iter()
            .map(spread_from_wit)
            .collect(),
        default_selector: p.default_selector.map(selector_from_wit),
        volumes: p
            .volumes
            .into_iter()
            .map(volumes::pod_volume_from_wit)
            .collect(),
        resources: p.resources.map(|r| sdk::ResourceRequirements {
            requests: r.requests.into_iter().collect(),
            limits: r.limits.into_iter().collect(),
        }),
        resize_infeasible: p.resize_infeasible,
        resource_claims: p
            .resource_claims
            .into_iter()
            .map(|c| sdk::PodResourceClaim {
                name: c.name,
                source: match c.source {
                    w::ClaimSource::ClaimName(n) => sdk::ClaimSource::ClaimName(n),
                    w::ClaimSource::TemplateName(n) => sdk::ClaimSource::TemplateName(n),
                },
            })
            .collect(),
        resource_claim_statuses: p
            .resource_claim_statuses
            .into_iter()
            .map(|c| sdk::PodResourceClaimStatus {
                name: c.name,
                resource_claim_name: c.resource_claim_name,
            })
            .collect(),
        scheduling_group: p.scheduling_group,
        host_network: p.host_network,
        host_users: p.host_users,
        ephemeral_containers: p
            .ephemeral_containers
            .into_iter()
            .map(container_from_wit)
            .collect(),
        extended_resource_claim_status: p.extended_resource_claim_status.map(|s| {
            sdk::PodExtendedResourceClaimStatus {
                resource_claim_name: s.resource_claim_name,
                request_mappings: s
                    .request_mappings
                    .into_iter()
                    .map(|m| sdk::ContainerExtendedResourceRequest {
                        container_name: m.container_name,
                        resource_name: m.resource_name,
                        request_name: m.request_name,
                    })
                    .collect(),
            }
        }),
    }
}

fn selector_from_wit(s: w::LabelSelector) -> sdk::LabelSelector {
    sdk::LabelSelector {
        match_labels: s.match_labels.into_iter().collect(),
        match_expressions: s
            .match_expressions
            .into_iter()
            .map(|r| sdk::LabelSelectorRequirement {
                key: r.key,
                operator: match r.operator {
                    w::LabelSelectorOperator::In => sdk::LabelSelectorOperator::In,
                    w::LabelSelectorOperator::NotIn => sdk::LabelSelectorOperator::NotIn,
                    w::LabelSelectorOperator::Exists => sdk::LabelSelectorOperator::Exists,
                    w::LabelSelectorOperator::DoesNotExist => {
                        sdk::LabelSelectorOperator::DoesNotExist
                    }
                },
                values: r.values,
            })
            .collect(),
    }
}

fn pod_term_from_wit(t: w::PodAffinityTerm) -> sdk::PodAffinityTerm {
    sdk::PodAffinityTerm {
        label_selector: t.label_selector.map(selector_from_wit),
        namespaces: t.namespaces,
        namespace_selector: t.namespace_selector.map(selector_from_wit),
        topology_key: t.topology_key,
        match_label_keys: t.match_label_keys,
        mismatch_label_keys: t.mismatch_label_keys,
    }
}

fn pod_affinity_from_wit(a: w::PodAffinity) -> sdk::PodAffinity {
    sdk::PodAffinity {
        required: a.required.into_iter().map(pod_term_from_wit).collect(),
        preferred: a
            .preferred
            .into_iter()
            .map(|w| sdk::WeightedPodAffinityTerm {
                weight: w.weight,
                term: pod_term_from_wit(w.term),
            })
            .collect(),
    }
}

fn affinity_from_wit(a: w::Affinity) -> sdk::Affinity {
    sdk::Affinity {
        node_affinity: a.node_affinity.map(|n| sdk::NodeAffinity {
            required: n
                .required
                .map(|terms| terms.into_iter().map(node_term_from_wit).collect()),
            preferred: n
                .preferred
                .into_iter()
                .map(|p| sdk::PreferredSchedulingTerm {
                    weight: p.weight,
                    preference: node_term_from_wit(p.preference),
                })
                .collect(),
        }),
        pod_affinity: pod_affinity_from_wit(a.pod_affinity),
        pod_anti_affinity: pod_affinity_from_wit(a.pod_anti_affinity),
    }
}

fn policy_from_wit(p: w::NodeInclusionPolicy) -> sdk::NodeInclusionPolicy {
    match p {
        w::NodeInclusionPolicy::Honor => sdk::NodeInclusionPolicy::Honor,
        w::NodeInclusionPolicy::Ignore => sdk::NodeInclusionPolicy::Ignore,
    }
}

fn spread_from_wit(c: w::TopologySpreadConstraint) -> sdk::TopologySpreadConstraint {
    sdk::TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key,
        when_unsatisfiable: match c.when_unsatisfiable {
            w::WhenUnsatisfiable::DoNotSchedule => sdk::WhenUnsatisfiable::DoNotSchedule,
            w::WhenUnsatisfiable::ScheduleAnyway => sdk::WhenUnsatisfiable::ScheduleAnyway,
        },
        label_selector: c.label_selector.map(selector_from_wit),
        min_domains: c.min_domains,
        node_affinity_policy: c.node_affinity_policy.map(policy_from_wit),
        node_taints_policy: c.node_taints_policy.map(policy_from_wit),
        match_label_keys: c.match_label_keys,
    }
}

fn node_from_wit(node: w::Node) -> sdk::Node {
    sdk::Node {
        name: node.name,
        labels: node.labels.into_iter().collect(),
        taints: node
            .taints
            .into_iter()
            .map(|t| sdk::Taint {
                key: t.key,
                value: t.value,
                effect: effect_from_wit(t.effect),
            })
            .collect(),
        unschedulable: node.unschedulable,
        allocatable: resources_from_wit(node.allocatable),
        images: node
            .images
            .into_iter()
            .map(|i| sdk::ImageState {
                names: i.names,
                size_bytes: i.size_bytes,
                num_nodes: i.num_nodes,
            })
            .collect(),
        declared_features: node.declared_features,
    }
}

fn node_info_from_wit(n: w::NodeInfo) -> sdk::NodeInfo {
    sdk::NodeInfo {
        node: node_from_wit(n.node),
        requested: resources_from_wit(n.requested),
        non_zero_requested: resources_from_wit(n.non_zero_requested),
        pod_count: n.pod_count,
        used_ports: n.used_ports.into_iter().map(port_from_wit).collect(),
        pods: n.pods.into_iter().map(pod_from_wit).collect(),
        stamp: 0,
    }
}
