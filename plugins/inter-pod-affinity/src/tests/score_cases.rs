//! PreScore, Score and NormalizeScore: upstream's TestPreferredAffinity and
//! TestPreferredAffinityWithHardPodAffinitySymmetricWeight, then Berth's own cases.

use super::*;

const S1: &[(&str, &str)] = &[("security", "S1")];
const S2: &[(&str, &str)] = &[("security", "S2")];
const CHINA: &[(&str, &str)] = &[("region", "China")];
const INDIA: &[(&str, &str)] = &[("region", "India")];
const AZ1: &[(&str, &str)] = &[("az", "az1")];
const AZ2: &[(&str, &str)] = &[("az", "az2")];
const CHINA_AZ1: &[(&str, &str)] = &[("region", "China"), ("az", "az1")];

fn security_in(value: &str, topology: &str) -> PodAffinityTerm {
    term(vec![expr("security", In, &[value])], topology)
}

/// Upstream's `stayWithS1InRegion` and friends.
fn stay_with_s1_in_region(p: PodBuilder) -> PodBuilder {
    p.preferred(5, security_in("S1", "region"))
}
fn stay_with_s2_in_region(p: PodBuilder) -> PodBuilder {
    p.preferred(6, security_in("S2", "region"))
}
fn affinity3(p: PodBuilder) -> PodBuilder {
    p.preferred(
        8,
        term(
            vec![
                expr("security", NotIn, &["S1"]),
                expr("security", In, &["S2"]),
            ],
            "region",
        ),
    )
    .preferred(
        2,
        term(
            vec![
                expr("security", Exists, &[]),
                expr("wrongkey", DoesNotExist, &[]),
            ],
            "region",
        ),
    )
}
fn hard_affinity(p: PodBuilder) -> PodBuilder {
    p.affinity(term(
        vec![expr("security", In, &["S1", "value2"])],
        "region",
    ))
    .affinity(term(
        vec![
            expr("security", Exists, &[]),
            expr("wrongkey", DoesNotExist, &[]),
        ],
        "region",
    ))
}
fn away_from_s1_in_az(p: PodBuilder) -> PodBuilder {
    p.preferred_anti(5, security_in("S1", "az"))
}
fn away_from_s2_in_az(p: PodBuilder) -> PodBuilder {
    p.preferred_anti(5, security_in("S2", "az"))
}
fn stay_with_s1_in_region_away_from_s2_in_az(p: PodBuilder) -> PodBuilder {
    p.preferred(8, security_in("S1", "region"))
        .preferred_anti(5, security_in("S2", "az"))
}
/// Namespaces subteam2.team2, or those labelled team=team1.
fn team1_or_subteam2_team2(t: PodAffinityTerm) -> PodAffinityTerm {
    PodAffinityTerm {
        namespaces: vec!["subteam2.team2".into()],
        namespace_selector: Some(selector(vec![expr("team", In, &["team1"])])),
        ..t
    }
}
fn affinity_namespace_selector(p: PodBuilder) -> PodBuilder {
    p.preferred(5, team1_or_subteam2_team2(security_in("S1", "region")))
}
fn anti_affinity_namespace_selector(p: PodBuilder) -> PodBuilder {
    p.preferred_anti(5, team1_or_subteam2_team2(security_in("S1", "region")))
}

fn nodes(specs: &[(&str, &[(&str, &str)])]) -> Vec<Node> {
    specs.iter().map(|(n, l)| node(n, l)).collect()
}

fn on(node: &str, l: &[(&str, &str)]) -> PodBuilder {
    pod().node(node).labels(l)
}

/// Upstream's test nodes: node1..node3 with the given labels.
fn three(a: &[(&str, &str)], b: &[(&str, &str)], c: &[(&str, &str)]) -> Vec<Node> {
    nodes(&[("node1", a), ("node2", b), ("node3", c)])
}

