//! Node selector terms as kube-scheduler parses and matches them (component-helpers'
//! `nodeaffinity` package): a requirement upstream cannot parse (a bad label key or
//! value, a `Gt` bound that is not an integer, a field requirement with other than
//! one value, ...) makes its whole term match nothing, and the error is reported
//! where upstream reports it (args validation, PreScore), not at each node.

use berth_sdk::affinity::{
    NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm,
};
use berth_sdk::types::Labels;
use berth_sdk::validation::{go_string_slice as go_strings, unsupported};

/// Upstream's aggregate of errors: one message alone, several in brackets.
pub use berth_sdk::validation::aggregate;
/// What is wrong with a label value, in the words of apimachinery's
/// `IsValidLabelValue`.
pub use berth_sdk::validation::label_value_errors;
/// What is wrong with a label key (`[prefix/]name`), in the wording this plugin has
/// always reported.
pub use berth_sdk::validation::qualified_name_errors_short as qualified_name_errors;

/// The only node field a selector can name.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// The operators of `matchExpressions`, as the API spells them.
pub const LABEL_OPERATORS: [&str; 6] = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
/// The operators of `matchFields`.
pub const FIELD_OPERATORS: [&str; 2] = ["In", "NotIn"];

/// The API spelling of an operator.
pub fn operator_str(op: NodeSelectorOperator) -> &'static str {
    match op {
        NodeSelectorOperator::In => "In",
        NodeSelectorOperator::NotIn => "NotIn",
        NodeSelectorOperator::Exists => "Exists",
        NodeSelectorOperator::DoesNotExist => "DoesNotExist",
        NodeSelectorOperator::Gt => "Gt",
        NodeSelectorOperator::Lt => "Lt",
    }
}

/// The operator an API spelling names, if any.
pub fn parse_operator(op: &str) -> Option<NodeSelectorOperator> {
    Some(match op {
        "In" => NodeSelectorOperator::In,
        "NotIn" => NodeSelectorOperator::NotIn,
        "Exists" => NodeSelectorOperator::Exists,
        "DoesNotExist" => NodeSelectorOperator::DoesNotExist,
        "Gt" => NodeSelectorOperator::Gt,
        "Lt" => NodeSelectorOperator::Lt,
        _ => return None,
    })
}

/// A field path: `parent.child`, or `child` at the root.
pub fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}.{name}")
    }
}

/// Whether an empty term: it selects nothing and upstream does not parse it.
pub fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.is_empty() && term.match_fields.is_empty()
}

