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

pub mod apibench;
pub mod bench;
pub mod cache;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod config_cli;
pub mod features;
pub mod framework;
pub mod live;
pub mod metrics;
pub(crate) mod native;
pub mod oci;
pub mod page;
pub(crate) mod plugin;
pub mod plugin_cli;
pub mod queue;
pub mod reload;
pub mod run;
pub mod scheduler;
pub mod server;
pub mod simulate;
pub mod testing;
pub mod wasm;
pub mod watch;
pub mod yaml;
