//! CycleState: per-cycle data written by plugins, kept in the host.
//!
//! Plugins see it through the `cycle-state` resource handle, so every worker instance
//! and the binding cycle read the same values; preemption can clone it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The state of one scheduling cycle: bytes by key, shared by reference.
#[derive(Clone, Default, Debug)]
pub struct CycleState {
    values: Arc<RwLock<HashMap<String, Vec<u8>>>>,
    /// Whether this cycle's plugin durations are recorded (a sample of the cycles, as
    /// upstream records `scheduler_plugin_execution_duration_seconds`).
    sampled: bool,
    /// Which plugins of the profile take part in the pod's cycles, by plugin index,
    /// decided once when the scheduling attempt starts and kept by its binding
    /// cycle (so that a plugin left out of Reserve is left out of Unreserve too).
    participants: Option<Arc<[bool]>>,
}

/// The prefix of the CycleState keys only the host writes.
pub const HOST_KEY_PREFIX: &str = "berth.dev/";

/// The share of scheduling cycles whose plugin durations are recorded (upstream's
/// 10 percent).
pub const PLUGIN_METRICS_SAMPLE_PERCENT: u32 = 10;

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty state whose plugin durations are recorded with the sampling
    /// probability (see [`PLUGIN_METRICS_SAMPLE_PERCENT`]).
    pub fn sampled() -> Self {
        CycleState {
            sampled: rand::random_range(0..100) < PLUGIN_METRICS_SAMPLE_PERCENT,
            ..CycleState::default()
        }
    }

    /// Whether this cycle's plugin durations are recorded.
    pub fn records_plugin_metrics(&self) -> bool {
        self.sampled
    }

    /// The state with the plugins that take part in the pod's cycles.
    pub fn with_participants(mut self, participants: Arc<[bool]>) -> Self {
        self.participants = Some(participants);
        self
    }

    /// Whether plugin `i` of the profile takes part; `None` when the state was made
    /// without the decision.
    pub fn takes_part(&self, i: usize) -> Option<bool> {
        self.participants.as_ref().and_then(|p| p.get(i).copied())
    }

    /// The bytes under `key`.
    pub fn read(&self, key: &str) -> Option<Vec<u8>> {
        self.values
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// Whether a plugin may write or delete `key`: not under `berth.dev/`, the
    /// host's own (the placement a cycle runs within, [`berth_sdk::PLACEMENT_NODES`]).
    pub fn writable_by_plugins(key: &str) -> bool {
        !key.starts_with(HOST_KEY_PREFIX)
    }

    /// Stores bytes under `key`.
    pub fn write(&self, key: &str, value: Vec<u8>) {
        self.values
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_owned(), value);
    }

    /// Removes `key`.
    pub fn delete(&self, key: &str) {
        self.values
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// An independent copy (what preemption simulates on).
    pub fn deep_clone(&self) -> Self {
        let map = self
            .values
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        CycleState {
            values: Arc::new(RwLock::new(map)),
            sampled: self.sampled,
            participants: self.participants.clone(),
        }
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
    fn plugins_may_not_write_the_host_s_keys() {
        assert!(CycleState::writable_by_plugins(
            "NodeResourcesFit/preFilter"
        ));
        assert!(!CycleState::writable_by_plugins(
            berth_sdk::PLACEMENT_NODES.name()
        ));
    }

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
