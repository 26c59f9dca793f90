//! The framework and the scheduling loop of Berth: the configuration and its
//! profiles, the scheduling queue, the framework that runs a profile's plugins at
//! each extension point in upstream's order (the one scheduling cycle, which
//! `explain` and shadow runs observe), the loop that pops, schedules, assumes and
//! binds, preemption's cluster side, and hot swap of profiles while it runs.
//!
//! It depends on the cluster model (`berth-cluster`) and the plugin runtime
//! (`berth-runtime`), and may not depend on the commands, the server or the page
//! (`berth`): it is driven through [`scheduler::Scheduler`], by a live loop or an
//! embedded run.

#![deny(missing_docs)]

pub mod config;
pub mod framework;
pub mod queue;
pub mod reload;
pub mod scheduler;
pub mod testing;
