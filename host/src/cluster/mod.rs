//! Where pods and nodes come from and where bindings go.

pub mod affinity;
pub mod manifest;
pub mod memory;
pub mod quantity;

use berth_sdk::{Labels, Pod};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Binds pods to nodes: the `pods/binding` subresource of a real cluster, or the
/// embedded cluster's bookkeeping.
pub trait Binder: Send + Sync {
    /// Binds `pod` to `node`; an error names why the cluster refused.
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), String>;

    /// The node the cluster has the pod bound to, if any (after a failed bind: was
    /// it bound by someone else?).
    fn bound_node(&self, pod: &Pod) -> Option<String> {
        let _ = pod;
        None
    }
}

/// The namespaces of the cluster and their labels, shared with plugin instances
/// (namespace selectors of pod affinity read them).
#[derive(Clone, Debug, Default)]
pub struct Namespaces(Arc<RwLock<HashMap<String, Labels>>>);

impl Namespaces {
    /// No namespaces.
    pub fn new() -> Self {
        Self::default()
    }

    /// The labels of a namespace, if known.
    pub fn labels(&self, namespace: &str) -> Option<Labels> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(namespace)
            .cloned()
    }

    /// Adds or updates a namespace. Like the API server, it gives every namespace the
    /// label `kubernetes.io/metadata.name` with its name.
    pub fn set(&self, namespace: &str, mut labels: Labels) {
        labels.insert("kubernetes.io/metadata.name".into(), namespace.to_owned());
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(namespace.to_owned(), labels);
    }

    /// Removes a namespace.
    pub fn remove(&self, namespace: &str) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(namespace);
    }
}
