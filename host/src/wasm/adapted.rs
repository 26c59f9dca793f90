//! The adapter for modules of the 0.7 track: the 0.7 track's last WIT package
//! (`wit/adapted/0.7`, frozen) bound beside the current one, its host imports served
//! by the current ones, and its exports called with the current track's types.
//!
//! 0.8.0 only added fields to records the host sends (the pod, its containers, the
//! node) and kinds they use; every other type is the same in both. A value crosses
//! between the two bindings by its serde form: fields the 0.7 record lacks are
//! dropped on the way in, and what a 0.7 module answers reads as the same value of
//! the current track. That costs a conversion per call, which only modules of the
//! older track pay; rebuilding against the current SDK removes it.

use super::bindings::berth::scheduler::{host, types as w};
use super::bindings::exports::berth::scheduler as ex;
use super::exports::Either;
use super::host_imports::HostCtx;
use crate::plugin::{CycleState, Simulation};
use serde::Serialize;
use serde::de::DeserializeOwned;
use wasmtime::Store;
use wasmtime::component::Resource;

/// Host-side bindings of the 0.7 track's last package.
#[allow(missing_docs, clippy::all)]
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/adapted/0.7",
        world: "berth:scheduler/scheduler-plugin",
        with: {
            "berth:scheduler/host.cycle-state": crate::plugin::CycleState,
            "berth:scheduler/host.node-simulation": crate::plugin::Simulation,
        },
        additional_derives: [serde::Serialize, serde::Deserialize],
    });
}

use bindings::berth::scheduler::{host as host07, types as w07};
use exports07 as ex07;

/// The 0.7 track's exports, and the optional interfaces added on the current track
/// after it (PlacementFeasible, 0.8.1). No 0.7 module has those, as its world lacks
/// them: the host finds a module's optional exports by name, so for a 0.7 module
/// they are always absent, and the current bindings stand in for their types
/// (PlacementGenerate too, 0.8.1; PodGroupPostFilter, 0.8.2).
pub(crate) mod exports07 {
    pub(crate) use super::bindings::exports::berth::scheduler::*;
    pub(crate) use crate::wasm::bindings::exports::berth::scheduler::{
        placement_feasible, placement_generate, pod_group_post_filter,
    };
}

/// A value of one track's bindings as the other's: the same serde form, fields the
/// target lacks dropped. An error is a bug of the adapter (a kind that changed
/// between the tracks without a conversion written here); a call fails with it, as
/// a call the guest trapped in (the pod is retried, the instance replaced).
fn try_adapt<T: Serialize, U: DeserializeOwned>(value: &T) -> wasmtime::Result<U> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            wasmtime::format_err!(
                "the 0.7 adapter cannot convert a {}: {e}",
                std::any::type_name::<T>()
            )
        })
}

/// [`try_adapt`] for the host functions a 0.7 module imports, which answer plain
/// values: the kinds they carry are the same in both tracks (the tests convert each),
/// so a failure is a bug of this file.
fn adapt<T: Serialize, U: DeserializeOwned>(value: &T) -> U {
    try_adapt(value).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The serde form of an `action-type` flags value of either bindings (bindgen derives
/// none for flags): the bits in declaration order, the same in both tracks.
macro_rules! flags_serde {
    ($($t:ty),*) => { $(
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.bits_in_order().serialize(s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok(<$t>::from_bits_in_order(u32::deserialize(d)?))
            }
        }

        impl $t {
            /// Every flag, in the WIT's declaration order: bit `i` of the SDK's
            /// `ActionType` is flag `i`.
            pub(crate) const ALL_IN_ORDER: [$t; 12] = [
                <$t>::ADD,
                <$t>::DELETE,
                <$t>::UPDATE_NODE_ALLOCATABLE,
                <$t>::UPDATE_NODE_LABEL,
                <$t>::UPDATE_NODE_TAINT,
                <$t>::UPDATE_NODE_CONDITION,
                <$t>::UPDATE_NODE_ANNOTATION,
                <$t>::UPDATE_POD_LABEL,
                <$t>::UPDATE_POD_SCALE_DOWN,
                <$t>::UPDATE_POD_TOLERATION,
                <$t>::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
                <$t>::UPDATE_OTHER,
            ];

            /// The flags as bits: bit `i` set for flag `i` of [`Self::ALL_IN_ORDER`].
            pub(crate) fn bits_in_order(&self) -> u32 {
                <$t>::ALL_IN_ORDER
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| self.contains(**f))
                    .fold(0u32, |acc, (i, _)| acc | (1 << i))
            }

            /// The flags of [`Self::bits_in_order`]'s bits.
            pub(crate) fn from_bits_in_order(bits: u32) -> $t {
                <$t>::ALL_IN_ORDER
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| bits & (1 << i) != 0)
                    .fold(<$t>::empty(), |acc, (_, f)| acc | *f)
            }
        }
    )* };
}

