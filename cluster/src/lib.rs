//! The cluster model of Berth and its sources: pods, nodes and the objects the
//! scheduler reads (volumes, devices, pod groups, budgets), where they come from
//! (memory, manifests on disk, a Kubernetes API server through kube-rs) and where
//! bindings, nominations and evictions go.
//!
//! This crate owns the `Cluster` and `Binder` traits, the manifests' reading and
//! YAML, and the kube backend's watches and writes. It may not depend on any other
//! crate of the host (`berth-runtime`, `berth-scheduler`, `berth`): nothing here knows
//! of plugins, WebAssembly or the scheduling cycle. Its types are the SDK's
//! (`berth-sdk`), which plugins share.

#![deny(missing_docs)]

pub mod access;
pub mod affinity;
pub mod dra;
pub mod kube;
pub mod manifest;
pub mod memory;
pub mod pod_groups;
pub mod quantity;
pub mod storage;
pub mod yaml;

use berth_sdk::{
    ClaimRef, CsiDriver, CsiNode, CsiStorageCapacity, Labels, Node, PersistentVolume,
    PersistentVolumeClaim, Pod, PodDisruptionBudget, StorageClass,
};
use manifest::PodSelector;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Writes the scheduler's decisions to the cluster: bindings through the
/// `pods/binding` subresource of a real cluster (or the embedded cluster's
/// bookkeeping), and preemption's nominations and evictions. Calls may block; the
/// scheduler makes them off its loop.
pub trait Binder: Send + Sync {
    /// Binds `pod` to `node`; an error says why the cluster did not, and whether it
    /// may have happened all the same (see [`WriteError`]). The other writes answer
    /// the same way.
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), WriteError>;

    /// Sets the pod's `status.nominatedNodeName` (an empty `node` clears it).
    fn nominate(&self, pod: &Pod, node: &str) -> Result<(), WriteError> {
        let _ = (pod, node);
        Ok(())
    }

    /// Evicts a preemption victim to make room for `preemptor`, as upstream: a
    /// `DisruptionTarget` condition with reason `PreemptionByScheduler` and `message`,
    /// then a delete. A victim already gone is not an error.
    fn evict(&self, victim: &Pod, preemptor: &Pod, message: &str) -> Result<(), WriteError> {
        let _ = (victim, preemptor, message);
        Err(WriteError::Refused("this cluster cannot evict pods".into()))
    }

    /// Whether the cluster reports the deletions `evict` makes back to the scheduler
    /// (a watch does); when not, the scheduler removes evicted pods itself.
    fn reports_deletions(&self) -> bool {
        true
    }

    /// Where the cluster has the pod now: after a failed bind, was it bound by
    /// someone else (409 Conflict) or deleted (404)?
    fn lookup(&self, pod: &Pod) -> PodState {
        let _ = pod;
        PodState::Pending
    }

    /// Binds a PersistentVolume to a claim as VolumeBinding's PreBind does: sets its
    /// `claimRef` and the annotation `pv.kubernetes.io/bound-by-controller`, leaving
    /// the rest to the PersistentVolume controller. An error when the volume is gone
    /// or taken by another claim.
    fn bind_volume(&self, volume: &str, claim: &ClaimRef) -> Result<(), WriteError> {
        let _ = (volume, claim);
        Err(WriteError::Refused(
            "this cluster cannot bind volumes".into(),
        ))
    }

    /// Annotates a claim with the node its volume is to be provisioned for
    /// (`volume.kubernetes.io/selected-node`).
    fn select_node_for_claim(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<(), WriteError> {
        let _ = (namespace, name, node);
        Err(WriteError::Refused(
            "this cluster cannot provision volumes".into(),
        ))
    }

    /// Writes a ResourceClaim's `status.allocation` and `status.reservedFor` as
    /// DynamicResources' PreBind does, on the claim of `claim.resource_version` only:
    /// a claim changed since (409 Conflict) or gone is an error, never an overwrite.
    /// Answers the claim as written, with its new `resourceVersion`.
    fn write_claim_status(
        &self,
        claim: &berth_sdk::dra::ResourceClaim,
    ) -> Result<berth_sdk::dra::ResourceClaim, WriteError> {
        Err(WriteError::Refused(format!(
            "writing the status of resourceclaim {}: this cluster cannot allocate devices",
            claim.key()
        )))
    }

    /// Creates the claim for a pod's extended resources backed by DRA (upstream's
    /// `createExtendedResourceClaimInAPI`): `claim` names the namespace, the pod as
    /// controller and the requests; the cluster names it from
    /// `<pod name>-extended-resources-` and answers it as created.
    fn create_extended_resource_claim(
        &self,
        claim: &berth_sdk::dra::ResourceClaim,
    ) -> Result<berth_sdk::dra::ResourceClaim, WriteError> {
        Err(WriteError::Refused(format!(
            "creating a claim for the extended resources of pod {}: this cluster cannot allocate devices",
            claim.controller.as_ref().map_or("?", |c| c.name.as_str())
        )))
    }

    /// Deletes a claim made for a pod's extended resources, its delete-protection
    /// finalizer dropped first (upstream's `deleteClaim`). A claim already gone is
    /// no error.
    fn delete_extended_resource_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), WriteError> {
        Err(WriteError::Refused(format!(
            "deleting resourceclaim {namespace}/{name}: this cluster cannot allocate devices"
        )))
    }

    /// Records the claim made for the pod's extended resources in its
    /// `status.extendedResourceClaimStatus` (upstream's
    /// `patchPodExtendedResourceClaimStatus`).
    fn write_extended_resource_claim_status(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        status: &berth_sdk::PodExtendedResourceClaimStatus,
    ) -> Result<(), WriteError> {
        let _ = (uid, status);
        Err(WriteError::Refused(format!(
            "writing the extended resource claim status of pod {namespace}/{name}: this cluster cannot allocate devices"
        )))
    }

    /// Gives the cluster the scheduler's view of the dynamic resource allocation
    /// objects, for a cluster that keeps none of its own (the embedded one writes
    /// its claims' statuses there).
    fn attach_dra(&self, dra: &dra::Dra) {
        let _ = dra;
    }

    /// Gives the cluster the scheduler's view of the storage objects, for a cluster
    /// that keeps none of its own (the embedded one writes its volume bindings there).
    fn attach_storage(&self, storage: &storage::Storage) {
        let _ = storage;
    }

    /// The storage and DRA changes the cluster made itself since last asked (the
    /// embedded cluster's PersistentVolume controller, its claim status writes), as
    /// (old, new): already in the attached views, for the scheduler to tell the
    /// queue of.
    fn take_storage_changes(&self) -> Vec<(Option<berth_sdk::Object>, berth_sdk::Object)> {
        Vec::new()
    }
}

