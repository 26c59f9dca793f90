//! The limits every plugin call and instance runs under, and the bound on all
//! instances' memory together.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use wasmtime::ResourceLimiter;

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

    /// The store limiter these limits make, counting the store's memory in `budget`.
    pub(crate) fn store_limiter(&self, budget: Arc<MemoryBudget>) -> StoreLimiter {
        StoreLimiter {
            own: wasmtime::StoreLimitsBuilder::new()
                .memory_size(self.max_memory_bytes)
                .table_elements(self.max_table_elements)
                .tables(self.max_tables)
                .instances(self.max_instances)
                .memories(self.max_memories)
                .trap_on_grow_failure(true)
                .build(),
            budget,
            held: 0,
            growing: 0,
            refused: None,
        }
    }
}

/// The linear memory of every plugin instance of a runtime together, against one
/// bound (`berth.totalMemoryLimit`). Per-instance limits alone let the sum grow with
/// plugins × (workers + binding cycles + 1); with a bound, an instance whose memory
/// would take the total past it traps as it would at its own limit (its call fails,
/// the instance is discarded and its memory given back), so the process stays within
/// what its container may use.
#[derive(Debug, Default)]
pub struct MemoryBudget {
    /// The bound in bytes; 0 is none.
    limit: AtomicUsize,
    used: AtomicUsize,
    peak: AtomicUsize,
}

impl MemoryBudget {
    /// Sets the bound (`None`: only the per-instance limits). Memory already held
    /// stays; growth past the new bound is refused.
    pub fn set_limit(&self, bytes: Option<usize>) {
        self.limit.store(bytes.unwrap_or(0), Ordering::Relaxed);
    }

    /// The bound, if any.
    pub fn limit(&self) -> Option<usize> {
        Some(self.limit.load(Ordering::Relaxed)).filter(|&b| b > 0)
    }

    /// The linear memory the live instances hold now, in bytes.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The most they held at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Takes `bytes` from the budget; `Err(limit)` when that would pass the bound.
    fn reserve(&self, bytes: usize) -> Result<(), usize> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let want = used.saturating_add(bytes);
            if let Some(limit) = self.limit()
                && want > limit
            {
                return Err(limit);
            }
            match self
                .used
                .compare_exchange_weak(used, want, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.peak.fetch_max(want, Ordering::Relaxed);
                    return Ok(());
                }
                Err(now) => used = now,
            }
        }
    }

    fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// A store's limiter: the instance's own limits, and its share of the runtime's
/// [`MemoryBudget`], given back when the store is dropped.
pub(crate) struct StoreLimiter {
    own: wasmtime::StoreLimits,
    budget: Arc<MemoryBudget>,
    /// What this store took from the budget.
    held: usize,
    /// The growth last allowed, given back if wasmtime could not carry it out.
    growing: usize,
    /// Why the budget last refused a growth.
    refused: Option<String>,
}

impl StoreLimiter {
    /// Why the bound on all instances together last refused this store's growth.
    pub(crate) fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }
}

impl ResourceLimiter for StoreLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if !self.own.memory_growing(current, desired, maximum)? {
            return Ok(false);
        }
        let more = desired.saturating_sub(current);
        match self.budget.reserve(more) {
            Ok(()) => {
                self.held += more;
                self.growing = more;
                Ok(true)
            }
            Err(limit) => {
                let why = format!(
                    "growing its memory to {} MiB would take the plugins' memory together past berth.totalMemoryLimit ({} MiB)",
                    desired >> 20,
                    limit >> 20
                );
                self.refused = Some(why.clone());
                Err(wasmtime::Error::msg(why))
            }
        }
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        let given = std::mem::take(&mut self.growing);
        self.held -= given;
        self.budget.release(given);
        self.own.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.own.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.own.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.own.instances()
    }

    fn tables(&self) -> usize {
        self.own.tables()
    }

    fn memories(&self) -> usize {
        self.own.memories()
    }
}

impl Drop for StoreLimiter {
    fn drop(&mut self) {
        self.budget.release(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_share_the_bound_and_give_back_what_they_held() {
        let budget = Arc::new(MemoryBudget::default());
        budget.set_limit(Some(10 << 20));
        let limits = Limits {
            max_memory_bytes: 8 << 20,
            ..Limits::default()
        };
        let mut a = limits.store_limiter(budget.clone());
        let mut b = limits.store_limiter(budget.clone());
        assert!(a.memory_growing(0, 6 << 20, None).unwrap());
        // Within b's own limit, past the bound together.
        let e = b.memory_growing(0, 6 << 20, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "growing its memory to 6 MiB would take the plugins' memory together past berth.totalMemoryLimit (10 MiB)"
        );
        assert!(b.memory_growing(0, 4 << 20, None).unwrap());
        assert_eq!((budget.used(), budget.peak()), (10 << 20, 10 << 20));
        // Past its own limit: refused by that one.
        assert!(a.memory_growing(6 << 20, 9 << 20, None).is_err());
        drop(a);
        assert_eq!(budget.used(), 4 << 20);
        // A growth wasmtime could not carry out is given back (and, as at the
        // instance's own limit, is a trap).
        assert!(b.memory_growing(4 << 20, 5 << 20, None).unwrap());
        assert!(
            b.memory_grow_failed(wasmtime::Error::msg("mmap failed"))
                .is_err()
        );
        assert_eq!(budget.used(), 4 << 20);
        drop(b);
        assert_eq!((budget.used(), budget.peak()), (0, 10 << 20));
    }
}
