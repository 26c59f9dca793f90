//! The guest side: the WIT bindings, the node replica, and the forwarding from the
//! generated exports to a plugin's [`VTable`](crate::VTable). Compiled only for wasm.

use crate::plugin::{CycleState, Registered, StateStore, VTable};
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
    });
}

use wit::berth::scheduler::host;
use wit::berth::scheduler::types as w;
use wit::exports::berth::scheduler as ex;

/// The version of the WIT package this SDK was built against.
pub const WIT_VERSION: &str = "0.7.0";

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
    all: crate::node_list::NodeList,
    /// The pod of the current cycle, decoded once when the host begins the cycle.
    pod: Option<sdk::Pod>,
}

impl<T> Instance<T> {
    /// Rebuilds the list of every node if a slot gained or lost its node.
    fn refresh_all(&mut self) {
        self.all.refresh(
            self.nodes
                .iter()
                .map(|n| n.as_deref().map(|n| n as *const sdk::NodeInfo)),
        );
    }

    /// Every node of the replica; call [`Instance::refresh_all`] first.
    fn all_nodes(&self) -> &[&sdk::NodeInfo] {
        // SAFETY: every pointer is into a box that `nodes` owns: boxes do not move
        // when `nodes` grows, and `sync_nodes` (which takes `&mut self`, so cannot run
        // while this borrow lives) tells the list before it drops or replaces one.
        unsafe { self.all.nodes() }
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

fn not_implemented(point: &str) -> w::Status {
    w::Status {
        code: w::Code::Error,
        reasons: vec![format!("plugin does not implement {point}")],
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

/// Allows a waiting pod.
pub fn allow_waiting_pod(uid: &str, plugin: &str) {
    host::allow_waiting_pod(uid, plugin)
}

/// Rejects a waiting pod.
pub fn reject_waiting_pod(uid: &str, plugin: &str, message: &str) {
    host::reject_waiting_pod(uid, plugin, message)
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
}

impl<T: Registered> ex::plugin::Guest for Export<T> {
    fn info() -> w::PluginInfo {
        let mut points: Vec<w::ExtensionPoint> = T::vtable()
            .extension_points()
            .into_iter()
            .map(point_to_wit)
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
                inst.all.set(slot, None);
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

/// The answer when the host calls a cycle's extension point before beginning it.
fn no_cycle() -> sdk::Status {
    sdk::Status::error("berth: the host called the plugin outside a cycle")
}

impl<T: Registered> ex::queue_sort::Guest for Export<T> {
    fn sort_key(pod: w::Pod) -> Vec<i64> {
        let pod = pod_from_wit(pod);
        with_instance::<T, _>(|inst| match inst.vtable.queue_sort {
            Some(f) => f(&inst.plugin, &pod),
            None => vec![-i64::from(pod.priority)],
        })
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
        with_instance::<T, _>(|inst| match inst.vtable.queueing_hint {
            Some(f) => f(&inst.plugin, &event, &pod, old.as_ref(), new.as_ref()).map(|h| match h {
                crate::QueueingHint::Queue => w::QueueingHint::Queue,
                crate::QueueingHint::QueueSkip => w::QueueingHint::QueueSkip,
            }),
            None => Ok(w::QueueingHint::Queue),
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
    }
}

impl<T: Registered> ex::pre_enqueue::Guest for Export<T> {
    fn pre_enqueue(pod: w::Pod) -> w::Status {
        let pod = pod_from_wit(pod);
        with_instance::<T, _>(|inst| match inst.vtable.pre_enqueue {
            Some(f) => status_to_wit(f(&inst.plugin, &pod)),
            None => not_implemented("preEnqueue"),
        })
    }
}

impl<T: Registered> ex::pre_filter::Guest for Export<T> {
    fn pre_filter(state: &host::CycleState) -> ex::pre_filter::PreFilterResult {
        let store = HostState(state);
        let state = CycleState::new(&store);
        with_instance::<T, _>(|inst| match inst.vtable.pre_filter {
            Some(f) => {
                inst.refresh_all();
                let Some(pod) = &inst.pod else {
                    return ex::pre_filter::PreFilterResult {
                        status: status_to_wit(no_cycle()),
                        node_names: None,
                    };
                };
                let r = f(&inst.plugin, &state, pod, inst.all_nodes());
                ex::pre_filter::PreFilterResult {
                    status: status_to_wit(r.status),
                    node_names: r.node_names,
                }
            }
            None => ex::pre_filter::PreFilterResult {
                status: not_implemented("preFilter"),
                node_names: None,
            },
        })
    }
}

impl<T: Registered> ex::pre_filter_extensions::Guest for Export<T> {
    fn add_pod(state: &host::CycleState, pod: w::Pod, slot: u32) -> w::Status {
        pod_on_node::<T>(state, pod, slot, |v| v.0)
    }

    fn remove_pod(state: &host::CycleState, pod: w::Pod, slot: u32) -> w::Status {
        pod_on_node::<T>(state, pod, slot, |v| v.1)
    }
}

type PodOnNode<T> = fn(&T, &CycleState, &sdk::Pod, &sdk::Pod, &sdk::NodeInfo) -> sdk::Status;

/// Runs AddPod or RemovePod (`pick` chooses) for the cycle's pod.
fn pod_on_node<T: Registered>(
    state: &host::CycleState,
    other: w::Pod,
    slot: u32,
    pick: fn((PodOnNode<T>, PodOnNode<T>)) -> PodOnNode<T>,
) -> w::Status {
    let other = pod_from_wit(other);
    let store = HostState(state);
    let state = CycleState::new(&store);
    with_instance::<T, _>(|inst| {
        let Some(pair) = inst.vtable.pre_filter_extensions else {
            return not_implemented("preFilterExtensions");
        };
        let Some(pod) = &inst.pod else {
            return status_to_wit(no_cycle());
        };
        match inst.nodes.get(slot as usize).and_then(Option::as_deref) {
            Some(node) => status_to_wit(pick(pair)(&inst.plugin, &state, pod, &other, node)),
            None => status_to_wit(missing_node(slot)),
        }
    })
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
}

impl<T: Registered> ex::post_filter::Guest for Export<T> {
    fn post_filter(
        state: &host::CycleState,
        statuses: Vec<ex::filter::NodeStatus>,
    ) -> ex::post_filter::PostFilterResult {
        let store = HostState(state);
        let state = CycleState::new(&store);
        let r = with_instance::<T, _>(|inst| {
            let Some(f) = inst.vtable.post_filter else {
                return sdk::Status::error("plugin does not implement postFilter").into();
            };
            let Some(pod) = &inst.pod else {
                return no_cycle().into();
            };
            let mut nodes = Vec::with_capacity(statuses.len());
            for s in statuses {
                match inst.nodes.get(s.slot as usize).and_then(Option::as_deref) {
                    Some(n) => nodes.push((n, status_from_wit(s.status))),
                    None => return missing_node(s.slot).into(),
                }
            }
            f(&inst.plugin, &state, pod, &nodes, &HostDryRun)
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

impl<T: Registered> ex::filter::Guest for Export<T> {
    fn filter(state: &host::CycleState, slots: Vec<u32>) -> Vec<ex::filter::NodeStatus> {
        let store = HostState(state);
        let state = CycleState::new(&store);
        with_instance::<T, _>(|inst| {
            // From the type's table, not the instance's copy: a constant, so the
            // compiler calls (and may inline) the plugin's Filter directly in the loop
            // over the nodes.
            let Some(f) = T::vtable().filter else {
                return slots
                    .iter()
                    .map(|&slot| ex::filter::NodeStatus {
                        slot,
                        status: not_implemented("filter"),
                    })
                    .collect();
            };
            let Some(pod) = &inst.pod else {
                return slots
                    .iter()
                    .map(|&slot| ex::filter::NodeStatus {
                        slot,
                        status: status_to_wit(no_cycle()),
                    })
                    .collect();
            };
            let mut out = Vec::new();
            for slot in slots {
                let status = match inst.nodes.get(slot as usize).and_then(Option::as_deref) {
                    Some(node) => f(&inst.plugin, &state, pod, node),
                    None => missing_node(slot),
                };
                if !status.is_success() {
                    out.push(ex::filter::NodeStatus {
                        slot,
                        status: status_to_wit(status),
                    });
                }
            }
            out
        })
    }
}

impl<T: Registered> ex::pre_score::Guest for Export<T> {
    fn pre_score(state: &host::CycleState, slots: Vec<u32>) -> w::Status {
        let store = HostState(state);
        let state = CycleState::new(&store);
        with_instance::<T, _>(|inst| {
            let Some(f) = inst.vtable.pre_score else {
                return not_implemented("preScore");
            };
            inst.refresh_all();
            let Some(pod) = &inst.pod else {
                return status_to_wit(no_cycle());
            };
            let mut nodes = Vec::with_capacity(slots.len());
            for slot in slots {
                match inst.nodes.get(slot as usize).and_then(Option::as_deref) {
                    Some(n) => nodes.push(n),
                    None => return status_to_wit(missing_node(slot)),
                }
            }
            status_to_wit(f(&inst.plugin, &state, pod, &nodes, inst.all_nodes()))
        })
    }
}

impl<T: Registered> ex::score::Guest for Export<T> {
    fn score(state: &host::CycleState, slots: Vec<u32>) -> Result<Vec<i64>, w::Status> {
        let store = HostState(state);
        let state = CycleState::new(&store);
        with_instance::<T, _>(|inst| {
            // A constant, as in Filter: a direct call per node.
            let Some(f) = T::vtable().score else {
                return Err(not_implemented("score"));
            };
            let Some(pod) = &inst.pod else {
                return Err(status_to_wit(no_cycle()));
            };
            slots
                .iter()
                .map(
                    |&slot| match inst.nodes.get(slot as usize).and_then(Option::as_deref) {
                        Some(n) => f(&inst.plugin, &state, pod, n).map_err(status_to_wit),
                        None => Err(status_to_wit(missing_node(slot))),
                    },
                )
                .collect()
        })
    }

    fn normalize_score(
        state: &host::CycleState,
        mut scores: Vec<i64>,
    ) -> Result<Vec<i64>, w::Status> {
        let store = HostState(state);
        let state = CycleState::new(&store);
        with_instance::<T, _>(|inst| {
            let Some(f) = inst.vtable.normalize_score else {
                return Err(not_implemented("normalizeScore"));
            };
            let Some(pod) = &inst.pod else {
                return Err(status_to_wit(no_cycle()));
            };
            let status = f(&inst.plugin, &state, pod, &mut scores);
            if status.is_success() {
                Ok(scores)
            } else {
                Err(status_to_wit(status))
            }
        })
    }
}

/// Runs a node-name based extension point (Reserve, Permit, PreBind, Bind, ...) on
/// the cycle's pod; `outside` answers when no cycle has begun.
fn at_node<T: Registered, R>(
    state: &host::CycleState,
    outside: impl FnOnce() -> R,
    f: impl FnOnce(&Instance<T>, &CycleState, &sdk::Pod) -> R,
) -> R {
    let store = HostState(state);
    let state = CycleState::new(&store);
    with_instance::<T, _>(|inst| match &inst.pod {
        Some(pod) => f(inst, &state, pod),
        None => outside(),
    })
}

fn no_cycle_status() -> w::Status {
    status_to_wit(no_cycle())
}

impl<T: Registered> ex::reserve::Guest for Export<T> {
    fn reserve(state: &host::CycleState, node: String) -> w::Status {
        at_node::<T, _>(state, no_cycle_status, |inst, state, pod| {
            match inst.vtable.reserve {
                Some((f, _)) => status_to_wit(f(&inst.plugin, state, pod, &node)),
                None => not_implemented("reserve"),
            }
        })
    }

    fn unreserve(state: &host::CycleState, node: String) {
        at_node::<T, _>(
            state,
            || (),
            |inst, state, pod| {
                if let Some((_, f)) = inst.vtable.reserve {
                    f(&inst.plugin, state, pod, &node)
                }
            },
        )
    }
}

impl<T: Registered> ex::permit::Guest for Export<T> {
    fn permit(state: &host::CycleState, node: String) -> ex::permit::PermitResult {
        let outside = || ex::permit::PermitResult {
            status: no_cycle_status(),
            timeout_ms: 0,
        };
        at_node::<T, _>(state, outside, |inst, state, pod| {
            match inst.vtable.permit {
                Some(f) => {
                    let (status, timeout) = f(&inst.plugin, state, pod, &node);
                    ex::permit::PermitResult {
                        status: status_to_wit(status),
                        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                    }
                }
                None => ex::permit::PermitResult {
                    status: not_implemented("permit"),
                    timeout_ms: 0,
                },
            }
        })
    }
}

impl<T: Registered> ex::pre_bind::Guest for Export<T> {
    fn pre_bind(state: &host::CycleState, node: String) -> w::Status {
        at_node::<T, _>(state, no_cycle_status, |inst, state, pod| {
            match inst.vtable.pre_bind {
                Some(f) => status_to_wit(f(&inst.plugin, state, pod, &node)),
                None => not_implemented("preBind"),
            }
        })
    }
}

impl<T: Registered> ex::bind::Guest for Export<T> {
    fn bind(state: &host::CycleState, node: String) -> w::Status {
        at_node::<T, _>(state, no_cycle_status, |inst, state, pod| {
            match inst.vtable.bind {
                Some(f) => status_to_wit(f(&inst.plugin, state, pod, &node)),
                None => not_implemented("bind"),
            }
        })
    }
}

impl<T: Registered> ex::post_bind::Guest for Export<T> {
    fn post_bind(state: &host::CycleState, node: String) {
        at_node::<T, _>(
            state,
            || (),
            |inst, state, pod| {
                if let Some(f) = inst.vtable.post_bind {
                    f(&inst.plugin, state, pod, &node)
                }
            },
        )
    }
}

// ---- conversions between the WIT records and the SDK's types ----

fn point_to_wit(p: sdk::ExtensionPoint) -> w::ExtensionPoint {
    use sdk::ExtensionPoint as E;
    match p {
        E::PreEnqueue => w::ExtensionPoint::PreEnqueue,
        E::QueueSort => w::ExtensionPoint::QueueSort,
        E::PreFilter => w::ExtensionPoint::PreFilter,
        E::Filter => w::ExtensionPoint::Filter,
        E::PostFilter => w::ExtensionPoint::PostFilter,
        E::PreScore => w::ExtensionPoint::PreScore,
        E::Score => w::ExtensionPoint::Score,
        E::NormalizeScore => w::ExtensionPoint::NormalizeScore,
        E::Reserve => w::ExtensionPoint::Reserve,
        E::Permit => w::ExtensionPoint::Permit,
        E::PreBind => w::ExtensionPoint::PreBind,
        E::Bind => w::ExtensionPoint::Bind,
        E::PostBind => w::ExtensionPoint::PostBind,
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
        preemption_policy: match p.preemption_policy {
            w::PreemptionPolicy::PreemptLowerPriority => {
                sdk::PreemptionPolicy::PreemptLowerPriority
            }
            w::PreemptionPolicy::Never => sdk::PreemptionPolicy::Never,
        },
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
    }
}

fn node_term_from_wit(t: w::NodeSelectorTerm) -> sdk::NodeSelectorTerm {
    let req = |r: w::NodeSelectorRequirement| sdk::NodeSelectorRequirement {
        key: r.key,
        operator: match r.operator {
            w::NodeSelectorOperator::In => sdk::NodeSelectorOperator::In,
            w::NodeSelectorOperator::NotIn => sdk::NodeSelectorOperator::NotIn,
            w::NodeSelectorOperator::Exists => sdk::NodeSelectorOperator::Exists,
            w::NodeSelectorOperator::DoesNotExist => sdk::NodeSelectorOperator::DoesNotExist,
            w::NodeSelectorOperator::Gt => sdk::NodeSelectorOperator::Gt,
            w::NodeSelectorOperator::Lt => sdk::NodeSelectorOperator::Lt,
        },
        values: r.values,
    };
    sdk::NodeSelectorTerm {
        match_expressions: t.match_expressions.into_iter().map(req).collect(),
        match_fields: t.match_fields.into_iter().map(req).collect(),
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
