//! PreFilter and Filter: upstream's TestRequiredAffinitySingleNode,
//! TestRequiredAffinityMultipleNodes, TestGetTPMapMatchingIncomingAffinityAntiAffinity
//! and TestPreFilterDisabled, then Berth's own cases.

use super::*;

struct Case {
    name: &'static str,
    pod: Pod,
    pods: Vec<Pod>,
    nodes: Vec<Node>,
    /// The PreFilter code (Success unless said).
    pre_filter: Code,
    /// Filter per node (after a Skip, every node passes).
    want: Vec<Status>,
}

fn check(cases: Vec<Case>) {
    for c in cases {
        let (pre, got) = run_filter(&plugin(), &c.pod, &c.nodes, &c.pods);
        assert_eq!(pre.code, c.pre_filter, "{}: PreFilter {pre:?}", c.name);
        assert_eq!(got, c.want, "{}", c.name);
    }
}

const SERVICE: (&str, &str) = ("service", "securityscan");
const SECURITY: (&str, &str) = ("security", "S1");

fn node1() -> Vec<Node> {
    vec![node("node1", &[("region", "r1"), ("zone", "z11")])]
}

fn existing() -> Pod {
    pod().labels(&[SERVICE]).node("node1").obj()
}

fn single(name: &'static str, incoming: Pod, pods: Vec<Pod>, want: Status) -> Case {
    Case {
        name,
        pod: incoming,
        pods,
        nodes: node1(),
        pre_filter: Code::Success,
        want: vec![want],
    }
}

fn team1_selector() -> Option<LabelSelector> {
    Some(selector(vec![expr("team", In, &["team1"])]))
}

fn in_namespace(ns: &str) -> Pod {
    pod().namespace(ns).labels(&[SERVICE]).node("node1").obj()
}

