//! The plugin runtime of Berth: plugins as WebAssembly components in a sandbox
//! (wasmtime; deadlines, memory limits, capability grants), their native twins, and
//! the boundary both share (the extension points' calls, the cycle's state, the host
//! API a plugin calls back). Beside it, what the runtime and the loop above it keep:
//! the cluster cache and its snapshots (the nodes plugins see), the metrics, the
//! clock, and plugin modules pulled from OCI registries.
//!
//! It depends on the cluster model (`berth-cluster`) and the SDK, and may not depend
//! on the framework, the scheduling loop or the commands (`berth-scheduler`,
//! `berth`): nothing here knows of profiles, queues or a scheduling cycle's order.

#![deny(missing_docs)]

pub mod cache;
pub mod clock;
pub mod metrics;
pub mod native;
pub mod oci;
pub mod plugin;
pub mod wasm;