flags_serde!(w::ActionType, w07::ActionType);

/// Links the 0.7 track's host imports, served by the current ones.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<HostCtx>,
) -> wasmtime::Result<()> {
    let mut features = bindings::LinkOptions::default();
    features.workload_scheduling(true);
    bindings::SchedulerPlugin::add_to_linker::<HostCtx, wasmtime::component::HasSelf<HostCtx>>(
        linker,
        &features,
        |c| c,
    )
}

impl w07::Host for HostCtx {}

impl bindings::berth::scheduler::workload::Host for HostCtx {}

impl host07::Host for HostCtx {
    fn log(&mut self, level: host07::LogLevel, message: String) {
        host::Host::log(self, adapt(&level), message)
    }

    fn bind_pod(
        &mut self,
        namespace: String,
        name: String,
        uid: String,
        node: String,
    ) -> Result<(), String> {
        host::Host::bind_pod(self, namespace, name, uid, node)
    }

    fn namespace_labels(&mut self, namespace: String) -> Option<Vec<(String, String)>> {
        host::Host::namespace_labels(self, namespace)
    }

    fn waiting_pods(&mut self) -> Vec<host07::WaitingPod> {
        adapt(&host::Host::waiting_pods(self))
    }

    fn allow_waiting_pod(&mut self, uid: String, plugin: String) {
        host::Host::allow_waiting_pod(self, uid, plugin)
    }

    fn reject_waiting_pod(&mut self, uid: String, plugin: String, message: String) {
        host::Host::reject_waiting_pod(self, uid, plugin, message)
    }

    fn pod_disruption_budgets(&mut self) -> Vec<w07::PodDisruptionBudget> {
        adapt(&host::Host::pod_disruption_budgets(self))
    }

    fn get_persistent_volume_claim(
        &mut self,
        namespace: String,
        name: String,
    ) -> Option<w07::PersistentVolumeClaim> {
        adapt(&host::Host::get_persistent_volume_claim(
            self, namespace, name,
        ))
    }

    fn get_persistent_volume(&mut self, name: String) -> Option<w07::PersistentVolume> {
        adapt(&host::Host::get_persistent_volume(self, name))
    }

    fn get_storage_class(&mut self, name: String) -> Option<w07::StorageClass> {
        adapt(&host::Host::get_storage_class(self, name))
    }

    fn get_csi_node(&mut self, name: String) -> Option<w07::CsiNode> {
        adapt(&host::Host::get_csi_node(self, name))
    }

    fn get_csi_driver(&mut self, name: String) -> Option<w07::CsiDriver> {
        adapt(&host::Host::get_csi_driver(self, name))
    }

    fn persistent_volumes_of_class(&mut self, class: String) -> Vec<w07::PersistentVolume> {
        adapt(&host::Host::persistent_volumes_of_class(self, class))
    }

    fn assume_volume_bound(&mut self, volume: String, claim: w07::ClaimRef) -> Result<(), String> {
        host::Host::assume_volume_bound(self, volume, adapt(&claim))
    }