#[test]
fn required_affinity_single_node() {
    let service_in = |topology: &str| {
        term(
            vec![expr("service", In, &["securityscan", "value2"])],
            topology,
        )
    };
    let with_ns_selector = |topology: &str| PodAffinityTerm {
        namespace_selector: team1_selector(),
        ..service_in(topology)
    };
    check(vec![
        Case {
            name: "no required rules and no existing pods",
            pod: Pod::default(),
            pods: vec![],
            nodes: node1(),
            pre_filter: Code::Skip,
            want: vec![ok()],
        },
        single(
            "affinity In matches the existing pod",
            pod()
                .labels(&[SECURITY])
                .affinity_in("service", "region", &["securityscan", "value2"])
                .obj(),
            vec![existing()],
            ok(),
        ),
        single(
            "affinity NotIn matches the existing pod",
            pod()
                .labels(&[SECURITY])
                .affinity_not_in("service", "region", &["securityscan3", "value3"])
                .obj(),
            vec![existing()],
            ok(),
        ),
        single(
            "affinity does not match a pod of another namespace",
            pod()
                .labels(&[SECURITY])
                .affinity(PodAffinityTerm {
                    namespaces: vec!["DiffNameSpace".into()],
                    ..service_in("")
                })
                .obj(),
            vec![pod().namespace("ns").labels(&[SERVICE]).node("node1").obj()],
            affinity_fails(),
        ),
        single(
            "affinity selector does not match the existing pod",
            pod()
                .labels(&[SERVICE])
                .affinity_in("service", "", &["antivirusscan", "value2"])
                .obj(),
            vec![existing()],
            affinity_fails(),
        ),
        single(
            "several affinity terms with different operators all match",
            pod()
                .labels(&[SECURITY])
                .affinity(term(
                    vec![
                        expr("service", Exists, &[]),
                        expr("wrongkey", DoesNotExist, &[]),
                    ],
                    "region",
                ))
                .affinity(term(
                    vec![
                        expr("service", In, &["securityscan"]),
                        expr("service", NotIn, &["WrongValue"]),
                    ],
                    "region",
                ))
                .obj(),
            vec![existing()],
            ok(),
        ),
        single(
            "requirements are ANDed and one does not match",
            pod()
                .labels(&[SECURITY])
                .affinity(term(
                    vec![
                        expr("service", Exists, &[]),
                        expr("wrongkey", DoesNotExist, &[]),
                    ],
                    "region",
                ))
                .affinity(term(
                    vec![
                        expr("service", In, &["securityscan2"]),
                        expr("service", NotIn, &["WrongValue"]),
                    ],
                    "region",
                ))
                .obj(),
            vec![existing()],
            affinity_fails(),
        ),
        single(
            "affinity and anti-affinity both satisfied",
            pod()
                .labels(&[SECURITY])
                .affinity_in("service", "region", &["securityscan", "value2"])
                .anti_in("service", "node", &["antivirusscan", "value2"])
                .obj(),
            vec![existing()],
            ok(),
        ),
        single(
            "affinity, anti-affinity and the existing pod's anti-affinity satisfied",
            pod()
                .labels(&[SECURITY])
                .affinity_in("service", "region", &["securityscan", "value2"])
                .anti_in("service", "node", &["antivirusscan", "value2"])
                .obj(),
            vec![
                pod()
                    .labels(&[SERVICE])
                    .node("node1")
                    .anti_in("service", "node", &["antivirusscan", "value2"])
                    .obj(),
            ],
            ok(),
        ),
        single(
            "affinity satisfied but anti-affinity not",
            pod()
                .labels(&[SECURITY])
                .affinity_in("service", "region", &["securityscan", "value2"])
                .anti_in("service", "zone", &["securityscan", "value2"])
                .obj(),
            vec![existing()],
            anti_fails(),
        ),
        single(
            "the existing pod's anti-affinity is not satisfied",
            pod()
                .labels(&[SERVICE])
                .affinity_in("service", "region", &["securityscan", "value2"])
                .anti_in("service", "node", &["antivirusscan", "value2"])
                .obj(),
            vec![
                pod()
                    .labels(&[SERVICE])
                    .node("node1")
                    .anti_in("service", "zone", &["securityscan", "value2"])
                    .obj(),
            ],
            existing_fails(),
        ),
        single(
            "a pod not matching its own NotIn term finds no pod on the snapshot's nodes",
            pod()
                .labels(&[SERVICE])
                .affinity_not_in("service", "region", &["securityscan", "value2"])
                .obj(),
            vec![pod().labels(&[SERVICE]).node("node2").obj()],
            affinity_fails(),
        ),
        single(
            "an existing pod's anti-affinity holds for a pod without any",
            pod().labels(&[SERVICE]).obj(),
            vec![
                pod()
                    .labels(&[SERVICE])
                    .node("node1")
                    .anti_in("service", "zone", &["securityscan", "value2"])
                    .obj(),
            ],
            existing_fails(),
        ),
        Case {
            name: "an existing pod's anti-affinity that does not match means Skip",
            pod: pod().labels(&[SERVICE]).obj(),
            pods: vec![
                pod()
                    .labels(&[SERVICE])
                    .node("node1")
                    .anti_not_in("service", "zone", &["securityscan", "value2"])
                    .obj(),
            ],
            nodes: node1(),
            pre_filter: Code::Skip,
            want: vec![ok()],
        },
        single(
            "anti-affinity matches the existing pod, which also repels it",
            pod()
                .labels(&[SERVICE])
                .anti_exists("service", "region")
                .anti_exists("security", "region")
                .obj(),
            vec![
                pod()
                    .labels(&[SECURITY])
                    .node("node1")
                    .anti_exists("security", "zone")
                    .obj(),
            ],
            anti_fails(),
        ),
        single(
            "symmetry a1: partial matches, the incoming pod's check comes first",
            pod()
                .labels(&[SERVICE])
                .anti_exists("service", "zone")
                .anti_exists("security", "zone")
                .obj(),
            vec![
                pod()
                    .labels(&[SECURITY])
                    .node("node1")
                    .anti_exists("security", "zone")
                    .obj(),
            ],
            anti_fails(),
        ),
        single(
            "symmetry a2: only the existing pod's term matches",
            pod()
                .labels(&[SECURITY])
                .anti_exists("security", "zone")
                .obj(),
            vec![
                pod()
                    .labels(&[SERVICE])
                    .node("node1")
                    .anti_exists("service", "zone")
                    .anti_exists("security", "zone")
                    .obj(),
            ],
            existing_fails(),
        ),
        single(
            "symmetry b1",
            pod()
                .labels(&[("abc", ""), ("xyz", "")])
                .anti_exists("abc", "zone")
                .anti_exists("def", "zone")
                .obj(),
            vec![
                pod()
                    .labels(&[("def", ""), ("xyz", "")])
                    .node("node1")
                    .anti_exists("abc", "zone")
                    .anti_exists("def", "zone")
                    .obj(),
            ],
            anti_fails(),
        ),
        single(
            "symmetry b2",
            pod()
                .labels(&[("def", ""), ("xyz", "")])
                .anti_exists("abc", "zone")
                .anti_exists("def", "zone")
                .obj(),
            vec![
                pod()
                    .labels(&[("abc", ""), ("xyz", "")])
                    .node("node1")
                    .anti_exists("abc", "zone")
                    .anti_exists("def", "zone")
                    .obj(),
            ],
            anti_fails(),
        ),
        single(
            "affinity with a matching namespace selector",
            pod()
                .labels(&[SECURITY])
                .affinity(with_ns_selector("region"))
                .obj(),
            vec![in_namespace("subteam1.team1")],
            ok(),
        ),
        single(
            "affinity with a namespace selector that does not match",
            pod()
                .labels(&[SECURITY])
                .affinity(with_ns_selector("region"))
                .obj(),
            vec![in_namespace("subteam1.team2")],
            affinity_fails(),
        ),
        single(
            "anti-affinity with a matching namespace selector",
            pod()
                .namespace("subteam1.team1")
                .labels(&[SECURITY])
                .anti(with_ns_selector("zone"))
                .obj(),
            vec![in_namespace("subteam2.team1")],
            anti_fails(),
        ),
        single(
            "anti-affinity with an empty namespace selector matches every namespace",
            pod()
                .namespace("subteam1.team1")
                .labels(&[SECURITY])
                .anti(PodAffinityTerm {
                    namespace_selector: Some(LabelSelector::default()),
                    ..service_in("zone")
                })
                .obj(),
            vec![in_namespace("subteam2.team1")],
            anti_fails(),
        ),
        single(
            "anti-affinity with a namespace selector that does not match",
            pod()
                .namespace("subteam1.team1")
                .labels(&[SECURITY])
                .anti(with_ns_selector("zone"))
                .obj(),
            vec![in_namespace("subteam1.team2")],
            ok(),
        ),
    ]);
}

