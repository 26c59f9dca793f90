//! The adapters for modules of earlier tracks (0.7, 0.8): each track's last WIT
//! package (`wit/adapted/<track>`, frozen) bound beside the current one, its host
//! imports served by the current ones, and its exports called with the current
//! track's types.
//!
//! Each move of the minor added fields to records the host sends (0.8.0: the pod,
//! its containers and the node; 0.9.0: the pod and its containers again) and cases
//! to enums and variants (0.9.0: event resources, objects, an action flag); the
//! kinds a module answers are the same in every track. A value crosses between two
//! bindings by its serde form: fields the older record lacks are dropped on the way
//! in, and what an older module answers reads as the same value of the current
//! track. That costs a conversion per call, which only modules of older tracks pay;
//! rebuilding against the current SDK removes it. The host never sends an older
//! module a case its track lacks: its hints are asked only about the events it
//! registered, which its own enums name; an action flag it lacks reads as
//! `update-other` (see [`flags_serde`]).

use super::bindings::berth::scheduler::{host, types as w, workload as wl};
use super::bindings::exports::berth::scheduler as ex;
use super::exports::Either;
use super::host_imports::HostCtx;
use crate::plugin::group_what_if::GroupSimulationHandle;
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

/// Host-side bindings of the 0.8 track's last package (0.8.2).
#[allow(missing_docs, clippy::all)]
pub(crate) mod bindings08 {
    wasmtime::component::bindgen!({
        path: "../wit/adapted/0.8",
        world: "berth:scheduler/scheduler-plugin",
        with: {
            "berth:scheduler/host.cycle-state": crate::plugin::CycleState,
            "berth:scheduler/host.node-simulation": crate::plugin::Simulation,
            "berth:scheduler/workload.group-simulation": crate::plugin::group_what_if::GroupSimulationHandle,
        },
        additional_derives: [serde::Serialize, serde::Deserialize],
    });
}

use bindings::berth::scheduler::types as w07;
use bindings08::berth::scheduler::{types as w08, workload as wl08};

/// The 0.7 track's exports, and the optional interfaces added on the 0.8 track
/// after it (PlacementFeasible, 0.8.1). No 0.7 module has those, as its world lacks
/// them: the host finds a module's optional exports by name, so for a 0.7 module
/// they are always absent, and the current bindings stand in for their types
/// (PlacementGenerate too, 0.8.1; PodGroupPostFilter, 0.8.2).
pub(crate) mod exports07 {
    pub(crate) use super::bindings::exports::berth::scheduler::*;
    pub(crate) use crate::wasm::bindings::exports::berth::scheduler::{
        placement_feasible, placement_generate, pod_group_post_filter, select_victims, sign,
    };
}

/// The 0.8 track's exports, and the optional interfaces added on the 0.9 track
/// (SignPod, 0.9.1; SelectVictimsOnNode, 0.9.3), which no 0.8 module has either.
pub(crate) mod exports08 {
    pub(crate) use super::bindings08::exports::berth::scheduler::*;
    pub(crate) use crate::wasm::bindings::exports::berth::scheduler::{select_victims, sign};
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
                "the adapter for older tracks cannot convert a {}: {e}",
                std::any::type_name::<T>()
            )
        })
}

