//! The embedded cluster: in-process bookkeeping of bindings, for `berth simulate`,
//! `berth bench` and tests. Like the API server, it refuses to bind a pod twice.

use super::storage::{Storage, claim_ref_matches};
use super::{Binder, PodState, WriteError};
use berth_sdk::{
    ANNOTATION_BIND_COMPLETED, ANNOTATION_BOUND_BY_CONTROLLER, ANNOTATION_SELECTED_NODE,
    ClaimPhase, ClaimRef, NO_PROVISIONER, Object, PersistentVolume, Pod, VolumePhase,
};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Decides whether the cluster refuses a binding (tests inject failures with it).
pub type RefuseFn = dyn Fn(&Pod, &str) -> Option<String> + Send + Sync;

/// Decides whether the cluster refuses to bind a volume to a claim (tests inject
/// failures with it).
pub type RefuseVolumeFn = dyn Fn(&str, &ClaimRef) -> Option<String> + Send + Sync;

/// The annotation a provisioned volume gets: who provisioned it.
const ANNOTATION_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";

/// The embedded cluster's binding side. Its volume side plays the PersistentVolume
/// controller and the provisioners: a volume bound to a claim binds the claim at
/// once, and a claim given a selected node gets a volume of its class's provisioner
/// at once (reachable from every node, as a network-attached volume), bound to it.
#[derive(Default)]
pub struct MemoryCluster {
    bindings: Mutex<BTreeMap<String, (String, String)>>,
    refuse: Mutex<Option<Box<RefuseFn>>>,
    refuse_volumes: Mutex<Option<Box<RefuseVolumeFn>>>,
    evictions: Mutex<Vec<Eviction>>,
    storage: Mutex<Option<Storage>>,
    dra: Mutex<Option<crate::dra::Dra>>,
    /// `status.extendedResourceClaimStatus` written for pods, by UID.
    extended_statuses: Mutex<BTreeMap<String, berth_sdk::PodExtendedResourceClaimStatus>>,
    storage_changes: Mutex<Vec<(Option<Object>, Object)>>,
    volume_bindings: Mutex<Vec<VolumeBinding>>,
    /// The provisioners are stalled: a claim given a selected node waits.
    provisioners_stalled: std::sync::atomic::AtomicBool,
}

/// A claim the embedded cluster bound to a volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeBinding {
    /// The claim, `namespace/name`.
    pub claim: String,
    /// The volume.
    pub volume: String,
    /// For a provisioned volume: the node it was provisioned for.
    pub provisioned_for: Option<String>,
}

/// A pod the embedded cluster evicted for preemption.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// The victim's UID.
    pub uid: String,
    /// `namespace/name`.
    pub key: String,
    /// The node it ran on.
    pub node: String,
    /// The preemptor, `namespace/name`.
    pub preemptor: String,
    /// The `DisruptionTarget` condition's message.
    pub message: String,
}

impl std::fmt::Debug for MemoryCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCluster").finish_non_exhaustive()
    }
}

