//! A fixed pool of worker threads fed from a queue: the binding threads and the
//! preemption threads are two of them. Whatever the work waits on (an API server, a
//! plugin's PreBind), the scheduling loop only queues it, and the number of threads
//! waiting is bounded by the pool, not by the number of pods.

use super::Waker;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

/// Jobs on their way from the scheduling loop to the workers.
///
/// A queue under a lock and a condition variable, so that handing a job over costs
/// the scheduling thread one wake-up of an idle worker, and none when every worker
/// is busy. A std channel did the same hand-off with two: the worker, woken, took
/// the channel's inner lock while the sender still held it and had to be woken again.
struct WorkQueue<J> {
    inner: Mutex<WorkQueueInner<J>>,
    ready: Condvar,
}

struct WorkQueueInner<J> {
    jobs: VecDeque<J>,
    /// Workers waiting for a job.
    idle: usize,
    /// Worker threads still running (one that panicked is not).
    alive: usize,
    /// Workers whose job waits on the cluster (see [`park_current`]): they do not
    /// count against `target`.
    parked: usize,
    /// Workers that run jobs at once, parked ones aside.
    target: usize,
    /// Threads the pool may start beyond `target` while some are parked.
    spare: usize,
    /// Threads started so far (for their names).
    started: usize,
    /// The scheduler is gone: workers finish what is queued and stop.
    closed: bool,
}

/// What a worker takes from the queue.
enum Taken<J> {
    /// A job to run.
    Job(J),
    /// The pool is closed and empty: stop.
    Closed,
    /// More workers run than the pool's target (one that was parked is back): this
    /// one stops, already counted out of `alive`.
    Retire,
}