/// [`try_adapt`] for the host functions an older module imports, which answer plain
/// values: the kinds they carry are the same in every track (the tests convert
/// each), so a failure is a bug of this file.
fn adapt<T: Serialize, U: DeserializeOwned>(value: &T) -> U {
    try_adapt(value).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The serde form of an `action-type` flags value of any track's bindings (bindgen
/// derives none for flags): the names of the flags set. A name the target track
/// lacks (`update-pod-generated-resource-claim` for 0.7 and 0.8 modules) reads as
/// `update-other`, which upstream's `Update` covers too.
macro_rules! flags_serde {
    ($( $t:ty { $( $flag:ident $name:literal ),* $(,)? } )*) => { $(
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.names().serialize(s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let names = Vec::<String>::deserialize(d)?;
                Ok(names.iter().fold(<$t>::empty(), |acc, n| acc | <$t>::named(n)))
            }
        }

        impl $t {
            /// Every flag, in the WIT's declaration order, with its WIT name.
            pub(crate) const ALL_IN_ORDER: &[($t, &str)] = &[ $( (<$t>::$flag, $name) ),* ];

            /// The names of the flags set, in declaration order.
            pub(crate) fn names(&self) -> Vec<&'static str> {
                <$t>::ALL_IN_ORDER
                    .iter()
                    .filter(|(f, _)| self.contains(*f))
                    .map(|(_, n)| *n)
                    .collect()
            }

            /// The flag of a WIT name; `update-other` for a name this track lacks.
            pub(crate) fn named(name: &str) -> $t {
                <$t>::ALL_IN_ORDER
                    .iter()
                    .find(|(_, n)| *n == name)
                    .map_or(<$t>::UPDATE_OTHER, |(f, _)| *f)
            }
        }
    )* };
}

flags_serde!(
    w::ActionType {
        ADD "add", DELETE "delete",
        UPDATE_NODE_ALLOCATABLE "update-node-allocatable",
        UPDATE_NODE_LABEL "update-node-label",
        UPDATE_NODE_TAINT "update-node-taint",
        UPDATE_NODE_CONDITION "update-node-condition",
        UPDATE_NODE_ANNOTATION "update-node-annotation",
        UPDATE_POD_LABEL "update-pod-label",
        UPDATE_POD_SCALE_DOWN "update-pod-scale-down",
        UPDATE_POD_TOLERATION "update-pod-toleration",
        UPDATE_POD_SCHEDULING_GATES_ELIMINATED "update-pod-scheduling-gates-eliminated",
        UPDATE_POD_GENERATED_RESOURCE_CLAIM "update-pod-generated-resource-claim",
        UPDATE_OTHER "update-other",
    }
    w07::ActionType {
        ADD "add", DELETE "delete",
        UPDATE_NODE_ALLOCATABLE "update-node-allocatable",
        UPDATE_NODE_LABEL "update-node-label",
        UPDATE_NODE_TAINT "update-node-taint",
        UPDATE_NODE_CONDITION "update-node-condition",
        UPDATE_NODE_ANNOTATION "update-node-annotation",
        UPDATE_POD_LABEL "update-pod-label",
        UPDATE_POD_SCALE_DOWN "update-pod-scale-down",
        UPDATE_POD_TOLERATION "update-pod-toleration",
        UPDATE_POD_SCHEDULING_GATES_ELIMINATED "update-pod-scheduling-gates-eliminated",
        UPDATE_OTHER "update-other",
    }
    w08::ActionType {
        ADD "add", DELETE "delete",
        UPDATE_NODE_ALLOCATABLE "update-node-allocatable",
        UPDATE_NODE_LABEL "update-node-label",
        UPDATE_NODE_TAINT "update-node-taint",
        UPDATE_NODE_CONDITION "update-node-condition",
        UPDATE_NODE_ANNOTATION "update-node-annotation",
        UPDATE_POD_LABEL "update-pod-label",
        UPDATE_POD_SCALE_DOWN "update-pod-scale-down",
        UPDATE_POD_TOLERATION "update-pod-toleration",
        UPDATE_POD_SCHEDULING_GATES_ELIMINATED "update-pod-scheduling-gates-eliminated",
        UPDATE_OTHER "update-other",
    }
);

/// Links the older tracks' host imports, served by the current ones.
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<HostCtx>,
) -> wasmtime::Result<()> {
    let mut features = bindings::LinkOptions::default();
    features.workload_scheduling(true);
    bindings::SchedulerPlugin::add_to_linker::<HostCtx, wasmtime::component::HasSelf<HostCtx>>(
        linker,
        &features,
        |c| c,
    )?;
    let mut features = bindings08::LinkOptions::default();
    features.workload_scheduling(true);
    bindings08::SchedulerPlugin::add_to_linker::<HostCtx, wasmtime::component::HasSelf<HostCtx>>(
        linker,
        &features,
        |c| c,
    )
}

