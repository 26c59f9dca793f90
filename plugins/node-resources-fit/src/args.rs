//! The plugin's args, in the shape of kube-scheduler's `NodeResourcesFitArgs`, with
//! the v1 defaults and upstream's validation.

use berth_sdk::args::default_resource_specs;
use berth_sdk::serde_json::Value;
use berth_sdk::validation::{aggregate, invalid, unsupported};
use serde::Deserialize;

/// A resource Score takes into account, with its weight (0 or absent means 1).
pub use berth_sdk::args::{ResourceSpec, default_resources};

/// What is wrong with a qualified name (`[prefix/]name`), in the wording this
/// plugin has always reported.
pub use berth_sdk::validation::qualified_name_errors_short as qualified_name_errors;

/// The scale of shape scores and utilizations, and the shape itself: shared with
/// VolumeBinding through the SDK.
pub use berth_sdk::helpers::{
    MAX_CUSTOM_PRIORITY_SCORE, MAX_UTILIZATION, ShapePoint, shape_errors,
};
/// Largest weight of a scored resource.
pub const MAX_RESOURCE_WEIGHT: i64 = 100;

/// How Score ranks nodes by the resources the pod would use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoringStrategyType {
    /// Favours nodes with more free capacity (the default).
    LeastAllocated,
    /// Favours nodes with less free capacity (bin packing).
    MostAllocated,
    /// Maps utilization through a user-given piecewise-linear shape.
    RequestedToCapacityRatio,
}

impl ScoringStrategyType {
    const ALL: [ScoringStrategyType; 3] = [
        ScoringStrategyType::LeastAllocated,
        ScoringStrategyType::MostAllocated,
        ScoringStrategyType::RequestedToCapacityRatio,
    ];

    /// The spelling of the config API.
    pub fn as_str(self) -> &'static str {
        match self {
            ScoringStrategyType::LeastAllocated => "LeastAllocated",
            ScoringStrategyType::MostAllocated => "MostAllocated",
            ScoringStrategyType::RequestedToCapacityRatio => "RequestedToCapacityRatio",
        }
    }
}

/// The validated, defaulted args.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitArgs {
    /// Extended resources Filter does not check.
    pub ignored_resources: Vec<String>,
    /// Groups (the part before `/`) of extended resources Filter does not check.
    pub ignored_resource_groups: Vec<String>,
    /// The scoring strategy.
    pub strategy: ScoringStrategyType,
    /// The resources Score looks at, with weights in 1..=100.
    pub resources: Vec<ResourceSpec>,
    /// For `RequestedToCapacityRatio`: the shape, with scores already scaled to
    /// 0..=100. Empty for the other strategies.
    pub shape: Vec<ShapePoint>,
}

