//! The binding cycle's side of the scheduler: binding jobs handed to a pool of
//! binding threads, and what the end of a binding cycle decides (bound; bound by
//! someone else; deleted meanwhile; retried; or in doubt until the cluster can say).
//!
//! The scheduling loop never asks the cluster itself: after a failed bind the binding
//! thread asks where the pod is before it reports, and a pod in doubt is asked about
//! again by a lookup job on the same threads. A slow or silent API server holds up
//! binding threads, never the loop.

use super::pool::{PoolSender, spawn_pool, wake};
use super::{Scheduler, SchedulerError, Waker};
use crate::cluster::{Binder, FailureReason, PodState};
use crate::framework::{CyclePod, CycleState, Framework, PluginError};
use crate::queue::QueuedPod;
use berth_sdk::{ActionType, ClusterEvent, EventResource, Object, Pod};
use std::collections::BTreeSet;
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// A pod between Reserve and the end of its binding cycle.
pub(super) struct Binding {
    pub(super) qp: QueuedPod,
    pub(super) assumed: Pod,
    pub(super) node: String,
    pub(super) state: CycleState,
    pub(super) framework: Arc<Framework>,
    /// Placed from a batch (see [`super::PodOutcome::batched`]).
    pub(super) batched: bool,
}

pub(super) struct BindJob {
    uid: String,
    framework: Arc<Framework>,
    state: CycleState,
    pod: CyclePod,
    node: String,
}

/// What the binding threads do.
pub(super) enum Job {
    /// A binding cycle (PreBind, Bind, PostBind).
    Bind(BindJob),
    /// Where the cluster has a pod whose bind may have happened.
    Lookup {
        /// The pod's UID.
        uid: String,
        /// The pod as assumed.
        pod: Pod,
    },
}

/// What the binding threads report.
pub(super) enum BindResult {
    /// A binding cycle ended; when it failed, where the cluster has the pod.
    Bound {
        uid: String,
        result: Result<(), PluginError>,
        state: Option<PodState>,
    },
    /// A lookup ended.
    Looked { uid: String, state: PodState },
}

/// Runs binding cycles and lookups on `n` threads of their own, so a slow PreBind,
/// Bind or API server never holds up the scheduling loop, and `n` of them wait for
/// the API server at once.
pub(super) fn spawn_binders(
    n: usize,
    binder: Arc<dyn Binder>,
    waker: Arc<RwLock<Option<Waker>>>,
) -> Result<(PoolSender<Job>, Receiver<BindResult>), SchedulerError> {
    let (res_tx, res_rx) = channel::<BindResult>();
    let jobs = spawn_pool(n, super::MAX_WAITING_BINDINGS, "berth-binding", move || {
        let res_tx = res_tx.clone();
        let waker = waker.clone();
        let binder = binder.clone();
        move |job: Job| {
            let done = match job {
                Job::Bind(job) => {
                    let result = job.framework.bind(&job.state, &job.pod, &job.node);
                    // Was it bound all the same, by someone else, or deleted?
                    let state = result.is_err().then(|| binder.lookup(job.pod.pod()));
                    BindResult::Bound {
                        uid: job.uid,
                        result,
                        state,
                    }
                }
                Job::Lookup { uid, pod } => BindResult::Looked {
                    uid,
                    state: binder.lookup(&pod),
                },
            };
            if res_tx.send(done).is_err() {
                return false;
            }
            wake(&waker);
            true
        }
    })
    .map_err(SchedulerError::BindingThread)?;
    Ok((jobs, res_rx))
}

/// How often the cluster is asked again about a pod whose bind may have happened.
const DOUBT_RECHECK: Duration = Duration::from_secs(1);

impl Scheduler {
    /// Asks the cluster again, on a binding thread, about the pods whose bind may
    /// have happened and whose time has come.
    pub(super) fn recheck_doubtful(&mut self, now: Duration) {
        let due: Vec<(String, Pod)> = self
            .doubtful
            .iter()
            .filter(|(_, (_, _, at))| at.is_some_and(|at| at <= now))
            .map(|(uid, (b, _, _))| (uid.clone(), b.assumed.clone()))
            .collect();
        for (uid, pod) in due {
            if self
                .bind_tx
                .send(Job::Lookup {
                    uid: uid.clone(),
                    pod,
                })
                .is_err()
            {
                // No binding thread is left to ask: the pod stays in doubt.
                continue;
            }
            self.bindings_in_flight += 1;
            if let Some(d) = self.doubtful.get_mut(&uid) {
                d.2 = None;
            }
        }
    }

