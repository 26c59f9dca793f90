//! Preemption's cluster side: what PostFilter decided, carried out. Nominations are
//! counted here and written to the cluster; victims are rejected at Permit or
//! evicted. Against a remote cluster the writes run on a small pool of preemption
//! threads with their own rate budget, and the preemptor is held at PreEnqueue until
//! its evictions end (upstream's "preempting" set, KEP-4832): a retry meanwhile would
//! choose victims again, among them the very pods whose eviction is on its way.

use super::pool::{PoolSender, spawn_pool, wake};
use super::{Scheduler, Waker};
use crate::cluster::Binder;
use crate::framework::NominatedPods;
use berth_sdk::Pod;
use std::collections::HashMap;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, RwLock};

/// Preemption threads in `berth run`. Each carries out one preemption at a time (its
/// nomination writes and evictions, one request after another); the preempting set
/// keeps a preemptor from having two, so what waits for them is bounded by the
/// pending preemptors, and what waits on the API server by this number.
pub const PREEMPTION_THREADS: usize = 4;

/// What the preemption threads do.
pub(super) enum PreemptionJob {
    /// Write (or clear, with an empty node) a pod's `status.nominatedNodeName`.
    Nominate { pod: Pod, node: String },
    /// Carry out a preemption.
    Carry(Preemption),
}

/// A preemption PostFilter decided, to carry out in the cluster.
pub(super) struct Preemption {
    preemptor: Pod,
    node: String,
    /// Pods of lower priority nominated to the node: they lose their nomination.
    lower: Vec<Pod>,
    /// The victims to evict, most important first.
    evict: Vec<Pod>,
    /// The DisruptionTarget condition's message.
    message: String,
}

impl Preemption {
    /// Writes the nominations and evicts the victims in order; the victims evicted,
    /// and whether all were. As upstream: once one eviction fails the preemption
    /// cannot succeed, so the victims left are spared and the preemptor is retried at
    /// once.
    fn carry_out(self, binder: &dyn Binder) -> PreemptionEnded {
        write_nomination(binder, &self.preemptor, &self.node);
        for p in &self.lower {
            write_nomination(binder, p, "");
        }
        let mut evicted = Vec::new();
        let mut all_evicted = true;
        for v in self.evict {
            if let Err(e) = binder.evict(&v, &self.preemptor, &self.message) {
                tracing::warn!(pod = %self.preemptor.key(), victim = %v.key(), "cannot evict, the preemptor will try again: {e}");
                all_evicted = false;
                break;
            }
            evicted.push(v);
        }
        PreemptionEnded {
            preemptor: self.preemptor,
            node: self.node,
            evicted,
            all_evicted,
        }
    }
}

/// Writes (or clears, with an empty node) a pod's `status.nominatedNodeName`; a
/// failure is logged (the nomination is the scheduler's own record; the cluster's
/// copy helps other components and the next leader).
fn write_nomination(binder: &dyn Binder, pod: &Pod, node: &str) {
    if let Err(e) = binder.nominate(pod, node) {
        tracing::warn!(pod = %pod.key(), node, "cannot write nominatedNodeName: {e}");
    }
}

/// A preemption carried out: what the loop records and decides after it.
pub(super) struct PreemptionEnded {
    preemptor: Pod,
    node: String,
    /// The victims evicted.
    evicted: Vec<Pod>,
    /// Whether every victim was evicted.
    all_evicted: bool,
}

/// The scheduler's preemption threads and the preemptors they work for.
pub(super) struct Preemptions {
    jobs: PoolSender<PreemptionJob>,
    ended: Receiver<PreemptionEnded>,
    /// Preemptors whose evictions are under way, and the PostFilter plugin that
    /// decided each: held at PreEnqueue until the evictions end.
    preempting: HashMap<String, String>,
}

impl Preemptions {
    /// Starts `n` preemption threads. Their requests go through `binder` (which, for
    /// a remote cluster, limits them with a bucket of their own, apart from the
    /// binds'); each preemption carried out is reported back and `waker` called.
    pub(super) fn start(
        n: usize,
        binder: Arc<dyn Binder>,
        waker: Arc<RwLock<Option<Waker>>>,
    ) -> std::io::Result<Self> {
        let (tx, ended) = channel();
        let jobs = spawn_pool(n, 0, "berth-preemption", move || {
            let (tx, binder, waker): (Sender<PreemptionEnded>, _, _) =
                (tx.clone(), binder.clone(), waker.clone());
            move |job: PreemptionJob| {
                match job {
                    PreemptionJob::Nominate { pod, node } => {
                        write_nomination(binder.as_ref(), &pod, &node)
                    }
                    PreemptionJob::Carry(p) => {
                        if tx.send(p.carry_out(binder.as_ref())).is_err() {
                            return false;
                        }
                        wake(&waker);
                    }
                }
                true
            }
        })?;
        Ok(Preemptions {
            jobs,
            ended,
            preempting: HashMap::new(),
        })
    }

