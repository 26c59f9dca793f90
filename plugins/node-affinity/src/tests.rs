//! The cases of upstream's `node_affinity_test.go`, and a few of Berth's own.

use super::*;
use berth_sdk::affinity::{NodeAffinity as PodNodeAffinity, NodeSelectorRequirement};
use berth_sdk::serde_json::{Value, json};
use berth_sdk::{Code, MemoryState, Node, types::Labels};

use NodeSelectorOperator::{DoesNotExist, Exists, Gt, In, NotIn};

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

fn req(key: &str, op: NodeSelectorOperator, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op,
        values: values.iter().map(|v| (*v).into()).collect(),
    }
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

fn name_in(name: &str) -> NodeSelectorRequirement {
    req(NODE_NAME_FIELD, In, &[name])
}

fn node(name: &str, l: &[(&str, &str)]) -> NodeInfo {
    NodeInfo::new(Node {
        name: name.into(),
        labels: labels(l),
        ..Node::default()
    })
}

fn with_selector(l: &[(&str, &str)]) -> Pod {
    Pod {
        name: "pod".into(),
        node_selector: labels(l),
        ..Pod::default()
    }
}

fn with_required(terms: Vec<NodeSelectorTerm>) -> Pod {
    let mut p = Pod {
        name: "pod".into(),
        ..Pod::default()
    };
    p.affinity.node_affinity = Some(PodNodeAffinity {
        required: Some(terms),
        preferred: vec![],
    });
    p
}

fn with_preferred(terms: Vec<PreferredSchedulingTerm>) -> Pod {
    let mut p = Pod {
        name: "pod".into(),
        ..Pod::default()
    };
    p.affinity.node_affinity = Some(PodNodeAffinity {
        required: None,
        preferred: terms,
    });
    p
}

fn plugin(args: Value) -> NodeAffinity {
    NodeAffinity::new(args).unwrap()
}

fn default_plugin() -> NodeAffinity {
    plugin(Value::Null)
}

/// PreFilter, then (unless it skipped) Filter on the node, as upstream's
/// TestNodeAffinity with `runPreFilter`.
fn run(pl: &NodeAffinity, pod: &Pod, node: &NodeInfo) -> (PreFilterResult, Status) {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let pre = pl.pre_filter(&state, pod, &[node]);
    let status = pl.filter(&state, pod, node);
    (pre, status)
}

fn pod_reason() -> Status {
    Status::unresolvable(ERR_REASON_POD)
}

fn filter(pod: &Pod, node: &NodeInfo) -> Status {
    let (pre, status) = run(&default_plugin(), pod, node);
    assert!(
        matches!(pre.status.code, Code::Success | Code::Skip),
        "{pre:?}"
    );
    status
}

// TestNodeAffinity.
#[test]
fn missing_labels() {
    let (pre, status) = run(
        &default_plugin(),
        &with_selector(&[("foo", "bar")]),
        &node("n", &[]),
    );
    assert_eq!(pre, Status::success().into());
    assert_eq!(status, pod_reason());
}

#[test]
fn same_labels() {
    let p = with_selector(&[("foo", "bar")]);
    assert_eq!(filter(&p, &node("n", &[("foo", "bar")])), Status::success());
}

#[test]
fn node_labels_are_superset() {
    let p = with_selector(&[("foo", "bar")]);
    let n = node("n", &[("foo", "bar"), ("baz", "blah")]);
    assert_eq!(filter(&p, &n), Status::success());
}

#[test]
fn node_labels_are_subset() {
    let p = with_selector(&[("foo", "bar"), ("baz", "blah")]);
    assert_eq!(filter(&p, &node("n", &[("foo", "bar")])), pod_reason());
}

#[test]
fn match_expressions_in_matches() {
    let p = with_required(vec![exprs(vec![req("foo", In, &["bar", "value2"])])]);
    assert_eq!(filter(&p, &node("n", &[("foo", "bar")])), Status::success());
}

#[test]
fn match_expressions_gt_matches() {
    let p = with_required(vec![exprs(vec![req("kernel-version", Gt, &["0204"])])]);
    let n = node("n", &[("kernel-version", "0206")]);
    assert_eq!(filter(&p, &n), Status::success());
}

#[test]
fn match_expressions_not_in_matches() {
    let p = with_required(vec![exprs(vec![req("mem-type", NotIn, &["DDR", "DDR2"])])]);
    assert_eq!(
        filter(&p, &node("n", &[("mem-type", "DDR3")])),
        Status::success()
    );
}

