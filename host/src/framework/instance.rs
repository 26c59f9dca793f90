//! A plugin instance the framework calls: a sandboxed wasm instance, or a native twin
//! compiled into the host. Both answer the same calls; the pod goes to a wasm
//! instance as its WIT record (made once per cycle, on first use, and sent to each
//! instance once per cycle) and to a native one as the SDK's pod.

use super::CycleState;
use super::preemption::DryRun;
use crate::cache::Snapshot;
use crate::native::NativeInstance;
use crate::wasm::module::{WitPod, pod_to_wit};
use crate::wasm::{CallError, Instance};
use berth_sdk::{
    ClusterEvent, NodeInfo, Object, Pod, PostFilterResult, PreFilterResult, QueueingHint, Status,
};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A pod as a cycle hands it to plugins: the SDK's pod, and its WIT record, made the
/// first time a wasm instance needs it and then reused by every call of the cycle.
///
/// Each `CyclePod` has an id of its own, never reused in the process: a wasm instance
/// that already holds the pod with that id (it began the cycle) is not sent it again.
/// The pod cannot change once wrapped, so equal ids mean the same pod.
#[derive(Debug)]
pub struct CyclePod {
    id: u64,
    pod: Pod,
    wit: OnceLock<WitPod>,
}

static NEXT_CYCLE_POD: AtomicU64 = AtomicU64::new(1);

impl CyclePod {
    /// Wraps a pod.
    pub fn new(pod: Pod) -> Self {
        CyclePod {
            id: NEXT_CYCLE_POD.fetch_add(1, Ordering::Relaxed),
            pod,
            wit: OnceLock::new(),
        }
    }

    /// The id that tells this pod from every other `CyclePod` of the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The SDK's pod.
    pub fn pod(&self) -> &Pod {
        &self.pod
    }

    /// The WIT record (converted once).
    pub fn wit(&self) -> &WitPod {
        self.wit.get_or_init(|| pod_to_wit(&self.pod))
    }
}

impl From<Pod> for CyclePod {
    fn from(pod: Pod) -> Self {
        CyclePod::new(pod)
    }
}

impl std::ops::Deref for CyclePod {
    type Target = Pod;
    fn deref(&self) -> &Pod {
        &self.pod
    }
}

/// One live plugin instance.
#[allow(
    clippy::large_enum_variant,
    reason = "a handful per worker, called in the hot path: no indirection wanted"
)]
pub(crate) enum PluginInstance {
    /// A sandboxed component instance.
    Wasm(Instance),
    /// A native twin.
    Native(NativeInstance),
}

impl PluginInstance {
    /// Brings the instance's view of the nodes up to the snapshot.
    pub fn sync(&mut self, snapshot: &Snapshot) -> Result<(), CallError> {
        match self {
            PluginInstance::Wasm(i) => i.sync(snapshot),
            PluginInstance::Native(n) => {
                n.sync(snapshot);
                Ok(())
            }
        }
    }

    /// Overlays nodes with nominated pods counted, for this cycle.
    pub fn sync_overlay(&mut self, overlays: &[(u32, &NodeInfo)]) -> Result<(), CallError> {
        match self {
            PluginInstance::Wasm(i) => i.sync_overlay(overlays),
            PluginInstance::Native(n) => {
                n.sync_overlay(overlays);
                Ok(())
            }
        }
    }

