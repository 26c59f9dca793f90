//! What the framework asks of a plugin instance ([`PluginCalls`], one call per
//! extension point, expanded from the SDK's table of extension points), and the pod
//! of a cycle as every instance sees it ([`CyclePod`]). A sandboxed wasm instance and
//! a native twin both answer these calls; the pod goes to a wasm instance as its WIT
//! record (made once per cycle, on first use, and sent to each instance once per
//! cycle) and to a native one as the SDK's pod.

use super::{CallError, CycleState, WhatIf};
use crate::cache::Snapshot;
use berth_sdk::{ClusterEvent, NodeInfo, Object, Pod, PostFilterResult, QueueingHint, Status};
use std::any::Any;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A pod as a cycle hands it to plugins: the SDK's pod, and the encoding the wasm
/// boundary makes of it (its WIT record), made the first time a wasm instance needs
/// it and then reused by every call of the cycle.
///
/// Each `CyclePod` has an id of its own, never reused in the process: a wasm instance
/// that already holds the pod with that id (it began the cycle) is not sent it again.
/// The pod cannot change once wrapped, so equal ids mean the same pod.
#[derive(Debug)]
pub struct CyclePod {
    id: u64,
    pod: Pod,
    encoded: OnceLock<Box<dyn Any + Send + Sync>>,
}

static NEXT_CYCLE_POD: AtomicU64 = AtomicU64::new(1);

impl CyclePod {
    /// Wraps a pod.
    pub fn new(pod: Pod) -> Self {
        CyclePod {
            id: NEXT_CYCLE_POD.fetch_add(1, Ordering::Relaxed),
            pod,
            encoded: OnceLock::new(),
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

    /// The pod as the wasm boundary encodes it, made by `encode` on first use and
    /// kept for the cycle. Only that boundary encodes pods, so `E` is always its WIT
    /// record.
    pub fn encoded<E: Any + Send + Sync>(&self, encode: impl FnOnce(&Pod) -> E) -> &E {
        self.encoded
            .get_or_init(|| Box::new(encode(&self.pod)))
            .downcast_ref::<E>()
            .expect("only the wasm boundary encodes a cycle's pod")
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

/// Declares [`PluginCalls`] from the table of extension points
/// ([`berth_sdk::for_each_extension_point!`]): the calls of the table's generated
/// interfaces, beside the ones written here (syncing the view of the nodes, and the
/// calls whose shapes are their own).
macro_rules! plugin_calls {
    ( ( $($hand:tt)* )
      $( $gen:ident interface $iface:ident {
            points: [ $( $P:ident $pf:ident $pname:literal $pdoc:literal ),* ],
            also: [ $( $A:ident $af:ident $aname:literal $adoc:literal ),* ],
            calls: [ $( $kind:ident $body:tt ),* $(,)? ],
      } )*
    ) => {
        /// What the framework asks of a plugin instance: bringing its view of the
        /// nodes up to date, and one call per extension point. A wasm instance
        /// answers through its component's exports ([`Instance`]), a native twin
        /// through its plugin type's [`berth_sdk::VTable`]
        /// ([`crate::native`]), and the framework calls either through this.
        pub trait PluginCalls: Send {
            $($hand)*
            $( $( plugin_calls!(@$kind $body); )* )*
        }
    };
    (@pod { $method:ident $label:literal $wit:ident $call:ident $getter:ident -> $ret:ty }) => {
        #[doc = concat!($label, ", for a pod outside a cycle.")]
        fn $method(&mut self, pod: &CyclePod) -> Result<$ret, CallError>;
    };
    (@cycle { $method:ident $label:literal $wit:ident $call:ident $getter:ident
              ( $($arg:ident : $aty:ty),* ) -> $ret:ty $([len $larg:ident $what:literal])? }) => {
        #[doc = concat!($label, ", for the cycle's pod.")]
        fn $method(
            &mut self,
            state: &CycleState,
            pod: &CyclePod,
            $($arg: &$aty),*
        ) -> Result<$ret, CallError>;
    };
    (@dry { $method:ident $label:literal $wit:ident $call:ident $getter:ident
            ( $($arg:ident : $aty:ty),* ) -> $ret:ty }) => {
        #[doc = concat!($label, ", for the cycle's pod, with the what-if API lent for the call and given back.")]
        fn $method(
            &mut self,
            state: &CycleState,
            pod: &CyclePod,
            $($arg: $aty,)*
            dry: Box<dyn WhatIf>,
        ) -> (Box<dyn WhatIf>, Result<$ret, CallError>);
    };
    (@group { $method:ident $label:literal $wit:ident $call:ident $getter:ident
              ( $($arg:ident : $aty:ty),* ) -> $ret:ty $([len $larg:ident $what:literal])? }) => {
        #[doc = concat!($label, ", for a pod group, with its group cycle's state.")]
        fn $method(
            &mut self,
            state: &CycleState,
            group: &berth_sdk::PodGroup,
            $($arg: &$aty),*
        ) -> Result<$ret, CallError>;
    };
}

berth_sdk::for_each_extension_point!(plugin_calls (
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

    /// [`PluginCalls::sync_overlaid`] with one what-if node that several instances
    /// judge in turn (a preemption's dry run): an instance that keeps node infos by
    /// reference (a native twin) shares `overlay` rather than copying it. Its stamp
    /// must be 0: nothing computed from a what-if may be kept.
    fn sync_overlaid_shared(
        &mut self,
        snapshot: &Snapshot,
        slot: u32,
        overlay: &std::sync::Arc<NodeInfo>,
    ) -> Result<(), CallError> {
        self.sync_overlaid(snapshot, &[(slot, overlay)])
    }

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

    /// The queueing hint for an event; an error (of the plugin or the call) counts as
    /// Queue at the caller.
    fn queueing_hint(
        &mut self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<Result<QueueingHint, String>, CallError>;

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
        dry: Box<dyn WhatIf>,
    ) -> (Box<dyn WhatIf>, Result<PostFilterResult, CallError>);
));
