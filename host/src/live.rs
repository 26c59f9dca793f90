//! The live scheduling loop: one thread that owns the [`Scheduler`], takes cluster
//! changes from the sources as they arrive, schedules whatever is in activeQ, and
//! runs the queue's timers on the real clock (backoffQ every second, the leftover
//! unschedulable pods every 30 seconds, as upstream). Binding cycles run on their own
//! threads and wake the loop when they end.
//!
//! The loop does not schedule before every source has listed its objects once
//! ([`Change::Synced`]): placing a pod against half the nodes would be wrong. With
//! leader election it keeps its state current as a follower and schedules only after
//! [`LiveLoop::lead`], so that a follower that takes over starts from a warm cache.
//!
//! A loop that stops going round must not look alive: each round beats its
//! [`Heartbeat`], which `/livez` reads, and a panic in the loop is handed to the
//! caller's `on_panic` (`berth run` logs it and ends the process with status 1, so
//! that the Lease is no longer renewed and a follower takes over).

use crate::clock::Clock;
use crate::cluster::Change;
use crate::queue::{BACKOFF_FLUSH_INTERVAL, UNSCHEDULABLE_FLUSH_INTERVAL};
use crate::reload::{Built, ReloadError, ReloadSource};
use crate::scheduler::Scheduler;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the loop reacts to.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "inputs move through the channel one at a time; boxing would allocate per change"
)]
pub enum Input {
    /// A change in the cluster.
    Change(Change),
    /// Something finished elsewhere (a binding cycle); look again.
    Wake,
    /// This replica now leads: schedule.
    Lead,
    /// The configuration or a module it names changed: build the new version off
    /// the loop (on a thread of its own), then swap it in between two cycles.
    Reload(ReloadSource),
    /// A reload's build ended (sent by its thread).
    Built(Box<Result<Built, ReloadError>>),
    /// Explain a waiting pod (`namespace/name`) on the scheduler's own cache, between
    /// two cycles (`/debug/explain`).
    Explain(
        String,
        tokio::sync::oneshot::Sender<Result<LiveExplanation, String>>,
    ),
    /// Render the page (`/`, `/page.json`) from the scheduler's own state, between two
    /// cycles; a page younger than [`PAGE_MAX_AGE`] is served again instead.
    Page(tokio::sync::oneshot::Sender<crate::page::Rendered>),
    /// Stop scheduling and return the scheduler.
    Stop,
}

/// A waiting pod explained by the running scheduler: what it sees of the pod now, on
/// its own cache, with what its last attempt concluded.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveExplanation {
    /// The pod, `namespace/name`.
    pub pod: String,
    /// Its scheduling attempts so far.
    pub attempts: u32,
    /// Why its last attempt left it pending (the FailedScheduling message), if it
    /// had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<String>,
    /// Every plugin's answer on every node, on the cache as it is now.
    pub explanation: crate::framework::Explanation,
}

impl LiveExplanation {
    /// As `berth explain` prints, under a line on the pod's attempts.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{}: {} attempt(s){}\n",
            self.pod,
            self.attempts,
            self.last_attempt
                .as_deref()
                .map(|m| format!("; the last: {m}"))
                .unwrap_or_default()
        );
        out.push_str(&self.explanation.to_text());
        out
    }
}

/// How long a rendered page is served again before the loop renders a new one: each
/// rendering explains up to [`crate::page::DEFAULT_EXPLAINED`] pending pods on every
/// node, so a page reloaded in a loop must not cost a cycle each time.
pub const PAGE_MAX_AGE: Duration = Duration::from_secs(5);

/// The page last rendered by the loop, and when.
#[derive(Default)]
struct PageCache(Option<(Instant, crate::page::Rendered)>);

impl PageCache {
    fn get(&mut self, scheduler: &mut Scheduler) -> crate::page::Rendered {
        if let Some((at, page)) = &self.0
            && at.elapsed() < PAGE_MAX_AGE
        {
            return page.clone();
        }
        let options = crate::page::PageOptions {
            title: "Berth: the running scheduler".to_owned(),
            ..crate::page::PageOptions::default()
        };
        let page = crate::page::Page::of(scheduler, &options).render();
        self.0 = Some((Instant::now(), page.clone()));
        page
    }
}

/// Answers [`Input::Explain`].
fn explain_waiting(scheduler: &mut Scheduler, key: &str) -> Result<LiveExplanation, String> {
    let Some((pod, attempts)) = scheduler.waiting_pod(key) else {
        return Err(format!(
            "no pod {key} is waiting to be scheduled by this scheduler (bound, being bound, of another scheduler, or unknown)"
        ));
    };
    let pod = pod.clone();
    let last_attempt = scheduler
        .outcome(&pod.uid)
        .filter(|o| o.node.is_none() && !o.message.is_empty())
        .map(|o| o.message.clone());
    let explanation = scheduler
        .explain(&pod, &crate::framework::ExplainOptions::default())
        .map_err(|e| format!("{e:#}"))?;
    Ok(LiveExplanation {
        pod: key.to_owned(),
        attempts,
        last_attempt,
        explanation,
    })
}