#[test]
fn match_expressions_exists_matches() {
    let p = with_required(vec![exprs(vec![req("GPU", Exists, &[])])]);
    let n = node("n", &[("GPU", "NVIDIA-GRID-K1")]);
    assert_eq!(filter(&p, &n), Status::success());
}

#[test]
fn affinity_that_does_not_match_the_labels() {
    let p = with_required(vec![exprs(vec![req("foo", In, &["value1", "value2"])])]);
    assert_eq!(filter(&p, &node("n", &[("foo", "bar")])), pod_reason());
}

#[test]
fn empty_match_expressions_match_nothing() {
    let p = with_required(vec![exprs(vec![])]);
    let (pre, status) = run(&default_plugin(), &p, &node("n", &[("foo", "bar")]));
    assert_eq!(pre, Status::success().into());
    assert_eq!(status, pod_reason());
}

#[test]
fn no_affinity_skips() {
    let (pre, status) = run(
        &default_plugin(),
        &Pod::default(),
        &node("n", &[("foo", "bar")]),
    );
    assert_eq!(pre.status.code, Code::Skip);
    assert_eq!(status, Status::success());
}

#[test]
fn affinity_without_required_terms_skips() {
    let mut p = Pod::default();
    p.affinity.node_affinity = Some(PodNodeAffinity::default());
    let (pre, status) = run(&default_plugin(), &p, &node("n", &[("foo", "bar")]));
    assert_eq!(pre.status.code, Code::Skip);
    assert_eq!(status, Status::success());
}

#[test]
fn match_expressions_are_anded() {
    let both = |op, values: &[&str]| {
        with_required(vec![exprs(vec![
            req("GPU", Exists, &[]),
            req("GPU", op, values),
        ])])
    };
    let n = node("n", &[("GPU", "NVIDIA-GRID-K1")]);
    assert_eq!(
        filter(&both(NotIn, &["AMD", "INTER"]), &n),
        Status::success()
    );
    assert_eq!(filter(&both(In, &["AMD", "INTER"]), &n), pod_reason());
}

#[test]
fn node_selector_terms_are_ored() {
    let p = with_required(vec![
        exprs(vec![req("foo", In, &["bar", "value2"])]),
        exprs(vec![req("diffkey", In, &["wrong", "value2"])]),
    ]);
    assert_eq!(filter(&p, &node("n", &[("foo", "bar")])), Status::success());
}

#[test]
fn node_selector_and_affinity_must_both_hold() {
    let mut p = with_required(vec![exprs(vec![req("foo", Exists, &[])])]);
    p.node_selector = labels(&[("foo", "bar")]);
    assert_eq!(filter(&p, &node("n", &[("foo", "bar")])), Status::success());
    assert_eq!(filter(&p, &node("n", &[("foo", "barrrrrr")])), pod_reason());
}

#[test]
fn an_invalid_value_makes_the_term_match_nothing() {
    let p = with_required(vec![exprs(vec![req(
        "foo",
        NotIn,
        &["invalid value: ___@#$%^"],
    )])]);
    assert_eq!(filter(&p, &node("n", &[("foo", "bar")])), pod_reason());
}

#[test]
fn match_fields_in_narrows_the_nodes() {
    let p = with_required(vec![fields(vec![name_in("node1")])]);
    let (pre, status) = run(&default_plugin(), &p, &node("node1", &[]));
    assert_eq!(pre.node_names, Some(vec!["node1".to_owned()]));
    assert_eq!(pre.status, Status::success());
    assert_eq!(status, Status::success());
    let (pre, status) = run(&default_plugin(), &p, &node("node2", &[]));
    assert_eq!(pre.node_names, Some(vec!["node1".to_owned()]));
    assert_eq!(status, pod_reason());
}

#[test]
fn a_term_without_match_fields_keeps_every_node() {
    let p = with_required(vec![
        fields(vec![name_in("node1"), name_in("node2")]),
        exprs(vec![req("foo", In, &["bar"])]),
    ]);
    let (pre, status) = run(&default_plugin(), &p, &node("node2", &[("foo", "bar")]));
    assert_eq!(pre, Status::success().into());
    assert_eq!(status, Status::success());
}

