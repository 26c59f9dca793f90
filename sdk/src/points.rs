//! The extension points, declared once.
//!
//! [`for_each_extension_point!`](crate::for_each_extension_point) holds one row per
//! WIT interface of the plugin world: the [`ExtensionPoint`]s it serves (with the
//! name profiles know them by) and its calls, each with the host's metrics label, the
//! WIT function, its arguments and its answer. Everything that repeats per point is
//! expanded from that table: the SDK's [`ExtensionPoint`] enum, the component's
//! exports (the guest glue), and in the host the `PluginCalls` trait, the wasm
//! instance's calls, the native twin's dispatch and the configuration's point names.
//!
//! What a call means (which entry of the plugin's [`VTable`] it runs, what it answers
//! when the plugin lacks the point, how nodes are found by slot) is written once, in
//! the functions of this module, which both the component and the native twin run.
//!
//! Adding an extension point is then: its WIT interface (an optional export of the
//! world, with `implemented`), its row below, its trait, its functions here and its
//! entries in [`VTable`](crate::VTable), and its runner in the host's framework.

use crate::events::{ClusterEvent, Object, QueueingHint};
use crate::plugin::{CycleState, PreFilterResult, VTable};
use crate::preemption::{DryRun, NodeVictims, PostFilterResult};
use crate::sign::SignFragment;
use crate::types::{NodeInfo, Pod, Status};
use crate::workload::{
    Placement, PlacementProgress, PodGroup, PodGroupAssignments, PodGroupPostFilterResult,
};

