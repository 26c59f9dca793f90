//! Events and pod status, as kube-scheduler writes them: an `events.k8s.io/v1` event
//! `Scheduled` (Normal, action `Binding`) when a pod is bound, `FailedScheduling`
//! (Warning, action `Scheduling`) when an attempt fails, and on failure the pod's
//! `PodScheduled` condition set to False with reason `Unschedulable` or
//! `SchedulerError` and the attempt's message; after a pod group's cycle, its
//! PodGroup's `PodGroupInitiallyScheduled` condition (`pod_group_status`).
//!
//! The scheduling loop only queues a record; a task on the tokio runtime writes it,
//! under the event client's rate limit, and a failed write is logged, never retried
//! in a way that could hold up scheduling. At most [`QUEUED_RECORDS`] records wait,
//! as client-go's event broadcaster keeps 1000 and drops the rest: an API server
//! that does not keep up costs events (counted and logged), never the scheduler's
//! memory.
//!
//! Repeated events fold into an event series as client-go's event broadcaster folds
//! them (`k8s.io/client-go/tools/events`): an event like one written in the last six
//! minutes (same pod, reason, action and reporting controller, whatever its note) is
//! not written again; its first repeat sets the original's `series` (count 2), later
//! ones are counted and the count written every thirty minutes, when the series has
//! been quiet for six, or at shutdown ([`KubeRecorder::flush`]). What the series
//! remember is bounded: a deleted pod's are forgotten, and at most [`SERIES_PODS`]
//! pods' are kept (the quietest dropped first).

use super::pod_group_status::{self, PendingOutcomes};
use super::{KubeCluster, error_message};
use crate::{FailureReason, PodGroupOutcome, Recorder};
use berth_sdk::Pod;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::events::v1::EventSeries;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

/// What a record says of its pod.
#[derive(Clone)]
struct PodRef {
    namespace: String,
    name: String,
    uid: String,
}

