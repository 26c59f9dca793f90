//! Cluster events and queueing hints: how a plugin tells the scheduler which changes
//! may make a pod it rejected schedulable (upstream's EnqueueExtensions).

use crate::dra::{DeviceClass, ResourceClaim, ResourceSlice};
use crate::types::{Node, Pod};
use crate::volumes::{
    CsiDriver, CsiNode, CsiStorageCapacity, PersistentVolume, PersistentVolumeClaim, StorageClass,
};
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
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// A PersistentVolume.
    PersistentVolume,
    /// A StorageClass.
    StorageClass,
    /// A CSINode.
    CsiNode,
    /// A CSIDriver.
    CsiDriver,
    /// A CSIStorageCapacity.
    CsiStorageCapacity,
    /// A ResourceClaim.
    ResourceClaim,
    /// A ResourceSlice.
    ResourceSlice,
    /// A DeviceClass.
    DeviceClass,
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
    pub const UPDATE_POD_GENERATED_RESOURCE_CLAIM: ActionType = ActionType(1 << 11);
    pub const UPDATE_OTHER: ActionType = ActionType(1 << 12);
    /// Every kind of update.
    pub const UPDATE: ActionType = ActionType(0b1_1111_1111_1100);
    /// Everything.
    pub const ALL: ActionType = ActionType(0b1_1111_1111_1111);
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
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim(PersistentVolumeClaim),
    /// A PersistentVolume.
    PersistentVolume(PersistentVolume),
    /// A StorageClass.
    StorageClass(StorageClass),
    /// A CSINode.
    CsiNode(CsiNode),
    /// A CSIDriver.
    CsiDriver(CsiDriver),
    /// A CSIStorageCapacity.
    CsiStorageCapacity(CsiStorageCapacity),
    /// A ResourceClaim.
    ResourceClaim(ResourceClaim),
    /// A ResourceSlice.
    ResourceSlice(ResourceSlice),
    /// A DeviceClass.
    DeviceClass(DeviceClass),
}

impl EventRegistration {
    /// A registration for `actions` on `resource` whose events the plugin's
    /// `queueing_hint` is asked about.
    pub const fn with_hint(resource: EventResource, actions: ActionType) -> Self {
        EventRegistration {
            event: ClusterEvent::new(resource, actions),
            has_hint: true,
        }
    }

    /// A registration for `actions` on `resource` whose events always requeue the
    /// pod, without asking the plugin.
    pub const fn without_hint(resource: EventResource, actions: ActionType) -> Self {
        EventRegistration {
            event: ClusterEvent::new(resource, actions),
            has_hint: false,
        }
    }
}

impl Object {
    /// The pod, when the object is one.
    pub fn as_pod(&self) -> Option<&Pod> {
        match self {
            Object::Pod(p) => Some(p),
            _ => None,
        }
    }

    /// The node, when the object is one.
    pub fn as_node(&self) -> Option<&Node> {
        match self {
            Object::Node(n) => Some(n),
            _ => None,
        }
    }

    /// The PersistentVolumeClaim, when the object is one.
    pub fn as_persistent_volume_claim(&self) -> Option<&PersistentVolumeClaim> {
        match self {
            Object::PersistentVolumeClaim(c) => Some(c),
            _ => None,
        }
    }

    /// The PersistentVolume, when the object is one.
    pub fn as_persistent_volume(&self) -> Option<&PersistentVolume> {
        match self {
            Object::PersistentVolume(v) => Some(v),
            _ => None,
        }
    }

    /// The StorageClass, when the object is one.
    pub fn as_storage_class(&self) -> Option<&StorageClass> {
        match self {
            Object::StorageClass(c) => Some(c),
            _ => None,
        }
    }

    /// The CSINode, when the object is one.
    pub fn as_csi_node(&self) -> Option<&CsiNode> {
        match self {
            Object::CsiNode(n) => Some(n),
            _ => None,
        }
    }

    /// The CSIDriver, when the object is one.
    pub fn as_csi_driver(&self) -> Option<&CsiDriver> {
        match self {
            Object::CsiDriver(d) => Some(d),
            _ => None,
        }
    }

    /// The CSIStorageCapacity, when the object is one.
    pub fn as_csi_storage_capacity(&self) -> Option<&CsiStorageCapacity> {
        match self {
            Object::CsiStorageCapacity(c) => Some(c),
            _ => None,
        }
    }

    /// The ResourceClaim, when the object is one.
    pub fn as_resource_claim(&self) -> Option<&ResourceClaim> {
        match self {
            Object::ResourceClaim(c) => Some(c),
            _ => None,
        }
    }

    /// The ResourceSlice, when the object is one.
    pub fn as_resource_slice(&self) -> Option<&ResourceSlice> {
        match self {
            Object::ResourceSlice(s) => Some(s),
            _ => None,
        }
    }

    /// The DeviceClass, when the object is one.
    pub fn as_device_class(&self) -> Option<&DeviceClass> {
        match self {
            Object::DeviceClass(c) => Some(c),
            _ => None,
        }
    }

    /// What the object is, as an error message names it (`pod default/web`,
    /// `node n1`, `persistentvolumeclaim default/data`, ...).
    pub fn describe(&self) -> String {
        match self {
            Object::Pod(p) => format!("pod {}", p.key()),
            Object::Node(n) => format!("node {}", n.name),
            Object::PersistentVolumeClaim(c) => format!("persistentvolumeclaim {}", c.key()),
            Object::PersistentVolume(v) => format!("persistentvolume {}", v.name),
            Object::StorageClass(c) => format!("storageclass {}", c.name),
            Object::CsiNode(n) => format!("csinode {}", n.name),
            Object::CsiDriver(d) => format!("csidriver {}", d.name),
            Object::CsiStorageCapacity(c) => {
                format!("csistoragecapacity {}/{}", c.namespace, c.name)
            }
            Object::ResourceClaim(c) => format!("resourceclaim {}", c.key()),
            Object::ResourceSlice(s) => format!("resourceslice {}", s.name),
            Object::DeviceClass(c) => format!("deviceclass {}", c.name),
        }
    }
}

