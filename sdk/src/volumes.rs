//! Storage as scheduling reads it: a pod's volumes, and the PersistentVolumeClaims,
//! PersistentVolumes, StorageClasses, CSINodes and CSIDrivers of the cluster.
//!
//! Plugins do not receive these objects in bulk: they ask the host for the few they
//! need, by name ([`persistent_volume_claim`](crate::persistent_volume_claim),
//! [`persistent_volume`](crate::persistent_volume), ...) or through the indexed
//! queries the volume plugins use ([`persistent_volumes_of_class`](crate::persistent_volumes_of_class)).

use crate::affinity::{LabelSelector, NodeSelectorTerm};
use crate::types::Labels;
use serde::{Deserialize, Serialize};

/// The annotation a PersistentVolumeClaim gets when a scheduler picks the node its
/// volume is to be provisioned for (`WaitForFirstConsumer`).
pub const ANNOTATION_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// The annotation a PersistentVolume gets when it is bound to a claim by the
/// controller (or by a scheduler for it) rather than by the user.
pub const ANNOTATION_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

/// The annotation the PersistentVolume controller puts on a claim once its binding
/// is complete: with `spec.volumeName`, what makes a claim fully bound.
pub const ANNOTATION_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

/// The provisioner of StorageClasses whose volumes are never provisioned (local
/// volumes created by hand).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// The annotation of a CSINode that lists the in-tree volume plugins migrated to CSI
/// drivers on its node, comma-separated.
pub const ANNOTATION_MIGRATED_PLUGINS: &str = "storage.alpha.kubernetes.io/migrated-plugins";

/// The annotation that makes a StorageClass the default one.
pub const ANNOTATION_DEFAULT_STORAGE_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// An access mode of a claim or a volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AccessMode {
    /// `ReadWriteOnce`: read-write by the pods of one node.
    ReadWriteOnce,
    /// `ReadOnlyMany`: read-only by many nodes.
    ReadOnlyMany,
    /// `ReadWriteMany`: read-write by many nodes.
    ReadWriteMany,
    /// `ReadWriteOncePod`: read-write by a single pod.
    ReadWriteOncePod,
}

impl AccessMode {
    /// The name the API uses.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessMode::ReadWriteOnce => "ReadWriteOnce",
            AccessMode::ReadOnlyMany => "ReadOnlyMany",
            AccessMode::ReadWriteMany => "ReadWriteMany",
            AccessMode::ReadWriteOncePod => "ReadWriteOncePod",
        }
    }

    /// The mode of an API name.
    pub fn parse(s: &str) -> Option<AccessMode> {
        Some(match s {
            "ReadWriteOnce" => AccessMode::ReadWriteOnce,
            "ReadOnlyMany" => AccessMode::ReadOnlyMany,
            "ReadWriteMany" => AccessMode::ReadWriteMany,
            "ReadWriteOncePod" => AccessMode::ReadWriteOncePod,
            _ => return None,
        })
    }
}

/// `volumeMode` of a claim or a volume.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VolumeMode {
    /// A mounted filesystem (the default).
    #[default]
    Filesystem,
    /// A raw block device.
    Block,
}

