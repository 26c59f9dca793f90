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

use crate::clock::Clock;
use crate::cluster::Change;
use crate::queue::{BACKOFF_FLUSH_INTERVAL, UNSCHEDULABLE_FLUSH_INTERVAL};
use crate::reload::{Built, ReloadError, ReloadSource};
use crate::scheduler::Scheduler;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

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
    /// Stop scheduling and return the scheduler.
    Stop,
}

impl From<Change> for Input {
    fn from(change: Change) -> Self {
        Input::Change(change)
    }
}

/// A running loop: send it changes, stop it.
pub struct LiveLoop {
    tx: Sender<Input>,
    thread: Option<JoinHandle<Scheduler>>,
    synced: Arc<AtomicBool>,
}

/// How often the queue gauges of the metrics are brought up to date.
const PUBLISH_INTERVAL: Duration = Duration::from_millis(500);

impl std::fmt::Debug for LiveLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveLoop").finish_non_exhaustive()
    }
}

impl LiveLoop {
    /// Starts the loop on its own thread; `leading` false makes it wait for
    /// [`LiveLoop::lead`] before it schedules.
    pub fn start(
        scheduler: Scheduler,
        clock: Arc<dyn Clock>,
        leading: bool,
    ) -> std::io::Result<Self> {
        let (tx, rx) = channel();
        let wake = tx.clone();
        scheduler.set_waker(Arc::new(move || {
            let _ = wake.send(Input::Wake);
        }));
        let synced = Arc::new(AtomicBool::new(false));
        let flag = synced.clone();
        let own = tx.clone();
        let thread = std::thread::Builder::new()
            .name("berth-scheduler".into())
            .spawn(move || run(scheduler, rx, own, clock, flag, leading))?;
        Ok(LiveLoop {
            tx,
            thread: Some(thread),
            synced,
        })
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
    /// scheduler; binding cycles in flight are left to finish on their threads.
    pub fn stop(mut self) -> Option<Scheduler> {
        let _ = self.tx.send(Input::Stop);
        self.thread.take().and_then(|t| t.join().ok())
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
            self.next = Some(source);
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

fn run(
    mut scheduler: Scheduler,
    rx: Receiver<Input>,
    tx: Sender<Input>,
    clock: Arc<dyn Clock>,
    synced_flag: Arc<AtomicBool>,
    leading: bool,
) -> Scheduler {
    // Scheduling waits for both: the state listed once, and the lease.
    let mut ready = Ready {
        synced: false,
        leading,
    };
    let mut next_backoff_flush = clock.now() + BACKOFF_FLUSH_INTERVAL;
    let mut next_leftover_flush = clock.now() + UNSCHEDULABLE_FLUSH_INTERVAL;
    let mut next_publish = clock.now();
    let mut reloads = Reloads::default();
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
            Input::Wake => {}
            Input::Stop => return false,
        }
        true
    };
    loop {
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
                next_publish = now + PUBLISH_INTERVAL;
            }
            if !ready.schedules() || !scheduler.schedule_one() {
                break;
            }
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
