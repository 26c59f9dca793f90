//! NodeVolumeLimits: as upstream's CSI volume limits plugin (`CSILimits`), keeps a
//! pod off nodes where attaching its CSI volumes would exceed how many volumes of
//! that driver the node can attach.
//!
//! A pod's volumes count through their claims (PersistentVolumeClaim and generic
//! ephemeral volumes): a claim bound to a CSI PersistentVolume counts as that
//! driver's volume; an unbound claim counts as a volume of its StorageClass's
//! provisioner. A volume already attached for another pod on the node is not
//! counted twice. The limits are the CSINode's `allocatable.count` per driver, and
//! `attachable-volumes-csi-<driver>` in the node's allocatable.
//!
//! In-tree volumes count as the CSI driver their plugin migrated to, when the node's
//! CSINode lists the plugin as migrated (GCE PD, AWS EBS, Azure Disk, Cinder: their
//! PersistentVolumes, their inline volumes, and claims of their in-tree
//! provisioners); elsewhere they do not count here, as upstream.
//!
//! The plugin takes no args.

use berth_sdk::{
    ActionType, ClusterEvent, CsiNode, CycleState, EnqueueExtensions, EventRegistration,
    EventResource, Filter, NodeInfo, Object, PersistentVolumeSource, Plugin, Pod, PreFilter,
    PreFilterResult, QueueingHint, Sign, SignFragment, Status, VolumeSource, sign,
};
use std::collections::{BTreeMap, HashMap};

/// The reason upstream gives when a node's limit would be exceeded.
pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";
/// The prefix of a CSI driver's attach limit in a node's allocatable.
pub const CSI_ATTACH_LIMIT_PREFIX: &str = "attachable-volumes-csi-";

/// The plugin.
pub struct NodeVolumeLimits;

impl Plugin for NodeVolumeLimits {
    const NAME: &'static str = "NodeVolumeLimits";
    // PreFilter answers Skip and nothing else acts: a pod without volumes attaches none.
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        &[berth_sdk::PodFeature::Volumes]
    }
    /// The volumes of the pods on a node count against its limits.
    const WANTS_PODS: bool = true;

    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(NodeVolumeLimits)
    }

    /// As upstream: a CSINode added (its limits may be higher; no hint), a pod with
    /// claims deleted from a node (with the hint), a claim the pod uses created (with
    /// the hint).
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![
            EventRegistration::without_hint(EventResource::CsiNode, ActionType::ADD),
            EventRegistration::with_hint(EventResource::AssignedPod, ActionType::DELETE),
            EventRegistration::with_hint(EventResource::PersistentVolumeClaim, ActionType::ADD),
        ])
    }
}

/// A CSI driver's attach-limit key.
pub fn attach_limit_key(driver: &str) -> String {
    format!("{CSI_ATTACH_LIMIT_PREFIX}{driver}")
}

/// The in-tree volume plugins whose volumes migrate to a CSI driver, and the driver.
const MIGRATIONS: [(&str, &str); 4] = [
    ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
];

/// The CSI driver an in-tree plugin's volumes are counted as on a node: only when
/// the node's CSINode lists the plugin as migrated (upstream's `isCSIMigrationOn`).
fn migrated_driver(plugin: &str, csi_node: Option<&CsiNode>) -> Option<&'static str> {
    let (_, driver) = MIGRATIONS.iter().find(|(p, _)| *p == plugin)?;
    csi_node
        .is_some_and(|n| n.migrated_plugins.iter().any(|p| p == plugin))
        .then_some(*driver)
}

/// An in-tree PersistentVolume as its CSI driver's volume: the plugin, and the
/// volume handle the translation gives it.
fn in_tree_volume(volume: &berth_sdk::PersistentVolume) -> Option<(&'static str, String)> {
    Some(match &volume.source {
        PersistentVolumeSource::GcePersistentDisk { pd_name } => (
            "kubernetes.io/gce-pd",
            gce_disk_handle(pd_name, &volume.labels),
        ),
        PersistentVolumeSource::AwsElasticBlockStore { volume_id } => {
            ("kubernetes.io/aws-ebs", ebs_volume_handle(volume_id))
        }
        PersistentVolumeSource::AzureDisk { disk_uri } => {
            ("kubernetes.io/azure-disk", disk_uri.clone())
        }
        PersistentVolumeSource::Cinder { volume_id } => ("kubernetes.io/cinder", volume_id.clone()),
        _ => return None,
    })
}

