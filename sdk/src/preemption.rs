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

/// The fewest PodDisruptionBudget violations that evicting `victims` can cause, in
/// whatever order a preemption took them: a budget that covers more of them than it
/// allows is violated by at least the excess (pods it already counts as disrupted
/// apart). The host checks a PostFilter plugin's reported violations against it.
pub fn least_budget_violations(victims: &[Pod], budgets: &[PodDisruptionBudget]) -> u32 {
    budgets
        .iter()
        .map(|b| {
            let covered = victims
                .iter()
                .filter(|p| b.covers(p) && !b.disrupted_pods.contains(&p.name))
                .count();
            let covered = i64::try_from(covered).unwrap_or(i64::MAX);
            u32::try_from((covered - i64::from(b.disruptions_allowed.max(0))).max(0))
                .unwrap_or(u32::MAX)
        })
        .max()
        .unwrap_or(0)
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
    /// The plugin's own [`SelectVictims::select_victims_on_node`] for each node (by
    /// name), run by the host on its workers' instances of the plugin, in parallel;
    /// one answer per node, in order. `None` when the host does not (a plugin without
    /// [`SelectVictims`], a host with one worker, a what-if already inside such a
    /// call): the plugin then runs the nodes itself, which answers the same.
    fn select_victims_on_nodes(&self, nodes: &[&str]) -> Option<Vec<Result<NodeVictims, Status>>> {
        let _ = nodes;
        None
    }
}

/// The victims SelectVictimsOnNode chose on one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeVictims {
    /// The pods to evict (UIDs), most important first.
    pub pods: Vec<String>,
    /// How many of them a PodDisruptionBudget would not allow to go.
    pub pdb_violations: u32,
}

/// SelectVictimsOnNode: a PostFilter plugin's dry run of one node (upstream's
/// `SelectVictimsOnNode`), which the host may run for many nodes at once on its
/// workers ([`DryRun::select_victims_on_nodes`]). It must answer only from the pod,
/// the node and the what-ifs, as the answer may come from another instance of the
/// plugin.
pub trait SelectVictims: PostFilter {
    /// The victims on `node` that make room for `pod`: Unschedulable or
    /// UnschedulableAndUnresolvable when the node is no candidate, Error on failure.
    fn select_victims_on_node(
        &self,
        state: &CycleState,
        pod: &Pod,
        node: &NodeInfo,
        dry_run: &dyn DryRun,
    ) -> Result<NodeVictims, Status>;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, app: &str) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: name.into(),
            labels: [("app".to_owned(), app.to_owned())].into_iter().collect(),
            ..Pod::default()
        }
    }

    fn budget(app: &str, allowed: i32, disrupted: &[&str]) -> PodDisruptionBudget {
        PodDisruptionBudget {
            namespace: "ns".into(),
            name: app.into(),
            selector: Some(LabelSelector {
                match_labels: [("app".to_owned(), app.to_owned())].into_iter().collect(),
                ..LabelSelector::default()
            }),
            disruptions_allowed: allowed,
            disrupted_pods: disrupted.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn least_violations_are_the_largest_excess_over_a_budget() {
        let victims = [
            pod("a1", "a"),
            pod("a2", "a"),
            pod("a3", "a"),
            pod("b1", "b"),
        ];
        assert_eq!(least_budget_violations(&victims, &[]), 0);
        assert_eq!(least_budget_violations(&victims, &[budget("a", 3, &[])]), 0);
        assert_eq!(least_budget_violations(&victims, &[budget("a", 1, &[])]), 2);
        // Already disrupted pods do not count again; a negative allowance is none.
        assert_eq!(
            least_budget_violations(&victims, &[budget("a", 1, &["a1"])]),
            1
        );
        assert_eq!(
            least_budget_violations(&victims, &[budget("a", 2, &[]), budget("b", -1, &[])]),
            1
        );
    }
}
