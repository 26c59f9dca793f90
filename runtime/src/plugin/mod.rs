//! The plugin boundary: what the framework asks of a plugin instance and what an
//! instance may ask back, shared by the sandboxed wasm instances (`wasm`) and the
//! native twins (`native`). It sits below both and below the framework, and imports
//! neither: the calls of each extension point are expanded here from the SDK's table
//! ([`berth_sdk::for_each_extension_point!`]), the cycle's state lives here, and the
//! what-if that PostFilter may run is a trait the framework implements.

mod calls;
pub mod cycle_state;
pub mod group_what_if;
pub mod waiting;

pub use calls::{CyclePod, PluginCalls};
pub use cycle_state::CycleState;

use berth_sdk::{NodeInfo, NodeVictims, Pod, PodDisruptionBudget, Status};

/// A what-if on one node: the copy of the node and of the cycle state, and the pods
/// removed from it so far.
#[derive(Debug)]
pub struct Simulation {
    /// The node's slot in the snapshot.
    pub slot: u32,
    /// The copy of the node (its stamp 0: a what-if), shared with the native twins
    /// that judge it and copied on write only while one still holds it.
    pub info: std::sync::Arc<NodeInfo>,
    /// The copy of the cycle state.
    pub state: CycleState,
    /// The pods removed from the copy, in order.
    pub removed: Vec<Pod>,
}

/// What the host lends a PostFilter call: the what-if on a copy of a node (upstream's
/// preemption dry run), run by the framework with the profile's own Filter plugins.
pub trait WhatIf: Send {
    /// The cluster's PodDisruptionBudgets.
    fn budgets(&self) -> Vec<PodDisruptionBudget>;
    /// Starts a what-if on `node`.
    fn simulate(&mut self, node: &str) -> Result<Simulation, Status>;
    /// Removes a pod of the node from the what-if.
    fn remove_pod(&mut self, sim: &mut Simulation, uid: &str) -> Status;
    /// Adds back a pod that [`WhatIf::remove_pod`] removed.
    fn add_pod(&mut self, sim: &mut Simulation, uid: &str) -> Status;
    /// Whether the pod passes every Filter plugin on the what-if.
    fn fits(&mut self, sim: &Simulation) -> Status;
    /// The calling PostFilter plugin's SelectVictimsOnNode for each node (by name),
    /// on the workers' instances of the plugin; one answer per node, in order.
    /// `None` when the lender does not run them (the plugin lacks the export, one
    /// worker, or this is a worker's what-if already): the plugin runs them itself.
    fn select_victims_on_nodes(
        &mut self,
        nodes: &[&str],
    ) -> Option<Vec<Result<NodeVictims, Status>>> {
        let _ = nodes;
        None
    }
    /// The lender's own type again, when the call gives it back.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
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
    /// The guest made a host call its extension point and cycle do not allow
    /// (`wasm::capability`): the call fails whatever the guest answered. The instance
    /// is kept (it was told no and went on).
    #[error("plugin {plugin} was refused{}: {message}", at(context))]
    Refused {
        /// The plugin's name.
        plugin: String,
        /// Where: the extension point, the pod and the nodes of the call.
        context: String,
        /// The host call and why it was refused.
        message: String,
    },
    /// The cycle's pod was deleted while the call waited in the host (a PreBind
    /// waiting for its volumes): the call fails whatever the guest answered, as
    /// upstream's binding stops once the pod is gone. The instance is kept.
    #[error("plugin {plugin}'s call ended{}: {message}", at(context))]
    PodGone {
        /// The plugin's name.
        plugin: String,
        /// Where: the extension point, the pod and the nodes of the call.
        context: String,
        /// What ended it.
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
            CallError::Trap { context, .. }
            | CallError::BadAnswer { context, .. }
            | CallError::Refused { context, .. }
            | CallError::PodGone { context, .. } => *context = where_,
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
            CallError::Refused {
                context, message, ..
            } => format!("was refused a host call{}: {message}", at(context)),
            CallError::PodGone {
                context, message, ..
            } => format!("ended{}: {message}", at(context)),
        }
    }
}
