//! Preemption's cluster side: what PostFilter decided, carried out. Nominations are
//! counted here and written to the cluster; victims are rejected at Permit or
//! evicted, off the loop when the cluster is remote.

use super::Scheduler;
use crate::framework::NominatedPods;
use berth_sdk::Pod;

impl Scheduler {
    /// Counts a pending pod's nomination (its `status.nominatedNodeName`) on that node.
    pub(super) fn nominate(&mut self, pod: &Pod) {
        self.unnominate(&pod.uid);
        if !pod.nominated_node_name.is_empty() {
            self.nominated
                .entry(pod.nominated_node_name.clone())
                .or_default()
                .push(pod.clone());
        }
    }

    pub(super) fn unnominate(&mut self, uid: &str) {
        for pods in self.nominated.values_mut() {
            pods.retain(|p| p.uid != uid);
        }
        self.nominated.retain(|_, pods| !pods.is_empty());
    }

    /// The pods nominated to each node.
    pub fn nominated(&self) -> &NominatedPods {
        &self.nominated
    }

    /// Writes a pod's nomination to the cluster, off the loop when the cluster is
    /// remote.
    pub(super) fn write_nomination(&self, pod: &Pod, node: &str) {
        let binder = self.binder.clone();
        let pod = pod.clone();
        let node = node.to_owned();
        let write = move || {
            if let Err(e) = binder.nominate(&pod, &node) {
                tracing::warn!(pod = %pod.key(), node, "cannot write nominatedNodeName: {e}");
            }
        };
        if self.binder.reports_deletions() {
            std::thread::spawn(write);
        } else {
            write();
        }
    }

    /// Carries out a preemption PostFilter decided (upstream's `prepareCandidate`):
    /// the preemptor is nominated to `node`, pods of lower priority nominated there
    /// lose their nomination, victims waiting at Permit are rejected and the others
    /// evicted. Against a remote cluster the API calls run on their own thread, so
    /// the loop goes on; the embedded cluster evicts at once and the victims leave
    /// the cache here (its cluster has no watch to report them).
    pub(super) fn preempt(&mut self, preemptor: &Pod, node: &str, victims: Vec<Pod>) {
        self.metrics.observe_preemption_victims(victims.len());
        tracing::debug!(
            pod = %preemptor.key(),
            node,
            victims = victims.len(),
            "preempting"
        );
        let lower: Vec<Pod> = self
            .nominated
            .get(node)
            .map(|pods| {
                pods.iter()
                    .filter(|p| p.priority < preemptor.priority && p.uid != preemptor.uid)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for p in &lower {
            let mut cleared = p.clone();
            cleared.nominated_node_name.clear();
            if let Err(e) = self.update_pod(cleared) {
                tracing::warn!(pod = %p.key(), "clearing the nomination: {e}");
            }
        }
        let mut evict = Vec::new();
        for v in victims {
            if self.waiting.contains(&v.uid) {
                self.waiting
                    .reject(&v.uid, "DefaultPreemption", "preempted");
                self.recorder.preempted(&v, preemptor, node);
            } else if !v.terminating {
                evict.push(v);
            }
        }
        let message = format!(
            "{}: preempting to accommodate a higher priority pod",
            preemptor.scheduler_name
        );
        let binder = self.binder.clone();
        let recorder = self.recorder.clone();
        let (pod, node_name) = (preemptor.clone(), node.to_owned());
        let work = move || {
            if let Err(e) = binder.nominate(&pod, &node_name) {
                tracing::warn!(pod = %pod.key(), node = node_name, "cannot write nominatedNodeName: {e}");
            }
            for p in &lower {
                if let Err(e) = binder.nominate(p, "") {
                    tracing::warn!(pod = %p.key(), "cannot clear nominatedNodeName: {e}");
                }
            }
            // As upstream: once one eviction fails the preemption cannot succeed, so
            // the remaining victims are spared and the preemptor is retried at once.
            let mut evicted = Vec::new();
            for v in &evict {
                if let Err(e) = binder.evict(v, &pod, &message) {
                    tracing::warn!(pod = %pod.key(), victim = %v.key(), "cannot evict, the preemptor will try again: {e}");
                    return (evicted, false);
                }
                recorder.preempted(v, &pod, &node_name);
                evicted.push(v.uid.clone());
            }
            (evicted, true)
        };
        if self.binder.reports_deletions() {
            let activate = self.activate_tx.clone();
            let waker = self.waker.clone();
            let uid = preemptor.uid.clone();
            std::thread::spawn(move || {
                if !work().1
                    && activate.send(uid).is_ok()
                    && let Some(w) = &*waker.read().unwrap_or_else(|e| e.into_inner())
                {
                    w();
                }
            });
        } else {
            let (evicted, all) = work();
            for uid in evicted {
                self.delete_pod(&uid);
            }
            if !all {
                self.queue.activate(&preemptor.uid);
            }
        }
    }
}
