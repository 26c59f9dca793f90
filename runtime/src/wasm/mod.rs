//! The sandbox: one wasmtime engine, plugin components loaded from bytes or files and
//! cached on disk as precompiled artifacts, and plugin instances that run every call
//! under a deadline and a memory limit, see only what their sandbox grants, and whose
//! output goes to `tracing`, rate-limited.

pub mod abi;
mod adapted;
mod cache;
pub mod capability;
mod convert;
#[cfg(test)]
mod convert_dra;
mod engine;
mod exports;
mod host_imports;
mod instance;
pub mod limits;
pub mod module;
mod output;
pub mod sandbox;

pub use cache::CacheError;
#[doc(hidden)]
pub use engine::test_runtime;
pub use engine::{Runtime, RuntimeError, RuntimeOptions};
pub use instance::Instance;
pub use limits::{Limits, MemoryBudget};
pub use module::{LoadError, Module};
pub use output::{BURST_LINES, LINES_PER_SECOND, MAX_LINE_BYTES};
pub use sandbox::{DirGrant, Grants, Sandbox};

/// Host-side bindings of the WIT package in `wit/`.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "berth:scheduler/scheduler-plugin",
        with: {
            "berth:scheduler/host.cycle-state": crate::plugin::CycleState,
            "berth:scheduler/host.node-simulation": crate::plugin::Simulation,
            "berth:scheduler/workload.group-simulation": crate::plugin::group_what_if::GroupSimulationHandle,
        },
        // The adapter for older tracks converts through serde ([`adapted`]).
        additional_derives: [serde::Serialize, serde::Deserialize],
    });
}

pub use crate::plugin::CallError;
