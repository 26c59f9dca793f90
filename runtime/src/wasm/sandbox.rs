//! What a plugin instance may reach beyond its own memory, and the WASI context that
//! follows from it. By default nothing is granted:
//!
//! - no environment variables, no arguments, stdin closed;
//! - no directories;
//! - `wasi:clocks/wall-clock` reads 1970-01-01T00:00:00Z, `monotonic-clock` reads 0,
//!   and a sleep returns at once (the clock is frozen, so no time passes);
//! - `wasi:random/insecure-seed` (what std's `HashMap` keys come from) answers a fixed
//!   seed and `wasi:random/insecure` a fixed, non-repeating pseudo-random stream
//!   (SplitMix64), starting afresh in every instance: a std `HashMap` works, and an
//!   instance's draws and maps repeat from run to run. Not from instance to instance:
//!   std seeds its keys once per thread and moves them on for each map made, so a
//!   map's iteration order depends on the instance's history (which worker it serves,
//!   how many maps it made, whether it was rebuilt after a trap), and natively on the
//!   process. A plugin whose answer must not depend on that sorts, or uses an ordered
//!   map, wherever iteration order reaches an answer (the built-in plugins do);
//! - `wasi:random/random`, the source meant for secrets, is always the host's real
//!   randomness. Entropy reaches nothing outside the sandbox, so it is no privilege;
//!   a predictable answer would be a plugin's secret silently guessable, and a trap
//!   would stop every runtime that seeds itself from it when it starts (Python's
//!   `random` and hash seeds, JavaScript's `Math.random`);
//! - the network is never granted: TCP, UDP and name lookup are refused.
//!
//! A profile grants per plugin (`berth.plugins[].sandbox.grants`): the real wall
//! clock, the real monotonic clock, real randomness from the insecure interfaces too,
//! named environment variables and host directories, read-only.
//!
//! wasmtime-wasi's `WasiCtxBuilder` can replace the clocks' readings and the random
//! generators, but its `monotonic-clock.subscribe-*` always sleeps in real time on the
//! host, where the epoch deadline cannot interrupt it: a guest could hold a worker
//! thread for as long as it asked. So Berth links its own `wasi:clocks/monotonic-clock`
//! over wasmtime-wasi's ([`add_to_linker`]): frozen unless granted, and even when
//! granted a sleep longer than the call deadline traps at once. Likewise
//! `wasi:random/insecure` ([`add_random_to_linker`]): `WasiCtxBuilder` takes one
//! generator for it, shared by every instance built from it, where each instance
//! should start the same fixed stream.

use super::limits::Limits;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::bindings::random::insecure;
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::{FsPerms, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// A host directory a plugin may read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirGrant {
    /// The directory on the host.
    pub host_path: PathBuf,
    /// Where the guest sees it (an absolute path such as `/data`).
    pub guest_path: String,
}

/// What a plugin may reach; the default grants nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// The host's wall clock (else it reads the Unix epoch).
    pub wall_clock: bool,
    /// The host's monotonic clock and sleeping (else the clock is frozen at 0 and a
    /// sleep returns at once).
    pub monotonic_clock: bool,
    /// Real randomness from `wasi:random/insecure` and `insecure-seed` too (else they
    /// answer a fixed seed and a fixed stream; `wasi:random/random` is real either way).
    pub random: bool,
    /// Environment variables, as given.
    pub env: Vec<(String, String)>,
    /// Host directories, read-only.
    pub dirs: Vec<DirGrant>,
    /// Plugins whose waiting pods this one may also allow or reject (see
    /// [`super::capability`]).
    pub waits_of: Vec<String>,
}

/// A plugin's sandbox: its limits and what it is granted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// Deadline, memory, tables, instances.
    pub limits: Limits,
    /// Clocks, randomness, environment, directories.
    pub grants: Grants,
}

/// Why the WASI context of a sandbox could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SandboxError {
    /// A granted directory could not be opened.
    #[error("cannot open {} for the guest's {guest_path}: {message}", .host_path.display())]
    Dir {
        /// The directory on the host.
        host_path: PathBuf,
        /// Where the guest was to see it.
        guest_path: String,
        /// What the OS (through wasmtime-wasi) said.
        message: String,
    },
}

/// A wall clock stopped at the Unix epoch.
struct EpochWallClock;

impl HostWallClock for EpochWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

/// A monotonic clock that never moves.
struct FrozenMonotonicClock;

impl HostMonotonicClock for FrozenMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        0
    }
}

/// Largest `get-random-bytes` answer; bounds what one guest call makes the host
/// allocate (wasmtime-wasi's default is 64 MiB).
const MAX_RANDOM_BYTES: u64 = 1 << 20;

impl Sandbox {
    /// The WASI context of one instance: the grants, and stdout/stderr given.
    pub(crate) fn wasi_ctx(
        &self,
        stdout: super::output::GuestStdio,
        stderr: super::output::GuestStdio,
    ) -> Result<WasiCtx, SandboxError> {
        let g = &self.grants;
        let mut b = WasiCtxBuilder::new();
        b.stdout(stdout)
            .stderr(stderr)
            .allow_blocking_current_thread(true)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .max_random_size(MAX_RANDOM_BYTES);
        if !g.wall_clock {
            b.wall_clock(EpochWallClock);
        }
        if !g.monotonic_clock {
            b.monotonic_clock(FrozenMonotonicClock);
        }
        if !g.random {
            // `insecure` is Berth's own (see `add_random_to_linker`).
            b.insecure_random_seed(UNGRANTED_SEED);
        }
        b.envs(&g.env);
        for d in &g.dirs {
            b.preopened_dir(&d.host_path, &d.guest_path, FsPerms::ReadOnly)
                .map_err(|e| SandboxError::Dir {
                    host_path: d.host_path.clone(),
                    guest_path: d.guest_path.clone(),
                    message: format!("{e:#}"),
                })?;
        }
        Ok(b.build())
    }

