//! The plugin's args, in the shape of kube-scheduler's `InterPodAffinityArgs`, with
//! the v1 defaults and upstream's validation.

use berth_sdk::serde_json::Value;
use berth_sdk::validation::invalid;
use serde::Deserialize;

/// The smallest allowed `hardPodAffinityWeight`.
pub const MIN_HARD_POD_AFFINITY_WEIGHT: i32 = 0;
/// The largest allowed `hardPodAffinityWeight`.
pub const MAX_HARD_POD_AFFINITY_WEIGHT: i32 = 100;
/// The v1 default of `hardPodAffinityWeight` (upstream's
/// `DefaultHardPodAffinitySymmetricWeight`).
pub const DEFAULT_HARD_POD_AFFINITY_WEIGHT: i32 = 1;

/// The validated, defaulted args.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterPodAffinityArgs {
    /// The score an existing pod's required affinity term adds to the nodes of its
    /// topology domain when the incoming pod matches it; 0 turns that off.
    pub hard_pod_affinity_weight: i32,
    /// When the incoming pod has no preferred (anti-)affinity terms, skip scoring
    /// instead of looking at the existing pods' terms.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs {
            hard_pod_affinity_weight: DEFAULT_HARD_POD_AFFINITY_WEIGHT,
            ignore_preferred_terms_of_existing_pods: false,
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
    // A pointer in v1: absent or null means the default, an explicit 0 stays 0.
    #[serde(default)]
    hard_pod_affinity_weight: Option<i32>,
    #[serde(default)]
    ignore_preferred_terms_of_existing_pods: Option<bool>,
}

impl InterPodAffinityArgs {
    /// Parses, defaults and validates the args (`Null` means none). Errors name the
    /// offending field, as upstream's validation does.
    pub fn from_json(args: Value) -> Result<InterPodAffinityArgs, String> {
        let raw: RawArgs = berth_sdk::args::parse(args)?;
        berth_sdk::args::check_kind(raw.kind.as_deref(), "InterPodAffinityArgs")?;
        let weight = raw
            .hard_pod_affinity_weight
            .unwrap_or(DEFAULT_HARD_POD_AFFINITY_WEIGHT);
        if !(MIN_HARD_POD_AFFINITY_WEIGHT..=MAX_HARD_POD_AFFINITY_WEIGHT).contains(&weight) {
            return Err(invalid(
                "hardPodAffinityWeight",
                weight,
                &format!(
                    "not in valid range [{MIN_HARD_POD_AFFINITY_WEIGHT}, \
                     {MAX_HARD_POD_AFFINITY_WEIGHT}]"
                ),
            ));
        }
        Ok(InterPodAffinityArgs {
            hard_pod_affinity_weight: weight,
            ignore_preferred_terms_of_existing_pods: raw
                .ignore_preferred_terms_of_existing_pods
                .unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::serde_json::json;

    #[test]
    fn no_args_means_the_v1_defaults() {
        let want = InterPodAffinityArgs {
            hard_pod_affinity_weight: 1,
            ignore_preferred_terms_of_existing_pods: false,
        };
        assert_eq!(InterPodAffinityArgs::from_json(Value::Null), Ok(want));
        assert_eq!(InterPodAffinityArgs::from_json(json!({})), Ok(want));
        assert_eq!(
            InterPodAffinityArgs::from_json(json!({"hardPodAffinityWeight": null})),
            Ok(want)
        );
    }

    #[test]
    fn explicit_values_are_kept() {
        let args = InterPodAffinityArgs::from_json(json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "InterPodAffinityArgs",
            "hardPodAffinityWeight": 0,
            "ignorePreferredTermsOfExistingPods": true,
        }))
        .unwrap();
        assert_eq!(args.hard_pod_affinity_weight, 0);
        assert!(args.ignore_preferred_terms_of_existing_pods);
        let args = InterPodAffinityArgs::from_json(json!({"hardPodAffinityWeight": 100})).unwrap();
        assert_eq!(args.hard_pod_affinity_weight, 100);
    }

    // The cases of upstream's TestValidateInterPodAffinityArgs.
    #[test]
    fn weight_must_be_within_0_to_100() {
        assert_eq!(
            InterPodAffinityArgs::from_json(json!({"hardPodAffinityWeight": -1})),
            Err("hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]".into())
        );
        assert_eq!(
            InterPodAffinityArgs::from_json(json!({"hardPodAffinityWeight": 101})),
            Err("hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]".into())
        );
    }

    #[test]
    fn malformed_args_name_the_field() {
        let err =
            InterPodAffinityArgs::from_json(json!({"hardPodAffinityWeight": "heavy"})).unwrap_err();
        assert!(
            err.starts_with("hardPodAffinityWeight: invalid type"),
            "{err}"
        );
        let err = InterPodAffinityArgs::from_json(json!({"hardPodAffinityWeight": 1u64 << 40}))
            .unwrap_err();
        assert!(
            err.starts_with("hardPodAffinityWeight: invalid value"),
            "{err}"
        );
        let err = InterPodAffinityArgs::from_json(json!({"hardPodAffinityWieght": 1})).unwrap_err();
        assert!(
            err.contains("unknown field `hardPodAffinityWieght`"),
            "{err}"
        );
        let err = InterPodAffinityArgs::from_json(json!({"kind": "NodeAffinityArgs"})).unwrap_err();
        assert_eq!(
            err,
            "kind: Invalid value: \"NodeAffinityArgs\": want InterPodAffinityArgs"
        );
        assert!(InterPodAffinityArgs::from_json(json!([1])).is_err());
    }
}
