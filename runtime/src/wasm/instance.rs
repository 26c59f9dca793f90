//! Plugin instances: one made of a module and configured with its args, and its calls,
//! each under the sandbox's deadline, timed in the metrics, and placed (extension
//! point, pod, nodes) in its error.

use super::bindings::berth::scheduler::types as w;
use super::bindings::exports::berth::scheduler as ex;
use super::capability;
use super::convert;
use super::exports::PluginExports;
use super::host_imports::{HostCtx, HostServices};
use super::module::{LoadError, Module};
use crate::cache::Snapshot;
use crate::plugin::{CallError, CyclePod, CycleState, PluginCalls, WhatIf};
use berth_sdk::{PodFeature, Status};
use std::sync::Arc;
use wasmtime::Store;
use wasmtime::component::Resource;

impl Module {
    /// A new instance, configured with the args (JSON), whose imports reach `services`.
    pub fn instantiate(
        self: &Arc<Self>,
        args_json: &str,
        services: HostServices,
    ) -> Result<Instance, LoadError> {
        let metrics = services.metrics.clone();
        let (store, bindings) = self.new_store(services).map_err(|e| self.store_error(e))?;
        let mut inst = Instance {
            module: self.clone(),
            store,
            bindings,
            replica_generation: None,
            overlaid: Vec::new(),
            cycle_pod: None,
            cycle_pod_key: String::new(),
            call_subject: None,
            node_names: Vec::new(),
            sent: Vec::new(),
            broken: false,
            point: "Configure",
            metrics,
            call_histograms: Vec::new(),
            only_for_pods_with: Vec::new(),
        };
        let configured = inst.call(|b, s| b.plugin().call_configure(s, args_json));
        let configured = inst.located(configured, On::Nothing);
        match configured {
            Ok(Ok(configuration)) => {
                inst.only_for_pods_with = configuration
                    .only_for_pods_with
                    .into_iter()
                    .map(convert::pod_feature_from_wit)
                    .collect();
                Ok(inst)
            }
            Ok(Err(message)) => Err(LoadError::Configure {
                plugin: self.name.clone(),
                source_name: self.source.clone(),
                message,
            }),
            Err(e) => Err(LoadError::Configure {
                plugin: self.name.clone(),
                source_name: self.source.clone(),
                message: e.to_string(),
            }),
        }
    }
}

/// A call of a cycle's extension point: the guest's exports, the store, and the
/// handle of the cycle's state.
trait CycleCall<R>:
    FnOnce(&PluginExports, &mut Store<HostCtx>, Resource<CycleState>) -> wasmtime::Result<R>
{
}

impl<R, F> CycleCall<R> for F where
    F: FnOnce(&PluginExports, &mut Store<HostCtx>, Resource<CycleState>) -> wasmtime::Result<R>
{
}

/// One live instance of a plugin module, owned by one thread at a time.
pub struct Instance {
    module: Arc<Module>,
    store: Store<HostCtx>,
    bindings: PluginExports,
    /// The snapshot generation the guest's node replica matches.
    replica_generation: Option<u64>,
    /// Slots whose replica holds a per-cycle overlay (nominated pods added) rather
    /// than the snapshot's node: the next sync sends them again.
    overlaid: Vec<u32>,
    /// The id of the [`CyclePod`] the guest holds (its last `begin-cycle`).
    cycle_pod: Option<u64>,
    /// `namespace/name` of that pod, for error messages.
    cycle_pod_key: String,
    /// What the call under way acts on when it is not the cycle's pod, as error
    /// messages name it: `pod NS/NAME` (QueueSort, PreEnqueue, queueing hints) or
    /// `pod group NS/NAME` (the pod group's points).
    call_subject: Option<String>,
    /// Node names by slot, as the replica holds them, for error messages.
    node_names: Vec<Option<String>>,
    /// The version of each node the replica holds, by slot: the snapshot's, or a
    /// copy of an overlay. A later version with the same node object goes as the
    /// change of its pods.
    sent: Vec<Option<Arc<berth_sdk::NodeInfo>>>,
    broken: bool,
    /// The extension point of the call under way (the metrics' label).
    point: &'static str,
    metrics: Option<crate::metrics::Metrics>,
    /// The call-duration histogram of each extension point this instance was called
    /// at, taken on its first call there.
    call_histograms: Vec<(&'static str, prometheus::Histogram)>,
    /// What `configure` answered: the features a pod needs for this instance to
    /// take part in its cycles.
    only_for_pods_with: Vec<PodFeature>,
}

impl Instance {
    /// Runs `call` with the what-if API lent to the store, for the host calls the
    /// plugin makes during it, and gives it back.
    fn lending<R>(
        &mut self,
        dry: Box<dyn WhatIf>,
        call: impl FnOnce(&mut Self) -> R,
    ) -> (Box<dyn WhatIf>, R) {
        self.store.data_mut().dry_run = Some(dry);
        let r = call(self);
        let dry = self
            .store
            .data_mut()
            .dry_run
            .take()
            .expect("lent for the call");
        (dry, r)
    }

