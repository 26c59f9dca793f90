//! Kubernetes quantities (`resource.Quantity`) where a plugin needs them as written:
//! device capacities, counters and capacity requests of dynamic resource allocation.

use serde::{Deserialize, Serialize};

/// A quantity as the object wrote it (`"80Gi"`, `"100m"`, `"4"`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Quantity(pub String);

impl Quantity {
    /// The quantity's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Quantity(s.to_owned())
    }
}