fn five_regions() -> Vec<Node> {
    nodes(&[
        ("node1", CHINA),
        ("node2", INDIA),
        ("node3", CHINA),
        ("node4", CHINA),
        ("node5", INDIA),
    ])
}

struct Case {
    name: &'static str,
    pod: Pod,
    pods: Vec<Pod>,
    nodes: Vec<Node>,
    want: Result<Vec<i64>, Code>,
}

fn case(
    name: &'static str,
    incoming: PodBuilder,
    pods: Vec<PodBuilder>,
    nodes: Vec<Node>,
    want: &[i64],
) -> Case {
    Case {
        name,
        pod: incoming.obj(),
        pods: pods.into_iter().map(PodBuilder::obj).collect(),
        nodes,
        want: Ok(want.to_vec()),
    }
}

fn check_with(p: &InterPodAffinity, cases: Vec<Case>) {
    for c in cases {
        let got = run_score(p, &c.pod, &c.nodes, &c.pods).map_err(|s| s.code);
        assert_eq!(got, c.want, "{}", c.name);
    }
}

#[test]
fn preferred_affinity() {
    let ns_pods = |node1: &[&str], node2: &str| {
        let mut pods: Vec<PodBuilder> = node1
            .iter()
            .map(|ns| on("node1", S1).namespace(ns))
            .collect();
        pods.push(on("node2", S1).namespace(node2));
        pods
    };
    check_with(
        &plugin(),
        vec![
            Case {
                name: "no affinity anywhere is Skip",
                pod: pod().labels(S1).obj(),
                pods: vec![],
                nodes: three(CHINA, INDIA, AZ1),
                want: Err(Code::Skip),
            },
            case(
                "affinity: the domain with the matching pod scores highest",
                stay_with_s1_in_region(pod().labels(S1)),
                vec![on("node1", S1), on("node2", S2), on("node3", S1)],
                three(CHINA, INDIA, AZ1),
                &[100, 0, 0],
            ),
            case(
                "affinity: every node of the domain scores the same",
                stay_with_s1_in_region(pod()),
                vec![on("node1", S1)],
                three(CHINA, CHINA_AZ1, INDIA),
                &[100, 100, 0],
            ),
            case(
                "affinity: the region with more matching pods scores highest",
                stay_with_s2_in_region(pod().labels(S1)),
                vec![
                    on("node1", S2),
                    on("node1", S2),
                    on("node2", S2),
                    on("node3", S2),
                    on("node4", S2),
                    on("node5", S2),
                ],
                five_regions(),
                &[100, 0, 100, 100, 0],
            ),
            case(
                "affinity: different operators, some not matching",
                affinity3(pod().labels(S1)),
                vec![on("node1", S1), on("node2", S2), on("node3", S1)],
                three(CHINA, INDIA, AZ1),
                &[20, 100, 0],
            ),
            case(
                "symmetry: existing pods' preferred affinity",
                pod().labels(S2),
                vec![
                    stay_with_s1_in_region(on("node1", S1)),
                    stay_with_s2_in_region(on("node2", S2)),
                ],
                three(CHINA, INDIA, AZ1),
                &[0, 100, 0],
            ),
            case(
                "symmetry with a namespace selector",
                pod().namespace("subteam1.team1").labels(S1),
                vec![
                    affinity_namespace_selector(on("node1", S1)),
                    stay_with_s2_in_region(on("node2", S2)),
                ],
                three(CHINA, INDIA, AZ1),
                &[100, 0, 0],
            ),
            case(
                "anti-affinity symmetry with a namespace selector",
                pod().namespace("subteam1.team1").labels(S1),
                vec![
                    anti_affinity_namespace_selector(on("node1", S1)),
                    stay_with_s2_in_region(on("node2", S2)),
                ],
                three(CHINA, INDIA, AZ1),
                &[0, 100, 100],
            ),
            case(
                "symmetry: existing pods' required affinity",
                pod().labels(S1),
                vec![
                    hard_affinity(on("node1", S1)),
                    hard_affinity(on("node2", S2)),
                ],
                three(CHINA, INDIA, AZ1),
                &[100, 100, 0],
            ),
            case(
                "anti-affinity: the node without matching pods scores highest",
                away_from_s1_in_az(pod().labels(S1)),
                vec![on("node1", S1), on("node2", S2)],
                nodes(&[("node1", AZ1), ("node2", CHINA)]),
                &[0, 100],
            ),
            case(
                "anti-affinity: a node without the topology key scores highest",
                away_from_s1_in_az(pod().labels(S1)),
                vec![on("node1", S1), on("node2", S1)],
                nodes(&[("node1", AZ1), ("node2", CHINA)]),
                &[0, 100],
            ),
            case(
                "anti-affinity: more matching pods score lower",
                away_from_s1_in_az(pod().labels(S1)),
                vec![on("node1", S1), on("node1", S1), on("node2", S2)],
                nodes(&[("node1", AZ1), ("node2", INDIA)]),
                &[0, 100],
            ),
            case(
                "anti-affinity symmetry",
                pod().labels(S2),
                vec![
                    away_from_s2_in_az(on("node1", S1)),
                    away_from_s1_in_az(on("node2", S2)),
                ],
                nodes(&[("node1", AZ1), ("node2", AZ2)]),
                &[0, 100],
            ),
            case(
                "affinity and anti-affinity",
                stay_with_s1_in_region_away_from_s2_in_az(pod().labels(S1)),
                vec![on("node1", S1), on("node2", S1)],
                nodes(&[("node1", CHINA), ("node2", AZ1)]),
                &[100, 0],
            ),
            case(
                "affinity and anti-affinity with pods of the same labels",
                stay_with_s1_in_region_away_from_s2_in_az(pod().labels(S1)),
                vec![
                    on("node1", S1),
                    on("node1", S1),
                    on("node2", S1),
                    on("node3", S1),
                    on("node3", S1),
                    on("node4", S1),
                    on("node5", S1),
                ],
                {
                    let mut n = five_regions();
                    n[0] = node("node1", CHINA_AZ1);
                    n
                },
                &[100, 0, 100, 100, 0],
            ),
            case(
                "affinity, anti-affinity and symmetry together",
                stay_with_s1_in_region_away_from_s2_in_az(pod().labels(S1)),
                vec![
                    on("node1", S1),
                    on("node2", S2),
                    stay_with_s1_in_region_away_from_s2_in_az(on("node3", &[])),
                    away_from_s1_in_az(on("node4", &[])),
                ],
                nodes(&[
                    ("node1", CHINA),
                    ("node2", AZ1),
                    ("node3", INDIA),
                    ("node4", AZ2),
                ]),
                &[100, 0, 100, 0],
            ),
            case(
                "nodes of a domain without pods with affinity",
                pod().labels(S1),
                vec![
                    on("node1", S1),
                    stay_with_s1_in_region_away_from_s2_in_az(on("node2", &[])),
                ],
                nodes(&[("node1", CHINA), ("node2", CHINA)]),
                &[0, 0],
            ),
            case(
                "affinity with pods matching the namespace selector",
                affinity_namespace_selector(pod().namespace("subteam1.team1").labels(S1)),
                ns_pods(
                    &["subteam1.team1", "subteam1.team1", "subteam1.team2"],
                    "subteam2.team1",
                ),
                nodes(&[("node1", CHINA), ("node2", INDIA)]),
                &[100, 0],
            ),
            case(
                "affinity with pods matching the namespace selector and namespaces",
                affinity_namespace_selector(pod().namespace("subteam1.team1").labels(S1)),
                ns_pods(
                    &["subteam1.team1", "subteam1.team1", "subteam2.team2"],
                    "subteam2.team1",
                ),
                nodes(&[("node1", CHINA), ("node2", INDIA)]),
                &[100, 0],
            ),
            case(
                "anti-affinity with pods matching the namespace selector",
                anti_affinity_namespace_selector(pod().namespace("subteam1.team1").labels(S1)),
                ns_pods(
                    &["subteam1.team1", "subteam1.team1", "subteam1.team2"],
                    "subteam2.team1",
                ),
                nodes(&[("node1", CHINA), ("node2", INDIA)]),
                &[0, 100],
            ),
            case(
                "anti-affinity with pods matching the namespace selector and namespaces",
                anti_affinity_namespace_selector(pod().namespace("subteam1.team1").labels(S1)),
                ns_pods(
                    &["subteam1.team1", "subteam1.team1", "subteam2.team2"],
                    "subteam2.team1",
                ),
                nodes(&[("node1", CHINA), ("node2", INDIA)]),
                &[0, 100],
            ),
            case(
                "existing pods' preferred terms count by default",
                pod().labels(S2),
                vec![
                    stay_with_s1_in_region_away_from_s2_in_az(on("node1", S1)),
                    stay_with_s2_in_region(on("node2", S2)),
                ],
                nodes(&[("node1", CHINA), ("node2", INDIA)]),
                &[0, 100],
            ),
            Case {
                name: "no nodes to score",
                pod: pod().labels(S2).obj(),
                pods: vec![],
                nodes: vec![],
                want: Err(Code::Skip),
            },
        ],
    );
}

