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
use crate::framework::{CyclePod, CycleState, Framework, PluginError};
use crate::queue::QueuedPod;
use berth_cluster::{Binder, FailureReason, PodState};
use berth_sdk::{ActionType, ClusterEvent, EventResource, Object, Pod};
use std::collections::{BTreeSet, HashMap};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
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

/// A job and its number: jobs are numbered in the order the loop hands them out, and
/// an embedded run takes their results in in that order (see
/// [`Scheduler::settle_bindings`]).
pub(super) type Numbered<T> = (u64, T);

/// The loop's ends of the binding threads: where jobs go, where results come.
pub(super) type BindingThreads = (PoolSender<Numbered<Job>>, Receiver<Numbered<BindResult>>);

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
) -> Result<BindingThreads, SchedulerError> {
    let (res_tx, res_rx) = channel::<Numbered<BindResult>>();
    let jobs = spawn_pool(n, super::MAX_WAITING_BINDINGS, "berth-binding", move || {
        let res_tx = res_tx.clone();
        let waker = waker.clone();
        let binder = binder.clone();
        move |(number, job): Numbered<Job>| {
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
            if res_tx.send((number, done)).is_err() {
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

/// How often [`Scheduler::settle_bindings`] looks again whether a running binding
/// cycle has started waiting on the cluster (which reports nothing).
const SETTLE_POLL: Duration = Duration::from_millis(1);

/// What an object the embedded cluster changed while binding is, for ordering those
/// changes: its kind, namespace and name.
fn object_identity(o: &Object) -> (&'static str, String) {
    match o {
        Object::PersistentVolume(v) => ("PersistentVolume", v.name.clone()),
        Object::PersistentVolumeClaim(c) => (
            "PersistentVolumeClaim",
            format!("{}/{}", c.namespace, c.name),
        ),
        Object::ResourceClaim(c) => ("ResourceClaim", format!("{}/{}", c.namespace, c.name)),
        // Not written while binding; kept in the order they came.
        _ => ("", String::new()),
    }
}

/// The binding cycles: the jobs on the binding threads, the pods between Reserve and
/// the end of their binding cycle, and the bound pods whose binding the cluster has
/// not confirmed yet.
///
/// What must hold: jobs are numbered in the order they are handed out
/// (`bind_jobs_sent` is the next number); `bindings_in_flight` counts the jobs handed
/// out whose result has not been taken in, those in `bind_arrived` included. A pod is
/// in at most one of `binding`, `doubtful` and `unconfirmed`: in `binding` from
/// Reserve until its binding cycle ends, then in `unconfirmed` (with
/// `confirm_bindings`) until the cluster shows it bound or `assumed_pod_expiry`
/// passes, or in `doubtful` while no one can say whether its bind happened. With `settle`, results are taken in only
/// in job order, at points the loop fixes (see [`Scheduler::settle_bindings`]).
pub(super) struct Bindings {
    /// Where jobs go to the binding threads.
    pub(super) bind_tx: PoolSender<Numbered<Job>>,
    /// Where the binding threads' results come from.
    pub(super) bind_rx: Receiver<Numbered<BindResult>>,
    /// Jobs handed to the binding threads so far (the next one's number).
    pub(super) bind_jobs_sent: u64,
    /// Results received and not yet taken in, by job number (see
    /// [`Scheduler::settle_bindings`]).
    pub(super) bind_arrived: std::collections::BTreeMap<u64, BindResult>,
    /// See [`super::SchedulerOptions::settle_bindings`].
    pub(super) settle: bool,
    /// The pods between Reserve and the end of their binding cycle (Permit waits
    /// included), by UID.
    pub(super) binding: HashMap<String, Binding>,
    /// Jobs on the binding threads: binding cycles and lookups.
    pub(super) bindings_in_flight: usize,
    /// See [`super::SchedulerOptions::confirm_bindings`].
    pub(super) confirm_bindings: bool,
    /// See [`super::SchedulerOptions::assumed_pod_expiry`].
    pub(super) assumed_pod_expiry: Option<Duration>,
    /// Pods whose binding succeeded and that wait for the cluster's confirmation:
    /// when their binding ended.
    pub(super) unconfirmed: HashMap<String, Duration>,
    /// Pods whose bind failed in a way that may have bound them (an answer lost), and
    /// the cluster could not be asked: they stay counted where they were assumed until
    /// it answers (asked again at most every [`DOUBT_RECHECK`], by a lookup on a
    /// binding thread), so that no other pod takes their room meanwhile. The time is
    /// when to ask next; none while a lookup is under way.
    pub(super) doubtful: HashMap<String, (Binding, String, Option<Duration>)>,
}

impl Bindings {
    /// Hands a job to the binding threads, numbered; false when no thread is left
    /// to run it.
    fn send(&mut self, job: Job) -> bool {
        let number = self.bind_jobs_sent;
        if self.bind_tx.send((number, job)).is_err() {
            return false;
        }
        self.bind_jobs_sent += 1;
        self.bindings_in_flight += 1;
        true
    }
}

impl Scheduler {
    /// Asks the cluster again, on a binding thread, about the pods whose bind may
    /// have happened and whose time has come.
    pub(super) fn recheck_doubtful(&mut self, now: Duration) {
        let due: Vec<(String, Pod)> = self
            .bindings
            .doubtful
            .iter()
            .filter(|(_, (_, _, at))| at.is_some_and(|at| at <= now))
            .map(|(uid, (b, _, _))| (uid.clone(), b.assumed.clone()))
            .collect();
        for (uid, pod) in due {
            let job = Job::Lookup {
                uid: uid.clone(),
                pod,
            };
            if !self.bindings.send(job) {
                // No binding thread is left to ask: the pod stays in doubt.
                continue;
            }
            if let Some(d) = self.bindings.doubtful.get_mut(&uid) {
                d.2 = None;
            }
        }
    }

    /// A lookup of a pod in doubt ended.
    fn looked(&mut self, uid: String, state: PodState) {
        let Some((b, error, _)) = self.bindings.doubtful.remove(&uid) else {
            return;
        };
        match state {
            PodState::Unknown => {
                let at = self.services.clock.now() + DOUBT_RECHECK;
                self.bindings.doubtful.insert(uid, (b, error, Some(at)));
            }
            state => self.settle_failed_binding(uid, b, state, error),
        }
    }

    pub(super) fn start_binding(&mut self, uid: &str) {
        let Some(b) = self.bindings.binding.get(uid) else {
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
        if !self.bindings.send(Job::Bind(job)) {
            // It never ran: the pod is not bound.
            self.finish_binding(
                uid.to_owned(),
                Err(PluginError {
                    plugin: "Bind".into(),
                    message: "the binding threads are gone".into(),
                }),
                Some(PodState::Pending),
            );
        }
    }

    /// Takes in what the binding threads finished; with `block`, waits for at least
    /// one result first when any job is in flight. In an embedded run (see
    /// [`super::SchedulerOptions::settle_bindings`]) it first waits for every
    /// running job to end, so that what the loop sees does not depend on how fast
    /// the threads ran.
    pub(super) fn drain_bind_results(&mut self, block: bool) {
        self.take_preemptions_ended();
        if self.bindings.settle {
            self.settle_bindings(block);
        } else {
            if block
                && self.bindings.bindings_in_flight > 0
                && let Ok((_, done)) = self.bindings.bind_rx.recv()
            {
                self.bind_done(done);
            }
            while let Ok((_, done)) = self.bindings.bind_rx.try_recv() {
                self.bind_done(done);
            }
        }
        // What the embedded cluster's volume controller and claim status writes
        // changed while binding: already in the storage and DRA views; the queue
        // hears of it here. Two binding cycles on two threads may have written
        // them interleaved: an embedded run hears of them object by object (each
        // object's changes in the order they were made), not in the threads' order.
        let mut changes = self.services.binder.take_storage_changes();
        if self.bindings.settle {
            changes.sort_by_cached_key(|(_, new)| object_identity(new));
        }
        for (old, new) in changes {
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

    /// Waits until every job on the binding threads has ended or waits on the
    /// cluster (a PreBind waiting for a volume controller: an input whose timing the
    /// run does not decide), then takes the results in, in the order the jobs were
    /// handed out. So an embedded run's binding results reach the loop at points the
    /// run fixes (before each scheduling cycle and each poll), never when a thread
    /// happens to finish: the same input, profile and seed give the same
    /// placements however fast the machine or its binding threads are.
    ///
    /// With `block`, and every job in flight waiting on the cluster, waits until one
    /// of them ends.
    pub(super) fn settle_bindings(&mut self, block: bool) {
        loop {
            while let Ok((number, done)) = self.bindings.bind_rx.try_recv() {
                self.bindings.bind_arrived.insert(number, done);
            }
            let waiting = self.bindings.bind_tx.parked();
            let running = self
                .bindings
                .bindings_in_flight
                .saturating_sub(self.bindings.bind_arrived.len() + waiting);
            let wait_for_one =
                running > 0 || (block && self.bindings.bind_arrived.is_empty() && waiting > 0);
            if !wait_for_one {
                break;
            }
            // A running job either reports or starts waiting on the cluster, which
            // sends nothing: look at the count again now and then.
            match self.bindings.bind_rx.recv_timeout(SETTLE_POLL) {
                Ok((number, done)) => {
                    self.bindings.bind_arrived.insert(number, done);
                }
                Err(RecvTimeoutError::Timeout) => {}
                // Every binding thread is gone: nothing more will come.
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        while let Some((_, done)) = self.bindings.bind_arrived.pop_first() {
            self.bind_done(done);
        }
    }

    fn bind_done(&mut self, done: BindResult) {
        self.bindings.bindings_in_flight -= 1;
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
        let Some(b) = self.bindings.binding.remove(&uid) else {
            return;
        };
        self.cluster.storage.forget_pod(&uid);
        self.cluster.dra.forget_pod(&uid);
        match result {
            Ok(()) => {
                let deleted = self.queue.deleted_in_flight(&uid);
                self.queue.done(&uid);
                if let Some(first) = b.qp.initial_attempt {
                    self.services
                        .metrics
                        .observe_scheduled_pod(b.qp.attempts, first.elapsed());
                }
                let message = format!("Successfully assigned {} to {}", b.assumed.key(), b.node);
                self.bound_outcome(&b.assumed, b.node.clone(), message, b.qp.attempts);
                if b.batched
                    && let Some(o) = self.outcomes.get_mut(&uid)
                {
                    o.batched = true;
                }
                self.services
                    .recorder
                    .scheduled(b.framework.scheduler_name(), &b.assumed, &b.node);
                if deleted {
                    // Deleted while it was being bound: it is gone from the cluster too.
                    self.bindings.unconfirmed.remove(&uid);
                    let _ = self.cluster.cache.remove_pod(&uid);
                    self.outcomes.remove(&uid);
                    return;
                }
                if self.bindings.confirm_bindings {
                    // Counted as assumed until the cluster shows it bound (which may
                    // already have happened: then it is no longer assumed).
                    if self.cluster.cache.finish_binding(&uid).is_ok() {
                        self.bindings
                            .unconfirmed
                            .insert(uid, self.services.clock.now());
                    }
                    return;
                }
                // The embedded cluster confirms the binding at once: the pod is counted
                // for good.
                let _ = self.cluster.cache.finish_binding(&uid);
                let _ = self.cluster.cache.add_pod(&b.assumed);
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
        if self.settings.keep_bound_outcomes {
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
                self.bindings.binding.insert(uid.clone(), b);
                self.finish_binding(uid, Ok(()), None);
            }
            PodState::Unknown => {
                // It may be bound: it stays counted on its node until the cluster
                // can say.
                tracing::info!(pod = %b.assumed.key(), node = %b.node, "the bind failed and the cluster cannot be asked whether it happened; the pod keeps its room on the node until it can: {error}");
                let _ = self.cluster.cache.finish_binding(&uid);
                let at = self.services.clock.now() + DOUBT_RECHECK;
                self.bindings.doubtful.insert(uid, (b, error, Some(at)));
            }
            state => {
                b.framework
                    .unreserve(&b.state, &CyclePod::new(b.assumed.clone()), &b.node);
                let _ = self.cluster.cache.forget_pod(&uid);
                match state {
                    PodState::BoundTo(other) => {
                        // Someone else bound it (409 Conflict): drop it from the queue,
                        // do not retry, and count it where it is now (the watch may
                        // tell later).
                        self.queue.done(&uid);
                        tracing::info!(pod = %b.assumed.key(), node = %other, "bound by someone else: {error}");
                        let mut pod = b.assumed.clone();
                        pod.node_name = other.clone();
                        if self.cluster.cache.add_pod(&pod).is_ok() {
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
            .bindings
            .binding
            .keys()
            .filter(|uid| self.waiting.remove(uid))
            .cloned()
            .collect();
        for uid in waiting {
            let b = self.bindings.binding.remove(&uid).expect("listed");
            b.framework
                .unreserve(&b.state, &CyclePod::new(b.assumed.clone()), &b.node);
            let _ = self.cluster.cache.forget_pod(&uid);
            self.queue.done(&uid);
        }
        while let Some((_, done)) = self.bindings.bind_arrived.pop_first() {
            self.bind_done(done);
        }
        while self.bindings.bindings_in_flight > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.bindings.bind_rx.recv_timeout(left) {
                Ok((_, done)) => self.bind_done(done),
                Err(_) => break,
            }
        }
        self.bindings.bindings_in_flight
    }

    /// Binding cycles (and lookups of pods in doubt) under way.
    pub fn bindings_in_flight(&self) -> usize {
        self.bindings.bindings_in_flight
    }
}