    /// The module this instance runs.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// Whether a call trapped; a broken instance must be replaced.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    fn call<R>(
        &mut self,
        f: impl FnOnce(&PluginExports, &mut Store<HostCtx>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let limits = self.module.sandbox.limits;
        self.store.set_epoch_deadline(limits.deadline_ticks());
        let data = self.store.data_mut();
        data.waited = std::time::Duration::ZERO;
        data.scope.point = self.point;
        data.refused = None;
        data.pod_gone = false;
        self.store.data().output.begin_call();
        let started = self.metrics.is_some().then(std::time::Instant::now);
        let result = f(&self.bindings, &mut self.store);
        self.store.data().output.end_call();
        if let (Some(m), Some(t)) = (&self.metrics, started) {
            let point = self.point;
            let histogram = match self.call_histograms.iter().find(|(p, _)| *p == point) {
                Some((_, h)) => h,
                None => {
                    let h = m.plugin_call_histogram(&self.module.name, point);
                    self.call_histograms.push((point, h));
                    &self.call_histograms[self.call_histograms.len() - 1].1
                }
            };
            histogram.observe(t.elapsed().as_secs_f64());
        }
        let refused = self.store.data_mut().refused.take();
        let pod_gone = std::mem::take(&mut self.store.data_mut().pod_gone);
        match result {
            Ok(_) if refused.is_some() => Err(CallError::Refused {
                plugin: self.module.name.clone(),
                context: String::new(),
                message: refused.expect("checked"),
            }),
            Ok(_) if pod_gone => Err(CallError::PodGone {
                plugin: self.module.name.clone(),
                context: String::new(),
                message: "the pod was deleted while the call waited for the cluster".into(),
            }),
            Ok(r) => Ok(r),
            Err(e) => {
                self.broken = true;
                if let Some(m) = &self.metrics {
                    m.count_trap(&self.module.name);
                }
                // A host function's refusal (a sleep past the deadline) is the root
                // cause under wasmtime's backtrace context; say it without the
                // backtrace.
                let mut message = e.root_cause().to_string();
                if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
                    message = match trap {
                        wasmtime::Trap::Interrupt => {
                            format!("deadline of {:?} exceeded", limits.call_deadline)
                        }
                        wasmtime::Trap::UnreachableCodeReached => {
                            "unreachable code reached (a panic or an abort)".to_owned()
                        }
                        other => other.to_string(),
                    };
                }
                let said = self.store.data().output.stderr_tail();
                if !said.is_empty() {
                    message = format!("{message}; guest said: {}", said.join(" | "));
                }
                Err(CallError::Trap {
                    plugin: self.module.name.clone(),
                    context: String::new(),
                    message,
                })
            }
        }
    }

    /// A call's answer the host cannot use: the instance is discarded too, since a
    /// guest that answers out of shape may be in any state.
    fn bad_answer(&mut self, message: String) -> CallError {
        self.broken = true;
        CallError::BadAnswer {
            plugin: self.module.name.clone(),
            context: String::new(),
            message,
        }
    }

