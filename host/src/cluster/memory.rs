//! The embedded cluster: in-process bookkeeping of bindings, for `berth simulate`,
//! `berth bench` and tests. Like the API server, it refuses to bind a pod twice.

use super::{Binder, PodState};
use berth_sdk::Pod;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Decides whether the cluster refuses a binding (tests inject failures with it).
pub type RefuseFn = dyn Fn(&Pod, &str) -> Option<String> + Send + Sync;

/// The embedded cluster's binding side.
#[derive(Default)]
pub struct MemoryCluster {
    bindings: Mutex<BTreeMap<String, (String, String)>>,
    refuse: Mutex<Option<Box<RefuseFn>>>,
    evictions: Mutex<Vec<Eviction>>,
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
    fn evict(&self, victim: &Pod, preemptor: &Pod, message: &str) -> Result<(), String> {
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

    fn bind(&self, pod: &Pod, node: &str) -> Result<(), String> {
        if let Some(refuse) = &*self.refuse.lock().unwrap_or_else(|e| e.into_inner())
            && let Some(message) = refuse(pod, node)
        {
            return Err(message);
        }
        let mut bindings = self.bindings.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, bound)) = bindings.get(&pod.uid) {
            // As the API server answers 409 Conflict.
            return Err(format!(
                "pod {} is already assigned to node {bound:?}",
                pod.key()
            ));
        }
        bindings.insert(pod.uid.clone(), (pod.key(), node.to_owned()));
        Ok(())
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
        assert_eq!(e, "pod default/p is already assigned to node \"a\"");
        assert_eq!(c.bindings().len(), 1);
    }

    #[test]
    fn injected_refusals_fail_the_bind() {
        let c = MemoryCluster::new();
        c.refuse_bindings(Box::new(|_, node| {
            (node == "bad").then(|| "node is bad".to_owned())
        }));
        let pod = Pod::default();
        assert_eq!(c.bind(&pod, "bad").unwrap_err(), "node is bad");
        assert!(c.bind(&pod, "good").is_ok());
    }
}