impl MemoryCluster {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the cluster refuse the bindings `f` answers a message for.
    pub fn refuse_bindings(&self, f: Box<RefuseFn>) {
        *self.refuse.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    /// Makes the cluster refuse the volume bindings `f` answers a message for.
    pub fn refuse_volume_bindings(&self, f: Box<RefuseVolumeFn>) {
        *self
            .refuse_volumes
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    /// Stalls the provisioners (or lets them go on): while stalled, a claim given a
    /// selected node waits for its volume, as behind a provisioner that is slow or
    /// down. Claims selected meanwhile stay waiting.
    pub fn stall_provisioners(&self, stalled: bool) {
        self.provisioners_stalled
            .store(stalled, std::sync::atomic::Ordering::SeqCst);
    }

    /// The `status.extendedResourceClaimStatus` written for each pod (by UID) whose
    /// extended resources got devices through a claim.
    pub fn extended_resource_claim_statuses(
        &self,
    ) -> BTreeMap<String, berth_sdk::PodExtendedResourceClaimStatus> {
        self.extended_statuses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn dra_view(&self, what: &str) -> Result<crate::dra::Dra, WriteError> {
        self.dra
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| WriteError::Refused(format!("{what}: no DRA view attached")))
    }

    /// Remembers a change of a ResourceClaim for the queue, as a watch would report it.
    fn claim_changed(
        &self,
        old: Option<berth_sdk::dra::ResourceClaim>,
        new: berth_sdk::dra::ResourceClaim,
    ) {
        self.storage_changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((old.map(Object::ResourceClaim), Object::ResourceClaim(new)));
    }

    fn storage(&self) -> Result<Storage, WriteError> {
        self.storage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| {
                WriteError::Refused("the embedded cluster has no storage attached".to_owned())
            })
    }

    /// Writes a volume as the cluster's own, remembering the change for the queue.
    fn write_volume(&self, storage: &Storage, volume: PersistentVolume) {
        let old = storage.set_volume(volume.clone());
        self.storage_changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((
                old.map(Object::PersistentVolume),
                Object::PersistentVolume(volume),
            ));
    }

    /// Writes a claim as the cluster's own, remembering the change for the queue.
    fn write_claim(&self, storage: &Storage, claim: berth_sdk::PersistentVolumeClaim) {
        let old = storage.set_claim(claim.clone());
        self.storage_changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((
                old.map(Object::PersistentVolumeClaim),
                Object::PersistentVolumeClaim(claim),
            ));
    }

    /// Every claim bound to a volume, in order.
    pub fn volume_bindings(&self) -> Vec<VolumeBinding> {
        self.volume_bindings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The PersistentVolume controller's part: binds the claim to the volume that
    /// names it, and marks both bound.
    fn complete_binding(
        &self,
        storage: &Storage,
        mut volume: PersistentVolume,
        mut claim: berth_sdk::PersistentVolumeClaim,
        provisioned_for: Option<&str>,
    ) {
        self.volume_bindings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(VolumeBinding {
                claim: claim.key(),
                volume: volume.name.clone(),
                provisioned_for: provisioned_for.map(str::to_owned),
            });
        volume.phase = VolumePhase::Bound;
        claim.volume_name = volume.name.clone();
        claim.phase = ClaimPhase::Bound;
        claim
            .annotations
            .insert(ANNOTATION_BIND_COMPLETED.into(), "yes".into());
        claim
            .annotations
            .insert(ANNOTATION_BOUND_BY_CONTROLLER.into(), "yes".into());
        self.write_volume(storage, volume);
        self.write_claim(storage, claim);
    }

    /// Every binding made: pod UID -> (`namespace/name`, node).
    pub fn bindings(&self) -> BTreeMap<String, (String, String)> {
        self.bindings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl MemoryCluster {
    /// Every eviction made, in order.
    pub fn evictions(&self) -> Vec<Eviction> {
        self.evictions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Binder for MemoryCluster {
    fn evict(&self, victim: &Pod, preemptor: &Pod, message: &str) -> Result<(), WriteError> {
        let mut evictions = self.evictions.lock().unwrap_or_else(|e| e.into_inner());
        if !evictions.iter().any(|e| e.uid == victim.uid) {
            evictions.push(Eviction {
                uid: victim.uid.clone(),
                key: victim.key(),
                node: victim.node_name.clone(),
                preemptor: preemptor.key(),
                message: message.to_owned(),
            });
        }
        Ok(())
    }

    /// The embedded cluster has no watch: the scheduler deletes what it evicts.
    fn reports_deletions(&self) -> bool {
        false
    }

    fn bind(&self, pod: &Pod, node: &str) -> Result<(), WriteError> {
        if let Some(refuse) = &*self.refuse.lock().unwrap_or_else(|e| e.into_inner())
            && let Some(message) = refuse(pod, node)
        {
            return Err(WriteError::Refused(message));
        }
        let mut bindings = self.bindings.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, bound)) = bindings.get(&pod.uid) {
            // As the API server answers 409 Conflict.
            return Err(WriteError::Conflict(format!(
                "pod {} is already assigned to node {bound:?}",
                pod.key()
            )));
        }
        bindings.insert(pod.uid.clone(), (pod.key(), node.to_owned()));
        Ok(())
    }

    fn bind_volume(&self, volume: &str, claim: &ClaimRef) -> Result<(), WriteError> {
        let what = format!(
            "binding persistentvolume {volume} to claim {}/{}",
            claim.namespace, claim.name
        );
        if let Some(refuse) = &*self
            .refuse_volumes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            && let Some(message) = refuse(volume, claim)
        {
            return Err(WriteError::Refused(format!("{what}: {message}")));
        }
        let storage = self.storage()?;
        let Some(mut pv) = storage.cluster_volume(volume) else {
            return Err(WriteError::NotFound(format!("{what}: the volume is gone")));
        };
        let Some(pvc) = storage.cluster_claim(&claim.namespace, &claim.name) else {
            return Err(WriteError::NotFound(format!("{what}: the claim is gone")));
        };
        if let Some(taken) = &pv.claim_ref
            && !claim_ref_matches(taken, claim)
        {
            return Err(WriteError::Conflict(format!(
                "{what}: the volume is already bound to claim {}/{}",
                taken.namespace, taken.name
            )));
        }
        pv.claim_ref = Some(ClaimRef {
            uid: pvc.uid.clone(),
            ..claim.clone()
        });
        pv.annotations
            .insert(ANNOTATION_BOUND_BY_CONTROLLER.into(), "yes".into());
        self.complete_binding(&storage, pv, pvc, None);
        Ok(())
    }

    fn select_node_for_claim(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<(), WriteError> {
        let what = format!("selecting node {node} for claim {namespace}/{name}");
        let storage = self.storage()?;
        let Some(mut pvc) = storage.cluster_claim(namespace, name) else {
            return Err(WriteError::NotFound(format!("{what}: the claim is gone")));
        };
        pvc.annotations
            .insert(ANNOTATION_SELECTED_NODE.into(), node.to_owned());
        let class = pvc
            .storage_class_name
            .as_deref()
            .and_then(|c| storage.class(c));
        let stalled = self
            .provisioners_stalled
            .load(std::sync::atomic::Ordering::SeqCst);
        let Some(class) = class
            .filter(|c| !stalled && !c.provisioner.is_empty() && c.provisioner != NO_PROVISIONER)
        else {
            // Nobody provisions for this class (or the provisioners are stalled): the
            // claim waits, as in a cluster.
            self.write_claim(&storage, pvc);
            return Ok(());
        };
        let uid = if pvc.uid.is_empty() {
            format!("{namespace}-{name}")
        } else {
            pvc.uid.clone()
        };
        let pv = PersistentVolume {
            name: format!("pvc-{uid}"),
            annotations: [(
                ANNOTATION_PROVISIONED_BY.to_owned(),
                class.provisioner.clone(),
            )]
            .into_iter()
            .collect(),
            storage_class_name: class.name.clone(),
            capacity_storage: pvc.requested_storage,
            access_modes: pvc.access_modes.clone(),
            volume_mode: pvc.volume_mode,
            claim_ref: Some(ClaimRef {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                uid: pvc.uid.clone(),
            }),
            ..PersistentVolume::default()
        };
        self.complete_binding(&storage, pv, pvc, Some(node));
        Ok(())
    }

    fn attach_dra(&self, dra: &crate::dra::Dra) {
        *self.dra.lock().unwrap_or_else(|e| e.into_inner()) = Some(dra.clone());
    }

    /// As the API server's status update: only from the claim's current
    /// `resourceVersion`, which then grows by one.
    fn write_claim_status(
        &self,
        claim: &berth_sdk::dra::ResourceClaim,
    ) -> Result<berth_sdk::dra::ResourceClaim, WriteError> {
        let what = format!("writing the status of resourceclaim {}", claim.key());
        let dra = self.dra_view(&what)?;
        let Some(current) = dra.cluster_claim(&claim.namespace, &claim.name) else {
            return Err(WriteError::NotFound(format!("{what}: the claim is gone")));
        };
        if current.uid != claim.uid || current.resource_version != claim.resource_version {
            return Err(WriteError::Conflict(format!(
                "{what}: Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                claim.name
            )));
        }
        let mut written = (*current).clone();
        written.status.allocation = claim.status.allocation.clone();
        written.status.reserved_for = claim.status.reserved_for.clone();
        written.resource_version = crate::dra::next_version(&current.resource_version);
        dra.set_claim(written.clone());
        // The watch of a real cluster would report it: the queue hears of it.
        self.claim_changed(Some((*current).clone()), written.clone());
        Ok(written)
    }

    /// As the API server's create with `generateName`: the name gets a suffix of
    /// five characters (derived from the pod's UID, so that replays name it alike),
    /// the claim a UID and its first `resourceVersion`.
    fn create_extended_resource_claim(
        &self,
        claim: &berth_sdk::dra::ResourceClaim,
    ) -> Result<berth_sdk::dra::ResourceClaim, WriteError> {
        let Some(owner) = claim.controller.clone() else {
            return Err(WriteError::Refused(
                "creating a claim for extended resources: it names no pod as its controller".into(),
            ));
        };
        let what = format!(
            "creating a claim for the extended resources of pod {}/{}",
            claim.namespace, owner.name
        );
        let dra = self.dra_view(&what)?;
        let pod = Pod {
            uid: owner.uid.clone(),
            ..Pod::default()
        };
        let suffix = crate::manifest::dra::claim_suffix(&pod, "extended-resources");
        let mut created = claim.clone();
        created.name = format!("{}-extended-resources-{suffix}", owner.name);
        if dra
            .cluster_claim(&created.namespace, &created.name)
            .is_some()
        {
            return Err(WriteError::Conflict(format!(
                "{what}: resourceclaims.resource.k8s.io \"{}\" already exists",
                created.name
            )));
        }
        created.uid = crate::manifest::derived_uid(
            &created.namespace,
            &format!("resourceclaim/{}", created.name),
        );
        created.resource_version = "1".into();
        created.annotations.insert(
            berth_sdk::dra::EXTENDED_RESOURCE_CLAIM_ANNOTATION.into(),
            "true".into(),
        );
        created.status = Default::default();
        dra.set_claim(created.clone());
        self.claim_changed(None, created.clone());
        Ok(created)
    }

    fn delete_extended_resource_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), WriteError> {
        let dra = self.dra_view(&format!("deleting resourceclaim {namespace}/{name}"))?;
        dra.remove_claim(namespace, name);
        Ok(())
    }

    fn write_extended_resource_claim_status(
        &self,
        _namespace: &str,
        _name: &str,
        uid: &str,
        status: &berth_sdk::PodExtendedResourceClaimStatus,
    ) -> Result<(), WriteError> {
        self.extended_statuses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid.to_owned(), status.clone());
        Ok(())
    }

    fn attach_storage(&self, storage: &Storage) {
        *self.storage.lock().unwrap_or_else(|e| e.into_inner()) = Some(storage.clone());
    }

    fn take_storage_changes(&self) -> Vec<(Option<Object>, Object)> {
        std::mem::take(
            &mut *self
                .storage_changes
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    fn lookup(&self, pod: &Pod) -> PodState {
        match self
            .bindings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&pod.uid)
        {
            Some((_, n)) => PodState::BoundTo(n.clone()),
            None => PodState::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_s_status_is_written_from_its_version_only() {
        use berth_sdk::dra::{AllocationResult, ConsumerReference, ResourceClaim};
        let c = MemoryCluster::new();
        let claim = ResourceClaim {
            namespace: "ml".into(),
            name: "gpu".into(),
            uid: "u1".into(),
            ..ResourceClaim::default()
        };
        let mut wanted = claim.clone();
        wanted.status.allocation = Some(AllocationResult::default());
        wanted.status.reserved_for = vec![ConsumerReference::pod("p", "up")];
        assert!(matches!(
            c.write_claim_status(&wanted),
            Err(WriteError::Refused(_))
        ));
        let dra = crate::dra::Dra::new();
        c.attach_dra(&dra);
        assert!(matches!(
            c.write_claim_status(&wanted),
            Err(WriteError::NotFound(_))
        ));
        dra.set_claim(claim.clone());
        let written = c.write_claim_status(&wanted).unwrap();
        assert_eq!(written.resource_version, "1");
        assert_eq!(*dra.claim("ml", "gpu").unwrap(), written);
        // The write is reported for the queue, once, with the claim before it.
        assert_eq!(
            c.take_storage_changes(),
            [(
                Some(Object::ResourceClaim(claim.clone())),
                Object::ResourceClaim(written.clone())
            )]
        );
        assert!(c.take_storage_changes().is_empty());
        // Written from the version before: a conflict, the claim as it was.
        let err = c.write_claim_status(&wanted).unwrap_err();
        assert!(matches!(err, WriteError::Conflict(_)), "{err:?}");
        assert!(err.to_string().contains("the object has been modified"));
        assert_eq!(dra.claim("ml", "gpu").unwrap().resource_version, "1");
    }

    #[test]
    fn refuses_a_second_binding() {
        let c = MemoryCluster::new();
        let pod = Pod {
            uid: "u".into(),
            namespace: "default".into(),
            name: "p".into(),
            ..Pod::default()
        };
        c.bind(&pod, "a").unwrap();
        let e = c.bind(&pod, "b").unwrap_err();
        assert_eq!(
            e,
            WriteError::Conflict("pod default/p is already assigned to node \"a\"".into())
        );
        assert_eq!(
            e.to_string(),
            "pod default/p is already assigned to node \"a\""
        );
        assert_eq!(c.bindings().len(), 1);
    }

    #[test]
    fn injected_refusals_fail_the_bind() {
        let c = MemoryCluster::new();
        c.refuse_bindings(Box::new(|_, node| {
            (node == "bad").then(|| "node is bad".to_owned())
        }));
        let pod = Pod::default();
        assert_eq!(
            c.bind(&pod, "bad").unwrap_err(),
            WriteError::Refused("node is bad".into())
        );
        assert!(c.bind(&pod, "good").is_ok());
    }
}
