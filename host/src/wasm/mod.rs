//! The sandbox: one wasmtime engine, plugin components loaded from bytes or files and
//! cached on disk as precompiled artifacts, and plugin instances that run every call
//! under a deadline and a memory limit.

mod convert;
pub mod limits;
pub mod module;

pub use limits::Limits;
pub use module::{Instance, LoadError, Module, Runtime, RuntimeOptions};

/// Host-side bindings of the WIT package in `wit/`.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "berth:scheduler/scheduler-plugin",
        with: {
            "berth:scheduler/host.cycle-state": crate::framework::cycle_state::CycleState,
            "berth:scheduler/host.node-simulation": crate::framework::preemption::Simulation,
        },
    });
}

/// Why a plugin call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The guest trapped: a panic, an out-of-bounds access, the deadline or the
    /// memory limit. The instance is discarded.
    #[error("plugin {plugin} trapped: {message}")]
    Trap {
        /// The plugin's name.
        plugin: String,
        /// What wasmtime said, with the guest's message when it panicked.
        message: String,
    },
    /// The guest answered something the host cannot use.
    #[error("plugin {plugin} answered badly: {message}")]
    BadAnswer {
        /// The plugin's name.
        plugin: String,
        /// What was wrong.
        message: String,
    },
}
