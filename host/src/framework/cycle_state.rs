//! CycleState: per-cycle data written by plugins, kept in the host.
//!
//! Plugins see it through the `cycle-state` resource handle, so every worker instance
//! and the binding cycle read the same values; preemption can clone it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The state of one scheduling cycle: bytes by key, shared by reference.
#[derive(Clone, Default, Debug)]
pub struct CycleState(Arc<RwLock<HashMap<String, Vec<u8>>>>);

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes under `key`.
    pub fn read(&self, key: &str) -> Option<Vec<u8>> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// Stores bytes under `key`.
    pub fn write(&self, key: &str, value: Vec<u8>) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_owned(), value);
    }

    /// Removes `key`.
    pub fn delete(&self, key: &str) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// An independent copy (what preemption simulates on).
    pub fn deep_clone(&self) -> Self {
        let map = self.0.read().unwrap_or_else(|e| e.into_inner()).clone();
        CycleState(Arc::new(RwLock::new(map)))
    }
}

impl berth_sdk::StateStore for CycleState {
    fn read(&self, key: &str) -> Option<Vec<u8>> {
        CycleState::read(self, key)
    }
    fn write(&self, key: &str, value: &[u8]) {
        CycleState::write(self, key, value.to_vec())
    }
    fn delete(&self, key: &str) {
        CycleState::delete(self, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_and_deep_clones_do_not() {
        let a = CycleState::new();
        a.write("k", vec![1]);
        let shared = a.clone();
        let copy = a.deep_clone();
        a.write("k", vec![2]);
        assert_eq!(shared.read("k"), Some(vec![2]));
        assert_eq!(copy.read("k"), Some(vec![1]));
        a.delete("k");
        assert_eq!(shared.read("k"), None);
    }
}