    fn assume_claim_provisioned(
        &mut self,
        namespace: String,
        name: String,
        node: String,
    ) -> Result<(), String> {
        host::Host::assume_claim_provisioned(self, namespace, name, node)
    }

    fn restore_volume(&mut self, name: String) {
        host::Host::restore_volume(self, name)
    }

    fn restore_claim(&mut self, namespace: String, name: String) {
        host::Host::restore_claim(self, namespace, name)
    }

    fn bind_volume(&mut self, volume: String, claim: w07::ClaimRef) -> Result<(), String> {
        host::Host::bind_volume(self, volume, adapt(&claim))
    }

    fn select_node_for_claim(
        &mut self,
        namespace: String,
        name: String,
        node: String,
    ) -> Result<(), String> {
        host::Host::select_node_for_claim(self, namespace, name, node)
    }

    fn storage_generation(&mut self) -> u64 {
        host::Host::storage_generation(self)
    }

    fn wait_storage_change(&mut self, after: u64, timeout_ms: u64) -> (u64, u64) {
        host::Host::wait_storage_change(self, after, timeout_ms)
    }

    fn simulate(&mut self, node: String) -> Result<Resource<Simulation>, w07::Status> {
        host::Host::simulate(self, node).map_err(|s| adapt(&s))
    }
}

impl host07::HostNodeSimulation for HostCtx {
    fn remove_pod(&mut self, this: Resource<Simulation>, uid: String) -> w07::Status {
        adapt(&host::HostNodeSimulation::remove_pod(self, this, uid))
    }

    fn add_pod(&mut self, this: Resource<Simulation>, uid: String) -> w07::Status {
        adapt(&host::HostNodeSimulation::add_pod(self, this, uid))
    }

    fn fits(&mut self, this: Resource<Simulation>) -> w07::Status {
        adapt(&host::HostNodeSimulation::fits(self, this))
    }

    fn drop(&mut self, rep: Resource<Simulation>) -> wasmtime::Result<()> {
        host::HostNodeSimulation::drop(self, rep)
    }
}

impl host07::HostCycleState for HostCtx {
    fn read(&mut self, this: Resource<CycleState>, key: String) -> Option<Vec<u8>> {
        host::HostCycleState::read(self, this, key)
    }

    fn write(&mut self, this: Resource<CycleState>, key: String, value: Vec<u8>) {
        host::HostCycleState::write(self, this, key, value)
    }

    fn delete(&mut self, this: Resource<CycleState>, key: String) {
        host::HostCycleState::delete(self, this, key)
    }

    fn drop(&mut self, rep: Resource<CycleState>) -> wasmtime::Result<()> {
        host::HostCycleState::drop(self, rep)
    }
}

type S<'s> = &'s mut Store<HostCtx>;
type St = Resource<CycleState>;

/// Writes the calls of one interface's exports on [`Either`]: a current module's
/// as they are, a 0.7 module's with each argument and the answer adapted (`=` an
/// argument that is the same Rust type in both bindings; `~` one adapted and lent,
/// `v` one adapted and given, `?` an optional one adapted and lent).
macro_rules! calls {
    ( $iface:ident { $(
        fn $call:ident ( $( $mode:tt $arg:ident : $aty:ty => $aty07:ty ),* ) -> $ret:ty ;
    )* } ) => {
        impl Either<'_, ex::$iface::Guest, ex07::$iface::Guest> {
            $(
                pub(crate) fn $call(&self, s: S<'_>, $( $arg: $aty ),*) -> wasmtime::Result<$ret> {
                    match self {
                        Either::Current(g) => g.$call(s, $( $arg ),*),
                        Either::V0_7(g) => {
                            $( let $arg: $aty07 = calls!(@arg $mode $arg); )*
                            let r = g.$call(s, $( calls!(@pass $mode $arg) ),*)?;
                            try_adapt(&r)
                        }
                    }
                }
            )*
        }
    };
    (@arg = $arg:ident) => { $arg };
    (@arg ~ $arg:ident) => { try_adapt(&$arg)? };
    (@arg v $arg:ident) => { try_adapt(&$arg)? };
    (@arg ? $arg:ident) => { $arg.map(try_adapt).transpose()? };
    (@pass = $arg:ident) => { $arg };
    (@pass ~ $arg:ident) => { &$arg };
    (@pass v $arg:ident) => { $arg };
    (@pass ? $arg:ident) => { $arg.as_ref() };
}

