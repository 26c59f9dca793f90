//! The host side of an instance's imports: what its store holds ([`HostCtx`]), what
//! the host offers it ([`HostServices`]), and the `berth:scheduler/host` functions,
//! node simulations and cycle state the guest calls, and the `dra` interface.

use super::bindings::berth::scheduler::{dra, host, types as w, workload as wl};
use super::capability::{CallScope, HostCall};
use super::convert;
use super::output::{GuestOutput, Level};
use super::sandbox::SandboxClock;
use crate::plugin::group_what_if::{self, GroupSimulationHandle};
use crate::plugin::waiting::WaitingPods;
use crate::plugin::{CycleState, Simulation, WhatIf};
use berth_cluster::storage::Storage;
use berth_cluster::storage::WaitEnd;
use berth_cluster::{Binder, Budgets, Namespaces};
use berth_sdk::Status;
use std::collections::BTreeMap;
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
    /// (`wait-storage-change`, `wait-claim-change`): not counted against the call
    /// deadline.
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

    /// A binding cycle's wait for the cluster (`wait`, given the cycle's pod),
    /// answered as `wait-storage-change` and `wait-claim-change` answer: the
    /// generation then and the milliseconds waited. Outside a binding cycle a wait
    /// would hold up scheduling: `now` answers at once.
    fn wait_in_host(
        &mut self,
        timeout_ms: u64,
        now: impl FnOnce() -> u64,
        wait: impl FnOnce(std::time::Duration, Option<&str>) -> WaitEnd,
    ) -> (u64, u64) {
        if self.services.binder.is_none() {
            return (now(), 0);
        }
        let pod = self.scope.pod.as_ref().map(|p| p.uid.as_str());
        let end = wait(std::time::Duration::from_millis(timeout_ms), pod);
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
    pub pod_groups: berth_cluster::pod_groups::PodGroups,
    /// The dynamic resource allocation objects.
    pub dra: berth_cluster::dra::Dra,
    /// What `write-resource-claim-status` reaches: the cluster, for scheduling and
    /// binding instances alike (the call's capability check says when and what).
    pub claim_writer: Option<Arc<dyn Binder>>,
    /// What `feature-gate` answers (the framework puts its options' gates here).
    pub gates: FeatureGates,
}

/// kube-scheduler's feature gates as the scheduler runs, by name: what plugins read
/// (`feature-gate`). Empty until `berth::features` fills it in: a host used as a
/// library without it knows no gate, and its plugins keep their own defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates(Arc<BTreeMap<String, bool>>);

impl FeatureGates {
    /// The gate's value; none for a name it does not hold.
    pub fn get(&self, name: &str) -> Option<bool> {
        self.0.get(name).copied()
    }

    /// Sets a gate (shared copies keep what they had).
    pub fn set(&mut self, name: &str, on: bool) {
        Arc::make_mut(&mut self.0).insert(name.to_owned(), on);
    }