impl Default for FitArgs {
    fn default() -> Self {
        FitArgs {
            ignored_resources: Vec::new(),
            ignored_resource_groups: Vec::new(),
            strategy: ScoringStrategyType::LeastAllocated,
            resources: default_resources(),
            shape: Vec::new(),
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
    ignored_resources: Vec<String>,
    #[serde(default)]
    ignored_resource_groups: Vec<String>,
    #[serde(default)]
    scoring_strategy: Option<RawScoringStrategy>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawScoringStrategy {
    #[serde(default, rename = "type")]
    type_: String,
    #[serde(default)]
    resources: Vec<ResourceSpec>,
    #[serde(default)]
    requested_to_capacity_ratio: Option<RawRequestedToCapacityRatio>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequestedToCapacityRatio {
    #[serde(default)]
    shape: Vec<ShapePoint>,
}

impl FitArgs {
    /// Parses, defaults and validates the args (`Null` means none). Errors name the
    /// offending field, as upstream's validation does.
    pub fn from_json(args: Value) -> Result<FitArgs, String> {
        let raw: RawArgs = berth_sdk::args::parse(args)?;
        berth_sdk::args::check_kind(raw.kind.as_deref(), "NodeResourcesFitArgs")?;

        let mut errs = Vec::new();
        for (i, res) in raw.ignored_resources.iter().enumerate() {
            for msg in qualified_name_errors(res) {
                errs.push(invalid(&format!("ignoredResources[{i}]"), res, &msg));
            }
        }
        for (i, group) in raw.ignored_resource_groups.iter().enumerate() {
            let field = format!("ignoredResourceGroups[{i}]");
            if group.contains('/') {
                errs.push(invalid(
                    &field,
                    group,
                    "resource group name can't contain '/'",
                ));
            }
            for msg in qualified_name_errors(group) {
                errs.push(invalid(&field, group, &msg));
            }
        }

        // v1 defaulting: no strategy means LeastAllocated over cpu and memory; no
        // resources means cpu and memory; weight 0 means 1. The type is not defaulted.
        let raw_strategy = raw.scoring_strategy.unwrap_or_else(|| RawScoringStrategy {
            type_: ScoringStrategyType::LeastAllocated.as_str().to_owned(),
            ..RawScoringStrategy::default()
        });
        let resources = default_resource_specs(raw_strategy.resources);

        let strategy = ScoringStrategyType::ALL
            .into_iter()
            .find(|s| s.as_str() == raw_strategy.type_);
        if strategy.is_none() {
            let supported = ScoringStrategyType::ALL.map(ScoringStrategyType::as_str);
            errs.push(unsupported(
                "scoringStrategy.type",
                &raw_strategy.type_,
                &supported,
            ));
        }
        for (i, r) in resources.iter().enumerate() {
            if r.weight <= 0 || r.weight > MAX_RESOURCE_WEIGHT {
                errs.push(invalid(
                    &format!("scoringStrategy.resources[{i}].weight"),
                    r.weight,
                    &format!(
                        "resource weight of {} not in valid range (0, {MAX_RESOURCE_WEIGHT}]",
                        r.name
                    ),
                ));
            }
        }
        const SHAPE: &str = "scoringStrategy.requestedToCapacityRatio.shape";
        let mut shape = Vec::new();
        if let Some(ratio) = raw_strategy.requested_to_capacity_ratio {
            errs.extend(shape_errors(&ratio.shape, SHAPE));
            shape = ratio.shape;
        } else if strategy == Some(ScoringStrategyType::RequestedToCapacityRatio) {
            // Upstream would dereference a nil pointer here.
            errs.push(
                "scoringStrategy.requestedToCapacityRatio: Required value: \
                 the RequestedToCapacityRatio strategy needs a shape"
                    .to_owned(),
            );
        }

        match (aggregate(errs), strategy) {
            (None, Some(strategy)) => {
                if strategy != ScoringStrategyType::RequestedToCapacityRatio {
                    shape.clear();
                }
                // Shape scores are written on a 0..10 scale and used on 0..100.
                for p in &mut shape {
                    p.score *= berth_sdk::MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE;
                }
                Ok(FitArgs {
                    ignored_resources: raw.ignored_resources,
                    ignored_resource_groups: raw.ignored_resource_groups,
                    strategy,
                    resources,
                    shape,
                })
            }
            // An unknown strategy is always among the errors.
            (err, _) => Err(err.unwrap_or_default()),
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
    fn no_args_is_least_allocated_over_cpu_and_memory() {
        let args = FitArgs::from_json(Value::Null).unwrap();
        assert_eq!(args, FitArgs::default());
        assert_eq!(args.strategy, ScoringStrategyType::LeastAllocated);
        assert_eq!(args.resources, [spec("cpu", 1), spec("memory", 1)]);
        assert_eq!(FitArgs::from_json(json!({})).unwrap(), FitArgs::default());
    }

    #[test]
    fn api_version_and_kind_are_accepted() {
        let args = json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "NodeResourcesFitArgs",
            "ignoredResources": ["example.com/foo"],
        });
        let args = FitArgs::from_json(args).unwrap();
        assert_eq!(args.ignored_resources, ["example.com/foo"]);
        let err = FitArgs::from_json(json!({"kind": "NodeAffinityArgs"})).unwrap_err();
        assert!(err.starts_with("kind: Invalid value"), "{err}");
    }

    #[test]
    fn resources_and_weights_are_defaulted() {
        let args = FitArgs::from_json(json!({
            "scoringStrategy": {"type": "MostAllocated"}
        }))
        .unwrap();
        assert_eq!(args.strategy, ScoringStrategyType::MostAllocated);
        assert_eq!(args.resources, default_resources());

        // v1 defaulting turns a zero or missing weight into 1 before validation.
        let args = FitArgs::from_json(json!({
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "memory", "weight": 0}, {"name": "cpu"}],
            }
        }))
        .unwrap();
        assert_eq!(args.resources, [spec("memory", 1), spec("cpu", 1)]);
    }

    #[test]
    fn weights_must_be_within_1_to_100() {
        let args = |w: i64| {
            FitArgs::from_json(json!({
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [{"name": "memory", "weight": w}, {"name": "cpu", "weight": 1}],
                }
            }))
        };
        assert_eq!(
            args(-1).unwrap_err(),
            "scoringStrategy.resources[0].weight: Invalid value: -1: \
             resource weight of memory not in valid range (0, 100]"
        );
        assert!(
            args(101)
                .unwrap_err()
                .starts_with("scoringStrategy.resources[0].weight:")
        );
        assert_eq!(args(100).unwrap().resources[0].weight, 100);
    }

