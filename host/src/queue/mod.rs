//! The scheduling queue: activeQ ordered by the QueueSort plugin's key, and the pods
//! that were found unschedulable.
//!
//! QueueSort runs once per pod, when it is enqueued: the plugin turns the pod into a
//! key and the heap compares keys natively, so no heap comparison calls into wasm.

use berth_sdk::Pod;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// A pod waiting in the queue, with what the queue knows of its attempts.
#[derive(Clone, Debug)]
pub struct QueuedPod {
    /// The pod.
    pub pod: Pod,
    /// The QueueSort key (lower pops first).
    pub key: Vec<i64>,
    /// How many scheduling attempts the pod has had.
    pub attempts: u32,
    /// Enqueue order; breaks ties between equal keys (earlier first).
    pub seq: u64,
    /// The message of the last failed attempt.
    pub last_failure: Option<String>,
}

/// activeQ and the unschedulable pods.
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    heap: BinaryHeap<Reverse<(Vec<i64>, u64, String)>>,
    active: HashMap<String, QueuedPod>,
    unschedulable: HashMap<String, QueuedPod>,
    next_seq: u64,
}

impl SchedulingQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a new pending pod to activeQ with its sort key.
    pub fn add(&mut self, pod: Pod, key: Vec<i64>) {
        self.next_seq += 1;
        let qp = QueuedPod {
            pod,
            key,
            attempts: 0,
            seq: self.next_seq,
            last_failure: None,
        };
        self.push_active(qp);
    }

    fn push_active(&mut self, qp: QueuedPod) {
        let uid = qp.pod.uid.clone();
        self.heap
            .push(Reverse((qp.key.clone(), qp.seq, uid.clone())));
        self.active.insert(uid, qp);
    }

    /// Takes the pod that sorts first out of activeQ.
    pub fn pop(&mut self) -> Option<QueuedPod> {
        while let Some(Reverse((_, seq, uid))) = self.heap.pop() {
            // Entries of pods removed or re-added since are stale; skip them.
            if self.active.get(&uid).is_some_and(|q| q.seq == seq) {
                let mut qp = self.active.remove(&uid)?;
                qp.attempts += 1;
                return Some(qp);
            }
        }
        None
    }

    /// Parks a pod that no node fits until something changes.
    pub fn add_unschedulable(&mut self, qp: QueuedPod) {
        self.unschedulable.insert(qp.pod.uid.clone(), qp);
    }

    /// Moves every unschedulable pod back to activeQ (a cluster change may help).
    pub fn move_all_to_active(&mut self) {
        let pods: Vec<QueuedPod> = self.unschedulable.drain().map(|(_, q)| q).collect();
        for mut qp in pods {
            self.next_seq += 1;
            qp.seq = self.next_seq;
            self.push_active(qp);
        }
    }

    /// Removes a pod wherever it waits.
    pub fn delete(&mut self, uid: &str) -> Option<QueuedPod> {
        self.active
            .remove(uid)
            .or_else(|| self.unschedulable.remove(uid))
    }

    /// Pods in activeQ.
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// The unschedulable pods.
    pub fn unschedulable(&self) -> impl Iterator<Item = &QueuedPod> {
        self.unschedulable.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str) -> Pod {
        Pod {
            uid: uid.into(),
            ..Pod::default()
        }
    }

    #[test]
    fn pops_by_key_then_enqueue_order() {
        let mut q = SchedulingQueue::new();
        q.add(pod("low"), vec![0]);
        q.add(pod("high-1"), vec![-100]);
        q.add(pod("high-2"), vec![-100]);
        let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|q| q.pod.uid).collect();
        assert_eq!(order, ["high-1", "high-2", "low"]);
    }

    #[test]
    fn unschedulable_pods_come_back_with_their_attempts() {
        let mut q = SchedulingQueue::new();
        q.add(pod("a"), vec![0]);
        let a = q.pop().unwrap();
        assert_eq!(a.attempts, 1);
        q.add_unschedulable(a);
        assert!(q.pop().is_none());
        q.move_all_to_active();
        assert_eq!(q.pop().unwrap().attempts, 2);
    }

    #[test]
    fn deleted_pods_do_not_pop() {
        let mut q = SchedulingQueue::new();
        q.add(pod("a"), vec![0]);
        q.add(pod("b"), vec![1]);
        assert!(q.delete("a").is_some());
        assert_eq!(q.pop().unwrap().pod.uid, "b");
        assert!(q.pop().is_none());
    }
}
