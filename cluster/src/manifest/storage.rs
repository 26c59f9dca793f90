//! The storage kinds of a manifest (PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities) and a pod's volumes, converted into the
//! SDK's types with the defaults the API server applies.

use super::{FieldError, namespace_of, non_empty, required_name, resources};
use berth_sdk::volumes::{
    AccessMode, ClaimPhase, ClaimRef, CsiDriver, CsiNode, CsiNodeDriver, CsiStorageCapacity,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSource, StorageClass,
    TopologySelectorTerm, Volume, VolumeBindingMode, VolumeMode, VolumePhase, VolumeSource,
};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The beta annotation that named a claim's or a volume's class before
/// `storageClassName`; upstream's helpers still read it first.
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

fn access_modes(modes: &Option<Vec<String>>, path: &str) -> Result<Vec<AccessMode>, FieldError> {
    modes
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, m)| {
            AccessMode::parse(m)
                .ok_or_else(|| FieldError::unsupported(format!("{path}[{i}]"), m, &ACCESS_MODES))
        })
        .collect()
}

fn volume_mode(mode: &Option<String>, path: &str) -> Result<VolumeMode, FieldError> {
    match mode.as_deref() {
        None | Some("Filesystem") => Ok(VolumeMode::Filesystem),
        Some("Block") => Ok(VolumeMode::Block),
        Some(other) => Err(FieldError::unsupported(
            path,
            other,
            &["Block", "Filesystem"],
        )),
    }
}

fn storage_bytes(
    map: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
    path: &str,
) -> Result<i64, FieldError> {
    Ok(resources(map, path)?.get("storage").copied().unwrap_or(0))
}

fn beta_class(meta: &ObjectMeta) -> Option<String> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
        .cloned()
}

/// The UID of the owner reference with `controller: true`.
fn controller_uid(meta: &ObjectMeta) -> Option<String> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

pub(super) fn convert_claim(
    c: &k8s::PersistentVolumeClaim,
) -> Result<PersistentVolumeClaim, FieldError> {
    let meta = &c.metadata;
    let name = required_name(meta)?;
    let default_spec = k8s::PersistentVolumeClaimSpec::default();
    let spec = c.spec.as_ref().unwrap_or(&default_spec);
    let phase = match c.status.as_ref().and_then(|s| s.phase.as_deref()) {
        None | Some("Pending") => ClaimPhase::Pending,
        Some("Bound") => ClaimPhase::Bound,
        Some("Lost") => ClaimPhase::Lost,
        Some(other) => {
            return Err(FieldError::unsupported(
                "status.phase",
                other,
                &["Bound", "Lost", "Pending"],
            ));
        }
    };
    Ok(PersistentVolumeClaim {
        namespace: namespace_of(meta),
        uid: non_empty(&meta.uid).unwrap_or_else(|| super::derived_uid(&namespace_of(meta), &name)),
        name,
        annotations: meta.annotations.clone().unwrap_or_default(),
        controller_uid: controller_uid(meta),
        storage_class_name: beta_class(meta).or_else(|| spec.storage_class_name.clone()),
        volume_name: spec.volume_name.clone().unwrap_or_default(),
        access_modes: access_modes(&spec.access_modes, "spec.accessModes")?,
        requested_storage: storage_bytes(
            spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
            "spec.resources.requests",
        )?,
        selector: match &spec.selector {
            Some(s) => Some(
                super::super::affinity::label_selector(s, "spec.selector")
                    .map_err(|(p, m)| FieldError::new(p, m))?,
            ),
            None => None,
        },
        volume_mode: volume_mode(&spec.volume_mode, "spec.volumeMode")?,
        phase,
        terminating: meta.deletion_timestamp.is_some(),
    })
}