/// Where a pod's volume comes from, for the kinds scheduling looks at.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeSource {
    /// A PersistentVolumeClaim of the pod's namespace.
    PersistentVolumeClaim {
        /// `claimName`.
        claim_name: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// A generic ephemeral volume: the claim is named `<pod>-<volume>` and owned by
    /// the pod.
    Ephemeral,
    /// An inline CSI volume (CSI ephemeral).
    Csi {
        /// The CSI driver.
        driver: String,
    },
    /// An in-tree GCE persistent disk.
    GcePersistentDisk {
        /// `pdName`.
        pd_name: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// An in-tree AWS Elastic Block Store volume.
    AwsElasticBlockStore {
        /// `volumeID`.
        volume_id: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// An in-tree iSCSI volume.
    Iscsi {
        /// `iqn`.
        iqn: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// An in-tree Ceph RBD volume.
    Rbd {
        /// `monitors`.
        monitors: Vec<String>,
        /// `pool` (`rbd` when not given, as the API server defaults it).
        pool: String,
        /// `image`.
        image: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// Any other kind (emptyDir, configMap, secret, hostPath, ...): nothing
    /// scheduling checks.
    #[default]
    Other,
}

/// A volume of a pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    /// The volume's name in the pod.
    pub name: String,
    /// Where it comes from.
    pub source: VolumeSource,
}

/// `status.phase` of a claim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClaimPhase {
    /// Not bound yet (also a claim with no status).
    #[default]
    Pending,
    /// Bound to a volume.
    Bound,
    /// Its volume is gone.
    Lost,
}

/// A PersistentVolumeClaim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentVolumeClaim {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The UID.
    pub uid: String,
    /// Annotations (`volume.kubernetes.io/selected-node`, ...).
    pub annotations: Labels,
    /// The UID of the object that controls it (`ownerReferences` with `controller:
    /// true`): the pod, for the claim of a generic ephemeral volume.
    pub controller_uid: Option<String>,
    /// `spec.storageClassName`, or the beta annotation
    /// `volume.beta.kubernetes.io/storage-class`; `None` when neither is set, an empty
    /// name when the claim asks for no class.
    pub storage_class_name: Option<String>,
    /// `spec.volumeName`: the volume it is bound (or pre-bound) to; empty when none.
    pub volume_name: String,
    /// `spec.accessModes`.
    pub access_modes: Vec<AccessMode>,
    /// `spec.resources.requests.storage`, in bytes (0 when absent).
    pub requested_storage: i64,
    /// `spec.selector`.
    pub selector: Option<LabelSelector>,
    /// `spec.volumeMode`.
    pub volume_mode: VolumeMode,
    /// `status.phase`.
    pub phase: ClaimPhase,
    /// The claim has a deletion timestamp.
    pub terminating: bool,
}

impl PersistentVolumeClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The node the claim's volume is to be provisioned for, if a scheduler chose
    /// one.
    pub fn selected_node(&self) -> Option<&str> {
        self.annotations
            .get(ANNOTATION_SELECTED_NODE)
            .map(String::as_str)
    }
}

/// `status.phase` of a volume.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VolumePhase {
    /// Not yet available.
    Pending,
    /// Free for a claim (also a volume with no status).
    #[default]
    Available,
    /// Bound to a claim.
    Bound,
    /// Its claim is gone; not yet reclaimed.
    Released,
    /// Reclamation failed.
    Failed,
}

/// The claim a volume is bound or reserved to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRef {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The claim's UID; empty when the volume is pre-bound by name only.
    pub uid: String,
}

/// Where a PersistentVolume's storage is, for the kinds scheduling looks at.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PersistentVolumeSource {
    /// A CSI volume.
    Csi {
        /// The driver.
        driver: String,
        /// `volumeHandle`.
        volume_handle: String,
    },
    /// An in-tree GCE persistent disk.
    GcePersistentDisk {
        /// `pdName`.
        pd_name: String,
    },
    /// An in-tree AWS Elastic Block Store volume.
    AwsElasticBlockStore {
        /// `volumeID`.
        volume_id: String,
    },
    /// An in-tree Azure disk.
    AzureDisk {
        /// `diskURI`.
        disk_uri: String,
    },
    /// An in-tree Cinder volume.
    Cinder {
        /// `volumeID`.
        volume_id: String,
    },
    /// Any other kind (local, hostPath, nfs, ...).
    #[default]
    Other,
}

/// A PersistentVolume.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistentVolume {
    /// The name.
    pub name: String,
    /// Labels (topology labels such as `topology.kubernetes.io/zone`).
    pub labels: Labels,
    /// Annotations.
    pub annotations: Labels,
    /// `spec.storageClassName` (or the beta annotation); empty when none.
    pub storage_class_name: String,
    /// `spec.capacity.storage`, in bytes (0 when absent).
    pub capacity_storage: i64,
    /// `spec.accessModes`.
    pub access_modes: Vec<AccessMode>,
    /// `spec.volumeMode`.
    pub volume_mode: VolumeMode,
    /// `spec.claimRef`.
    pub claim_ref: Option<ClaimRef>,
    /// `spec.nodeAffinity.required`: the volume can be reached only from nodes that
    /// match one of these terms; `None` from every node.
    pub node_affinity: Option<Vec<NodeSelectorTerm>>,
    /// `status.phase`.
    pub phase: VolumePhase,
    /// Where the storage is.
    pub source: PersistentVolumeSource,
    /// The volume has a deletion timestamp.
    pub terminating: bool,
}

/// `volumeBindingMode` of a StorageClass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum VolumeBindingMode {
    /// Bind (or provision) as soon as the claim is created (the default).
    #[default]
    Immediate,
    /// Wait until a pod using the claim is scheduled.
    WaitForFirstConsumer,
}