/// Calls the macro named by its first argument with the table of extension points.
///
/// The macro receives `(EXTRA) ROW*`, where `EXTRA` is whatever followed the name
/// here (in parentheses), and each `ROW` is
///
/// ```text
/// generated|hand|optional interface WIT_INTERFACE {
///     points: [Variant field "profileName" "doc", ...],   // configured in profiles
///     also: [Variant field "profileName" "doc", ...],     // not configured on their own
///     calls: [pod {..} | cycle {..} | group {..}, ...],
/// }
/// ```
///
/// `generated` and `hand` interfaces are exports of WIT 0.7.0 that every module has;
/// their points are the `extension-point` enum's, which `plugin.info` lists. An
/// `optional` interface came later: a module may lack it, and its own `implemented`
/// function says which of its points the plugin has (so the enum never grows).
///
/// A `pod` call takes the pod as its WIT argument (no cycle state):
/// `{ method "Label" wit_fn call_wit_fn interface -> Answer }`. A `cycle` call acts
/// on the cycle's pod with the cycle state's handle:
/// `{ method "Label" wit_fn call_wit_fn interface (arg: Type, ...) -> Answer
/// [len arg "what"] }`, where each argument is passed by reference (`&Type`; the
/// guest receives it owned), and `len` says the answer must have one entry per
/// element of `arg`. A `group` call has the same shape and acts on a pod group (its
/// first WIT argument after the state), with the group cycle's state; its arguments
/// cross as WIT records (`ToWitArg` in the host, `FromWitArg` in the guest). A `hand`
/// interface's calls are written by hand wherever they are used (their shapes are
/// their own: PostFilter lends the what-if API, the queueing hint carries cluster
/// objects).
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_extension_point {
    ($m:ident $( ( $($extra:tt)* ) )?) => {
        $m! {
            ( $( $($extra)* )? )
            generated interface pre_enqueue {
                points: [PreEnqueue pre_enqueue "preEnqueue" "Gate a pod before it enters the active queue."],
                also: [],
                calls: [
                    pod { pre_enqueue "PreEnqueue" pre_enqueue call_pre_enqueue pre_enqueue
                        -> $crate::Status },
                ],
            }
            generated interface queue_sort {
                points: [QueueSort queue_sort "queueSort" "Order the active queue."],
                also: [],
                calls: [
                    pod { sort_key "QueueSort" sort_key call_sort_key queue_sort
                        -> ::std::vec::Vec<i64> },
                ],
            }
            hand interface enqueue_extensions {
                points: [],
                also: [],
                calls: [],
            }
            generated interface pre_filter {
                points: [PreFilter pre_filter "preFilter" "Once per cycle, before filtering."],
                also: [],
                calls: [
                    cycle { pre_filter "PreFilter" pre_filter call_pre_filter pre_filter
                        () -> $crate::PreFilterResult },
                ],
            }
            hand interface pre_filter_extensions {
                points: [],
                also: [],
                calls: [],
            }
            generated interface filter {
                points: [Filter filter "filter" "Per node: can the pod run here?"],
                also: [],
                calls: [
                    cycle { filter "Filter" filter call_filter filter
                        (slots: [u32]) -> ::std::vec::Vec<(u32, $crate::Status)> },
                ],
            }
            hand interface post_filter {
                points: [PostFilter post_filter "postFilter" "When no node fits (preemption)."],
                also: [],
                calls: [],
            }
            generated interface pre_score {
                points: [PreScore pre_score "preScore" "Once per cycle, before scoring."],
                also: [],
                calls: [
                    cycle { pre_score "PreScore" pre_score call_pre_score pre_score
                        (slots: [u32]) -> $crate::Status },
                ],
            }
            generated interface score {
                points: [Score score "score" "Per feasible node: how good is it?"],
                also: [NormalizeScore normalize_score "normalizeScore" "Rescale a plugin's scores into [0, 100]."],
                calls: [
                    cycle { score "Score" score call_score score
                        (slots: [u32]) -> ::std::result::Result<::std::vec::Vec<i64>, $crate::Status>
                        [len slots "scores"] },
                    cycle { normalize_score "NormalizeScore" normalize_score call_normalize_score score
                        (scores: [i64]) -> ::std::result::Result<::std::vec::Vec<i64>, $crate::Status>
                        [len scores "normalized scores"] },
                ],
            }
            generated interface reserve {
                points: [Reserve reserve "reserve" "Claim resources for the chosen node (and release them on failure)."],
                also: [],
                calls: [
                    cycle { reserve "Reserve" reserve call_reserve reserve
                        (node: str) -> $crate::Status },
                    cycle { unreserve "Unreserve" unreserve call_unreserve reserve
                        (node: str) -> () },
                ],
            }
            generated interface permit {
                points: [Permit permit "permit" "Approve, reject or delay binding."],
                also: [],
                calls: [
                    cycle { permit "Permit" permit call_permit permit
                        (node: str) -> ($crate::Status, ::std::time::Duration) },
                ],
            }
            generated interface pre_bind {
                points: [PreBind pre_bind "preBind" "Before binding."],
                also: [],
                calls: [
                    cycle { pre_bind "PreBind" pre_bind call_pre_bind pre_bind
                        (node: str) -> $crate::Status },
                ],
            }
            generated interface bind {
                points: [Bind bind "bind" "Bind the pod."],
                also: [],
                calls: [
                    cycle { bind "Bind" bind call_bind bind
                        (node: str) -> $crate::Status },
                ],
            }
            generated interface post_bind {
                points: [PostBind post_bind "postBind" "After a successful bind."],
                also: [],
                calls: [
                    cycle { post_bind "PostBind" post_bind call_post_bind post_bind
                        (node: str) -> () },
                ],
            }
            optional interface placement_score {
                points: [PlacementScore placement_score "placementScore" "Per feasible placement of a pod group: how good is it?"],
                also: [NormalizePlacementScore normalize_placement_score "normalizePlacementScore" "Rescale a plugin's placement scores into [0, 100]."],
                calls: [
                    group { score_placement "PlacementScore" score_placement call_score_placement placement_score
                        (assignments: $crate::PodGroupAssignments) -> ::std::result::Result<i64, $crate::Status> },
                    group { normalize_placement_score "NormalizePlacementScore" normalize_placement_score call_normalize_placement_score placement_score
                        (scores: [i64]) -> ::std::result::Result<::std::vec::Vec<i64>, $crate::Status>
                        [len scores "normalized placement scores"] },
                ],
            }
            optional interface placement_generate {
                points: [PlacementGenerate placement_generate "placementGenerate" "Once per pod group cycle: the placements (sets of nodes) to try the group in."],
                also: [],
                calls: [
                    group { generate_placements "PlacementGenerate" generate_placements call_generate_placements placement_generate
                        (parent: $crate::Placement) -> ::std::result::Result<::std::vec::Vec<$crate::Placement>, $crate::Status> },
                ],
            }
            optional interface placement_feasible {
                points: [PlacementFeasible placement_feasible "placementFeasible" "After each member of a pod group's cycle: can the group still be placed?"],
                also: [],
                calls: [
                    group { placement_feasible "PlacementFeasible" placement_feasible call_placement_feasible placement_feasible
                        (progress: $crate::PlacementProgress) -> $crate::Status },
                ],
            }
            optional interface pod_group_post_filter {
                points: [PodGroupPostFilter pod_group_post_filter "podGroupPostFilter" "When a pod group's cycle found it unschedulable: make room for it (workload-aware preemption)."],
                also: [],
                calls: [
                    group { pod_group_post_filter "PodGroupPostFilter" pod_group_post_filter call_pod_group_post_filter pod_group_post_filter
                        () -> $crate::PodGroupPostFilterResult },
                ],
            }
            optional interface sign {
                points: [],
                also: [SignPod sign_pod "signPod" "Sign a pod: the parts of it the plugin's filtering and scoring read (opportunistic batching)."],
                calls: [
                    cycle { sign_pod "SignPod" sign_pod call_sign_pod sign
                        () -> ::std::result::Result<::std::vec::Vec<$crate::SignFragment>, $crate::Status> },
                ],
            }
            optional interface select_victims {
                points: [],
                also: [SelectVictimsOnNode select_victims_on_node "selectVictimsOnNode" "A PostFilter plugin's dry run of one node, which the host may run for many nodes at once on its workers."],
                calls: [
                    dry { select_victims_on_node "SelectVictimsOnNode" select_victims_on_node call_select_victims_on_node select_victims
                        (slot: u32) -> ::std::result::Result<$crate::NodeVictims, $crate::Status> },
                ],
            }
        }
    };
}

