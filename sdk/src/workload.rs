//! Workload-aware scheduling: a pod group in its scheduling cycle, the placements
//! that cycle considers, and the plugins that act on the group as a whole (the WIT's
//! `workload` interface, unstable feature `workload-scheduling`).

use serde::{Deserialize, Serialize};

use crate::plugin::{CycleState, Plugin};
use crate::types::{NodeInfo, Pod, Status};

/// A pod group in its scheduling cycle, as kube-scheduler's `PodGroupInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodGroup {
    /// The group's namespace.
    pub namespace: String,
    /// The group's name.
    pub name: String,
    /// The gang's `minCount`; `None` for the `basic` policy.
    pub min_count: Option<u32>,
    /// Members already bound or assumed, outside this cycle.
    pub scheduled_count: u32,
    /// The members this cycle places (empty at PlacementFeasible, whose progress
    /// counts them).
    pub unscheduled_pods: Vec<Pod>,
    /// The topology keys of the PodGroup's `spec.schedulingConstraints.topology`.
    pub topology_keys: Vec<String>,
    /// The nodes the members bound or assumed outside this cycle are on.
    pub scheduled_nodes: Vec<String>,
}

/// A candidate placement: a named set of nodes the group may be placed within.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The placement's name (unique among one cycle's placements).
    pub name: String,
    /// The nodes it spans, by name.
    pub nodes: Vec<String>,
}

/// The node a pod group's cycle proposes for one member.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposedAssignment {
    /// The member's UID.
    pub pod_uid: String,
    /// The node proposed for it.
    pub node: String,
}

/// A placement and the node proposed for each member the cycle could place in it,
/// as kube-scheduler's `PodGroupAssignments`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodGroupAssignments {
    /// The placement.
    pub placement: Placement,
    /// One entry per member placed in it.
    pub assignments: Vec<ProposedAssignment>,
}

/// PlacementScore: ranks the placements a pod group's cycle found feasible for
/// enough of its members (kube-scheduler's `PlacementScorePlugin`). Higher is better;
/// with [`NormalizePlacementScore`] the scores are rescaled into [0, 100] before the
/// profile's weight multiplies them, and without it they must lie there already.
pub trait PlacementScore: Plugin {
    /// The score of one placement for `group`, with the node proposed for each member
    /// placed in it. `state` is the pod group cycle's state.
    fn score_placement(
        &self,
        state: &CycleState,
        group: &PodGroup,
        assignments: &PodGroupAssignments,
    ) -> Result<i64, Status>;
}

/// NormalizePlacementScore (upstream's `PlacementScoreExtensions`): rescales this
/// plugin's scores of every scored placement.
pub trait NormalizePlacementScore: Plugin {
    /// Rescales `scores` (one per placement, in the order scored) in place into
    /// [0, 100].
    fn normalize_placement_score(
        &self,
        state: &CycleState,
        group: &PodGroup,
        scores: &mut [i64],
    ) -> Status;
}

/// How far a pod group's cycle has come (kube-scheduler's `PlacementProgress`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementProgress {
    /// Members bound or assumed: before this cycle, and placed by it so far.
    pub scheduled: u32,
    /// Members of this cycle not tried yet.
    pub remaining: u32,
}

/// PlacementFeasible (kube-scheduler's `PlacementFeasiblePlugin`): asked before a pod
/// group's cycle tries its first member and after each. [`Status::success`]: the group
/// may bind as placed so far; [`Code::Wait`](crate::Code::Wait): not yet, go on with
/// the next member (a cycle that ends waiting binds nothing); `Unschedulable` (or
/// `UnschedulableAndUnresolvable`): stop, nothing binds; an error fails the cycle. The
/// group's `unscheduled_pods` are empty here: `progress` counts them.
pub trait PlacementFeasible: Plugin {
    /// The verdict on `group` as placed so far.
    fn placement_feasible(
        &self,
        state: &CycleState,
        group: &PodGroup,
        progress: &PlacementProgress,
    ) -> Status;
}

/// The nodes of the placement a pod group member's cycle runs within, by replica
/// slot, in the cycle's state: written by the host before PreFilter when the group is
/// tried within a placement (kube-scheduler runs such a cycle on a snapshot of the
/// placement's nodes alone), absent otherwise. PreFilter and PreScore see only these
/// nodes as the cluster (see [`crate::points::pre_filter`]); the host refuses a
/// plugin's write under the `berth.dev/` prefix.
pub static PLACEMENT_NODES: crate::StateKey<Vec<u32>> =
    crate::StateKey::new("berth.dev/placement-nodes");

/// A PodGroup as the scheduler knows it, with its members counted (what
/// [`get_pod_group`] answers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodGroupState {
    /// The gang's `minCount`; `None` for the `basic` policy.
    pub min_count: Option<u32>,
    /// Members the scheduler knows: pending (held back included), in a cycle,
    /// assumed or bound.
    pub all_pods: u32,
    /// Members assumed or bound.
    pub scheduled_pods: u32,
}

/// The PodGroup `name` in `namespace` with its members counted; `None` while the
/// cluster has no such PodGroup (or outside a Berth host).
pub fn get_pod_group(namespace: &str, name: &str) -> Option<PodGroupState> {
    #[cfg(target_arch = "wasm32")]
    return crate::guest::get_pod_group(namespace, name);
    #[cfg(not(target_arch = "wasm32"))]
    crate::native_host().and_then(|h| h.get_pod_group(namespace, name))
}