/// A term of a StorageClass's `allowedTopologies`: every requirement must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologySelectorTerm {
    /// `matchLabelExpressions`: a label key and the values it may have.
    pub match_label_expressions: Vec<(String, Vec<String>)>,
}

/// A StorageClass.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageClass {
    /// The name.
    pub name: String,
    /// `provisioner`.
    pub provisioner: String,
    /// `volumeBindingMode`.
    pub volume_binding_mode: VolumeBindingMode,
    /// `allowedTopologies`: volumes can be provisioned only where one term holds;
    /// empty allows every node.
    pub allowed_topologies: Vec<TopologySelectorTerm>,
    /// Annotated `storageclass.kubernetes.io/is-default-class: "true"`.
    pub is_default: bool,
}

/// A CSI driver installed on a node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CsiNodeDriver {
    /// The driver's name.
    pub name: String,
    /// The node's ID for the driver.
    pub node_id: String,
    /// The topology keys the driver reports.
    pub topology_keys: Vec<String>,
    /// `allocatable.count`: how many of the driver's volumes the node can attach;
    /// `None` when unbounded.
    pub allocatable_count: Option<i32>,
}

/// A CSINode: the CSI drivers on a node (same name as the node).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CsiNode {
    /// The node's name.
    pub name: String,
    /// `spec.drivers`.
    pub drivers: Vec<CsiNodeDriver>,
    /// The in-tree volume plugins migrated to CSI on the node (the annotation
    /// [`ANNOTATION_MIGRATED_PLUGINS`], split at commas), e.g. `kubernetes.io/gce-pd`.
    pub migrated_plugins: Vec<String>,
}

/// A CSIDriver.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CsiDriver {
    /// The driver's name.
    pub name: String,
    /// `spec.attachRequired` (true when absent).
    pub attach_required: bool,
    /// `spec.storageCapacity` (false when absent).
    pub storage_capacity: bool,
}

/// A CSIStorageCapacity: how much a StorageClass can still provision where its
/// topology holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CsiStorageCapacity {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `storageClassName`.
    pub storage_class_name: String,
    /// `nodeTopology`; `None` matches no node.
    pub node_topology: Option<crate::affinity::LabelSelector>,
    /// `capacity` in bytes; `None` when unset (unknown).
    pub capacity: Option<i64>,
    /// `maximumVolumeSize` in bytes; `None` when unset.
    pub maximum_volume_size: Option<i64>,
}

impl crate::types::Pod {
    /// The names of the claims the pod's volumes use, in order: a
    /// PersistentVolumeClaim volume's claim, and a generic ephemeral volume's claim
    /// (`<pod>-<volume>`).
    pub fn claim_names(&self) -> impl Iterator<Item = String> + '_ {
        self.volume_claims().map(|(name, _)| name)
    }

    /// The claims the pod's volumes use, in order, each with whether it is a generic
    /// ephemeral volume's (`<pod>-<volume>`, which the pod must own).
    pub fn volume_claims(&self) -> impl Iterator<Item = (String, bool)> + '_ {
        self.volumes.iter().filter_map(|v| self.claim_of(v))
    }

    /// The claim one of the pod's volumes uses, with whether it is a generic ephemeral
    /// volume's; `None` for a volume of another kind.
    fn claim_of(&self, volume: &Volume) -> Option<(String, bool)> {
        match &volume.source {
            VolumeSource::PersistentVolumeClaim { claim_name, .. } => {
                Some((claim_name.clone(), false))
            }
            VolumeSource::Ephemeral => Some((format!("{}-{}", self.name, volume.name), true)),
            _ => None,
        }
    }

    /// Whether one of the pod's volumes uses this claim (a PersistentVolumeClaim
    /// volume naming it, or a generic ephemeral volume whose claim it is): what the
    /// volume plugins' hints ask of a claim that appeared or changed.
    pub fn uses_claim(&self, claim: &PersistentVolumeClaim) -> bool {
        claim.namespace == self.namespace && self.claim_names().any(|n| n == claim.name)
    }

    /// The claim names of the pod's PersistentVolumeClaim volumes alone, in order
    /// (what VolumeZone and VolumeRestrictions look at; no ephemeral volumes' claims).
    pub fn persistent_claim_names(&self) -> impl Iterator<Item = &str> {
        self.volumes.iter().filter_map(|v| match &v.source {
            VolumeSource::PersistentVolumeClaim { claim_name, .. } => Some(claim_name.as_str()),
            _ => None,
        })
    }
}
