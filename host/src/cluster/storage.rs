//! The storage objects of the cluster — PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses, CSINodes, CSIDrivers — shared with plugin instances, which read
//! them through the host's listers (by name, and PersistentVolumes by class).

use berth_sdk::{CsiDriver, CsiNode, PersistentVolume, PersistentVolumeClaim, StorageClass};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

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
}

/// The cluster's storage objects. Clones share them.
#[derive(Clone, Debug, Default)]
pub struct Storage(Arc<RwLock<Objects>>);

impl Storage {
    /// No objects.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Objects> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Objects> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A claim by namespace and name.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<PersistentVolumeClaim> {
        self.read()
            .claims
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Adds or replaces a claim; answers the one it replaced.
    pub fn set_claim(&self, claim: PersistentVolumeClaim) -> Option<PersistentVolumeClaim> {
        self.write()
            .claims
            .insert((claim.namespace.clone(), claim.name.clone()), claim)
    }

    /// Removes a claim; answers it.
    pub fn remove_claim(&self, namespace: &str, name: &str) -> Option<PersistentVolumeClaim> {
        self.write()
            .claims
            .remove(&(namespace.to_owned(), name.to_owned()))
    }

    /// A volume by name.
    pub fn volume(&self, name: &str) -> Option<PersistentVolume> {
        self.read().volumes.get(name).cloned()
    }

    /// The volumes of a class, by name.
    pub fn volumes_of_class(&self, class: &str) -> Vec<PersistentVolume> {
        let objects = self.read();
        objects
            .volumes_by_class
            .get(class)
            .into_iter()
            .flatten()
            .filter_map(|n| objects.volumes.get(n).cloned())
            .collect()
    }

    /// Adds or replaces a volume; answers the one it replaced.
    pub fn set_volume(&self, volume: PersistentVolume) -> Option<PersistentVolume> {
        let mut objects = self.write();
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

    /// How many objects of each kind there are, by kind (for logs and tests).
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let o = self.read();
        BTreeMap::from([
            ("PersistentVolumeClaim", o.claims.len()),
            ("PersistentVolume", o.volumes.len()),
            ("StorageClass", o.classes.len()),
            ("CSINode", o.csi_nodes.len()),
            ("CSIDriver", o.csi_drivers.len()),
        ])
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