    #[test]
    fn strategy_type_must_be_known() {
        let err = FitArgs::from_json(json!({"scoringStrategy": {"type": "Foo"}})).unwrap_err();
        assert_eq!(
            err,
            "scoringStrategy.type: Unsupported value: \"Foo\": supported values: \
             \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\""
        );
        // A strategy without a type is not defaulted.
        let err = FitArgs::from_json(json!({"scoringStrategy": {}})).unwrap_err();
        assert!(err.starts_with("scoringStrategy.type: Unsupported value: \"\""));
    }

    #[test]
    fn shape_is_validated_and_scaled() {
        let ratio = |shape: Value| {
            FitArgs::from_json(json!({
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": shape},
                }
            }))
        };
        let args = ratio(json!([
            {"utilization": 0, "score": 10},
            {"utilization": 100, "score": 0},
        ]))
        .unwrap();
        assert_eq!(
            args.shape,
            [
                ShapePoint {
                    utilization: 0,
                    score: 100
                },
                ShapePoint {
                    utilization: 100,
                    score: 0
                }
            ]
        );

        assert_eq!(
            ratio(json!([])).unwrap_err(),
            "scoringStrategy.requestedToCapacityRatio.shape: Required value: \
             at least one point must be specified"
        );
        assert_eq!(
            ratio(json!([{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]))
                .unwrap_err(),
            "scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: \
             50: values must be sorted in increasing order"
        );
        assert_eq!(
            ratio(json!([{"utilization": 101, "score": 11}])).unwrap_err(),
            "[scoringStrategy.requestedToCapacityRatio.shape[0].utilization: Invalid value: \
             101: not in valid range [0, 100], \
             scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11: \
             not in valid range [0, 10]]"
        );
        assert!(
            ratio(json!([{"utilization": -1, "score": 0}]))
                .unwrap_err()
                .contains("shape[0].utilization: Invalid value: -1")
        );
    }

    #[test]
    fn ratio_strategy_needs_a_shape() {
        let err = FitArgs::from_json(json!({
            "scoringStrategy": {"type": "RequestedToCapacityRatio"}
        }))
        .unwrap_err();
        assert!(
            err.starts_with("scoringStrategy.requestedToCapacityRatio: Required value"),
            "{err}"
        );
    }

    #[test]
    fn a_shape_with_another_strategy_is_validated_but_unused() {
        let args = FitArgs::from_json(json!({
            "scoringStrategy": {
                "type": "MostAllocated",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 1}]},
            }
        }))
        .unwrap();
        assert!(args.shape.is_empty());
    }

    #[test]
    fn ignored_resources_must_be_qualified_names() {
        assert!(
            FitArgs::from_json(json!({"ignoredResources": ["example.com/foo", "foo"]})).is_ok()
        );
        let err = FitArgs::from_json(json!({"ignoredResources": ["foo", "-bad"]})).unwrap_err();
        assert!(
            err.starts_with("ignoredResources[1]: Invalid value: \"-bad\": name part must"),
            "{err}"
        );
        let err = FitArgs::from_json(json!({"ignoredResources": ["Example.com/x"]})).unwrap_err();
        assert!(
            err.contains("prefix part a lowercase RFC 1123 subdomain"),
            "{err}"
        );
    }

    #[test]
    fn ignored_resource_groups_cannot_contain_a_slash() {
        assert!(FitArgs::from_json(json!({"ignoredResourceGroups": ["example.com"]})).is_ok());
        let err =
            FitArgs::from_json(json!({"ignoredResourceGroups": ["example.com/aaa"]})).unwrap_err();
        assert_eq!(
            err,
            "ignoredResourceGroups[0]: Invalid value: \"example.com/aaa\": \
             resource group name can't contain '/'"
        );
    }

    #[test]
    fn malformed_args_name_the_field() {
        let err = FitArgs::from_json(json!({
            "scoringStrategy": {"resources": [{"name": "cpu", "weight": "heavy"}]}
        }))
        .unwrap_err();
        assert!(
            err.starts_with("scoringStrategy.resources[0].weight: invalid type"),
            "{err}"
        );
        let err = FitArgs::from_json(json!({"ignoredResource": []})).unwrap_err();
        assert!(err.contains("unknown field `ignoredResource`"), "{err}");
        assert!(FitArgs::from_json(json!([1])).is_err());
    }
}