/// PlacementGenerate (kube-scheduler's `PlacementGeneratePlugin`): the candidate
/// placements of a pod group within `parent` (every node, or a placement a plugin
/// before this one generated), each a named set of nodes. The pod group's cycle
/// tries the group within each; PlacementScore ranks the feasible ones. An empty
/// answer: the group cannot be placed within `parent`.
pub trait PlacementGenerate: Plugin {
    /// The placements within `parent`, whose nodes are `nodes` (the parent's, as the
    /// plugin's replica has them, in the parent's order).
    fn generate_placements(
        &self,
        state: &CycleState,
        group: &PodGroup,
        parent: &Placement,
        nodes: &[&NodeInfo],
    ) -> Result<Vec<Placement>, Status>;
}

/// What workload-aware preemption reads of a PodGroup (what
/// [`get_pod_group_preemption`] answers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodGroupPreemption {
    /// `spec.priority` (0 when unset): the group's priority as a preemptor and as a
    /// victim, whatever its members' own.
    pub priority: i32,
    /// `spec.preemptionPolicy`.
    pub preemption_policy: crate::PreemptionPolicy,
    /// `spec.disruptionMode` is `all`: its members are preempted together or not at
    /// all.
    pub disruption_all: bool,
}

/// The PodGroup `name` in `namespace` as preemption reads it; `None` while the
/// cluster has no such PodGroup (or outside a Berth host).
pub fn get_pod_group_preemption(namespace: &str, name: &str) -> Option<PodGroupPreemption> {
    #[cfg(target_arch = "wasm32")]
    return crate::guest::get_pod_group_preemption(namespace, name);
    #[cfg(not(target_arch = "wasm32"))]
    crate::native_host().and_then(|h| h.get_pod_group_preemption(namespace, name))
}

/// A what-if on the whole cluster for the pod group of a [`PodGroupPostFilter`] call
/// (kube-scheduler's `PodGroupSchedulingFunc`, see [`simulate_group`]). Nothing of
/// it reaches the scheduler's cache; it ends when the call returns.
pub trait GroupSimulation {
    /// The PodDisruptionBudgets of the cluster.
    fn pod_disruption_budgets(&self) -> Vec<crate::PodDisruptionBudget>;
    /// Removes a pod on a node (by UID) from the what-if. The host refuses a pod
    /// that is not of lower priority than the group (a member of a PodGroup counts
    /// with its group's priority).
    fn remove_pod(&mut self, uid: &str) -> Status;
    /// Adds back a pod that [`GroupSimulation::remove_pod`] removed.
    fn add_pod(&mut self, uid: &str) -> Status;
    /// Runs the group's cycle on the what-if (its placements, every member tried,
    /// PlacementFeasible asked): the node proposed for each member placed when the
    /// group is feasible, else why not.
    fn schedule(&mut self) -> Result<Vec<ProposedAssignment>, Status>;
    /// Success when each member, in order, still passes every Filter plugin on its
    /// proposed node, the ones before it assumed there; else the first rejection.
    fn fits(&mut self, assignments: &[ProposedAssignment]) -> Status;
}

/// Starts the what-if of the [`PodGroupPostFilter`] call under way; an error
/// outside one (or outside a Berth host).
pub fn simulate_group() -> Result<Box<dyn GroupSimulation>, Status> {
    #[cfg(target_arch = "wasm32")]
    return crate::guest::simulate_group();
    #[cfg(not(target_arch = "wasm32"))]
    match crate::native_host() {
        Some(h) => h.simulate_group(),
        None => Err(Status::error("simulate_group needs the Berth host")),
    }
}

/// What PodGroupPostFilter answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodGroupPostFilterResult {
    /// Success when room was found; otherwise why not.
    pub status: Status,
    /// With success: the node each member placed in the what-if is nominated to.
    pub nominations: Vec<ProposedAssignment>,
    /// With success: the pods to evict (UIDs) to make that room.
    pub victims: Vec<String>,
}

impl From<Status> for PodGroupPostFilterResult {
    fn from(status: Status) -> Self {
        PodGroupPostFilterResult {
            status,
            nominations: Vec::new(),
            victims: Vec::new(),
        }
    }
}

/// PodGroupPostFilter (kube-scheduler's `PodGroupPostFilterPlugin`): runs when a pod
/// group's cycle ended unschedulable, to make room for the group as a whole
/// (workload-aware preemption). The profile's plugins run in order until one
/// answers success or an error. The group's `unscheduled_pods` are the members the
/// cycle tried; [`simulate_group`] answers during the call.
pub trait PodGroupPostFilter: Plugin {
    /// Room for `group`: the members' nominated nodes and the victims, or why not.
    /// `nodes` are every node of the plugin's replica, with their pods when the
    /// plugin wants them ([`Plugin::WANTS_PODS`]).
    fn pod_group_post_filter(
        &self,
        state: &CycleState,
        group: &PodGroup,
        nodes: &[&NodeInfo],
    ) -> PodGroupPostFilterResult;
}