/// Whether some of a plugin's registrations covers `event` (see
/// [`ClusterEvent::covers`]).
pub fn is_registered(registrations: &[EventRegistration], event: &ClusterEvent) -> bool {
    registrations.iter().any(|r| r.event.covers(event))
}

/// The old and new objects of an event as `T`, as upstream's `util.As`: an absent
/// object stays `None`, one of the other kind is the error `expected a {kind} object`.
///
/// ```
/// use berth_sdk::events::{Object, objects};
/// use berth_sdk::{Node, Pod};
///
/// let node = Object::Node(Node::default());
/// let (old, new) = objects(None, Some(&node), Object::as_node, "node").unwrap();
/// assert!(old.is_none() && new.is_some());
/// let err = objects(Some(&node), None, Object::as_pod, "pod").unwrap_err();
/// assert_eq!(err, "expected a pod object");
/// # let _: Option<&Pod> = None;
/// ```
pub fn objects<'a, T: ?Sized>(
    old: Option<&'a Object>,
    new: Option<&'a Object>,
    cast: fn(&'a Object) -> Option<&'a T>,
    kind: &str,
) -> Result<(Option<&'a T>, Option<&'a T>), String> {
    let one = |o: Option<&'a Object>| match o {
        None => Ok(None),
        Some(o) => cast(o)
            .map(Some)
            .ok_or_else(|| format!("expected a {kind} object")),
    };
    Ok((one(old)?, one(new)?))
}

/// An event's object as a node, as upstream's `util.As[*v1.Node]`: absent stays
/// `None`, a pod is the error `expected a node, got pod {namespace/name}`.
pub fn node_or_error(o: Option<&Object>) -> Result<Option<&Node>, String> {
    match o {
        None => Ok(None),
        Some(Object::Node(n)) => Ok(Some(n)),
        Some(other) => Err(format!("expected a node, got {}", other.describe())),
    }
}

/// An event's object that must be there and be of one kind (`cast`), as upstream's
/// `util.As` with a nil check: absent is the error `the event has no {which} {kind}`,
/// another kind is `expected a {kind}, got {what it is}`.
///
/// ```
/// use berth_sdk::events::{Object, required};
/// use berth_sdk::Node;
///
/// let node = Object::Node(Node::default());
/// assert!(required(Some(&node), Object::as_node, "node", "new").is_ok());
/// assert_eq!(
///     required(None, Object::as_pod, "pod", "deleted").unwrap_err(),
///     "the event has no deleted pod"
/// );
/// assert_eq!(
///     required(Some(&node), Object::as_pod, "pod", "deleted").unwrap_err(),
///     "expected a pod, got node "
/// );
/// ```
pub fn required<'a, T: ?Sized>(
    o: Option<&'a Object>,
    cast: fn(&'a Object) -> Option<&'a T>,
    kind: &str,
    which: &str,
) -> Result<&'a T, String> {
    match o {
        None => Err(format!("the event has no {which} {kind}")),
        Some(o) => cast(o).ok_or_else(|| format!("expected a {kind}, got {}", o.describe())),
    }
}

/// The old and new node of a node event, with [`node_or_error`]'s errors; the new
/// node must be there (`the event has no new node`).
pub fn node_change<'a>(
    old: Option<&'a Object>,
    new: Option<&'a Object>,
) -> Result<(Option<&'a Node>, &'a Node), String> {
    let old = node_or_error(old)?;
    let new = node_or_error(new)?.ok_or("the event has no new node")?;
    Ok((old, new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations() {
        let r = EventRegistration::with_hint(EventResource::Node, ActionType::ADD);
        assert_eq!(
            r.event,
            ClusterEvent::new(EventResource::Node, ActionType::ADD)
        );
        assert!(r.has_hint);
        assert!(!EventRegistration::without_hint(EventResource::Node, ActionType::ADD).has_hint);
        let regs = [r];
        let node = |actions| ClusterEvent::new(EventResource::Node, actions);
        assert!(is_registered(
            &regs,
            &node(ActionType::ADD | ActionType::DELETE)
        ));
        assert!(!is_registered(&regs, &node(ActionType::DELETE)));
        assert!(!is_registered(
            &regs,
            &ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD)
        ));
    }

    #[test]
    fn objects_are_cast_or_refused() {
        let pod = Object::Pod(Pod::default());
        let node = Object::Node(Node::default());
        assert!(pod.as_pod().is_some() && pod.as_node().is_none());
        assert!(node.as_node().is_some() && node.as_pod().is_none());
        let (old, new) = objects(Some(&pod), None, Object::as_pod, "pod").unwrap();
        assert!(old.is_some() && new.is_none());
        assert_eq!(
            objects(None, Some(&pod), Object::as_node, "node").unwrap_err(),
            "expected a node object"
        );
        assert!(node_or_error(Some(&node)).unwrap().is_some());
        assert!(node_or_error(None).unwrap().is_none());
        assert!(
            node_or_error(Some(&pod))
                .unwrap_err()
                .starts_with("expected a node, got pod ")
        );
        let (old, new) = node_change(None, Some(&node)).unwrap();
        assert!(old.is_none() && new.name.is_empty());
        assert_eq!(
            node_change(Some(&node), None).unwrap_err(),
            "the event has no new node"
        );
        assert!(node_change(Some(&pod), Some(&node)).is_err());
    }
}