macro_rules! extension_point_enum {
    ( ()
      $( $gen:ident interface $iface:ident {
            points: [ $( $P:ident $pf:ident $pname:literal $pdoc:literal ),* ],
            also: [ $( $A:ident $af:ident $aname:literal $adoc:literal ),* ],
            calls: [ $( $kind:ident $body:tt ),* $(,)? ],
      } )*
    ) => {
        /// An extension point of the scheduling framework.
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        pub enum ExtensionPoint {
            $( $( #[doc = $pdoc] $P, )* $( #[doc = $adoc] $A, )* )*
        }

        impl ExtensionPoint {
            /// Every extension point, in framework order.
            pub const ALL: [ExtensionPoint; [$( $( stringify!($P), )* $( stringify!($A), )* )*].len()] =
                [$( $( ExtensionPoint::$P, )* $( ExtensionPoint::$A, )* )*];

            /// The extension points a profile configures (`plugins.<point>` in a
            /// KubeSchedulerConfiguration), in upstream's order; NormalizeScore is part
            /// of Score.
            pub const CONFIGURABLE: [ExtensionPoint; [$( $( stringify!($P), )* )*].len()] =
                [$( $( ExtensionPoint::$P, )* )*];

            /// The name used in profiles (`filter`, `preScore`, ...), as
            /// KubeSchedulerConfiguration.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $( ExtensionPoint::$P => $pname, )* $( ExtensionPoint::$A => $aname, )* )*
                }
            }

            /// The point a profile names `name`, if any.
            pub fn from_name(name: &str) -> Option<ExtensionPoint> {
                ExtensionPoint::ALL.into_iter().find(|p| p.as_str() == name)
            }

            /// Whether a profile gives the point's plugins weights (Score,
            /// PlacementScore): the framework multiplies their normalized scores.
            pub fn weighted(self) -> bool {
                matches!(self, ExtensionPoint::Score | ExtensionPoint::PlacementScore)
            }
        }
    };
}

for_each_extension_point!(extension_point_enum);

/// The nodes a plugin instance sees, by slot: the component's replica or the native
/// twin's view of the snapshot.
pub trait Replica {
    /// The node in `slot`.
    fn node(&self, slot: u32) -> Option<&NodeInfo>;
    /// The status for a slot the replica does not hold.
    fn missing(&self, slot: u32) -> Status;
    /// Runs `f` over every node, in slot order (PreFilter, PreScore).
    fn with_all<R>(&self, f: impl FnOnce(&[&NodeInfo]) -> R) -> R;
    /// Runs `f` over the nodes of `slots` the replica holds, in that order.
    fn with_slots<R>(&self, slots: &[u32], f: impl FnOnce(&[&NodeInfo]) -> R) -> R {
        let nodes: Vec<&NodeInfo> = slots.iter().filter_map(|&s| self.node(s)).collect();
        f(&nodes)
    }
}

