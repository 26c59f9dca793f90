//! The storage objects' bookkeeping: each PersistentVolumeClaim, PersistentVolume,
//! StorageClass, CSINode, CSIDriver and CSIStorageCapacity change updates the storage view the volume
//! plugins read, and tells the queue, which may retry the pods they rejected.

use super::Scheduler;
use berth_cluster::storage::Storage;
use berth_sdk::{
    ActionType, ClusterEvent, CsiDriver, CsiNode, CsiStorageCapacity, EventResource, Object,
    PersistentVolume, PersistentVolumeClaim, StorageClass,
};

impl Scheduler {
    /// The cluster's storage objects, as plugins read them.
    pub fn storage(&self) -> &Storage {
        &self.cluster.storage
    }

    /// A storage object appeared (`old` none) or changed: the event that may make
    /// pods the volume plugins rejected schedulable.
    pub(super) fn storage_event(
        &mut self,
        resource: EventResource,
        old: Option<Object>,
        new: Object,
    ) {
        let actions = if old.is_some() {
            ActionType::UPDATE_OTHER
        } else {
            ActionType::ADD
        };
        self.event(ClusterEvent::new(resource, actions), old, Some(new));
    }

    fn storage_deleted(&mut self, resource: EventResource, old: Option<Object>) {
        if old.is_some() {
            self.event(ClusterEvent::new(resource, ActionType::DELETE), old, None);
        }
    }

    /// A PersistentVolumeClaim appeared or changed.
    pub fn add_or_update_claim(&mut self, claim: PersistentVolumeClaim) {
        let old = self.cluster.storage.set_claim(claim.clone());
        self.storage_event(
            EventResource::PersistentVolumeClaim,
            old.map(Object::PersistentVolumeClaim),
            Object::PersistentVolumeClaim(claim),
        );
    }

    /// A PersistentVolumeClaim is gone.
    pub fn remove_claim(&mut self, namespace: &str, name: &str) {
        let old = self.cluster.storage.remove_claim(namespace, name);
        self.storage_deleted(
            EventResource::PersistentVolumeClaim,
            old.map(Object::PersistentVolumeClaim),
        );
    }

    /// A PersistentVolume appeared or changed.
    pub fn add_or_update_volume(&mut self, volume: PersistentVolume) {
        let old = self.cluster.storage.set_volume(volume.clone());
        self.storage_event(
            EventResource::PersistentVolume,
            old.map(Object::PersistentVolume),
            Object::PersistentVolume(volume),
        );
    }

    /// A PersistentVolume is gone.
    pub fn remove_volume(&mut self, name: &str) {
        let old = self.cluster.storage.remove_volume(name);
        self.storage_deleted(
            EventResource::PersistentVolume,
            old.map(Object::PersistentVolume),
        );
    }

    /// A StorageClass appeared or changed.
    pub fn add_or_update_storage_class(&mut self, class: StorageClass) {
        let old = self.cluster.storage.set_class(class.clone());
        self.storage_event(
            EventResource::StorageClass,
            old.map(Object::StorageClass),
            Object::StorageClass(class),
        );
    }

    /// A StorageClass is gone.
    pub fn remove_storage_class(&mut self, name: &str) {
        let old = self.cluster.storage.remove_class(name);
        self.storage_deleted(EventResource::StorageClass, old.map(Object::StorageClass));
    }

    /// A CSINode appeared or changed.
    pub fn add_or_update_csi_node(&mut self, node: CsiNode) {
        let old = self.cluster.storage.set_csi_node(node.clone());
        self.storage_event(
            EventResource::CsiNode,
            old.map(Object::CsiNode),
            Object::CsiNode(node),
        );
    }

    /// A CSINode is gone.
    pub fn remove_csi_node(&mut self, name: &str) {
        let old = self.cluster.storage.remove_csi_node(name);
        self.storage_deleted(EventResource::CsiNode, old.map(Object::CsiNode));
    }

    /// A CSIDriver appeared or changed.
    pub fn add_or_update_csi_driver(&mut self, driver: CsiDriver) {
        let old = self.cluster.storage.set_csi_driver(driver.clone());
        self.storage_event(
            EventResource::CsiDriver,
            old.map(Object::CsiDriver),
            Object::CsiDriver(driver),
        );
    }

    /// A CSIDriver is gone.
    pub fn remove_csi_driver(&mut self, name: &str) {
        let old = self.cluster.storage.remove_csi_driver(name);
        self.storage_deleted(EventResource::CsiDriver, old.map(Object::CsiDriver));
    }

    /// A CSIStorageCapacity appeared or changed.
    pub fn add_or_update_storage_capacity(&mut self, capacity: CsiStorageCapacity) {
        let old = self.cluster.storage.set_capacity(capacity.clone());
        self.storage_event(
            EventResource::CsiStorageCapacity,
            old.map(Object::CsiStorageCapacity),
            Object::CsiStorageCapacity(capacity),
        );
    }

    /// A CSIStorageCapacity is gone.
    pub fn remove_storage_capacity(&mut self, namespace: &str, name: &str) {
        let old = self.cluster.storage.remove_capacity(namespace, name);
        self.storage_deleted(
            EventResource::CsiStorageCapacity,
            old.map(Object::CsiStorageCapacity),
        );
    }
}