/// What is wrong with one `matchExpressions` requirement, as labels'
/// `NewRequirement` reports it; `path` is the requirement's field path. `operator`
/// is the API spelling (args may name an operator the SDK has no variant for).
pub fn label_requirement_errors(
    key: &str,
    operator: &str,
    values: &[String],
    path: &str,
) -> Vec<String> {
    let mut errs = Vec::new();
    let Some(op) = parse_operator(operator) else {
        errs.push(unsupported(
            &child(path, "operator"),
            operator,
            &LABEL_OPERATORS,
        ));
        return errs;
    };
    let key_errs = qualified_name_errors(key);
    if !key_errs.is_empty() {
        errs.push(format!(
            "{}: Invalid value: {key:?}: {}",
            child(path, "key"),
            key_errs.join("; ")
        ));
    }
    let values_path = child(path, "values");
    use NodeSelectorOperator::*;
    match op {
        In | NotIn if values.is_empty() => errs.push(format!(
            "{values_path}: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
            go_strings(values)
        )),
        Exists | DoesNotExist if !values.is_empty() => errs.push(format!(
            "{values_path}: Invalid value: {}: values set must be empty for exists and does not exist",
            go_strings(values)
        )),
        Gt | Lt => {
            if values.len() != 1 {
                errs.push(format!(
                    "{values_path}: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required",
                    go_strings(values)
                ));
            }
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "{values_path}[{i}]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                    ));
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let value_errs = label_value_errors(v);
        if !value_errs.is_empty() {
            errs.push(format!(
                "{values_path}[{i}]: Invalid value: {v:?}: {}",
                value_errs.join("; ")
            ));
        }
    }
    errs
}

/// What is wrong with one `matchFields` requirement: upstream accepts only `In` and
/// `NotIn` with exactly one value.
pub fn field_requirement_errors(operator: &str, values: &[String], path: &str) -> Vec<String> {
    if FIELD_OPERATORS.contains(&operator) {
        if values.len() == 1 {
            return Vec::new();
        }
        return vec![format!(
            "{}: Invalid value: {}: must have one element",
            child(path, "values"),
            go_strings(values)
        )];
    }
    vec![unsupported(
        &child(path, "operator"),
        operator,
        &FIELD_OPERATORS,
    )]
}

/// Every parse error of a term, with field paths under `path`; none for an empty
/// term, which upstream skips.
pub fn term_errors(term: &NodeSelectorTerm, path: &str) -> Vec<String> {
    let mut errs = Vec::new();
    for (i, r) in term.match_expressions.iter().enumerate() {
        errs.extend(label_requirement_errors(
            &r.key,
            operator_str(r.operator),
            &r.values,
            &format!("{}[{i}]", child(path, "matchExpressions")),
        ));
    }
    for (i, r) in term.match_fields.iter().enumerate() {
        errs.extend(field_requirement_errors(
            operator_str(r.operator),
            &r.values,
            &format!("{}[{i}]", child(path, "matchFields")),
        ));
    }
    errs
}

/// Whether upstream would parse the term without error (the paths of errors are not
/// built, so this is cheap enough to run at every node).
pub fn term_is_valid(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.iter().all(|r| {
        let values_ok = match r.operator {
            NodeSelectorOperator::In | NodeSelectorOperator::NotIn => !r.values.is_empty(),
            NodeSelectorOperator::Exists | NodeSelectorOperator::DoesNotExist => {
                r.values.is_empty()
            }
            NodeSelectorOperator::Gt | NodeSelectorOperator::Lt => {
                r.values.len() == 1 && r.values[0].parse::<i64>().is_ok()
            }
        };
        values_ok
            && qualified_name_errors(&r.key).is_empty()
            && r.values.iter().all(|v| label_value_errors(v).is_empty())
    }) && term.match_fields.iter().all(|r| {
        matches!(
            r.operator,
            NodeSelectorOperator::In | NodeSelectorOperator::NotIn
        ) && r.values.len() == 1
    })
}

/// Whether a field requirement holds for a node: the only field is the node's name;
/// any other key reads as empty, as upstream's field sets do.
fn field_matches(r: &NodeSelectorRequirement, node_name: &str) -> bool {
    let value = if r.key == NODE_NAME_FIELD {
        node_name
    } else {
        ""
    };
    match (r.operator, r.values.as_slice()) {
        (NodeSelectorOperator::In, [v]) => v == value,
        (NodeSelectorOperator::NotIn, [v]) => v != value,
        _ => false,
    }
}

/// Whether a node satisfies a term: it must be non-empty and parse, and every
/// requirement must hold.
pub fn term_matches(term: &NodeSelectorTerm, labels: &Labels, node_name: &str) -> bool {
    !is_empty_term(term)
        && term_is_valid(term)
        && term
            .match_expressions
            .iter()
            .all(|r| r.matches_value(labels.get(&r.key).map(String::as_str)))
        && term
            .match_fields
            .iter()
            .all(|r| field_matches(r, node_name))
}

/// Whether a node satisfies a required node selector: any of its terms (ORed); no
/// terms match nothing.
pub fn selector_matches(terms: &[NodeSelectorTerm], labels: &Labels, node_name: &str) -> bool {
    terms.iter().any(|t| term_matches(t, labels, node_name))
}

/// Preferred terms as upstream keeps them: those with a weight and a requirement;
/// `Err` with every parse error (paths under `path`) when any kept term is bad.
pub fn usable_preferred_terms<'a>(
    terms: &'a [PreferredSchedulingTerm],
    path: &str,
) -> Result<Vec<&'a PreferredSchedulingTerm>, String> {
    let mut errs = Vec::new();
    let mut kept = Vec::new();
    for (i, t) in terms.iter().enumerate() {
        // Upstream skips these before parsing them.
        if t.weight == 0 || is_empty_term(&t.preference) {
            continue;
        }
        let term_errs = term_errors(&t.preference, &format!("{path}[{i}]"));
        if term_errs.is_empty() {
            kept.push(t);
        } else {
            errs.extend(term_errs);
        }
    }
    match aggregate(errs) {
        None => Ok(kept),
        Some(err) => Err(err),
    }
}

