//! The host side of an instance's imports: what its store holds ([`HostCtx`]), what
//! the host offers it ([`HostServices`]), and the `berth:scheduler/host` functions,
//! node simulations and cycle state the guest calls.

use super::bindings::berth::scheduler::{host, types as w, workload as wl};
use super::capability::{CallScope, HostCall};
use super::convert;
use super::output::{GuestOutput, Level};
use super::sandbox::SandboxClock;
use crate::cluster::storage::Storage;
use crate::cluster::{Binder, Budgets, Namespaces};
use crate::plugin::group_what_if::{self, GroupSimulationHandle};
use crate::plugin::waiting::WaitingPods;
use crate::plugin::{CycleState, Simulation, WhatIf};
use berth_sdk::Status;
use std::sync::Arc;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// What a store holds: the WASI context (what the plugin's grants allow, see
/// [`super::sandbox`]), the resource table, limits, the monotonic clock, where
/// bindings go and where output goes.
pub struct HostCtx {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limits: super::limits::StoreLimiter,
    pub(super) clock: SandboxClock,
    pub(super) services: HostServices,
    pub(super) output: GuestOutput,
    /// The what-if API, lent during a PostFilter call.
    pub(super) dry_run: Option<Box<dyn WhatIf>>,
    /// How long the current call has waited in the host for the cluster
    /// (`wait-storage-change`): not counted against the call deadline.
    pub(super) waited: std::time::Duration,
    /// The plugin's name (the instance's module's).
    pub(super) plugin: String,
    /// Who the call under way is for (see [`super::capability`]).
    pub(super) scope: CallScope,
    /// The first host call the call under way was refused: the call fails with it.
    pub(super) refused: Option<String>,
    /// The cycle's pod was deleted while the call waited in the host: the call
    /// fails, whatever the guest answers.
    pub(super) pod_gone: bool,
    /// The plugins whose waits this one may act on besides its own.
    pub(super) waits_of: Vec<String>,
}

impl HostCtx {
    /// Refuses `call` for `why`: logged, counted, and kept so that the call under way
    /// fails; answers the message the guest gets.
    fn refuse(&mut self, call: HostCall, why: String) -> String {
        let message = format!("{} refused at {}: {why}", call.as_str(), self.scope.point);
        tracing::warn!(plugin = %self.plugin, call = call.as_str(), point = self.scope.point, "host call refused: {why}");
        if let Some(m) = &self.services.metrics {
            m.count_refused_call(&self.plugin, call.as_str(), self.scope.point);
        }
        self.refused.get_or_insert_with(|| message.clone());
        message
    }

    /// Whether the plugin may write (or delete) the CycleState `key`: a key under
    /// the host's prefix is not written, and the attempt is logged (the write has no
    /// answer to fail with; the plugins reading the key keep the host's value).
    fn may_write_state(&self, key: &str) -> bool {
        let ok = CycleState::writable_by_plugins(key);
        if !ok {
            tracing::warn!(plugin = %self.plugin, key, point = self.scope.point, "a plugin's write of a host-owned CycleState key was ignored");
        }
        ok
    }

    /// `check`'s answer, or the refusal of `call`.
    fn checked(&mut self, call: HostCall, check: Result<(), String>) -> Result<(), String> {
        check.map_err(|why| self.refuse(call, why))
    }

    /// Whether `plugin`, named by the guest, is the calling plugin itself or one whose
    /// waits its grants name (`sandbox.grants.waitsOf`).
    fn own_wait(&mut self, call: HostCall, plugin: &str) -> bool {
        if plugin == self.plugin || self.waits_of.iter().any(|w| w == plugin) {
            return true;
        }
        let why = format!(
            "plugin {} may allow or reject only its own waits, not {plugin:?}'s",
            self.plugin
        );
        self.refuse(call, why);
        false
    }
}

/// What the host offers an instance's imports: where bindings go, the namespaces,
/// the pods waiting at Permit.
#[derive(Clone, Default)]
pub struct HostServices {
    /// What `bind-pod` reaches (binding-cycle instances only).
    pub binder: Option<Arc<dyn Binder>>,
    /// What `namespace-labels` reads.
    pub namespaces: Namespaces,
    /// What the waiting-pod calls act on.
    pub waiting: WaitingPods,
    /// Where calls' durations and traps are counted (none: not counted).
    pub metrics: Option<crate::metrics::Metrics>,
    /// What `pod-disruption-budgets` reads.
    pub budgets: Budgets,
    /// What the storage listers (`get-persistent-volume-claim`, ...) read.
    pub storage: Storage,
    /// What `workload.get-pod-group` reads.
    pub pod_groups: crate::cluster::pod_groups::PodGroups,
    /// The dynamic resource allocation objects.
    pub dra: crate::cluster::dra::Dra,
}