    /// A lookup of a pod in doubt ended.
    fn looked(&mut self, uid: String, state: PodState) {
        let Some((b, error, _)) = self.doubtful.remove(&uid) else {
            return;
        };
        match state {
            PodState::Unknown => {
                let at = self.clock.now() + DOUBT_RECHECK;
                self.doubtful.insert(uid, (b, error, Some(at)));
            }
            state => self.settle_failed_binding(uid, b, state, error),
        }
    }

    pub(super) fn start_binding(&mut self, uid: &str) {
        let Some(b) = self.binding.get(uid) else {
            return;
        };
        // Past Permit no cluster event decides where the pod goes: the queue keeps
        // none for it while its binding cycle runs (a PreBind may wait minutes).
        self.queue.binding_started(uid);
        let job = BindJob {
            uid: uid.to_owned(),
            framework: b.framework.clone(),
            state: b.state.clone(),
            pod: CyclePod::new(b.assumed.clone()),
            node: b.node.clone(),
        };
        match self.bind_tx.send(Job::Bind(job)) {
            Ok(()) => self.bindings_in_flight += 1,
            // It never ran: the pod is not bound.
            Err(_) => self.finish_binding(
                uid.to_owned(),
                Err(PluginError {
                    plugin: "Bind".into(),
                    message: "the binding threads are gone".into(),
                }),
                Some(PodState::Pending),
            ),
        }
    }

    pub(super) fn drain_bind_results(&mut self, block: bool) {
        self.take_preemptions_ended();
        if block
            && self.bindings_in_flight > 0
            && let Ok(done) = self.bind_rx.recv()
        {
            self.bind_done(done);
        }
        while let Ok(done) = self.bind_rx.try_recv() {
            self.bind_done(done);
        }
        // What the embedded cluster's volume controller and claim status writes
        // changed while binding: already in the storage and DRA views; the queue
        // hears of it here.
        for (old, new) in self.binder.take_storage_changes() {
            match &new {
                Object::PersistentVolume(_) => {
                    self.storage_event(EventResource::PersistentVolume, old, new);
                }
                Object::PersistentVolumeClaim(_) => {
                    self.storage_event(EventResource::PersistentVolumeClaim, old, new);
                }
                Object::ResourceClaim(_) => {
                    self.dra_event(EventResource::ResourceClaim, old, new);
                }
                _ => {}
            }
        }
    }

    fn bind_done(&mut self, done: BindResult) {
        self.bindings_in_flight -= 1;
        match done {
            BindResult::Bound { uid, result, state } => self.finish_binding(uid, result, state),
            BindResult::Looked { uid, state } => self.looked(uid, state),
        }
    }

    /// A binding cycle ended; `state`, after a failure, is where the binding thread
    /// found the pod in the cluster.
    fn finish_binding(
        &mut self,
        uid: String,
        result: Result<(), PluginError>,
        state: Option<PodState>,
    ) {
        let Some(b) = self.binding.remove(&uid) else {
            return;
        };
        self.storage.forget_pod(&uid);
        self.dra.forget_pod(&uid);
        match result {
            Ok(()) => {
                let deleted = self.queue.deleted_in_flight(&uid);
                self.queue.done(&uid);
                if let Some(first) = b.qp.initial_attempt {
                    self.metrics
                        .observe_scheduled_pod(b.qp.attempts, first.elapsed());
                }
                let message = format!("Successfully assigned {} to {}", b.assumed.key(), b.node);
                self.bound_outcome(&b.assumed, b.node.clone(), message, b.qp.attempts);
                if b.batched
                    && let Some(o) = self.outcomes.get_mut(&uid)
                {
                    o.batched = true;
                }
                self.recorder
                    .scheduled(b.framework.scheduler_name(), &b.assumed, &b.node);
                if deleted {
                    // Deleted while it was being bound: it is gone from the cluster too.
                    self.unconfirmed.remove(&uid);
                    let _ = self.cache.remove_pod(&uid);
                    self.outcomes.remove(&uid);
                    return;
                }
                if self.confirm_bindings {
                    // Counted as assumed until the cluster shows it bound (which may
                    // already have happened: then it is no longer assumed).
                    if self.cache.finish_binding(&uid).is_ok() {
                        self.unconfirmed.insert(uid, self.clock.now());
                    }
                    return;
                }
                // The embedded cluster confirms the binding at once: the pod is counted
                // for good.
                let _ = self.cache.finish_binding(&uid);
                let _ = self.cache.add_pod(&b.assumed);
                self.event(
                    ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
                    None,
                    Some(Object::Pod(b.assumed)),
                );
            }
            Err(e) => {
                let state = state.unwrap_or(PodState::Unknown);
                self.settle_failed_binding(uid, b, state, e.to_string());
            }
        }
    }

