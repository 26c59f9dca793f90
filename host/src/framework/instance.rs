//! A plugin instance the framework calls: a sandboxed wasm instance, or a native twin
//! compiled into the host. Both answer the same calls; the pod goes to a wasm
//! instance as its WIT record (made once per cycle, on first use, and sent to each
//! instance once per cycle) and to a native one as the SDK's pod.

use super::CycleState;
use super::preemption::DryRun;
use crate::cache::Snapshot;
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

/// What the framework asks of a plugin instance: bringing its view of the nodes up to
/// date, and one call per extension point. This is the host's one description of the
/// extension points: a wasm instance answers through its component's exports
/// ([`Instance`]), a native twin through its plugin type's [`berth_sdk::VTable`]
/// ([`crate::native::NativeInstance`]), and the framework calls either through this.
pub trait PluginCalls: Send {
    /// Brings the instance's view of the nodes up to the snapshot.
    fn sync(&mut self, snapshot: &Snapshot) -> Result<(), CallError>;

    /// Brings the view up to the snapshot with some nodes replaced, for the calls
    /// that follow, by what-if versions: with the pods nominated to them counted
    /// (upstream's first filter pass), or with a preemption's victims removed. The
    /// next sync puts the snapshot's versions back.
    fn sync_overlaid(
        &mut self,
        snapshot: &Snapshot,
        overlays: &[(u32, &NodeInfo)],
    ) -> Result<(), CallError>;

    /// [`PluginCalls::sync_overlaid`] (with no overlays, [`PluginCalls::sync`]) as
    /// the first call of `pod`'s cycle on this instance: a wasm instance sends the
    /// pod in the same crossing as the nodes.
    fn sync_for(
        &mut self,
        snapshot: &Snapshot,
        overlays: &[(u32, &NodeInfo)],
        _pod: &CyclePod,
    ) -> Result<(), CallError> {
        if overlays.is_empty() {
            self.sync(snapshot)
        } else {
            self.sync_overlaid(snapshot, overlays)
        }
    }

    /// The features a pod needs for this instance, as configured, to take part in
    /// its cycles (empty: every pod), as [`berth_sdk::Plugin::only_for_pods_with`].
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature];

    /// QueueSort's key.
    fn sort_key(&mut self, pod: &CyclePod) -> Result<Vec<i64>, CallError>;

    /// The queueing hint for an event; an error (of the plugin or the call) counts as
    /// Queue at the caller.
    fn queueing_hint(
        &mut self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<Result<QueueingHint, String>, CallError>;

    /// PreEnqueue.
    fn pre_enqueue(&mut self, pod: &CyclePod) -> Result<Status, CallError>;

    /// PreFilter.
    fn pre_filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
    ) -> Result<PreFilterResult, CallError>;

    /// PreFilterExtensions' AddPod (`add`: `other` now counts on the node in `slot`)
    /// or RemovePod (it no longer does).
    fn pod_on_node(
        &mut self,
        add: bool,
        state: &CycleState,
        pod: &CyclePod,
        other: &Pod,
        slot: u32,
    ) -> Result<Status, CallError>;

    /// PostFilter over every node's status (by slot), with the what-if API lent for
    /// the call and given back.
    fn post_filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        statuses: &[(u32, Status)],
        dry: DryRun,
    ) -> (DryRun, Result<PostFilterResult, CallError>);

    /// Filter over many nodes: the nodes that did not pass, with why.
    fn filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        slots: &[u32],
    ) -> Result<Vec<(u32, Status)>, CallError>;

    /// PreScore.
    fn pre_score(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        slots: &[u32],
    ) -> Result<Status, CallError>;

    /// Score over many nodes, one score per slot in order.
    fn score(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        slots: &[u32],
    ) -> Result<Result<Vec<i64>, Status>, CallError>;

    /// NormalizeScore.
    fn normalize_score(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        scores: &[i64],
    ) -> Result<Result<Vec<i64>, Status>, CallError>;

    /// Reserve.
    fn reserve(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<Status, CallError>;

    /// Unreserve.
    fn unreserve(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(), CallError>;

    /// Permit: the status and, with Wait, how long to wait.
    fn permit(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(Status, std::time::Duration), CallError>;

    /// PreBind.
    fn pre_bind(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<Status, CallError>;

    /// Bind.
    fn bind(&mut self, state: &CycleState, pod: &CyclePod, node: &str)
    -> Result<Status, CallError>;

    /// PostBind.
    fn post_bind(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(), CallError>;
}

/// One live plugin instance: the framework calls it through [`PluginCalls`] (by
/// dereference), and tells the two kinds apart only to know when to remake one.
#[allow(
    clippy::large_enum_variant,
    reason = "a handful per worker, called in the hot path: no indirection wanted"
)]
pub(crate) enum PluginInstance {
    /// A sandboxed component instance.
    Wasm(Instance),
    /// A native twin.
    Native(Box<dyn PluginCalls>),
}

impl std::ops::Deref for PluginInstance {
    type Target = dyn PluginCalls;
    fn deref(&self) -> &Self::Target {
        match self {
            PluginInstance::Wasm(i) => i,
            PluginInstance::Native(n) => n.as_ref(),
        }
    }
}

impl std::ops::DerefMut for PluginInstance {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            PluginInstance::Wasm(i) => i,
            PluginInstance::Native(n) => n.as_mut(),
        }
    }
}