/// The sum of the weights of the (usable) preferred terms the node satisfies.
pub fn preferred_score(
    terms: &[&PreferredSchedulingTerm],
    labels: &Labels,
    node_name: &str,
) -> i64 {
    terms
        .iter()
        .filter(|t| term_matches(&t.preference, labels, node_name))
        .map(|t| i64::from(t.weight))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: NodeSelectorOperator, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op,
            values: values.iter().map(|v| (*v).into()).collect(),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn exprs(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: reqs,
            match_fields: vec![],
        }
    }

    fn fields(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: reqs,
        }
    }

    use NodeSelectorOperator::*;

    #[test]
    fn label_requirements_match_as_upstream() {
        let l = labels(&[("zone", "a"), ("cores", "08")]);
        assert!(term_matches(
            &exprs(vec![req("zone", In, &["a", "b"])]),
            &l,
            "n"
        ));
        assert!(term_matches(
            &exprs(vec![req("zone", NotIn, &["b"])]),
            &l,
            "n"
        ));
        assert!(term_matches(
            &exprs(vec![req("gpu", NotIn, &["b"])]),
            &l,
            "n"
        ));
        assert!(term_matches(
            &exprs(vec![req("zone", Exists, &[])]),
            &l,
            "n"
        ));
        assert!(term_matches(
            &exprs(vec![req("gpu", DoesNotExist, &[])]),
            &l,
            "n"
        ));
        assert!(term_matches(
            &exprs(vec![req("cores", Gt, &["7"])]),
            &l,
            "n"
        ));
        assert!(term_matches(
            &exprs(vec![req("cores", Lt, &["9"])]),
            &l,
            "n"
        ));
        // A sign is not allowed in a label value, so upstream cannot parse "+9".
        assert!(!term_matches(
            &exprs(vec![req("cores", Lt, &["+9"])]),
            &l,
            "n"
        ));
        assert!(!term_matches(
            &exprs(vec![req("cores", Gt, &["8"])]),
            &l,
            "n"
        ));
        // A label that is not an integer never satisfies Gt or Lt.
        assert!(!term_matches(
            &exprs(vec![req("zone", Lt, &["9"])]),
            &l,
            "n"
        ));
        assert!(!term_matches(&exprs(vec![req("gpu", Lt, &["9"])]), &l, "n"));
        assert!(!term_matches(&NodeSelectorTerm::default(), &l, "n"));
    }

    #[test]
    fn unparsable_requirements_make_the_term_match_nothing() {
        let l = labels(&[("foo", "bar"), ("n", "5")]);
        // NotIn would hold, but the value is not a valid label value.
        let bad_value = exprs(vec![req("foo", NotIn, &["invalid value: ___@#$%^"])]);
        assert!(!term_matches(&bad_value, &l, "n"));
        assert!(!term_matches(&exprs(vec![req("n", Gt, &["x"])]), &l, "n"));
        assert!(!term_matches(
            &exprs(vec![req("n", Gt, &["1", "2"])]),
            &l,
            "n"
        ));
        assert!(!term_matches(
            &exprs(vec![req("foo", Exists, &["bar"])]),
            &l,
            "n"
        ));
        assert!(!term_matches(&exprs(vec![req("foo", In, &[])]), &l, "n"));
        assert!(!term_matches(
            &exprs(vec![req("-foo", DoesNotExist, &[])]),
            &l,
            "n"
        ));
        assert!(!term_matches(
            &fields(vec![req(NODE_NAME_FIELD, In, &["n", "m"])]),
            &l,
            "n"
        ));
        assert!(!term_matches(
            &fields(vec![req(NODE_NAME_FIELD, Exists, &[])]),
            &l,
            "n"
        ));
    }

    #[test]
    fn fields_select_by_node_name() {
        let l = Labels::new();
        let by_name = fields(vec![req(NODE_NAME_FIELD, In, &["n1"])]);
        assert!(term_matches(&by_name, &l, "n1"));
        assert!(!term_matches(&by_name, &l, "n2"));
        let not_name = fields(vec![req(NODE_NAME_FIELD, NotIn, &["n1"])]);
        assert!(!term_matches(&not_name, &l, "n1"));
        assert!(term_matches(&not_name, &l, "n2"));
        // Another field reads as empty.
        assert!(term_matches(
            &fields(vec![req("spec.x", In, &[""])]),
            &l,
            "n1"
        ));
        assert!(!term_matches(
            &fields(vec![req("spec.x", In, &["y"])]),
            &l,
            "n1"
        ));
    }

    #[test]
    fn errors_name_the_field() {
        let term = NodeSelectorTerm {
            match_expressions: vec![req("foo", Gt, &["x"]), req("a/b/c", Exists, &[])],
            match_fields: vec![req(NODE_NAME_FIELD, Exists, &[])],
        };
        let errs = term_errors(&term, "nodeSelectorTerms[0]");
        assert_eq!(
            errs[0],
            "nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: \"x\": \
             for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert!(
            errs[1].starts_with(
                "nodeSelectorTerms[0].matchExpressions[1].key: Invalid value: \"a/b/c\": \
                 a qualified name"
            ),
            "{}",
            errs[1]
        );
        assert_eq!(
            errs[2],
            "nodeSelectorTerms[0].matchFields[0].operator: Unsupported value: \"Exists\": \
             supported values: \"In\", \"NotIn\""
        );
        assert_eq!(errs.len(), 3);
        assert_eq!(
            label_requirement_errors("k", "In", &[], "[0].matchExpressions[0]"),
            [
                "[0].matchExpressions[0].values: Invalid value: []string{}: \
              for 'in', 'notin' operators, values set can't be empty"
            ]
        );
        assert!(term_errors(&NodeSelectorTerm::default(), "").is_empty());
    }

    #[test]
    fn valid_terms_have_no_errors() {
        let term = NodeSelectorTerm {
            match_expressions: vec![
                req("example.com/zone", In, &["a", ""]),
                req("cores", Lt, &["3"]),
                req("gpu", DoesNotExist, &[]),
            ],
            match_fields: vec![req(NODE_NAME_FIELD, NotIn, &["n1"])],
        };
        assert!(term_errors(&term, "").is_empty());
        assert!(term_is_valid(&term));
    }

    #[test]
    fn preferred_terms_skip_zero_weights_and_empty_terms() {
        let good = PreferredSchedulingTerm {
            weight: 3,
            preference: exprs(vec![req("zone", In, &["a"])]),
        };
        let zero = PreferredSchedulingTerm {
            weight: 0,
            preference: exprs(vec![req("zone", Gt, &["bad"])]),
        };
        let empty = PreferredSchedulingTerm {
            weight: 5,
            preference: NodeSelectorTerm::default(),
        };
        let terms = [good.clone(), zero, empty];
        let kept = usable_preferred_terms(&terms, "").unwrap();
        assert_eq!(kept, [&good]);
        let l = labels(&[("zone", "a")]);
        assert_eq!(preferred_score(&kept, &l, "n"), 3);

        let bad = [PreferredSchedulingTerm {
            weight: 1,
            preference: exprs(vec![req("zone", Gt, &["bad"])]),
        }];
        let err = usable_preferred_terms(&bad, "").unwrap_err();
        assert!(
            err.starts_with("[0].matchExpressions[0].values[0]: Invalid value"),
            "{err}"
        );
    }
}