#[test]
fn invalid_label_syntax_fails_pre_filter() {
    let msg = "parsing pod: requiredAffinityTerms: values[0][service]: Invalid value: \
               \"{{.bad-value.}}\": a valid label must be an empty string or consist of \
               alphanumeric characters, '-', '_' or '.', and must start and end with an \
               alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex \
               used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    for incoming in [
        pod()
            .labels(&[SERVICE])
            .affinity_in("service", "region", &["{{.bad-value.}}"])
            .affinity_in("service", "node", &["antivirusscan", "value2"])
            .obj(),
        pod()
            .labels(&[SERVICE])
            .affinity_in("service", "region", &["foo"])
            .affinity_in("service", "node", &["{{.bad-value.}}"])
            .obj(),
    ] {
        let (status, _) = run_filter(&plugin(), &incoming, &node1(), &[]);
        assert_eq!(
            status,
            Status::new(Code::UnschedulableAndUnresolvable, vec![msg.into()])
        );
    }
    // Preferred terms are parsed too, and every failing list is named.
    let incoming = pod()
        .affinity_in("service", "region", &["-bad"])
        .preferred_anti(1, term(vec![expr("a", In, &[])], "zone"))
        .obj();
    let (status, _) = run_filter(&plugin(), &incoming, &node1(), &[]);
    let msg = status.message();
    assert!(
        msg.starts_with("parsing pod: [requiredAffinityTerms: "),
        "{msg}"
    );
    assert!(
        msg.contains(", preferredAntiAffinityTerms: values: Invalid value: []string{}"),
        "{msg}"
    );
}

fn two_zones() -> Vec<Node> {
    vec![
        node(
            "nodeA",
            &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")],
        ),
        node(
            "nodeB",
            &[("region", "r1"), ("zone", "z2"), ("hostname", "nodeB")],
        ),
    ]
}

fn china_india() -> Vec<Node> {
    vec![
        node("nodeA", &[("region", "China")]),
        node("nodeB", &[("region", "China"), ("az", "az1")]),
        node("nodeC", &[("region", "India")]),
    ]
}

fn multi(
    name: &'static str,
    incoming: Pod,
    pods: Vec<Pod>,
    nodes: Vec<Node>,
    want: Vec<Status>,
) -> Case {
    Case {
        name,
        pod: incoming,
        pods,
        nodes,
        pre_filter: Code::Success,
        want,
    }
}

