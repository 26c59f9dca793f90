//! Where pods and nodes come from and where bindings go.

pub mod manifest;
pub mod memory;
pub mod quantity;

use berth_sdk::Pod;

/// Binds pods to nodes: the `pods/binding` subresource of a real cluster, or the
/// embedded cluster's bookkeeping.
pub trait Binder: Send + Sync {
    /// Binds `pod` to `node`; an error names why the cluster refused.
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), String>;
}
