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
    /// The scheduler is gone: workers finish what is queued and stop.
    closed: bool,
}

impl<J> Default for WorkQueue<J> {
    fn default() -> Self {
        WorkQueue {
            inner: Mutex::new(WorkQueueInner {
                jobs: VecDeque::new(),
                idle: 0,
                alive: 0,
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

    /// The next job, waiting for one; `None` once closed and empty.
    fn take(&self) -> Option<J> {
        let mut inner = self.lock();
        loop {
            if let Some(job) = inner.jobs.pop_front() {
                return Some(job);
            }
            if inner.closed {
                return None;
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
}

impl<J> Drop for PoolSender<J> {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.ready.notify_all();
    }
}

/// Counts a worker thread out of [`WorkQueueInner::alive`] however it ends.
struct WorkerAlive<J>(Arc<WorkQueue<J>>);

impl<J> WorkerAlive<J> {
    /// Counts a worker in, until the guard drops.
    fn new(queue: &Arc<WorkQueue<J>>) -> Self {
        queue.lock().alive += 1;
        WorkerAlive(queue.clone())
    }
}

impl<J> Drop for WorkerAlive<J> {
    fn drop(&mut self) {
        self.0.lock().alive -= 1;
    }
}

/// Starts `n` (at least one) threads named `name-<i>`, each running the jobs it takes
/// with its own handler from `handler()`, until the sender is dropped and the queue
/// is empty, or a handler returns false (nobody listens for its results any more).
pub(super) fn spawn_pool<J, H, F>(
    n: usize,
    name: &str,
    handler: F,
) -> std::io::Result<PoolSender<J>>
where
    J: Send + 'static,
    H: FnMut(J) -> bool + Send + 'static,
    F: Fn() -> H,
{
    let queue: Arc<WorkQueue<J>> = Arc::new(WorkQueue::default());
    for i in 0..n.max(1) {
        let jobs = queue.clone();
        let alive = WorkerAlive::new(&queue);
        let mut run = handler();
        std::thread::Builder::new()
            .name(format!("{name}-{i}"))
            .spawn(move || {
                let _alive = alive;
                while let Some(job) = jobs.take() {
                    if !run(job) {
                        break;
                    }
                }
            })?;
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
    use super::{PoolSender, WorkQueue, WorkerAlive, spawn_pool};
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
                while let Some(job) = queue.take() {
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
        assert!(queue.take().is_none());
    }

    #[test]
    fn a_pool_runs_every_job_on_its_threads_and_its_workers_stop_when_unheard() {
        let (tx, rx) = channel();
        let pool = spawn_pool(3, "test-pool", move || {
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
}