pub(super) fn convert_volume(pv: &k8s::PersistentVolume) -> Result<PersistentVolume, FieldError> {
    let meta = &pv.metadata;
    let name = required_name(meta)?;
    let default_spec = k8s::PersistentVolumeSpec::default();
    let spec = pv.spec.as_ref().unwrap_or(&default_spec);
    let phase = match pv.status.as_ref().and_then(|s| s.phase.as_deref()) {
        None | Some("Available") => VolumePhase::Available,
        Some("Pending") => VolumePhase::Pending,
        Some("Bound") => VolumePhase::Bound,
        Some("Released") => VolumePhase::Released,
        Some("Failed") => VolumePhase::Failed,
        Some(other) => {
            return Err(FieldError::unsupported(
                "status.phase",
                other,
                &["Available", "Bound", "Failed", "Pending", "Released"],
            ));
        }
    };
    let node_affinity = match spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
    {
        Some(selector) => Some(
            super::super::affinity::node_terms(
                &selector.node_selector_terms,
                "spec.nodeAffinity.required.nodeSelectorTerms",
            )
            .map_err(|(p, m)| FieldError::new(p, m))?,
        ),
        None => None,
    };
    let source = if let Some(csi) = &spec.csi {
        PersistentVolumeSource::Csi {
            driver: csi.driver.clone(),
            volume_handle: csi.volume_handle.clone(),
        }
    } else if let Some(gce) = &spec.gce_persistent_disk {
        PersistentVolumeSource::GcePersistentDisk {
            pd_name: gce.pd_name.clone(),
        }
    } else if let Some(ebs) = &spec.aws_elastic_block_store {
        PersistentVolumeSource::AwsElasticBlockStore {
            volume_id: ebs.volume_id.clone(),
        }
    } else if let Some(azure) = &spec.azure_disk {
        PersistentVolumeSource::AzureDisk {
            disk_uri: azure.disk_uri.clone(),
        }
    } else if let Some(cinder) = &spec.cinder {
        PersistentVolumeSource::Cinder {
            volume_id: cinder.volume_id.clone(),
        }
    } else {
        PersistentVolumeSource::Other
    };
    Ok(PersistentVolume {
        name,
        labels: meta.labels.clone().unwrap_or_default(),
        annotations: meta.annotations.clone().unwrap_or_default(),
        storage_class_name: beta_class(meta)
            .or_else(|| spec.storage_class_name.clone())
            .unwrap_or_default(),
        capacity_storage: storage_bytes(spec.capacity.as_ref(), "spec.capacity")?,
        access_modes: access_modes(&spec.access_modes, "spec.accessModes")?,
        volume_mode: volume_mode(&spec.volume_mode, "spec.volumeMode")?,
        claim_ref: spec.claim_ref.as_ref().map(|r| ClaimRef {
            namespace: r.namespace.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_default(),
            uid: r.uid.clone().unwrap_or_default(),
        }),
        node_affinity,
        phase,
        source,
        terminating: meta.deletion_timestamp.is_some(),
    })
}

pub(super) fn convert_storage_class(c: &storage::StorageClass) -> Result<StorageClass, FieldError> {
    let name = required_name(&c.metadata)?;
    if c.provisioner.is_empty() {
        return Err(FieldError::new("provisioner", "required value"));
    }
    let volume_binding_mode = match c.volume_binding_mode.as_deref() {
        None | Some("Immediate") => VolumeBindingMode::Immediate,
        Some("WaitForFirstConsumer") => VolumeBindingMode::WaitForFirstConsumer,
        Some(other) => {
            return Err(FieldError::unsupported(
                "volumeBindingMode",
                other,
                &["Immediate", "WaitForFirstConsumer"],
            ));
        }
    };
    Ok(StorageClass {
        name,
        provisioner: c.provisioner.clone(),
        volume_binding_mode,
        allowed_topologies: c
            .allowed_topologies
            .iter()
            .flatten()
            .map(|t| TopologySelectorTerm {
                match_label_expressions: t
                    .match_label_expressions
                    .iter()
                    .flatten()
                    .map(|r| (r.key.clone(), r.values.clone()))
                    .collect(),
            })
            .collect(),
        is_default: c
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(berth_sdk::volumes::ANNOTATION_DEFAULT_STORAGE_CLASS))
            .is_some_and(|v| v == "true"),
    })
}