impl PodRef {
    fn of(pod: &Pod) -> Self {
        PodRef {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

enum Record {
    Event {
        reporting_controller: String,
        pod: PodRef,
        normal: bool,
        reason: &'static str,
        action: &'static str,
        note: String,
    },
    Condition {
        pod: PodRef,
        reason: FailureReason,
        message: String,
    },
    /// KEP-5501: the `PodScheduled` condition says `NotReadyForScheduling` with the
    /// message, or (`None`) that condition of ours is removed.
    NotReady {
        pod: PodRef,
        message: Option<String>,
    },
    /// Write the newest outcomes of this pod group (kept in [`PendingOutcomes`]).
    PodGroup { namespace: String, name: String },
    /// Write every series count not written yet (at shutdown).
    FlushSeries,
}

/// Records that may wait for the writer.
pub const QUEUED_RECORDS: usize = 1000;

/// The loop's end of the records' queue: a record that finds it full is dropped and
/// counted.
#[derive(Clone)]
struct Outbox {
    tx: mpsc::Sender<Record>,
    dropped: Arc<AtomicU64>,
    pending: Pending,
    /// Told of each drop (the scheduler's metrics count them), once set.
    on_drop: Arc<std::sync::OnceLock<DropCounter>>,
}

/// What is told of each record dropped.
pub type DropCounter = Box<dyn Fn() + Send + Sync>;

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("dropped", &self.dropped)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

/// Records queued or being written, so that a shutdown can wait for them.
#[derive(Debug, Clone, Default)]
struct Pending {
    count: Arc<AtomicUsize>,
    done: Arc<Notify>,
}

impl Pending {
    fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    fn finish(&self) {
        if self.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.done.notify_waiters();
        }
    }

    fn get(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

impl Outbox {
    /// Queues `record`; false when it was dropped.
    fn send(&self, record: Record) -> bool {
        self.pending.add();
        if self.tx.try_send(record).is_err() {
            self.pending.finish();
            if let Some(count) = self.on_drop.get() {
                count();
            }
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n == 1 || n.is_multiple_of(1000) {
                tracing::warn!(
                    dropped = n,
                    "the API server is not keeping up with events and pod conditions: {n} dropped so far"
                );
            }
            return false;
        }
        true
    }
}

/// Writes events and conditions to the API server.
#[derive(Debug, Clone)]
pub struct KubeRecorder {
    outbox: Outbox,
    /// The condition last written per pod UID, so an unchanged one is not written
    /// again (as upstream skips an unchanged status).
    last_condition: Arc<Mutex<HashMap<String, (FailureReason, String)>>>,
    series: Arc<Mutex<SeriesCache>>,
    /// The PreEnqueue holds waiting their delay, and those written.
    not_ready: Arc<Mutex<NotReadyState>>,
    /// The pod groups' outcomes waiting to be written.
    pod_groups: Arc<PendingOutcomes>,
    /// Where the delays run.
    handle: tokio::runtime::Handle,
}

/// How long a PreEnqueue hold (or its end) waits before it is written, as KEP-5501
/// has it: a pod held for a moment costs no write, and the newest verdict of the
/// delay is the one written.
pub const NOT_READY_DELAY: Duration = Duration::from_secs(5);

/// KEP-5501's bookkeeping, by pod UID.
#[derive(Default)]
struct NotReadyState {
    /// The newest verdict of each pod whose delay runs: held with a message, or let
    /// past (`None`).
    waiting: HashMap<String, (PodRef, String, Option<String>)>,
    /// The message last written into each pod's status.
    written: HashMap<String, String>,
}

impl std::fmt::Debug for NotReadyState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotReadyState")
            .field("waiting", &self.waiting.len())
            .field("written", &self.written.len())
            .finish()
    }
}

impl NotReadyState {
    /// Someone else wrote the pod's condition (an attempt failed, it was bound), or
    /// the pod is gone: nothing of ours is left to write or to remove.
    fn forget(&mut self, uid: &str) {
        self.waiting.remove(uid);
        self.written.remove(uid);
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Record")
    }
}

/// Writes that may be in flight at once.
const CONCURRENT_WRITES: usize = 16;

/// How often the series are looked over (ended, refreshed, trimmed).
const SERIES_TICK: Duration = Duration::from_secs(60);

/// One write the writer task makes.
enum Write {
    Record(Record),
    Event(Event),
    Series(SeriesWrite),
    PodGroup { namespace: String, name: String },
}

impl KubeRecorder {
    /// Starts the writer task on `handle`'s runtime.
    pub fn start(cluster: KubeCluster, handle: &tokio::runtime::Handle) -> Self {
        let (tx, mut rx) = mpsc::channel::<Record>(QUEUED_RECORDS);
        let instance = super::hostname();
        let series = Arc::new(Mutex::new(SeriesCache::default()));
        let pending = Pending::default();
        let pod_groups = Arc::new(PendingOutcomes::default());
        let (cache, done, groups) = (series.clone(), pending.clone(), pod_groups.clone());
        handle.spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(CONCURRENT_WRITES));
            let mut tick = tokio::time::interval(SERIES_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let writes = tokio::select! {
                    record = rx.recv() => match record {
                        Some(record) => {
                            let now = Timestamp::now();
                            let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
                            match record {
                                Record::Event { .. } => {
                                    match event_write(&mut cache, &instance, record, now) {
                                        Some(w) => vec![w],
                                        None => {
                                            done.finish();
                                            continue;
                                        }
                                    }
                                }
                                Record::FlushSeries => {
                                    let w: Vec<Write> =
                                        cache.flush().into_iter().map(Write::Series).collect();
                                    // Counted before the flush itself is done, so that a
                                    // waiting flush never sees nothing pending between.
                                    for _ in &w {
                                        done.add();
                                    }
                                    done.finish();
                                    w
                                }
                                Record::PodGroup { namespace, name } => {
                                    vec![Write::PodGroup { namespace, name }]
                                }
                                condition => vec![Write::Record(condition)],
                            }
                        }
                        None => break,
                    },
                    _ = tick.tick() => {
                        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
                        let w: Vec<Write> = cache
                            .tick(Timestamp::now())
                            .into_iter()
                            .map(Write::Series)
                            .collect();
                        for _ in &w {
                            done.add();
                        }
                        w
                    }
                };
                for w in writes {
                    let Ok(permit) = slots.clone().acquire_owned().await else {
                        return;
                    };
                    let (cluster, done, groups) = (cluster.clone(), done.clone(), groups.clone());
                    tokio::spawn(async move {
                        cluster.event_limiter.acquire().await;
                        match w {
                            Write::Record(r) => write(&cluster, r).await,
                            Write::Event(e) => create_event(&cluster, e).await,
                            Write::Series(s) => write_series(&cluster, s).await,
                            Write::PodGroup { namespace, name } => {
                                pod_group_status::write_pending(
                                    &cluster, &groups, &namespace, &name,
                                )
                                .await
                            }
                        }
                        drop(permit);
                        done.finish();
                    });
                }
            }
        });
        KubeRecorder {
            outbox: Outbox {
                tx,
                dropped: Arc::default(),
                pending,
                on_drop: Arc::default(),
            },
            last_condition: Arc::default(),
            series,
            not_ready: Arc::default(),
            pod_groups,
            handle: handle.clone(),
        }
    }

    /// Calls `count` at each record dropped (the first counter set stays).
    pub fn count_drops_with(&self, count: DropCounter) {
        let _ = self.outbox.on_drop.set(count);
    }

    /// Writes what is queued, and every series count not written yet, waiting at most
    /// `timeout`; answers how many records were left unwritten. For a shutdown: the
    /// events of the last attempts reach the cluster.
    pub async fn flush(&self, timeout: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + timeout;
        self.outbox.pending.add();
        if tokio::time::timeout_at(deadline, self.outbox.tx.send(Record::FlushSeries))
            .await
            .is_err()
        {
            self.outbox.pending.finish();
        }
        loop {
            let done = self.outbox.pending.done.notified();
            let left = self.outbox.pending.get();
            if left == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline, done).await.is_err() {
                return self.outbox.pending.get();
            }
        }
    }
}