    /// Whether no preemptor waits for its evictions.
    pub(super) fn is_idle(&self) -> bool {
        self.preempting.is_empty()
    }
}

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

    /// Writes a pod's nomination to the cluster: on a preemption thread when the
    /// cluster is remote.
    pub(super) fn write_nomination(&self, pod: &Pod, node: &str) {
        let job = PreemptionJob::Nominate {
            pod: pod.clone(),
            node: node.to_owned(),
        };
        if !self.binder.reports_deletions() {
            write_nomination(self.binder.as_ref(), pod, node);
        } else if self.preemption.jobs.send(job).is_err() {
            tracing::warn!(pod = %pod.key(), node, "cannot write nominatedNodeName: the preemption threads are gone");
        }
    }

    /// Carries out a preemption `plugin` decided (upstream's `prepareCandidate`): the
    /// preemptor is nominated to `node`, pods of lower priority nominated there lose
    /// their nomination, victims waiting at Permit are rejected and the others
    /// evicted. Against a remote cluster the API calls run on a preemption thread and
    /// the preemptor waits at PreEnqueue until they end (then it is activated); the
    /// embedded cluster evicts at once and the victims leave the cache here (its
    /// cluster has no watch to report them).
    pub(super) fn preempt(&mut self, preemptor: &Pod, node: &str, victims: Vec<Pod>, plugin: &str) {
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
        let preemption = Preemption {
            preemptor: preemptor.clone(),
            node: node.to_owned(),
            lower,
            message: format!(
                "{}: preempting to accommodate a higher priority pod",
                preemptor.scheduler_name
            ),
            evict,
        };
        if !self.binder.reports_deletions() {
            let ended = preemption.carry_out(self.binder.as_ref());
            for v in &ended.evicted {
                self.recorder.preempted(v, &ended.preemptor, &ended.node);
                self.delete_pod(&v.uid);
            }
            if !ended.all_evicted {
                self.queue.activate(&ended.preemptor.uid);
            }
            return;
        }
        // Held at PreEnqueue until the evictions end, as upstream holds a pod in its
        // "preempting" set; with nothing to evict there is nothing to wait for.
        let holds = !preemption.evict.is_empty();
        let uid = preemptor.uid.clone();
        if self
            .preemption
            .jobs
            .send(PreemptionJob::Carry(preemption))
            .is_err()
        {
            tracing::warn!(pod = %preemptor.key(), "cannot preempt: the preemption threads are gone");
            self.queue.activate(&uid);
            return;
        }
        if holds {
            self.preemption
                .preempting
                .insert(uid.clone(), plugin.to_owned());
            self.queue.hold(&uid, plugin, &preempting_message(plugin));
        }
    }

    /// Takes in the preemptions the preemption threads finished: each preemptor
    /// leaves the preempting set and is activated (asked its PreEnqueue gates again,
    /// then to activeQ), whether its victims are gone yet or not: a retry while they
    /// terminate finds them terminating and does not preempt again (upstream's
    /// eligibility check), and their deletion moves it on.
    pub(super) fn take_preemptions_ended(&mut self) {
        while let Ok(ended) = self.preemption.ended.try_recv() {
            let uid = &ended.preemptor.uid;
            for v in &ended.evicted {
                self.recorder.preempted(v, &ended.preemptor, &ended.node);
            }
            self.metrics.count_preemption_carried_out(ended.all_evicted);
            self.preemption.preempting.remove(uid);
            if !self.queue.release_hold(uid) {
                // In flight or elsewhere in the queue: activated as any pod.
                self.queue.activate(uid);
            }
        }
    }

    /// The plugin whose preemption holds `uid` at PreEnqueue, if any.
    pub(super) fn preempting(&self, uid: &str) -> Option<&str> {
        self.preemption.preempting.get(uid).map(String::as_str)
    }
}

/// What holds a preemptor at PreEnqueue, in upstream's words.
pub(super) fn preempting_message(plugin: &str) -> String {
    format!("{plugin}: waiting for the preemption for this pod to be finished")
}
