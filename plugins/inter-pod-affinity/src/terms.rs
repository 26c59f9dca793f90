//! Pod (anti-)affinity terms made ready for matching, as upstream's
//! `framework.AffinityTerm`, and the label selector checks upstream applies when it
//! parses them.

use std::collections::HashMap;

use berth_sdk::validation::{aggregate, go_string_slice};
use berth_sdk::{
    Labels, Pod,
    types::{LabelSelector, LabelSelectorOperator, PodAffinityTerm, WeightedPodAffinityTerm},
};

/// What is wrong with a label value, in the words of apimachinery's
/// `IsValidLabelValue`; empty when valid.
pub use berth_sdk::validation::label_value_errors;
/// What is wrong with a label key (`[prefix/]name`), in the words of apimachinery's
/// `IsQualifiedName`; empty when valid.
pub use berth_sdk::validation::qualified_name_errors;

/// No labels: what upstream matches a namespace selector against when the incoming
/// pod's namespace is unknown.
pub static NO_LABELS: Labels = Labels::new();

/// Which namespaces a term looks in, besides its namespace selector.
#[derive(Clone, Copy, Debug)]
enum Namespaces<'a> {
    /// Neither namespaces nor a selector: the owner's own namespace.
    Own(&'a str),
    /// The namespaces the term lists (possibly none, with a selector).
    Listed(&'a [String]),
}

/// A term of some pod (its owner), ready to be matched against other pods.
#[derive(Clone, Debug)]
pub struct Term<'a> {
    /// `None` selects no pod.
    selector: Option<&'a LabelSelector>,
    /// matchLabelKeys resolved against the owner's labels: the target must have each
    /// of these labels (the API server merges them into the selector as `In`).
    match_owner: Vec<(&'a str, &'a str)>,
    /// mismatchLabelKeys resolved likewise: the target must not have these (`NotIn`).
    mismatch_owner: Vec<(&'a str, &'a str)>,
    namespaces: Namespaces<'a>,
    /// `None` selects no namespace; an empty selector selects all of them.
    namespace_selector: Option<&'a LabelSelector>,
    /// The node label that defines the topology domain.
    pub topology_key: &'a str,
    /// The weight of a preferred term; 0 for a required one.
    pub weight: i64,
}

/// Where a term finds the labels of a namespace its selector must match.
pub trait NamespaceLabels {
    /// The labels of `namespace`; `None` when it does not exist.
    fn labels(&mut self, namespace: &str) -> Option<&Labels>;
}

/// Namespace labels asked of the host once per namespace and kept for the cycle.
#[derive(Debug, Default)]
pub struct NamespaceCache(HashMap<String, Option<Labels>>);

impl NamespaceLabels for NamespaceCache {
    fn labels(&mut self, namespace: &str) -> Option<&Labels> {
        if !self.0.contains_key(namespace) {
            let labels = berth_sdk::namespace_labels(namespace);
            self.0.insert(namespace.to_owned(), labels);
        }
        self.0.get(namespace).and_then(Option::as_ref)
    }
}

/// The labels of the one namespace every target lives in (the incoming pod's), as
/// upstream's namespace labels snapshot: an unknown namespace has no labels. Asked of
/// the host on first use.
#[derive(Debug)]
pub struct IncomingNamespace<'a> {
    namespace: &'a str,
    labels: Option<Option<Labels>>,
}

impl<'a> IncomingNamespace<'a> {
    /// The labels of `namespace`, not yet looked up.
    pub fn new(namespace: &'a str) -> Self {
        IncomingNamespace {
            namespace,
            labels: None,
        }
    }

    /// Whether a term asked for the labels.
    pub fn consulted(&self) -> bool {
        self.labels.is_some()
    }
}

impl NamespaceCache {
    /// Whether a term asked for any namespace's labels.
    pub fn consulted(&self) -> bool {
        !self.0.is_empty()
    }
}

/// What the counts of PreFilter and PreScore depend on of the incoming pod, besides
/// the namespaces' labels: the key under which the plugin keeps them across cycles
/// ([`berth_sdk::DomainMemo`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodKey {
    namespace: String,
    labels: Labels,
    affinity: berth_sdk::types::PodAffinity,
    anti_affinity: berth_sdk::types::PodAffinity,
}

