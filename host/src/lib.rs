//! # Berth
//!
//! A Kubernetes scheduler whose every extension-point plugin is a sandboxed
//! WebAssembly component. The host owns the queue, the cache and its snapshots, the
//! parallel Filter/Score fan-out and binding; plugins are components built against
//! the WIT package in `wit/` (see the `berth-sdk` crate).
//!
//! ```no_run
//! use berth::simulate::{simulate, SimulateOptions};
//! use berth::wasm::{Runtime, RuntimeOptions};
//!
//! let runtime = Runtime::new(RuntimeOptions::default()).unwrap();
//! let opts = SimulateOptions {
//!     files: vec!["examples/cluster.yaml".into()],
//!     ..SimulateOptions::default()
//! };
//! let report = simulate(&runtime, &opts).unwrap();
//! print!("{}", report.to_text());
//! ```
#![deny(missing_docs)]

// The crates below the commands, re-exported under the paths they had when they were
// modules of this crate (ARCHITECTURE.md draws the crates and their arrows).
pub use berth_cluster as cluster;
pub use berth_cluster::yaml;
pub use berth_runtime::{cache, clock, metrics, oci, wasm};
pub use berth_scheduler::{config, framework, queue, reload, scheduler, testing};

pub mod apibench;
pub mod bench;
pub mod config_cli;
pub mod features;
pub mod live;
pub mod page;
pub mod plugin_cli;
pub mod run;
pub mod server;
pub mod simulate;
pub mod watch;
