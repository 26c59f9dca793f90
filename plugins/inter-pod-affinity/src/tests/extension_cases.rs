//! PreFilterExtensions: upstream's TestPreFilterStateAddRemovePod (the state after
//! AddPod is the state PreFilter computes with the pod in; RemovePod restores the
//! state before), then what the updates mean to Filter in a what-if.

use super::*;

/// The state PreFilter computes for `incoming` over `pods`, written into `store` as
/// PreFilter writes it (also when PreFilter would Skip: the extensions' update is
/// then still defined, though the host does not call it).
fn seed(p: &InterPodAffinity, store: &MemoryState, incoming: &Pod, nodes: &[Node], pods: &[Pod]) {
    install_host();
    let infos = snapshot(nodes, pods);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let state = CycleState::new(store);
    let terms = terms::PodTerms::of(incoming).unwrap();
    let computed = filtering::compute(incoming, &terms, &refs);
    p.pre_filter_memo
        .save(&state, &PRE_FILTER_ID, PRE_FILTER_STATE_KEY, computed);
}

fn read(store: &MemoryState) -> PreFilterState {
    CycleState::new(store)
        .read::<PreFilterState>(PRE_FILTER_STATE_KEY)
        .expect("the state is in the cycle")
}

fn counts(pairs: &[(&str, &str, i64)]) -> TopologyCounts {
    let mut c = TopologyCounts::default();
    for (k, v, n) in pairs {
        c.entry((*k).into()).or_default().insert((*v).into(), *n);
    }
    c
}

fn info_of(nodes: &[Node], name: &str) -> NodeInfo {
    NodeInfo::new(nodes.iter().find(|n| n.name == name).unwrap().clone())
}

/// Upstream's TestPreFilterStateAddRemovePod: each case names the pending pod, the
/// existing pods, the added pod, and the incoming pod's anti-affinity and affinity
/// counts once the pod is added.
#[test]
fn add_then_remove_matches_pre_filter_with_and_without_the_pod() {
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
    let nodes = vec![
        node("nodeA", &[("region", "r1"), ("zone", "z11")]),
        node("nodeB", &[("region", "r1"), ("zone", "z12")]),
        node("nodeC", &[("region", "r2"), ("zone", "z21")]),
    ];
    let with_anti = |b: PodBuilder, terms: &[PodAffinityTerm]| {
        let mut p = b.obj();
        p.affinity.pod_anti_affinity.required = terms.to_vec();
        p
    };
    let with_affinity = |mut p: Pod, terms: &[PodAffinityTerm]| {
        p.affinity.pod_affinity.required = terms.to_vec();
        p
    };
    let p1 = pod().name("p1").labels(foo_bar).node("nodeA").obj();
    struct Case {
        name: &'static str,
        pending: Pod,
        existing: Vec<Pod>,
        added: Pod,
        anti: TopologyCounts,
        affinity: TopologyCounts,
    }
    let cases = vec![
        Case {
            name: "no affinity exist",
            pending: pod().name("pending").labels(foo_bar).obj(),
            existing: vec![p1.clone(), pod().name("p2").node("nodeC").obj()],
            added: pod().name("addedPod").labels(foo_bar).node("nodeB").obj(),
            anti: counts(&[]),
            affinity: counts(&[]),
        },
        Case {
            name: "anti-affinity terms are updated correctly after adding and removing a pod",
            pending: with_anti(
                pod().name("pending").labels(foo_bar),
                std::slice::from_ref(&anti_foo_bar),
            ),
            existing: vec![
                p1.clone(),
                with_anti(
                    pod().name("p2").node("nodeC"),
                    std::slice::from_ref(&anti_foo_bar),
                ),
            ],
            added: with_anti(
                pod().name("addedPod").labels(foo_bar).node("nodeB"),
                std::slice::from_ref(&anti_foo_bar),
            ),
            anti: counts(&[("region", "r1", 2)]),
            affinity: counts(&[]),
        },
        Case {
            name: "anti-affinity terms (two terms) are updated correctly",
            pending: with_anti(pod().name("pending").labels(foo_bar), &complex),
            existing: vec![
                p1.clone(),
                with_anti(
                    pod().name("p2").node("nodeC"),
                    std::slice::from_ref(&anti_foo_bar),
                ),
            ],
            added: with_anti(
                pod().name("addedPod").labels(foo_bar).node("nodeA"),
                &complex,
            ),
            anti: counts(&[("region", "r1", 2), ("zone", "z11", 2), ("zone", "z21", 1)]),
            affinity: counts(&[]),
        },
        Case {
            name: "matching pod affinity and anti-affinity are updated correctly",
            pending: with_affinity(pod().name("pending").labels(foo_bar).obj(), &complex),
            existing: vec![
                p1.clone(),
                with_affinity(
                    with_anti(
                        pod().name("p2").node("nodeC"),
                        std::slice::from_ref(&anti_foo_bar),
                    ),
                    &complex,
                ),
            ],
            added: with_anti(
                pod().name("addedPod").labels(foo_bar).node("nodeA"),
                &complex,
            ),
            anti: counts(&[]),
            affinity: counts(&[("region", "r1", 2), ("zone", "z11", 2)]),
        },
    ];
    for c in cases {
        let p = plugin();
        let before = MemoryState::default();
        seed(&p, &before, &c.pending, &nodes, &c.existing);
        let all = MemoryState::default();
        let mut with_added = c.existing.clone();
        with_added.push(c.added.clone());
        seed(&p, &all, &c.pending, &nodes, &with_added);
        let original = read(&before);

        let state = CycleState::new(&before);
        let node = info_of(&nodes, &c.added.node_name);
        let status = p.add_pod(&state, &c.pending, &c.added, &node);
        assert!(status.is_success(), "{}: {status:?}", c.name);
        let added = read(&before);
        assert_eq!(added.anti_affinity_counts, c.anti, "{}", c.name);
        assert_eq!(added.affinity_counts, c.affinity, "{}", c.name);
        assert_eq!(added, read(&all), "{}: AddPod = PreFilter with it", c.name);

        let status = p.remove_pod(&state, &c.pending, &c.added, &node);
        assert!(status.is_success(), "{}: {status:?}", c.name);
        assert_eq!(
            read(&before),
            original,
            "{}: RemovePod undoes AddPod",
            c.name
        );
    }
}