/// Runs `f` over the cycle's cluster: every node, or, for a pod group member tried
/// within a placement, the placement's nodes alone ([`crate::PLACEMENT_NODES`]), as
/// kube-scheduler restricts that cycle's snapshot. Only a member's state is read for
/// it, so an ordinary pod's cycle pays nothing.
fn with_cycle_nodes<R>(
    state: &CycleState,
    pod: &Pod,
    replica: &impl Replica,
    f: impl FnOnce(&[&NodeInfo]) -> R,
) -> R {
    let placement = pod
        .scheduling_group
        .is_some()
        .then(|| state.value(&crate::PLACEMENT_NODES))
        .flatten();
    match placement {
        Some(slots) => replica.with_slots(&slots, f),
        None => replica.with_all(f),
    }
}

/// The answer when the plugin does not implement the point (`point` as profiles name
/// it).
pub fn not_implemented(point: &str) -> Status {
    Status::error(format!("plugin does not implement {point}"))
}

/// The answer when the host calls a cycle's extension point before beginning a cycle.
pub fn no_cycle() -> Status {
    Status::error("berth: the host called the plugin outside a cycle")
}

/// PreEnqueue.
#[inline]
pub fn pre_enqueue<T>(plugin: &T, vt: &VTable<T>, pod: &Pod) -> Status {
    match vt.pre_enqueue {
        Some(f) => f(plugin, pod),
        None => not_implemented("preEnqueue"),
    }
}

/// QueueSort's key; without the point, upstream's PrioritySort (`[-priority]`).
#[inline]
pub fn sort_key<T>(plugin: &T, vt: &VTable<T>, pod: &Pod) -> Vec<i64> {
    match vt.queue_sort {
        Some(f) => f(plugin, pod),
        None => vec![-i64::from(pod.priority)],
    }
}

/// The queueing hint for an event; without the point, Queue.
#[inline]
pub fn queueing_hint<T>(
    plugin: &T,
    vt: &VTable<T>,
    event: &ClusterEvent,
    pod: &Pod,
    old: Option<&Object>,
    new: Option<&Object>,
) -> Result<QueueingHint, String> {
    match vt.queueing_hint {
        Some(f) => f(plugin, event, pod, old, new),
        None => Ok(QueueingHint::Queue),
    }
}

/// PreFilter, over every node of the replica.
#[inline]
pub fn pre_filter<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    replica: &impl Replica,
) -> PreFilterResult {
    let Some(f) = vt.pre_filter else {
        return not_implemented("preFilter").into();
    };
    let Some(pod) = pod else {
        return no_cycle().into();
    };
    with_cycle_nodes(state, pod, replica, |nodes| f(plugin, state, pod, nodes))
}

/// Filter over many nodes: the nodes that did not pass, with why.
#[inline(always)]
pub fn filter<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    replica: &impl Replica,
    slots: &[u32],
) -> Vec<(u32, Status)> {
    let Some(f) = vt.filter else {
        return slots
            .iter()
            .map(|&s| (s, not_implemented("filter")))
            .collect();
    };
    let Some(pod) = pod else {
        return slots.iter().map(|&s| (s, no_cycle())).collect();
    };
    let mut out = Vec::new();
    for &slot in slots {
        let status = match replica.node(slot) {
            Some(node) => f(plugin, state, pod, node),
            None => replica.missing(slot),
        };
        if !status.is_success() {
            out.push((slot, status));
        }
    }
    out
}

/// PreFilterExtensions' AddPod (`add`: `other` now counts on the node in `slot`) or
/// RemovePod (it no longer does).
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn pod_on_node<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    replica: &impl Replica,
    add: bool,
    other: &Pod,
    slot: u32,
) -> Status {
    let Some((add_pod, remove_pod)) = vt.pre_filter_extensions else {
        return not_implemented("preFilterExtensions");
    };
    let Some(pod) = pod else {
        return no_cycle();
    };
    let f = if add { add_pod } else { remove_pod };
    match replica.node(slot) {
        Some(node) => f(plugin, state, pod, other, node),
        None => replica.missing(slot),
    }
}

