//! VolumeRestrictions: as upstream's `volumerestrictions` plugin, keeps a pod off
//! nodes where one of its in-tree disks is already mounted in a way that conflicts,
//! and keeps it from every node while a ReadWriteOncePod claim it uses is in use by
//! another scheduled pod.
//!
//! Disk conflicts, per kind of volume:
//! - GCE persistent disk: the same `pdName` conflicts unless both mounts are
//!   read-only;
//! - AWS EBS: the same `volumeID` always conflicts;
//! - iSCSI: the same `iqn` conflicts unless both mounts are read-only;
//! - Ceph RBD: a shared monitor, the same pool and the same image conflict unless both
//!   mounts are read-only.
//!
//! The plugin takes no args. It reads claims through the host's lister and the pods
//! of every node from its replica.

use berth_sdk::{
    AccessMode, ActionType, ClusterEvent, CycleState, EnqueueExtensions, EventRegistration,
    EventResource, Filter, NodeInfo, Object, Plugin, Pod, PreFilter, PreFilterExtensions,
    PreFilterResult, QueueingHint, Sign, SignFragment, StateKey, Status, VolumeSource, sign,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The CycleState key of PreFilter's state (upstream's key).
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterVolumeRestrictions";
/// [`PRE_FILTER_STATE_KEY`] with its value.
static PRE_FILTER_STATE: StateKey<PreFilterState> = StateKey::new(PRE_FILTER_STATE_KEY);
/// The reason upstream gives for a disk conflict.
pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
/// The reason upstream gives when a ReadWriteOncePod claim is in use.
pub const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

/// The plugin.
pub struct VolumeRestrictions;

/// What PreFilter found, for Filter and the PreFilter extensions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreFilterState {
    /// The names of the pod's claims with the ReadWriteOncePod access mode.
    pub read_write_once_pod_claims: BTreeSet<String>,
    /// How many references scheduled pods hold to those claims.
    pub conflicting_claim_refs: i64,
}

impl PreFilterState {
    /// How many of `other`'s claim volumes name one of the ReadWriteOncePod claims
    /// (by name, as upstream counts them).
    fn refs_of(&self, other: &Pod) -> i64 {
        other
            .volumes
            .iter()
            .filter(|v| match &v.source {
                VolumeSource::PersistentVolumeClaim { claim_name, .. } => {
                    self.read_write_once_pod_claims.contains(claim_name)
                }
                _ => false,
            })
            .count() as i64
    }
}

impl Plugin for VolumeRestrictions {
    const NAME: &'static str = "VolumeRestrictions";
    // PreFilter answers Skip and nothing else acts: a pod without volumes conflicts with none.
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        &[berth_sdk::PodFeature::Volumes]
    }
    /// Disk conflicts are with the pods on the node; claims in use are by any pod.
    const WANTS_PODS: bool = true;

    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(VolumeRestrictions)
    }

    /// A deleted pod may release a disk or a claim (with the hint); a new node has
    /// no disks mounted (no hint); a claim created may be the one the pod waits for
    /// (with the hint). Volumes of a pod are immutable, so pod updates never help.
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![
            EventRegistration::with_hint(EventResource::AssignedPod, ActionType::DELETE),
            EventRegistration::without_hint(EventResource::Node, ActionType::ADD),
            EventRegistration::with_hint(EventResource::PersistentVolumeClaim, ActionType::ADD),
        ])
    }
}

/// Whether the volume is of a kind whose mounts can conflict.
fn needs_restrictions_check(source: &VolumeSource) -> bool {
    matches!(
        source,
        VolumeSource::GcePersistentDisk { .. }
            | VolumeSource::AwsElasticBlockStore { .. }
            | VolumeSource::Iscsi { .. }
            | VolumeSource::Rbd { .. }
    )
}