    /// Where a failed call was: the extension point, the pod and the nodes.
    fn context(&self, nodes: On<'_>) -> String {
        let mut out = format!("at {}", self.point);
        if let Some(subject) = &self.call_subject {
            out.push_str(" for ");
            out.push_str(subject);
        } else if !self.cycle_pod_key.is_empty() {
            out.push_str(" for pod ");
            out.push_str(&self.cycle_pod_key);
        }
        match nodes {
            On::Nothing => {}
            On::Node(n) => {
                out.push_str(" on node ");
                out.push_str(n);
            }
            On::Slots(slots) => {
                const NAMED: usize = 3;
                let name = |s: &u32| {
                    self.node_names
                        .get(*s as usize)
                        .and_then(Option::as_deref)
                        .map_or_else(|| format!("<slot {s}>"), str::to_owned)
                };
                let named: Vec<String> = slots.iter().take(NAMED).map(name).collect();
                out.push_str(if slots.len() == 1 {
                    " on node "
                } else {
                    " on nodes "
                });
                out.push_str(&named.join(", "));
                if slots.len() > NAMED {
                    out.push_str(&format!(" and {} more", slots.len() - NAMED));
                }
            }
        }
        out
    }

    /// Adds where the call was to its error.
    fn located<R>(&self, r: Result<R, CallError>, nodes: On<'_>) -> Result<R, CallError> {
        r.map_err(|e| e.with_context(self.context(nodes)))
    }

    /// Runs a call of `pod`'s cycle: begins the cycle in the guest first unless it
    /// holds that pod already (a sync may have begun it), so the pod crosses once per
    /// cycle per instance.
    fn in_cycle<R>(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        f: impl CycleCall<R>,
    ) -> Result<R, CallError> {
        self.call_subject = None;
        if self.cycle_pod != Some(pod.id()) {
            self.begin_with(pod, "BeginCycle", |b, s, wit| {
                b.cycle().call_begin_cycle(s, wit)
            })?;
        }
        self.with_state(state, f)
    }

    /// Sends `pod` to the guest as the pod of the calls that follow, by `send` (the
    /// crossing that carries it, timed at `point`); the instance holds no cycle pod
    /// until it succeeds, and errors name the pod.
    fn begin_with<R>(
        &mut self,
        pod: &CyclePod,
        point: &'static str,
        send: impl FnOnce(&PluginExports, &mut Store<HostCtx>, &WitPod) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.cycle_pod = None;
        self.cycle_pod_key = pod.key();
        self.call_subject = None;
        let wit = pod.encoded(convert::pod_to_wit);
        let point = std::mem::replace(&mut self.point, point);
        let r = self.call(|b, s| send(b, s, wit));
        self.point = point;
        let r = r?;
        self.cycle_pod = Some(pod.id());
        Ok(r)
    }

    fn with_state<R>(&mut self, state: &CycleState, f: impl CycleCall<R>) -> Result<R, CallError> {
        let handle = self
            .store
            .data_mut()
            .table
            .push(state.clone())
            .map_err(|e| CallError::BadAnswer {
                plugin: self.module.name.clone(),
                context: String::new(),
                message: format!("resource table: {e}"),
            })?;
        let rep = handle.rep();
        let r = self.call(|b, s| f(b, s, Resource::new_borrow(rep)));
        let _ = self.store.data_mut().table.delete(handle);
        r
    }

    /// Notes which version of a node the replica holds (`None`: none).
    fn remember_sent(&mut self, slot: u32, info: Option<Arc<berth_sdk::NodeInfo>>) {
        let slot = slot as usize;
        if self.sent.len() <= slot {
            self.sent.resize(slot + 1, None);
        }
        self.sent[slot] = info;
    }

