//! Workload-aware scheduling: a pod group in its scheduling cycle and the placements
//! that cycle considers (the WIT's `workload` interface, unstable feature
//! `workload-scheduling`).

use serde::{Deserialize, Serialize};

use crate::types::Pod;

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
    /// The members this cycle places.
    pub unscheduled_pods: Vec<Pod>,
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
