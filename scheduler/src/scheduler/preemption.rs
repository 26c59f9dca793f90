//! Preemption's cluster side: what PostFilter decided, carried out. Nominations are
//! counted here and written to the cluster; victims are rejected at Permit or
//! evicted. Against a remote cluster the writes run on a small pool of preemption
//! threads with their own rate budget, and the preemptor is held at PreEnqueue until
//! its evictions end (upstream's "preempting" set, KEP-4832): a retry meanwhile would
//! choose victims again, among them the very pods whose eviction is on its way.

use super::pool::{PoolSender, spawn_pool, wake};
use super::{Scheduler, Waker};
use crate::framework::NominatedPods;
use berth_cluster::Binder;
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
    Nominate { pod: Box<Pod>, node: String },
    /// Carry out a preemption.
    Carry(Preemption),
}

/// A preemption PostFilter (or PodGroupPostFilter) decided, to carry out in the
/// cluster.
pub(super) struct Preemption {
    /// The preemptor and the node it is nominated to; for a pod group, each member
    /// placed and its node.
    preemptors: Vec<(Pod, String)>,
    /// Pods of lower priority nominated to those nodes: they lose their nomination.
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
        for (p, node) in &self.preemptors {
            write_nomination(binder, p, node);
        }
        for p in &self.lower {
            write_nomination(binder, p, "");
        }
        let mut evicted = Vec::new();
        let mut all_evicted = true;
        for v in self.evict {
            let (preemptor, _) = preemptor_of(&self.preemptors, &v);
            if let Err(e) = binder.evict(&v, preemptor, &self.message) {
                tracing::warn!(pod = %preemptor.key(), victim = %v.key(), "cannot evict, the preemptor will try again: {e}");
                all_evicted = false;
                break;
            }
            evicted.push(v);
        }
        PreemptionEnded {
            preemptors: self.preemptors,
            evicted,
            all_evicted,
        }
    }
}

/// The preemptor a victim is evicted for (the one nominated to its node; else the
/// first), and that preemptor's node.
fn preemptor_of<'a>(preemptors: &'a [(Pod, String)], victim: &Pod) -> (&'a Pod, &'a str) {
    let (p, node) = preemptors
        .iter()
        .find(|(_, node)| *node == victim.node_name)
        .unwrap_or(&preemptors[0]);
    (p, node)
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
    preemptors: Vec<(Pod, String)>,
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
            pod: Box::new(pod.clone()),
            node: node.to_owned(),
        };
        if !self.services.binder.reports_deletions() {
            write_nomination(self.services.binder.as_ref(), pod, node);
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
    /// cluster has no watch to report them), their ResourceClaims released as the
    /// resourceclaim controller would.
    pub(super) fn preempt(&mut self, preemptor: &Pod, node: &str, victims: Vec<Pod>, plugin: &str) {
        self.carry_preemption(
            vec![(preemptor.clone(), node.to_owned())],
            preemptor.priority,
            victims,
            plugin,
        );
    }

    /// Carries out a preemption for `preemptors` (one pod, or the members of a pod
    /// group, each with its nominated node) of `priority` (the pod's, or the
    /// group's): as [`Scheduler::preempt`], every preemptor held until the
    /// evictions end.
    pub(super) fn carry_preemption(
        &mut self,
        preemptors: Vec<(Pod, String)>,
        priority: i32,
        victims: Vec<Pod>,
        plugin: &str,
    ) {
        let Some((first, _)) = preemptors.first() else {
            return;
        };
        let first = first.clone();
        self.services
            .metrics
            .observe_preemption_victims(victims.len());
        tracing::debug!(
            pod = %first.key(),
            preemptors = preemptors.len(),
            victims = victims.len(),
            "preempting"
        );
        let uids: std::collections::HashSet<&str> =
            preemptors.iter().map(|(p, _)| p.uid.as_str()).collect();
        let nodes: std::collections::BTreeSet<&str> =
            preemptors.iter().map(|(_, n)| n.as_str()).collect();
        let lower: Vec<Pod> = nodes
            .iter()
            .filter_map(|node| self.nominated.get(*node))
            .flatten()
            .filter(|p| p.priority < priority && !uids.contains(p.uid.as_str()))
            .cloned()
            .collect();
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
                let (p, node) = preemptor_of(&preemptors, &v);
                self.services.recorder.preempted(&v, p, node);
            } else if !v.terminating {
                evict.push(v);
            }
        }
        let holds: Vec<String> = preemptors.iter().map(|(p, _)| p.uid.clone()).collect();
        let preemption = Preemption {
            preemptors,
            lower,
            message: format!(
                "{}: preempting to accommodate a higher priority pod",
                first.scheduler_name
            ),
            evict,
        };
        if !self.services.binder.reports_deletions() {
            let ended = preemption.carry_out(self.services.binder.as_ref());
            for v in &ended.evicted {
                let (p, node) = preemptor_of(&ended.preemptors, v);
                self.services.recorder.preempted(v, p, node);
                self.delete_pod(&v.uid);
                // Nor a resourceclaim controller: the victim's devices are let go here.
                self.release_claims_of(&v.uid);
            }
            if !ended.all_evicted {
                for (p, _) in &ended.preemptors {
                    self.queue.activate(&p.uid);
                }
            }
            return;
        }
        // Held at PreEnqueue until the evictions end, as upstream holds a pod in its
        // "preempting" set; with nothing to evict there is nothing to wait for.
        let holding = !preemption.evict.is_empty();
        if self
            .preemption
            .jobs
            .send(PreemptionJob::Carry(preemption))
            .is_err()
        {
            tracing::warn!(pod = %first.key(), "cannot preempt: the preemption threads are gone");
            for uid in &holds {
                self.queue.activate(uid);
            }
            return;
        }
        if holding {
            for uid in holds {
                self.preemption
                    .preempting
                    .insert(uid.clone(), plugin.to_owned());
                self.queue.hold(&uid, plugin, &preempting_message(plugin));
            }
        }
    }

    /// Takes in the preemptions the preemption threads finished: each preemptor
    /// leaves the preempting set and is activated (asked its PreEnqueue gates again,
    /// then to activeQ), whether its victims are gone yet or not: a retry while they
    /// terminate finds them terminating and does not preempt again (upstream's
    /// eligibility check), and their deletion moves it on.
    pub(super) fn take_preemptions_ended(&mut self) {
        while let Ok(ended) = self.preemption.ended.try_recv() {
            for v in &ended.evicted {
                let (p, node) = preemptor_of(&ended.preemptors, v);
                self.services.recorder.preempted(v, p, node);
            }
            self.services
                .metrics
                .count_preemption_carried_out(ended.all_evicted);
            for (p, _) in &ended.preemptors {
                let uid = &p.uid;
                self.preemption.preempting.remove(uid);
                if !self.queue.release_hold(uid) {
                    // In flight or elsewhere in the queue: activated as any pod.
                    self.queue.activate(uid);
                }
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
