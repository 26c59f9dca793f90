//! PostFilter (what runs when no node fits: preemption) and what it may ask of the
//! host while it runs, and PreFilterExtensions (how a plugin's per-cycle state follows
//! pods added to or removed from a node in a what-if).

use crate::affinity::LabelSelector;
use crate::plugin::{CycleState, Plugin, PreFilter};
use crate::types::{NodeInfo, Pod, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A PodDisruptionBudget, as preemption reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodDisruptionBudget {
    /// The namespace: a budget covers pods of its own namespace only.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// `spec.selector`; `None` or an empty selector covers no pod.
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `status.disruptedPods`, by pod name: evictions already admitted, which do not
    /// count against the budget again.
    pub disrupted_pods: BTreeSet<String>,
}

impl PodDisruptionBudget {
    /// Whether the budget covers `pod`: same namespace, and a non-empty selector that
    /// matches the pod's labels.
    pub fn covers(&self, pod: &Pod) -> bool {
        if self.namespace != pod.namespace || pod.labels.is_empty() {
            return false;
        }
        match &self.selector {
            Some(s) if !(s.match_labels.is_empty() && s.match_expressions.is_empty()) => {
                s.matches(&pod.labels)
            }
            _ => false,
        }
    }
}

/// A what-if on one node for the pod of the cycle (see [`DryRun::simulate`]): a copy
/// of the node and of the cycle state. Removing or adding a pod updates both, and the
/// PreFilter extensions of the profile's plugins are told; nothing reaches the
/// scheduler's cache.
pub trait NodeSimulation {
    /// Removes a pod of the node (by UID) from the copy.
    fn remove_pod(&mut self, uid: &str) -> Status;
    /// Adds back a pod that [`NodeSimulation::remove_pod`] removed.
    fn add_pod(&mut self, uid: &str) -> Status;
    /// Success when the pod of the cycle passes every Filter plugin on the copy (with
    /// the pods nominated to the node counted, as in the scheduling cycle); else the
    /// first rejection.
    fn fits(&mut self) -> Status;
}

/// What a PostFilter plugin may ask of the host while it runs.
pub trait DryRun {
    /// The PodDisruptionBudgets of the cluster.
    fn pod_disruption_budgets(&self) -> Vec<PodDisruptionBudget>;
    /// Starts a what-if on the node of that name.
    fn simulate(&self, node: &str) -> Result<Box<dyn NodeSimulation + '_>, Status>;
}

/// A node where preemption would let the pod in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Candidate {
    /// The node.
    pub node: String,
    /// The pods to evict (UIDs), most important first.
    pub victims: Vec<String>,
    /// How many victims a PodDisruptionBudget would not allow to go.
    pub pdb_violations: u32,
}

/// What PostFilter answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostFilterResult {
    /// Success when a node was nominated; otherwise why not.
    pub status: Status,
    /// `None` leaves the pod's nomination as it is; `Some("")` clears it.
    pub nominated_node_name: Option<String>,
    /// The pods to evict (UIDs) so that the pod fits the nominated node.
    pub victims: Vec<String>,
    /// The candidates considered, best first (shown by `berth explain`).
    pub candidates: Vec<Candidate>,
}

impl From<Status> for PostFilterResult {
    fn from(status: Status) -> Self {
        PostFilterResult {
            status,
            nominated_node_name: None,
            victims: Vec::new(),
            candidates: Vec::new(),
        }
    }
}

/// PostFilter: runs when no node passed Filter (upstream's preemption point).
pub trait PostFilter: Plugin {
    /// `nodes` holds every node of the snapshot with the status Filter (or PreFilter)
    /// gave it. `dry_run` answers only during this call.
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[(&NodeInfo, Status)],
        dry_run: &dyn DryRun,
    ) -> PostFilterResult;
}

/// PreFilterExtensions: keep the plugin's PreFilter state right when a what-if adds or
/// removes a pod on a node (the nominated pods of the scheduling cycle, preemption's
/// dry run). `node` is the node as the snapshot has it: read its labels and taints,
/// not its pods or totals, which the what-if changes.
pub trait PreFilterExtensions: PreFilter {
    /// `pod_to_add` now counts on `node` for the cycle of `pod`.
    fn add_pod(&self, state: &CycleState, pod: &Pod, pod_to_add: &Pod, node: &NodeInfo) -> Status;
    /// `pod_to_remove` no longer counts on `node` for the cycle of `pod`.
    fn remove_pod(
        &self,
        state: &CycleState,
        pod: &Pod,
        pod_to_remove: &Pod,
        node: &NodeInfo,
    ) -> Status;
}