/// Why a cluster did not make one of the scheduler's writes (a binding, a
/// nomination, an eviction, a volume's binding, a claim's selected node). Each
/// variant's message is the cluster's own words, shown as they are (plugins receive
/// it as the host call's error); the variant says what kind of failure it was.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// Someone else got there first (the API server's 409 Conflict): the pod is
    /// bound already, the volume bound to another claim.
    #[error("{0}")]
    Conflict(String),
    /// The object is gone, or replaced by another of the same name (404 Not Found).
    #[error("{0}")]
    NotFound(String),
    /// No answer came: a timeout or a transport failure. The write may have happened.
    #[error("{0}")]
    Unanswered(String),
    /// The cluster refused for another reason (another API error, a write this
    /// cluster cannot make, or this replica no longer holds the lease); the write did
    /// not happen.
    #[error("{0}")]
    Refused(String),
}

/// A pod as the cluster has it, asked after a failed bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Still waiting for a node.
    Pending,
    /// The cluster could not be asked: the bind may or may not have happened.
    Unknown,
    /// Bound to this node.
    BoundTo(String),
    /// Deleted (or replaced by another pod of the same name).
    Gone,
}

/// Why a scheduling attempt failed, as the `PodScheduled` condition's reason says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureReason {
    /// No node fits (`Unschedulable`).
    Unschedulable,
    /// Something went wrong: a plugin error, a failed bind (`SchedulerError`).
    SchedulerError,
}

