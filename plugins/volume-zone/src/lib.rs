//! VolumeZone: as upstream's `volumezone` plugin, keeps a pod on nodes in the zones
//! and regions of the PersistentVolumes its claims are bound to.
//!
//! A volume labelled with a zone or region (`topology.kubernetes.io/zone`,
//! `topology.kubernetes.io/region`, or their `failure-domain.beta.kubernetes.io`
//! forms; several zones as `a__b`) can be used only from a node whose label for the
//! same key (or its GA form) has one of those values. A node with no such label at
//! all fits (a single-zone cluster). Unbound claims of a `WaitForFirstConsumer`
//! class are left to VolumeBinding; other unbound claims make the pod unresolvable.
//!
//! The plugin takes no args. It reads claims, volumes and classes through the
//! host's listers.

use berth_sdk::{
    ActionType, ClusterEvent, CycleState, EnqueueExtensions, EventRegistration, EventResource,
    Filter, NodeInfo, Object, Plugin, Pod, PreFilter, PreFilterResult, QueueingHint, Sign,
    SignFragment, StateKey, Status, VolumeBindingMode, sign,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The CycleState key of PreFilter's state (upstream's key).
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterVolumeZone";
/// [`PRE_FILTER_STATE_KEY`] with its value.
static PRE_FILTER_STATE: StateKey<Vec<VolumeTopology>> = StateKey::new(PRE_FILTER_STATE_KEY);
/// The reason upstream gives when a node is outside a volume's zone or region.
pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

/// The volume labels that constrain nodes, in upstream's order.
pub const TOPOLOGY_LABELS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

/// The delimiter of several zones in one label value.
const MULTI_ZONE_DELIMITER: &str = "__";

/// The plugin.
pub struct VolumeZone;

/// A topology label of a bound volume and the values a node may have for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeTopology {
    /// The volume.
    pub volume: String,
    /// The label key.
    pub key: String,
    /// The values a node's label may have.
    pub values: BTreeSet<String>,
}

impl Plugin for VolumeZone {
    const NAME: &'static str = "VolumeZone";
    // PreFilter answers Skip and nothing else acts: a pod without volumes has no claims to place.
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        &[berth_sdk::PodFeature::Volumes]
    }

    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(VolumeZone)
    }

    /// As upstream: a StorageClass added (it may be the `WaitForFirstConsumer` class a
    /// claim names), a node added or relabelled, a claim added or updated (with the
    /// hint: bound now, or named by the pod), a volume added or updated.
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![
            EventRegistration::without_hint(EventResource::StorageClass, ActionType::ADD),
            EventRegistration::without_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_TAINT,
            ),
            EventRegistration::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD | ActionType::UPDATE,
            ),
            EventRegistration::without_hint(
                EventResource::PersistentVolume,
                ActionType::ADD | ActionType::UPDATE,
            ),
        ])
    }
}

/// The zones of a label value (`a__b` is zones `a` and `b`), as upstream's
/// `LabelZonesToSet`: `None` when one of them is empty.
pub fn label_zones(value: &str) -> Option<BTreeSet<String>> {
    value
        .split(MULTI_ZONE_DELIMITER)
        .map(|z| {
            let z = z.trim();
            (!z.is_empty()).then(|| z.to_owned())
        })
        .collect()
}

/// The GA form of a beta topology label.
fn to_ga(key: &str) -> &str {
    match key {
        BETA_REGION => REGION,
        BETA_ZONE => ZONE,
        other => other,
    }
}

/// The topology constraints of the volumes the pod's claims are bound to, or why the
/// pod cannot be placed (upstream's `getPVbyPod`).
pub fn volume_topologies(pod: &Pod) -> Result<Vec<VolumeTopology>, Status> {
    let mut out = Vec::new();
    for claim_name in pod.persistent_claim_names() {
        if claim_name.is_empty() {
            return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
        }
        let claim =
            berth_sdk::persistent_volume_claim(&pod.namespace, claim_name).ok_or_else(|| {
                Status::unresolvable(format!("persistentvolumeclaim {claim_name:?} not found"))
            })?;
        if claim.volume_name.is_empty() {
            let class_name = claim.storage_class_name.clone().unwrap_or_default();
            if class_name.is_empty() {
                return Err(Status::unresolvable(
                    "PersistentVolumeClaim had no pv name and storageClass name",
                ));
            }
            let class = berth_sdk::storage_class(&class_name).ok_or_else(|| {
                Status::unresolvable(format!(
                    "storageclass.storage.k8s.io {class_name:?} not found"
                ))
            })?;
            if class.volume_binding_mode == VolumeBindingMode::WaitForFirstConsumer {
                // Not bound yet: VolumeBinding places it.
                continue;
            }
            return Err(Status::unresolvable("PersistentVolume had no name"));
        }
        let volume = berth_sdk::persistent_volume(&claim.volume_name).ok_or_else(|| {
            Status::unresolvable(format!(
                "persistentvolume {:?} not found",
                claim.volume_name
            ))
        })?;
        for key in TOPOLOGY_LABELS {
            let Some(value) = volume.labels.get(key) else {
                continue;
            };
            // A malformed value is ignored, as upstream logs and skips it.
            if let Some(values) = label_zones(value) {
                out.push(VolumeTopology {
                    volume: volume.name.clone(),
                    key: key.to_owned(),
                    values,
                });
            }
        }
    }
    Ok(out)
}

