//! The plugin's args, in the shape of kube-scheduler's `NodeAffinityArgs`: an
//! `addedAffinity` (a `v1.NodeAffinity` in its JSON shape) applied to every pod, with
//! upstream's validation (`ValidateNodeAffinityArgs`).

use berth_sdk::affinity::{NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm};
use berth_sdk::serde_json::Value;
use serde::{Deserialize, Deserializer};

use crate::selector::{
    aggregate, child, field_requirement_errors, is_empty_term, label_requirement_errors,
    parse_operator,
};

/// The validated args.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeAffinityArgs {
    /// `addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`:
    /// every node must match one of them; `None` when not set. `Some(vec![])` (the
    /// selector is set without terms) matches no node, as upstream.
    pub added_required: Option<Vec<NodeSelectorTerm>>,
    /// `addedAffinity.preferredDuringSchedulingIgnoredDuringExecution`, without the
    /// terms upstream drops (weight 0 or no requirement); `None` when none were given.
    pub added_preferred: Option<Vec<PreferredSchedulingTerm>>,
}

/// `null` reads as the default, as Go decodes a null list.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    #[allow(dead_code)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    added_affinity: Option<RawNodeAffinity>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNodeAffinity {
    #[serde(default, rename = "requiredDuringSchedulingIgnoredDuringExecution")]
    required: Option<RawNodeSelector>,
    #[serde(
        default,
        deserialize_with = "nullable",
        rename = "preferredDuringSchedulingIgnoredDuringExecution"
    )]
    preferred: Vec<RawPreferred>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawNodeSelector {
    #[serde(default, deserialize_with = "nullable")]
    node_selector_terms: Vec<RawTerm>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawTerm {
    #[serde(default, deserialize_with = "nullable")]
    match_expressions: Vec<RawRequirement>,
    #[serde(default, deserialize_with = "nullable")]
    match_fields: Vec<RawRequirement>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequirement {
    #[serde(default)]
    key: String,
    #[serde(default)]
    operator: String,
    #[serde(default, deserialize_with = "nullable")]
    values: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPreferred {
    #[serde(default)]
    weight: i32,
    #[serde(default)]
    preference: RawTerm,
}

impl RawTerm {
    fn is_empty(&self) -> bool {
        self.match_expressions.is_empty() && self.match_fields.is_empty()
    }

    /// Upstream's parse errors of the term, under `path`.
    fn errors(&self, path: &str) -> Vec<String> {
        let mut errs = Vec::new();
        for (i, r) in self.match_expressions.iter().enumerate() {
            let p = format!("{}[{i}]", child(path, "matchExpressions"));
            errs.extend(label_requirement_errors(&r.key, &r.operator, &r.values, &p));
        }
        for (i, r) in self.match_fields.iter().enumerate() {
            let p = format!("{}[{i}]", child(path, "matchFields"));
            errs.extend(field_requirement_errors(&r.operator, &r.values, &p));
        }
        errs
    }

    /// The SDK's term; call only once the term has no errors.
    fn to_term(&self) -> NodeSelectorTerm {
        let reqs = |list: &[RawRequirement]| {
            list.iter()
                .filter_map(|r| {
                    Some(NodeSelectorRequirement {
                        key: r.key.clone(),
                        operator: parse_operator(&r.operator)?,
                        values: r.values.clone(),
                    })
                })
                .collect()
        };
        NodeSelectorTerm {
            match_expressions: reqs(&self.match_expressions),
            match_fields: reqs(&self.match_fields),
        }
    }
}

impl NodeAffinityArgs {
    /// Parses and validates the args (`Null` means none). Errors name the offending
    /// field, as upstream's validation does.
    pub fn from_json(args: Value) -> Result<NodeAffinityArgs, String> {
        let raw: RawArgs = berth_sdk::args::parse(args)?;
        berth_sdk::args::check_kind(raw.kind.as_deref(), "NodeAffinityArgs")?;
        let Some(added) = raw.added_affinity else {
            return Ok(NodeAffinityArgs::default());
        };

        let mut errs = Vec::new();
        let added_required = added.required.map(|selector| {
            let path =
                "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
            selector
                .node_selector_terms
                .iter()
                .enumerate()
                // An empty term selects nothing; upstream drops it unparsed.
                .filter(|(_, t)| !t.is_empty())
                .map(|(i, t)| {
                    errs.extend(t.errors(&format!("{path}[{i}]")));
                    t.to_term()
                })
                .collect::<Vec<_>>()
        });
        let added_preferred = (!added.preferred.is_empty()).then(|| {
            let path = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution";
            added
                .preferred
                .iter()
                .enumerate()
                .filter(|(_, t)| t.weight != 0 && !t.preference.is_empty())
                .map(|(i, t)| {
                    errs.extend(t.preference.errors(&format!("{path}[{i}]")));
                    PreferredSchedulingTerm {
                        weight: t.weight,
                        preference: t.preference.to_term(),
                    }
                })
                .collect::<Vec<_>>()
        });
        if let Some(err) = aggregate(errs) {
            return Err(err);
        }
        debug_assert!(
            added_required
                .iter()
                .flatten()
                .chain(added_preferred.iter().flatten().map(|t| &t.preference))
                .all(|t| !is_empty_term(t))
        );
        Ok(NodeAffinityArgs {
            added_required,
            added_preferred,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::affinity::NodeSelectorOperator;
    use berth_sdk::serde_json::json;

    #[test]
    fn no_args_add_nothing() {
        assert_eq!(
            NodeAffinityArgs::from_json(Value::Null).unwrap(),
            NodeAffinityArgs::default()
        );
        assert_eq!(
            NodeAffinityArgs::from_json(json!({"addedAffinity": {}})).unwrap(),
            NodeAffinityArgs::default()
        );
    }

    #[test]
    fn added_affinity_in_the_kubernetes_shape() {
        let args = NodeAffinityArgs::from_json(json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "NodeAffinityArgs",
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                        {"matchExpressions": []},
                        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
                    ],
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 3, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}},
                    {"weight": 0, "preference": {"matchExpressions": [{"key": "hdd", "operator": "Exists"}]}},
                ],
            },
        }))
        .unwrap();
        let required = args.added_required.unwrap();
        // The empty term is dropped.
        assert_eq!(required.len(), 2);
        assert_eq!(
            required[0].match_expressions[0].operator,
            NodeSelectorOperator::In
        );
        assert_eq!(required[1].match_fields[0].values, ["n1"]);
        let preferred = args.added_preferred.unwrap();
        assert_eq!(preferred.len(), 1);
        assert_eq!(preferred[0].weight, 3);
        assert_eq!(preferred[0].preference.match_expressions[0].key, "ssd");
    }

    #[test]
    fn a_required_selector_without_terms_is_kept() {
        let args = NodeAffinityArgs::from_json(json!({
            "addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": null}},
        }))
        .unwrap();
        assert_eq!(args.added_required, Some(vec![]));
        assert_eq!(args.added_preferred, None);
    }

    // The cases of upstream's TestValidateNodeAffinityArgs.
    #[test]
    fn invalid_added_affinity_is_refused_with_every_error() {
        let err = NodeAffinityArgs::from_json(json!({
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "foo", "operator": "Exists", "values": ["bar"]}]},
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node1", "node2"]}]},
                    ],
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "foo", "operator": "Bar"}]}},
                ],
            },
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "[addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]\
             .matchExpressions[0].values: Invalid value: []string{\"bar\"}: values set must be \
             empty for exists and does not exist, \
             addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]\
             .matchFields[0].values: Invalid value: []string{\"node1\", \"node2\"}: must have one \
             element, \
             addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchExpressions[0]\
             .operator: Unsupported value: \"Bar\": supported values: \"In\", \"NotIn\", \
             \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"]"
        );
    }

    #[test]
    fn one_error_is_reported_alone() {
        let err = NodeAffinityArgs::from_json(json!({
            "addedAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 2, "preference": {"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["x"]}]}},
                ],
            },
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchExpressions[0]\
             .values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an \
             integer"
        );
    }

    #[test]
    fn malformed_args_name_the_field() {
        let err = NodeAffinityArgs::from_json(json!({
            "addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": "heavy"}]},
        }))
        .unwrap_err();
        assert!(
            err.starts_with(
                "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: invalid type"
            ),
            "{err}"
        );
        let err = NodeAffinityArgs::from_json(json!({"addedAfinity": {}})).unwrap_err();
        assert!(err.contains("unknown field `addedAfinity`"), "{err}");
        let err = NodeAffinityArgs::from_json(json!({"kind": "NodePortsArgs"})).unwrap_err();
        assert!(err.starts_with("kind: Invalid value"), "{err}");
    }
}