pub(super) fn convert_csi_node(n: &storage::CSINode) -> Result<CsiNode, FieldError> {
    Ok(CsiNode {
        name: required_name(&n.metadata)?,
        drivers: n
            .spec
            .drivers
            .iter()
            .map(|d| CsiNodeDriver {
                name: d.name.clone(),
                node_id: d.node_id.clone(),
                topology_keys: d.topology_keys.clone().unwrap_or_default(),
                allocatable_count: d.allocatable.as_ref().and_then(|a| a.count),
            })
            .collect(),
        migrated_plugins: n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(berth_sdk::volumes::ANNOTATION_MIGRATED_PLUGINS))
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

pub(super) fn convert_csi_driver(d: &storage::CSIDriver) -> Result<CsiDriver, FieldError> {
    Ok(CsiDriver {
        name: required_name(&d.metadata)?,
        attach_required: d.spec.attach_required.unwrap_or(true),
        storage_capacity: d.spec.storage_capacity.unwrap_or(false),
    })
}

/// One quantity of a CSIStorageCapacity, in bytes (rounded up, as the scheduler's
/// `Value()` reads it); the error names `path`.
fn capacity_bytes(
    q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    path: &str,
) -> Result<Option<i64>, FieldError> {
    let Some(q) = q else { return Ok(None) };
    match crate::quantity::value(q.0.trim()) {
        Ok(v) if v < 0 => Err(FieldError::new(path, "must be greater than or equal to 0")),
        Ok(v) => Ok(Some(v)),
        Err(e) => Err(FieldError::new(path, e.to_string())),
    }
}

pub(super) fn convert_csi_storage_capacity(
    c: &storage::CSIStorageCapacity,
) -> Result<CsiStorageCapacity, FieldError> {
    if c.storage_class_name.is_empty() {
        return Err(FieldError::new("storageClassName", "required value"));
    }
    Ok(CsiStorageCapacity {
        namespace: namespace_of(&c.metadata),
        name: required_name(&c.metadata)?,
        storage_class_name: c.storage_class_name.clone(),
        node_topology: c
            .node_topology
            .as_ref()
            .map(|s| super::super::affinity::label_selector(s, "nodeTopology"))
            .transpose()
            .map_err(FieldError::from)?,
        capacity: capacity_bytes(c.capacity.as_ref(), "capacity")?,
        maximum_volume_size: capacity_bytes(c.maximum_volume_size.as_ref(), "maximumVolumeSize")?,
    })
}

/// A pod's volumes, for the kinds scheduling reads (the others are `Other`).
pub(super) fn pod_volumes(volumes: Option<&Vec<k8s::Volume>>) -> Vec<Volume> {
    volumes
        .into_iter()
        .flatten()
        .map(|v| {
            let source = if let Some(c) = &v.persistent_volume_claim {
                VolumeSource::PersistentVolumeClaim {
                    claim_name: c.claim_name.clone(),
                    read_only: c.read_only.unwrap_or(false),
                }
            } else if v.ephemeral.is_some() {
                VolumeSource::Ephemeral
            } else if let Some(csi) = &v.csi {
                VolumeSource::Csi {
                    driver: csi.driver.clone(),
                }
            } else if let Some(gce) = &v.gce_persistent_disk {
                VolumeSource::GcePersistentDisk {
                    pd_name: gce.pd_name.clone(),
                    read_only: gce.read_only.unwrap_or(false),
                }
            } else if let Some(ebs) = &v.aws_elastic_block_store {
                VolumeSource::AwsElasticBlockStore {
                    volume_id: ebs.volume_id.clone(),
                    read_only: ebs.read_only.unwrap_or(false),
                }
            } else if let Some(iscsi) = &v.iscsi {
                VolumeSource::Iscsi {
                    iqn: iscsi.iqn.clone(),
                    read_only: iscsi.read_only.unwrap_or(false),
                }
            } else if let Some(rbd) = &v.rbd {
                VolumeSource::Rbd {
                    monitors: rbd.monitors.clone(),
                    // The API server's default pool.
                    pool: rbd.pool.clone().unwrap_or_else(|| "rbd".into()),
                    image: rbd.image.clone(),
                    read_only: rbd.read_only.unwrap_or(false),
                }
            } else {
                VolumeSource::Other
            };
            Volume {
                name: v.name.clone(),
                source,
            }
        })
        .collect()
}
