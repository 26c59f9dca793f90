//! Running the `berth` binary from the CLI tests.
#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `berth` with `args` from the workspace root, caching components in
/// [`component_cache`].
pub fn berth(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(args)
        .env("BERTH_CACHE_DIR", component_cache())
        .current_dir(workspace())
        .output()
        .expect("run berth")
}

/// The component cache every test of a run shares, in cargo's directory for
/// integration tests' files: each component is compiled once per run rather than once
/// per test. The cache itself is tested with caches of its own
/// (`runtime/src/wasm/cache.rs`, `tests/tests/components.rs`).
pub fn component_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// The workspace root (examples/ are relative to it).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A loopback port nobody listens on now, for a `berth run` to serve on. It is
/// below the kernel's ephemeral range: a port the kernel handed out (`bind` to 0)
/// would be free again once the probe closes, and the next outgoing connection (to
/// the API server, say) could take it before berth binds it. Where in the range to
/// start looking depends on the process and the time, so tests running at once
/// start at different places.
pub fn free_port() -> u16 {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low.max(10_001));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let span = u32::from(high - low);
    let start = (std::process::id().wrapping_mul(7919) ^ nanos) % span;
    // Not one this process handed out already and has not bound yet.
    static HANDED: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed = HANDED.lock().unwrap_or_else(|e| e.into_inner());
    let port = (0..span)
        .map(|i| low + ((start + i) % span) as u16)
        .find(|port| {
            !handed.contains(port) && std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok()
        })
        .expect("a free loopback port below the ephemeral range");
    handed.push(port);
    port
}
