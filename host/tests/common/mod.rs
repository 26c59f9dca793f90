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
/// (`host/src/wasm/cache.rs`, `tests/tests/components.rs`).
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