calls!(plugin {
    fn call_info() -> w::PluginInfo;
    fn call_configure(= args_json: &str => &str) -> Result<w::Configuration, String>;
});

calls!(replica {
    fn call_sync_nodes(
        ~ updated: &[(u32, w::NodeInfo)] => Vec<(u32, w07::NodeInfo)>,
        ~ changed: &[ex::replica::NodePodsChange] => Vec<ex07::replica::NodePodsChange>,
        = removed: &[u32] => &[u32],
        ? begin: Option<&w::Pod> => Option<w07::Pod>
    ) -> ();
});

calls!(cycle {
    fn call_begin_cycle(~ pod: &w::Pod => w07::Pod) -> ();
});

calls!(queue_sort {
    fn call_sort_key(~ pod: &w::Pod => w07::Pod) -> Vec<i64>;
});

calls!(enqueue_extensions {
    fn call_hint(
        v event: w::ClusterEvent => w07::ClusterEvent,
        ~ pod: &w::Pod => w07::Pod,
        ? old: Option<&w::Object> => Option<w07::Object>,
        ? new: Option<&w::Object> => Option<w07::Object>
    ) -> Result<w::QueueingHint, String>;
});

calls!(pre_enqueue {
    fn call_pre_enqueue(~ pod: &w::Pod => w07::Pod) -> w::Status;
});

calls!(pre_filter {
    fn call_pre_filter(= st: St => St) -> ex::pre_filter::PreFilterResult;
});

calls!(pre_filter_extensions {
    fn call_add_pod(= st: St => St, ~ pod: &w::Pod => w07::Pod, = slot: u32 => u32) -> w::Status;
    fn call_remove_pod(= st: St => St, ~ pod: &w::Pod => w07::Pod, = slot: u32 => u32) -> w::Status;
});

calls!(filter {
    fn call_filter(= st: St => St, = slots: &[u32] => &[u32]) -> Vec<ex::filter::NodeStatus>;
});

calls!(post_filter {
    fn call_post_filter(
        = st: St => St,
        ~ statuses: &[ex::filter::NodeStatus] => Vec<ex07::filter::NodeStatus>
    ) -> ex::post_filter::PostFilterResult;
});

calls!(pre_score {
    fn call_pre_score(= st: St => St, = slots: &[u32] => &[u32]) -> w::Status;
});

calls!(score {
    fn call_score(= st: St => St, = slots: &[u32] => &[u32]) -> Result<Vec<i64>, w::Status>;
    fn call_normalize_score(= st: St => St, = scores: &[i64] => &[i64]) -> Result<Vec<i64>, w::Status>;
});

calls!(reserve {
    fn call_reserve(= st: St => St, = node: &str => &str) -> w::Status;
    fn call_unreserve(= st: St => St, = node: &str => &str) -> ();
});

calls!(permit {
    fn call_permit(= st: St => St, = node: &str => &str) -> ex::permit::PermitResult;
});

calls!(pre_bind {
    fn call_pre_bind(= st: St => St, = node: &str => &str) -> w::Status;
});

calls!(bind {
    fn call_bind(= st: St => St, = node: &str => &str) -> w::Status;
});

calls!(post_bind {
    fn call_post_bind(= st: St => St, = node: &str => &str) -> ();
});