/// Whether mounting `volume` conflicts with one of `other`'s volumes.
pub fn is_volume_conflict(volume: &VolumeSource, other: &Pod) -> bool {
    other
        .volumes
        .iter()
        .any(|existing| match (volume, &existing.source) {
            (
                VolumeSource::GcePersistentDisk { pd_name, read_only },
                VolumeSource::GcePersistentDisk {
                    pd_name: other_name,
                    read_only: other_read_only,
                },
            ) => pd_name == other_name && !(*read_only && *other_read_only),
            (
                VolumeSource::AwsElasticBlockStore { volume_id, .. },
                VolumeSource::AwsElasticBlockStore {
                    volume_id: other_id,
                    ..
                },
            ) => volume_id == other_id,
            (
                VolumeSource::Iscsi { iqn, read_only },
                VolumeSource::Iscsi {
                    iqn: other_iqn,
                    read_only: other_read_only,
                },
            ) => iqn == other_iqn && !(*read_only && *other_read_only),
            (
                VolumeSource::Rbd {
                    monitors,
                    pool,
                    image,
                    read_only,
                },
                VolumeSource::Rbd {
                    monitors: other_monitors,
                    pool: other_pool,
                    image: other_image,
                    read_only: other_read_only,
                },
            ) => {
                monitors.iter().any(|m| other_monitors.contains(m))
                    && pool == other_pool
                    && image == other_image
                    && !(*read_only && *other_read_only)
            }
            _ => false,
        })
}

/// Whether none of the pod's disks conflicts with those of the pods in `pods`.
pub fn satisfies_volume_conflicts<'a>(pod: &Pod, mut pods: impl Iterator<Item = &'a Pod>) -> bool {
    let checked: Vec<&VolumeSource> = pod
        .volumes
        .iter()
        .map(|v| &v.source)
        .filter(|s| needs_restrictions_check(s))
        .collect();
    if checked.is_empty() {
        return true;
    }
    !pods.any(|other| checked.iter().any(|v| is_volume_conflict(v, other)))
}

impl VolumeRestrictions {
    /// The names of the pod's claims with the ReadWriteOncePod access mode; an error
    /// (upstream's NotFound) when a claim does not exist.
    fn read_write_once_pod_claims(pod: &Pod) -> Result<BTreeSet<String>, String> {
        let mut claims = BTreeSet::new();
        for v in &pod.volumes {
            let VolumeSource::PersistentVolumeClaim { claim_name, .. } = &v.source else {
                continue;
            };
            let claim = berth_sdk::persistent_volume_claim(&pod.namespace, claim_name)
                .ok_or_else(|| format!("persistentvolumeclaim {claim_name:?} not found"))?;
            if claim.access_modes.contains(&AccessMode::ReadWriteOncePod) {
                claims.insert(claim.name);
            }
        }
        Ok(claims)
    }

    /// Upstream's `isSchedulableAfterPodDeleted`.
    pub fn is_schedulable_after_pod_deleted(
        &self,
        pod: &Pod,
        old: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let deleted = berth_sdk::events::required(old, Object::as_pod, "pod", "deleted")?;
        if deleted.namespace != pod.namespace {
            return Ok(QueueingHint::QueueSkip);
        }
        if !satisfies_volume_conflicts(pod, std::iter::once(deleted)) {
            return Ok(QueueingHint::Queue);
        }
        // The deleted pod may have held a ReadWriteOncePod claim the pod wants; the
        // claim's access mode is not looked up (as upstream, to keep hints cheap).
        let claims: BTreeSet<&str> = pod.persistent_claim_names().collect();
        if deleted.persistent_claim_names().any(|c| claims.contains(c)) {
            return Ok(QueueingHint::Queue);
        }
        Ok(QueueingHint::QueueSkip)
    }

    /// Upstream's `isSchedulableAfterPersistentVolumeClaimAdded`.
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
        if claim.namespace != pod.namespace {
            return Ok(QueueingHint::QueueSkip);
        }
        if pod.persistent_claim_names().any(|c| c == claim.name) {
            Ok(QueueingHint::Queue)
        } else {
            Ok(QueueingHint::QueueSkip)
        }
    }
}

