//! The end-to-end tier: `berth run` against a real kube-apiserver and etcd (and, for
//! volumes, kube-controller-manager), built from Debian's source package by
//! `tests/e2e/apiserver.sh` and started on loopback, one at a time.
//!
//! One test binary for the whole tier: each of these files instantiates the same
//! kube-rs and tokio code, and as separate binaries they were compiled (and linked)
//! six times over.

#[path = "../common/apiserver.rs"]
mod apiserver;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/proxy.rs"]
mod proxy;
#[path = "../common/registry.rs"]
mod registry;

mod cluster;
mod endpoints;
mod from_cluster;
mod hot_swap;
mod not_ready;
mod operations;
mod preemption;
mod volumes;
