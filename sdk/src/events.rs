//! Cluster events and queueing hints: how a plugin tells the scheduler which changes
//! may make a pod it rejected schedulable (upstream's EnqueueExtensions).

use crate::types::{Node, Pod};
use serde::{Deserialize, Serialize};

/// The kind of object an event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventResource {
    /// A pod bound to a node.
    AssignedPod,
    /// A pod not yet bound (updates of the pod being scheduled).
    UnscheduledPod,
    /// A node.
    Node,
    /// A namespace.
    Namespace,
}

/// What happened, as a set of bits (the order of the WIT `action-type` flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ActionType(pub u32);

#[allow(missing_docs)]
impl ActionType {
    pub const ADD: ActionType = ActionType(1 << 0);
    pub const DELETE: ActionType = ActionType(1 << 1);
    pub const UPDATE_NODE_ALLOCATABLE: ActionType = ActionType(1 << 2);
    pub const UPDATE_NODE_LABEL: ActionType = ActionType(1 << 3);
    pub const UPDATE_NODE_TAINT: ActionType = ActionType(1 << 4);
    pub const UPDATE_NODE_CONDITION: ActionType = ActionType(1 << 5);
    pub const UPDATE_NODE_ANNOTATION: ActionType = ActionType(1 << 6);
    pub const UPDATE_POD_LABEL: ActionType = ActionType(1 << 7);
    pub const UPDATE_POD_SCALE_DOWN: ActionType = ActionType(1 << 8);
    pub const UPDATE_POD_TOLERATION: ActionType = ActionType(1 << 9);
    pub const UPDATE_POD_SCHEDULING_GATES_ELIMINATED: ActionType = ActionType(1 << 10);
    pub const UPDATE_OTHER: ActionType = ActionType(1 << 11);
    /// Every kind of update.
    pub const UPDATE: ActionType = ActionType(0b1111_1111_1100);
    /// Everything.
    pub const ALL: ActionType = ActionType(0b1111_1111_1111);
}

impl ActionType {
    /// Whether the two sets share an action.
    pub fn intersects(self, other: ActionType) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for ActionType {
    type Output = ActionType;
    fn bitor(self, rhs: ActionType) -> ActionType {
        ActionType(self.0 | rhs.0)
    }
}

/// A cluster event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClusterEvent {
    /// What kind of object.
    pub resource: EventResource,
    /// What happened to it.
    pub actions: ActionType,
}

impl ClusterEvent {
    /// An event.
    pub const fn new(resource: EventResource, actions: ActionType) -> Self {
        ClusterEvent { resource, actions }
    }

    /// Whether a registration for `self` covers `event`.
    pub fn covers(&self, event: &ClusterEvent) -> bool {
        self.resource == event.resource && self.actions.intersects(event.actions)
    }
}

/// A plugin's interest in an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRegistration {
    /// The event.
    pub event: ClusterEvent,
    /// Whether the plugin's `queueing_hint` should be asked about it.
    pub has_hint: bool,
}

/// What a queueing hint answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueingHint {
    /// The event may make the pod schedulable.
    Queue,
    /// The event does not help the pod.
    QueueSkip,
}

/// The object of an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(
    clippy::large_enum_variant,
    reason = "built once per event, never stored in bulk"
)]
pub enum Object {
    /// A pod.
    Pod(Pod),
    /// A node.
    Node(Node),
}