impl FailureReason {
    /// The condition reason, as upstream writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Unschedulable => "Unschedulable",
            FailureReason::SchedulerError => "SchedulerError",
        }
    }
}

/// Tells the cluster what became of a pod: events and the pod's status. The embedded
/// cluster keeps outcomes itself and records nothing; `cluster::kube` writes
/// `events.k8s.io/v1` events and the `PodScheduled` condition. Calls must not block:
/// the scheduling loop makes them.
pub trait Recorder: Send + Sync {
    /// The pod was bound to `node` by the profile `scheduler_name`.
    fn scheduled(&self, scheduler_name: &str, pod: &Pod, node: &str);
    /// A scheduling attempt failed; the pod goes back to the queue.
    fn failed(&self, scheduler_name: &str, pod: &Pod, reason: FailureReason, message: &str);
    /// `victim` was preempted on `node` to make room for `preemptor` (upstream's
    /// `Preempted` event on the victim).
    fn preempted(&self, victim: &Pod, preemptor: &Pod, node: &str) {
        let _ = (victim, preemptor, node);
    }
    /// A PreEnqueue plugin holds the pod back with this message (KEP-5501), or,
    /// `None`, lets it past again.
    fn not_ready(&self, pod: &Pod, message: Option<&str>) {
        let _ = (pod, message);
    }
    /// The pod is gone: forget whatever was kept about it.
    fn forget(&self, uid: &str) {
        let _ = uid;
    }
    /// A pod group's cycle ended: upstream writes its outcome as the PodGroup's
    /// `PodGroupInitiallyScheduled` condition (`scheduling.k8s.io/v1beta1`'s name;
    /// `PodGroupScheduled` in 1.36's `v1alpha2`), never taking a True back to False.
    fn pod_group_scheduled(&self, namespace: &str, name: &str, outcome: &PodGroupOutcome) {
        let _ = (namespace, name, outcome);
    }
}

/// How a pod group's cycle ended, as the PodGroup's `PodGroupInitiallyScheduled`
/// condition says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodGroupOutcome {
    /// The condition's status: the group was placed.
    pub scheduled: bool,
    /// `Scheduled`, `Unschedulable` or `SchedulerError`.
    pub reason: &'static str,
    /// Why (empty when scheduled).
    pub message: String,
}

/// Records nothing.
#[derive(Debug, Default)]
pub struct NoRecorder;

impl Recorder for NoRecorder {
    fn scheduled(&self, _: &str, _: &Pod, _: &str) {}
    fn failed(&self, _: &str, _: &Pod, _: FailureReason, _: &str) {}
}