impl WasiView for HostCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl w::Host for HostCtx {}

impl super::bindings::berth::scheduler::workload::Host for HostCtx {
    fn get_pod_group(
        &mut self,
        namespace: String,
        name: String,
    ) -> Option<super::bindings::berth::scheduler::workload::PodGroupState> {
        self.services.pod_groups.state(&namespace, &name).map(|g| {
            super::bindings::berth::scheduler::workload::PodGroupState {
                min_count: g.min_count,
                all_pods: g.all_pods,
                scheduled_pods: g.scheduled_pods,
            }
        })
    }

    fn get_pod_group_preemption(
        &mut self,
        namespace: String,
        name: String,
    ) -> Option<wl::PodGroupPreemption> {
        self.services
            .pod_groups
            .get(&namespace, &name)
            .map(|g| wl::PodGroupPreemption {
                priority: g.priority,
                preemption_policy: convert::preemption_policy_to_wit(g.preemption_policy),
                disruption_all: g.disruption_all,
            })
    }

    fn simulate_group(&mut self) -> Result<Resource<GroupSimulationHandle>, w::Status> {
        if !group_what_if::lent() {
            return Err(convert::status_to_wit(&Status::error(
                "simulate-group is only available during PodGroupPostFilter",
            )));
        }
        self.table
            .push(GroupSimulationHandle)
            .map_err(|e| convert::status_to_wit(&Status::error(format!("resource table: {e}"))))
    }
}

impl HostCtx {
    /// Asks the what-if lent to this thread; the time the host spends answering is
    /// not counted against the call's deadline (it runs the profile's plugins).
    fn ask_group(
        &mut self,
        question: group_what_if::GroupAsk,
    ) -> Result<group_what_if::GroupAnswer, Status> {
        let started = std::time::Instant::now();
        let answer = group_what_if::ask(question);
        self.waited += started.elapsed();
        answer
    }
}

