//! The plugin's args, in the shape of kube-scheduler's
//! `NodeResourcesBalancedAllocationArgs`, with the v1 defaults and upstream's
//! validation.

use berth_sdk::args::default_resource_specs;
use berth_sdk::serde_json::Value;
use serde::Deserialize;

/// A resource whose share of the node Score balances, with its weight (0 or absent
/// means 1, and upstream accepts nothing else).
pub use berth_sdk::args::{ResourceSpec, default_resources};

/// The validated, defaulted args.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BalancedAllocationArgs {
    /// The resources whose usage fractions should be close to each other.
    pub resources: Vec<ResourceSpec>,
}

impl Default for BalancedAllocationArgs {
    fn default() -> Self {
        BalancedAllocationArgs {
            resources: default_resources(),
        }
    }
}

/// The args as written; `apiVersion` and `kind` are accepted as in a
/// KubeSchedulerConfiguration's `pluginConfig`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    #[allow(dead_code)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    resources: Vec<ResourceSpec>,
}

impl BalancedAllocationArgs {
    /// Parses, defaults and validates the args (`Null` means none). Errors name the
    /// offending field, as upstream's validation does.
    pub fn from_json(args: Value) -> Result<BalancedAllocationArgs, String> {
        let raw: RawArgs = berth_sdk::args::parse(args)?;
        berth_sdk::args::check_kind(raw.kind.as_deref(), "NodeResourcesBalancedAllocationArgs")?;

        // v1 defaulting: no resources means cpu and memory; weight 0 means 1.
        let resources = default_resource_specs(raw.resources);

        let mut errs = Vec::new();
        for (i, r) in resources.iter().enumerate() {
            if resources[..i].iter().any(|seen| seen.name == r.name) {
                errs.push(format!(
                    "resources[{i}].name: Duplicate value: {:?}",
                    r.name
                ));
            }
            // The balance ignores weights, so upstream accepts only 1.
            if r.weight != 1 {
                errs.push(format!(
                    "resources[{i}].weight: Invalid value: {}: must be 1",
                    r.weight
                ));
            }
        }
        match berth_sdk::validation::aggregate(errs) {
            None => Ok(BalancedAllocationArgs { resources }),
            Some(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::serde_json::json;

    fn spec(name: &str, weight: i64) -> ResourceSpec {
        ResourceSpec {
            name: name.into(),
            weight,
        }
    }

    #[test]
    fn no_args_means_cpu_and_memory() {
        let want = BalancedAllocationArgs::default();
        assert_eq!(want.resources, [spec("cpu", 1), spec("memory", 1)]);
        assert_eq!(
            BalancedAllocationArgs::from_json(Value::Null).unwrap(),
            want
        );
        assert_eq!(BalancedAllocationArgs::from_json(json!({})).unwrap(), want);
        assert_eq!(
            BalancedAllocationArgs::from_json(json!({"resources": []})).unwrap(),
            want
        );
    }

    #[test]
    fn missing_weights_default_to_1() {
        let args = BalancedAllocationArgs::from_json(json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "NodeResourcesBalancedAllocationArgs",
            "resources": [{"name": "cpu"}, {"name": "example.com/gpu", "weight": 0}],
        }))
        .unwrap();
        assert_eq!(args.resources, [spec("cpu", 1), spec("example.com/gpu", 1)]);
    }

    // The cases of upstream's TestValidateNodeResourcesBalancedAllocationArgs.
    #[test]
    fn weights_other_than_1_are_refused() {
        let err = BalancedAllocationArgs::from_json(json!({
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
        }))
        .unwrap_err();
        assert_eq!(err, "resources[0].weight: Invalid value: 2: must be 1");
        let err = BalancedAllocationArgs::from_json(json!({
            "resources": [{"name": "cpu", "weight": -1}],
        }))
        .unwrap_err();
        assert_eq!(err, "resources[0].weight: Invalid value: -1: must be 1");
    }

    #[test]
    fn duplicate_resources_are_refused() {
        let err = BalancedAllocationArgs::from_json(json!({
            "resources": [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}],
        }))
        .unwrap_err();
        assert_eq!(err, "resources[1].name: Duplicate value: \"cpu\"");
        let err = BalancedAllocationArgs::from_json(json!({
            "resources": [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 3}],
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "[resources[1].name: Duplicate value: \"cpu\", \
             resources[1].weight: Invalid value: 3: must be 1]"
        );
    }

    #[test]
    fn malformed_args_name_the_field() {
        let err = BalancedAllocationArgs::from_json(json!({
            "resources": [{"name": "cpu", "weight": "one"}],
        }))
        .unwrap_err();
        assert!(
            err.starts_with("resources[0].weight: invalid type"),
            "{err}"
        );
        let err = BalancedAllocationArgs::from_json(json!({"resource": []})).unwrap_err();
        assert!(err.contains("unknown field `resource`"), "{err}");
        let err =
            BalancedAllocationArgs::from_json(json!({"kind": "NodeAffinityArgs"})).unwrap_err();
        assert!(err.starts_with("kind: Invalid value"), "{err}");
    }
}