/// What to write for an event record, if anything: the event itself when it starts
/// a series, the series' count at its first repeat, nothing for later repeats.
fn event_write(
    cache: &mut SeriesCache,
    instance: &str,
    record: Record,
    now: Timestamp,
) -> Option<Write> {
    let Record::Event {
        reporting_controller,
        pod,
        normal,
        reason,
        action,
        note,
    } = record
    else {
        return None;
    };
    let key = SeriesKey {
        controller: reporting_controller.clone(),
        reason,
        action,
    };
    if let Some(repeat) = cache.observe(&pod.uid, &key, now) {
        return repeat.map(Write::Series);
    }
    let event = build_event(
        &reporting_controller,
        instance,
        &pod,
        normal,
        reason,
        action,
        &note,
        now,
    )?;
    cache.remember(&pod.uid, key, &event, now);
    Some(Write::Event(event))
}

#[allow(clippy::too_many_arguments, reason = "an event's fields, named")]
fn build_event(
    reporting_controller: &str,
    instance: &str,
    pod: &PodRef,
    normal: bool,
    reason: &str,
    action: &str,
    note: &str,
    now: Timestamp,
) -> Option<Event> {
    let event = serde_json::json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": format!("{}.{:x}", pod.name, now.as_nanosecond()),
            "namespace": pod.namespace,
        },
        "eventTime": now.to_string(),
        "reportingController": reporting_controller,
        "reportingInstance": format!("{reporting_controller}-{instance}"),
        "action": action,
        "reason": reason,
        "type": if normal { "Normal" } else { "Warning" },
        // The API server limits a note to 1 KiB.
        "note": truncate(note, 1024),
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
        },
    });
    match serde_json::from_value(event) {
        Ok(e) => Some(e),
        Err(e) => {
            tracing::warn!(pod = %pod.key(), "cannot build the {reason} event: {e}");
            None
        }
    }
}

async fn create_event(cluster: &KubeCluster, event: Event) {
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(cluster.client.clone(), &namespace);
    if let Err(e) = api.create(&PostParams::default(), &event).await {
        let reason = event.reason.as_deref().unwrap_or_default();
        tracing::debug!(event = ?event.metadata.name, "writing the {reason} event: {}", error_message(&e));
    }
}

