//! The sandbox: one wasmtime engine, plugin components loaded from bytes or files and
//! cached on disk as precompiled artifacts, and plugin instances that run every call
//! under a deadline and a memory limit, see only what their sandbox grants, and whose
//! output goes to `tracing`, rate-limited.

mod cache;
mod convert;
mod engine;
mod host_imports;
mod instance;
pub mod limits;
pub mod module;
mod output;
pub mod sandbox;

pub use cache::CacheError;
pub use engine::{Runtime, RuntimeError, RuntimeOptions};
pub use instance::Instance;
pub use limits::Limits;
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
    #[error("plugin {plugin} trapped{}: {message}", at(context))]
    Trap {
        /// The plugin's name.
        plugin: String,
        /// Where: the extension point, the pod and the nodes of the call.
        context: String,
        /// What wasmtime said, with the guest's message when it panicked.
        message: String,
    },
    /// The guest answered something the host cannot use (a list of the wrong
    /// length). The instance is discarded.
    #[error("plugin {plugin} answered badly{}: {message}", at(context))]
    BadAnswer {
        /// The plugin's name.
        plugin: String,
        /// Where: the extension point, the pod and the nodes of the call.
        context: String,
        /// What was wrong.
        message: String,
    },
}

fn at(context: &str) -> String {
    if context.is_empty() {
        String::new()
    } else {
        format!(" {context}")
    }
}

impl CallError {
    /// The error with where it happened.
    pub fn with_context(mut self, where_: String) -> Self {
        match &mut self {
            CallError::Trap { context, .. } | CallError::BadAnswer { context, .. } => {
                *context = where_
            }
        }
        self
    }

    /// Where it happened ("at Filter for pod default/p on node n1"), and what went
    /// wrong, without the plugin's name: the framework's error message.
    pub fn describe(&self) -> String {
        match self {
            CallError::Trap {
                context, message, ..
            } => format!("trapped{}: {message}", at(context)),
            CallError::BadAnswer {
                context, message, ..
            } => format!("answered badly{}: {message}", at(context)),
        }
    }
}