/// Two nodes of one region, each its own zone (filter_cases' `two_zones`).
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

/// What-ifs on one node, judged by Filter after each update, as preemption and the
/// nominated pods' pass use the extensions.
fn filter_after(
    p: &InterPodAffinity,
    store: &MemoryState,
    incoming: &Pod,
    node: &NodeInfo,
) -> Status {
    p.filter(&CycleState::new(store), incoming, node)
}

#[test]
fn removing_the_pod_the_incoming_pod_is_anti_affine_to_lets_it_in() {
    // Upstream's TestSelectNodesForPreemption "preemption to resolve pod anti-affinity"
    // at the plugin: the victim is what the incoming pod's anti-affinity forbids.
    let nodes = two_zones();
    let victim = pod()
        .name("victim")
        .labels(&[("app", "db")])
        .node("nodeA")
        .obj();
    let incoming = pod().name("p").anti_in("app", "hostname", &["db"]).obj();
    let p = plugin();
    let store = MemoryState::default();
    seed(&p, &store, &incoming, &nodes, std::slice::from_ref(&victim));
    let node_a = info_of(&nodes, "nodeA");
    assert_eq!(filter_after(&p, &store, &incoming, &node_a), anti_fails());
    let state = CycleState::new(&store);
    assert!(
        p.remove_pod(&state, &incoming, &victim, &node_a)
            .is_success()
    );
    assert_eq!(read(&store).anti_affinity_counts, counts(&[]));
    assert_eq!(filter_after(&p, &store, &incoming, &node_a), ok());
    // Reprieved: added back, it forbids the node again.
    assert!(p.add_pod(&state, &incoming, &victim, &node_a).is_success());
    assert_eq!(filter_after(&p, &store, &incoming, &node_a), anti_fails());
}

#[test]
fn removing_an_existing_pod_whose_anti_affinity_forbids_the_incoming_pod() {
    // Upstream's TestDryRunPreemption "pod with anti-affinity is preempted".
    let nodes = two_zones();
    let victim = pod()
        .name("p1.1")
        .labels(&[("foo", "")])
        .node("nodeA")
        .anti_exists("foo", "hostname")
        .obj();
    let incoming = pod().name("p").labels(&[("foo", "")]).obj();
    let p = plugin();
    let store = MemoryState::default();
    seed(&p, &store, &incoming, &nodes, std::slice::from_ref(&victim));
    let node_a = info_of(&nodes, "nodeA");
    assert_eq!(
        filter_after(&p, &store, &incoming, &node_a),
        existing_fails()
    );
    let state = CycleState::new(&store);
    assert!(
        p.remove_pod(&state, &incoming, &victim, &node_a)
            .is_success()
    );
    assert_eq!(read(&store).existing_anti_affinity_counts, counts(&[]));
    assert_eq!(filter_after(&p, &store, &incoming, &node_a), ok());
}