impl PodKey {
    /// The key of `pod`.
    pub fn of(pod: &Pod) -> Self {
        PodKey {
            namespace: pod.namespace.clone(),
            labels: pod.labels.clone(),
            affinity: pod.affinity.pod_affinity.clone(),
            anti_affinity: pod.affinity.pod_anti_affinity.clone(),
        }
    }
}

impl NamespaceLabels for IncomingNamespace<'_> {
    fn labels(&mut self, _namespace: &str) -> Option<&Labels> {
        let ns = self.namespace;
        let labels = self
            .labels
            .get_or_insert_with(|| berth_sdk::namespace_labels(ns));
        Some(labels.as_ref().unwrap_or(&NO_LABELS))
    }
}

impl<'a> Term<'a> {
    /// Resolves a term of `owner`: the namespaces it defaults to and the
    /// matchLabelKeys/mismatchLabelKeys values taken from the owner's labels.
    fn new(owner: &'a Pod, term: &'a PodAffinityTerm, weight: i64) -> Self {
        let namespaces = if term.namespaces.is_empty() && term.namespace_selector.is_none() {
            Namespaces::Own(&owner.namespace)
        } else {
            Namespaces::Listed(&term.namespaces)
        };
        // As the API server: keys are merged only into a selector that exists, and a
        // key the owner lacks is left out.
        let resolve = |keys: &'a [String]| -> Vec<(&'a str, &'a str)> {
            if term.label_selector.is_none() {
                return Vec::new();
            }
            keys.iter()
                .filter_map(|k| owner.labels.get_key_value(k))
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect()
        };
        Term {
            selector: term.label_selector.as_ref(),
            match_owner: resolve(&term.match_label_keys),
            mismatch_owner: resolve(&term.mismatch_label_keys),
            namespaces,
            namespace_selector: term.namespace_selector.as_ref(),
            topology_key: &term.topology_key,
            weight,
        }
    }

    /// Whether the target pod's labels satisfy the (merged) label selector.
    fn selects_labels(&self, labels: &Labels) -> bool {
        self.selector.is_some_and(|s| s.matches(labels))
            && self
                .match_owner
                .iter()
                .all(|(k, v)| labels.get(*k).is_some_and(|x| x == v))
            && self
                .mismatch_owner
                .iter()
                .all(|(k, v)| labels.get(*k).is_none_or(|x| x != v))
    }

    /// Whether the namespace selector selects the target's namespace.
    fn selects_namespace(&self, namespace: &str, ns: &mut dyn NamespaceLabels) -> bool {
        match self.namespace_selector {
            None => false,
            // Every namespace, even one the cluster does not know.
            Some(s) if s.is_empty() => true,
            Some(s) => ns.labels(namespace).is_some_and(|l| s.matches(l)),
        }
    }

    /// Whether `target` matches the term, as upstream's `AffinityTerm.Matches`: its
    /// namespace is listed or selected, and its labels are selected. `ns` gives the
    /// labels of the target's namespace.
    pub fn matches(&self, target: &Pod, ns: &mut dyn NamespaceLabels) -> bool {
        // The labels first: they are cheap and usually decide.
        if !self.selects_labels(&target.labels) {
            return false;
        }
        let listed = match self.namespaces {
            Namespaces::Own(own) => own == target.namespace,
            Namespaces::Listed(list) => list.contains(&target.namespace),
        };
        listed || self.selects_namespace(&target.namespace, ns)
    }
}

/// Whether `target` matches every term (and there is at least one), as upstream's
/// `podMatchesAllAffinityTerms`.
pub fn matches_all(terms: &[Term], target: &Pod, ns: &mut dyn NamespaceLabels) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(target, ns))
}

/// The terms of one of a pod's lists, resolved; the first invalid selector fails the
/// whole list, as upstream's `GetAffinityTerms`.
pub fn required<'a>(owner: &'a Pod, terms: &'a [PodAffinityTerm]) -> Result<Vec<Term<'a>>, String> {
    terms
        .iter()
        .map(|t| {
            check_term(t)?;
            Ok(Term::new(owner, t, 0))
        })
        .collect()
}

/// The weighted terms of one of a pod's lists, resolved (see [`required`]).
pub fn preferred<'a>(
    owner: &'a Pod,
    terms: &'a [WeightedPodAffinityTerm],
) -> Result<Vec<Term<'a>>, String> {
    terms
        .iter()
        .map(|w| {
            check_term(&w.term)?;
            Ok(Term::new(owner, &w.term, i64::from(w.weight)))
        })
        .collect()
}

