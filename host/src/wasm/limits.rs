//! The limits every plugin call and instance runs under.

use std::time::Duration;

/// How long a call may run and how much an instance may hold. The process has one
/// default ([`crate::wasm::RuntimeOptions::limits`]); a configuration may set them per
/// plugin (`berth.plugins[].sandbox`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A call that runs longer traps with a deadline error. A guest sleep (granted
    /// monotonic clock) longer than this traps at once.
    pub call_deadline: Duration,
    /// Linear memory above this traps the growing instance.
    pub max_memory_bytes: usize,
    /// The most elements any one table may grow to.
    pub max_table_elements: usize,
    /// The most tables a store may hold (over every core instance of the component).
    pub max_tables: usize,
    /// The most core instances a store may hold; a component is several.
    pub max_instances: usize,
    /// The most linear memories a store may hold.
    pub max_memories: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_deadline: Duration::from_secs(2),
            max_memory_bytes: 256 << 20,
            // A Rust plugin component has a few hundred to a few thousand table
            // entries and under ten core instances, tables and memories; the limits
            // leave room for larger plugins while bounding what a store can grow to.
            max_table_elements: 100_000,
            max_tables: 64,
            max_instances: 64,
            max_memories: 8,
        }
    }
}

/// How often the engine's epoch advances; deadlines are counted in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The smallest memory limit a configuration may set: below it no Rust component
/// instantiates.
pub const MIN_MEMORY_BYTES: u64 = 1 << 20;

/// The largest memory limit: a wasm32 memory cannot grow beyond 4 GiB.
pub const MAX_MEMORY_BYTES: u64 = 4 << 30;

impl Limits {
    /// The deadline in epoch ticks (at least one).
    pub fn deadline_ticks(&self) -> u64 {
        (self.call_deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
    }

    /// The store limiter these limits make.
    pub(crate) fn store_limits(&self) -> wasmtime::StoreLimits {
        wasmtime::StoreLimitsBuilder::new()
            .memory_size(self.max_memory_bytes)
            .table_elements(self.max_table_elements)
            .tables(self.max_tables)
            .instances(self.max_instances)
            .memories(self.max_memories)
            .trap_on_grow_failure(true)
            .build()
    }
}
