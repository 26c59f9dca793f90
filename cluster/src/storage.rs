//! The storage objects of the cluster — PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses, CSINodes, CSIDrivers — shared with plugin instances, which read
//! them through the host's listers (by name, and PersistentVolumes by class).

use berth_sdk::{
    ANNOTATION_BOUND_BY_CONTROLLER, ANNOTATION_SELECTED_NODE, ClaimRef, CsiDriver, CsiNode,
    CsiStorageCapacity, PersistentVolume, PersistentVolumeClaim, StorageClass,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Objects {
    /// By (namespace, name).
    claims: HashMap<(String, String), PersistentVolumeClaim>,
    /// By name.
    volumes: HashMap<String, PersistentVolume>,
    /// Volume names by `storageClassName` (the empty name: no class).
    volumes_by_class: HashMap<String, BTreeSet<String>>,
    classes: HashMap<String, StorageClass>,
    csi_nodes: HashMap<String, CsiNode>,
    csi_drivers: HashMap<String, CsiDriver>,
    /// By (namespace, name).
    capacities: HashMap<(String, String), CsiStorageCapacity>,
    /// Volumes as VolumeBinding assumes them (bound to a claim) until the cluster's
    /// copy changes or the assumption is restored; they hide the cluster's copy.
    assumed_volumes: HashMap<String, PersistentVolume>,
    /// Claims as VolumeBinding assumes them (a node selected for provisioning).
    assumed_claims: HashMap<(String, String), PersistentVolumeClaim>,
}

#[derive(Debug, Default)]
struct Shared {
    objects: RwLock<Objects>,
    /// Grows at every change (assumptions included); waiters are told.
    signal: ChangeSignal,
}

/// Called on the thread of a wait that is about to block; what it answers is
/// dropped when the wait ends. A pool of worker threads uses it to let another
/// thread run its jobs meanwhile.
pub type BlockingHook = Arc<dyn Fn() -> Box<dyn std::any::Any> + Send + Sync>;

#[derive(Debug, Default)]
struct Waits {
    generation: u64,
    /// Pods deleted while their binding cycle may wait here: their waits end at
    /// once (upstream's `checkBindings` stops when the pod is gone).
    ended: BTreeSet<String>,
}

/// How a wait for a change ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitEnd {
    /// The generation then.
    pub generation: u64,
    /// How long it waited.
    pub waited: Duration,
    /// The pod it waited for was deleted: nothing it waits for matters any more.
    pub pod_gone: bool,
}

/// A generation that grows at every change of a view, and the binding cycles
/// waiting for it to grow: the storage view's, and the DRA view's claims'
/// (`cluster::dra`).
#[derive(Default)]
pub struct ChangeSignal {
    waits: Mutex<Waits>,
    changed: Condvar,
    /// Told when a wait is about to block its thread (see
    /// [`ChangeSignal::on_blocking`]).
    blocking: RwLock<Option<BlockingHook>>,
}

impl std::fmt::Debug for ChangeSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeSignal")
            .field("waits", &self.waits)
            .finish_non_exhaustive()
    }
}

impl ChangeSignal {
    fn waits(&self) -> std::sync::MutexGuard<'_, Waits> {
        self.waits.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The generation now.
    pub fn generation(&self) -> u64 {
        self.waits().generation
    }

    /// A change was made: the generation grows and waiters wake.
    pub fn bump(&self) {
        self.waits().generation += 1;
        self.changed.notify_all();
    }

    /// The pod `uid` was deleted during its binding cycle: its waits end now, and any
    /// it starts end at once, until [`ChangeSignal::forget_pod`].
    pub fn end_waits_of(&self, uid: &str) {
        self.waits().ended.insert(uid.to_owned());
        self.changed.notify_all();
    }

    /// The binding cycle of `uid` is over: forget that its waits ended.
    pub fn forget_pod(&self, uid: &str) {
        self.waits().ended.remove(uid);
    }