#[test]
fn removing_the_only_pod_the_incoming_pod_is_affine_to() {
    let nodes = two_zones();
    let target = pod()
        .name("db")
        .labels(&[("app", "db")])
        .node("nodeA")
        .obj();
    let node_a = info_of(&nodes, "nodeA");
    let node_b = info_of(&nodes, "nodeB");
    // The incoming pod does not match its own term: with the target gone no node
    // satisfies the affinity (the count's domain is dropped, not left at 0).
    let incoming = pod().name("web").affinity_in("app", "zone", &["db"]).obj();
    let p = plugin();
    let store = MemoryState::default();
    seed(&p, &store, &incoming, &nodes, std::slice::from_ref(&target));
    assert_eq!(filter_after(&p, &store, &incoming, &node_a), ok());
    assert_eq!(
        filter_after(&p, &store, &incoming, &node_b),
        affinity_fails()
    );
    let state = CycleState::new(&store);
    assert!(
        p.remove_pod(&state, &incoming, &target, &node_a)
            .is_success()
    );
    assert!(read(&store).affinity_counts.is_empty());
    assert_eq!(
        filter_after(&p, &store, &incoming, &node_a),
        affinity_fails()
    );
    // One that matches its own term is the first of its group: with no match left
    // anywhere, every node with the topology key will do.
    let incoming = pod()
        .name("db-2")
        .labels(&[("app", "db")])
        .affinity_in("app", "zone", &["db"])
        .obj();
    let store = MemoryState::default();
    seed(&p, &store, &incoming, &nodes, std::slice::from_ref(&target));
    assert_eq!(
        filter_after(&p, &store, &incoming, &node_b),
        affinity_fails()
    );
    let state = CycleState::new(&store);
    assert!(
        p.remove_pod(&state, &incoming, &target, &node_a)
            .is_success()
    );
    assert_eq!(filter_after(&p, &store, &incoming, &node_a), ok());
    assert_eq!(filter_after(&p, &store, &incoming, &node_b), ok());
}

#[test]
fn an_added_pod_counts_in_every_list() {
    // A nominated pod added to nodeB: its anti-affinity forbids the incoming pod
    // there, it satisfies the incoming pod's affinity in its zone, and it matches
    // the incoming pod's anti-affinity in its region.
    let nodes = two_zones();
    let node_b = info_of(&nodes, "nodeB");
    let nominated = pod()
        .name("nominated")
        .labels(&[("app", "cache")])
        .node("nodeB")
        .anti_in("app", "hostname", &["web"])
        .obj();
    let incoming = pod()
        .name("web")
        .labels(&[("app", "web")])
        .affinity_in("app", "zone", &["cache"])
        .anti_in("app", "region", &["cache"])
        .obj();
    let p = plugin();
    let store = MemoryState::default();
    seed(&p, &store, &incoming, &nodes, &[]);
    let state = CycleState::new(&store);
    assert!(
        p.add_pod(&state, &incoming, &nominated, &node_b)
            .is_success()
    );
    let s = read(&store);
    assert_eq!(
        s.existing_anti_affinity_counts,
        counts(&[("hostname", "nodeB", 1)])
    );
    assert_eq!(s.affinity_counts, counts(&[("zone", "z2", 1)]));
    assert_eq!(s.anti_affinity_counts, counts(&[("region", "r1", 1)]));
    assert!(
        p.remove_pod(&state, &incoming, &nominated, &node_b)
            .is_success()
    );
    let s = read(&store);
    assert!(s.existing_anti_affinity_counts.is_empty());
    assert!(s.affinity_counts.is_empty());
    assert!(s.anti_affinity_counts.is_empty());
}

#[test]
fn a_pod_on_a_node_without_the_topology_key_changes_nothing() {
    let nodes = vec![
        node("nodeA", &[("zone", "z1")]),
        node("bare", &[("other", "x")]),
    ];
    let incoming = pod().name("p").anti_in("app", "zone", &["db"]).obj();
    let p = plugin();
    let store = MemoryState::default();
    seed(&p, &store, &incoming, &nodes, &[]);
    let before = read(&store);
    let other = pod().name("db").labels(&[("app", "db")]).node("bare").obj();
    let state = CycleState::new(&store);
    assert!(
        p.add_pod(&state, &incoming, &other, &info_of(&nodes, "bare"))
            .is_success()
    );
    assert_eq!(read(&store), before);
}

#[test]
fn without_pre_filter_state_the_extensions_are_an_error() {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let n = NodeInfo::new(Node::default());
    let want =
        Status::error("error reading \"PreFilterInterPodAffinity\" from cycleState: not found");
    assert_eq!(
        plugin().add_pod(&state, &Pod::default(), &Pod::default(), &n),
        want
    );
    assert_eq!(
        plugin().remove_pod(&state, &Pod::default(), &Pod::default(), &n),
        want
    );
}
