//! The limits every plugin call and instance runs under.

use std::time::Duration;

/// How long a call may run and how much memory an instance may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A call that runs longer traps with a deadline error.
    pub call_deadline: Duration,
    /// Linear memory above this traps the growing instance.
    pub max_memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_deadline: Duration::from_secs(2),
            max_memory_bytes: 256 << 20,
        }
    }
}

/// How often the engine's epoch advances; deadlines are counted in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

impl Limits {
    /// The deadline in epoch ticks (at least one).
    pub fn deadline_ticks(&self) -> u64 {
        (self.call_deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
    }
}