#[test]
fn required_affinity_multiple_nodes() {
    let foo_bar = &[("foo", "bar")];
    let both = &[("foo", ""), ("bar", "")];
    check(vec![
        multi(
            "every node of the matching pod's region passes",
            pod().affinity_in("foo", "region", &["bar"]).obj(),
            vec![pod().name("p1").node("nodeA").labels(foo_bar).obj()],
            china_india(),
            vec![ok(), ok(), affinity_fails()],
        ),
        multi(
            "the first pod of a group with affinity to itself may go anywhere",
            pod()
                .labels(&[("foo", "bar"), SERVICE])
                .affinity_in("foo", "zone", &["bar"])
                .affinity_in("service", "zone", &["securityscan"])
                .obj(),
            vec![pod().name("p1").node("nodeA").labels(foo_bar).obj()],
            vec![
                node("nodeA", &[("zone", "az1"), ("hostname", "h1")]),
                node("nodeB", &[("zone", "az2"), ("hostname", "h2")]),
            ],
            vec![ok(), ok()],
        ),
        multi(
            "... but only onto nodes with the topology keys",
            pod()
                .labels(&[("foo", "bar"), SERVICE])
                .affinity_in("foo", "zone", &["bar"])
                .affinity_in("service", "zone", &["securityscan"])
                .obj(),
            vec![pod().name("p1").node("nodeA").labels(foo_bar).obj()],
            vec![
                node("nodeA", &[("zoneLabel", "az1"), ("hostname", "h1")]),
                node("nodeB", &[("zoneLabel", "az2"), ("hostname", "h2")]),
            ],
            vec![affinity_fails(), affinity_fails()],
        ),
        multi(
            "anti-affinity repels the whole region",
            pod().anti_in("foo", "region", &["abc"]).obj(),
            vec![pod().node("nodeA").labels(&[("foo", "abc")]).obj()],
            vec![
                node("nodeA", &[("region", "r1"), ("hostname", "nodeA")]),
                node("nodeB", &[("region", "r1"), ("hostname", "nodeB")]),
            ],
            vec![anti_fails(), anti_fails()],
        ),
        multi(
            "anti-affinity fails when any term matches",
            pod()
                .anti_in("foo", "region", &["abc"])
                .anti_in("service", "zone", &["securityscan"])
                .obj(),
            vec![pod().node("nodeA").labels(&[("foo", "abc"), SERVICE]).obj()],
            vec![
                node(
                    "nodeA",
                    &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")],
                ),
                node(
                    "nodeB",
                    &[("region", "r1"), ("zone", "z2"), ("hostname", "nodeB")],
                ),
            ],
            vec![anti_fails(), anti_fails()],
        ),
        multi(
            "anti-affinity leaves other regions",
            pod().anti_in("foo", "region", &["abc"]).obj(),
            vec![pod().node("nodeA").labels(&[("foo", "abc")]).obj()],
            china_india(),
            vec![anti_fails(), anti_fails(), ok()],
        ),
        multi(
            "pods of other namespaces do not count",
            pod()
                .namespace("NS1")
                .labels(&[("foo", "123")])
                .anti_in("foo", "region", &["bar"])
                .obj(),
            vec![
                pod().node("nodeA").namespace("NS1").labels(foo_bar).obj(),
                pod()
                    .node("nodeC")
                    .namespace("NS2")
                    .anti_in("foo", "region", &["123"])
                    .obj(),
            ],
            china_india(),
            vec![anti_fails(), anti_fails(), ok()],
        ),
        Case {
            name: "an existing pod's term over a missing topology key counts nowhere",
            pod: pod().labels(&[("foo", "")]).obj(),
            pods: vec![
                pod()
                    .node("nodeA")
                    .anti_exists("foo", "invalid-node-label")
                    .obj(),
            ],
            nodes: two_zones(),
            pre_filter: Code::Skip,
            want: vec![ok(), ok()],
        },
        multi(
            "the incoming pod's term over a missing topology key counts nowhere",
            pod()
                .node("nodeA")
                .anti_exists("foo", "invalid-node-label")
                .obj(),
            vec![pod().node("nodeA").labels(&[("foo", "")]).obj()],
            two_zones(),
            vec![ok(), ok()],
        ),
        multi(
            "violating each existing pod's terms on every node",
            pod().labels(both).obj(),
            vec![
                pod().node("nodeA").anti_exists("foo", "zone").obj(),
                pod().node("nodeA").anti_exists("bar", "region").obj(),
            ],
            two_zones(),
            vec![existing_fails(), existing_fails()],
        ),
        multi(
            "violating one of the incoming pod's terms on every node",
            pod()
                .anti_exists("foo", "zone")
                .anti_exists("bar", "region")
                .obj(),
            vec![
                pod().node("nodeA").labels(&[("foo", "")]).obj(),
                pod().node("nodeB").labels(&[("bar", "")]).obj(),
            ],
            two_zones(),
            vec![anti_fails(), anti_fails()],
        ),
        multi(
            "an existing pod's terms: selector and topology key must both match",
            pod().labels(both).obj(),
            vec![
                pod()
                    .node("nodeA")
                    .anti_exists("foo", "invalid-node-label")
                    .anti_exists("bar", "zone")
                    .obj(),
            ],
            two_zones(),
            vec![existing_fails(), ok()],
        ),
        multi(
            "the incoming pod's terms: selector and topology key must both match",
            pod()
                .anti_exists("foo", "invalid-node-label")
                .anti_exists("bar", "zone")
                .obj(),
            vec![pod().name("podA").node("nodeA").labels(both).obj()],
            two_zones(),
            vec![anti_fails(), ok()],
        ),
        multi(
            "an existing pod's terms over valid keys",
            pod().labels(both).obj(),
            vec![
                pod()
                    .node("nodeA")
                    .anti_exists("foo", "region")
                    .anti_exists("bar", "zone")
                    .obj(),
            ],
            two_zones(),
            vec![existing_fails(), existing_fails()],
        ),
        multi(
            "the incoming pod's terms over valid keys",
            pod()
                .anti_exists("foo", "region")
                .anti_exists("bar", "zone")
                .obj(),
            vec![pod().node("nodeA").labels(both).obj()],
            two_zones(),
            vec![anti_fails(), anti_fails()],
        ),
        multi(
            "existing pods on two nodes leave the third",
            pod().labels(both).obj(),
            vec![
                pod()
                    .node("nodeA")
                    .anti_exists("foo", "zone")
                    .anti_exists("labelA", "zone")
                    .obj(),
                pod()
                    .node("nodeB")
                    .anti_exists("bar", "zone")
                    .anti_exists("labelB", "zone")
                    .obj(),
            ],
            {
                let mut n = two_zones();
                n.push(node(
                    "nodeC",
                    &[("region", "r1"), ("zone", "z3"), ("hostname", "nodeC")],
                ));
                n
            },
            vec![existing_fails(), existing_fails(), ok()],
        ),
        multi(
            "affinity: one pod matching every term, then each term's domain",
            pod()
                .affinity_exists("foo", "region")
                .affinity_exists("bar", "zone")
                .obj(),
            vec![pod().name("pod1").labels(both).node("nodeA").obj()],
            vec![
                node(
                    "nodeA",
                    &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")],
                ),
                node(
                    "nodeB",
                    &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeB")],
                ),
            ],
            vec![ok(), ok()],
        ),
        multi(
            "affinity: the terms must be satisfied by the same pod",
            pod()
                .affinity_exists("foo", "region")
                .affinity_exists("bar", "zone")
                .obj(),
            vec![
                pod()
                    .name("pod1")
                    .node("nodeA")
                    .labels(&[("foo", "")])
                    .obj(),
                pod()
                    .name("pod2")
                    .node("nodeB")
                    .labels(&[("bar", "")])
                    .obj(),
            ],
            two_zones(),
            vec![affinity_fails(), affinity_fails()],
        ),
    ]);
}