#[test]
fn match_fields_and_expressions_in_one_term() {
    let p = with_required(vec![NodeSelectorTerm {
        match_expressions: vec![req("foo", In, &["bar"])],
        match_fields: vec![name_in("node1")],
    }]);
    let (pre, status) = run(&default_plugin(), &p, &node("node2", &[("foo", "bar")]));
    assert_eq!(pre.node_names, Some(vec!["node1".to_owned()]));
    assert_eq!(status, pod_reason());
    let (pre, status) = run(&default_plugin(), &p, &node("node1", &[("foo", "bar")]));
    assert_eq!(pre.node_names, Some(vec!["node1".to_owned()]));
    assert_eq!(status, Status::success());
}

#[test]
fn two_terms_neither_matching() {
    let p = with_required(vec![
        fields(vec![name_in("node1")]),
        exprs(vec![req("foo", In, &["not-match-to-bar"])]),
    ]);
    let (pre, status) = run(&default_plugin(), &p, &node("node2", &[("foo", "bar")]));
    assert_eq!(pre, Status::success().into());
    assert_eq!(status, pod_reason());
}

#[test]
fn two_terms_of_node_name_affinity_union() {
    let p = with_required(vec![
        fields(vec![name_in("node1")]),
        fields(vec![name_in("node2")]),
    ]);
    let (pre, status) = run(&default_plugin(), &p, &node("node2", &[]));
    assert_eq!(
        pre.node_names,
        Some(vec!["node1".to_owned(), "node2".to_owned()])
    );
    assert_eq!(status, Status::success());
}

#[test]
fn conflicting_match_fields_are_unresolvable() {
    let p = with_required(vec![fields(vec![name_in("node1"), name_in("node2")])]);
    let (pre, status) = run(&default_plugin(), &p, &node("node2", &[("foo", "bar")]));
    assert_eq!(pre, Status::unresolvable(ERR_REASON_CONFLICT).into());
    assert_eq!(status, pod_reason());
}

fn added_required(terms: Value) -> Value {
    json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
}

#[test]
fn matches_added_affinity_and_pod_affinity() {
    let pl = plugin(added_required(json!([
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node2"]}]}
    ])));
    let p = with_required(vec![exprs(vec![req("zone", In, &["foo"])])]);
    let (_, status) = run(&pl, &p, &node("node2", &[("zone", "foo")]));
    assert_eq!(status, Status::success());
    let p = with_required(vec![exprs(vec![req("zone", In, &["bar"])])]);
    let (_, status) = run(&pl, &p, &node("node2", &[("zone", "foo")]));
    assert_eq!(status, pod_reason());
}

#[test]
fn does_not_match_added_affinity() {
    let pl = plugin(added_required(json!([
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["bar"]}]}
    ])));
    let (pre, status) = run(&pl, &Pod::default(), &node("node2", &[("zone", "foo")]));
    // The added selector alone is enough for Filter to run.
    assert_eq!(pre, Status::success().into());
    assert_eq!(status, Status::unresolvable(ERR_REASON_ENFORCED));
}

#[test]
fn filter_without_pre_filter_matches_the_same() {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let p = with_selector(&[("foo", "bar")]);
    let n = node("n", &[("foo", "bar"), ("baz", "blah")]);
    assert_eq!(default_plugin().filter(&state, &p, &n), Status::success());
    let p = with_required(vec![exprs(vec![
        req("GPU", Exists, &[]),
        req("GPU", NotIn, &["AMD", "INTER"]),
    ])]);
    let n = node("n", &[("GPU", "NVIDIA-GRID-K1")]);
    assert_eq!(default_plugin().filter(&state, &p, &n), Status::success());
}

// Berth's own.
#[test]
fn does_not_exist_and_lt() {
    let p = with_required(vec![exprs(vec![
        req("spot", DoesNotExist, &[]),
        req("cores", NodeSelectorOperator::Lt, &["16"]),
    ])]);
    assert_eq!(filter(&p, &node("n", &[("cores", "8")])), Status::success());
    assert_eq!(filter(&p, &node("n", &[("cores", "32")])), pod_reason());
    assert_eq!(
        filter(&p, &node("n", &[("cores", "8"), ("spot", "")])),
        pod_reason()
    );
    assert_eq!(filter(&p, &node("n", &[])), pod_reason());
}

#[test]
fn an_empty_list_of_required_terms_matches_no_node() {
    let p = with_required(vec![]);
    let (pre, status) = run(&default_plugin(), &p, &node("n", &[]));
    assert_eq!(pre, Status::success().into());
    assert_eq!(status, pod_reason());
}