    /// Runs a call of `pod`'s cycle at `point`, placing its error on `nodes`.
    fn at_point<R>(
        &mut self,
        point: &'static str,
        nodes: On<'_>,
        state: &CycleState,
        pod: &CyclePod,
        f: impl CycleCall<R>,
    ) -> Result<R, CallError> {
        self.point = point;
        // The pod and node that the checked host calls of this point may act on.
        let scoped = capability::needs_pod(point);
        if scoped {
            let scope = &mut self.store.data_mut().scope;
            scope.pod = Some(capability::ScopedPod::of(pod.pod()));
            scope.node = match nodes {
                On::Node(n) => Some(n.to_owned()),
                _ => None,
            };
        }
        let r = self.in_cycle(state, pod, f);
        if scoped {
            let scope = &mut self.store.data_mut().scope;
            scope.pod = None;
            scope.node = None;
        }
        self.located(r, nodes)
    }

    /// A batch answer (Score, NormalizeScore) must have one entry per input: one that
    /// does not is a bad answer, placed on `nodes`.
    fn same_length(
        &mut self,
        r: Result<Vec<i64>, Status>,
        expected: usize,
        what: &str,
        nodes: On<'_>,
    ) -> Result<Result<Vec<i64>, Status>, CallError> {
        match &r {
            Ok(answered) if answered.len() != expected => {
                let e = self.bad_answer(format!(
                    "answered {} {what} for {expected} nodes",
                    answered.len()
                ));
                self.located(Err(e), nodes)
            }
            _ => Ok(r),
        }
    }
    /// Brings the replica up to the snapshot, with `overlays` in place of the
    /// snapshot's versions of their nodes, in one call. What changed goes as little
    /// as it can: a node whose object the replica holds already (the snapshot's
    /// version or an overlay) gets only the change of its pods; a new one, or one
    /// whose object changed, is sent whole. A slot overlaid last time and again now
    /// goes from one overlay to the next without the snapshot's version between.
    /// With `pod`, the same call begins that pod's cycle unless the guest holds it
    /// already; a replica that needs nothing leaves that to the cycle's first call.
    fn sync_with(
        &mut self,
        snapshot: &Snapshot,
        overlays: &[(u32, &berth_sdk::NodeInfo)],
        pod: Option<&CyclePod>,
    ) -> Result<(), CallError> {
        self.point = "Sync";
        let current = self.replica_generation == Some(snapshot.generation());
        if current && self.overlaid.is_empty() && overlays.is_empty() {
            return Ok(());
        }
        let begin = pod.filter(|p| self.cycle_pod != Some(p.id()));
        let (mut updated, mut removed) = if current {
            (Vec::new(), Vec::new())
        } else {
            snapshot.changes_since(self.replica_generation)
        };
        let overlaid_now = |slot: u32| overlays.iter().any(|(s, _)| *s == slot);
        // The snapshot's version of a node overlaid now is not sent: the overlay
        // replaces it, and the next sync restores it.
        updated.retain(|(slot, _)| !overlaid_now(*slot));
        // Undo the last overlays not made again: the snapshot's version goes back.
        for slot in std::mem::take(&mut self.overlaid) {
            if overlaid_now(slot)
                || updated.iter().any(|(s, _)| *s == slot)
                || removed.contains(&slot)
            {
                continue;
            }
            match snapshot.node(slot) {
                Some(info) => updated.push((slot, info)),
                None => removed.push(slot),
            }
        }
        for &slot in &removed {
            if let Some(n) = self.node_names.get_mut(slot as usize) {
                *n = None;
            }
        }
        for (slot, info) in updated.iter().chain(overlays) {
            let slot = *slot as usize;
            if self.node_names.len() <= slot {
                self.node_names.resize(slot + 1, None);
            }
            if self.node_names[slot].as_deref() != Some(info.name()) {
                self.node_names[slot] = Some(info.name().to_owned());
            }
        }
        let wants_pods = self.module.wants_pods;
        let mut whole: Vec<(u32, w::NodeInfo)> = Vec::new();
        let mut changed: Vec<ex::replica::NodePodsChange> = Vec::new();
        let mut sent: Vec<(u32, Option<Arc<berth_sdk::NodeInfo>>)> = Vec::new();
        let mut send = |slot: u32,
                        info: &berth_sdk::NodeInfo,
                        held: Option<&berth_sdk::NodeInfo>| {
            match held {
                Some(prev) if prev.node == info.node => changed.push(
                    convert::node_pods_change_to_wit(slot, prev, info, wants_pods),
                ),
                _ => whole.push((slot, convert::node_info_to_wit(info, wants_pods))),
            }
        };
        for (slot, info) in updated {
            let shared = snapshot.shared(slot).cloned();
            let held = self.sent.get(slot as usize).and_then(Option::as_ref);
            if let (Some(prev), Some(now)) = (held, &shared)
                && Arc::ptr_eq(prev, now)
            {
                continue;
            }
            send(slot, info, held.map(|h| &**h));
            sent.push((slot, shared));
        }
        for &(slot, info) in overlays {
            let held = self.sent.get(slot as usize).and_then(Option::as_ref);
            send(slot, info, held.map(|h| &**h));
            sent.push((slot, Some(Arc::new(held_copy(info, wants_pods)))));
        }
        let replica = |b: &PluginExports, s: &mut Store<HostCtx>, pod: Option<&WitPod>| {
            b.replica()
                .call_sync_nodes(s, &whole, &changed, &removed, pod)
        };
        let r = match begin {
            Some(p) => self.begin_with(p, "Sync", |b, s, wit| replica(b, s, Some(wit))),
            None => self.call(|b, s| replica(b, s, None)),
        };
        let n = whole.len() + changed.len() + removed.len();
        r.map_err(|e| {
            e.with_context(match begin {
                // The pod crossed with the nodes: either may be what the guest
                // could not take.
                Some(p) => format!(
                    "at Sync of {n} nodes, beginning the cycle of pod {}",
                    p.key()
                ),
                None => format!("at Sync of {n} nodes"),
            })
        })?;
        for slot in removed {
            self.remember_sent(slot, None);
        }
        for (slot, info) in sent {
            self.remember_sent(slot, info);
        }
        self.overlaid.extend(overlays.iter().map(|(s, _)| *s));
        self.replica_generation = Some(snapshot.generation());
        Ok(())
    }
}

