//! The scheduling queue, with kube-scheduler's semantics
//! (pkg/scheduler/backend/queue): activeQ ordered by the QueueSort key, backoffQ with
//! per-pod exponential backoff, the unschedulable pods (and the gated ones) that wait
//! for a cluster event a queueing hint says may help them, and the pods in flight,
//! whose events are kept so that nothing that happens during their cycle is missed.
//!
//! QueueSort runs once per pod, when it is enqueued: the plugin turns the pod into a
//! key and the heap compares keys natively, so no heap comparison calls into wasm.
//!
//! activeQ holds entities, as kube-scheduler 1.37's does: a pod, or a pod group. A
//! member of a PodGroup whose key the scheduler gave ([`SchedulingQueue::set_group_key`])
//! enters activeQ under its group: one heap entry for the group, keyed by the
//! QueueSort key of the group itself (for PrioritySort, the PodGroup's priority, not
//! its members'), placed by the first member to arrive. Popping the group yields its
//! earliest member; the scheduler takes the rest into the same cycle.
//!
//! Time is a [`Duration`] on the scheduler's clock, passed in by the caller, so the
//! queue runs the same on a real clock and on `berth simulate`'s virtual one.

use berth_sdk::{ActionType, ClusterEvent, EventResource, Object, Pod, QueueingHint};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::time::Duration;

/// Backoff and flush settings, upstream's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Backoff after the first failed attempt (`podInitialBackoffSeconds`, 1 s).
    pub initial_backoff: Duration,
    /// The longest backoff (`podMaxBackoffSeconds`, 10 s).
    pub max_backoff: Duration,
    /// How long a pod stays unschedulable before it is retried anyway (5 min).
    pub max_in_unschedulable: Duration,
    /// The most cluster events kept for the pods in a scheduling cycle or a Permit
    /// wait ([`DEFAULT_MAX_KEPT_EVENTS`]). Past it the oldest are dropped, and a pod
    /// whose cycle saw a dropped event backs off when it fails instead of waiting
    /// for a later event: it may have missed the one that helps it.
    pub max_kept_events: usize,
}

/// The most cluster events the queue keeps for pods in flight, by default: with
/// both objects of each, tens of MiB at most.
pub const DEFAULT_MAX_KEPT_EVENTS: usize = 10_000;

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_in_unschedulable: Duration::from_secs(300),
            max_kept_events: DEFAULT_MAX_KEPT_EVENTS,
        }
    }
}

/// How often backoffQ is flushed, as upstream.
pub const BACKOFF_FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// How often long-unschedulable pods are flushed, as upstream.
pub const UNSCHEDULABLE_FLUSH_INTERVAL: Duration = Duration::from_secs(30);

/// Where a pod waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueName {
    /// Ready to be scheduled.
    Active,
    /// Waiting for its backoff to expire.
    Backoff,
    /// Rejected; waiting for an event that may help.
    Unschedulable,
    /// Kept out by a PreEnqueue plugin.
    Gated,
}

impl QueueName {
    /// The label kube-scheduler's metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueName::Active => "active",
            QueueName::Backoff => "backoff",
            QueueName::Unschedulable => "unschedulable",
            QueueName::Gated => "gated",
        }
    }
}

/// A pod waiting in the queue, with what the queue knows of its attempts.
#[derive(Clone, Debug)]
pub struct QueuedPod {
    /// The pod (its latest version).
    pub pod: Pod,
    /// The QueueSort key (lower pops first).
    pub key: Vec<i64>,
    /// How many scheduling attempts the pod has had.
    pub attempts: u32,
    /// When the pod was last added or requeued (backoff counts from here).
    pub timestamp: Duration,
    /// Enqueue order; breaks ties between equal keys (earlier first).
    pub seq: u64,
    /// The plugins that rejected the last attempt (empty after an error), and the
    /// PreEnqueue plugin that gated the pod since, once its gate is lifted: until the
    /// next attempt, what kept the pod out.
    pub unschedulable_plugins: BTreeSet<String>,
    /// The PreEnqueue plugin that keeps the pod out, if any.
    pub gated_by: Option<String>,
    /// The message of the last failed attempt or of the gate.
    pub last_failure: Option<String>,
    /// When its first scheduling attempt began (the start of the scheduling SLI).
    pub initial_attempt: Option<std::time::Instant>,
    /// The number of its first scheduling attempt among all the queue's attempts:
    /// the order of first attempts, for what must not read the wall clock (a pod
    /// group cycle's order of its members).
    pub first_attempt: Option<u64>,
    /// Its QueueSort key or PreEnqueue gate could not be had (the plugin failed):
    /// both are asked again before it may enter activeQ ([`SchedulingQueue::take_regating`]).
    pub regate: bool,
}

impl QueuedPod {
    /// Lets the pod past its PreEnqueue gate: the gating plugin still counts among
    /// what kept it out until its next attempt starts (see
    /// [`SchedulingQueue::unschedulable_by_plugin`]).
    fn lift_gate(&mut self) {
        if let Some(gate) = self.gated_by.take() {
            self.unschedulable_plugins.insert(gate);
        }
    }

    /// A pod new to the queue at `now`, with its key: no attempt yet, not gated.
    fn new(pod: Pod, key: Vec<i64>, now: Duration) -> Self {
        QueuedPod {
            pod,
            key,
            attempts: 0,
            timestamp: now,
            seq: 0,
            unschedulable_plugins: BTreeSet::new(),
            gated_by: None,
            last_failure: None,
            initial_attempt: None,
            first_attempt: None,
            regate: false,
        }
    }
}