impl PreFilter for VolumeRestrictions {
    fn pre_filter(&self, state: &CycleState, pod: &Pod, nodes: &[&NodeInfo]) -> PreFilterResult {
        let needs_check = pod
            .volumes
            .iter()
            .any(|v| needs_restrictions_check(&v.source));
        let claims = match Self::read_write_once_pod_claims(pod) {
            Ok(c) => c,
            Err(e) => return Status::unresolvable(e).into(),
        };
        // Whether a scheduled pod (bound or assumed, on any node) uses the claim: at
        // most one can, so each such claim counts once.
        let conflicting_claim_refs = claims
            .iter()
            .filter(|claim| {
                nodes.iter().flat_map(|n| &n.pods).any(|p| {
                    p.namespace == pod.namespace && p.persistent_claim_names().any(|c| c == *claim)
                })
            })
            .count() as i64;
        if !needs_check && conflicting_claim_refs == 0 {
            return Status::skip().into();
        }
        state.set(
            &PRE_FILTER_STATE,
            &PreFilterState {
                read_write_once_pod_claims: claims,
                conflicting_claim_refs,
            },
        );
        Status::success().into()
    }
}

impl PreFilterExtensions for VolumeRestrictions {
    fn add_pod(&self, state: &CycleState, _pod: &Pod, other: &Pod, _node: &NodeInfo) -> Status {
        update_refs(state, other, 1)
    }

    fn remove_pod(&self, state: &CycleState, _pod: &Pod, other: &Pod, _node: &NodeInfo) -> Status {
        update_refs(state, other, -1)
    }
}

fn update_refs(state: &CycleState, other: &Pod, sign: i64) -> Status {
    let Some(mut s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
        return Status::error(format!(
            "cannot read {PRE_FILTER_STATE_KEY:?} from cycleState"
        ));
    };
    s.conflicting_claim_refs += sign * s.refs_of(other);
    state.set(&PRE_FILTER_STATE, &s);
    Status::success()
}

impl Filter for VolumeRestrictions {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if !satisfies_volume_conflicts(pod, node.pods.iter()) {
            return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
        }
        let Some(s) = state.value(&PRE_FILTER_STATE) else {
            return Status::error(format!(
                "cannot read {PRE_FILTER_STATE_KEY:?} from cycleState"
            ));
        };
        if s.conflicting_claim_refs > 0 {
            // Preemption may free the claim.
            return Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT);
        }
        Status::success()
    }
}

impl EnqueueExtensions for VolumeRestrictions {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::AssignedPod if event.actions.intersects(ActionType::DELETE) => {
                self.is_schedulable_after_pod_deleted(pod, old)
            }
            EventResource::PersistentVolumeClaim => self.is_schedulable_after_claim_added(pod, new),
            // Not asked with a hint: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

impl Sign for VolumeRestrictions {
    /// PreFilter and Filter read the disks of the pod's volumes and its claims (found
    /// in its namespace, and held by pods of that namespace).
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::volumes(pod)?])
    }
}