/// Implements [`PluginCalls`] for a wasm instance: the calls of the table of
/// extension points ([`berth_sdk::for_each_extension_point!`]) as calls of the
/// component's exports, each under the deadline, timed, placed in its error and
/// answered in the SDK's types; beside the calls written here.
macro_rules! wasm_calls {
    ( ( $($hand:tt)* )
      $( $gen:ident interface $iface:ident {
            points: [ $( $P:ident $pf:ident $pname:literal $pdoc:literal ),* ],
            also: [ $( $A:ident $af:ident $aname:literal $adoc:literal ),* ],
            calls: [ $( $kind:ident $body:tt ),* $(,)? ],
      } )*
    ) => {
        impl PluginCalls for Instance {
            $($hand)*
            $( $( wasm_calls!(@$kind $body); )* )*
        }
    };
    (@pod { $method:ident $label:literal $wit:ident $call:ident $getter:ident -> $ret:ty }) => {
        fn $method(&mut self, pod: &CyclePod) -> Result<$ret, CallError> {
            self.point = $label;
            self.call_subject = Some(format!("pod {}", pod.key()));
            let wit = pod.encoded(convert::pod_to_wit);
            let r = self.call(|b, s| b.$getter()?.$call(s, wit));
            self.located(r, On::Nothing).map(convert::FromWit::from_wit)
        }
    };
    (@cycle { $method:ident $label:literal $wit:ident $call:ident $getter:ident
              ( $($arg:ident : $aty:ty),* ) -> $ret:ty $([len $larg:ident $what:literal])? }) => {
        #[allow(clippy::let_unit_value, reason = "Unreserve and PostBind answer nothing")]
        fn $method(
            &mut self,
            state: &CycleState,
            pod: &CyclePod,
            $($arg: &$aty),*
        ) -> Result<$ret, CallError> {
            let on = On::of(&[$(On::from($arg)),*]);
            let r: $ret = self
                .at_point($label, on, state, pod, |b, s, st| b.$getter()?.$call(s, st $(, $arg)*))
                .map(convert::FromWit::from_wit)?;
            $( let r = self.same_length(r, $larg.len(), $what, on)?; )?
            Ok(r)
        }
    };
    (@dry { $method:ident $label:literal $wit:ident $call:ident $getter:ident
            ( $($arg:ident : $aty:ty),* ) -> $ret:ty }) => {
        fn $method(
            &mut self,
            state: &CycleState,
            pod: &CyclePod,
            $($arg: $aty,)*
            dry: Box<dyn WhatIf>,
        ) -> (Box<dyn WhatIf>, Result<$ret, CallError>) {
            // The what-ifs answer during the call, as during PostFilter.
            self.lending(dry, |inst| {
                inst.at_point($label, On::Slots(&[$($arg),*]), state, pod, |b, s, st| {
                    b.$getter()?.$call(s, st $(, $arg)*)
                })
                .map(convert::FromWit::from_wit)
            })
        }
    };
    (@group { $method:ident $label:literal $wit:ident $call:ident $getter:ident
              ( $($arg:ident : $aty:ty),* ) -> $ret:ty $([len $larg:ident $what:literal])? }) => {
        fn $method(
            &mut self,
            state: &CycleState,
            group: &berth_sdk::PodGroup,
            $($arg: &$aty),*
        ) -> Result<$ret, CallError> {
            self.point = $label;
            self.call_subject = Some(format!("pod group {}/{}", group.namespace, group.name));
            let group = convert::ToWitArg::to_wit_arg(group);
            $( let $arg = convert::ToWitArg::to_wit_arg($arg); )*
            let r = self.with_state(state, |b, s, st| {
                b.$getter()?.$call(s, st, &group $(, <$aty as convert::ToWitArg>::passed(&$arg))*)
            });
            let r: $ret = self.located(r, On::Nothing).map(convert::FromWit::from_wit)?;
            $( let r = self.same_length(r, $larg.len(), $what, On::Nothing)?; )?
            Ok(r)
        }
    };
}