    /// QueueSort's key.
    pub fn sort_key(&mut self, pod: &CyclePod) -> Result<Vec<i64>, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.sort_key(pod.wit()),
            PluginInstance::Native(n) => Ok(n.sort_key(pod)),
        }
    }

    /// A queueing hint.
    pub fn queueing_hint(
        &mut self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<Result<QueueingHint, String>, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.queueing_hint(event, &pod_to_wit(pod), old, new),
            PluginInstance::Native(n) => Ok(n.queueing_hint(event, pod, old, new)),
        }
    }

    /// PreEnqueue.
    pub fn pre_enqueue(&mut self, pod: &CyclePod) -> Result<Status, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.pre_enqueue(pod.wit()),
            PluginInstance::Native(n) => Ok(n.pre_enqueue(pod)),
        }
    }

    /// PreFilter.
    pub fn pre_filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
    ) -> Result<PreFilterResult, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.pre_filter(state, pod),
            PluginInstance::Native(n) => Ok(n.pre_filter(state, pod)),
        }
    }

    /// PreFilterExtensions' AddPod: `other` now counts on the node in `slot`.
    pub fn add_pod(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        other: &Pod,
        slot: u32,
    ) -> Result<Status, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.pod_on_node(true, state, pod, other, slot),
            PluginInstance::Native(n) => Ok(n.pod_on_node(true, state, pod, other, slot)),
        }
    }

    /// PreFilterExtensions' RemovePod: `other` no longer counts on the node in `slot`.
    pub fn remove_pod(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        other: &Pod,
        slot: u32,
    ) -> Result<Status, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.pod_on_node(false, state, pod, other, slot),
            PluginInstance::Native(n) => Ok(n.pod_on_node(false, state, pod, other, slot)),
        }
    }

    /// PostFilter, with the what-if API lent for the call (and given back).
    pub fn post_filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        statuses: &[(u32, Status)],
        dry: DryRun,
    ) -> (DryRun, Result<PostFilterResult, CallError>) {
        match self {
            PluginInstance::Wasm(i) => i.post_filter(state, pod, statuses, dry),
            PluginInstance::Native(n) => {
                let mut dry = dry;
                let r = n.post_filter(state, pod, statuses, &mut dry);
                (dry, Ok(r))
            }
        }
    }

    /// Filter over many nodes: the nodes that did not pass.
    pub fn filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        slots: &[u32],
    ) -> Result<Vec<(u32, Status)>, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.filter(state, pod, slots),
            PluginInstance::Native(n) => Ok(n.filter(state, pod, slots)),
        }
    }

    /// PreScore.
    pub fn pre_score(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        slots: &[u32],
    ) -> Result<Status, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.pre_score(state, pod, slots),
            PluginInstance::Native(n) => Ok(n.pre_score(state, pod, slots)),
        }
    }

    /// Score over many nodes, in order.
    pub fn score(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        slots: &[u32],
    ) -> Result<Result<Vec<i64>, Status>, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.score(state, pod, slots),
            PluginInstance::Native(n) => Ok(n.score(state, pod, slots)),
        }
    }

    /// NormalizeScore.
    pub fn normalize_score(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        scores: &[i64],
    ) -> Result<Result<Vec<i64>, Status>, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.normalize_score(state, pod, scores),
            PluginInstance::Native(n) => Ok(n.normalize_score(state, pod, scores)),
        }
    }

    /// Reserve.
    pub fn reserve(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<Status, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.reserve(state, pod, node),
            PluginInstance::Native(n) => Ok(n.reserve(state, pod, node)),
        }
    }

    /// Unreserve.
    pub fn unreserve(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(), CallError> {
        match self {
            PluginInstance::Wasm(i) => i.unreserve(state, pod, node),
            PluginInstance::Native(n) => {
                n.unreserve(state, pod, node);
                Ok(())
            }
        }
    }

    /// Permit.
    pub fn permit(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(Status, std::time::Duration), CallError> {
        match self {
            PluginInstance::Wasm(i) => i.permit(state, pod, node),
            PluginInstance::Native(n) => Ok(n.permit(state, pod, node)),
        }
    }

    /// PreBind.
    pub fn pre_bind(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<Status, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.pre_bind(state, pod, node),
            PluginInstance::Native(n) => Ok(n.pre_bind(state, pod, node)),
        }
    }

    /// Bind.
    pub fn bind(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<Status, CallError> {
        match self {
            PluginInstance::Wasm(i) => i.bind(state, pod, node),
            PluginInstance::Native(n) => Ok(n.bind(state, pod, node)),
        }
    }

    /// PostBind.
    pub fn post_bind(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(), CallError> {
        match self {
            PluginInstance::Wasm(i) => i.post_bind(state, pod, node),
            PluginInstance::Native(n) => {
                n.post_bind(state, pod, node);
                Ok(())
            }
        }
    }
}