/// The terms of an existing pod's list. Upstream keeps no terms from a list that
/// fails to parse (the API server should have refused it), so neither does this.
pub fn existing_required<'a>(owner: &'a Pod, terms: &'a [PodAffinityTerm]) -> Vec<Term<'a>> {
    required(owner, terms).unwrap_or_default()
}

/// The weighted terms of an existing pod's list (see [`existing_required`]).
pub fn existing_preferred<'a>(
    owner: &'a Pod,
    terms: &'a [WeightedPodAffinityTerm],
) -> Vec<Term<'a>> {
    preferred(owner, terms).unwrap_or_default()
}

/// The terms of an existing pod's required list that match `target`: those of
/// [`existing_required`] that [`Term::matches`]. The list is checked only when one
/// of its terms matches (a list none of whose terms matches adds nothing, valid or
/// not), so a PreFilter over every pod of the cluster does not check every
/// selector of every pod in every cycle.
pub fn existing_required_matching<'a>(
    owner: &'a Pod,
    terms: &'a [PodAffinityTerm],
    target: &Pod,
    ns: &mut dyn NamespaceLabels,
) -> Vec<Term<'a>> {
    existing_matching(owner, terms, |t| (t, 0), target, ns)
}

/// The terms of an existing pod's preferred list that match `target` (see
/// [`existing_required_matching`]).
pub fn existing_preferred_matching<'a>(
    owner: &'a Pod,
    terms: &'a [WeightedPodAffinityTerm],
    target: &Pod,
    ns: &mut dyn NamespaceLabels,
) -> Vec<Term<'a>> {
    existing_matching(owner, terms, |w| (&w.term, i64::from(w.weight)), target, ns)
}

/// [`existing_required_matching`] over a list whose items give a term and its weight.
fn existing_matching<'a, T>(
    owner: &'a Pod,
    list: &'a [T],
    term_of: impl Fn(&'a T) -> (&'a PodAffinityTerm, i64),
    target: &Pod,
    ns: &mut dyn NamespaceLabels,
) -> Vec<Term<'a>> {
    let matching: Vec<Term<'a>> = list
        .iter()
        .map(|item| {
            let (term, weight) = term_of(item);
            Term::new(owner, term, weight)
        })
        .filter(|t| t.matches(target, ns))
        .collect();
    if matching.is_empty() || list.iter().any(|item| check_term(term_of(item).0).is_err()) {
        return Vec::new();
    }
    matching
}

/// The incoming pod's terms, by list.
#[derive(Debug, Default)]
pub struct PodTerms<'a> {
    /// `podAffinity.required...`.
    pub required_affinity: Vec<Term<'a>>,
    /// `podAntiAffinity.required...`.
    pub required_anti_affinity: Vec<Term<'a>>,
    /// `podAffinity.preferred...`.
    pub preferred_affinity: Vec<Term<'a>>,
    /// `podAntiAffinity.preferred...`.
    pub preferred_anti_affinity: Vec<Term<'a>>,
}

impl<'a> PodTerms<'a> {
    /// Resolves every list of the pod, as upstream's `NewPodInfo`: the error names
    /// each list that failed, several in brackets.
    pub fn of(pod: &'a Pod) -> Result<Self, String> {
        let a = &pod.affinity.pod_affinity;
        let anti = &pod.affinity.pod_anti_affinity;
        let mut errs = Vec::new();
        let mut keep = |name: &str, r: Result<Vec<Term<'a>>, String>| {
            r.unwrap_or_else(|e| {
                errs.push(format!("{name}: {e}"));
                Vec::new()
            })
        };
        let terms = PodTerms {
            required_affinity: keep("requiredAffinityTerms", required(pod, &a.required)),
            required_anti_affinity: keep(
                "requiredAntiAffinityTerms",
                required(pod, &anti.required),
            ),
            preferred_affinity: keep("preferredAffinityTerms", preferred(pod, &a.preferred)),
            preferred_anti_affinity: keep(
                "preferredAntiAffinityTerms",
                preferred(pod, &anti.preferred),
            ),
        };
        aggregate(errs).map_or(Ok(terms), Err)
    }
}