berth_sdk::for_each_extension_point!(wasm_calls (
    /// Brings the guest's node replica up to the snapshot, sending only what changed
    /// since this instance's last sync.
    fn sync(&mut self, snapshot: &Snapshot) -> Result<(), CallError> {
        self.sync_with(snapshot, &[], None)
    }

    fn sync_overlaid(
        &mut self,
        snapshot: &Snapshot,
        overlays: &[(u32, &berth_sdk::NodeInfo)],
    ) -> Result<(), CallError> {
        self.sync_with(snapshot, overlays, None)
    }

    /// One crossing for both: the changed nodes and, when the guest does not hold
    /// it yet, the pod.
    fn sync_for(
        &mut self,
        snapshot: &Snapshot,
        overlays: &[(u32, &berth_sdk::NodeInfo)],
        pod: &CyclePod,
    ) -> Result<(), CallError> {
        self.sync_with(snapshot, overlays, Some(pod))
    }

    fn only_for_pods_with(&self) -> &[PodFeature] {
        &self.only_for_pods_with
    }

    fn pod_on_node(
        &mut self,
        add: bool,
        state: &CycleState,
        pod: &CyclePod,
        other: &berth_sdk::Pod,
        slot: u32,
    ) -> Result<Status, CallError> {
        let other = convert::pod_to_wit(other);
        self.at_point(
            "PreFilterExtension",
            On::Slots(&[slot]),
            state,
            pod,
            |b, s, st| {
                let ext = b.pre_filter_extensions()?;
                if add {
                    ext.call_add_pod(s, st, &other, slot)
                } else {
                    ext.call_remove_pod(s, st, &other, slot)
                }
            },
        )
        .map(convert::status_from_wit)
    }

    fn post_filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        statuses: &[(u32, Status)],
        dry: Box<dyn WhatIf>,
    ) -> (Box<dyn WhatIf>, Result<berth_sdk::PostFilterResult, CallError>) {
        let statuses: Vec<ex::filter::NodeStatus> = statuses
            .iter()
            .map(|(slot, s)| ex::filter::NodeStatus {
                slot: *slot,
                status: convert::status_to_wit(s),
            })
            .collect();
        let (dry, r) = self.lending(dry, |inst| {
            inst.at_point("PostFilter", On::Nothing, state, pod, |b, s, st| {
                b.post_filter()?
                    .call_post_filter(s, st, &statuses)
            })
        });
        let r = r.map(|r| berth_sdk::PostFilterResult {
            status: convert::status_from_wit(r.status),
            nominated_node_name: r.nominated_node_name,
            victims: r.victims,
            candidates: r
                .candidates
                .into_iter()
                .map(|c| berth_sdk::Candidate {
                    node: c.node,
                    victims: c.victims,
                    pdb_violations: c.pdb_violations,
                })
                .collect(),
        });
        (dry, r)
    }

    fn queueing_hint(
        &mut self,
        event: &berth_sdk::ClusterEvent,
        pod: &berth_sdk::Pod,
        old: Option<&berth_sdk::Object>,
        new: Option<&berth_sdk::Object>,
    ) -> Result<Result<berth_sdk::QueueingHint, String>, CallError> {
        self.point = "QueueingHint";
        self.call_subject = Some(format!("pod {}", pod.key()));
        let pod = convert::pod_to_wit(pod);
        let event = convert::event_to_wit(event);
        let old = old.map(convert::object_to_wit);
        let new = new.map(convert::object_to_wit);
        let r = self.call(|b, s| {
            b.enqueue_extensions()?.call_hint(
                s,
                event,
                &pod,
                old.as_ref(),
                new.as_ref(),
            )
        });
        let r = self.located(r, On::Nothing)?;
        Ok(r.map(|h| match h {
            w::QueueingHint::Queue => berth_sdk::QueueingHint::Queue,
            w::QueueingHint::QueueSkip => berth_sdk::QueueingHint::QueueSkip,
        }))
    }
));