// `implemented` is called on each track's own exports, when the module loads.
calls!(placement_score {
    fn call_score_placement(
        = st: St => St,
        ~ group: &super::bindings::berth::scheduler::workload::PodGroup
            => bindings::berth::scheduler::workload::PodGroup,
        ~ assignments: &super::bindings::berth::scheduler::workload::PodGroupAssignments
            => bindings::berth::scheduler::workload::PodGroupAssignments
    ) -> Result<i64, w::Status>;
    fn call_normalize_placement_score(
        = st: St => St,
        ~ group: &super::bindings::berth::scheduler::workload::PodGroup
            => bindings::berth::scheduler::workload::PodGroup,
        = scores: &[i64] => &[i64]
    ) -> Result<Vec<i64>, w::Status>;
});

// Added on the 0.8 track: only modules of the current track have it.
calls!(placement_feasible {
    fn call_placement_feasible(
        = st: St => St,
        = group: &super::bindings::berth::scheduler::workload::PodGroup
            => &super::bindings::berth::scheduler::workload::PodGroup,
        = progress: super::bindings::berth::scheduler::workload::PlacementProgress
            => super::bindings::berth::scheduler::workload::PlacementProgress
    ) -> w::Status;
});

calls!(placement_generate {
    fn call_generate_placements(
        = st: St => St,
        = group: &super::bindings::berth::scheduler::workload::PodGroup
            => &super::bindings::berth::scheduler::workload::PodGroup,
        = parent: &super::bindings::berth::scheduler::workload::Placement
            => &super::bindings::berth::scheduler::workload::Placement
    ) -> Result<Vec<super::bindings::berth::scheduler::workload::Placement>, w::Status>;
});