fn counts(pairs: &[(&str, &str, i64)]) -> TopologyCounts {
    let mut c = TopologyCounts::default();
    for (k, v, n) in pairs {
        c.entry((*k).into()).or_default().insert((*v).into(), *n);
    }
    c
}

// Upstream's TestGetTPMapMatchingIncomingAffinityAntiAffinity, on the counts.
#[test]
fn incoming_pod_counts() {
    install_host();
    let normal = |l: &[&str]| {
        let pairs: Vec<(&str, &str)> = l.iter().map(|k| (*k, "")).collect();
        pod().name("normal").node("nodeA").labels(&pairs).obj()
    };
    let nodes = [node("nodeA", &[("hostname", "nodeA")])];
    let host_a = |n| counts(&[("hostname", "nodeA", n)]);
    let cases: Vec<(&str, Vec<Pod>, Pod, TopologyCounts, TopologyCounts)> = vec![
        (
            "nil test",
            vec![],
            pod().name("aaa-normal").obj(),
            counts(&[]),
            counts(&[]),
        ),
        (
            "no affinity is a no-op",
            vec![normal(&["aaa"])],
            pod().name("aaa-normal").obj(),
            counts(&[]),
            counts(&[]),
        ),
        (
            "no pod has the labels",
            vec![normal(&["bbb"])],
            pod()
                .affinity_exists("aaa", "hostname")
                .anti_exists("aaa", "hostname")
                .obj(),
            counts(&[]),
            counts(&[]),
        ),
        (
            "one term each",
            vec![normal(&["aaa"])],
            pod()
                .affinity_exists("aaa", "hostname")
                .anti_exists("aaa", "hostname")
                .obj(),
            host_a(1),
            host_a(1),
        ),
        (
            "each affinity term counts",
            vec![normal(&["aaa", "bbb"])],
            pod()
                .affinity_exists("aaa", "hostname")
                .affinity_exists("bbb", "hostname")
                .anti_exists("aaa", "hostname")
                .obj(),
            host_a(2),
            host_a(1),
        ),
        (
            "affinity needs every term, anti-affinity any",
            vec![normal(&["aaa"])],
            pod()
                .affinity_exists("aaa", "hostname")
                .affinity_exists("bbb", "hostname")
                .anti_exists("aaa", "hostname")
                .anti_exists("bbb", "hostname")
                .obj(),
            counts(&[]),
            host_a(1),
        ),
        (
            "partial anti-affinity match, case 1",
            vec![normal(&["aaa", "bbb"])],
            pod()
                .affinity_exists("aaa", "hostname")
                .affinity_exists("ccc", "hostname")
                .anti_exists("aaa", "hostname")
                .anti_exists("ccc", "hostname")
                .obj(),
            counts(&[]),
            host_a(1),
        ),
        (
            "partial anti-affinity match, case 2",
            vec![normal(&["bbb"])],
            pod()
                .affinity_exists("aaa", "hostname")
                .affinity_exists("bbb", "hostname")
                .anti_exists("aaa", "hostname")
                .anti_exists("bbb", "hostname")
                .obj(),
            counts(&[]),
            host_a(1),
        ),
    ];
    for (name, pods, incoming, affinity, anti) in cases {
        let infos = snapshot(&nodes, &pods);
        let refs: Vec<&NodeInfo> = infos.iter().collect();
        let terms = terms::PodTerms::of(&incoming).unwrap();
        let state = filtering::compute(&incoming, &terms, &refs);
        assert_eq!(state.affinity_counts, affinity, "{name}");
        assert_eq!(state.anti_affinity_counts, anti, "{name}");
    }
}