#[test]
fn ignore_preferred_terms_of_existing_pods() {
    let p = InterPodAffinity::new(json!({"ignorePreferredTermsOfExistingPods": true})).unwrap();
    let pods = vec![
        stay_with_s1_in_region_away_from_s2_in_az(on("node1", S1)),
        stay_with_s2_in_region(on("node2", S2)),
    ];
    let two = || nodes(&[("node1", CHINA), ("node2", INDIA)]);
    check_with(
        &p,
        vec![
            Case {
                name: "a pod without preferred terms is not scored",
                pod: pod().labels(S2).obj(),
                pods: pods.iter().cloned().map(PodBuilder::obj).collect(),
                nodes: two(),
                want: Err(Code::Skip),
            },
            // As upstream, the flag only decides whether to score; once scoring, the
            // existing pods' preferred terms count too.
            case(
                "a pod with preferred terms still sees existing pods' terms",
                pod().labels(S2).preferred(1, security_in("none", "region")),
                pods,
                two(),
                &[0, 100],
            ),
        ],
    );
}

#[test]
fn invalid_terms_fail_pre_score() {
    for incoming in [
        pod()
            .preferred(8, security_in("{{.bad-value.}}", "region"))
            .obj(),
        pod()
            .preferred_anti(5, security_in("{{.bad-value.}}", "az"))
            .obj(),
    ] {
        let got = run_score(
            &plugin(),
            &incoming,
            &nodes(&[("node1", CHINA), ("node2", CHINA)]),
            &[],
        );
        let status = got.unwrap_err();
        assert_eq!(status.code, Code::Error);
        assert!(
            status.message().starts_with("failed to parse pod: ")
                && status
                    .message()
                    .contains("Invalid value: \"{{.bad-value.}}\""),
            "{status:?}"
        );
    }
}