/// PostFilter over every node's status (by slot), with the host's what-if API.
#[inline]
pub fn post_filter<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    replica: &impl Replica,
    statuses: &[(u32, Status)],
    dry: &dyn DryRun,
) -> PostFilterResult {
    let Some(f) = vt.post_filter else {
        return not_implemented("postFilter").into();
    };
    let Some(pod) = pod else {
        return no_cycle().into();
    };
    let mut nodes = Vec::with_capacity(statuses.len());
    for (slot, status) in statuses {
        match replica.node(*slot) {
            Some(n) => nodes.push((n, status.clone())),
            None => return replica.missing(*slot).into(),
        }
    }
    f(plugin, state, pod, &nodes, dry)
}

/// PreScore, with the feasible nodes and every node of the replica.
#[inline]
pub fn pre_score<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    replica: &impl Replica,
    slots: &[u32],
) -> Status {
    let Some(f) = vt.pre_score else {
        return not_implemented("preScore");
    };
    let Some(pod) = pod else {
        return no_cycle();
    };
    let mut nodes = Vec::with_capacity(slots.len());
    for &slot in slots {
        match replica.node(slot) {
            Some(n) => nodes.push(n),
            None => return replica.missing(slot),
        }
    }
    with_cycle_nodes(state, pod, replica, |all| {
        f(plugin, state, pod, &nodes, all)
    })
}

/// Score over many nodes, one score per slot in order.
#[inline(always)]
pub fn score<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    replica: &impl Replica,
    slots: &[u32],
) -> Result<Vec<i64>, Status> {
    let Some(f) = vt.score else {
        return Err(not_implemented("score"));
    };
    let Some(pod) = pod else {
        return Err(no_cycle());
    };
    slots
        .iter()
        .map(|&slot| match replica.node(slot) {
            Some(n) => f(plugin, state, pod, n),
            None => Err(replica.missing(slot)),
        })
        .collect()
}

/// A normalization (`normalize` rescales in place) run on a copy of `scores`: the
/// copy rescaled, or the plugin's status when it is not Success.
#[inline]
fn rescaled(
    scores: &[i64],
    normalize: impl FnOnce(&mut [i64]) -> Status,
) -> Result<Vec<i64>, Status> {
    let mut scores = scores.to_vec();
    let status = normalize(&mut scores);
    if status.is_success() {
        Ok(scores)
    } else {
        Err(status)
    }
}

/// NormalizeScore: the scores rescaled.
#[inline]
pub fn normalize_score<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    _replica: &impl Replica,
    scores: &[i64],
) -> Result<Vec<i64>, Status> {
    let Some(f) = vt.normalize_score else {
        return Err(not_implemented("normalizeScore"));
    };
    let Some(pod) = pod else {
        return Err(no_cycle());
    };
    rescaled(scores, |s| f(plugin, state, pod, s))
}

/// A [`VTable`] entry of a point called at the chosen node.
type AtNode<T, R> = fn(&T, &CycleState, &Pod, &str) -> R;

/// Runs a binding-cycle point at the chosen node: the plugin's answer, `absent`
/// without the point, `outside` before a cycle began.
#[inline]
fn at_node<T, R>(
    f: Option<AtNode<T, R>>,
    plugin: &T,
    state: &CycleState,
    pod: Option<&Pod>,
    node: &str,
    absent: impl FnOnce() -> R,
    outside: impl FnOnce() -> R,
) -> R {
    match (f, pod) {
        (None, _) => absent(),
        (Some(_), None) => outside(),
        (Some(f), Some(pod)) => f(plugin, state, pod, node),
    }
}

/// Reserve.
#[inline]
pub fn reserve<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    _replica: &impl Replica,
    node: &str,
) -> Status {
    let f = vt.reserve.map(|(reserve, _)| reserve);
    at_node(
        f,
        plugin,
        state,
        pod,
        node,
        || not_implemented("reserve"),
        no_cycle,
    )
}

/// Unreserve.
#[inline]
pub fn unreserve<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    _replica: &impl Replica,
    node: &str,
) {
    let f = vt.reserve.map(|(_, unreserve)| unreserve);
    at_node(f, plugin, state, pod, node, || (), || ())
}