// The states upstream's TestPreFilterStateAddRemovePod expects once every pod is in.
#[test]
fn pre_filter_counts_with_several_nodes() {
    install_host();
    let foo_bar = &[("foo", "bar")];
    let anti_foo_bar = term(vec![expr("foo", In, &["bar"])], "region");
    let complex = vec![
        term(vec![expr("foo", In, &["bar", "buzz"])], "region"),
        term(
            vec![expr("service", NotIn, &["bar", "security", "test"])],
            "zone",
        ),
    ];
    let nodes = [
        node("nodeA", &[("region", "r1"), ("zone", "z11")]),
        node("nodeB", &[("region", "r1"), ("zone", "z12")]),
        node("nodeC", &[("region", "r2"), ("zone", "z21")]),
    ];
    let compute = |incoming: &Pod, pods: &[Pod]| {
        let infos = snapshot(&nodes, pods);
        let refs: Vec<&NodeInfo> = infos.iter().collect();
        filtering::compute(incoming, &terms::PodTerms::of(incoming).unwrap(), &refs)
    };

    let pending = pod()
        .name("pending")
        .labels(foo_bar)
        .anti(anti_foo_bar.clone())
        .obj();
    let pods = [
        pod().name("p1").labels(foo_bar).node("nodeA").obj(),
        pod()
            .name("p2")
            .node("nodeC")
            .anti(anti_foo_bar.clone())
            .obj(),
        pod()
            .name("added")
            .labels(foo_bar)
            .node("nodeB")
            .anti(anti_foo_bar.clone())
            .obj(),
    ];
    let s = compute(&pending, &pods);
    assert_eq!(s.anti_affinity_counts, counts(&[("region", "r1", 2)]));
    assert_eq!(s.affinity_counts, counts(&[]));
    assert_eq!(
        s.existing_anti_affinity_counts,
        counts(&[("region", "r1", 1), ("region", "r2", 1)])
    );

    let mut pending = pod().name("pending").labels(foo_bar).obj();
    pending.affinity.pod_anti_affinity.required = complex.clone();
    let mut added = pod().name("added").labels(foo_bar).node("nodeA").obj();
    added.affinity.pod_anti_affinity.required = complex.clone();
    let pods = [pods[0].clone(), pods[1].clone(), added.clone()];
    let s = compute(&pending, &pods);
    assert_eq!(
        s.anti_affinity_counts,
        counts(&[("region", "r1", 2), ("zone", "z11", 2), ("zone", "z21", 1)])
    );

    let mut pending = pod().name("pending").labels(foo_bar).obj();
    pending.affinity.pod_affinity.required = complex.clone();
    let mut p2 = pods[1].clone();
    p2.affinity.pod_affinity.required = complex;
    let s = compute(&pending, &[pods[0].clone(), p2, added]);
    assert_eq!(s.anti_affinity_counts, counts(&[]));
    assert_eq!(
        s.affinity_counts,
        counts(&[("region", "r1", 2), ("zone", "z11", 2)])
    );
    assert!(s.matches_own_affinity);
}