calls!(pod_group_post_filter {
    fn call_pod_group_post_filter(
        = st: St => St,
        = group: &super::bindings::berth::scheduler::workload::PodGroup
            => &super::bindings::berth::scheduler::workload::PodGroup
    ) -> ex::pod_group_post_filter::PodGroupPostFilterResult;
});

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{
        ClaimSource, Container, Pod, PodResourceClaim, ResourceList, ResourceRequirements,
    };

    /// A pod that sets every field 0.8 added.
    fn pod_of_0_8() -> Pod {
        let cpu = |m: i64| ResourceList::from([("cpu".to_owned(), m)]);
        Pod {
            uid: "u1".into(),
            namespace: "default".into(),
            name: "p".into(),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            containers: vec![Container {
                name: "c".into(),
                requests: cpu(500),
                allocated: Some(cpu(500)),
                actuated: Some(cpu(250)),
                ..Container::default()
            }],
            resources: Some(ResourceRequirements {
                requests: cpu(1000),
                limits: cpu(2000),
            }),
            resize_infeasible: true,
            resource_claims: vec![PodResourceClaim {
                name: "gpu".into(),
                source: ClaimSource::TemplateName("one-gpu".into()),
            }],
            scheduling_group: Some("trainers".into()),
            ..Pod::default()
        }
    }

    #[test]
    fn a_0_7_module_gets_the_pod_without_the_fields_0_8_added() {
        let current = super::super::convert::pod_to_wit(&pod_of_0_8());
        let old: w07::Pod = adapt(&current);
        let mut want = serde_json::to_value(&current).unwrap();
        for field in [
            "resources",
            "resize_infeasible",
            "resource_claims",
            "resource_claim_statuses",
            "scheduling_group",
        ] {
            want.as_object_mut().unwrap().remove(field).unwrap();
        }
        for c in want["containers"].as_array_mut().unwrap() {
            let c = c.as_object_mut().unwrap();
            c.remove("allocated").unwrap();
            c.remove("actuated").unwrap();
        }
        assert_eq!(serde_json::to_value(&old).unwrap(), want);
        assert_eq!(old.containers[0].requests, [("cpu".to_owned(), 500)]);
    }

    #[test]
    fn a_0_7_module_gets_the_node_without_its_declared_features() {
        let mut node = berth_sdk::NodeInfo::new(berth_sdk::Node {
            name: "n1".into(),
            declared_features: vec!["GuaranteedQoSPodCPUResize".into()],
            ..berth_sdk::Node::default()
        });
        node.add_pod(&pod_of_0_8());
        let current = super::super::convert::node_info_to_wit(&node, true);
        let old: w07::NodeInfo = adapt(&current);
        assert_eq!(old.node.name, "n1");
        assert_eq!(old.pod_count, 1);
        assert_eq!(old.pods[0].uid, "u1");
        assert_eq!(old.requested.milli_cpu, current.requested.milli_cpu);
    }

    #[test]
    fn answers_of_a_0_7_module_read_as_the_current_track_s() {
        let old = ex07::post_filter::PostFilterResult {
            status: w07::Status {
                code: w07::Code::Unschedulable,
                reasons: vec!["no room".into()],
            },
            nominated_node_name: Some("n1".into()),
            victims: vec!["v1".into()],
            candidates: vec![ex07::post_filter::Candidate {
                node: "n1".into(),
                victims: vec!["v1".into()],
                pdb_violations: 1,
            }],
        };
        let current: ex::post_filter::PostFilterResult = adapt(&old);
        assert!(matches!(current.status.code, w::Code::Unschedulable));
        assert_eq!(current.status.reasons, ["no room"]);
        assert_eq!(current.candidates[0].pdb_violations, 1);
        assert_eq!(current.nominated_node_name.as_deref(), Some("n1"));
    }

    #[test]
    fn event_flags_keep_every_flag_across_the_tracks() {
        for (i, flag) in w::ActionType::ALL_IN_ORDER.iter().enumerate() {
            let old: w07::ActionType = adapt(flag);
            assert_eq!(old, w07::ActionType::ALL_IN_ORDER[i]);
            let back: w::ActionType = adapt(&old);
            assert_eq!(back, *flag);
        }
        let several = w::ActionType::ADD | w::ActionType::UPDATE_POD_SCALE_DOWN;
        let back: w::ActionType = adapt(&adapt::<_, w07::ActionType>(&several));
        assert_eq!(back, several);
    }

    #[test]
    fn every_kind_a_host_function_answers_reaches_a_0_7_module() {
        use super::super::convert;
        use berth_sdk::{PodDisruptionBudget, Status, volumes as v};
        let _: w07::PodDisruptionBudget =
            try_adapt(&convert::budget_to_wit(&PodDisruptionBudget::default())).unwrap();
        let _: w07::PersistentVolumeClaim =
            try_adapt(&convert::claim_to_wit(&v::PersistentVolumeClaim::default())).unwrap();
        let _: w07::PersistentVolume =
            try_adapt(&convert::volume_to_wit(&v::PersistentVolume::default())).unwrap();
        let _: w07::StorageClass =
            try_adapt(&convert::class_to_wit(&v::StorageClass::default())).unwrap();
        let _: w07::CsiNode = try_adapt(&convert::csi_node_to_wit(&v::CsiNode::default())).unwrap();
        let _: w07::CsiDriver =
            try_adapt(&convert::csi_driver_to_wit(&v::CsiDriver::default())).unwrap();
        let status: w07::Status =
            try_adapt(&convert::status_to_wit(&Status::unschedulable("full"))).unwrap();
        assert_eq!(status.reasons, ["full"]);
        let waiting: Vec<host07::WaitingPod> = try_adapt(&vec![host::WaitingPod {
            uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            node: "n".into(),
            pending_plugins: vec!["Gang".into()],
        }])
        .unwrap();
        assert_eq!(waiting[0].pending_plugins, ["Gang"]);
        for level in [
            host07::LogLevel::Trace,
            host07::LogLevel::Debug,
            host07::LogLevel::Info,
            host07::LogLevel::Warn,
            host07::LogLevel::Error,
        ] {
            let _: host::LogLevel = try_adapt(&level).unwrap();
        }
        let claim: w::ClaimRef = try_adapt(&w07::ClaimRef {
            namespace: "ns".into(),
            name: "c".into(),
            uid: "u".into(),
        })
        .unwrap();
        assert_eq!(claim.name, "c");
    }
}