/// Permit: the status and, with Wait, how long to wait.
#[inline]
pub fn permit<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    _replica: &impl Replica,
    node: &str,
) -> (Status, std::time::Duration) {
    at_node(
        vt.permit,
        plugin,
        state,
        pod,
        node,
        || (not_implemented("permit"), std::time::Duration::ZERO),
        || (no_cycle(), std::time::Duration::ZERO),
    )
}

/// PreBind.
#[inline]
pub fn pre_bind<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    _replica: &impl Replica,
    node: &str,
) -> Status {
    at_node(
        vt.pre_bind,
        plugin,
        state,
        pod,
        node,
        || not_implemented("preBind"),
        no_cycle,
    )
}

/// Bind.
#[inline]
pub fn bind<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    _replica: &impl Replica,
    node: &str,
) -> Status {
    at_node(
        vt.bind,
        plugin,
        state,
        pod,
        node,
        || not_implemented("bind"),
        no_cycle,
    )
}

/// PostBind.
#[inline]
pub fn post_bind<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    _replica: &impl Replica,
    node: &str,
) {
    at_node(vt.post_bind, plugin, state, pod, node, || (), || ())
}

/// PlacementScore: one placement's score.
#[inline]
pub fn score_placement<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    group: &PodGroup,
    _replica: &impl Replica,
    assignments: &PodGroupAssignments,
) -> Result<i64, Status> {
    match vt.placement_score {
        Some(f) => f(plugin, state, group, assignments),
        None => Err(not_implemented("placementScore")),
    }
}

/// NormalizePlacementScore: the placements' scores rescaled.
#[inline]
pub fn normalize_placement_score<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    group: &PodGroup,
    _replica: &impl Replica,
    scores: &[i64],
) -> Result<Vec<i64>, Status> {
    let Some(f) = vt.normalize_placement_score else {
        return Err(not_implemented("normalizePlacementScore"));
    };
    rescaled(scores, |s| f(plugin, state, group, s))
}

/// PlacementFeasible: the verdict on a pod group as placed so far. A plugin without
/// the point has nothing against the group.
#[inline]
pub fn placement_feasible<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    group: &PodGroup,
    _replica: &impl Replica,
    progress: &PlacementProgress,
) -> Status {
    match vt.placement_feasible {
        Some(f) => f(plugin, state, group, progress),
        None => Status::success(),
    }
}

/// PlacementGenerate: the placements within `parent`, whose nodes the plugin gets
/// from its replica (by name, in the parent's order). A parent node the replica
/// lacks is an error: the host syncs the replica before the call.
#[inline]
pub fn generate_placements<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    group: &PodGroup,
    replica: &impl Replica,
    parent: &Placement,
) -> Result<Vec<Placement>, Status> {
    let Some(f) = vt.placement_generate else {
        return Err(not_implemented("placementGenerate"));
    };
    replica.with_all(|all| {
        let by_name: std::collections::HashMap<&str, &NodeInfo> =
            all.iter().map(|n| (n.node.name.as_str(), *n)).collect();
        let mut nodes = Vec::with_capacity(parent.nodes.len());
        for name in &parent.nodes {
            match by_name.get(name.as_str()) {
                Some(n) => nodes.push(*n),
                None => {
                    return Err(Status::error(format!(
                        "node {name} of placement {:?} is not in the plugin's replica",
                        parent.name
                    )));
                }
            }
        }
        f(plugin, state, group, parent, &nodes)
    })
}

/// SignPod: the cycle's pod's fragments.
#[inline]
pub fn sign_pod<T>(
    plugin: &T,
    vt: &VTable<T>,
    _state: &CycleState,
    pod: Option<&Pod>,
    _replica: &impl Replica,
) -> Result<Vec<SignFragment>, Status> {
    let Some(f) = vt.sign_pod else {
        return Err(not_implemented("signPod"));
    };
    let Some(pod) = pod else {
        return Err(no_cycle());
    };
    f(plugin, pod)
}

/// SelectVictimsOnNode on the node of `slot`, with the host's what-if API.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn select_victims_on_node<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    pod: Option<&Pod>,
    replica: &impl Replica,
    slot: u32,
    dry: &dyn DryRun,
) -> Result<NodeVictims, Status> {
    let Some(f) = vt.select_victims_on_node else {
        return Err(not_implemented("selectVictimsOnNode"));
    };
    let Some(pod) = pod else {
        return Err(no_cycle());
    };
    match replica.node(slot) {
        Some(node) => f(plugin, state, pod, node, dry),
        None => Err(replica.missing(slot)),
    }
}