/// A change in the cluster, as a cluster source reports it: both the embedded cluster
/// and `cluster::kube`'s watchers feed the scheduler through these.
#[derive(Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one change at a time; boxing would only burden the sources"
)]
pub enum Change {
    /// A node appeared or changed.
    Node(Node),
    /// A node is gone.
    NodeDeleted(String),
    /// A pod appeared or changed.
    Pod(Pod),
    /// A pod is gone (by UID).
    PodDeleted(String),
    /// A namespace appeared or changed, with its labels.
    Namespace(String, Labels),
    /// A namespace is gone.
    NamespaceDeleted(String),
    /// A PodDisruptionBudget appeared or changed.
    Budget(PodDisruptionBudget),
    /// A PodDisruptionBudget is gone.
    BudgetDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A Service or controller selecting pods appeared or changed.
    Selector(PodSelector),
    /// A Service or controller is gone.
    SelectorDeleted {
        /// Its kind.
        kind: String,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A PersistentVolumeClaim appeared or changed.
    Claim(PersistentVolumeClaim),
    /// A PersistentVolumeClaim is gone.
    ClaimDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A PersistentVolume appeared or changed.
    Volume(PersistentVolume),
    /// A PersistentVolume is gone (by name).
    VolumeDeleted(String),
    /// A StorageClass appeared or changed.
    StorageClass(StorageClass),
    /// A StorageClass is gone (by name).
    StorageClassDeleted(String),
    /// A CSINode appeared or changed.
    CsiNode(CsiNode),
    /// A CSINode is gone (by name).
    CsiNodeDeleted(String),
    /// A CSIDriver appeared or changed.
    CsiDriver(CsiDriver),
    /// A CSIDriver is gone (by name).
    CsiDriverDeleted(String),
    /// A CSIStorageCapacity appeared or changed.
    CsiStorageCapacity(CsiStorageCapacity),
    /// A CSIStorageCapacity is gone.
    CsiStorageCapacityDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A PodGroup appeared or changed.
    PodGroup(pod_groups::PodGroupObject),
    /// A PodGroup is gone.
    PodGroupDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A `scheduling.k8s.io` Workload appeared or changed.
    SchedulingWorkload(pod_groups::WorkloadObject),
    /// A `scheduling.k8s.io` Workload is gone.
    SchedulingWorkloadDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A `resource.k8s.io` object appeared, changed or is gone.
    Dra(dra::DraChange),
    /// Every source has listed its objects once: the scheduler's view is complete
    /// (a kind the scheduler may not list counts as listed, and empty).
    Synced,
    /// The scheduler may not list a kind (the API server answered 403): pods whose
    /// scheduling needs it wait (see [`access`]).
    KindForbidden {
        /// The kind, as [`access::qualified`] names it.
        kind: String,
        /// The API server's words.
        message: String,
    },
    /// A kind the scheduler could not list is listed now, its objects reported
    /// before this: the pods that waited for it are tried again.
    KindAllowed(String),
}

/// The namespaces of the cluster and their labels, shared with plugin instances
/// (namespace selectors of pod affinity read them).
#[derive(Clone, Debug, Default)]
pub struct Namespaces(Arc<RwLock<HashMap<String, Labels>>>);

impl Namespaces {
    /// No namespaces.
    pub fn new() -> Self {
        Self::default()
    }

    /// The labels of a namespace, if known.
    pub fn labels(&self, namespace: &str) -> Option<Labels> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(namespace)
            .cloned()
    }

    /// Adds or updates a namespace. Like the API server, it gives every namespace the
    /// label `kubernetes.io/metadata.name` with its name.
    pub fn set(&self, namespace: &str, mut labels: Labels) {
        labels.insert("kubernetes.io/metadata.name".into(), namespace.to_owned());
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(namespace.to_owned(), labels);
    }

    /// Removes a namespace.
    pub fn remove(&self, namespace: &str) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(namespace);
    }
}

/// The PodDisruptionBudgets of the cluster, shared with plugin instances
/// (preemption reads them).
#[derive(Clone, Debug, Default)]
pub struct Budgets(Arc<RwLock<Vec<PodDisruptionBudget>>>);

impl Budgets {
    /// No budgets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every budget.
    pub fn list(&self) -> Vec<PodDisruptionBudget> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Adds or replaces a budget (by namespace and name).
    pub fn set(&self, budget: PodDisruptionBudget) {
        let mut all = self.0.write().unwrap_or_else(|e| e.into_inner());
        match all
            .iter_mut()
            .find(|b| b.namespace == budget.namespace && b.name == budget.name)
        {
            Some(b) => *b = budget,
            None => all.push(budget),
        }
    }

    /// Removes a budget.
    pub fn remove(&self, namespace: &str, name: &str) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|b| !(b.namespace == namespace && b.name == name));
    }
}