/// A GCE PD's handle as the CSI translation writes it: by zone (from the volume's
/// zone label), by region for a disk in several zones, else unspecified.
fn gce_disk_handle(pd_name: &str, labels: &berth_sdk::Labels) -> String {
    let label = |ga: &str, beta: &str| labels.get(ga).or_else(|| labels.get(beta)).cloned();
    let zone = label(
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    );
    match zone {
        Some(z) if z.contains("__") => {
            let region = label(
                "topology.kubernetes.io/region",
                "failure-domain.beta.kubernetes.io/region",
            )
            .unwrap_or_else(|| "UNSPECIFIED".into());
            format!("projects/UNSPECIFIED/regions/{region}/disks/{pd_name}")
        }
        Some(z) => format!("projects/UNSPECIFIED/zones/{z}/disks/{pd_name}"),
        None => format!("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{pd_name}"),
    }
}

/// An EBS volume ID as the CSI translation writes it: `aws://<zone>/<id>` becomes
/// `<id>`.
fn ebs_volume_handle(volume_id: &str) -> String {
    match volume_id.strip_prefix("aws://") {
        Some(rest) => rest.rsplit('/').next().unwrap_or(rest).to_owned(),
        None => volume_id.to_owned(),
    }
}

/// A pod's inline in-tree volume as its CSI driver's volume, if its plugin is
/// migrated on the node (upstream's `checkAttachableInlineVolume`).
fn inline_volume(source: &VolumeSource, csi_node: Option<&CsiNode>) -> Option<(String, String)> {
    let (plugin, handle) = match source {
        VolumeSource::GcePersistentDisk { pd_name, .. } => (
            "kubernetes.io/gce-pd",
            gce_disk_handle(pd_name, &berth_sdk::Labels::new()),
        ),
        VolumeSource::AwsElasticBlockStore { volume_id, .. } => {
            ("kubernetes.io/aws-ebs", ebs_volume_handle(volume_id))
        }
        _ => return None,
    };
    let driver = migrated_driver(plugin, csi_node)?;
    Some((driver.to_owned(), handle))
}

/// Whether some volume of the pod may count against a limit: a claim, or an inline
/// volume of a plugin that migrates to CSI.
fn may_count(pod: &Pod) -> bool {
    pod.volume_claims().next().is_some()
        || pod.volumes.iter().any(|v| {
            matches!(
                v.source,
                VolumeSource::GcePersistentDisk { .. } | VolumeSource::AwsElasticBlockStore { .. }
            )
        })
}

/// The CSI driver and volume handle a claim's volume has, or will have once
/// provisioned; `None` when it does not count.
fn csi_driver_info(
    claim: &berth_sdk::PersistentVolumeClaim,
    csi_node: Option<&CsiNode>,
) -> Option<(String, String)> {
    if !claim.volume_name.is_empty()
        && let Some(volume) = berth_sdk::persistent_volume(&claim.volume_name)
    {
        if let PersistentVolumeSource::Csi {
            driver,
            volume_handle,
        } = volume.source
        {
            return Some((driver, volume_handle));
        }
        // An in-tree volume counts as its CSI driver's where its plugin migrated.
        let (plugin, handle) = in_tree_volume(&volume)?;
        return Some((migrated_driver(plugin, csi_node)?.to_owned(), handle));
    }
    // Not bound yet (or bound to a volume not seen yet): the class's provisioner, and a
    // handle of its own, since it is a volume no other pod has.
    let class_name = claim.storage_class_name.as_deref().unwrap_or_default();
    if class_name.is_empty() {
        return None;
    }
    let class = berth_sdk::storage_class(class_name)?;
    let driver = if class.provisioner.starts_with("kubernetes.io/") {
        // An in-tree provisioner: its migrated driver's, where it migrated.
        migrated_driver(&class.provisioner, csi_node)?.to_owned()
    } else {
        class.provisioner
    };
    Some((
        driver,
        format!("unbound-claim:{}/{}", claim.namespace, claim.name),
    ))
}