impl From<Change> for Input {
    fn from(change: Change) -> Self {
        Input::Change(change)
    }
}

/// A running loop: send it changes, stop it.
pub struct LiveLoop {
    tx: Sender<Input>,
    thread: Option<JoinHandle<Option<Scheduler>>>,
    synced: Arc<AtomicBool>,
    heartbeat: Heartbeat,
}

/// When the loop last went round (it goes round at least once a second while it
/// runs: the backoff flush's timer wakes it).
#[derive(Clone, Debug)]
pub struct Heartbeat {
    origin: Instant,
    /// Milliseconds from `origin` to the last beat.
    last_ms: Arc<AtomicU64>,
}

impl Default for Heartbeat {
    fn default() -> Self {
        Heartbeat {
            origin: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Heartbeat {
    fn beat(&self) {
        let ms = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// A heartbeat whose last beat was `age` ago, for tests of what reads it.
    #[cfg(test)]
    pub(crate) fn stalled_for(age: Duration) -> Heartbeat {
        Heartbeat {
            origin: Instant::now()
                .checked_sub(age)
                .expect("the machine has been up longer than that"),
            last_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    /// How long ago the loop last went round.
    pub fn age(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.origin.elapsed().saturating_sub(last)
    }
}

/// How many scheduling cycles the loop runs before it panics: a test's way to kill
/// the loop and only the loop (`berth run --debug-panic-after-cycles`). Zero: never.
#[derive(Clone, Copy, Debug, Default)]
pub struct PanicAfter(pub u64);

/// How often the queue gauges of the metrics are brought up to date.
const PUBLISH_INTERVAL: Duration = Duration::from_millis(500);

impl std::fmt::Debug for LiveLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveLoop").finish_non_exhaustive()
    }
}

impl LiveLoop {
    /// Starts the loop on its own thread; `leading` false makes it wait for
    /// [`LiveLoop::lead`] before it schedules. If the loop panics, `on_panic` gets
    /// the panic's message on the loop's thread (the scheduler is lost with it).
    pub fn start(
        scheduler: Scheduler,
        clock: Arc<dyn Clock>,
        leading: bool,
        panic_after: PanicAfter,
        on_panic: impl FnOnce(String) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (tx, rx) = channel();
        let wake = tx.clone();
        scheduler.set_waker(Arc::new(move || {
            let _ = wake.send(Input::Wake);
        }));
        let synced = Arc::new(AtomicBool::new(false));
        let flag = synced.clone();
        let own = tx.clone();
        let heartbeat = Heartbeat::default();
        heartbeat.beat();
        let beats = heartbeat.clone();
        let thread = std::thread::Builder::new()
            .name("berth-scheduler".into())
            .spawn(move || {
                let looped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run(
                        scheduler,
                        rx,
                        own,
                        clock,
                        flag,
                        leading,
                        &beats,
                        panic_after,
                    )
                }));
                match looped {
                    Ok(scheduler) => Some(scheduler),
                    Err(panic) => {
                        let message = panic
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a panic without a message".to_owned());
                        on_panic(message);
                        None
                    }
                }
            })?;
        Ok(LiveLoop {
            tx,
            thread: Some(thread),
            synced,
            heartbeat,
        })
    }

    /// The loop's heartbeat, for `/livez`.
    pub fn heartbeat(&self) -> Heartbeat {
        self.heartbeat.clone()
    }

    /// Where cluster sources send their changes.
    pub fn sender(&self) -> Sender<Input> {
        self.tx.clone()
    }

    /// Whether the sources have listed everything once.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    /// The flag behind [`LiveLoop::synced`], for health checks.
    pub fn synced_flag(&self) -> Arc<AtomicBool> {
        self.synced.clone()
    }

    /// Starts scheduling (this replica has become the leader).
    pub fn lead(&self) {
        let _ = self.tx.send(Input::Lead);
    }

    /// Stops the loop after the pod it is scheduling (if any) and returns the
    /// scheduler (none if the loop died); binding cycles in flight are left to finish
    /// on their threads.
    pub fn stop(mut self) -> Option<Scheduler> {
        let _ = self.tx.send(Input::Stop);
        self.thread.take().and_then(|t| t.join().ok().flatten())
    }
}

/// Reloads: at most one build at a time; a request that arrives meanwhile waits, and
/// only the newest waiting one is built next.
#[derive(Default)]
struct Reloads {
    building: bool,
    next: Option<ReloadSource>,
}

impl Reloads {
    fn request(&mut self, scheduler: &mut Scheduler, source: ReloadSource, tx: &Sender<Input>) {
        if self.building {
            // A registry poll's reload loads the modules anew, as any other does: it
            // never displaces one waiting (an edited configuration).
            if !(matches!(source, ReloadSource::Current) && self.next.is_some()) {
                self.next = Some(source);
            }
            return;
        }
        let job = scheduler.prepare_reload(source);
        let tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name("berth-reload".into())
            .spawn(move || {
                let built = job.build();
                let _ = tx.send(Input::Built(Box::new(built)));
            });
        match spawned {
            Ok(_) => self.building = true,
            Err(e) => tracing::warn!("cannot start a reload: {e}"),
        }
    }