    /// The outcome of a pod now bound to `node`: kept for a report, or forgotten
    /// (see [`super::SchedulerOptions::keep_bound_outcomes`]).
    fn bound_outcome(&mut self, pod: &Pod, node: String, message: String, attempts: u32) {
        if self.keep_bound_outcomes {
            self.set_outcome(pod, Some(node), message, attempts);
        } else {
            self.outcomes.remove(&pod.uid);
        }
    }

    /// A bind failed; `state` is where the cluster has the pod now.
    fn settle_failed_binding(&mut self, uid: String, b: Binding, state: PodState, error: String) {
        match state {
            PodState::BoundTo(node) if node == b.node => {
                // The bind happened; only its answer was lost.
                tracing::info!(pod = %b.assumed.key(), %node, "the bind happened though its answer was lost: {error}");
                self.binding.insert(uid.clone(), b);
                self.finish_binding(uid, Ok(()), None);
            }
            PodState::Unknown => {
                // It may be bound: it stays counted on its node until the cluster
                // can say.
                tracing::info!(pod = %b.assumed.key(), node = %b.node, "the bind failed and the cluster cannot be asked whether it happened; the pod keeps its room on the node until it can: {error}");
                let _ = self.cache.finish_binding(&uid);
                let at = self.clock.now() + DOUBT_RECHECK;
                self.doubtful.insert(uid, (b, error, Some(at)));
            }
            state => {
                b.framework
                    .unreserve(&b.state, &CyclePod::new(b.assumed.clone()), &b.node);
                let _ = self.cache.forget_pod(&uid);
                match state {
                    PodState::BoundTo(other) => {
                        // Someone else bound it (409 Conflict): drop it from the queue,
                        // do not retry, and count it where it is now (the watch may
                        // tell later).
                        self.queue.done(&uid);
                        tracing::info!(pod = %b.assumed.key(), node = %other, "bound by someone else: {error}");
                        let mut pod = b.assumed.clone();
                        pod.node_name = other.clone();
                        if self.cache.add_pod(&pod).is_ok() {
                            self.event(
                                ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
                                None,
                                Some(Object::Pod(pod)),
                            );
                        }
                        let message = format!("bound to node {other} by someone else ({error})");
                        self.bound_outcome(&b.assumed, other, message, b.qp.attempts);
                    }
                    PodState::Gone => {
                        // Deleted (404): nothing left to schedule.
                        tracing::info!(pod = %b.assumed.key(), "deleted while being bound: {error}");
                        self.queue.done(&uid);
                        self.outcomes.remove(&uid);
                    }
                    PodState::Pending | PodState::Unknown => {
                        self.fail(b.qp, BTreeSet::new(), FailureReason::SchedulerError, error)
                    }
                }
            }
        }
    }

    /// Ends what is in flight for a shutdown: pods waiting at Permit give back their
    /// reservations (they stay pending in the cluster for the next leader), and
    /// binding cycles already under way may finish until `timeout`. Returns how many
    /// binding cycles were still running when the time was up.
    pub fn finish_in_flight(&mut self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let waiting: Vec<String> = self
            .binding
            .keys()
            .filter(|uid| self.waiting.remove(uid))
            .cloned()
            .collect();
        for uid in waiting {
            let b = self.binding.remove(&uid).expect("listed");
            b.framework
                .unreserve(&b.state, &CyclePod::new(b.assumed.clone()), &b.node);
            let _ = self.cache.forget_pod(&uid);
            self.queue.done(&uid);
        }
        while self.bindings_in_flight > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.bind_rx.recv_timeout(left) {
                Ok(done) => self.bind_done(done),
                Err(_) => break,
            }
        }
        self.bindings_in_flight
    }

    /// Binding cycles (and lookups of pods in doubt) under way.
    pub fn bindings_in_flight(&self) -> usize {
        self.bindings_in_flight
    }
}
