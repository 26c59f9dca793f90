//! The scheduler's clock: real time in a cluster; virtual time in every embedded run
//! (`berth simulate`, `berth bench`, the tests), where time moves only at points the
//! run fixes, so that what the scheduler decides from it (backoffs, a batch's age,
//! Permit timeouts) does not depend on how fast the machine is.

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
///
/// A paced one ([`VirtualClock::paced`]) also waits, when told to move, until as
/// much wall time has passed since it was made: a benchmark run on it pays in wall
/// time for every wait a live scheduler would wait (a backoff, a Permit timeout),
/// while what the scheduler decides still sees only the virtual time.
#[derive(Debug, Default)]
pub struct VirtualClock {
    now: Mutex<Duration>,
    /// For a paced clock: when it was made.
    paced_from: Option<Instant>,
}

impl VirtualClock {
    /// A virtual clock whose moves wait for the wall clock to catch up.
    pub fn paced() -> Self {
        VirtualClock {
            now: Mutex::default(),
            paced_from: Some(Instant::now()),
        }
    }

    /// Moves a paced clock on to the wall time since it was made. For a run whose
    /// inputs come at a wall-clock pace (a benchmark's churn, as upstream's): there
    /// the wall clock is one of the run's inputs, read at the points the run calls
    /// this. An unpaced clock does not move.
    pub fn catch_up(&self) {
        if let Some(from) = self.paced_from {
            self.advance_to(from.elapsed());
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn advance_to(&self, t: Duration) -> bool {
        if let Some(from) = self.paced_from
            && let Some(left) = t.checked_sub(from.elapsed())
        {
            std::thread::sleep(left);
        }
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        if t > *now {
            *now = t;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_virtual_clock_moves_only_when_told_and_never_back() {
        let c = VirtualClock::default();
        assert_eq!(c.now(), Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(c.now(), Duration::ZERO, "wall time does not move it");
        assert!(c.advance_to(Duration::from_secs(3600)));
        assert_eq!(c.now(), Duration::from_secs(3600), "an hour, at once");
        assert!(c.advance_to(Duration::from_secs(1)));
        assert_eq!(c.now(), Duration::from_secs(3600));
    }

    #[test]
    fn a_paced_clock_waits_for_the_wall_clock_but_reads_virtual_time() {
        let made = Instant::now();
        let c = VirtualClock::paced();
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(c.now(), Duration::ZERO, "wall time does not move it");
        assert!(c.advance_to(Duration::from_millis(60)));
        assert!(
            made.elapsed() >= Duration::from_millis(60),
            "{:?}",
            made.elapsed()
        );
        assert_eq!(c.now(), Duration::from_millis(60));
    }
}