    /// Tells `hook` of every wait that blocks its thread, from now on.
    pub fn on_blocking(&self, hook: BlockingHook) {
        *self.blocking.write().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Waits until the generation passes `after`, `timeout` passes, or the pod
    /// `for_pod` (the binding cycle's) is deleted.
    pub fn wait_for_change(&self, after: u64, timeout: Duration, for_pod: Option<&str>) -> WaitEnd {
        let started = Instant::now();
        let mut waits = self.waits();
        // Held (and dropped when the wait ends) once the wait blocks.
        let mut blocked: Option<Box<dyn std::any::Any>> = None;
        loop {
            let pod_gone = for_pod.is_some_and(|uid| waits.ended.contains(uid));
            let left = timeout.saturating_sub(started.elapsed());
            if waits.generation > after || pod_gone || left.is_zero() {
                return WaitEnd {
                    generation: waits.generation,
                    waited: started.elapsed(),
                    pod_gone,
                };
            }
            if blocked.is_none() {
                let hook = self
                    .blocking
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                // Not under the lock: the hook may start a thread.
                drop(waits);
                blocked =
                    Some(hook.map_or_else(|| Box::new(()) as Box<dyn std::any::Any>, |h| h()));
                waits = self.waits();
                continue;
            }
            waits = self
                .changed
                .wait_timeout(waits, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// The cluster's storage objects. Clones share them.
#[derive(Clone, Debug, Default)]
pub struct Storage(Arc<Shared>);

/// Why the scheduler's view of the storage objects could not assume a change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssumeError {
    /// The volume or claim is not in the view.
    #[error("{0}")]
    NotFound(String),
    /// The volume is bound to another claim.
    #[error("{0}")]
    Taken(String),
}

impl Storage {
    /// No objects.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Objects> {
        self.0.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The objects, to change: the generation grows when the guard drops.
    fn write(&self) -> Changing<'_> {
        Changing {
            objects: self.0.objects.write().unwrap_or_else(|e| e.into_inner()),
            shared: &self.0,
        }
    }

    /// A number that grows at every change.
    pub fn generation(&self) -> u64 {
        self.0.signal.generation()
    }

    /// The pod `uid` was deleted during its binding cycle: its waits end now, and any
    /// it starts end at once, until [`Storage::forget_pod`].
    pub fn end_waits_of(&self, uid: &str) {
        self.0.signal.end_waits_of(uid);
    }

    /// The binding cycle of `uid` is over: forget that its waits ended.
    pub fn forget_pod(&self, uid: &str) {
        self.0.signal.forget_pod(uid);
    }

    /// Tells `hook` of every wait that blocks its thread, from now on.
    pub fn on_blocking(&self, hook: BlockingHook) {
        self.0.signal.on_blocking(hook);
    }

    /// Waits until the generation passes `after`, `timeout` passes, or the pod
    /// `for_pod` (the binding cycle's) is deleted.
    pub fn wait_for_change(&self, after: u64, timeout: Duration, for_pod: Option<&str>) -> WaitEnd {
        self.0.signal.wait_for_change(after, timeout, for_pod)
    }

    /// A claim by namespace and name (as assumed, if it is).
    pub fn claim(&self, namespace: &str, name: &str) -> Option<PersistentVolumeClaim> {
        let key = (namespace.to_owned(), name.to_owned());
        let objects = self.read();
        objects
            .assumed_claims
            .get(&key)
            .or_else(|| objects.claims.get(&key))
            .cloned()
    }

    /// Adds or replaces a claim; answers the one it replaced. What was assumed of it
    /// is dropped: the cluster's copy is newer.
    pub fn set_claim(&self, claim: PersistentVolumeClaim) -> Option<PersistentVolumeClaim> {
        let key = (claim.namespace.clone(), claim.name.clone());
        let mut objects = self.write();
        objects.assumed_claims.remove(&key);
        objects.claims.insert(key, claim)
    }

    /// Removes a claim; answers it.
    pub fn remove_claim(&self, namespace: &str, name: &str) -> Option<PersistentVolumeClaim> {
        let key = (namespace.to_owned(), name.to_owned());
        let mut objects = self.write();
        objects.assumed_claims.remove(&key);
        objects.claims.remove(&key)
    }

    /// A volume by name (as assumed, if it is).
    pub fn volume(&self, name: &str) -> Option<PersistentVolume> {
        let objects = self.read();
        objects
            .assumed_volumes
            .get(name)
            .or_else(|| objects.volumes.get(name))
            .cloned()
    }

    /// The volumes of a class, by name (as assumed, where they are).
    pub fn volumes_of_class(&self, class: &str) -> Vec<PersistentVolume> {
        let objects = self.read();
        objects
            .volumes_by_class
            .get(class)
            .into_iter()
            .flatten()
            .filter_map(|n| {
                objects
                    .assumed_volumes
                    .get(n)
                    .or_else(|| objects.volumes.get(n))
                    .cloned()
            })
            .collect()
    }

    /// A volume as the cluster has it (what is assumed of it aside).
    pub fn cluster_volume(&self, name: &str) -> Option<PersistentVolume> {
        self.read().volumes.get(name).cloned()
    }

    /// A claim as the cluster has it (what is assumed of it aside).
    pub fn cluster_claim(&self, namespace: &str, name: &str) -> Option<PersistentVolumeClaim> {
        self.read()
            .claims
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Assumes `volume` bound to `claim` until the cluster's copy changes or
    /// [`Storage::restore_volume`]: its `claimRef` set and annotated as bound by the
    /// controller (upstream's `GetBindVolumeToClaim`). An error when the volume is
    /// unknown or taken by another claim.
    pub fn assume_volume_bound(&self, volume: &str, claim: &ClaimRef) -> Result<(), AssumeError> {
        let mut objects = self.write();
        let Some(current) = objects
            .assumed_volumes
            .get(volume)
            .or_else(|| objects.volumes.get(volume))
        else {
            return Err(AssumeError::NotFound(format!(
                "persistentvolume {volume:?} not found"
            )));
        };
        if let Some(taken) = &current.claim_ref
            && !claim_ref_matches(taken, claim)
        {
            return Err(AssumeError::Taken(format!(
                "persistentvolume {volume:?} is already bound to claim {}/{}",
                taken.namespace, taken.name
            )));
        }
        let mut assumed = current.clone();
        assumed.claim_ref = Some(claim.clone());
        assumed
            .annotations
            .insert(ANNOTATION_BOUND_BY_CONTROLLER.into(), "yes".into());
        objects.assumed_volumes.insert(volume.to_owned(), assumed);
        Ok(())
    }

    /// Assumes the claim annotated with the node its volume is to be provisioned for.
    pub fn assume_claim_provisioned(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<(), AssumeError> {
        let key = (namespace.to_owned(), name.to_owned());
        let mut objects = self.write();
        let Some(current) = objects
            .assumed_claims
            .get(&key)
            .or_else(|| objects.claims.get(&key))
        else {
            return Err(AssumeError::NotFound(format!(
                "persistentvolumeclaim {namespace}/{name} not found"
            )));
        };
        let mut assumed = current.clone();
        assumed
            .annotations
            .insert(ANNOTATION_SELECTED_NODE.into(), node.to_owned());
        objects.assumed_claims.insert(key, assumed);
        Ok(())
    }

    /// Drops what was assumed of a volume.
    pub fn restore_volume(&self, name: &str) {
        self.write().assumed_volumes.remove(name);
    }

    /// Drops what was assumed of a claim.
    pub fn restore_claim(&self, namespace: &str, name: &str) {
        self.write()
            .assumed_claims
            .remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// How many volumes and claims are assumed (for tests: nothing may leak).
    pub fn assumed(&self) -> (usize, usize) {
        let objects = self.read();
        (objects.assumed_volumes.len(), objects.assumed_claims.len())
    }

    /// Adds or replaces a volume; answers the one it replaced. What was assumed of it
    /// is dropped: the cluster's copy is newer.
    pub fn set_volume(&self, volume: PersistentVolume) -> Option<PersistentVolume> {
        let mut objects = self.write();
        objects.assumed_volumes.remove(&volume.name);
        let old = objects.volumes.insert(volume.name.clone(), volume.clone());
        if let Some(o) = &old {
            unindex(
                &mut objects.volumes_by_class,
                &o.storage_class_name,
                &o.name,
            );
        }
        objects
            .volumes_by_class
            .entry(volume.storage_class_name.clone())
            .or_default()
            .insert(volume.name);
        old
    }

    /// Removes a volume; answers it.
    pub fn remove_volume(&self, name: &str) -> Option<PersistentVolume> {
        let mut objects = self.write();
        objects.assumed_volumes.remove(name);
        let old = objects.volumes.remove(name);
        if let Some(o) = &old {
            unindex(
                &mut objects.volumes_by_class,
                &o.storage_class_name,
                &o.name,
            );
        }
        old
    }

    /// A StorageClass by name.
    pub fn class(&self, name: &str) -> Option<StorageClass> {
        self.read().classes.get(name).cloned()
    }

    /// The default StorageClass (annotated `is-default-class`), as the
    /// DefaultStorageClass admission plugin picks it for a new claim that names no
    /// class; of several defaults, the first by name (upstream takes the newest,
    /// which the embedded cluster does not know).
    pub fn default_class(&self) -> Option<StorageClass> {
        self.read()
            .classes
            .values()
            .filter(|c| c.is_default)
            .min_by(|a, b| a.name.cmp(&b.name))
            .cloned()
    }

    /// Adds or replaces a StorageClass; answers the one it replaced.
    pub fn set_class(&self, class: StorageClass) -> Option<StorageClass> {
        self.write().classes.insert(class.name.clone(), class)
    }

    /// Removes a StorageClass; answers it.
    pub fn remove_class(&self, name: &str) -> Option<StorageClass> {
        self.write().classes.remove(name)
    }

    /// A CSINode by name.
    pub fn csi_node(&self, name: &str) -> Option<CsiNode> {
        self.read().csi_nodes.get(name).cloned()
    }

    /// Adds or replaces a CSINode; answers the one it replaced.
    pub fn set_csi_node(&self, node: CsiNode) -> Option<CsiNode> {
        self.write().csi_nodes.insert(node.name.clone(), node)
    }

    /// Removes a CSINode; answers it.
    pub fn remove_csi_node(&self, name: &str) -> Option<CsiNode> {
        self.write().csi_nodes.remove(name)
    }

    /// A CSIDriver by name.
    pub fn csi_driver(&self, name: &str) -> Option<CsiDriver> {
        self.read().csi_drivers.get(name).cloned()
    }

    /// Adds or replaces a CSIDriver; answers the one it replaced.
    pub fn set_csi_driver(&self, driver: CsiDriver) -> Option<CsiDriver> {
        self.write().csi_drivers.insert(driver.name.clone(), driver)
    }

    /// Removes a CSIDriver; answers it.
    pub fn remove_csi_driver(&self, name: &str) -> Option<CsiDriver> {
        self.write().csi_drivers.remove(name)
    }

    /// The CSIStorageCapacities of a StorageClass, by namespace and name.
    pub fn capacities_of_class(&self, class: &str) -> Vec<CsiStorageCapacity> {
        let mut of: Vec<CsiStorageCapacity> = self
            .read()
            .capacities
            .values()
            .filter(|c| c.storage_class_name == class)
            .cloned()
            .collect();
        of.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        of
    }

    /// Adds or replaces a CSIStorageCapacity; answers the one it replaced.
    pub fn set_capacity(&self, capacity: CsiStorageCapacity) -> Option<CsiStorageCapacity> {
        let key = (capacity.namespace.clone(), capacity.name.clone());
        self.write().capacities.insert(key, capacity)
    }

    /// Removes a CSIStorageCapacity; answers it.
    pub fn remove_capacity(&self, namespace: &str, name: &str) -> Option<CsiStorageCapacity> {
        self.write()
            .capacities
            .remove(&(namespace.to_owned(), name.to_owned()))
    }

    /// How many objects of each kind there are, by kind (for logs and tests).
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let o = self.read();
        BTreeMap::from([
            ("PersistentVolumeClaim", o.claims.len()),
            ("PersistentVolume", o.volumes.len()),
            ("StorageClass", o.classes.len()),
            ("CSINode", o.csi_nodes.len()),
            ("CSIDriver", o.csi_drivers.len()),
            ("CSIStorageCapacity", o.capacities.len()),
        ])
    }
}

/// Whether a volume's `claimRef` names the claim (by UID too, when both have one), as
/// upstream's `IsVolumeBoundToClaim`.
pub fn claim_ref_matches(taken: &ClaimRef, claim: &ClaimRef) -> bool {
    taken.namespace == claim.namespace
        && taken.name == claim.name
        && (taken.uid.is_empty() || taken.uid == claim.uid)
}

/// The objects being changed; when dropped, the generation grows and waiters wake.
struct Changing<'a> {
    objects: RwLockWriteGuard<'a, Objects>,
    shared: &'a Shared,
}

impl std::ops::Deref for Changing<'_> {
    type Target = Objects;
    fn deref(&self) -> &Objects {
        &self.objects
    }
}

impl std::ops::DerefMut for Changing<'_> {
    fn deref_mut(&mut self) -> &mut Objects {
        &mut self.objects
    }
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        self.shared.signal.bump();
    }
}

fn unindex(index: &mut HashMap<String, BTreeSet<String>>, class: &str, name: &str) {
    if let Some(set) = index.get_mut(class) {
        set.remove(name);
        if set.is_empty() {
            index.remove(class);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(name: &str, class: &str) -> PersistentVolume {
        PersistentVolume {
            name: name.into(),
            storage_class_name: class.into(),
            ..PersistentVolume::default()
        }
    }

    #[test]
    fn volumes_are_indexed_by_class() {
        let s = Storage::new();
        assert!(s.set_volume(pv("b", "fast")).is_none());
        s.set_volume(pv("a", "fast"));
        s.set_volume(pv("c", ""));
        let names = |class: &str| -> Vec<String> {
            s.volumes_of_class(class)
                .into_iter()
                .map(|v| v.name)
                .collect()
        };
        assert_eq!(names("fast"), ["a", "b"]);
        assert_eq!(names(""), ["c"]);
        // A volume that changes class moves in the index.
        let old = s.set_volume(pv("a", "slow")).unwrap();
        assert_eq!(old.storage_class_name, "fast");
        assert_eq!(names("fast"), ["b"]);
        assert_eq!(names("slow"), ["a"]);
        assert!(s.remove_volume("b").is_some());
        assert!(names("fast").is_empty());
        assert!(s.volume("b").is_none());
        assert_eq!(s.counts()["PersistentVolume"], 2);
    }

    #[test]
    fn claims_are_kept_by_namespace_and_name() {
        let s = Storage::new();
        let claim = |ns: &str, name: &str| PersistentVolumeClaim {
            namespace: ns.into(),
            name: name.into(),
            ..PersistentVolumeClaim::default()
        };
        s.set_claim(claim("a", "data"));
        s.set_claim(claim("b", "data"));
        assert!(s.claim("a", "data").is_some());
        assert!(s.claim("c", "data").is_none());
        assert!(s.remove_claim("a", "data").is_some());
        assert!(s.claim("a", "data").is_none());
        assert!(s.claim("b", "data").is_some());
    }
}