/// What the host keeps of a node it sends as an overlay, to send the next version
/// of that node as a change: the node and its totals, and its pods when the replica
/// holds pods.
fn held_copy(info: &berth_sdk::NodeInfo, wants_pods: bool) -> berth_sdk::NodeInfo {
    berth_sdk::NodeInfo {
        node: info.node.clone(),
        requested: info.requested.clone(),
        non_zero_requested: info.non_zero_requested.clone(),
        pod_count: info.pod_count,
        used_ports: info.used_ports.clone(),
        pods: if wants_pods {
            info.pods.clone()
        } else {
            Vec::new()
        },
        stamp: 0,
    }
}

/// The nodes a call concerns, for its error message.
#[derive(Clone, Copy)]
enum On<'a> {
    Nothing,
    Node(&'a str),
    Slots(&'a [u32]),
}

impl<'a> On<'a> {
    /// The first of a call's arguments that names nodes.
    fn of(args: &[On<'a>]) -> On<'a> {
        args.iter()
            .copied()
            .find(|a| !matches!(a, On::Nothing))
            .unwrap_or(On::Nothing)
    }
}

impl<'a> From<&'a str> for On<'a> {
    fn from(node: &'a str) -> Self {
        On::Node(node)
    }
}

impl<'a> From<&'a [u32]> for On<'a> {
    fn from(slots: &'a [u32]) -> Self {
        On::Slots(slots)
    }
}

/// Scores name no nodes.
impl From<&[i64]> for On<'_> {
    fn from(_: &[i64]) -> Self {
        On::Nothing
    }
}

/// The WIT record of a pod, made once per cycle and passed to every call.
pub type WitPod = w::Pod;

/// Converts a pod into its WIT record.
pub fn pod_to_wit(pod: &berth_sdk::Pod) -> WitPod {
    convert::pod_to_wit(pod)
}