impl wl::HostGroupSimulation for HostCtx {
    fn remove_pod(&mut self, _this: Resource<GroupSimulationHandle>, uid: String) -> w::Status {
        let a = self.ask_group(group_what_if::GroupAsk::Remove(uid));
        convert::status_to_wit(&group_what_if::status_of(a))
    }
    fn add_pod(&mut self, _this: Resource<GroupSimulationHandle>, uid: String) -> w::Status {
        let a = self.ask_group(group_what_if::GroupAsk::Add(uid));
        convert::status_to_wit(&group_what_if::status_of(a))
    }
    fn schedule(
        &mut self,
        _this: Resource<GroupSimulationHandle>,
    ) -> Result<Vec<wl::ProposedAssignment>, w::Status> {
        let a = self.ask_group(group_what_if::GroupAsk::Schedule);
        group_what_if::placed_of(a)
            .map(|p| convert::assignments_to_wit(&p))
            .map_err(|s| convert::status_to_wit(&s))
    }
    fn fits(
        &mut self,
        _this: Resource<GroupSimulationHandle>,
        assignments: Vec<wl::ProposedAssignment>,
    ) -> w::Status {
        let a = self.ask_group(group_what_if::GroupAsk::Fits(
            convert::assignments_from_wit(assignments),
        ));
        convert::status_to_wit(&group_what_if::status_of(a))
    }
    fn drop(&mut self, rep: Resource<GroupSimulationHandle>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl host::Host for HostCtx {
    fn log(&mut self, level: host::LogLevel, message: String) {
        let level = match level {
            host::LogLevel::Trace => Level::Trace,
            host::LogLevel::Debug => Level::Debug,
            host::LogLevel::Info => Level::Info,
            host::LogLevel::Warn => Level::Warn,
            host::LogLevel::Error => Level::Error,
        };
        self.output.log(level, &message);
    }

    fn waiting_pods(&mut self) -> Vec<host::WaitingPod> {
        self.services
            .waiting
            .list()
            .into_iter()
            .map(|p| host::WaitingPod {
                uid: p.uid,
                namespace: p.namespace,
                name: p.name,
                node: p.node,
                pending_plugins: p.pending_plugins,
            })
            .collect()
    }

    fn allow_waiting_pod(&mut self, uid: String, plugin: String) {
        if self.own_wait(HostCall::AllowWaitingPod, &plugin) {
            self.services.waiting.allow(&uid, &plugin);
        }
    }

    fn reject_waiting_pod(&mut self, uid: String, plugin: String, message: String) {
        if self.own_wait(HostCall::RejectWaitingPod, &plugin) {
            self.services.waiting.reject(&uid, &plugin, &message);
        }
    }

    fn pod_disruption_budgets(&mut self) -> Vec<w::PodDisruptionBudget> {
        self.services
            .budgets
            .list()
            .iter()
            .map(convert::budget_to_wit)
            .collect()
    }

    fn get_persistent_volume_claim(
        &mut self,
        namespace: String,
        name: String,
    ) -> Option<w::PersistentVolumeClaim> {
        self.services
            .storage
            .claim(&namespace, &name)
            .as_ref()
            .map(convert::claim_to_wit)
    }

    fn get_persistent_volume(&mut self, name: String) -> Option<w::PersistentVolume> {
        self.services
            .storage
            .volume(&name)
            .as_ref()
            .map(convert::volume_to_wit)
    }

    fn get_storage_class(&mut self, name: String) -> Option<w::StorageClass> {
        self.services
            .storage
            .class(&name)
            .as_ref()
            .map(convert::class_to_wit)
    }

    fn get_csi_node(&mut self, name: String) -> Option<w::CsiNode> {
        self.services
            .storage
            .csi_node(&name)
            .as_ref()
            .map(convert::csi_node_to_wit)
    }

    fn get_csi_driver(&mut self, name: String) -> Option<w::CsiDriver> {
        self.services
            .storage
            .csi_driver(&name)
            .as_ref()
            .map(convert::csi_driver_to_wit)
    }

    fn persistent_volumes_of_class(&mut self, class: String) -> Vec<w::PersistentVolume> {
        self.services
            .storage
            .volumes_of_class(&class)
            .iter()
            .map(convert::volume_to_wit)
            .collect()
    }

    fn csi_storage_capacities_of_class(&mut self, class: String) -> Vec<w::CsiStorageCapacity> {
        self.services
            .storage
            .capacities_of_class(&class)
            .iter()
            .map(convert::storage_capacity_to_wit)
            .collect()
    }

    fn assume_volume_bound(&mut self, volume: String, claim: w::ClaimRef) -> Result<(), String> {
        let call = HostCall::AssumeVolumeBound;
        self.checked(call, self.scope.claim(call, &claim.namespace, &claim.name))?;
        self.services
            .storage
            .assume_volume_bound(&volume, &convert::claim_ref_from_wit(claim))
            .map_err(|e| e.to_string())
    }

    fn assume_claim_provisioned(
        &mut self,
        namespace: String,
        name: String,
        node: String,
    ) -> Result<(), String> {
        let call = HostCall::AssumeClaimProvisioned;
        let check = self.scope.claim_on_node(call, &namespace, &name, &node);
        self.checked(call, check)?;
        self.services
            .storage
            .assume_claim_provisioned(&namespace, &name, &node)
            .map_err(|e| e.to_string())
    }

    fn restore_volume(&mut self, name: String) {
        let call = HostCall::RestoreVolume;
        // The volume as assumed: only one assumed for a claim of the cycle's pod may
        // be restored (one with no claim has nothing of another pod's to undo).
        let claim = self
            .services
            .storage
            .volume(&name)
            .and_then(|v| v.claim_ref);
        let check = match &claim {
            Some(c) => self.scope.claim(call, &c.namespace, &c.name),
            None => self.scope.at_point(call),
        };
        if self.checked(call, check).is_ok() {
            self.services.storage.restore_volume(&name);
        }
    }

    fn restore_claim(&mut self, namespace: String, name: String) {
        let call = HostCall::RestoreClaim;
        if self
            .checked(call, self.scope.claim(call, &namespace, &name))
            .is_ok()
        {
            self.services.storage.restore_claim(&namespace, &name);
        }
    }

    fn bind_volume(&mut self, volume: String, claim: w::ClaimRef) -> Result<(), String> {
        let call = HostCall::BindVolume;
        self.checked(call, self.scope.claim(call, &claim.namespace, &claim.name))?;
        match &self.services.binder {
            Some(b) => b
                .bind_volume(&volume, &convert::claim_ref_from_wit(claim))
                .map_err(|e| e.to_string()),
            None => Err("bind-volume is only available to binding-cycle instances".into()),
        }
    }

    fn select_node_for_claim(
        &mut self,
        namespace: String,
        name: String,
        node: String,
    ) -> Result<(), String> {
        let call = HostCall::SelectNodeForClaim;
        let check = self.scope.claim_on_node(call, &namespace, &name, &node);
        self.checked(call, check)?;
        match &self.services.binder {
            Some(b) => b
                .select_node_for_claim(&namespace, &name, &node)
                .map_err(|e| e.to_string()),
            None => {
                Err("select-node-for-claim is only available to binding-cycle instances".into())
            }
        }
    }

    fn storage_generation(&mut self) -> u64 {
        self.services.storage.generation()
    }

    fn wait_storage_change(&mut self, after: u64, timeout_ms: u64) -> (u64, u64) {
        if self.services.binder.is_none() {
            // Outside a binding cycle a wait would hold up scheduling: answer at once.
            return (self.services.storage.generation(), 0);
        }
        let pod = self.scope.pod.as_ref().map(|p| p.uid.as_str());
        let end = self.services.storage.wait_for_change(
            after,
            std::time::Duration::from_millis(timeout_ms),
            pod,
        );
        self.waited += end.waited;
        if end.pod_gone {
            // The pod was deleted: the call fails however the guest goes on, and
            // its wait is over at once (all of it spent), so that its loop ends.
            self.pod_gone = true;
            return (end.generation, timeout_ms);
        }
        (
            end.generation,
            u64::try_from(end.waited.as_millis()).unwrap_or(u64::MAX),
        )
    }

    fn simulate(&mut self, node: String) -> Result<Resource<Simulation>, w::Status> {
        let Some(dry) = self.dry_run.as_mut() else {
            return Err(convert::status_to_wit(&Status::error(
                "simulate is only available during PostFilter",
            )));
        };
        let sim = dry
            .simulate(&node)
            .map_err(|s| convert::status_to_wit(&s))?;
        self.table
            .push(sim)
            .map_err(|e| convert::status_to_wit(&Status::error(format!("resource table: {e}"))))
    }

    fn namespace_labels(&mut self, namespace: String) -> Option<Vec<(String, String)>> {
        self.services
            .namespaces
            .labels(&namespace)
            .map(|l| l.into_iter().collect())
    }

    fn bind_pod(
        &mut self,
        namespace: String,
        name: String,
        uid: String,
        node: String,
    ) -> Result<(), String> {
        let call = HostCall::BindPod;
        let check = self.scope.bind(&namespace, &name, &uid, &node);
        self.checked(call, check)?;
        let pod = berth_sdk::Pod {
            namespace,
            name,
            uid,
            ..berth_sdk::Pod::default()
        };
        match &self.services.binder {
            // The WIT's error is the cluster's message.
            Some(b) => b.bind(&pod, &node).map_err(|e| e.to_string()),
            None => Err("bind-pod is only available to binding-cycle instances".into()),
        }
    }
}

impl host::HostNodeSimulation for HostCtx {
    fn remove_pod(&mut self, this: Resource<Simulation>, uid: String) -> w::Status {
        let status = match (self.table.get_mut(&this), self.dry_run.as_mut()) {
            (Ok(sim), Some(dry)) => dry.remove_pod(sim, &uid),
            _ => Status::error("the what-if is over: its PostFilter call returned"),
        };
        convert::status_to_wit(&status)
    }
    fn add_pod(&mut self, this: Resource<Simulation>, uid: String) -> w::Status {
        let status = match (self.table.get_mut(&this), self.dry_run.as_mut()) {
            (Ok(sim), Some(dry)) => dry.add_pod(sim, &uid),
            _ => Status::error("the what-if is over: its PostFilter call returned"),
        };
        convert::status_to_wit(&status)
    }
    fn fits(&mut self, this: Resource<Simulation>) -> w::Status {
        let status = match (self.table.get(&this), self.dry_run.as_mut()) {
            (Ok(sim), Some(dry)) => dry.fits(sim),
            _ => Status::error("the what-if is over: its PostFilter call returned"),
        };
        convert::status_to_wit(&status)
    }
    fn drop(&mut self, rep: Resource<Simulation>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl host::HostCycleState for HostCtx {
    fn read(&mut self, this: Resource<CycleState>, key: String) -> Option<Vec<u8>> {
        self.table.get(&this).ok().and_then(|s| s.read(&key))
    }
    fn write(&mut self, this: Resource<CycleState>, key: String, value: Vec<u8>) {
        if !self.may_write_state(&key) {
            return;
        }
        if let Ok(s) = self.table.get(&this) {
            s.write(&key, value);
        }
    }
    fn delete(&mut self, this: Resource<CycleState>, key: String) {
        if !self.may_write_state(&key) {
            return;
        }
        if let Ok(s) = self.table.get(&this) {
            s.delete(&key);
        }
    }
    fn drop(&mut self, rep: Resource<CycleState>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}
