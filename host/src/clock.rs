//! The scheduler's clock: real time in a cluster and in `berth bench`, virtual time in
//! `berth simulate`, where waiting for a backoff costs nothing.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Time since the scheduler started.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Duration;
    /// Moves on to `t`: a virtual clock jumps there, a real clock sleeps until then.
    /// False when the clock cannot get there.
    fn advance_to(&self, t: Duration) -> bool;
}

/// Wall-clock time.
#[derive(Debug)]
pub struct RealClock(Instant);

impl Default for RealClock {
    fn default() -> Self {
        RealClock(Instant::now())
    }
}

impl Clock for RealClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
    fn advance_to(&self, t: Duration) -> bool {
        if let Some(left) = t.checked_sub(self.now()) {
            std::thread::sleep(left);
        }
        true
    }
}

/// Time that moves only when told to.
#[derive(Debug, Default)]
pub struct VirtualClock(Mutex<Duration>);

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn advance_to(&self, t: Duration) -> bool {
        let mut now = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if t > *now {
            *now = t;
        }
        true
    }
}