// Upstream's TestPreFilterDisabled.
#[test]
fn filter_without_pre_filter_is_an_error() {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let status = plugin().filter(&state, &Pod::default(), &NodeInfo::new(Node::default()));
    assert_eq!(
        status,
        Status::error("error reading \"PreFilterInterPodAffinity\" from cycleState: not found")
    );
}

#[test]
fn terminating_pods_count_as_upstream() {
    // Upstream counts a pod until it is gone from the node; so does Berth.
    let nodes = two_zones();
    let (_, got) = run_filter(
        &plugin(),
        &pod().anti_in("app", "zone", &["db"]).obj(),
        &nodes,
        &[pod()
            .node("nodeA")
            .labels(&[("app", "db")])
            .terminating()
            .obj()],
    );
    assert_eq!(got, [anti_fails(), ok()]);
    let (_, got) = run_filter(
        &plugin(),
        &pod().labels(&[("app", "web")]).obj(),
        &nodes,
        &[pod()
            .node("nodeB")
            .terminating()
            .anti_in("app", "zone", &["web"])
            .obj()],
    );
    assert_eq!(got, [ok(), existing_fails()]);
    let (_, got) = run_filter(
        &plugin(),
        &pod().affinity_in("app", "zone", &["db"]).obj(),
        &nodes,
        &[pod()
            .node("nodeB")
            .labels(&[("app", "db")])
            .terminating()
            .obj()],
    );
    assert_eq!(got, [affinity_fails(), ok()]);
}

#[test]
fn pods_without_labels() {
    let nodes = two_zones();
    // A selector with requirements never selects a pod without labels ...
    let (_, got) = run_filter(
        &plugin(),
        &pod().anti_exists("app", "zone").obj(),
        &nodes,
        &[pod().node("nodeA").obj()],
    );
    assert_eq!(got, [ok(), ok()]);
    // ... but NotIn and DoesNotExist do, and an empty selector selects every pod.
    let (_, got) = run_filter(
        &plugin(),
        &pod().anti_not_in("app", "zone", &["x"]).obj(),
        &nodes,
        &[pod().node("nodeA").obj()],
    );
    assert_eq!(got, [anti_fails(), ok()]);
    let (_, got) = run_filter(
        &plugin(),
        &pod()
            .anti(PodAffinityTerm {
                label_selector: Some(LabelSelector::default()),
                topology_key: "zone".into(),
                ..PodAffinityTerm::default()
            })
            .obj(),
        &nodes,
        &[pod().node("nodeB").obj()],
    );
    assert_eq!(got, [ok(), anti_fails()]);
    // A nil selector selects nothing, so no pod can satisfy the affinity, not even
    // the incoming one.
    let (_, got) = run_filter(
        &plugin(),
        &pod()
            .affinity(PodAffinityTerm {
                topology_key: "zone".into(),
                ..PodAffinityTerm::default()
            })
            .obj(),
        &nodes,
        &[pod().node("nodeB").obj()],
    );
    assert_eq!(got, [affinity_fails(), affinity_fails()]);
}