/// Which plugins care about an event, and what they say of a pod.
pub trait HintOracle {
    /// Queue or QueueSkip for `pod`, which `plugin` rejected, after `event`. Plugins
    /// that did not register the event answer QueueSkip; registered ones without a
    /// hint answer Queue; a failing hint answers Queue.
    fn hint(
        &self,
        plugin: &str,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> QueueingHint;
}

/// An event recorded while pods were in flight.
#[derive(Clone, Debug)]
struct RecordedEvent {
    id: u64,
    event: ClusterEvent,
    old: Option<Object>,
    new: Option<Object>,
}

#[derive(Clone, Debug)]
struct InFlight {
    /// Events with an id above this arrived during the pod's cycle; `u64::MAX` once
    /// its binding cycle runs (see [`SchedulingQueue::binding_started`]).
    since: u64,
    /// The pod was deleted during its cycle.
    deleted: bool,
    /// The pod was updated during its cycle: the latest version.
    updated: Option<Pod>,
    /// Activated during its cycle: it goes to activeQ when it comes back.
    activated: bool,
}

/// A pod group in the queue: its namespace and name.
pub type GroupId = (String, String);

/// What an activeQ heap entry stands for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Entity {
    /// A pod, by UID.
    Pod(String),
    /// A pod group whose members wait in activeQ.
    Group(GroupId),
}

/// A pod group with members in activeQ.
#[derive(Clone, Debug)]
struct ActiveGroup {
    /// The group's heap entry is current when its sequence number is this one.
    seq: u64,
    /// The key it is sorted by.
    key: Vec<i64>,
    /// Its members in activeQ, by their own sequence number (arrival order).
    members: std::collections::BTreeMap<u64, String>,
}

/// The pod group a pod belongs to, by its `spec.schedulingGroup`.
fn group_id(pod: &Pod) -> Option<GroupId> {
    let name = pod.scheduling_group.as_ref()?;
    Some((pod.namespace.clone(), name.clone()))
}

/// Counts of pods entering a queue, by event, for metrics.
pub type IncomingCounts = HashMap<(String, QueueName), u64>;

/// activeQ, backoffQ, the unschedulable and gated pods, and the pods in flight.
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    config: QueueConfig,
    next_seq: u64,
    /// Pods taken for a scheduling attempt so far (see [`QueuedPod::first_attempt`]).
    attempts_taken: u64,
    active_heap: BinaryHeap<Reverse<(Vec<i64>, u64, Entity)>>,
    active: HashMap<String, QueuedPod>,
    /// The QueueSort key of each pod group the scheduler keyed; a member of a group
    /// without one enters activeQ as a pod of its own.
    group_keys: HashMap<GroupId, Vec<i64>>,
    /// The pod groups with members in activeQ.
    active_groups: HashMap<GroupId, ActiveGroup>,
    backoff_heap: BinaryHeap<Reverse<(Duration, u64, String)>>,
    backoff: HashMap<String, QueuedPod>,
    unschedulable: HashMap<String, QueuedPod>,
    in_flight: HashMap<String, InFlight>,
    /// How many pods in flight have each `since`: the first key is the oldest cycle's
    /// start, before which no kept event is needed.
    in_flight_since: std::collections::BTreeMap<u64, usize>,
    /// Events in id order, from the oldest pod in flight's start on.
    events: std::collections::VecDeque<RecordedEvent>,
    /// Events with an id below this were dropped for room while a pod in flight
    /// might have needed them.
    events_dropped_before: u64,
    next_event_id: u64,
    incoming: IncomingCounts,
    metrics: Option<berth_runtime::metrics::Metrics>,
    /// Pods on their way to activeQ whose key and gate must be asked first (see
    /// [`QueuedPod::regate`]); the scheduler takes them before it pops.
    regating: Vec<QueuedPod>,
}

fn backoff_duration(config: &QueueConfig, attempts: u32) -> Duration {
    let mut d = config.initial_backoff;
    for _ in 1..attempts.max(1) {
        d = d.saturating_mul(2);
        if d > config.max_backoff {
            return config.max_backoff;
        }
    }
    d.min(config.max_backoff)
}

impl SchedulingQueue {
    /// An empty queue.
    pub fn new(config: QueueConfig) -> Self {
        SchedulingQueue {
            config,
            ..Self::default()
        }
    }

    /// The number the next pod taken for a first attempt gets (see
    /// [`QueuedPod::first_attempt`]).
    pub fn next_first_attempt(&self) -> u64 {
        self.attempts_taken
    }

    /// The settings.
    pub fn config(&self) -> QueueConfig {
        self.config
    }

    /// The backoff a pod with this many attempts gets: `initial × 2^(attempts−1)`,
    /// capped.
    pub fn backoff_for(&self, attempts: u32) -> Duration {
        backoff_duration(&self.config, attempts)
    }

    fn backoff_expiry(&self, qp: &QueuedPod) -> Duration {
        qp.timestamp + backoff_duration(&self.config, qp.attempts)
    }

    fn count_incoming(&mut self, event: &str, queue: QueueName) {
        *self.incoming.entry((event.to_owned(), queue)).or_default() += 1;
        if let Some(m) = &self.metrics {
            m.count_incoming(event, queue.as_str());
        }
    }

    /// Counts the pods entering each queue in these metrics too.
    pub fn set_metrics(&mut self, metrics: berth_runtime::metrics::Metrics) {
        self.metrics = Some(metrics);
    }

    /// Pods that entered each queue, by event (for metrics).
    pub fn incoming(&self) -> &IncomingCounts {
        &self.incoming
    }