/// Whether the node is in every volume's zone and region.
pub fn fits(topologies: &[VolumeTopology], node: &NodeInfo) -> bool {
    let labels = &node.node.labels;
    // A node without any topology label fits: a single-zone cluster.
    if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
        return true;
    }
    topologies.iter().all(|t| {
        labels
            .get(&t.key)
            .or_else(|| labels.get(to_ga(&t.key)))
            .is_some_and(|v| t.values.contains(v))
    })
}

impl PreFilter for VolumeZone {
    fn pre_filter(&self, state: &CycleState, pod: &Pod, _nodes: &[&NodeInfo]) -> PreFilterResult {
        match volume_topologies(pod) {
            Err(status) => status.into(),
            Ok(t) if t.is_empty() => Status::skip().into(),
            Ok(t) => {
                state.set(&PRE_FILTER_STATE, &t);
                Status::success().into()
            }
        }
    }
}

impl Filter for VolumeZone {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if pod.volumes.is_empty() {
            return Status::success();
        }
        // Without PreFilter's state, work it out here (as upstream falls back).
        let topologies = match state.value(&PRE_FILTER_STATE) {
            Some(t) => t,
            None => match volume_topologies(pod) {
                Ok(t) => std::rc::Rc::new(t),
                Err(status) => return status,
            },
        };
        if fits(&topologies, node) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_CONFLICT)
        }
    }
}

impl VolumeZone {
    /// Upstream's `isSchedulableAfterPersistentVolumeClaimChange`: Queue when the
    /// claim is one the pod uses.
    pub fn is_schedulable_after_claim_change(
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
        if claim.namespace == pod.namespace && pod.persistent_claim_names().any(|c| c == claim.name)
        {
            Ok(QueueingHint::Queue)
        } else {
            Ok(QueueingHint::QueueSkip)
        }
    }
}

impl EnqueueExtensions for VolumeZone {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        _old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::PersistentVolumeClaim => {
                self.is_schedulable_after_claim_change(pod, new)
            }
            // Not asked with a hint: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

impl Sign for VolumeZone {
    /// PreFilter and Filter read the PersistentVolumeClaim volumes (their claims found
    /// in the pod's namespace) and whether the pod has any volume.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::volumes(pod)?])
    }
}

berth_sdk::export_plugin!(VolumeZone: queueing_hint, pre_filter, filter, sign_pod);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Node, PersistentVolumeClaim, Volume, VolumeSource};

    #[test]
    fn label_values_may_name_several_zones() {
        assert_eq!(
            label_zones("us-east-1a__us-east-1b"),
            Some(BTreeSet::from(["us-east-1a".into(), "us-east-1b".into()]))
        );
        assert_eq!(label_zones(" a "), Some(BTreeSet::from(["a".into()])));
        assert_eq!(label_zones("a____b"), None);
        assert_eq!(label_zones(""), None);
    }

    #[test]
    fn beta_volume_labels_match_ga_node_labels() {
        let t = [VolumeTopology {
            volume: "pv".into(),
            key: BETA_ZONE.into(),
            values: BTreeSet::from(["a".into()]),
        }];
        let node = |k: &str, v: &str| NodeInfo {
            node: Node {
                labels: [(k.to_owned(), v.to_owned())].into(),
                ..Node::default()
            },
            ..NodeInfo::default()
        };
        assert!(fits(&t, &node(ZONE, "a")));
        assert!(!fits(&t, &node(ZONE, "b")));
        assert!(!fits(&t, &node(REGION, "a")));
        assert!(fits(&t, &node("other", "x")));
    }

    #[test]
    fn claim_change_hint() {
        let pod = Pod {
            namespace: "ns".into(),
            volumes: vec![Volume {
                name: "v".into(),
                source: VolumeSource::PersistentVolumeClaim {
                    claim_name: "data".into(),
                    read_only: false,
                },
            }],
            ..Pod::default()
        };
        let claim = |ns: &str, name: &str| {
            Object::PersistentVolumeClaim(PersistentVolumeClaim {
                namespace: ns.into(),
                name: name.into(),
                ..PersistentVolumeClaim::default()
            })
        };
        let pl = VolumeZone;
        let hint = |o: Object| pl.is_schedulable_after_claim_change(&pod, Some(&o));
        assert_eq!(hint(claim("ns", "data")), Ok(QueueingHint::Queue));
        assert_eq!(hint(claim("ns", "other")), Ok(QueueingHint::QueueSkip));
        assert_eq!(hint(claim("other", "data")), Ok(QueueingHint::QueueSkip));
        assert!(hint(Object::Pod(Pod::default())).is_err());
    }

    #[test]
    fn signs_pods_by_their_volumes() {
        use berth_sdk::Sign;
        let plugin = VolumeZone;
        berth_sdk::testing::check_signs_by_volumes(|p| plugin.sign_pod(p));
    }
}