    fn built(
        &mut self,
        scheduler: &mut Scheduler,
        built: Result<Built, ReloadError>,
        tx: &Sender<Input>,
    ) {
        self.building = false;
        let _ = scheduler.finish_reload(built);
        if let Some(next) = self.next.take() {
            self.request(scheduler, next, tx);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    mut scheduler: Scheduler,
    rx: Receiver<Input>,
    tx: Sender<Input>,
    clock: Arc<dyn Clock>,
    synced_flag: Arc<AtomicBool>,
    leading: bool,
    heartbeat: &Heartbeat,
    panic_after: PanicAfter,
) -> Scheduler {
    let mut cycles: u64 = 0;
    // Scheduling waits for both: the state listed once, and the lease.
    let mut ready = Ready {
        synced: false,
        leading,
    };
    let mut next_backoff_flush = clock.now() + BACKOFF_FLUSH_INTERVAL;
    let mut next_leftover_flush = clock.now() + UNSCHEDULABLE_FLUSH_INTERVAL;
    let mut next_publish = clock.now();
    let mut reloads = Reloads::default();
    let mut page = PageCache::default();
    let mut input = |scheduler: &mut Scheduler, i: Input, ready: &mut Ready| -> bool {
        match i {
            Input::Change(Change::Synced) => {
                if !ready.synced {
                    ready.synced = true;
                    synced_flag.store(true, Ordering::Relaxed);
                    ready.announce("cluster state synced");
                }
            }
            Input::Lead => {
                if !ready.leading {
                    ready.leading = true;
                    ready.announce("leading");
                }
            }
            Input::Change(c) => {
                if let Err(e) = scheduler.apply(c) {
                    tracing::warn!("cluster change not applied: {e:#}");
                }
            }
            Input::Reload(source) => reloads.request(scheduler, source, &tx),
            Input::Built(built) => reloads.built(scheduler, *built, &tx),
            Input::Explain(key, reply) => {
                let _ = reply.send(explain_waiting(scheduler, &key));
            }
            Input::Page(reply) => {
                let _ = reply.send(page.get(scheduler));
            }
            Input::Wake => {}
            Input::Stop => return false,
        }
        true
    };
    loop {
        heartbeat.beat();
        let now = clock.now();
        let mut wait = next_backoff_flush.saturating_sub(now);
        if let Some(d) = scheduler.next_permit_deadline() {
            wait = wait.min(d.saturating_sub(now));
        }
        match rx.recv_timeout(wait.max(Duration::from_millis(1))) {
            Ok(i) => {
                if !input(&mut scheduler, i, &mut ready) {
                    return scheduler;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return scheduler,
        }
        loop {
            // Take in everything that arrived, then schedule one pod, and again.
            while let Ok(i) = rx.try_recv() {
                if !input(&mut scheduler, i, &mut ready) {
                    return scheduler;
                }
            }
            let now = clock.now();
            if now >= next_backoff_flush {
                scheduler.flush_backoff(now);
                next_backoff_flush = now + BACKOFF_FLUSH_INTERVAL;
            }
            scheduler.poll(now);
            if now >= next_leftover_flush {
                scheduler.flush_unschedulable_leftover(now);
                next_leftover_flush = now + UNSCHEDULABLE_FLUSH_INTERVAL;
            }
            if now >= next_publish {
                scheduler.publish_metrics();
                scheduler.publish_not_ready();
                next_publish = now + PUBLISH_INTERVAL;
            }
            heartbeat.beat();
            if !ready.schedules() || !scheduler.schedule_one() {
                break;
            }
            cycles += 1;
            assert!(
                panic_after.0 == 0 || cycles < panic_after.0,
                "panicking after {cycles} scheduling cycles, as --debug-panic-after-cycles asked"
            );
        }
    }
}

struct Ready {
    synced: bool,
    leading: bool,
}

impl Ready {
    fn schedules(&self) -> bool {
        self.synced && self.leading
    }

    fn announce(&self, what: &str) {
        if self.schedules() {
            tracing::info!("{what}; scheduling starts");
        } else if self.synced {
            tracing::info!("{what}; waiting for the lease before scheduling");
        }
    }
}