/// Writes a series' count onto its event; an event gone meanwhile (expired by the
/// API server) is written anew with the series, as client-go does.
async fn write_series(cluster: &KubeCluster, w: SeriesWrite) {
    let namespace = w.event.metadata.namespace.clone().unwrap_or_default();
    let name = w.event.metadata.name.clone().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(cluster.client.clone(), &namespace);
    let series = EventSeries {
        count: w.count,
        last_observed_time: MicroTime(w.last_observed),
    };
    let patch = serde_json::json!({"series": series});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let mut event = w.event;
            event.metadata.resource_version = None;
            event.series = Some(series);
            create_event(cluster, event).await;
        }
        Err(e) => {
            tracing::debug!(event = %name, "writing the event series: {}", error_message(&e));
        }
    }
}

/// A strategic merge patch that sets the `PodScheduled` condition to False.
fn condition_patch(reason: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "status": {
            "conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "reason": reason,
                "message": message,
                "lastProbeTime": null,
                "lastTransitionTime": k8s_openapi::jiff::Timestamp::now()
                    .round(k8s_openapi::jiff::Unit::Second)
                    .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now())
                    .to_string(),
            }],
        },
    })
}

async fn patch_status(cluster: &KubeCluster, pod: &PodRef, patch: &serde_json::Value) {
    let api: Api<k8s::Pod> = Api::namespaced(cluster.client.clone(), &pod.namespace);
    if let Err(e) = api
        .patch_status(&pod.name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        tracing::debug!(pod = %pod.key(), "patching the PodScheduled condition: {}", error_message(&e));
    }
}

/// The reason of a PreEnqueue hold's condition.
pub const NOT_READY_REASON: &str = "NotReadyForScheduling";

/// Removes the pod's `PodScheduled` condition if it is still the hold's: read, then
/// removed under the read's resourceVersion, so a condition written meanwhile (an
/// attempt's) is never removed.
async fn remove_not_ready(cluster: &KubeCluster, pod: &PodRef) {
    let api: Api<k8s::Pod> = Api::namespaced(cluster.client.clone(), &pod.namespace);
    let current = match api.get_status(&pod.name).await {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(pod = %pod.key(), "reading the pod to clear its hold: {}", error_message(&e));
            return;
        }
    };
    let ours = current.metadata.uid.as_deref() == Some(pod.uid.as_str())
        && current
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "PodScheduled" && c.reason.as_deref() == Some(NOT_READY_REASON)
                })
            });
    if !ours {
        return;
    }
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "status": {"conditions": [{"type": "PodScheduled", "$patch": "delete"}]},
    });
    patch_status(cluster, pod, &patch).await;
}