/// The pod's attachable CSI volumes, `driver/handle` -> limit key. For the pod being
/// scheduled (`new_pod`) a missing claim is an error; for a pod already on the node
/// it does not count.
fn attachable_volumes(
    pod: &Pod,
    new_pod: bool,
    csi_node: Option<&CsiNode>,
    out: &mut HashMap<String, String>,
) -> Result<(), Status> {
    for v in &pod.volumes {
        if let Some((driver, handle)) = inline_volume(&v.source, csi_node) {
            out.insert(format!("{driver}/{handle}"), attach_limit_key(&driver));
        }
    }
    for (claim_name, ephemeral) in pod.volume_claims() {
        if claim_name.is_empty() {
            return Err(Status::error("PersistentVolumeClaim had no name"));
        }
        let Some(claim) = berth_sdk::persistent_volume_claim(&pod.namespace, &claim_name) else {
            if new_pod {
                return Err(Status::unresolvable(format!(
                    "looking up PVC {}/{claim_name}: persistentvolumeclaim {claim_name:?} not found",
                    pod.namespace
                )));
            }
            continue;
        };
        if ephemeral && claim.controller_uid.as_deref() != Some(pod.uid.as_str()) {
            return Err(Status::error(format!(
                "PVC {}/{claim_name} was not created for pod {} (pod is not owner)",
                pod.namespace,
                pod.key()
            )));
        }
        if let Some((driver, handle)) = csi_driver_info(&claim, csi_node) {
            out.insert(format!("{driver}/{handle}"), attach_limit_key(&driver));
        }
    }
    Ok(())
}

/// The node's attach limits by key: its allocatable `attachable-volumes-*`
/// resources, overridden by its CSINode's per-driver counts.
fn volume_limits(node: &NodeInfo, csi_node: Option<&CsiNode>) -> BTreeMap<String, i64> {
    let mut limits: BTreeMap<String, i64> = node
        .node
        .allocatable
        .scalar
        .iter()
        .filter(|(k, _)| k.starts_with("attachable-volumes-"))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    for d in csi_node.iter().flat_map(|n| &n.drivers) {
        if let Some(count) = d.allocatable_count {
            limits.insert(attach_limit_key(&d.name), i64::from(count));
        }
    }
    limits
}

impl PreFilter for NodeVolumeLimits {
    fn pre_filter(&self, _state: &CycleState, pod: &Pod, _nodes: &[&NodeInfo]) -> PreFilterResult {
        if may_count(pod) {
            Status::success().into()
        } else {
            Status::skip().into()
        }
    }
}

impl Filter for NodeVolumeLimits {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if pod.volumes.is_empty() {
            return Status::success();
        }
        let csi_node = berth_sdk::csi_node(node.name());
        let mut new_volumes = HashMap::new();
        if let Err(s) = attachable_volumes(pod, true, csi_node.as_ref(), &mut new_volumes) {
            return s;
        }
        if new_volumes.is_empty() {
            return Status::success();
        }
        let limits = volume_limits(node, csi_node.as_ref());
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = HashMap::new();
        for other in &node.pods {
            if let Err(s) = attachable_volumes(other, false, csi_node.as_ref(), &mut attached) {
                return Status::error(s.message());
            }
        }
        let mut attached_count: HashMap<&str, i64> = HashMap::new();
        for (unique, key) in &attached {
            // A volume already attached for another pod is not attached again.
            new_volumes.remove(unique);
            *attached_count.entry(key.as_str()).or_default() += 1;
        }
        let mut new_count: HashMap<&str, i64> = HashMap::new();
        for key in new_volumes.values() {
            *new_count.entry(key.as_str()).or_default() += 1;
        }
        for (key, count) in new_count {
            if let Some(limit) = limits.get(key)
                && attached_count.get(key).copied().unwrap_or(0) + count > *limit
            {
                // Preemption may detach volumes.
                return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
            }
        }
        Status::success()
    }
}

impl NodeVolumeLimits {
    /// Upstream's `isSchedulableAfterPodDeleted`: Queue when the deleted pod was on
    /// a node and used claims.
    pub fn is_schedulable_after_pod_deleted(
        &self,
        old: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let deleted = berth_sdk::events::required(old, Object::as_pod, "pod", "deleted")?;
        if deleted.node_name.is_empty() || !may_count(deleted) {
            return Ok(QueueingHint::QueueSkip);
        }
        Ok(QueueingHint::Queue)
    }