    fn push_active(&mut self, mut qp: QueuedPod, event: &str) {
        if qp.regate {
            // Not before its key and gate are asked again.
            self.regating.push(qp);
            return;
        }
        self.next_seq += 1;
        qp.seq = self.next_seq;
        let uid = qp.pod.uid.clone();
        match group_id(&qp.pod).filter(|g| self.group_keys.contains_key(g)) {
            Some(g) => {
                // The group's entry is placed by its first member to arrive.
                let group = match self.active_groups.entry(g.clone()) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        self.next_seq += 1;
                        let key = self.group_keys[&g].clone();
                        self.active_heap.push(Reverse((
                            key.clone(),
                            self.next_seq,
                            Entity::Group(g),
                        )));
                        e.insert(ActiveGroup {
                            seq: self.next_seq,
                            key,
                            members: Default::default(),
                        })
                    }
                };
                group.members.insert(qp.seq, uid.clone());
            }
            None => {
                self.active_heap
                    .push(Reverse((qp.key.clone(), qp.seq, Entity::Pod(uid.clone()))))
            }
        }
        self.active.insert(uid, qp);
        self.count_incoming(event, QueueName::Active);
    }

    /// Takes a pod out of activeQ (its heap entry, or its group's once the group has
    /// no member left there, goes stale).
    fn take_active(&mut self, uid: &str) -> Option<QueuedPod> {
        let qp = self.active.remove(uid)?;
        if let Some(g) = group_id(&qp.pod)
            && let Some(group) = self.active_groups.get_mut(&g)
        {
            group.members.remove(&qp.seq);
            if group.members.is_empty() {
                self.active_groups.remove(&g);
            }
        }
        Some(qp)
    }

    /// The QueueSort key of a pod group (the plugin's key of the pod that stands for
    /// it): from now on its members enter activeQ under it. A group with members in
    /// activeQ already is placed anew when its key changed.
    pub fn set_group_key(&mut self, group: GroupId, key: Vec<i64>) {
        if let Some(active) = self.active_groups.get_mut(&group)
            && active.key != key
        {
            self.next_seq += 1;
            active.seq = self.next_seq;
            active.key = key.clone();
            self.active_heap.push(Reverse((
                key.clone(),
                active.seq,
                Entity::Group(group.clone()),
            )));
        }
        self.group_keys.insert(group, key);
    }

    /// Whether the scheduler gave this pod group a key (see
    /// [`SchedulingQueue::set_group_key`]).
    pub fn has_group_key(&self, group: &GroupId) -> bool {
        self.group_keys.contains_key(group)
    }

    /// The pod groups that have a key.
    pub fn keyed_groups(&self) -> impl Iterator<Item = &GroupId> {
        self.group_keys.keys()
    }

    /// A pod group is gone (or its key must be asked again): its members in activeQ
    /// stay there as pods of their own, each in its own place by its own key.
    pub fn forget_group(&mut self, group: &GroupId) {
        self.group_keys.remove(group);
        if let Some(active) = self.active_groups.remove(group) {
            for (seq, uid) in active.members {
                let key = self.active[&uid].key.clone();
                self.active_heap.push(Reverse((key, seq, Entity::Pod(uid))));
            }
        }
    }

    fn push_backoff(&mut self, mut qp: QueuedPod, event: &str) {
        self.next_seq += 1;
        qp.seq = self.next_seq;
        let uid = qp.pod.uid.clone();
        let expiry = self.backoff_expiry(&qp);
        self.backoff_heap
            .push(Reverse((expiry, qp.seq, uid.clone())));
        self.backoff.insert(uid, qp);
        self.count_incoming(event, QueueName::Backoff);
    }

    /// Moves a pod out of unschedulable: to backoffQ while its backoff runs, else to
    /// activeQ (upstream's `requeuePodWithQueueingStrategy`).
    fn requeue(&mut self, qp: QueuedPod, now: Duration, event: &str) -> QueueName {
        if qp.attempts > 0 && self.backoff_expiry(&qp) > now {
            self.push_backoff(qp, event);
            QueueName::Backoff
        } else {
            self.push_active(qp, event);
            QueueName::Active
        }
    }

    /// A pending pod whose QueueSort key or PreEnqueue gate failed (a plugin trapped or
    /// missed its deadline): it backs off as after an error, one attempt counted, and
    /// its key and gate are asked again when it would enter activeQ.
    pub fn add_failed(&mut self, pod: Pod, message: String, now: Duration) {
        let qp = match self.take_waiting(&pod.uid) {
            Some(mut qp) => {
                qp.pod = pod;
                qp
            }
            None => QueuedPod::new(pod, Vec::new(), now),
        };
        self.regate_failed(qp, message, now);
    }

    /// Backs a pod taken by [`SchedulingQueue::take_regating`] off again: its key or
    /// gate failed once more.
    pub fn regate_failed(&mut self, mut qp: QueuedPod, message: String, now: Duration) {
        qp.regate = true;
        qp.attempts += 1;
        qp.timestamp = now;
        qp.gated_by = None;
        qp.unschedulable_plugins.clear();
        qp.last_failure = Some(message);
        self.push_backoff(qp, "PreEnqueueFailure");
    }

    /// The pods that would enter activeQ but whose key and gate must be asked first;
    /// give each back through [`SchedulingQueue::regated`] or
    /// [`SchedulingQueue::regate_failed`].
    pub fn take_regating(&mut self) -> Vec<QueuedPod> {
        std::mem::take(&mut self.regating)
    }

    /// A pod taken by [`SchedulingQueue::take_regating`] with its key and gate: to
    /// activeQ, or gated.
    pub fn regated(
        &mut self,
        mut qp: QueuedPod,
        key: Vec<i64>,
        gate: Option<(String, String)>,
        event: &str,
    ) {
        qp.regate = false;
        qp.key = key;
        match gate {
            Some((plugin, message)) => {
                qp.gated_by = Some(plugin);
                qp.last_failure = Some(message);
                self.count_incoming(event, QueueName::Gated);
                self.unschedulable.insert(qp.pod.uid.clone(), qp);
            }
            None => {
                qp.lift_gate();
                self.push_active(qp, event);
            }
        }
    }

    /// A new pending pod. `gate` names the PreEnqueue plugin that keeps it out, with
    /// its message.
    pub fn add(&mut self, pod: Pod, key: Vec<i64>, gate: Option<(String, String)>, now: Duration) {
        let gated = gate.is_some();
        let (gated_by, last_failure) = match gate {
            Some((p, m)) => (Some(p), Some(m)),
            None => (None, None),
        };
        let qp = QueuedPod {
            gated_by,
            last_failure,
            ..QueuedPod::new(pod, key, now)
        };
        if gated {
            self.count_incoming("PodAdd", QueueName::Gated);
            self.unschedulable.insert(qp.pod.uid.clone(), qp);
        } else {
            self.push_active(qp, "PodAdd");
        }
    }

    /// Takes the pod that sorts first out of activeQ; it is in flight until
    /// [`SchedulingQueue::done`] or [`SchedulingQueue::requeue_failed`].
    /// A pod group's entry yields its earliest member; the group keeps its place
    /// while other members of it remain in activeQ (the scheduler takes them into the
    /// member's cycle with [`SchedulingQueue::pop_specific`]).
    pub fn pop(&mut self) -> Option<QueuedPod> {
        while let Some(Reverse((key, seq, entity))) = self.active_heap.pop() {
            // Entries of pods or groups removed or re-added since are stale; skip them.
            let uid = match entity {
                Entity::Pod(uid) => {
                    if self.active.get(&uid).is_none_or(|q| q.seq != seq) {
                        continue;
                    }
                    uid
                }
                Entity::Group(g) => {
                    let Some(group) = self.active_groups.get(&g).filter(|a| a.seq == seq) else {
                        continue;
                    };
                    let Some((_, uid)) = group.members.first_key_value() else {
                        continue;
                    };
                    let uid = uid.clone();
                    if group.members.len() > 1 {
                        self.active_heap.push(Reverse((key, seq, Entity::Group(g))));
                    }
                    uid
                }
            };
            let qp = self.take_active(&uid)?;
            return Some(self.take_off(qp));
        }
        None
    }

    /// The pod [`SchedulingQueue::pop`] would take now, left where it is (a scan of
    /// activeQ: for `explain` and tests, not the scheduling loop).
    pub fn peek(&self) -> Option<&QueuedPod> {
        let (_, uid) = self
            .active_heap
            .iter()
            .filter_map(|Reverse(entry @ (_, seq, entity))| {
                let uid = match entity {
                    Entity::Pod(uid) => self
                        .active
                        .get(uid)
                        .filter(|q| q.seq == *seq)
                        .map(|_| uid)?,
                    Entity::Group(g) => {
                        let group = self.active_groups.get(g).filter(|a| a.seq == *seq)?;
                        group.members.first_key_value()?.1
                    }
                };
                Some((entry, uid))
            })
            .min_by(|a, b| a.0.cmp(b.0))?;
        self.active.get(uid)
    }

    /// Takes a pod group's member into its group's cycle, wherever it waits
    /// (upstream's `PopSpecificPod`): activeQ, backoffQ (its backoff cut short) or
    /// unschedulable. A gated pod, one whose key and gate must be asked again, and
    /// one in flight stay where they are: `None`.
    pub fn pop_specific(&mut self, uid: &str) -> Option<QueuedPod> {
        // A heap entry left behind goes stale, as on every removal.
        let qp = match self.take_active(uid) {
            Some(qp) => qp,
            None => self.take_retriable(uid)?,
        };
        Some(self.take_off(qp))
    }

    /// Takes a pod out of unschedulable (not a gated one) or backoffQ, for a move
    /// ahead of its time; a backoffQ heap entry goes stale with it.
    fn take_retriable(&mut self, uid: &str) -> Option<QueuedPod> {
        if self
            .unschedulable
            .get(uid)
            .is_some_and(|q| q.gated_by.is_none())
        {
            self.unschedulable.remove(uid)
        } else {
            self.backoff.remove(uid)
        }
    }

    /// A pod leaves the queue for a scheduling cycle: one more attempt, in flight.
    fn take_off(&mut self, mut qp: QueuedPod) -> QueuedPod {
        qp.attempts += 1;
        qp.initial_attempt
            .get_or_insert_with(std::time::Instant::now);
        if qp.first_attempt.is_none() {
            qp.first_attempt = Some(self.attempts_taken);
        }
        self.attempts_taken += 1;
        let since = self.next_event_id;
        *self.in_flight_since.entry(since).or_default() += 1;
        let flight = InFlight {
            since,
            deleted: false,
            updated: None,
            activated: false,
        };
        if let Some(old) = self.in_flight.insert(qp.pod.uid.clone(), flight) {
            self.forget_since(old.since);
        }
        qp
    }

    /// The pod group of these waiting pods appeared or changed (its PodGroup object,
    /// which no plugin's queueing hint can be asked about: the WIT's events have no
    /// PodGroup yet): each moves as after an event that may help it. A gated one has
    /// its key and gate asked again; an unschedulable one goes to backoffQ or
    /// activeQ. Pods in activeQ, backoffQ or in flight are left as they are. Returns
    /// how many moved.
    pub fn group_changed(&mut self, uids: &[String], now: Duration, event: &str) -> usize {
        let mut moved = 0;
        for uid in uids {
            let Some(gated) = self.unschedulable.get(uid).map(|q| q.gated_by.is_some()) else {
                continue;
            };
            if gated {
                moved += usize::from(self.release_hold(uid));
            } else if let Some(qp) = self.unschedulable.remove(uid) {
                self.requeue(qp, now, event);
                moved += 1;
            }
        }
        moved
    }

    /// The pod's cycle is over (bound, or requeued): forget its in-flight record.
    pub fn done(&mut self, uid: &str) {
        self.take_flight(uid);
        self.prune_events();
    }

    /// Ends `uid`'s in-flight record, if it has one.
    fn take_flight(&mut self, uid: &str) -> Option<InFlight> {
        let flight = self.in_flight.remove(uid)?;
        self.forget_since(flight.since);
        Some(flight)
    }

    fn forget_since(&mut self, since: u64) {
        if since == u64::MAX {
            return;
        }
        if let std::collections::btree_map::Entry::Occupied(mut e) =
            self.in_flight_since.entry(since)
        {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
    }

    /// The pod's binding cycle runs (past Permit): however it ends, no cluster event
    /// decides where it goes (an error backs off), so the queue keeps none for it.
    pub fn binding_started(&mut self, uid: &str) {
        let Some(since) = self
            .in_flight
            .get_mut(uid)
            .map(|f| std::mem::replace(&mut f.since, u64::MAX))
        else {
            return;
        };
        if since != u64::MAX {
            self.forget_since(since);
            self.prune_events();
        }
    }

    /// Drops the events no pod in flight needs: those before the oldest one's start.
    fn prune_events(&mut self) {
        match self.in_flight_since.keys().next() {
            Some(&oldest) => {
                while self.events.front().is_some_and(|e| e.id < oldest) {
                    self.events.pop_front();
                }
            }
            None => self.events.clear(),
        }
    }

    /// Whether the pod is in flight (popped, not yet done).
    pub fn is_in_flight(&self, uid: &str) -> bool {
        self.in_flight.contains_key(uid)
    }

    /// A failed attempt: the pod goes back, with upstream's rules. `plugins` are the
    /// plugins that rejected it (empty for an error: then it backs off). If an event
    /// during its cycle may have helped it, it backs off instead of waiting in
    /// unschedulable. A pod deleted during its cycle is dropped. Returns where it went.
    pub fn requeue_failed(
        &mut self,
        mut qp: QueuedPod,
        plugins: BTreeSet<String>,
        message: String,
        now: Duration,
        oracle: &dyn HintOracle,
    ) -> Option<QueueName> {
        let uid = qp.pod.uid.clone();
        let flight = self.take_flight(&uid);
        if flight.as_ref().is_some_and(|f| f.deleted) {
            self.prune_events();
            return None;
        }
        if let Some(newer) = flight.as_ref().and_then(|f| f.updated.clone()) {
            qp.pod = newer;
        }
        qp.timestamp = now;
        qp.unschedulable_plugins = plugins;
        qp.last_failure = Some(message);
        let queue = if flight.as_ref().is_some_and(|f| f.activated) {
            self.push_active(qp, "ForceActivate");
            QueueName::Active
        } else if qp.unschedulable_plugins.is_empty() {
            self.push_backoff(qp, "ScheduleAttemptFailure");
            QueueName::Backoff
        } else {
            let since = flight.map_or(u64::MAX, |f| f.since);
            // An event of its cycle dropped for room may have been the one that helps.
            let missed = since < self.events_dropped_before;
            let helped = missed
                || self
                    .events
                    .iter()
                    .filter(|e| e.id >= since)
                    .any(|e| self.queueing_hint(&qp, e, oracle) == QueueingHint::Queue);
            if helped {
                self.push_backoff(qp, "ScheduleAttemptFailure");
                QueueName::Backoff
            } else {
                self.count_incoming("ScheduleAttemptFailure", QueueName::Unschedulable);
                self.unschedulable.insert(uid, qp);
                QueueName::Unschedulable
            }
        };
        self.prune_events();
        Some(queue)
    }

    fn queueing_hint(
        &self,
        qp: &QueuedPod,
        e: &RecordedEvent,
        oracle: &dyn HintOracle,
    ) -> QueueingHint {
        let any_queue = qp.unschedulable_plugins.iter().any(|p| {
            oracle.hint(p, &e.event, &qp.pod, e.old.as_ref(), e.new.as_ref()) == QueueingHint::Queue
        });
        if any_queue {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    }

    /// A cluster event: unschedulable pods that a rejecting plugin's hint says may now
    /// fit move to backoffQ or activeQ. The event is also kept for the pods in flight.
    /// Returns how many pods moved.
    pub fn on_event(
        &mut self,
        event: ClusterEvent,
        old: Option<Object>,
        new: Option<Object>,
        now: Duration,
        oracle: &dyn HintOracle,
    ) -> usize {
        let recorded = RecordedEvent {
            id: self.next_event_id,
            event,
            old,
            new,
        };
        self.next_event_id += 1;
        let label = event_label(&event);
        // A gated pod is asked of its gating plugin (upstream's `GatingPlugin`): when
        // the event may let it in, its key and gate are asked again.
        let mut candidates: Vec<(QueueOrder, bool)> = self
            .unschedulable
            .iter()
            .filter(|(_, q)| match &q.gated_by {
                None => self.queueing_hint(q, &recorded, oracle) == QueueingHint::Queue,
                Some(gate) => {
                    oracle.hint(
                        gate,
                        &recorded.event,
                        &q.pod,
                        recorded.old.as_ref(),
                        recorded.new.as_ref(),
                    ) == QueueingHint::Queue
                }
            })
            .map(|(_, q)| (QueueOrder::of(q), q.gated_by.is_some()))
            .collect();
        candidates.sort_unstable();
        let moved = candidates.len();
        for (QueueOrder(_, _, uid), gated) in candidates {
            if gated {
                self.release_hold(&uid);
            } else if let Some(qp) = self.unschedulable.remove(&uid) {
                self.requeue(qp, now, &label);
            }
        }
        if !self.in_flight_since.is_empty() {
            if self.events.len() >= self.config.max_kept_events.max(1)
                && let Some(dropped) = self.events.pop_front()
            {
                self.events_dropped_before = dropped.id + 1;
            }
            self.events.push_back(recorded);
        }
        moved
    }

    /// A pending pod changed. In activeQ or backoffQ it is updated in place; gated, it
    /// is let in once `gate` is None; unschedulable, it moves when a rejecting plugin's
    /// hint says the update may help; in flight, the newer version is used when it
    /// comes back.
    pub fn update(
        &mut self,
        pod: Pod,
        key: Vec<i64>,
        gate: Option<(String, String)>,
        now: Duration,
        oracle: &dyn HintOracle,
    ) {
        let uid = pod.uid.clone();
        if let Some(f) = self.in_flight.get_mut(&uid) {
            f.updated = Some(pod);
            return;
        }
        if let Some(q) = self.active.get_mut(&uid) {
            q.pod = pod;
            return;
        }
        if let Some(q) = self.backoff.get_mut(&uid) {
            q.pod = pod;
            return;
        }
        if let Some(q) = self.regating.iter_mut().find(|q| q.pod.uid == uid) {
            // On its way to activeQ: its key and gate are asked with this version.
            q.pod = pod;
            return;
        }
        let Some(mut qp) = self.unschedulable.remove(&uid) else {
            // Unknown: treat as new.
            self.add(pod, key, gate, now);
            return;
        };
        let old = std::mem::replace(&mut qp.pod, pod);
        qp.key = key;
        if qp.gated_by.is_some() {
            match gate {
                Some((p, m)) => {
                    qp.gated_by = Some(p);
                    qp.last_failure = Some(m);
                    self.unschedulable.insert(uid, qp);
                }
                None => {
                    qp.lift_gate();
                    qp.last_failure = None;
                    self.push_active(qp, "PodSchedulingGatesEliminated");
                }
            }
            return;
        }
        let event = ClusterEvent::new(
            EventResource::UnscheduledPod,
            pod_update_actions(&old, &qp.pod),
        );
        let recorded = RecordedEvent {
            id: u64::MAX,
            event,
            old: Some(Object::Pod(old)),
            new: Some(Object::Pod(qp.pod.clone())),
        };
        if self.queueing_hint(&qp, &recorded, oracle) == QueueingHint::Queue {
            self.requeue(qp, now, "UnscheduledPodUpdate");
        } else {
            self.unschedulable.insert(uid, qp);
        }
    }

    /// A pending pod was deleted: it leaves every queue (and, in flight, is dropped
    /// when its cycle ends). Returns whether the queue knew it.
    pub fn delete(&mut self, uid: &str) -> bool {
        if let Some(f) = self.in_flight.get_mut(uid) {
            f.deleted = true;
            return true;
        }
        self.take_waiting(uid).is_some()
    }

    /// Takes a pod out of wherever it waits (activeQ, backoffQ, unschedulable or
    /// gated, or on its way to activeQ); not one in flight. A stale heap entry is
    /// left behind, as every removal does: `pop` and `flush_backoff` skip it.
    fn take_waiting(&mut self, uid: &str) -> Option<QueuedPod> {
        self.unschedulable
            .remove(uid)
            .or_else(|| self.backoff.remove(uid))
            .or_else(|| self.take_active(uid))
            .or_else(|| {
                let i = self.regating.iter().position(|q| q.pod.uid == uid)?;
                Some(self.regating.swap_remove(i))
            })
    }

    /// Whether a pod in flight was deleted during its cycle.
    pub fn deleted_in_flight(&self, uid: &str) -> bool {
        self.in_flight.get(uid).is_some_and(|f| f.deleted)
    }

    /// Moves pods whose backoff expired to activeQ (run every second, as upstream).
    pub fn flush_backoff(&mut self, now: Duration) -> usize {
        let mut moved = 0;
        while let Some(Reverse((expiry, seq, uid))) = self.backoff_heap.peek().cloned() {
            if expiry > now {
                break;
            }
            self.backoff_heap.pop();
            if self.backoff.get(&uid).is_some_and(|q| q.seq == seq) {
                let qp = self.backoff.remove(&uid).expect("checked");
                self.push_active(qp, "BackoffComplete");
                moved += 1;
            }
        }
        moved
    }

    /// Moves a pending pod to activeQ at once, whatever its backoff (upstream's
    /// `Activate`): from unschedulable or backoffQ now, or, in flight, when its cycle
    /// ends in failure. A gated pod stays gated. False when the pod is not pending here.
    pub fn activate(&mut self, uid: &str) -> bool {
        if let Some(f) = self.in_flight.get_mut(uid) {
            f.activated = true;
            return true;
        }
        match self.take_retriable(uid) {
            Some(qp) => {
                self.push_active(qp, "ForceActivate");
                true
            }
            None => false,
        }
    }

    /// Gates a pending pod where it waits, as if `plugin`'s PreEnqueue had just
    /// refused it with `message` (a preemptor whose evictions are under way): no event,
    /// backoff or activation lets it in until [`SchedulingQueue::release_hold`]. False
    /// when the pod is not waiting here (in flight, or unknown).
    pub fn hold(&mut self, uid: &str, plugin: &str, message: &str) -> bool {
        let Some(mut qp) = self.take_waiting(uid) else {
            return false;
        };
        qp.gated_by = Some(plugin.to_owned());
        qp.last_failure = Some(message.to_owned());
        self.count_incoming("PreemptionStarted", QueueName::Gated);
        self.unschedulable.insert(uid.to_owned(), qp);
        true
    }

    /// Lets a gated pod's PreEnqueue gates be asked again (its hold ended): it joins
    /// the pods whose key and gate the scheduler asks before they enter activeQ
    /// ([`SchedulingQueue::take_regating`]). False when the pod is not gated here.
    pub fn release_hold(&mut self, uid: &str) -> bool {
        if self
            .unschedulable
            .get(uid)
            .is_none_or(|q| q.gated_by.is_none())
        {
            return false;
        }
        let mut qp = self.unschedulable.remove(uid).expect("checked");
        qp.regate = true;
        self.regating.push(qp);
        true
    }

    /// Retries pods that have been unschedulable longer than the limit (run every 30
    /// seconds, as upstream).
    pub fn flush_unschedulable_leftover(&mut self, now: Duration) -> usize {
        let limit = self.config.max_in_unschedulable;
        let mut old: Vec<QueueOrder> = self
            .unschedulable
            .values()
            .filter(|q| q.gated_by.is_none() && now.saturating_sub(q.timestamp) > limit)
            .map(QueueOrder::of)
            .collect();
        old.sort_unstable();
        for QueueOrder(_, _, uid) in &old {
            if let Some(qp) = self.unschedulable.remove(uid) {
                self.requeue(qp, now, "UnschedulableTimeout");
            }
        }
        old.len()
    }

    /// When the earliest backoff of a pod with fewer than `max_attempts` attempts
    /// ends, rounded up to the next backoff flush (a virtual clock jumps there).
    pub fn next_backoff_flush(&self, max_attempts: u32) -> Option<Duration> {
        let expiry = self
            .backoff
            .values()
            .filter(|q| q.attempts < max_attempts)
            .map(|q| self.backoff_expiry(q))
            .min()?;
        let tick = BACKOFF_FLUSH_INTERVAL.as_nanos();
        let n = expiry.as_nanos().div_ceil(tick);
        Some(Duration::from_nanos((n * tick) as u64))
    }

    /// How many pods wait in each queue (gated pods apart).
    pub fn pending(&self) -> HashMap<QueueName, usize> {
        let gated = self
            .unschedulable
            .values()
            .filter(|q| q.gated_by.is_some())
            .count();
        HashMap::from([
            (QueueName::Active, self.active.len()),
            (QueueName::Backoff, self.backoff.len()),
            (QueueName::Unschedulable, self.unschedulable.len() - gated),
            (QueueName::Gated, gated),
        ])
    }

    /// How many waiting pods each plugin keeps out, by `(plugin, profile)`: a pod
    /// counts for each plugin that rejected its last attempt and for the PreEnqueue
    /// plugin that gated it, from then until its next attempt starts, even once the
    /// gate lets it in (upstream's `scheduler_unschedulable_pods`, with its 1.37
    /// fixes: counted once per plugin, and not at all once deleted); a pod in flight
    /// counts for none.
    pub fn unschedulable_by_plugin(&self) -> std::collections::BTreeMap<(String, String), usize> {
        let mut counts = std::collections::BTreeMap::new();
        for q in self.waiting().chain(self.regating.iter()) {
            if q.unschedulable_plugins.is_empty() && q.gated_by.is_none() {
                continue;
            }
            let gate = q
                .gated_by
                .as_ref()
                .filter(|g| !q.unschedulable_plugins.contains(*g));
            for plugin in q.unschedulable_plugins.iter().chain(gate) {
                *counts
                    .entry((plugin.clone(), q.pod.scheduler_name.clone()))
                    .or_default() += 1;
            }
        }
        counts
    }

    /// Pods waiting in any queue (gated ones and those on their way to activeQ
    /// included), not those in flight.
    pub fn waiting_len(&self) -> usize {
        self.active.len() + self.backoff.len() + self.unschedulable.len() + self.regating.len()
    }

    /// Pods in a scheduling or binding cycle.
    pub fn in_flight_len(&self) -> usize {
        self.in_flight.len()
    }

    /// Cluster events kept for the pods in flight (each with its objects).
    pub fn events_kept(&self) -> usize {
        self.events.len()
    }

    /// Where a pod waits, if it does.
    pub fn queue_of(&self, uid: &str) -> Option<QueueName> {
        if self.active.contains_key(uid) {
            Some(QueueName::Active)
        } else if self.backoff.contains_key(uid) || self.regating.iter().any(|q| q.pod.uid == uid) {
            Some(QueueName::Backoff)
        } else {
            self.unschedulable.get(uid).map(|q| {
                if q.gated_by.is_some() {
                    QueueName::Gated
                } else {
                    QueueName::Unschedulable
                }
            })
        }
    }

    /// A waiting pod by UID.
    pub fn get(&self, uid: &str) -> Option<&QueuedPod> {
        self.active
            .get(uid)
            .or_else(|| self.backoff.get(uid))
            .or_else(|| self.unschedulable.get(uid))
    }

    /// UIDs of the pods in flight.
    pub fn in_flight(&self) -> HashSet<String> {
        self.in_flight.keys().cloned().collect()
    }

    /// Every pod waiting in a queue (activeQ, backoffQ, unschedulable and gated), not
    /// those in flight.
    pub fn waiting(&self) -> impl Iterator<Item = &QueuedPod> {
        self.active
            .values()
            .chain(self.backoff.values())
            .chain(self.unschedulable.values())
    }

    /// Gives waiting pods new QueueSort keys (by UID; pods not named keep theirs) and
    /// pod groups theirs (groups not named are forgotten, see
    /// [`SchedulingQueue::forget_group`]), and puts activeQ in the new order. Enqueue
    /// order still breaks ties, so entities of equal keys keep their place. For a
    /// QueueSort plugin replaced while the pods wait.
    pub fn rekey(
        &mut self,
        keys: &HashMap<String, Vec<i64>>,
        group_keys: &HashMap<GroupId, Vec<i64>>,
    ) {
        let forgotten: Vec<GroupId> = self
            .group_keys
            .keys()
            .filter(|g| !group_keys.contains_key(*g))
            .cloned()
            .collect();
        for g in &forgotten {
            self.forget_group(g);
        }
        for q in self
            .active
            .values_mut()
            .chain(self.backoff.values_mut())
            .chain(self.unschedulable.values_mut())
        {
            if let Some(k) = keys.get(&q.pod.uid) {
                q.key = k.clone();
            }
        }
        for (g, key) in group_keys {
            self.group_keys.insert(g.clone(), key.clone());
            if let Some(active) = self.active_groups.get_mut(g) {
                active.key = key.clone();
            }
        }
        let groups = &self.active_groups;
        let pods = self
            .active
            .values()
            .filter(|q| !group_id(&q.pod).is_some_and(|g| groups.contains_key(&g)))
            .map(|q| Reverse((q.key.clone(), q.seq, Entity::Pod(q.pod.uid.clone()))));
        let groups = groups
            .iter()
            .map(|(g, a)| Reverse((a.key.clone(), a.seq, Entity::Group(g.clone()))));
        self.active_heap = pods.chain(groups).collect();
    }

    /// Unschedulable pods that one of `plugins` rejected (their last attempt) move to
    /// backoffQ or activeQ, as after an event that may help them (`event` names it
    /// in the incoming-pods metric): those plugins were replaced or reconfigured, and
    /// the new version may decide otherwise, or what they waited for came. Gated pods
    /// stay (see [`SchedulingQueue::gated_by`]). Returns how many moved.
    pub fn move_rejected_by(
        &mut self,
        plugins: &BTreeSet<String>,
        now: Duration,
        event: &str,
    ) -> usize {
        let mut moving: Vec<QueueOrder> = self
            .unschedulable
            .values()
            .filter(|q| q.gated_by.is_none())
            .filter(|q| q.unschedulable_plugins.iter().any(|p| plugins.contains(p)))
            .map(QueueOrder::of)
            .collect();
        moving.sort_unstable();
        for QueueOrder(_, _, uid) in &moving {
            if let Some(qp) = self.unschedulable.remove(uid) {
                self.requeue(qp, now, event);
            }
        }
        moving.len()
    }

    /// The gated pods a PreEnqueue plugin among `plugins` keeps out.
    pub fn gated_by(&self, plugins: &BTreeSet<String>) -> Vec<Pod> {
        let mut gated: Vec<&QueuedPod> = self
            .unschedulable
            .values()
            .filter(|q| q.gated_by.as_ref().is_some_and(|p| plugins.contains(p)))
            .collect();
        gated.sort_unstable_by_key(|q| QueueOrder::of(q));
        gated.into_iter().map(|q| q.pod.clone()).collect()
    }
}

/// The order in which pods leave the unschedulable set together (after an event, a
/// flush, a reload): the earlier queued first, as upstream's queue orders pods of equal
/// sort keys by timestamp; then the order they last entered activeQ or backoffQ; then
/// UID. The set is a hash map, whose order differs from one process to the next:
/// pods moved in it would pop in a different order on every run, since pods of equal
/// keys pop in the order they were pushed.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct QueueOrder(Duration, u64, String);

impl QueueOrder {
    fn of(q: &QueuedPod) -> Self {
        QueueOrder(q.timestamp, q.seq, q.pod.uid.clone())
    }
}

/// The metric label of an event, e.g. `NodeAdd`, `AssignedPodDelete`.
pub fn event_label(e: &ClusterEvent) -> String {
    let resource = match e.resource {
        EventResource::AssignedPod => "AssignedPod",
        EventResource::UnscheduledPod => "UnscheduledPod",
        EventResource::Node => "Node",
        EventResource::Namespace => "Namespace",
        EventResource::PersistentVolumeClaim => "PersistentVolumeClaim",
        EventResource::PersistentVolume => "PersistentVolume",
        EventResource::StorageClass => "StorageClass",
        EventResource::CsiNode => "CSINode",
        EventResource::CsiDriver => "CSIDriver",
        EventResource::CsiStorageCapacity => "CSIStorageCapacity",
        EventResource::ResourceClaim => "ResourceClaim",
        EventResource::ResourceSlice => "ResourceSlice",
        EventResource::DeviceClass => "DeviceClass",
    };
    let action = if e.actions == ActionType::ADD {
        "Add"
    } else if e.actions == ActionType::DELETE {
        "Delete"
    } else {
        "Update"
    };
    format!("{resource}{action}")
}

/// What changed between two versions of a pod, as event actions.
pub fn pod_update_actions(old: &Pod, new: &Pod) -> ActionType {
    let mut a = ActionType::default();
    if old.labels != new.labels {
        a = a | ActionType::UPDATE_POD_LABEL;
    }
    if old.tolerations != new.tolerations {
        a = a | ActionType::UPDATE_POD_TOLERATION;
    }
    if !old.scheduling_gates.is_empty() && new.scheduling_gates.is_empty() {
        a = a | ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED;
    }
    let (o, n) = (old.requests(), new.requests());
    if n.milli_cpu < o.milli_cpu || n.memory < o.memory || n.ephemeral_storage < o.ephemeral_storage
    {
        a = a | ActionType::UPDATE_POD_SCALE_DOWN;
    }
    // The claims made for the pod (upstream's extractPodGeneratedResourceClaimChange).
    if old.resource_claim_statuses != new.resource_claim_statuses
        || old.extended_resource_claim_status != new.extended_resource_claim_status
    {
        a = a | ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM;
    }
    if a == ActionType::default() {
        a = ActionType::UPDATE_OTHER;
    }
    a
}

/// What changed between two versions of a node, as event actions.
pub fn node_update_actions(old: &berth_sdk::Node, new: &berth_sdk::Node) -> ActionType {
    let mut a = ActionType::default();
    if old.allocatable != new.allocatable {
        a = a | ActionType::UPDATE_NODE_ALLOCATABLE;
    }
    if old.labels != new.labels {
        a = a | ActionType::UPDATE_NODE_LABEL;
    }
    if old.taints != new.taints || old.unschedulable != new.unschedulable {
        a = a | ActionType::UPDATE_NODE_TAINT;
    }
    if a == ActionType::default() {
        a = ActionType::UPDATE_OTHER;
    }
    a
}

#[cfg(test)]
mod tests;