// Upstream's TestPreferredAffinityWithHardPodAffinitySymmetricWeight.
#[test]
fn hard_pod_affinity_weight() {
    let hard = |p: PodBuilder| {
        p.affinity(PodAffinityTerm {
            namespaces: vec!["".into(), "subteam2.team2".into()],
            namespace_selector: Some(selector(vec![expr("team", In, &["team1"])])),
            ..term(vec![expr("service", In, &["S1"])], "region")
        })
    };
    let pods = [
        hard(pod().node("node1")).obj(),
        hard(pod().node("node2")).obj(),
    ];
    let nodes = three(CHINA, INDIA, AZ1);
    let score = |weight: i32, ns: &str| {
        let p = InterPodAffinity::new(json!({"hardPodAffinityWeight": weight})).unwrap();
        let incoming = pod().namespace(ns).labels(&[("service", "S1")]).obj();
        run_score(&p, &incoming, &nodes, &pods).map_err(|s| s.code)
    };
    assert_eq!(score(1, ""), Ok(vec![100, 100, 0]), "default weight");
    assert_eq!(score(0, ""), Err(Code::Skip), "zero weight");
    assert_eq!(
        score(1, "subteam1.team2"),
        Err(Code::Skip),
        "no matching namespace"
    );
    assert_eq!(
        score(1, "subteam1.team1"),
        Ok(vec![100, 100, 0]),
        "namespace selector"
    );
    assert_eq!(
        score(1, "subteam2.team2"),
        Ok(vec![100, 100, 0]),
        "namespaces"
    );
    // The weight adds up with preferred terms: China 10, India 10 + 6.
    let mut pods = pods.to_vec();
    pods.push(stay_with_s2_in_region(on("node2", &[("service", "S1")])).obj());
    let p = InterPodAffinity::new(json!({"hardPodAffinityWeight": 10})).unwrap();
    let incoming = pod().labels(&[("service", "S1"), ("security", "S2")]).obj();
    assert_eq!(
        run_score(&p, &incoming, &nodes, &pods),
        Ok(vec![62, 100, 0])
    );
    let incoming = pod().labels(&[("service", "S1")]).obj();
    let raw = |p: &InterPodAffinity| {
        install_host();
        let infos = snapshot(&nodes, &pods);
        let refs: Vec<&NodeInfo> = infos.iter().collect();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        assert!(p.pre_score(&state, &incoming, &refs, &refs).is_success());
        infos
            .iter()
            .map(|n| p.score(&state, &incoming, n).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(raw(&p), [10, 10, 0]);
}

#[test]
fn terminating_pods_count_as_upstream() {
    let got = run_score(
        &plugin(),
        &stay_with_s1_in_region(pod()).obj(),
        &nodes(&[("node1", CHINA), ("node2", INDIA)]),
        &[on("node2", S1).terminating().obj()],
    );
    assert_eq!(got, Ok(vec![0, 100]));
}

#[test]
fn weights_cancel_but_still_score() {
    // +5 and -5 in one domain: a weight was found, so PreScore succeeds, and equal
    // scores normalize to 0.
    let incoming = pod()
        .preferred(5, security_in("S1", "region"))
        .preferred_anti(5, security_in("S1", "region"))
        .obj();
    let got = run_score(
        &plugin(),
        &incoming,
        &nodes(&[("node1", CHINA), ("node2", INDIA)]),
        &[on("node1", S1).obj()],
    );
    assert_eq!(got, Ok(vec![0, 0]));
}

#[test]
fn score_and_normalize_without_pre_score_are_errors() {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let want =
        Status::error("failed to read \"PreScoreInterPodAffinity\" from cycleState: not found");
    let p = plugin();
    assert_eq!(
        p.score(&state, &Pod::default(), &NodeInfo::new(Node::default())),
        Err(want.clone())
    );
    assert_eq!(
        p.normalize_score(&state, &Pod::default(), &mut [1, 2]),
        want
    );
}

#[test]
fn score_decodes_a_state_written_by_another_instance() {
    install_host();
    let all = nodes(&[("node1", CHINA), ("node2", INDIA)]);
    let infos = snapshot(&all, &[on("node1", S1).obj()]);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let incoming = stay_with_s1_in_region(pod()).obj();
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    assert!(
        plugin()
            .pre_score(&state, &incoming, &refs, &refs)
            .is_success()
    );
    let reader = plugin();
    let mut scores: Vec<i64> = infos
        .iter()
        .map(|n| reader.score(&state, &incoming, n).unwrap())
        .collect();
    assert_eq!(scores, [5, 0]);
    assert!(
        reader
            .normalize_score(&state, &incoming, &mut scores)
            .is_success()
    );
    assert_eq!(scores, [100, 0]);
}
