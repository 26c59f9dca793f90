//! Pods waiting at Permit: a plugin answered Wait; the pod binds when every plugin it
//! waits for allows it, and is unreserved and requeued when one rejects it or its
//! time runs out.

use berth_sdk::WaitingPod;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where a waiting pod stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitState {
    /// Still waiting for these plugins.
    Waiting(BTreeSet<String>),
    /// Every plugin allowed it.
    Allowed,
    /// A plugin rejected it (or it timed out): the plugin and why.
    Rejected(String, String),
}

#[derive(Clone, Debug)]
struct Entry {
    namespace: String,
    name: String,
    node: String,
    pending: BTreeSet<String>,
    /// When the pod is rejected if not allowed, on the scheduler's clock.
    deadline: Duration,
    rejected: Option<(String, String)>,
}

/// The waiting pods, shared by the scheduler and the plugins' host calls.
#[derive(Clone, Debug, Default)]
pub struct WaitingPods(Arc<Mutex<BTreeMap<String, Entry>>>);

impl WaitingPods {
    /// No waiting pods.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts waiting: `plugins` must each allow the pod before `deadline`.
    pub fn add(
        &self,
        uid: &str,
        namespace: &str,
        name: &str,
        node: &str,
        plugins: BTreeSet<String>,
        deadline: Duration,
    ) {
        self.lock().insert(
            uid.to_owned(),
            Entry {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                node: node.to_owned(),
                pending: plugins,
                deadline,
                rejected: None,
            },
        );
    }

    /// Allows a waiting pod on behalf of a plugin.
    pub fn allow(&self, uid: &str, plugin: &str) {
        if let Some(e) = self.lock().get_mut(uid) {
            e.pending.remove(plugin);
        }
    }

    /// Rejects a waiting pod.
    pub fn reject(&self, uid: &str, plugin: &str, message: &str) {
        if let Some(e) = self.lock().get_mut(uid) {
            e.rejected
                .get_or_insert_with(|| (plugin.to_owned(), message.to_owned()));
        }
    }

    /// Whether the pod waits at Permit.
    pub fn contains(&self, uid: &str) -> bool {
        self.lock().contains_key(uid)
    }

    /// The waiting pods, as plugins see them.
    pub fn list(&self) -> Vec<WaitingPod> {
        self.lock()
            .iter()
            .map(|(uid, e)| WaitingPod {
                uid: uid.clone(),
                namespace: e.namespace.clone(),
                name: e.name.clone(),
                node: e.node.clone(),
                pending_plugins: e.pending.iter().cloned().collect(),
            })
            .collect()
    }

    /// How many pods wait.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no pod waits.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The earliest deadline of the waiting pods.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.lock().values().map(|e| e.deadline).min()
    }

    /// Takes out the pods whose wait ended at `now` (allowed, rejected or timed out),
    /// with how it ended.
    pub fn take_decided(&self, now: Duration) -> Vec<(String, WaitState)> {
        let mut map = self.lock();
        let decided: Vec<String> = map
            .iter()
            .filter(|(_, e)| e.rejected.is_some() || e.pending.is_empty() || e.deadline <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        decided
            .into_iter()
            .map(|uid| {
                let e = map.remove(&uid).expect("listed above");
                let state = match (e.rejected, e.pending.is_empty()) {
                    (Some((p, m)), _) => WaitState::Rejected(p, m),
                    (None, true) => WaitState::Allowed,
                    (None, false) => WaitState::Rejected(
                        e.pending.iter().cloned().collect::<Vec<_>>().join(", "),
                        "rejected due to timeout after waiting at permit".into(),
                    ),
                };
                (uid, state)
            })
            .collect()
    }

    /// Drops a pod (deleted while waiting).
    pub fn remove(&self, uid: &str) -> bool {
        self.lock().remove(uid).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugins(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_pod_is_allowed_when_every_plugin_allows_it() {
        let w = WaitingPods::new();
        w.add(
            "u",
            "ns",
            "p",
            "n1",
            plugins(&["A", "B"]),
            Duration::from_secs(10),
        );
        w.allow("u", "A");
        assert!(w.take_decided(Duration::from_secs(1)).is_empty());
        assert_eq!(w.list()[0].pending_plugins, ["B"]);
        w.allow("u", "B");
        assert_eq!(
            w.take_decided(Duration::from_secs(1)),
            [("u".into(), WaitState::Allowed)]
        );
        assert!(w.is_empty());
    }

    #[test]
    fn rejection_and_timeout_end_the_wait() {
        let w = WaitingPods::new();
        w.add(
            "a",
            "ns",
            "a",
            "n1",
            plugins(&["A"]),
            Duration::from_secs(10),
        );
        w.add(
            "b",
            "ns",
            "b",
            "n1",
            plugins(&["B"]),
            Duration::from_secs(5),
        );
        w.reject("a", "A", "group incomplete");
        let d = w.take_decided(Duration::from_secs(1));
        assert_eq!(
            d,
            [(
                "a".into(),
                WaitState::Rejected("A".into(), "group incomplete".into())
            )]
        );
        assert_eq!(w.next_deadline(), Some(Duration::from_secs(5)));
        let d = w.take_decided(Duration::from_secs(5));
        assert!(matches!(&d[0].1, WaitState::Rejected(p, m) if p == "B" && m.contains("timeout")));
    }
}