    /// Upstream's `isSchedulableAfterPVCAdded`: Queue when the claim is one of the
    /// pod's (by name, generic ephemeral volumes' claims included).
    pub fn is_schedulable_after_claim_added(
        &self,
        pod: &Pod,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let claim = berth_sdk::events::required(
            new,
            Object::as_persistent_volume_claim,
            "persistentvolumeclaim",
            "new",
        )?;
        if pod.uses_claim(claim) {
            Ok(QueueingHint::Queue)
        } else {
            Ok(QueueingHint::QueueSkip)
        }
    }
}

impl EnqueueExtensions for NodeVolumeLimits {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::AssignedPod if event.actions.intersects(ActionType::DELETE) => {
                self.is_schedulable_after_pod_deleted(old)
            }
            EventResource::PersistentVolumeClaim => self.is_schedulable_after_claim_added(pod, new),
            // Not asked with a hint: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

impl Sign for NodeVolumeLimits {
    /// PreFilter and Filter read the volumes that may attach: inline in-tree disks, and
    /// claims (found in the pod's namespace, an ephemeral volume's owned by the pod).
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::volumes(pod)?])
    }
}

berth_sdk::export_plugin!(NodeVolumeLimits: queueing_hint, pre_filter, filter, sign_pod);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{CsiNodeDriver, Node, PersistentVolumeClaim, Volume};

    fn pod_with(volumes: Vec<VolumeSource>) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: "p".into(),
            node_name: "n1".into(),
            volumes: volumes
                .into_iter()
                .enumerate()
                .map(|(i, source)| Volume {
                    name: format!("v{i}"),
                    source,
                })
                .collect(),
            ..Pod::default()
        }
    }

    #[test]
    fn limits_come_from_allocatable_and_the_csi_node() {
        let mut node = NodeInfo::new(Node::default());
        node.node
            .allocatable
            .scalar
            .insert("attachable-volumes-csi-a".into(), 10);
        node.node
            .allocatable
            .scalar
            .insert("example.com/gpu".into(), 1);
        let csi = CsiNode {
            name: "n1".into(),
            drivers: vec![
                CsiNodeDriver {
                    name: "a".into(),
                    allocatable_count: Some(3),
                    ..CsiNodeDriver::default()
                },
                CsiNodeDriver {
                    name: "b".into(),
                    ..CsiNodeDriver::default()
                },
            ],
            migrated_plugins: vec![],
        };
        assert_eq!(
            volume_limits(&node, Some(&csi)),
            BTreeMap::from([("attachable-volumes-csi-a".to_owned(), 3)])
        );
        assert_eq!(volume_limits(&node, None).len(), 1);
    }

    #[test]
    fn hints() {
        let pl = NodeVolumeLimits;
        let claim = VolumeSource::PersistentVolumeClaim {
            claim_name: "data".into(),
            read_only: false,
        };
        let deleted = |p: Pod| pl.is_schedulable_after_pod_deleted(Some(&Object::Pod(p)));
        assert_eq!(
            deleted(pod_with(vec![claim.clone()])),
            Ok(QueueingHint::Queue)
        );
        assert_eq!(
            deleted(pod_with(vec![VolumeSource::Other])),
            Ok(QueueingHint::QueueSkip)
        );
        let mut pending = pod_with(vec![claim.clone()]);
        pending.node_name.clear();
        assert_eq!(deleted(pending), Ok(QueueingHint::QueueSkip));

        let wanting = pod_with(vec![claim, VolumeSource::Ephemeral]);
        let added = |name: &str| {
            Object::PersistentVolumeClaim(PersistentVolumeClaim {
                namespace: "ns".into(),
                name: name.into(),
                ..PersistentVolumeClaim::default()
            })
        };
        let hint = |o: Object| pl.is_schedulable_after_claim_added(&wanting, Some(&o));
        assert_eq!(hint(added("data")), Ok(QueueingHint::Queue));
        assert_eq!(hint(added("p-v1")), Ok(QueueingHint::Queue));
        assert_eq!(hint(added("other")), Ok(QueueingHint::QueueSkip));
    }

    #[test]
    fn signs_pods_by_their_volumes() {
        use berth_sdk::Sign;
        let plugin = NodeVolumeLimits::new(berth_sdk::serde_json::Value::Null).unwrap();
        berth_sdk::testing::check_signs_by_volumes(|p| plugin.sign_pod(p));
    }
}