/// Checks a term's selectors as upstream's `LabelSelectorAsSelector` parses them:
/// the label selector first, then the namespace selector.
fn check_term(term: &PodAffinityTerm) -> Result<(), String> {
    [&term.label_selector, &term.namespace_selector]
        .into_iter()
        .flatten()
        .try_for_each(check_selector)
}

/// The first requirement of the selector that does not parse, in upstream's words
/// (`matchLabels` first, then `matchExpressions`).
pub fn check_selector(selector: &LabelSelector) -> Result<(), String> {
    for (k, v) in &selector.match_labels {
        requirement_errors(k, None, std::slice::from_ref(v))?;
    }
    for r in &selector.match_expressions {
        requirement_errors(&r.key, Some(r.operator), &r.values)?;
    }
    Ok(())
}

/// Upstream's `labels.NewRequirement` checks; `None` is matchLabels' equality.
fn requirement_errors(
    key: &str,
    op: Option<LabelSelectorOperator>,
    values: &[String],
) -> Result<(), String> {
    use LabelSelectorOperator::*;
    let mut errs = Vec::new();
    let key_errs = qualified_name_errors(key);
    if !key_errs.is_empty() {
        errs.push(format!(
            "key: Invalid value: {key:?}: {}",
            key_errs.join("; ")
        ));
    }
    let values_err = |detail: &str| {
        format!(
            "values: Invalid value: {}: {detail}",
            go_string_slice(values)
        )
    };
    match op {
        Some(In | NotIn) if values.is_empty() => {
            errs.push(values_err(
                "for 'in', 'notin' operators, values set can't be empty",
            ));
        }
        Some(Exists | DoesNotExist) if !values.is_empty() => {
            errs.push(values_err(
                "values set must be empty for exists and does not exist",
            ));
        }
        None if values.len() != 1 => {
            errs.push(values_err(
                "exact-match compatibility requires one single value",
            ));
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let value_errs = label_value_errors(v);
        if !value_errs.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {v:?}: {}",
                value_errs.join("; ")
            ));
        }
    }
    aggregate(errs).map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::types::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn pod(namespace: &str, l: &[(&str, &str)]) -> Pod {
        Pod {
            namespace: namespace.into(),
            labels: labels(l),
            ..Pod::default()
        }
    }

    fn selector(l: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: labels(l),
            match_expressions: vec![],
        }
    }

    fn term(sel: Option<LabelSelector>) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: sel,
            topology_key: "zone".into(),
            ..PodAffinityTerm::default()
        }
    }

    struct Known(Labels);
    impl NamespaceLabels for Known {
        fn labels(&mut self, namespace: &str) -> Option<&Labels> {
            (namespace == "team-a").then_some(&self.0)
        }
    }

    fn known() -> Known {
        Known(labels(&[("team", "a")]))
    }

    #[test]
    fn a_nil_selector_matches_nothing_and_an_empty_one_everything() {
        let owner = pod("ns", &[]);
        let target = pod("ns", &[("app", "x")]);
        let t = term(None);
        assert!(!Term::new(&owner, &t, 0).matches(&target, &mut known()));
        let t = term(Some(LabelSelector::default()));
        assert!(Term::new(&owner, &t, 0).matches(&target, &mut known()));
    }

    #[test]
    fn namespaces_default_to_the_owners() {
        let owner = pod("ns", &[]);
        let t = term(Some(selector(&[("app", "x")])));
        let resolved = Term::new(&owner, &t, 0);
        assert!(resolved.matches(&pod("ns", &[("app", "x")]), &mut known()));
        assert!(!resolved.matches(&pod("other", &[("app", "x")]), &mut known()));
        // Listed namespaces replace the default.
        let t = PodAffinityTerm {
            namespaces: vec!["other".into()],
            ..t
        };
        let resolved = Term::new(&owner, &t, 0);
        assert!(!resolved.matches(&pod("ns", &[("app", "x")]), &mut known()));
        assert!(resolved.matches(&pod("other", &[("app", "x")]), &mut known()));
    }

    #[test]
    fn namespace_selectors() {
        let owner = pod("ns", &[]);
        let with = |ns_sel: LabelSelector| PodAffinityTerm {
            namespace_selector: Some(ns_sel),
            ..term(Some(LabelSelector::default()))
        };
        // A selector alone does not include the owner's namespace.
        let t = with(selector(&[("team", "a")]));
        let resolved = Term::new(&owner, &t, 0);
        assert!(resolved.matches(&pod("team-a", &[]), &mut known()));
        assert!(!resolved.matches(&pod("ns", &[]), &mut known()));
        // An empty selector selects every namespace, known or not.
        let t = with(LabelSelector::default());
        let resolved = Term::new(&owner, &t, 0);
        assert!(resolved.matches(&pod("nowhere", &[]), &mut known()));
        // An unknown namespace has no labels to select.
        let t = with(LabelSelector {
            match_labels: Labels::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: "team".into(),
                operator: LabelSelectorOperator::NotIn,
                values: vec!["b".into()],
            }],
        });
        let resolved = Term::new(&owner, &t, 0);
        assert!(!resolved.matches(&pod("nowhere", &[]), &mut known()));
        // ... but the incoming pod's snapshot of an unknown namespace is empty.
        let mut unknown = IncomingNamespace {
            namespace: "nowhere",
            labels: Some(None),
        };
        assert!(resolved.matches(&pod("nowhere", &[]), &mut unknown));
    }

    #[test]
    fn match_label_keys_take_the_owners_values() {
        let owner = pod("ns", &[("app", "web"), ("rev", "1")]);
        let t = PodAffinityTerm {
            match_label_keys: vec!["rev".into(), "absent".into()],
            mismatch_label_keys: vec!["app".into()],
            ..term(Some(LabelSelector::default()))
        };
        let resolved = Term::new(&owner, &t, 0);
        assert!(resolved.matches(&pod("ns", &[("rev", "1"), ("app", "db")]), &mut known()));
        assert!(resolved.matches(&pod("ns", &[("rev", "1")]), &mut known()));
        assert!(!resolved.matches(&pod("ns", &[("rev", "2")]), &mut known()));
        assert!(!resolved.matches(&pod("ns", &[("rev", "1"), ("app", "web")]), &mut known()));
        // Not merged into a nil selector, which keeps matching nothing.
        let t = PodAffinityTerm {
            label_selector: None,
            ..t
        };
        assert!(!Term::new(&owner, &t, 0).matches(&pod("ns", &[("rev", "1")]), &mut known()));
    }

    #[test]
    fn invalid_selectors_are_reported_as_upstream() {
        let bad = PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Labels::new(),
                match_expressions: vec![LabelSelectorRequirement {
                    key: "service".into(),
                    operator: LabelSelectorOperator::In,
                    values: vec!["{{.bad-value.}}".into()],
                }],
            }),
            ..PodAffinityTerm::default()
        };
        let mut p = pod("ns", &[]);
        p.affinity.pod_affinity.required = vec![term(Some(selector(&[("a", "b")]))), bad];
        assert_eq!(
            PodTerms::of(&p).unwrap_err(),
            "requiredAffinityTerms: values[0][service]: Invalid value: \"{{.bad-value.}}\": \
             a valid label must be an empty string or consist of alphanumeric characters, \
             '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
             'MyValue',  or 'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        // An existing pod's invalid list is dropped, not an error.
        assert!(existing_required(&p, &p.affinity.pod_affinity.required).is_empty());

        let expr = |key: &str, operator, values: &[&str]| LabelSelector {
            match_labels: Labels::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: key.into(),
                operator,
                values: values.iter().map(|v| (*v).into()).collect(),
            }],
        };
        use LabelSelectorOperator::*;
        assert_eq!(
            check_selector(&expr("k", In, &[])),
            Err(
                "values: Invalid value: []string{}: for 'in', 'notin' operators, values \
                 set can't be empty"
                    .into()
            )
        );
        assert_eq!(
            check_selector(&expr("k", Exists, &["v"])),
            Err(
                "values: Invalid value: []string{\"v\"}: values set must be empty for \
                 exists and does not exist"
                    .into()
            )
        );
        let err = check_selector(&expr("-k", Exists, &[])).unwrap_err();
        assert!(
            err.starts_with("key: Invalid value: \"-k\": name part must"),
            "{err}"
        );
        assert!(check_selector(&expr("example.com/k", NotIn, &["", "v.1"])).is_ok());
        assert!(check_selector(&selector(&[("k", &"v".repeat(64))])).is_err());
    }
}