    /// The monotonic clock of one instance, and its randomness.
    pub(crate) fn clock(&self) -> SandboxClock {
        SandboxClock {
            granted: self.grants.monotonic_clock,
            deadline: self.limits.call_deadline,
            origin: Instant::now(),
            random_granted: self.grants.random,
            insecure_state: UNGRANTED_SEED as u64,
        }
    }
}

/// `wasi:random/insecure-seed` without the grant.
const UNGRANTED_SEED: u128 = 0x5eed;

/// The host side of an instance's own `wasi:clocks/monotonic-clock` and
/// `wasi:random/insecure` (one value, since the store keeps one: the clock, and whether
/// randomness is granted with the state of the ungranted insecure stream).
pub(crate) struct SandboxClock {
    granted: bool,
    deadline: Duration,
    origin: Instant,
    random_granted: bool,
    insecure_state: u64,
}

impl SandboxClock {
    /// The next value of the ungranted insecure stream (SplitMix64: every value of
    /// the state is visited once before any repeats).
    fn next_insecure(&mut self) -> u64 {
        self.insecure_state = self.insecure_state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.insecure_state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// What the monotonic clock's host functions see of a store.
pub(crate) struct ClockView<'a> {
    clock: &'a SandboxClock,
    table: &'a mut ResourceTable,
}

impl<'a> ClockView<'a> {
    pub(crate) fn new(clock: &'a SandboxClock, table: &'a mut ResourceTable) -> Self {
        ClockView { clock, table }
    }
}

struct Clocks;

impl HasData for Clocks {
    type Data<'a> = ClockView<'a>;
}

/// When a sleep ends.
enum Wake {
    Now,
    At(tokio::time::Instant),
}

#[wasmtime_wasi::async_trait]
impl Pollable for Wake {
    async fn ready(&mut self) {
        if let Wake::At(t) = self {
            tokio::time::sleep_until(*t).await;
        }
    }
}

impl ClockView<'_> {
    fn sleep(&mut self, nanos: u64) -> wasmtime::Result<Resource<DynPollable>> {
        let wake = if !self.clock.granted || nanos == 0 {
            Wake::Now
        } else {
            let d = Duration::from_nanos(nanos);
            if d > self.clock.deadline {
                return Err(wasmtime::Error::msg(format!(
                    "the plugin asked to sleep {d:?}, longer than its call deadline of {:?}",
                    self.clock.deadline
                )));
            }
            Wake::At(tokio::time::Instant::now() + d)
        };
        let r = self.table.push(wake)?;
        subscribe(self.table, r)
    }
}

impl monotonic_clock::Host for ClockView<'_> {
    fn now(&mut self) -> wasmtime::Result<u64> {
        Ok(if self.clock.granted {
            u64::try_from(self.clock.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
        } else {
            0
        })
    }

    fn resolution(&mut self) -> wasmtime::Result<u64> {
        Ok(1)
    }

    fn subscribe_instant(&mut self, when: u64) -> wasmtime::Result<Resource<DynPollable>> {
        let now = self.now()?;
        self.sleep(when.saturating_sub(now))
    }

    fn subscribe_duration(&mut self, duration: u64) -> wasmtime::Result<Resource<DynPollable>> {
        self.sleep(duration)
    }
}

/// Links Berth's `wasi:clocks/monotonic-clock` over the one wasmtime-wasi linked.
pub(crate) fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> ClockView<'_>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let r = monotonic_clock::add_to_linker::<T, Clocks>(linker, view);
    linker.allow_shadowing(false);
    r
}

/// What the random host functions see of a store.
pub(crate) struct RandomView<'a> {
    state: &'a mut SandboxClock,
    wasi: &'a mut wasmtime_wasi::random::WasiRandomCtx,
}

impl<'a> RandomView<'a> {
    pub(crate) fn new(
        state: &'a mut SandboxClock,
        wasi: &'a mut wasmtime_wasi::random::WasiRandomCtx,
    ) -> Self {
        RandomView { state, wasi }
    }
}

struct Random;

impl HasData for Random {
    type Data<'a> = RandomView<'a>;
}

impl insecure::Host for RandomView<'_> {
    fn get_insecure_random_bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        if self.state.random_granted {
            return insecure::Host::get_insecure_random_bytes(self.wasi, len);
        }
        if len > MAX_RANDOM_BYTES {
            return Err(wasmtime::Error::msg(format!(
                "the plugin asked for {len} random bytes, more than {MAX_RANDOM_BYTES}"
            )));
        }
        let len = usize::try_from(len).expect("at most MAX_RANDOM_BYTES");
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.state.next_insecure().to_le_bytes());
        }
        out.truncate(len);
        Ok(out)
    }

    fn get_insecure_random_u64(&mut self) -> wasmtime::Result<u64> {
        if self.state.random_granted {
            return insecure::Host::get_insecure_random_u64(self.wasi);
        }
        Ok(self.state.next_insecure())
    }
}

/// Links Berth's `wasi:random/insecure` over wasmtime-wasi's.
pub(crate) fn add_random_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> RandomView<'_>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let r = insecure::add_to_linker::<T, Random>(linker, view);
    linker.allow_shadowing(false);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ungranted_insecure_stream_is_fixed_and_does_not_repeat() {
        let stream = |n: usize| {
            let mut c = Sandbox::default().clock();
            (0..n).map(|_| c.next_insecure()).collect::<Vec<_>>()
        };
        let a = stream(4096);
        assert_eq!(a, stream(4096));
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert_eq!(distinct.len(), a.len());
    }
}