/// Serves an older track's `host` interface (the same functions in 0.7 and 0.8)
/// with the current one's.
macro_rules! adapted_host {
    ($b:ident) => {
        const _: () = {
            use $b::berth::scheduler::{host as h, types as t};

            impl t::Host for HostCtx {}

            impl h::Host for HostCtx {
                fn log(&mut self, level: h::LogLevel, message: String) {
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

                fn waiting_pods(&mut self) -> Vec<h::WaitingPod> {
                    adapt(&host::Host::waiting_pods(self))
                }

                fn allow_waiting_pod(&mut self, uid: String, plugin: String) {
                    host::Host::allow_waiting_pod(self, uid, plugin)
                }

                fn reject_waiting_pod(&mut self, uid: String, plugin: String, message: String) {
                    host::Host::reject_waiting_pod(self, uid, plugin, message)
                }

                fn pod_disruption_budgets(&mut self) -> Vec<t::PodDisruptionBudget> {
                    adapt(&host::Host::pod_disruption_budgets(self))
                }

                fn get_persistent_volume_claim(
                    &mut self,
                    namespace: String,
                    name: String,
                ) -> Option<t::PersistentVolumeClaim> {
                    adapt(&host::Host::get_persistent_volume_claim(
                        self, namespace, name,
                    ))
                }

                fn get_persistent_volume(&mut self, name: String) -> Option<t::PersistentVolume> {
                    adapt(&host::Host::get_persistent_volume(self, name))
                }

                fn get_storage_class(&mut self, name: String) -> Option<t::StorageClass> {
                    adapt(&host::Host::get_storage_class(self, name))
                }

                fn get_csi_node(&mut self, name: String) -> Option<t::CsiNode> {
                    adapt(&host::Host::get_csi_node(self, name))
                }

                fn get_csi_driver(&mut self, name: String) -> Option<t::CsiDriver> {
                    adapt(&host::Host::get_csi_driver(self, name))
                }

                fn persistent_volumes_of_class(
                    &mut self,
                    class: String,
                ) -> Vec<t::PersistentVolume> {
                    adapt(&host::Host::persistent_volumes_of_class(self, class))
                }

                fn assume_volume_bound(
                    &mut self,
                    volume: String,
                    claim: t::ClaimRef,
                ) -> Result<(), String> {
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

                fn bind_volume(
                    &mut self,
                    volume: String,
                    claim: t::ClaimRef,
                ) -> Result<(), String> {
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

                fn simulate(&mut self, node: String) -> Result<Resource<Simulation>, t::Status> {
                    host::Host::simulate(self, node).map_err(|s| adapt(&s))
                }
            }

            impl h::HostNodeSimulation for HostCtx {
                fn remove_pod(&mut self, this: Resource<Simulation>, uid: String) -> t::Status {
                    adapt(&host::HostNodeSimulation::remove_pod(self, this, uid))
                }

                fn add_pod(&mut self, this: Resource<Simulation>, uid: String) -> t::Status {
                    adapt(&host::HostNodeSimulation::add_pod(self, this, uid))
                }

                fn fits(&mut self, this: Resource<Simulation>) -> t::Status {
                    adapt(&host::HostNodeSimulation::fits(self, this))
                }

                fn drop(&mut self, rep: Resource<Simulation>) -> wasmtime::Result<()> {
                    host::HostNodeSimulation::drop(self, rep)
                }
            }

            impl h::HostCycleState for HostCtx {
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
        };
    };
}

adapted_host!(bindings);
adapted_host!(bindings08);

// 0.7's `workload` interface has only types.
impl bindings::berth::scheduler::workload::Host for HostCtx {}

impl wl08::Host for HostCtx {
    fn get_pod_group(&mut self, namespace: String, name: String) -> Option<wl08::PodGroupState> {
        adapt(&wl::Host::get_pod_group(self, namespace, name))
    }

    fn get_pod_group_preemption(
        &mut self,
        namespace: String,
        name: String,
    ) -> Option<wl08::PodGroupPreemption> {
        adapt(&wl::Host::get_pod_group_preemption(self, namespace, name))
    }

    fn simulate_group(&mut self) -> Result<Resource<GroupSimulationHandle>, w08::Status> {
        wl::Host::simulate_group(self).map_err(|s| adapt(&s))
    }
}

impl wl08::HostGroupSimulation for HostCtx {
    fn remove_pod(&mut self, this: Resource<GroupSimulationHandle>, uid: String) -> w08::Status {
        adapt(&wl::HostGroupSimulation::remove_pod(self, this, uid))
    }
    fn add_pod(&mut self, this: Resource<GroupSimulationHandle>, uid: String) -> w08::Status {
        adapt(&wl::HostGroupSimulation::add_pod(self, this, uid))
    }
    fn schedule(
        &mut self,
        this: Resource<GroupSimulationHandle>,
    ) -> Result<Vec<wl08::ProposedAssignment>, w08::Status> {
        wl::HostGroupSimulation::schedule(self, this)
            .map(|a| adapt(&a))
            .map_err(|s| adapt(&s))
    }
    fn fits(
        &mut self,
        this: Resource<GroupSimulationHandle>,
        assignments: Vec<wl08::ProposedAssignment>,
    ) -> w08::Status {
        adapt(&wl::HostGroupSimulation::fits(
            self,
            this,
            adapt(&assignments),
        ))
    }
    fn drop(&mut self, rep: Resource<GroupSimulationHandle>) -> wasmtime::Result<()> {
        wl::HostGroupSimulation::drop(self, rep)
    }
}

type S<'s> = &'s mut Store<HostCtx>;
type St = Resource<CycleState>;

/// Writes the calls of one interface's exports on [`Either`]: a current module's
/// as they are, an older module's with each argument and the answer adapted (`=` an
/// argument that is the same Rust type in every bindings; `~` one adapted and lent,
/// `[~]` a slice adapted and lent, `v` one adapted and given, `?` an optional one
/// adapted and lent). The older track's types are the ones its call takes.
macro_rules! calls {
    ( $iface:ident { $(
        fn $call:ident ( $( $mode:tt $arg:ident : $aty:ty ),* ) -> $ret:ty ;
    )* } ) => {
        impl Either<'_, ex::$iface::Guest, exports07::$iface::Guest, exports08::$iface::Guest> {
            $(
                pub(crate) fn $call(&self, s: S<'_>, $( $arg: $aty ),*) -> wasmtime::Result<$ret> {
                    match self {
                        Either::Current(g) => g.$call(s, $( $arg ),*),
                        Either::V0_7(g) => {
                            $( let $arg = calls!(@arg $mode $arg); )*
                            let r = g.$call(s, $( calls!(@pass $mode $arg) ),*)?;
                            try_adapt(&r)
                        }
                        Either::V0_8(g) => {
                            $( let $arg = calls!(@arg $mode $arg); )*
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
    (@arg [~] $arg:ident) => { try_adapt::<_, Vec<_>>(&$arg)? };
    (@arg v $arg:ident) => { try_adapt(&$arg)? };
    (@arg ? $arg:ident) => { $arg.map(try_adapt).transpose()? };
    (@pass = $arg:ident) => { $arg };
    (@pass ~ $arg:ident) => { &$arg };
    (@pass [~] $arg:ident) => { &$arg };
    (@pass v $arg:ident) => { $arg };
    (@pass ? $arg:ident) => { $arg.as_ref() };
}

calls!(plugin {
    fn call_info() -> w::PluginInfo;
    fn call_configure(= args_json: &str) -> Result<w::Configuration, String>;
});

calls!(replica {
    fn call_sync_nodes(
        [~] updated: &[(u32, w::NodeInfo)],
        [~] changed: &[ex::replica::NodePodsChange],
        = removed: &[u32],
        ? begin: Option<&w::Pod>
    ) -> ();
});

calls!(cycle {
    fn call_begin_cycle(~ pod: &w::Pod) -> ();
});

calls!(queue_sort {
    fn call_sort_key(~ pod: &w::Pod) -> Vec<i64>;
});

calls!(enqueue_extensions {
    fn call_hint(
        v event: w::ClusterEvent,
        ~ pod: &w::Pod,
        ? old: Option<&w::Object>,
        ? new: Option<&w::Object>
    ) -> Result<w::QueueingHint, String>;
});

calls!(pre_enqueue {
    fn call_pre_enqueue(~ pod: &w::Pod) -> w::Status;
});

calls!(pre_filter {
    fn call_pre_filter(= st: St) -> ex::pre_filter::PreFilterResult;
});

calls!(pre_filter_extensions {
    fn call_add_pod(= st: St, ~ pod: &w::Pod, = slot: u32) -> w::Status;
    fn call_remove_pod(= st: St, ~ pod: &w::Pod, = slot: u32) -> w::Status;
});

calls!(filter {
    fn call_filter(= st: St, = slots: &[u32]) -> Vec<ex::filter::NodeStatus>;
});

calls!(post_filter {
    fn call_post_filter(
        = st: St,
        [~] statuses: &[ex::filter::NodeStatus]
    ) -> ex::post_filter::PostFilterResult;
});

calls!(pre_score {
    fn call_pre_score(= st: St, = slots: &[u32]) -> w::Status;
});

calls!(score {
    fn call_score(= st: St, = slots: &[u32]) -> Result<Vec<i64>, w::Status>;
    fn call_normalize_score(= st: St, = scores: &[i64]) -> Result<Vec<i64>, w::Status>;
});

calls!(reserve {
    fn call_reserve(= st: St, = node: &str) -> w::Status;
    fn call_unreserve(= st: St, = node: &str) -> ();
});

calls!(permit {
    fn call_permit(= st: St, = node: &str) -> ex::permit::PermitResult;
});

calls!(pre_bind {
    fn call_pre_bind(= st: St, = node: &str) -> w::Status;
});

calls!(bind {
    fn call_bind(= st: St, = node: &str) -> w::Status;
});

calls!(post_bind {
    fn call_post_bind(= st: St, = node: &str) -> ();
});

// `implemented` is called on each track's own exports, when the module loads.
calls!(placement_score {
    fn call_score_placement(
        = st: St,
        ~ group: &wl::PodGroup,
        ~ assignments: &wl::PodGroupAssignments
    ) -> Result<i64, w::Status>;
    fn call_normalize_placement_score(
        = st: St,
        ~ group: &wl::PodGroup,
        = scores: &[i64]
    ) -> Result<Vec<i64>, w::Status>;
});

// Added on the 0.8 track: a 0.7 module never has them (its calls adapt the current
// types to themselves, and are never made).
calls!(placement_feasible {
    fn call_placement_feasible(
        = st: St,
        ~ group: &wl::PodGroup,
        v progress: wl::PlacementProgress
    ) -> w::Status;
});

calls!(placement_generate {
    fn call_generate_placements(
        = st: St,
        ~ group: &wl::PodGroup,
        ~ parent: &wl::Placement
    ) -> Result<Vec<wl::Placement>, w::Status>;
});

calls!(pod_group_post_filter {
    fn call_pod_group_post_filter(
        = st: St,
        ~ group: &wl::PodGroup
    ) -> ex::pod_group_post_filter::PodGroupPostFilterResult;
});

// Added on the 0.9 track (0.9.1): no 0.7 or 0.8 module has it.
calls!(sign {
    fn call_sign_pod(= st: St) -> Result<Vec<ex::sign::SignFragment>, w::Status>;
});

// Added on the 0.9 track (0.9.3): no 0.7 or 0.8 module has it.
calls!(select_victims {
    fn call_select_victims_on_node(
        = st: St,
        = slot: u32
    ) -> Result<crate::wasm::bindings::berth::scheduler::dry_run::Victims, w::Status>;
});

#[cfg(test)]
mod tests {
    use super::bindings::berth::scheduler::host as host07;
    use super::exports07 as ex07;
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
            // 0.9.0's.
            "host_network",
            "host_users",
            "ephemeral_containers",
            "extended_resource_claim_status",
        ] {
            want.as_object_mut().unwrap().remove(field).unwrap();
        }
        for c in want["containers"].as_array_mut().unwrap() {
            let c = c.as_object_mut().unwrap();
            for field in [
                "allocated",
                "actuated",
                "restart_policy_rule_actions",
                "volume_mounts",
            ] {
                c.remove(field).unwrap();
            }
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
        for (flag, name) in w07::ActionType::ALL_IN_ORDER {
            let current: w::ActionType = adapt(flag);
            assert_eq!(current, w::ActionType::named(name), "{name}");
            let back: w07::ActionType = adapt(&current);
            assert_eq!(back, *flag, "{name}");
            let eight: w08::ActionType = adapt(&current);
            assert_eq!(eight, w08::ActionType::named(name), "{name}");
        }
        let several = w::ActionType::ADD | w::ActionType::UPDATE_POD_SCALE_DOWN;
        let back: w::ActionType = adapt(&adapt::<_, w07::ActionType>(&several));
        assert_eq!(back, several);
    }

    #[test]
    fn a_flag_an_older_track_lacks_reads_as_update_other() {
        let generated = w::ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM;
        let old: w08::ActionType = adapt(&(generated | w::ActionType::UPDATE_POD_LABEL));
        assert_eq!(
            old,
            w08::ActionType::UPDATE_OTHER | w08::ActionType::UPDATE_POD_LABEL
        );
        let old: w07::ActionType = adapt(&generated);
        assert_eq!(old, w07::ActionType::UPDATE_OTHER);
    }

    #[test]
    fn a_0_8_module_gets_the_pod_without_the_fields_0_9_added() {
        let mut pod = pod_of_0_8();
        pod.host_network = true;
        pod.host_users = Some(false);
        pod.containers[0].restart_policy_rule_actions = vec!["RestartAllContainers".into()];
        pod.containers[0].volume_mounts = vec![berth_sdk::VolumeMount {
            name: "data".into(),
            bind_mount_options: vec!["rro".into()],
        }];
        pod.ephemeral_containers = vec![Container {
            name: "debug".into(),
            ..Container::default()
        }];
        pod.extended_resource_claim_status = Some(berth_sdk::PodExtendedResourceClaimStatus {
            resource_claim_name: "p-extended-resources-x".into(),
            request_mappings: Vec::new(),
        });
        let current = super::super::convert::pod_to_wit(&pod);
        let old: w08::Pod = adapt(&current);
        assert_eq!(old.uid, "u1");
        assert_eq!(old.resource_claims.len(), 1);
        assert_eq!(old.scheduling_group.as_deref(), Some("trainers"));
        assert_eq!(old.containers[0].actuated, current.containers[0].actuated);
        let json = serde_json::to_value(&old).unwrap();
        for field in [
            "host_network",
            "host_users",
            "ephemeral_containers",
            "extended_resource_claim_status",
        ] {
            assert!(json.get(field).is_none(), "{field}");
        }
        assert!(json["containers"][0].get("volume_mounts").is_none());
    }

    #[test]
    fn answers_of_a_0_8_module_read_as_the_current_track_s() {
        let old = w08::Configuration {
            only_for_pods_with: vec![w08::PodFeature::Volumes, w08::PodFeature::DefaultSelector],
        };
        let current: w::Configuration = adapt(&old);
        assert_eq!(
            current.only_for_pods_with,
            [w::PodFeature::Volumes, w::PodFeature::DefaultSelector]
        );
        let registration = w08::EventRegistration {
            event: w08::ClusterEvent {
                resource: w08::EventResource::CsiDriver,
                actions: w08::ActionType::ADD | w08::ActionType::UPDATE_OTHER,
            },
            has_hint: true,
        };
        let current: w::EventRegistration = adapt(&registration);
        assert_eq!(current.event.resource, w::EventResource::CsiDriver);
        assert_eq!(
            current.event.actions,
            w::ActionType::ADD | w::ActionType::UPDATE_OTHER
        );
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