impl<J> Default for WorkQueue<J> {
    fn default() -> Self {
        WorkQueue {
            inner: Mutex::new(WorkQueueInner {
                jobs: VecDeque::new(),
                idle: 0,
                alive: 0,
                parked: 0,
                target: 0,
                spare: 0,
                started: 0,
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }
}

impl<J> WorkQueue<J> {
    fn lock(&self) -> MutexGuard<'_, WorkQueueInner<J>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next job, waiting for one.
    fn take(&self) -> Taken<J> {
        let mut inner = self.lock();
        loop {
            if inner.target > 0 && inner.alive - inner.parked > inner.target {
                inner.alive -= 1;
                return Taken::Retire;
            }
            if let Some(job) = inner.jobs.pop_front() {
                return Taken::Job(job);
            }
            if inner.closed {
                return Taken::Closed;
            }
            inner.idle += 1;
            inner = self.ready.wait(inner).unwrap_or_else(|e| e.into_inner());
            inner.idle -= 1;
        }
    }
}

/// The scheduling loop's end of a pool; dropping it lets the workers stop once what
/// is queued is done.
pub(super) struct PoolSender<J>(Arc<WorkQueue<J>>);

impl<J> PoolSender<J> {
    /// Queues a job; gives it back when no worker is left to run it.
    pub(super) fn send(&self, job: J) -> Result<(), J> {
        let wake = {
            let mut inner = self.0.lock();
            if inner.alive == 0 {
                return Err(job);
            }
            inner.jobs.push_back(job);
            inner.idle > 0
        };
        // After the lock is released, so the worker does not wake into it.
        if wake {
            self.0.ready.notify_one();
        }
        Ok(())
    }

    /// Jobs whose worker waits on the cluster now (see [`park_current`]).
    pub(super) fn parked(&self) -> usize {
        self.0.lock().parked
    }
}

impl<J> Drop for PoolSender<J> {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.ready.notify_all();
    }
}

/// Counts a worker thread out of [`WorkQueueInner::alive`] however it ends (unless
/// it retired, which counted it out already).
struct WorkerAlive<J> {
    queue: Arc<WorkQueue<J>>,
    counted: bool,
}

impl<J> WorkerAlive<J> {
    /// Counts a worker in, until the guard drops.
    fn new(queue: &Arc<WorkQueue<J>>) -> Self {
        queue.lock().alive += 1;
        Self::counted(queue)
    }

    /// A worker already counted in `alive`.
    fn counted(queue: &Arc<WorkQueue<J>>) -> Self {
        WorkerAlive {
            queue: queue.clone(),
            counted: true,
        }
    }
}

impl<J> Drop for WorkerAlive<J> {
    fn drop(&mut self) {
        if self.counted {
            self.queue.lock().alive -= 1;
        }
    }
}

/// A pool as its workers see it: the queue, and how to start another worker.
struct Pool<J, F> {
    queue: Arc<WorkQueue<J>>,
    handler: F,
    name: String,
}

/// A pool whose worker may park (type-erased, for the worker's thread).
trait Parking: Send + Sync {
    /// The worker on this thread is about to wait on the cluster; the answer, when
    /// dropped, says the wait is over.
    fn park(self: Arc<Self>) -> Box<dyn std::any::Any>;
}

thread_local! {
    /// The pool of the worker running on this thread.
    static CURRENT: std::cell::RefCell<Option<Arc<dyn Parking>>> =
        const { std::cell::RefCell::new(None) };
}

/// Said by a job on a pool's worker that is about to wait on the cluster (a PreBind
/// waiting for its volumes): while it waits it does not count against the pool's
/// threads, and another thread (up to the pool's spare ones) takes its place, so
/// that slow waits do not hold up every other job. The wait is over when the answer
/// is dropped. Off a pool's thread, nothing happens.
pub(super) fn park_current() -> Box<dyn std::any::Any> {
    match CURRENT.with(|c| c.borrow().clone()) {
        Some(pool) => pool.park(),
        None => Box::new(()),
    }
}

/// Counts a parked worker back in when dropped.
struct Unpark<J>(Arc<WorkQueue<J>>);

impl<J> Drop for Unpark<J> {
    fn drop(&mut self) {
        let excess = {
            let mut inner = self.0.lock();
            inner.parked -= 1;
            inner.alive - inner.parked > inner.target
        };
        // Idle workers look again: one too many stops.
        if excess {
            self.0.ready.notify_all();
        }
    }
}

impl<J, H, F> Parking for Pool<J, F>
where
    J: Send + 'static,
    H: FnMut(J) -> bool + Send + 'static,
    F: Fn() -> H + Send + Sync + 'static,
{
    fn park(self: Arc<Self>) -> Box<dyn std::any::Any> {
        let stand_in = {
            let mut inner = self.queue.lock();
            inner.parked += 1;
            let spare = !inner.closed
                && inner.alive - inner.parked < inner.target
                && inner.alive < inner.target + inner.spare;
            if spare {
                inner.alive += 1;
            }
            spare
        };
        if stand_in {
            // Counted already; a thread that cannot start counts itself out.
            let alive = WorkerAlive::counted(&self.queue);
            if let Err(e) = self.clone().start(alive) {
                tracing::warn!("starting a thread to stand in for a waiting one: {e}");
            }
        }
        Box::new(Unpark(self.queue.clone()))
    }
}

impl<J, H, F> Pool<J, F>
where
    J: Send + 'static,
    H: FnMut(J) -> bool + Send + 'static,
    F: Fn() -> H + Send + Sync + 'static,
{
    /// Starts a worker thread counted by `alive`.
    fn start(self: Arc<Self>, alive: WorkerAlive<J>) -> std::io::Result<()> {
        let i = {
            let mut inner = self.queue.lock();
            inner.started += 1;
            inner.started - 1
        };
        let mut run = (self.handler)();
        let pool = self.clone();
        std::thread::Builder::new()
            .name(format!("{}-{i}", self.name))
            .spawn(move || {
                let mut alive = alive;
                CURRENT.with(|c| *c.borrow_mut() = Some(pool.clone() as Arc<dyn Parking>));
                loop {
                    match pool.queue.take() {
                        Taken::Job(job) => {
                            if !run(job) {
                                break;
                            }
                        }
                        Taken::Closed => break,
                        Taken::Retire => {
                            alive.counted = false;
                            break;
                        }
                    }
                }
                CURRENT.with(|c| c.borrow_mut().take());
            })?;
        Ok(())
    }
}

/// Starts `n` (at least one) threads named `name-<i>`, each running the jobs it takes
/// with its own handler from `handler()`, until the sender is dropped and the queue
/// is empty, or a handler returns false (nobody listens for its results any more).
/// While a job waits on the cluster ([`park_current`]), up to `spare` more threads
/// may run the other jobs; each stops once the waits are over.
pub(super) fn spawn_pool<J, H, F>(
    n: usize,
    spare: usize,
    name: &str,
    handler: F,
) -> std::io::Result<PoolSender<J>>
where
    J: Send + 'static,
    H: FnMut(J) -> bool + Send + 'static,
    F: Fn() -> H + Send + Sync + 'static,
{
    let queue: Arc<WorkQueue<J>> = Arc::new(WorkQueue::default());
    {
        let mut inner = queue.lock();
        inner.target = n.max(1);
        inner.spare = spare;
    }
    let pool = Arc::new(Pool {
        queue: queue.clone(),
        handler,
        name: name.to_owned(),
    });
    for _ in 0..n.max(1) {
        pool.clone().start(WorkerAlive::new(&queue))?;
    }
    Ok(PoolSender(queue))
}

/// Wakes whoever drives the scheduler, if anyone set a waker.
pub(super) fn wake(waker: &RwLock<Option<Waker>>) {
    if let Some(w) = &*waker.read().unwrap_or_else(|e| e.into_inner()) {
        w();
    }
}

#[cfg(test)]
mod tests {
    use super::{PoolSender, WorkQueue, WorkerAlive, park_current, spawn_pool};
    use std::sync::Arc;
    use std::sync::mpsc::channel;

    #[test]
    fn the_queue_hands_jobs_over_in_order_and_stops_when_closed_or_unattended() {
        let queue: Arc<WorkQueue<u32>> = Arc::new(WorkQueue::default());
        let sender = PoolSender(queue.clone());
        // No worker yet: the job comes back, as when every thread is gone.
        assert_eq!(sender.send(1), Err(1));

        let alive = WorkerAlive::new(&queue);
        let worker = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                let _alive = alive;
                let mut got = Vec::new();
                while let super::Taken::Job(job) = queue.take() {
                    got.push(job);
                }
                got
            })
        };
        for job in 2..=200 {
            assert_eq!(sender.send(job), Ok(()));
        }
        // Closing lets the worker finish what is queued, then stop.
        drop(sender);
        assert_eq!(worker.join().unwrap(), (2..=200).collect::<Vec<_>>());
        assert_eq!(queue.lock().alive, 0);
        assert!(matches!(queue.take(), super::Taken::Closed));
    }

    #[test]
    fn a_pool_runs_every_job_on_its_threads_and_its_workers_stop_when_unheard() {
        let (tx, rx) = channel();
        let pool = spawn_pool(3, 0, "test-pool", move || {
            let tx = tx.clone();
            move |job: u32| {
                tx.send((job, std::thread::current().name().map(str::to_owned)))
                    .is_ok()
            }
        })
        .unwrap();
        for job in 0..50 {
            pool.send(job).unwrap();
        }
        let mut got: Vec<(u32, Option<String>)> = (0..50).map(|_| rx.recv().unwrap()).collect();
        got.sort();
        assert_eq!(
            got.iter().map(|g| g.0).collect::<Vec<_>>(),
            (0..50).collect::<Vec<_>>()
        );
        assert!(
            got.iter()
                .all(|g| g.1.as_deref().is_some_and(|n| n.starts_with("test-pool-")))
        );
        // With nobody listening, each worker stops at its next job; then none is left.
        drop(rx);
        for job in 0..3 {
            let _ = pool.send(job);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pool.0.lock().alive > 0 && std::time::Instant::now() < deadline {
            let _ = pool.send(0);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(pool.send(9), Err(9));
    }

    /// Jobs that wait on the cluster give their worker's place to a spare thread
    /// (as many as the pool allows): the other jobs go on meanwhile. Once the waits
    /// end the pool shrinks back to its size.
    #[test]
    fn a_waiting_job_s_worker_is_stood_in_for_up_to_the_spare_threads() {
        use std::sync::{Condvar, Mutex};
        use std::time::{Duration, Instant};
        let (tx, rx) = channel();
        let release = Arc::new((Mutex::new(false), Condvar::new()));
        let r = release.clone();
        let pool = spawn_pool(2, 2, "park-pool", move || {
            let (tx, r) = (tx.clone(), r.clone());
            move |job: u32| {
                if job >= 100 {
                    let _parked = park_current();
                    let (m, c) = &*r;
                    let mut go = m.lock().unwrap();
                    while !*go {
                        go = c.wait(go).unwrap();
                    }
                }
                tx.send(job).is_ok()
            }
        })
        .unwrap();
        let counts = || {
            let inner = pool.0.lock();
            (inner.alive, inner.parked)
        };
        let eventually = |what: &str, f: &dyn Fn() -> bool| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !f() {
                assert!(Instant::now() < deadline, "{what}");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        // Three waits: two spare threads stand in, the third wait holds its place.
        for job in 100..103 {
            pool.send(job).unwrap();
        }
        eventually("three waits parked", &|| counts() == (4, 3));
        // One worker is left for the rest, and it runs them.
        for job in 0..50 {
            pool.send(job).unwrap();
        }
        let mut got: Vec<u32> = (0..50)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
        // The waits end: their jobs finish and the pool is two threads again.
        *release.0.lock().unwrap() = true;
        release.1.notify_all();
        let mut ended: Vec<u32> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        ended.sort_unstable();
        assert_eq!(ended, [100, 101, 102]);
        eventually("the pool shrank back", &|| counts() == (2, 0));
        // Off a pool's thread, parking does nothing.
        drop(park_current());
        assert_eq!(counts(), (2, 0));
        for job in 0..10 {
            pool.send(job).unwrap();
        }
        for _ in 0..10 {
            rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
    }
}