berth_sdk::export_plugin!(
    VolumeRestrictions: queueing_hint,
    pre_filter,
    pre_filter_extensions,
    filter,
    sign_pod
);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Volume, events::ClusterEvent as Event};

    fn pod(ns: &str, volumes: Vec<VolumeSource>) -> Pod {
        Pod {
            namespace: ns.into(),
            name: "p".into(),
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

    fn gce(name: &str, read_only: bool) -> VolumeSource {
        VolumeSource::GcePersistentDisk {
            pd_name: name.into(),
            read_only,
        }
    }

    fn claim(name: &str) -> VolumeSource {
        VolumeSource::PersistentVolumeClaim {
            claim_name: name.into(),
            read_only: false,
        }
    }

    #[test]
    fn rbd_conflicts_need_a_shared_monitor() {
        let rbd = |mons: &[&str], read_only| VolumeSource::Rbd {
            monitors: mons.iter().map(|m| (*m).to_owned()).collect(),
            pool: "rbd".into(),
            image: "img".into(),
            read_only,
        };
        let other = pod("ns", vec![rbd(&["a", "b"], false)]);
        assert!(is_volume_conflict(&rbd(&["b", "c"], false), &other));
        assert!(!is_volume_conflict(&rbd(&["c"], false), &other));
        let read_only = pod("ns", vec![rbd(&["a"], true)]);
        assert!(!is_volume_conflict(&rbd(&["a"], true), &read_only));
        assert!(is_volume_conflict(&rbd(&["a"], false), &read_only));
    }

    #[test]
    fn pod_deleted_hint() {
        let pl = VolumeRestrictions;
        let wanting = pod("ns", vec![gce("disk", false), claim("data")]);
        let hint = |deleted: Pod| {
            pl.queueing_hint(
                &Event::new(EventResource::AssignedPod, ActionType::DELETE),
                &wanting,
                Some(&Object::Pod(deleted)),
                None,
            )
        };
        assert_eq!(
            hint(pod("ns", vec![gce("disk", true)])),
            Ok(QueueingHint::Queue)
        );
        assert_eq!(
            hint(pod("ns", vec![claim("data")])),
            Ok(QueueingHint::Queue)
        );
        assert_eq!(
            hint(pod("ns", vec![gce("other", false)])),
            Ok(QueueingHint::QueueSkip)
        );
        assert_eq!(
            hint(pod("other", vec![gce("disk", false)])),
            Ok(QueueingHint::QueueSkip)
        );
        assert_eq!(
            pl.is_schedulable_after_pod_deleted(&wanting, Some(&Object::Node(Default::default()))),
            Err("expected a pod, got node ".into())
        );
    }

    #[test]
    fn claim_added_hint() {
        let pl = VolumeRestrictions;
        let wanting = pod("ns", vec![claim("data")]);
        let added = |ns: &str, name: &str| {
            Object::PersistentVolumeClaim(berth_sdk::PersistentVolumeClaim {
                namespace: ns.into(),
                name: name.into(),
                ..Default::default()
            })
        };
        let hint = |o: Object| {
            pl.queueing_hint(
                &Event::new(EventResource::PersistentVolumeClaim, ActionType::ADD),
                &wanting,
                None,
                Some(&o),
            )
        };
        assert_eq!(hint(added("ns", "data")), Ok(QueueingHint::Queue));
        assert_eq!(hint(added("ns", "other")), Ok(QueueingHint::QueueSkip));
        assert_eq!(hint(added("other", "data")), Ok(QueueingHint::QueueSkip));
    }

    #[test]
    fn extensions_count_references_by_claim_name() {
        let store = berth_sdk::MemoryState::default();
        let state = CycleState::new(&store);
        state.set(
            &PRE_FILTER_STATE,
            &PreFilterState {
                read_write_once_pod_claims: BTreeSet::from(["data".to_owned()]),
                conflicting_claim_refs: 1,
            },
        );
        let pl = VolumeRestrictions;
        let holder = pod("ns", vec![claim("data")]);
        let node = NodeInfo::default();
        let me = Pod::default();
        assert!(pl.remove_pod(&state, &me, &holder, &node).is_success());
        assert!(pl.filter(&state, &me, &node).is_success());
        assert!(pl.add_pod(&state, &me, &holder, &node).is_success());
        assert_eq!(
            pl.filter(&state, &me, &node).reasons,
            [ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT]
        );
    }

    #[test]
    fn signs_pods_by_their_volumes() {
        use berth_sdk::Sign;
        let plugin = VolumeRestrictions;
        berth_sdk::testing::check_signs_by_volumes(|p| plugin.sign_pod(p));
    }
}