async fn write(cluster: &KubeCluster, record: Record) {
    match record {
        // Events go through `event_write`; a flush and pod groups are the writer's own.
        Record::Event { .. } | Record::FlushSeries | Record::PodGroup { .. } => {}
        Record::Condition {
            pod,
            reason,
            message,
        } => patch_status(cluster, &pod, &condition_patch(reason.as_str(), &message)).await,
        Record::NotReady {
            pod,
            message: Some(message),
        } => patch_status(cluster, &pod, &condition_patch(NOT_READY_REASON, &message)).await,
        Record::NotReady { pod, message: None } => remove_not_ready(cluster, &pod).await,
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Pods whose event series are remembered at most; past it (with a tenth's slack)
/// the quietest are forgotten, their unwritten counts with them.
pub const SERIES_PODS: usize = 10_000;

/// A series that saw no event this long has ended (client-go's `finishTime`).
const SERIES_FINISH: SignedDuration = SignedDuration::from_secs(6 * 60);

/// A series' count is written at least this often (client-go's `refreshTime`).
const SERIES_REFRESH: SignedDuration = SignedDuration::from_secs(30 * 60);

/// What makes two events of a pod one series (client-go's `getKey`, the regarding
/// object aside: the series are kept per pod). The note is not part of it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SeriesKey {
    controller: String,
    reason: &'static str,
    action: &'static str,
}

/// An event written, and how many like it were seen since.
#[derive(Debug)]
struct Seen {
    key: SeriesKey,
    /// As written: its name and namespace, and the whole of it to write again if
    /// the API server dropped it.
    event: Event,
    /// Events like it seen, the first included.
    count: i32,
    /// The count last written (1: the event alone).
    written: i32,
    last_observed: Timestamp,
    last_written: Timestamp,
}

impl Seen {
    /// The write of its count now.
    fn write(&mut self, now: Timestamp) -> SeriesWrite {
        self.written = self.count;
        self.last_written = now;
        SeriesWrite {
            event: self.event.clone(),
            count: self.count,
            last_observed: self.last_observed,
        }
    }
}

/// A series' count to write onto its event.
#[derive(Debug)]
struct SeriesWrite {
    event: Event,
    count: i32,
    last_observed: Timestamp,
}

/// The event series under way, by pod UID.
#[derive(Debug, Default)]
struct SeriesCache {
    pods: HashMap<String, Vec<Seen>>,
}

impl SeriesCache {
    /// An event like `key` for pod `uid` at `now`: `None` when it starts a series
    /// (write it, then [`SeriesCache::remember`] it); else a repeat, with the series'
    /// count to write at its first repeat.
    fn observe(
        &mut self,
        uid: &str,
        key: &SeriesKey,
        now: Timestamp,
    ) -> Option<Option<SeriesWrite>> {
        let seen = self.pods.get_mut(uid)?.iter_mut().find(|s| &s.key == key)?;
        if now.duration_since(seen.last_observed) >= SERIES_FINISH {
            // That series ended; this event starts the next.
            return None;
        }
        seen.count += 1;
        seen.last_observed = now;
        Some((seen.count == 2).then(|| seen.write(now)))
    }

    /// The event that starts a series, as written.
    fn remember(&mut self, uid: &str, key: SeriesKey, event: &Event, now: Timestamp) {
        let list = self.pods.entry(uid.to_owned()).or_default();
        list.retain(|s| s.key != key);
        list.push(Seen {
            key,
            event: event.clone(),
            count: 1,
            written: 1,
            last_observed: now,
            last_written: now,
        });
        if self.pods.len() > SERIES_PODS + SERIES_PODS / 10 {
            self.trim();
        }
    }

    /// Forgets the quietest pods' series, down to [`SERIES_PODS`].
    fn trim(&mut self) {
        let mut by_quiet: Vec<(Timestamp, String)> = self
            .pods
            .iter()
            .map(|(uid, list)| {
                let last = list.iter().map(|s| s.last_observed).max();
                (last.unwrap_or(Timestamp::UNIX_EPOCH), uid.clone())
            })
            .collect();
        by_quiet.sort();
        let excess = self.pods.len().saturating_sub(SERIES_PODS);
        for (_, uid) in by_quiet.into_iter().take(excess) {
            self.pods.remove(&uid);
        }
    }

    /// Every minute: series quiet for [`SERIES_FINISH`] end (their last count
    /// written), and the counts of the others are written every [`SERIES_REFRESH`].
    fn tick(&mut self, now: Timestamp) -> Vec<SeriesWrite> {
        let mut writes = Vec::new();
        for list in self.pods.values_mut() {
            list.retain_mut(|s| {
                let ended = now.duration_since(s.last_observed) >= SERIES_FINISH;
                let stale = now.duration_since(s.last_written) >= SERIES_REFRESH;
                if s.count > s.written && (ended || stale) {
                    writes.push(s.write(now));
                }
                !ended
            });
        }
        self.pods.retain(|_, list| !list.is_empty());
        writes
    }

    /// Every count not written yet, to write now (a shutdown).
    fn flush(&mut self) -> Vec<SeriesWrite> {
        let now = Timestamp::now();
        self.pods
            .values_mut()
            .flatten()
            .filter(|s| s.count > s.written)
            .map(|s| s.write(now))
            .collect()
    }

    /// The pod is gone: its series with it.
    fn forget(&mut self, uid: &str) {
        self.pods.remove(uid);
    }
}

impl KubeRecorder {
    fn forget_not_ready(&self, uid: &str) {
        self.not_ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget(uid);
    }
}

impl Recorder for KubeRecorder {
    fn not_ready(&self, pod: &Pod, message: Option<&str>) {
        let first = {
            let mut state = self.not_ready.lock().unwrap_or_else(|e| e.into_inner());
            state
                .waiting
                .insert(
                    pod.uid.clone(),
                    (
                        PodRef::of(pod),
                        pod.scheduler_name.clone(),
                        message.map(str::to_owned),
                    ),
                )
                .is_none()
        };
        if !first {
            // Its delay runs already: the newest verdict is the one it writes.
            return;
        }
        let (state, outbox, conditions) = (
            self.not_ready.clone(),
            self.outbox.clone(),
            self.last_condition.clone(),
        );
        let uid = pod.uid.clone();
        self.handle.spawn(async move {
            tokio::time::sleep(NOT_READY_DELAY).await;
            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
            let Some((pod, scheduler_name, verdict)) = state.waiting.remove(&uid) else {
                return;
            };
            match verdict {
                Some(message) if state.written.get(&uid) != Some(&message) => {
                    state.written.insert(uid.clone(), message.clone());
                    // The condition is no longer an attempt's.
                    conditions
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&uid);
                    outbox.send(Record::Event {
                        reporting_controller: scheduler_name,
                        pod: pod.clone(),
                        normal: true,
                        reason: NOT_READY_REASON,
                        action: "Scheduling",
                        note: message.clone(),
                    });
                    outbox.send(Record::NotReady {
                        pod,
                        message: Some(message),
                    });
                }
                Some(_) => {}
                None => {
                    if state.written.remove(&uid).is_some() {
                        outbox.send(Record::NotReady { pod, message: None });
                    }
                }
            }
        });
    }

    fn scheduled(&self, scheduler_name: &str, pod: &Pod, node: &str) {
        self.forget_not_ready(&pod.uid);
        self.last_condition
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pod.uid);
        self.outbox.send(Record::Event {
            reporting_controller: scheduler_name.to_owned(),
            pod: PodRef::of(pod),
            normal: true,
            reason: "Scheduled",
            action: "Binding",
            note: format!("Successfully assigned {} to {node}", pod.key()),
        });
    }

    fn preempted(&self, victim: &Pod, preemptor: &Pod, node: &str) {
        self.outbox.send(Record::Event {
            reporting_controller: preemptor.scheduler_name.clone(),
            pod: PodRef::of(victim),
            normal: true,
            reason: "Preempted",
            action: "Preempting",
            note: format!("Preempted by pod {} on node {node}", preemptor.uid),
        });
    }

    fn forget(&self, uid: &str) {
        self.forget_not_ready(uid);
        self.last_condition
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget(uid);
    }

    fn failed(&self, scheduler_name: &str, pod: &Pod, reason: FailureReason, message: &str) {
        self.forget_not_ready(&pod.uid);
        self.outbox.send(Record::Event {
            reporting_controller: scheduler_name.to_owned(),
            pod: PodRef::of(pod),
            normal: false,
            reason: "FailedScheduling",
            action: "Scheduling",
            note: message.to_owned(),
        });
        let changed = {
            let mut last = self
                .last_condition
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let new = (reason, message.to_owned());
            if last.get(&pod.uid) == Some(&new) {
                false
            } else {
                last.insert(pod.uid.clone(), new);
                true
            }
        };
        if changed {
            self.outbox.send(Record::Condition {
                pod: PodRef::of(pod),
                reason,
                message: message.to_owned(),
            });
        }
    }

    fn pod_group_scheduled(&self, namespace: &str, name: &str, outcome: &PodGroupOutcome) {
        if self.pod_groups.offer(namespace, name, outcome.clone())
            && !self.outbox.send(Record::PodGroup {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
        {
            self.pod_groups.dropped(namespace, name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_past_the_queue_s_bound_are_dropped_and_counted() {
        let (tx, mut rx) = mpsc::channel::<Record>(QUEUED_RECORDS);
        let told = Arc::new(AtomicU64::new(0));
        let counter = told.clone();
        let count: DropCounter = Box::new(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        let outbox = Outbox {
            tx,
            dropped: Arc::default(),
            pending: Pending::default(),
            on_drop: Arc::new(std::sync::OnceLock::from(count)),
        };
        let pod = Pod {
            namespace: "ns".into(),
            name: "p".into(),
            ..Pod::default()
        };
        for _ in 0..QUEUED_RECORDS + 5 {
            outbox.send(Record::Condition {
                pod: PodRef::of(&pod),
                reason: FailureReason::Unschedulable,
                message: "no".into(),
            });
        }
        assert_eq!(outbox.dropped.load(Ordering::Relaxed), 5);
        assert_eq!(
            outbox.pending.get(),
            QUEUED_RECORDS,
            "dropped records are not pending"
        );
        assert!(rx.try_recv().is_ok());
        outbox.send(Record::Condition {
            pod: PodRef::of(&pod),
            reason: FailureReason::Unschedulable,
            message: "room again".into(),
        });
        assert_eq!(outbox.dropped.load(Ordering::Relaxed), 5);
    }

    fn event(name: &str) -> Event {
        let mut e = Event::default();
        e.metadata.name = Some(name.into());
        e.metadata.namespace = Some("ns".into());
        e
    }

    fn key(reason: &'static str) -> SeriesKey {
        SeriesKey {
            controller: "default-scheduler".into(),
            reason,
            action: "Scheduling",
        }
    }

    #[test]
    fn repeated_events_fold_into_a_series_as_client_go_folds_them() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let at = |secs: i64| t0 + SignedDuration::from_secs(secs);
        let mut cache = SeriesCache::default();
        let failed = key("FailedScheduling");
        // The first is written as it is.
        assert!(cache.observe("u1", &failed, t0).is_none());
        cache.remember("u1", failed.clone(), &event("p.1"), t0);
        // Its first repeat writes the series' count onto it, at once.
        let w = cache.observe("u1", &failed, at(10)).unwrap().unwrap();
        assert_eq!(
            (w.count, w.event.metadata.name.as_deref()),
            (2, Some("p.1"))
        );
        assert_eq!(w.last_observed, at(10));
        // Later repeats are counted, not written...
        for i in 0..5 {
            assert!(cache.observe("u1", &failed, at(20 + i)).unwrap().is_none());
        }
        // ... until the series is quiet for six minutes: its last count, once.
        assert!(cache.tick(at(60)).is_empty());
        let w = cache.tick(at(24 + 6 * 60));
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].count, w[0].last_observed), (7, at(24)));
        assert!(cache.pods.is_empty(), "an ended series is forgotten");
        // Then the same event starts a new series.
        assert!(cache.observe("u1", &failed, at(1000)).is_none());
        cache.remember("u1", failed.clone(), &event("p.2"), at(1000));

        // Another reason, another pod: other series. A busy series' count is written
        // every thirty minutes.
        let scheduled = key("Scheduled");
        assert!(cache.observe("u1", &scheduled, at(1001)).is_none());
        assert!(cache.observe("u2", &failed, at(1001)).is_none());
        let mut t = 1000;
        let mut written = Vec::new();
        while t < 1000 + 31 * 60 {
            t += 60;
            let _ = cache.observe("u1", &failed, at(t));
            written.extend(cache.tick(at(t)).into_iter().map(|w| w.count));
        }
        // Count 2 went at the first repeat; the refresh wrote the count reached.
        assert_eq!(written, [32]);
        // A shutdown writes what is left; a deleted pod's series are forgotten.
        let _ = cache.observe("u1", &failed, at(t + 1));
        assert_eq!(
            cache.flush().iter().map(|w| w.count).collect::<Vec<_>>(),
            [33]
        );
        assert!(cache.flush().is_empty());
        cache.forget("u1");
        assert!(!cache.pods.contains_key("u1"));
    }

    #[test]
    fn the_series_remember_a_bounded_number_of_pods_the_quietest_forgotten() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let mut cache = SeriesCache::default();
        let n = SERIES_PODS + SERIES_PODS / 10 + 1;
        for i in 0..n {
            let at = t0 + SignedDuration::from_millis(i as i64);
            cache.remember(&format!("u{i}"), key("Scheduled"), &event("e"), at);
        }
        assert_eq!(cache.pods.len(), SERIES_PODS);
        assert!(!cache.pods.contains_key("u0"), "the quietest pod is kept");
        assert!(cache.pods.contains_key(&format!("u{}", n - 1)));
    }

    #[test]
    fn notes_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("abc", 10), "abc");
        let long = "é".repeat(600);
        let t = truncate(&long, 1024);
        assert!(t.len() <= 1024 && t.ends_with("..."));
    }
}