#[test]
fn added_required_selector_without_terms_matches_no_node() {
    let pl = plugin(added_required(json!([])));
    let (_, status) = run(&pl, &Pod::default(), &node("n", &[]));
    assert_eq!(status, Status::unresolvable(ERR_REASON_ENFORCED));
}

#[test]
fn added_preferred_terms_alone_do_not_make_filter_run() {
    let pl = plugin(
        json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
        ]}}),
    );
    let (pre, _) = run(&pl, &Pod::default(), &node("n", &[]));
    assert_eq!(pre.status.code, Code::Skip);
}

#[test]
fn node_names_of_terms() {
    let names = |terms: Vec<NodeSelectorTerm>| node_names_from_terms(&terms);
    let set = |v: &[&str]| Some(v.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>());
    // NotIn on the name does not narrow.
    assert_eq!(
        names(vec![fields(vec![req(NODE_NAME_FIELD, NotIn, &["a"])])]),
        None
    );
    assert_eq!(
        names(vec![fields(vec![
            req(NODE_NAME_FIELD, In, &["a", "b"]),
            name_in("b")
        ])]),
        set(&["b"])
    );
    assert_eq!(names(vec![fields(vec![name_in("a")]), exprs(vec![])]), None);
}

// TestNodeAffinityPriority.
fn pref(weight: i32, reqs: Vec<NodeSelectorRequirement>) -> PreferredSchedulingTerm {
    PreferredSchedulingTerm {
        weight,
        preference: exprs(reqs),
    }
}

fn affinity1() -> Vec<PreferredSchedulingTerm> {
    vec![pref(2, vec![req("foo", In, &["bar"])])]
}

fn affinity2() -> Vec<PreferredSchedulingTerm> {
    vec![
        pref(2, vec![req("foo", In, &["bar"])]),
        pref(4, vec![req("key", In, &["value"])]),
        pref(
            5,
            vec![
                req("foo", In, &["bar"]),
                req("key", In, &["value"]),
                req("az", In, &["az1"]),
            ],
        ),
    ]
}

const LABEL1: &[(&str, &str)] = &[("foo", "bar")];
const LABEL2: &[(&str, &str)] = &[("key", "value")];
const LABEL3: &[(&str, &str)] = &[("az", "az1")];
const LABEL4: &[(&str, &str)] = &[("abc", "az11"), ("def", "az22")];
const LABEL5: &[(&str, &str)] = &[("foo", "bar"), ("key", "value"), ("az", "az1")];

/// PreScore, Score on each node, NormalizeScore; `None` when PreScore skips.
fn scores(
    pl: &NodeAffinity,
    pod: &Pod,
    nodes: &[NodeInfo],
    run_pre_score: bool,
) -> Option<Vec<i64>> {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    if run_pre_score {
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let status = pl.pre_score(&state, pod, &refs, &refs);
        if status.code == Code::Skip {
            return None;
        }
        assert!(status.is_success(), "{status:?}");
    }
    let mut scores: Vec<i64> = nodes
        .iter()
        .map(|n| pl.score(&state, pod, n).unwrap())
        .collect();
    assert!(pl.normalize_score(&state, pod, &mut scores).is_success());
    Some(scores)
}

#[test]
fn no_node_affinity_skips_scoring() {
    let nodes = [
        node("node1", LABEL1),
        node("node2", LABEL2),
        node("node3", LABEL3),
    ];
    assert_eq!(
        scores(&default_plugin(), &Pod::default(), &nodes, true),
        None
    );
    // Score alone gives every node 0.
    assert_eq!(
        scores(&default_plugin(), &Pod::default(), &nodes, false),
        Some(vec![0, 0, 0])
    );
}

#[test]
fn no_node_matches_the_preferred_terms() {
    let nodes = [
        node("node1", LABEL4),
        node("node2", LABEL2),
        node("node3", LABEL3),
    ];
    let got = scores(
        &default_plugin(),
        &with_preferred(affinity1()),
        &nodes,
        true,
    );
    assert_eq!(got, Some(vec![0, 0, 0]));
}

#[test]
fn only_node1_matches_the_preferred_terms() {
    let nodes = [
        node("node1", LABEL1),
        node("node2", LABEL2),
        node("node3", LABEL3),
    ];
    let got = scores(
        &default_plugin(),
        &with_preferred(affinity1()),
        &nodes,
        true,
    );
    assert_eq!(got, Some(vec![100, 0, 0]));
}

