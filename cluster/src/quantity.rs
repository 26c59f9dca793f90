//! Kubernetes resource quantities (`resource.Quantity`), parsed as the API server
//! parses them and read as kube-scheduler reads them.
//!
//! The parser is the SDK's ([`berth_sdk::quantity`]), so that the host and the plugins
//! read a quantity the same way; this module adds what the host reads resource maps
//! with.

use std::collections::BTreeMap;

use berth_sdk::ResourceList;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub use berth_sdk::quantity::{QuantityError, milli_value, value};

/// A bad quantity in a resource list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{resource}: {error}")]
pub struct ResourceError {
    /// The resource name (the key of the list).
    pub resource: String,
    /// What is wrong with its quantity.
    pub error: QuantityError,
}

/// Converts a resource map as kube-scheduler's `framework.Resource` reads it: `cpu`
/// in millicores, every other resource (memory, storage, pods, hugepages, extended
/// resources) as its value rounded up.
///
/// Like the API server's JSON decoding, surrounding whitespace is ignored; like its
/// validation, negative quantities are rejected.
pub fn resource_list(
    quantities: &BTreeMap<String, Quantity>,
) -> Result<ResourceList, ResourceError> {
    quantities
        .iter()
        .map(|(name, q)| {
            let text = q.0.trim();
            let parsed = if name == berth_sdk::CPU {
                milli_value(text)
            } else {
                value(text)
            };
            match parsed {
                Ok(v) if v < 0 => Err(QuantityError::Negative),
                other => other,
            }
            .map(|v| (name.clone(), v))
            .map_err(|error| ResourceError {
                resource: name.clone(),
                error,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_lists_use_millicores_for_cpu_only() {
        let map: BTreeMap<String, Quantity> = [
            ("cpu", "250m"),
            ("memory", "1.5Gi"),
            ("ephemeral-storage", " 10G "),
            ("pods", "110"),
            ("hugepages-2Mi", "100Mi"),
            ("example.com/gpu", "1"),
            ("example.com/fraction", "100m"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Quantity(v.to_owned())))
        .collect();
        let list = resource_list(&map).unwrap();
        assert_eq!(list["cpu"], 250);
        assert_eq!(list["memory"], 1_610_612_736);
        assert_eq!(list["ephemeral-storage"], 10_000_000_000);
        assert_eq!(list["pods"], 110);
        assert_eq!(list["hugepages-2Mi"], 100 << 20);
        assert_eq!(list["example.com/gpu"], 1);
        assert_eq!(list["example.com/fraction"], 1);
    }

    #[test]
    fn resource_list_errors_name_the_resource() {
        let one = |k: &str, v: &str| BTreeMap::from([(k.to_owned(), Quantity(v.to_owned()))]);
        let err = resource_list(&one("memory", "1x")).unwrap_err();
        assert_eq!(
            err,
            ResourceError {
                resource: "memory".into(),
                error: QuantityError::Format
            }
        );
        assert!(err.to_string().starts_with("memory: quantities must match"));
        let err = resource_list(&one("cpu", "-1")).unwrap_err();
        assert_eq!(err.to_string(), "cpu: must be greater than or equal to 0");
        let err = resource_list(&one("cpu", "9223372036854775807")).unwrap_err();
        assert_eq!(err.error, QuantityError::Overflow);
        assert_eq!(resource_list(&one("memory", "-0")).unwrap()["memory"], 0);
    }
}
