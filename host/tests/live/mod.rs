//! The end-to-end tier: `berth run` against a real kube-apiserver and etcd (and, for
//! volumes and device claims, kube-controller-manager) of Kubernetes 1.37.2, built
//! from Go modules by `tests/e2e/apiserver.sh` and started on loopback, one at a time.
//!
//! The tier's tests start one API server at a time (see `apiserver::serial`); the
//! rest of this binary's tests run beside them.

mod cluster;
mod declared_features;
mod deploy;
mod dra;
mod endpoints;
mod feature_gates;
mod from_cluster;
mod gates;
mod hot_swap;
mod list_access;
mod not_ready;
mod operations;
mod pod_groups;
mod pod_level;
mod preemption;
mod resize;
mod volumes;