#[test]
fn all_nodes_match_with_different_weights() {
    let nodes = [
        node("node1", LABEL1),
        node("node5", LABEL5),
        node("node2", LABEL2),
    ];
    let got = scores(
        &default_plugin(),
        &with_preferred(affinity2()),
        &nodes,
        true,
    );
    assert_eq!(got, Some(vec![18, 100, 36]));
}

#[test]
fn added_affinity_scores_pods_without_affinity() {
    let pl = plugin(
        json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 2, "preference": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}}
        ]}}),
    );
    let nodes = [node("node1", LABEL1), node("node2", LABEL2)];
    assert_eq!(
        scores(&pl, &Pod::default(), &nodes, true),
        Some(vec![100, 0])
    );
}

#[test]
fn added_affinity_adds_to_the_pods_terms() {
    let pl = plugin(
        json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 3, "preference": {"matchExpressions": [{"key": "key", "operator": "In", "values": ["value"]}]}}
        ]}}),
    );
    let nodes = [
        node("node1", LABEL1),
        node("node2", LABEL2),
        node("node3", LABEL5),
    ];
    let got = scores(&pl, &with_preferred(affinity1()), &nodes, true);
    assert_eq!(got, Some(vec![40, 60, 100]));
}

#[test]
fn scores_without_pre_score() {
    let nodes = [
        node("node1", LABEL1),
        node("node5", LABEL5),
        node("node2", LABEL2),
    ];
    let got = scores(
        &default_plugin(),
        &with_preferred(affinity2()),
        &nodes,
        false,
    );
    assert_eq!(got, Some(vec![18, 100, 36]));
}

// Berth's own.
#[test]
fn unparsable_preferred_terms_are_an_error() {
    let p = with_preferred(vec![pref(1, vec![req("n", Gt, &["ten"])])]);
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let status = default_plugin().pre_score(&state, &p, &[], &[]);
    assert_eq!(status.code, Code::Error);
    assert_eq!(
        status.reasons,
        [
            "[0].matchExpressions[0].values[0]: Invalid value: \"ten\": \
          for 'Gt', 'Lt' operators, the value must be an integer"
        ]
    );
    assert_eq!(
        default_plugin()
            .score(&state, &p, &node("n", &[]))
            .unwrap_err()
            .code,
        Code::Error
    );
}

#[test]
fn zero_weight_and_empty_preferred_terms_are_ignored() {
    let p = with_preferred(vec![
        pref(0, vec![req("foo", In, &["bar"])]),
        pref(7, vec![]),
        pref(1, vec![req("key", Exists, &[])]),
    ]);
    let nodes = [node("node1", LABEL1), node("node2", LABEL2)];
    assert_eq!(
        scores(&default_plugin(), &p, &nodes, true),
        Some(vec![0, 100])
    );
}

#[test]
fn preferred_match_fields_score_by_node_name() {
    let p = with_preferred(vec![
        PreferredSchedulingTerm {
            weight: 10,
            preference: fields(vec![name_in("node2")]),
        },
        pref(30, vec![req("foo", Exists, &[])]),
    ]);
    let nodes = [
        node("node1", LABEL1),
        node("node2", LABEL2),
        node("node3", LABEL1),
    ];
    assert_eq!(
        scores(&default_plugin(), &p, &nodes, true),
        Some(vec![100, 33, 100])
    );
}

#[test]
fn signs_the_node_selector_and_node_affinity() {
    let pl = default_plugin();
    let sign = |p: &Pod| pl.sign_pod(p).unwrap();
    let zone_a = with_selector(&[("zone", "a")]);
    assert_ne!(sign(&zone_a), sign(&with_selector(&[("zone", "b")])));
    assert_ne!(sign(&zone_a), sign(&with_selector(&[])));
    let required = |v: &str| with_required(vec![exprs(vec![req("zone", In, &[v])])]);
    assert_ne!(sign(&required("a")), sign(&required("b")));
    let preferred = |weight: i32| {
        with_preferred(vec![PreferredSchedulingTerm {
            weight,
            preference: exprs(vec![req("ssd", Exists, &[])]),
        }])
    };
    assert_ne!(sign(&preferred(1)), sign(&preferred(2)));
    assert_ne!(sign(&preferred(1)), sign(&with_selector(&[])));
    // What the plugin does not read does not count.
    let elsewhere = Pod {
        name: "other".into(),
        namespace: "ns".into(),
        labels: labels(&[("app", "x")]),
        ..zone_a.clone()
    };
    assert_eq!(sign(&zone_a), sign(&elsewhere));
}
