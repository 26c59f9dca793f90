//! # The contract: the WIT package `berth:scheduler`
//!
//! A plugin is a WebAssembly component of the world `scheduler-plugin` in the WIT
//! package below, the one source both the host and this SDK are generated from.
//! Anything that builds such a component is a Berth plugin, whatever its language:
//! this crate is one way to write it (it implements every export and answers for
//! the extension points a plugin does not serve), componentize-py or
//! componentize-js are others (`examples/plugins/python-fewest-pods` in the
//! repository is a plugin in Python).
//!
//! What the host relies on:
//!
//! - **Versioned names.** Every interface is `berth:scheduler/NAME@VERSION`. A
//!   component built against another version does not link, and `berth plugin
//!   check` says which version it was built for. `plugin.info` repeats the version
//!   (`wit-version`); the host refuses a mismatch.
//! - **Metadata first.** The host calls `plugin.info` on a throwaway instance when it
//!   loads the module: the name must be the one the configuration gives the module,
//!   and the extension points must include every point the profile enables it at.
//!   Then every instance gets `plugin.configure` with the plugin's args as JSON
//!   (`{}` when none) before any other call; an error refuses the module.
//! - **The replica.** `replica.sync-nodes` sends the nodes that changed since the
//!   instance's last sync, by slot number; Filter and Score then name nodes by slot.
//!   The pods of each node are sent only when `plugin-info.wants-pods` is set.
//! - **Pods a plugin sits out.** A plugin whose configured instance answers a
//!   non-empty `configuration.only-for-pods-with` is left out of the scheduling and
//!   binding cycles of a pod with none of those features: no call, and the pod is
//!   not sent ([`Plugin::only_for_pods_with`](crate::Plugin::only_for_pods_with)).
//! - **The cycle's pod.** The pod crosses once per cycle per instance: with the
//!   cycle's first `replica.sync-nodes` (its `begin`), or by `cycle.begin-cycle`
//!   when the replica is up to date; PreFilter through PostBind act on it.
//! - **Batches.** Filter answers only the nodes that did not pass; Score answers one
//!   score per slot, in order; NormalizeScore one score per score given.
//! - **The cycle state** is a host resource (`host.cycle-state`) holding bytes; this
//!   SDK encodes values with postcard ([`CycleState`](crate::CycleState)).
//! - **The sandbox.** Each call runs under a deadline and each instance under a
//!   memory limit; a trap fails the pod being scheduled and the instance is
//!   rebuilt. WASI is linked with an empty context: no files, network or
//!   environment; standard output and error go to the scheduler's log.
//! - **Custom section.** [`export_plugin!`](crate::export_plugin) records the plugin
//!   crate's version in a custom section named
//!   [`VERSION_SECTION`](crate::VERSION_SECTION); `berth plugin check` reports it.
//!
//! ```wit
#![doc = include_str!("../../wit/scheduler.wit")]
//! ```