/// PodGroupPostFilter, with every node of the replica (the victims are among their
/// pods).
#[inline]
pub fn pod_group_post_filter<T>(
    plugin: &T,
    vt: &VTable<T>,
    state: &CycleState,
    group: &PodGroup,
    replica: &impl Replica,
) -> PodGroupPostFilterResult {
    let Some(f) = vt.pod_group_post_filter else {
        return not_implemented("podGroupPostFilter").into();
    };
    replica.with_all(|all| f(plugin, state, group, all))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica of nodes by slot.
    struct Nodes(Vec<NodeInfo>);

    impl Replica for Nodes {
        fn node(&self, slot: u32) -> Option<&NodeInfo> {
            self.0.get(slot as usize)
        }
        fn missing(&self, slot: u32) -> Status {
            Status::error(format!("no node in slot {slot}"))
        }
        fn with_all<R>(&self, f: impl FnOnce(&[&NodeInfo]) -> R) -> R {
            let all: Vec<&NodeInfo> = self.0.iter().collect();
            f(&all)
        }
    }

    #[test]
    fn a_member_tried_within_a_placement_sees_only_its_nodes() {
        let replica = Nodes(
            (0..4)
                .map(|i| {
                    let mut n = NodeInfo::default();
                    n.node.name = format!("n{i}");
                    n
                })
                .collect(),
        );
        let store = crate::MemoryState::default();
        let state = CycleState::new(&store);
        let seen = |pod: &Pod| {
            with_cycle_nodes(&state, pod, &replica, |nodes| {
                nodes
                    .iter()
                    .map(|n| n.node.name.clone())
                    .collect::<Vec<_>>()
            })
        };
        let plain = Pod::default();
        let member = Pod {
            scheduling_group: Some("train".into()),
            ..Pod::default()
        };
        assert_eq!(seen(&member), ["n0", "n1", "n2", "n3"]);
        state.set(&crate::PLACEMENT_NODES, &vec![1, 3]);
        assert_eq!(seen(&member), ["n1", "n3"]);
        // A pod of no group is never tried within a placement: its cycle reads nothing.
        assert_eq!(seen(&plain), ["n0", "n1", "n2", "n3"]);
    }

    #[test]
    fn the_table_lists_every_point_once_in_framework_order() {
        use ExtensionPoint as E;
        assert_eq!(
            E::ALL,
            [
                E::PreEnqueue,
                E::QueueSort,
                E::PreFilter,
                E::Filter,
                E::PostFilter,
                E::PreScore,
                E::Score,
                E::NormalizeScore,
                E::Reserve,
                E::Permit,
                E::PreBind,
                E::Bind,
                E::PostBind,
                E::PlacementScore,
                E::NormalizePlacementScore,
                E::PlacementGenerate,
                E::PlacementFeasible,
                E::PodGroupPostFilter,
                E::SignPod,
                E::SelectVictimsOnNode,
            ]
        );
        assert_eq!(
            E::CONFIGURABLE.to_vec(),
            E::ALL
                .iter()
                .copied()
                .filter(|p| ![
                    E::NormalizeScore,
                    E::NormalizePlacementScore,
                    E::SignPod,
                    E::SelectVictimsOnNode
                ]
                .contains(p))
                .collect::<Vec<_>>()
        );
        let names: Vec<&str> = E::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "preEnqueue",
                "queueSort",
                "preFilter",
                "filter",
                "postFilter",
                "preScore",
                "score",
                "normalizeScore",
                "reserve",
                "permit",
                "preBind",
                "bind",
                "postBind",
                "placementScore",
                "normalizePlacementScore",
                "placementGenerate",
                "placementFeasible",
                "podGroupPostFilter",
                "signPod",
                "selectVictimsOnNode"
            ]
        );
        for p in E::ALL {
            assert_eq!(E::from_name(p.as_str()), Some(p));
        }
        assert_eq!(E::from_name("signPod"), Some(E::SignPod));
        assert!(
            !E::CONFIGURABLE.contains(&E::SignPod),
            "profiles do not configure SignPod: the host asks every plugin that implements it"
        );
        assert!(
            E::PreFilter < E::Filter && E::Bind < E::PostBind,
            "Ord follows the table"
        );
    }
}
