//! The plugin's args, in the shape of kube-scheduler's `PodTopologySpreadArgs` (v1),
//! with upstream's defaulting and validation.

use berth_sdk::serde_json::Value;
use berth_sdk::types::{NodeInclusionPolicy, TopologySpreadConstraint, WhenUnsatisfiable};
use berth_sdk::validation::{aggregate, invalid, unsupported};
use serde::Deserialize;

/// What is wrong with a qualified name (`[prefix/]name`), in the wording this
/// plugin has always reported.
pub use berth_sdk::validation::qualified_name_errors_short as qualified_name_errors;

use crate::common::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};

/// Where the constraints for pods without their own come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultingType {
    /// Kubernetes' built-in constraints (the default): spread by hostname (maxSkew 3)
    /// and zone (maxSkew 5), both `ScheduleAnyway`.
    System,
    /// The constraints listed in `defaultConstraints` (none when the list is empty).
    List,
}

impl DefaultingType {
    const ALL: [DefaultingType; 2] = [DefaultingType::System, DefaultingType::List];

    /// The spelling of the config API.
    pub fn as_str(self) -> &'static str {
        match self {
            DefaultingType::System => "System",
            DefaultingType::List => "List",
        }
    }
}

/// The validated, defaulted args.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpreadArgs {
    /// Where default constraints come from.
    pub defaulting_type: DefaultingType,
    /// `defaultConstraints` as written (always empty with `System`).
    pub default_constraints: Vec<TopologySpreadConstraint>,
}

impl Default for SpreadArgs {
    fn default() -> Self {
        SpreadArgs {
            defaulting_type: DefaultingType::System,
            default_constraints: Vec::new(),
        }
    }
}

impl SpreadArgs {
    /// The constraints given to pods that have none of their own: the system
    /// defaults or the listed ones.
    pub fn effective_default_constraints(&self) -> Vec<TopologySpreadConstraint> {
        match self.defaulting_type {
            DefaultingType::System => system_default_constraints(),
            DefaultingType::List => self.default_constraints.clone(),
        }
    }
}

/// Upstream's `systemDefaultConstraints`: hostname with maxSkew 3 and zone with
/// maxSkew 5, both `ScheduleAnyway`.
pub fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    [(LABEL_HOSTNAME, 3), (LABEL_TOPOLOGY_ZONE, 5)]
        .into_iter()
        .map(|(key, max_skew)| TopologySpreadConstraint {
            max_skew,
            topology_key: key.to_owned(),
            when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
            label_selector: None,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
        })
        .collect()
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
    default_constraints: Option<Vec<RawConstraint>>,
    #[serde(default)]
    defaulting_type: Option<String>,
}

/// A `v1.TopologySpreadConstraint` as written; enums stay strings so validation can
/// name bad values the way upstream does.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConstraint {
    #[serde(default)]
    max_skew: i32,
    #[serde(default)]
    topology_key: String,
    #[serde(default)]
    when_unsatisfiable: String,
    // Only its presence matters: default constraints must not have one.
    #[serde(default)]
    label_selector: Option<Value>,
    #[serde(default)]
    min_domains: Option<i32>,
    #[serde(default)]
    node_affinity_policy: Option<String>,
    #[serde(default)]
    node_taints_policy: Option<String>,
    #[serde(default)]
    match_label_keys: Option<Vec<String>>,
}

fn policy(field: &str, value: Option<&str>, errs: &mut Vec<String>) -> Option<NodeInclusionPolicy> {
    match value? {
        "Honor" => Some(NodeInclusionPolicy::Honor),
        "Ignore" => Some(NodeInclusionPolicy::Ignore),
        other => {
            errs.push(unsupported(field, other, &["Honor", "Ignore"]));
            None
        }
    }
}

