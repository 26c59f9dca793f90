//! Reading a plugin's args: the JSON of its `pluginConfig` entry, in the shape of a
//! kube-scheduler `…Args` type.
//!
//! A plugin declares the args as written, with `apiVersion` and `kind` among the
//! fields (so `deny_unknown_fields` accepts them and lists them), and reads them with
//! [`parse`]; [`check_kind`] refuses a `kind` meant for another plugin.
//!
//! ```
//! use berth_sdk::args;
//! use berth_sdk::serde_json::json;
//! use serde::Deserialize;
//!
//! #[derive(Default, Deserialize)]
//! #[serde(rename_all = "camelCase", deny_unknown_fields)]
//! struct RawArgs {
//!     #[serde(default)]
//!     api_version: Option<String>,
//!     #[serde(default)]
//!     kind: Option<String>,
//!     #[serde(default)]
//!     weight: i64,
//! }
//!
//! let raw: RawArgs = args::parse(json!({"kind": "MyArgs", "weight": 2})).unwrap();
//! assert_eq!(raw.weight, 2);
//! assert!(args::check_kind(raw.kind.as_deref(), "MyArgs").is_ok());
//! let err = args::parse::<RawArgs>(json!({"weight": "x"})).err().unwrap();
//! assert!(err.starts_with("weight: invalid type"));
//! ```

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A resource a scoring plugin takes into account, with its weight: the config
/// API's `ResourceSpec` (`NodeResourcesFitArgs`, `NodeResourcesBalancedAllocationArgs`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    /// The resource name, e.g. `cpu` or `example.com/gpu`.
    pub name: String,
    /// Its weight; 0 or absent means 1 (see [`default_resource_specs`]).
    #[serde(default)]
    pub weight: i64,
}

/// cpu and memory, weight 1 each: upstream's `defaultResourceSpec`.
pub fn default_resources() -> Vec<ResourceSpec> {
    ["cpu", "memory"]
        .into_iter()
        .map(|name| ResourceSpec {
            name: name.to_owned(),
            weight: 1,
        })
        .collect()
}

/// The v1 defaulting of a resource list: none means [`default_resources`], and a
/// weight of 0 means 1.
pub fn default_resource_specs(mut resources: Vec<ResourceSpec>) -> Vec<ResourceSpec> {
    if resources.is_empty() {
        resources = default_resources();
    }
    for r in &mut resources {
        if r.weight == 0 {
            r.weight = 1;
        }
    }
    resources
}

/// Deserializes args: `Null` (no args) is `T::default()`; an error names the path of
/// the offending field (`a.b[0].c: …`), or is the bare message when it is about the
/// whole value.
pub fn parse<T: DeserializeOwned + Default>(args: Value) -> Result<T, String> {
    match args {
        Value::Null => Ok(T::default()),
        value => serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            if path == "." {
                e.inner().to_string()
            } else {
                format!("{path}: {}", e.inner())
            }
        }),
    }
}

/// Refuses a `kind` other than `want`: `kind: Invalid value: "Other": want {want}`.
/// No `kind` is fine.
pub fn check_kind(kind: Option<&str>, want: &str) -> Result<(), String> {
    match kind {
        Some(kind) if kind != want => Err(crate::validation::invalid(
            "kind",
            kind,
            &format!("want {want}"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Raw {
        #[serde(default)]
        kind: Option<String>,
        #[serde(default)]
        items: Vec<Item>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Item {
        #[serde(default)]
        weight: i64,
    }

    #[test]
    fn null_is_the_default() {
        assert_eq!(parse::<Raw>(Value::Null).unwrap(), Raw::default());
        assert_eq!(parse::<Raw>(json!({})).unwrap(), Raw::default());
    }

    #[test]
    fn errors_name_the_field() {
        let err = parse::<Raw>(json!({"items": [{"weight": "x"}]})).unwrap_err();
        assert!(err.starts_with("items[0].weight: invalid type"), "{err}");
        let err = parse::<Raw>(json!({"item": []})).unwrap_err();
        assert_eq!(
            err,
            "item: unknown field `item`, expected `kind` or `items`"
        );
        // An error about the whole value has no path.
        let err = parse::<Raw>(json!("x")).unwrap_err();
        assert!(err.starts_with("invalid type: string"), "{err}");
        let err = parse::<Raw>(json!([1])).unwrap_err();
        assert!(err.starts_with("[0]: invalid type"), "{err}");
    }

    #[test]
    fn resource_specs_are_defaulted() {
        let spec = |name: &str, weight| ResourceSpec {
            name: name.into(),
            weight,
        };
        assert_eq!(default_resources(), [spec("cpu", 1), spec("memory", 1)]);
        assert_eq!(default_resource_specs(Vec::new()), default_resources());
        assert_eq!(
            default_resource_specs(vec![spec("memory", 0), spec("cpu", 3)]),
            [spec("memory", 1), spec("cpu", 3)]
        );
        let parsed: Vec<ResourceSpec> = parse(json!([{"name": "cpu"}])).unwrap();
        assert_eq!(parsed, [spec("cpu", 0)]);
        let err = parse::<Vec<ResourceSpec>>(json!([{"name": "cpu", "w": 1}])).unwrap_err();
        assert!(err.starts_with("[0].w: unknown field `w`"), "{err}");
    }

    #[test]
    fn kinds() {
        assert!(check_kind(None, "A").is_ok());
        assert!(check_kind(Some("A"), "A").is_ok());
        assert_eq!(
            check_kind(Some("B"), "A").unwrap_err(),
            "kind: Invalid value: \"B\": want A"
        );
    }
}
