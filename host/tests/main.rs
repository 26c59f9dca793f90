//! The `berth` command end to end, and the end-to-end tier against a real API server
//! (`live/`): one test binary, one module per subject.
//!
//! One binary rather than one per file: each would link wasmtime, cranelift, kube and
//! the whole host again (and instantiate the same kube-rs and tokio code), and tests in
//! one binary run beside each other where files' binaries ran one after another.

#[path = "common/apiserver.rs"]
mod apiserver;
mod common;
#[path = "common/proxy.rs"]
mod proxy;
#[path = "common/registry.rs"]
mod registry;

mod bench_cli;
mod book;
mod config_cli;
mod deploy_manifests;
mod live;
mod oci;
mod page;
mod plugin_authors;
mod rooms;
mod simulate_cli;