impl SpreadArgs {
    /// Parses, defaults and validates the args (`Null` means none). Errors name the
    /// offending field, as upstream's validation does.
    pub fn from_json(args: Value) -> Result<SpreadArgs, String> {
        let raw: RawArgs = berth_sdk::args::parse(args)?;
        berth_sdk::args::check_kind(raw.kind.as_deref(), "PodTopologySpreadArgs")?;

        let raw_constraints = raw.default_constraints.unwrap_or_default();
        let mut errs = Vec::new();

        // v1 defaulting: an empty type means System.
        let type_name = raw.defaulting_type.unwrap_or_default();
        let type_name = if type_name.is_empty() {
            DefaultingType::System.as_str().to_owned()
        } else {
            type_name
        };
        let defaulting_type = DefaultingType::ALL
            .into_iter()
            .find(|t| t.as_str() == type_name);
        match defaulting_type {
            None => errs.push(unsupported(
                "defaultingType",
                &type_name,
                &[
                    DefaultingType::System.as_str(),
                    DefaultingType::List.as_str(),
                ],
            )),
            Some(DefaultingType::System) if !raw_constraints.is_empty() => errs.push(invalid(
                "defaultingType",
                &type_name,
                "when .defaultConstraints are not empty",
            )),
            Some(_) => {}
        }

        let mut constraints = Vec::with_capacity(raw_constraints.len());
        for (i, c) in raw_constraints.iter().enumerate() {
            let p = format!("defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                errs.push(invalid(
                    &format!("{p}.maxSkew"),
                    c.max_skew,
                    "not in valid range (0, inf)",
                ));
            }
            let key_field = format!("{p}.topologyKey");
            if c.topology_key.is_empty() {
                errs.push(format!("{key_field}: Required value: can not be empty"));
            } else {
                for msg in qualified_name_errors(&c.topology_key) {
                    errs.push(invalid(&key_field, &c.topology_key, &msg));
                }
            }
            let when_field = format!("{p}.whenUnsatisfiable");
            let when = match c.when_unsatisfiable.as_str() {
                "DoNotSchedule" => Some(WhenUnsatisfiable::DoNotSchedule),
                "ScheduleAnyway" => Some(WhenUnsatisfiable::ScheduleAnyway),
                "" => {
                    errs.push(format!("{when_field}: Required value: can not be empty"));
                    None
                }
                other => {
                    errs.push(unsupported(
                        &when_field,
                        other,
                        &["DoNotSchedule", "ScheduleAnyway"],
                    ));
                    None
                }
            };
            if c.label_selector.is_some() {
                errs.push(format!(
                    "{p}.labelSelector: Forbidden: constraint must not define a selector, \
                     as they deduced for each pod"
                ));
            }
            let earlier = &raw_constraints[..i];
            if earlier.iter().any(|o| {
                o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable
            }) {
                errs.push(format!(
                    "defaultConstraints[{i}]: Duplicate value: \"{{{}, {}}}\"",
                    c.topology_key, c.when_unsatisfiable
                ));
            }
            // Upstream does not validate these; Berth refuses values it cannot act on.
            let node_affinity_policy = policy(
                &format!("{p}.nodeAffinityPolicy"),
                c.node_affinity_policy.as_deref(),
                &mut errs,
            );
            let node_taints_policy = policy(
                &format!("{p}.nodeTaintsPolicy"),
                c.node_taints_policy.as_deref(),
                &mut errs,
            );
            if let Some(when) = when {
                constraints.push(TopologySpreadConstraint {
                    max_skew: c.max_skew,
                    topology_key: c.topology_key.clone(),
                    when_unsatisfiable: when,
                    label_selector: None,
                    min_domains: c.min_domains,
                    node_affinity_policy,
                    node_taints_policy,
                    match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
                });
            }
        }

        match (aggregate(errs), defaulting_type) {
            (None, Some(defaulting_type)) => Ok(SpreadArgs {
                defaulting_type,
                default_constraints: constraints,
            }),
            // An unknown defaulting type is always among the errors.
            (err, _) => Err(err.unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::serde_json::json;

    fn constraint(key: &str, max_skew: i32, when: WhenUnsatisfiable) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: when,
            label_selector: None,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
        }
    }

    #[test]
    fn no_args_is_system_defaulting() {
        let args = SpreadArgs::from_json(Value::Null).unwrap();
        assert_eq!(args, SpreadArgs::default());
        assert_eq!(args.defaulting_type, DefaultingType::System);
        assert_eq!(SpreadArgs::from_json(json!({})).unwrap(), args);
        assert_eq!(
            SpreadArgs::from_json(json!({"defaultingType": ""})).unwrap(),
            args
        );
        assert_eq!(
            args.effective_default_constraints(),
            [
                constraint(LABEL_HOSTNAME, 3, WhenUnsatisfiable::ScheduleAnyway),
                constraint(LABEL_TOPOLOGY_ZONE, 5, WhenUnsatisfiable::ScheduleAnyway),
            ]
        );
    }

    #[test]
    fn list_defaulting_uses_the_listed_constraints() {
        let args = SpreadArgs::from_json(json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "PodTopologySpreadArgs",
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway",
                 "nodeTaintsPolicy": "Honor", "minDomains": 2},
            ],
        }))
        .unwrap();
        assert_eq!(args.defaulting_type, DefaultingType::List);
        let mut rack = constraint("rack", 2, WhenUnsatisfiable::ScheduleAnyway);
        rack.node_taints_policy = Some(NodeInclusionPolicy::Honor);
        rack.min_domains = Some(2);
        assert_eq!(
            args.effective_default_constraints(),
            [
                constraint("node", 1, WhenUnsatisfiable::DoNotSchedule),
                rack
            ]
        );
        // List with no constraints: nothing is defaulted.
        let args = SpreadArgs::from_json(json!({"defaultingType": "List"})).unwrap();
        assert!(args.effective_default_constraints().is_empty());
    }

    // The cases of upstream's TestValidatePodTopologySpreadArgs.
    #[test]
    fn max_skew_must_be_positive() {
        let err = SpreadArgs::from_json(json!({
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": -1, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
            ],
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "defaultConstraints[0].maxSkew: Invalid value: -1: not in valid range (0, inf)"
        );
    }

    #[test]
    fn topology_key_is_required_and_qualified() {
        let err = SpreadArgs::from_json(json!({
            "defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}],
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "defaultConstraints[0].topologyKey: Required value: can not be empty"
        );
        let err = SpreadArgs::from_json(json!({
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "-bad", "whenUnsatisfiable": "ScheduleAnyway"},
            ],
        }))
        .unwrap_err();
        assert!(
            err.starts_with(
                "defaultConstraints[0].topologyKey: Invalid value: \"-bad\": name part must"
            ),
            "{err}"
        );
    }

    #[test]
    fn when_unsatisfiable_is_required_and_known() {
        let args = |when: &str| {
            SpreadArgs::from_json(json!({
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": when},
                ],
            }))
        };
        assert_eq!(
            args("").unwrap_err(),
            "defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty"
        );
        assert_eq!(
            args("Bogus").unwrap_err(),
            "defaultConstraints[0].whenUnsatisfiable: Unsupported value: \"Bogus\": \
             supported values: \"DoNotSchedule\", \"ScheduleAnyway\""
        );
    }

    #[test]
    fn repeated_constraints_are_refused() {
        let err = SpreadArgs::from_json(json!({
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
                {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
            ],
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "defaultConstraints[1]: Duplicate value: \"{node, ScheduleAnyway}\""
        );
        // The same key with another action is fine.
        assert!(
            SpreadArgs::from_json(json!({
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
                    {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
                ],
            }))
            .is_ok()
        );
    }

    #[test]
    fn label_selector_is_forbidden() {
        let err = SpreadArgs::from_json(json!({
            "defaultingType": "List",
            "defaultConstraints": [{
                "maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {},
            }],
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a \
             selector, as they deduced for each pod"
        );
    }

    #[test]
    fn system_defaulting_refuses_listed_constraints() {
        let constraints = json!([
            {"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
        ]);
        let expected = "defaultingType: Invalid value: \"System\": \
                        when .defaultConstraints are not empty";
        let err = SpreadArgs::from_json(json!({
            "defaultingType": "System", "defaultConstraints": constraints.clone(),
        }))
        .unwrap_err();
        assert_eq!(err, expected);
        // v1 defaults a missing type to System, so the same holds without it.
        let err = SpreadArgs::from_json(json!({"defaultConstraints": constraints})).unwrap_err();
        assert_eq!(err, expected);
    }

    #[test]
    fn defaulting_type_must_be_known() {
        let err = SpreadArgs::from_json(json!({"defaultingType": "Other"})).unwrap_err();
        assert_eq!(
            err,
            "defaultingType: Unsupported value: \"Other\": supported values: \"System\", \"List\""
        );
    }

    #[test]
    fn several_errors_are_aggregated() {
        let err = SpreadArgs::from_json(json!({
            "defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 0, "topologyKey": "node"}],
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "[defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf), \
             defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty]"
        );
    }

    #[test]
    fn inclusion_policies_must_be_known() {
        let err = SpreadArgs::from_json(json!({
            "defaultingType": "List",
            "defaultConstraints": [{
                "maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway",
                "nodeAffinityPolicy": "Sometimes",
            }],
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "defaultConstraints[0].nodeAffinityPolicy: Unsupported value: \"Sometimes\": \
             supported values: \"Honor\", \"Ignore\""
        );
    }

    #[test]
    fn malformed_args_name_the_field() {
        let err = SpreadArgs::from_json(json!({
            "defaultConstraints": [{"maxSkew": "big"}],
        }))
        .unwrap_err();
        assert!(
            err.starts_with("defaultConstraints[0].maxSkew: invalid type"),
            "{err}"
        );
        let err = SpreadArgs::from_json(json!({"defaultConstraint": []})).unwrap_err();
        assert!(err.contains("unknown field `defaultConstraint`"), "{err}");
        let err = SpreadArgs::from_json(json!({"kind": "NodeAffinityArgs"})).unwrap_err();
        assert!(err.starts_with("kind: Invalid value"), "{err}");
        assert!(SpreadArgs::from_json(json!([1])).is_err());
    }
}