#[test]
fn match_label_keys_are_merged_from_the_owners_labels() {
    let nodes = two_zones();
    let by_rev = PodAffinityTerm {
        match_label_keys: vec!["rev".into()],
        ..term(vec![expr("app", In, &["web"])], "zone")
    };
    let pods = [
        pod()
            .name("old")
            .node("nodeA")
            .labels(&[("app", "web"), ("rev", "1")])
            .obj(),
        pod()
            .name("new")
            .node("nodeB")
            .labels(&[("app", "web"), ("rev", "2")])
            .obj(),
    ];
    // Anti-affinity within one revision only.
    let incoming = pod()
        .labels(&[("app", "web"), ("rev", "2")])
        .anti(by_rev.clone())
        .obj();
    let (_, got) = run_filter(&plugin(), &incoming, &nodes, &pods);
    assert_eq!(got, [ok(), anti_fails()]);
    // mismatchLabelKeys: keep away from other tenants.
    let other_tenants = PodAffinityTerm {
        mismatch_label_keys: vec!["tenant".into()],
        ..term(vec![expr("app", Exists, &[])], "zone")
    };
    let pods = [
        pod()
            .node("nodeA")
            .labels(&[("app", "x"), ("tenant", "a")])
            .obj(),
        pod()
            .node("nodeB")
            .labels(&[("app", "y"), ("tenant", "b")])
            .obj(),
    ];
    let incoming = pod().labels(&[("tenant", "a")]).anti(other_tenants).obj();
    let (_, got) = run_filter(&plugin(), &incoming, &nodes, &pods);
    assert_eq!(got, [ok(), anti_fails()]);
    // An existing pod's keys take the existing pod's values.
    let pods = [pod()
        .node("nodeA")
        .labels(&[("app", "web"), ("rev", "1")])
        .anti(by_rev)
        .obj()];
    let incoming = |rev| pod().labels(&[("app", "web"), ("rev", rev)]).obj();
    let (_, got) = run_filter(&plugin(), &incoming("1"), &nodes, &pods);
    assert_eq!(got, [existing_fails(), ok()]);
    let (pre, got) = run_filter(&plugin(), &incoming("2"), &nodes, &pods);
    assert_eq!((pre.code, got), (Code::Skip, vec![ok(), ok()]));
}

#[test]
fn namespaces_of_existing_pods_terms_use_the_incoming_pods_namespace_labels() {
    let nodes = two_zones();
    let existing = pod()
        .namespace("other")
        .node("nodeA")
        .anti(PodAffinityTerm {
            namespace_selector: team1_selector(),
            ..term(vec![expr("app", In, &["web"])], "zone")
        })
        .obj();
    let incoming = |ns: &str| pod().namespace(ns).labels(&[("app", "web")]).obj();
    let (_, got) = run_filter(
        &plugin(),
        &incoming("subteam2.team1"),
        &nodes,
        std::slice::from_ref(&existing),
    );
    assert_eq!(got, [existing_fails(), ok()]);
    let (pre, _) = run_filter(
        &plugin(),
        &incoming("subteam2.team2"),
        &nodes,
        std::slice::from_ref(&existing),
    );
    assert_eq!(pre.code, Code::Skip);
    // An unknown namespace has no labels, so only an empty selector selects it.
    let (pre, _) = run_filter(&plugin(), &incoming("unknown"), &nodes, &[existing]);
    assert_eq!(pre.code, Code::Skip);
}

#[test]
fn filter_decodes_a_state_written_by_another_instance() {
    install_host();
    let nodes = two_zones();
    let pods = [pod().node("nodeA").labels(&[("app", "db")]).obj()];
    let infos = snapshot(&nodes, &pods);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let (writer, reader) = (plugin(), plugin());
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let repel = pod().anti_in("app", "zone", &["db"]).obj();
    assert!(writer.pre_filter(&state, &repel, &refs).status.is_success());
    let got: Vec<Status> = infos
        .iter()
        .map(|n| reader.filter(&state, &repel, n))
        .collect();
    assert_eq!(got, [anti_fails(), ok()]);
    // A later cycle's state replaces the memo of the earlier one.
    let store2 = MemoryState::default();
    let state2 = CycleState::new(&store2);
    let attract = pod().affinity_in("app", "zone", &["db"]).obj();
    assert!(
        writer
            .pre_filter(&state2, &attract, &refs)
            .status
            .is_success()
    );
    let got: Vec<Status> = infos
        .iter()
        .map(|n| reader.filter(&state2, &attract, n))
        .collect();
    assert_eq!(got, [ok(), affinity_fails()]);
    let got: Vec<Status> = infos
        .iter()
        .map(|n| writer.filter(&state, &repel, n))
        .collect();
    assert_eq!(got, [anti_fails(), ok()]);
}