    /// Every gate held, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.0.iter().map(|(n, on)| (n.as_str(), *on))
    }
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
        self.in_host(|_| group_what_if::ask(question))
    }

    /// Runs `f`, work the host does on the plugin's behalf (a what-if, which runs
    /// other plugins), without counting its time against the call's deadline: a
    /// PostFilter's dry run on a slow or busy machine must not turn into a deadline
    /// trap that a fast machine, or the native twin, never sees.
    fn in_host<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let started = std::time::Instant::now();
        let r = f(self);
        self.waited += started.elapsed();
        r
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
        let storage = self.services.storage.clone();
        self.wait_in_host(
            timeout_ms,
            || storage.generation(),
            |timeout, pod| storage.wait_for_change(after, timeout, pod),
        )
    }

    fn simulate(&mut self, node: String) -> Result<Resource<Simulation>, w::Status> {
        let sim = self
            .in_host(|h| match h.dry_run.as_mut() {
                Some(dry) => dry.simulate(&node),
                None => Err(Status::error(
                    "simulate is only available during PostFilter",
                )),
            })
            .map_err(|s| convert::status_to_wit(&s))?;
        self.table
            .push(sim)
            .map_err(|e| convert::status_to_wit(&Status::error(format!("resource table: {e}"))))
    }

    fn feature_gate(&mut self, name: String) -> Option<bool> {
        self.services.gates.get(&name)
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

impl dra::Host for HostCtx {
    fn device_generation(&mut self) -> u64 {
        self.services.dra.device_generation()
    }

    fn claim_generation(&mut self) -> u64 {
        self.services.dra.claim_generation()
    }

    fn device_classes(&mut self) -> Vec<w::DeviceClass> {
        self.services
            .dra
            .classes()
            .iter()
            .map(|c| convert::dra::class_to_wit(c))
            .collect()
    }

    fn get_device_class(&mut self, name: String) -> Option<w::DeviceClass> {
        self.services
            .dra
            .class(&name)
            .map(|c| convert::dra::class_to_wit(&c))
    }

    fn resource_slices(&mut self) -> Vec<w::ResourceSlice> {
        self.services
            .dra
            .slices()
            .iter()
            .map(|s| convert::dra::slice_to_wit(s))
            .collect()
    }

    fn device_taint_rules(&mut self) -> Vec<w::DeviceTaintRule> {
        self.services
            .dra
            .taint_rules()
            .iter()
            .map(|r| convert::dra::taint_rule_to_wit(r))
            .collect()
    }

    fn get_resource_claim(&mut self, namespace: String, name: String) -> Option<w::ResourceClaim> {
        self.services
            .dra
            .claim(&namespace, &name)
            .map(|c| convert::dra::claim_to_wit(&c))
    }

    fn allocated_resource_claims(&mut self) -> Vec<w::ResourceClaim> {
        self.services
            .dra
            .allocated_claims()
            .iter()
            .map(|c| convert::dra::claim_to_wit(c))
            .collect()
    }

    fn allocated_device_results(&mut self) -> Vec<(String, w::DeviceRequestAllocationResult)> {
        self.services
            .dra
            .allocated_device_results()
            .iter()
            .map(|(claim, r)| (claim.clone(), convert::dra::result_to_wit(r)))
            .collect()
    }

    fn claim_allocation_pending(&mut self, namespace: String, name: String) -> bool {
        self.services.dra.allocation_pending(&namespace, &name)
    }

    fn assume_resource_claim(&mut self, claim: w::ResourceClaim) -> Result<(), String> {
        let call = HostCall::AssumeResourceClaim;
        let check = self
            .scope
            .resource_claim(call, &claim.namespace, &claim.name);
        self.checked(call, check)?;
        self.services
            .dra
            .assume_claim(convert::dra::claim_from_wit(claim))
            .map_err(|e| e.to_string())
    }

    fn restore_resource_claim(&mut self, namespace: String, name: String) {
        let call = HostCall::RestoreResourceClaim;
        let check = self.scope.resource_claim(call, &namespace, &name);
        if self.checked(call, check).is_ok() {
            self.services.dra.restore_claim(&namespace, &name);
        }
    }

    fn write_resource_claim_status(
        &mut self,
        claim: w::ResourceClaim,
    ) -> Result<w::ResourceClaim, String> {
        let call = HostCall::WriteResourceClaimStatus;
        let claim = convert::dra::claim_from_wit(claim);
        // The cluster's copy; for a claim just created for the pod's extended
        // resources, which the watch may not have shown yet, the one created.
        let current = self
            .services
            .dra
            .cluster_claim(&claim.namespace, &claim.name)
            .or_else(|| self.services.dra.claim(&claim.namespace, &claim.name));
        let check = self.scope.resource_claim_write(&claim, current.as_deref());
        self.checked(call, check)?;
        let Some(writer) = &self.services.claim_writer else {
            return Err("write-resource-claim-status has no cluster to write to".into());
        };
        // The WIT's error is the cluster's message.
        let written = writer
            .write_claim_status(&claim)
            .map_err(|e| e.to_string())?;
        // Shown at once, before the watch brings it.
        self.services.dra.assume_written(written.clone());
        Ok(convert::dra::claim_to_wit(&written))
    }

    fn extended_resource_claim(
        &mut self,
        namespace: String,
        pod_uid: String,
    ) -> Option<w::ResourceClaim> {
        self.services
            .dra
            .extended_claim(&namespace, &pod_uid)
            .map(|c| convert::dra::claim_to_wit(&c))
    }

    fn create_extended_resource_claim(
        &mut self,
        claim: w::ResourceClaim,
    ) -> Result<w::ResourceClaim, String> {
        let call = HostCall::CreateExtendedResourceClaim;
        let claim = convert::dra::claim_from_wit(claim);
        let check = self.scope.extended_claim_create(&claim);
        self.checked(call, check)?;
        let Some(writer) = &self.services.claim_writer else {
            return Err("create-extended-resource-claim has no cluster to write to".into());
        };
        let created = writer
            .create_extended_resource_claim(&claim)
            .map_err(|e| e.to_string())?;
        self.services.dra.assume_written(created.clone());
        Ok(convert::dra::claim_to_wit(&created))
    }

    fn delete_extended_resource_claim(
        &mut self,
        namespace: String,
        name: String,
    ) -> Result<(), String> {
        let call = HostCall::DeleteExtendedResourceClaim;
        let current = self.services.dra.claim(&namespace, &name);
        let check = self
            .scope
            .extended_claim_delete(&namespace, &name, current.as_deref());
        self.checked(call, check)?;
        let Some(writer) = &self.services.claim_writer else {
            return Err("delete-extended-resource-claim has no cluster to write to".into());
        };
        writer
            .delete_extended_resource_claim(&namespace, &name)
            .map_err(|e| e.to_string())?;
        self.services.dra.remove_claim(&namespace, &name);
        Ok(())
    }

    fn write_extended_resource_claim_status(
        &mut self,
        namespace: String,
        pod_name: String,
        pod_uid: String,
        status: w::PodExtendedResourceClaimStatus,
    ) -> Result<(), String> {
        let call = HostCall::WriteExtendedResourceClaimStatus;
        let check = self.scope.pod_status(&namespace, &pod_name, &pod_uid);
        self.checked(call, check)?;
        let Some(writer) = &self.services.claim_writer else {
            return Err("write-extended-resource-claim-status has no cluster to write to".into());
        };
        let status = berth_sdk::PodExtendedResourceClaimStatus {
            resource_claim_name: status.resource_claim_name,
            request_mappings: status
                .request_mappings
                .into_iter()
                .map(|m| berth_sdk::ContainerExtendedResourceRequest {
                    container_name: m.container_name,
                    resource_name: m.resource_name,
                    request_name: m.request_name,
                })
                .collect(),
        };
        writer
            .write_extended_resource_claim_status(&namespace, &pod_name, &pod_uid, &status)
            .map_err(|e| e.to_string())
    }

    fn wait_claim_change(&mut self, after: u64, timeout_ms: u64) -> (u64, u64) {
        let dra = self.services.dra.clone();
        self.wait_in_host(
            timeout_ms,
            || dra.claim_generation(),
            |timeout, pod| dra.wait_for_claim_change(after, timeout, pod),
        )
    }
}

impl super::bindings::berth::scheduler::dry_run::Host for HostCtx {
    fn select_victims_on_nodes(
        &mut self,
        nodes: Vec<String>,
    ) -> Option<Vec<Result<super::bindings::berth::scheduler::dry_run::Victims, w::Status>>> {
        let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
        let answers = self.in_host(|h| h.dry_run.as_mut()?.select_victims_on_nodes(&names))?;
        Some(
            answers
                .into_iter()
                .map(|r| {
                    r.map(|v| super::bindings::berth::scheduler::dry_run::Victims {
                        pods: v.pods,
                        pdb_violations: v.pdb_violations,
                    })
                    .map_err(|s| convert::status_to_wit(&s))
                })
                .collect(),
        )
    }
}

impl host::HostNodeSimulation for HostCtx {
    fn remove_pod(&mut self, this: Resource<Simulation>, uid: String) -> w::Status {
        let status = self.in_host(|h| match (h.table.get_mut(&this), h.dry_run.as_mut()) {
            (Ok(sim), Some(dry)) => dry.remove_pod(sim, &uid),
            _ => Status::error("the what-if is over: its PostFilter call returned"),
        });
        convert::status_to_wit(&status)
    }
    fn add_pod(&mut self, this: Resource<Simulation>, uid: String) -> w::Status {
        let status = self.in_host(|h| match (h.table.get_mut(&this), h.dry_run.as_mut()) {
            (Ok(sim), Some(dry)) => dry.add_pod(sim, &uid),
            _ => Status::error("the what-if is over: its PostFilter call returned"),
        });
        convert::status_to_wit(&status)
    }
    fn fits(&mut self, this: Resource<Simulation>) -> w::Status {
        let status = self.in_host(|h| match (h.table.get(&this), h.dry_run.as_mut()) {
            (Ok(sim), Some(dry)) => dry.fits(sim),
            _ => Status::error("the what-if is over: its PostFilter call returned"),
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use berth_cluster::WriteError;
    use berth_cluster::dra::Dra;
    use berth_cluster::memory::MemoryCluster;
    use berth_sdk::dra::{AllocationResult, ConsumerReference, DeviceClass, ResourceClaim};
    use std::time::Duration;

    /// A store's context for DynamicResources, at `point` of pod `ns/p` (whose
    /// ResourceClaim is `gpu`), with the binder a binding-cycle instance has.
    fn ctx(point: &'static str, dra: &Dra, writer: Option<Arc<dyn Binder>>) -> HostCtx {
        let sandbox = super::super::sandbox::Sandbox::default();
        let output = GuestOutput::new("DynamicResources", None);
        let wasi = sandbox
            .wasi_ctx(
                output.stdio(super::super::output::Stream::Stdout),
                output.stdio(super::super::output::Stream::Stderr),
            )
            .unwrap();
        HostCtx {
            wasi,
            table: ResourceTable::new(),
            limits: sandbox
                .limits
                .store_limiter(Arc::new(super::super::MemoryBudget::default())),
            clock: sandbox.clock(),
            services: HostServices {
                // Given the cluster: a binding-cycle instance's.
                binder: writer.clone(),
                claim_writer: writer,
                dra: dra.clone(),
                ..HostServices::default()
            },
            output,
            dry_run: None,
            waited: Duration::ZERO,
            plugin: "DynamicResources".into(),
            scope: CallScope {
                point,
                pod: Some(super::super::capability::ScopedPod {
                    uid: "u1".into(),
                    namespace: "ns".into(),
                    name: "p".into(),
                    claims: Vec::new(),
                    resource_claims: vec!["gpu".into()],
                }),
                node: Some("n1".into()),
            },
            refused: None,
            pod_gone: false,
            waits_of: Vec::new(),
        }
    }

    fn claim(name: &str, version: &str) -> ResourceClaim {
        ResourceClaim {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: version.into(),
            ..ResourceClaim::default()
        }
    }

    fn allocated(mut c: ResourceClaim) -> ResourceClaim {
        c.status.allocation = Some(AllocationResult::default());
        c.status.reserved_for = vec![ConsumerReference::pod("p", "u1")];
        c
    }

    fn wit(c: &ResourceClaim) -> w::ResourceClaim {
        convert::dra::claim_to_wit(c)
    }

    #[test]
    fn reserve_assumes_and_unreserve_restores_only_the_pod_s_claims() {
        let dra = Dra::new();
        dra.set_claim(claim("gpu", "1"));
        dra.set_claim(claim("other", "1"));
        let mut reserve = ctx("Reserve", &dra, None);
        dra::Host::assume_resource_claim(&mut reserve, wit(&allocated(claim("gpu", "1")))).unwrap();
        assert!(dra::Host::claim_allocation_pending(
            &mut reserve,
            "ns".into(),
            "gpu".into()
        ));
        let listed = dra::Host::allocated_resource_claims(&mut reserve);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name, "gpu");
        assert!(reserve.refused.is_none());
        // Another pod's claim: refused, and the call under way fails with it.
        let err =
            dra::Host::assume_resource_claim(&mut reserve, wit(&allocated(claim("other", "1"))))
                .unwrap_err();
        assert_eq!(
            err,
            "assume-resource-claim refused at Reserve: assume-resource-claim may act only on the ResourceClaims of the cycle's pod ns/p, not ns/other"
        );
        assert_eq!(reserve.refused.as_deref(), Some(err.as_str()));
        assert!(!dra.is_assumed("ns", "other"));
        // A stale read: the view's error.
        let mut again = ctx("Reserve", &dra, None);
        dra.restore_claim("ns", "gpu");
        dra.set_claim(claim("gpu", "2"));
        let err = dra::Host::assume_resource_claim(&mut again, wit(&allocated(claim("gpu", "1"))))
            .unwrap_err();
        assert!(err.contains("changed since it was read"), "{err}");
        assert!(again.refused.is_none());
        dra::Host::assume_resource_claim(&mut again, wit(&allocated(claim("gpu", "2")))).unwrap();
        // Not at Unreserve; restored there, only for the pod's claims.
        let mut unreserve = ctx("Unreserve", &dra, None);
        assert!(
            dra::Host::assume_resource_claim(&mut unreserve, wit(&allocated(claim("gpu", "2"))))
                .unwrap_err()
                .contains("allowed only at Reserve")
        );
        let mut unreserve = ctx("Unreserve", &dra, None);
        dra::Host::restore_resource_claim(&mut unreserve, "ns".into(), "gpu".into());
        assert!(unreserve.refused.is_none());
        assert!(!dra.is_assumed("ns", "gpu"));
        let mut filter = ctx("Filter", &dra, None);
        dra::Host::restore_resource_claim(&mut filter, "ns".into(), "gpu".into());
        assert!(filter.refused.is_some());
    }

    #[test]
    fn post_filter_deallocates_a_claim_only_the_pod_has_reserved() {
        let dra = Dra::new();
        let cluster = Arc::new(MemoryCluster::new());
        cluster.attach_dra(&dra);
        let writer: Arc<dyn Binder> = cluster;
        // Allocated and reserved for the cycle's pod (u1) and another one.
        let mut shared = allocated(claim("gpu", "3"));
        shared.status.reserved_for = vec![
            ConsumerReference::pod("p", "u1"),
            ConsumerReference::pod("q", "u2"),
        ];
        dra.set_claim(shared);
        let deallocated = claim("gpu", "3");
        let mut post_filter = ctx("PostFilter", &dra, Some(writer.clone()));
        let refused = dra::Host::write_resource_claim_status(&mut post_filter, wit(&deallocated))
            .unwrap_err();
        assert!(
            refused.contains("may not deallocate resourceclaim ns/gpu at PostFilter: it is reserved for pods \"q\""),
            "{refused}"
        );
        assert!(dra.claim("ns", "gpu").unwrap().status.allocation.is_some());
        // Reserved for the pod alone: deallocated, and shown so at once.
        let mut own = allocated(claim("gpu", "4"));
        own.status.reserved_for = vec![ConsumerReference::pod("p", "u1")];
        dra.set_claim(own);
        let mut post_filter = ctx("PostFilter", &dra, Some(writer));
        let written =
            dra::Host::write_resource_claim_status(&mut post_filter, wit(&claim("gpu", "4")))
                .unwrap();
        assert!(written.status.allocation.is_none() && written.status.reserved_for.is_empty());
        let shown = dra.claim("ns", "gpu").unwrap();
        assert_eq!(shown.resource_version, "5");
        assert!(shown.status.allocation.is_none());
    }

    #[test]
    fn prebind_writes_the_pod_s_claims_through_the_binder_and_shows_them_at_once() {
        let dra = Dra::new();
        dra.set_claim(claim("gpu", "1"));
        dra.set_claim(claim("other", "1"));
        let cluster = Arc::new(MemoryCluster::new());
        cluster.attach_dra(&dra);
        let binder: Arc<dyn Binder> = cluster;
        let mut reserve = ctx("Reserve", &dra, None);
        let wanted = allocated(claim("gpu", "1"));
        dra::Host::assume_resource_claim(&mut reserve, wit(&wanted)).unwrap();
        // Only instances given the cluster write, and only at PostFilter or PreBind.
        let mut no_writer = ctx("PreBind", &dra, None);
        assert_eq!(
            dra::Host::write_resource_claim_status(&mut no_writer, wit(&wanted)).unwrap_err(),
            "write-resource-claim-status has no cluster to write to"
        );
        let mut bind = ctx("Bind", &dra, Some(binder.clone()));
        assert!(
            dra::Host::write_resource_claim_status(&mut bind, wit(&wanted))
                .unwrap_err()
                .contains("allowed only at PostFilter, PreBind")
        );
        // PostFilter writes only deallocations.
        let mut post_filter = ctx("PostFilter", &dra, Some(binder.clone()));
        assert!(
            dra::Host::write_resource_claim_status(&mut post_filter, wit(&wanted))
                .unwrap_err()
                .contains("may only deallocate resourceclaim ns/gpu")
        );
        let mut prebind = ctx("PreBind", &dra, Some(binder.clone()));
        let other = allocated(claim("other", "1"));
        assert!(dra::Host::write_resource_claim_status(&mut prebind, wit(&other)).is_err());
        assert!(
            dra.claim("ns", "other")
                .unwrap()
                .status
                .allocation
                .is_none()
        );
        let mut prebind = ctx("PreBind", &dra, Some(binder));
        let written = dra::Host::write_resource_claim_status(&mut prebind, wit(&wanted)).unwrap();
        assert_eq!(written.resource_version, "2");
        assert!(written.status.allocation.is_some());
        // The embedded cluster shows its write at once: nothing left assumed or pending.
        assert!(!dra.is_assumed("ns", "gpu"));
        assert!(!dra.allocation_pending("ns", "gpu"));
        assert_eq!(dra.claim("ns", "gpu").unwrap().resource_version, "2");
    }

    /// A cluster whose watch is behind: it answers a write without the view seeing it.
    struct Behind;

    impl Binder for Behind {
        fn bind(&self, _: &berth_sdk::Pod, _: &str) -> Result<(), WriteError> {
            Ok(())
        }
        fn write_claim_status(&self, claim: &ResourceClaim) -> Result<ResourceClaim, WriteError> {
            let mut written = claim.clone();
            written.resource_version = "8".into();
            Ok(written)
        }
    }

    #[test]
    fn a_written_claim_shows_before_the_watch_brings_it() {
        let dra = Dra::new();
        dra.set_claim(claim("gpu", "7"));
        let mut reserve = ctx("Reserve", &dra, None);
        let wanted = allocated(claim("gpu", "7"));
        dra::Host::assume_resource_claim(&mut reserve, wit(&wanted)).unwrap();
        let mut prebind = ctx("PreBind", &dra, Some(Arc::new(Behind)));
        let g = dra::Host::claim_generation(&mut prebind);
        dra::Host::write_resource_claim_status(&mut prebind, wit(&wanted)).unwrap();
        assert!(dra::Host::claim_generation(&mut prebind) > g);
        let shown = dra::Host::get_resource_claim(&mut prebind, "ns".into(), "gpu".into()).unwrap();
        assert_eq!(shown.resource_version, "8");
        assert!(shown.status.allocation.is_some());
        assert!(!dra::Host::claim_allocation_pending(
            &mut prebind,
            "ns".into(),
            "gpu".into()
        ));
        // The watch catches up.
        dra.set_claim(allocated(claim("gpu", "8")));
        assert!(!dra.is_assumed("ns", "gpu"));
    }

    #[test]
    fn a_claim_wait_answers_at_once_outside_a_binding_cycle_and_ends_with_the_pod() {
        let dra = Dra::new();
        dra.set_claim(claim("gpu", "1"));
        let g = dra.claim_generation();
        let mut prefilter = ctx("PreFilter", &dra, None);
        assert_eq!(
            dra::Host::wait_claim_change(&mut prefilter, g, 86_400_000),
            (g, 0)
        );
        let mut prebind = ctx("PreBind", &dra, Some(Arc::new(Behind)));
        dra.end_waits_of("u1");
        assert_eq!(
            dra::Host::wait_claim_change(&mut prebind, g, 86_400_000),
            (g, 86_400_000)
        );
        assert!(prebind.pod_gone);
        dra.forget_pod("u1");
        // A change already past `after`: answered at once, not gone.
        let mut prebind = ctx("PreBind", &dra, Some(Arc::new(Behind)));
        dra.set_claim(claim("gpu", "2"));
        let (generation, _) = dra::Host::wait_claim_change(&mut prebind, g, 86_400_000);
        assert!(generation > g);
        assert!(!prebind.pod_gone);
    }

    #[test]
    fn the_listers_read_the_view() {
        let dra = Dra::new();
        let mut c = ctx("Filter", &dra, None);
        let (d0, c0) = (
            dra::Host::device_generation(&mut c),
            dra::Host::claim_generation(&mut c),
        );
        dra.set_class(DeviceClass {
            name: "gpu.example.com".into(),
            uid: "u".into(),
            selectors: Vec::new(),
            config: Vec::new(),
            extended_resource_name: None,
        });
        dra.set_slice(berth_sdk::dra::ResourceSlice {
            name: "n1-gpu".into(),
            ..berth_sdk::dra::ResourceSlice::default()
        });
        dra.set_taint_rule(berth_sdk::dra::DeviceTaintRule {
            name: "drain".into(),
            selector: berth_sdk::dra::DeviceTaintSelector::default(),
            taint: berth_sdk::dra::DeviceTaint {
                key: "drain".into(),
                value: String::new(),
                effect: berth_sdk::dra::DeviceTaintEffect::NoSchedule,
                time_added_ms: None,
            },
        });
        assert_eq!(dra::Host::device_generation(&mut c), d0 + 3);
        assert_eq!(dra::Host::claim_generation(&mut c), c0);
        assert_eq!(dra::Host::device_classes(&mut c)[0].name, "gpu.example.com");
        assert!(dra::Host::get_device_class(&mut c, "gpu.example.com".into()).is_some());
        assert!(dra::Host::get_device_class(&mut c, "none".into()).is_none());
        assert_eq!(dra::Host::resource_slices(&mut c)[0].name, "n1-gpu");
        assert_eq!(dra::Host::device_taint_rules(&mut c)[0].name, "drain");
        assert!(dra::Host::get_resource_claim(&mut c, "ns".into(), "gpu".into()).is_none());
        assert!(dra::Host::allocated_resource_claims(&mut c).is_empty());
        // The storage view's CSIStorageCapacities, by class.
        assert!(host::Host::csi_storage_capacities_of_class(&mut c, "fast".into()).is_empty());
        c.services
            .storage
            .set_capacity(berth_sdk::CsiStorageCapacity {
                namespace: "kube-system".into(),
                name: "fast-zone-a".into(),
                storage_class_name: "fast".into(),
                capacity: Some(1 << 30),
                ..Default::default()
            });
        let listed = host::Host::csi_storage_capacities_of_class(&mut c, "fast".into());
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].capacity, Some(1 << 30));
        assert!(host::Host::csi_storage_capacities_of_class(&mut c, "slow".into()).is_empty());
        assert!(c.refused.is_none());
    }
}
