//! PreFilterExtensions: upstream's TestPreFilterStateAddPod and
//! TestPreFilterStateRemovePod (the NodeInclusionPolicy-enabled variants: the
//! feature is GA and Berth always applies the policies), Berth's own cases, and what
//! the updates mean to Filter in a what-if.

use super::*;

/// AddPod or RemovePod.
#[derive(Clone, Copy, Debug)]
enum Op {
    Add,
    Remove,
}

/// What one constraint's state should be: the number of eligible domains, the two
/// critical paths, and the counts of some domains.
struct Want {
    domains: u64,
    paths: [(&'static str, i64); 2],
    counts: Vec<(&'static str, i64)>,
}

const MAX: i64 = i32::MAX as i64;

fn want(domains: u64, paths: [(&'static str, i64); 2], counts: &[(&'static str, i64)]) -> Want {
    Want {
        domains,
        paths,
        counts: counts.to_vec(),
    }
}

/// Upstream's test comparer: two paths of equal counts compare in value order.
fn sorted(mut p: CriticalPaths) -> CriticalPaths {
    if p.0[0].match_num == p.0[1].match_num && p.0[0].value > p.0[1].value {
        p.0.swap(0, 1);
    }
    p
}

fn paths(p: [(&str, i64); 2]) -> CriticalPaths {
    CriticalPaths(p.map(|(value, match_num)| CriticalPath {
        value: value.into(),
        match_num,
    }))
}

/// PreFilter over `nodes` and `existing`, then the update of `other` on `node`.
fn run(
    plugin: &PodTopologySpread,
    op: Op,
    preemptor: &P,
    nodes: Vec<Node>,
    existing: Vec<P>,
    other: &P,
    node: &str,
) -> MemoryState {
    let infos = cluster(nodes, existing);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let pre = plugin.pre_filter(&state, &preemptor.0, &refs);
    assert!(pre.status.is_success(), "PreFilter: {:?}", pre.status);
    let info = infos.iter().find(|i| i.name() == node).unwrap();
    let status = match op {
        Op::Add => plugin.add_pod(&state, &preemptor.0, &other.0, info),
        Op::Remove => plugin.remove_pod(&state, &preemptor.0, &other.0, info),
    };
    assert!(status.is_success(), "{op:?}: {status:?}");
    store
}

fn check(name: &str, store: &MemoryState, wants: &[Want]) {
    let state = CycleState::new(store);
    let s: PreFilterState = state.read(PRE_FILTER_STATE_KEY).unwrap();
    assert_eq!(s.constraints.len(), wants.len(), "{name}");
    for (i, (c, w)) in s.constraints.iter().zip(wants).enumerate() {
        assert_eq!(c.domains, w.domains, "{name}: constraint {i} domains");
        assert_eq!(
            sorted(c.critical_paths.clone()),
            sorted(paths(w.paths)),
            "{name}: constraint {i} critical paths"
        );
        for (value, n) in &w.counts {
            let got = state
                .read::<i64>(&count_key(PRE_FILTER_STATE_KEY, i, value))
                .unwrap_or(0);
            assert_eq!(got, *n, "{name}: constraint {i} count of {value}");
        }
    }
}

fn on_node(p: P) -> P {
    p.spread(1, "node", DoNotSchedule, foo())
}

fn on_zone(p: P) -> P {
    p.spread(1, "zone", DoNotSchedule, foo())
}

fn zone_and_node() -> P {
    pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, foo())
        .spread(1, "node", DoNotSchedule, foo())
}

/// Nodes labelled `foo=bar` (node-a) and `foo=` (node-b), as upstream's node
/// inclusion cases.
fn foo_nodes() -> Vec<Node> {
    vec![
        node(
            "node-a",
            &[("zone", "zone1"), ("node", "node-a"), ("foo", "bar")],
        ),
        node(
            "node-b",
            &[("zone", "zone2"), ("node", "node-b"), ("foo", "")],
        ),
    ]
}

fn foo_pod(name: &str, node: &str, zone: &str) -> P {
    pod(name).on(node).label("foo", "").label("zone", zone)
}

#[test]
fn add_pod_as_upstream() {
    let p = list_plugin();
    let not_bar = || {
        on_zone(pod("p").label("foo", "")).node_affinity(
            "foo",
            NodeSelectorOperator::NotIn,
            &["bar"],
        )
    };
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, P, Vec<Node>, Vec<P>, P, &str, Vec<Want>)> = vec![
        (
            "node a and b both impact current min match",
            on_node(pod("p").label("foo", "")),
            vec![zn("node-a", "zone1"), zn("node-b", "zone1")],
            vec![],
            pod("p-a1").on("node-a").label("foo", ""),
            "node-a",
            vec![want(
                2,
                [("node-b", 0), ("node-a", 1)],
                &[("node-a", 1), ("node-b", 0)],
            )],
        ),
        (
            "only node a impacts current min match",
            on_node(pod("p").label("foo", "")),
            vec![zn("node-a", "zone1"), zn("node-b", "zone1")],
            vec![pod("p-b1").on("node-b").label("foo", "")],
            pod("p-a1").on("node-a").label("foo", ""),
            "node-a",
            vec![want(
                2,
                [("node-a", 1), ("node-b", 1)],
                &[("node-a", 1), ("node-b", 1)],
            )],
        ),
        (
            "add a pod in a different namespace doesn't change topologyKeyToMinPodsMap",
            on_node(pod("p").label("foo", "")),
            vec![zn("node-a", "zone1"), zn("node-b", "zone1")],
            vec![pod("p-b1").on("node-b").label("foo", "")],
            pod("p-a1").namespace("ns1").on("node-a").label("foo", ""),
            "node-a",
            vec![want(
                2,
                [("node-a", 0), ("node-b", 1)],
                &[("node-a", 0), ("node-b", 1)],
            )],
        ),
        (
            "add pod on non-critical node won't trigger re-calculation",
            on_node(pod("p").label("foo", "")),
            vec![zn("node-a", "zone1"), zn("node-b", "zone1")],
            vec![pod("p-b1").on("node-b").label("foo", "")],
            pod("p-b2").on("node-b").label("foo", ""),
            "node-b",
            vec![want(
                2,
                [("node-a", 0), ("node-b", 2)],
                &[("node-a", 0), ("node-b", 2)],
            )],
        ),
        (
            "node a and x both impact topologyKeyToMinPodsMap on zone and node",
            zone_and_node(),
            vec![zn("node-a", "zone1"), zn("node-x", "zone2")],
            vec![],
            pod("p-a1").on("node-a").label("foo", ""),
            "node-a",
            vec![
                want(
                    2,
                    [("zone2", 0), ("zone1", 1)],
                    &[("zone1", 1), ("zone2", 0)],
                ),
                want(
                    2,
                    [("node-x", 0), ("node-a", 1)],
                    &[("node-a", 1), ("node-x", 0)],
                ),
            ],
        ),
        (
            "only node a impacts topologyKeyToMinPodsMap on zone and node",
            zone_and_node(),
            vec![zn("node-a", "zone1"), zn("node-x", "zone2")],
            vec![pod("p-x1").on("node-x").label("foo", "")],
            pod("p-a1").on("node-a").label("foo", ""),
            "node-a",
            vec![
                want(
                    2,
                    [("zone1", 1), ("zone2", 1)],
                    &[("zone1", 1), ("zone2", 1)],
                ),
                want(
                    2,
                    [("node-a", 1), ("node-x", 1)],
                    &[("node-a", 1), ("node-x", 1)],
                ),
            ],
        ),
        (
            "node a impacts topologyKeyToMinPodsMap on node, node x impacts topologyKeyToMinPodsMap on zone",
            zone_and_node(),
            vec![
                zn("node-a", "zone1"),
                zn("node-b", "zone1"),
                zn("node-x", "zone2"),
            ],
            vec![
                pod("p-b1").on("node-b").label("foo", ""),
                pod("p-b2").on("node-b").label("foo", ""),
                pod("p-x1").on("node-x").label("foo", ""),
            ],
            pod("p-a1").on("node-a").label("foo", ""),
            "node-a",
            vec![
                want(
                    2,
                    [("zone2", 1), ("zone1", 3)],
                    &[("zone1", 3), ("zone2", 1)],
                ),
                want(
                    3,
                    [("node-a", 1), ("node-x", 1)],
                    &[("node-a", 1), ("node-b", 2), ("node-x", 1)],
                ),
            ],
        ),
        (
            "Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on zone",
            pod("p")
                .label("foo", "")
                .label("bar", "")
                .spread(1, "zone", DoNotSchedule, foo())
                .spread(1, "node", DoNotSchedule, bar()),
            vec![
                zn("node-a", "zone1"),
                zn("node-b", "zone1"),
                zn("node-x", "zone2"),
            ],
            vec![
                pod("p-b1").on("node-b").label("foo", "").label("bar", ""),
                pod("p-x1").on("node-x").label("foo", "").label("bar", ""),
                pod("p-x2").on("node-x").label("bar", ""),
            ],
            pod("p-a1").on("node-a").label("foo", ""),
            "node-a",
            vec![
                want(
                    2,
                    [("zone2", 1), ("zone1", 2)],
                    &[("zone1", 2), ("zone2", 1)],
                ),
                want(
                    3,
                    [("node-a", 0), ("node-b", 1)],
                    &[("node-a", 0), ("node-b", 1), ("node-x", 2)],
                ),
            ],
        ),
        (
            "Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on both zone and node",
            pod("p")
                .label("foo", "")
                .label("bar", "")
                .spread(1, "zone", DoNotSchedule, foo())
                .spread(1, "node", DoNotSchedule, bar()),
            vec![
                zn("node-a", "zone1"),
                zn("node-b", "zone1"),
                zn("node-x", "zone2"),
            ],
            vec![
                pod("p-b1").on("node-b").label("bar", ""),
                pod("p-x1").on("node-x").label("foo", "").label("bar", ""),
                pod("p-x2").on("node-x").label("bar", ""),
            ],
            pod("p-a1").on("node-a").label("foo", "").label("bar", ""),
            "node-a",
            vec![
                want(
                    2,
                    [("zone1", 1), ("zone2", 1)],
                    &[("zone1", 1), ("zone2", 1)],
                ),
                want(
                    3,
                    [("node-a", 1), ("node-b", 1)],
                    &[("node-a", 1), ("node-b", 1), ("node-x", 2)],
                ),
            ],
        ),
        (
            "add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled",
            not_bar(),
            foo_nodes(),
            vec![
                foo_pod("p-a2", "node-a", "zone1"),
                foo_pod("p-b1", "node-b", "zone2"),
            ],
            foo_pod("p-a1", "node-a", "zone1"),
            "node-a",
            vec![want(
                1,
                [("zone2", 1), ("", MAX)],
                &[("zone1", 0), ("zone2", 1)],
            )],
        ),
        (
            "add a pod when scheduling node affinity matched pod with NodeInclusionPolicy enabled",
            on_zone(pod("p").label("foo", "")),
            foo_nodes(),
            vec![
                foo_pod("p-a1", "node-a", "zone1"),
                foo_pod("p-b2", "node-b", "zone2"),
            ],
            foo_pod("p-b1", "node-b", "zone2"),
            "node-b",
            vec![want(
                2,
                [("zone1", 1), ("zone2", 2)],
                &[("zone1", 1), ("zone2", 2)],
            )],
        ),
        (
            "add a label selector not matched pod when with NodeInclusionPolicy enabled",
            on_zone(pod("p").label("foo", "")),
            foo_nodes(),
            vec![
                foo_pod("p-a1", "node-a", "zone1"),
                foo_pod("p-b2", "node-b", "zone2"),
            ],
            pod("p-b1").on("node-b").label("zone", "zone2"),
            "node-b",
            vec![want(
                2,
                [("zone1", 1), ("zone2", 1)],
                &[("zone1", 1), ("zone2", 1)],
            )],
        ),
        (
            "add a pod when scheduling taint tolerated pod with NodeInclusionPolicy enabled",
            on_zone(
                pod("p")
                    .label("foo", "")
                    .tolerate("node.kubernetes.io/unschedulable"),
            ),
            vec![tainted(zn("node-a", "zone1")), zn("node-b", "zone2")],
            vec![
                foo_pod("p-a1", "node-a", "zone1"),
                foo_pod("p-b2", "node-b", "zone2"),
            ],
            foo_pod("p-b1", "node-b", "zone2"),
            "node-b",
            vec![want(
                2,
                [("zone1", 1), ("zone2", 2)],
                &[("zone1", 1), ("zone2", 2)],
            )],
        ),
    ];
    for (name, preemptor, nodes, existing, added, node, wants) in cases {
        let store = run(&p, Op::Add, &preemptor, nodes, existing, &added, node);
        check(name, &store, &wants);
    }
}

#[test]
fn remove_pod_as_upstream() {
    let p = list_plugin();
    let abx = || {
        vec![
            zn("node-a", "zone1"),
            zn("node-b", "zone1"),
            zn("node-x", "zone2"),
        ]
    };
    let abxy = || {
        vec![
            zn("node-a", "zone1"),
            zn("node-b", "zone1"),
            zn("node-x", "zone2"),
            zn("node-y", "zone2"),
        ]
    };
    let foo_on = |name: &str, node: &str| pod(name).on(node).label("foo", "");
    let preemptor = || on_zone(pod("p").label("foo", ""));
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, P, Vec<Node>, Vec<P>, P, &str, Vec<Want>)> = vec![
        (
            "one spreadConstraint on zone, topologyKeyToMinPodsMap unchanged",
            preemptor(),
            abx(),
            vec![
                foo_on("p-a1", "node-a"),
                foo_on("p-b1", "node-b"),
                foo_on("p-x1", "node-x"),
            ],
            foo_on("p-a1", "node-a"),
            "node-a",
            vec![want(
                2,
                [("zone1", 1), ("zone2", 1)],
                &[("zone1", 1), ("zone2", 1)],
            )],
        ),
        (
            "one spreadConstraint on node, topologyKeyToMinPodsMap changed",
            preemptor(),
            abxy(),
            vec![
                foo_on("p-a1", "node-a"),
                foo_on("p-b1", "node-b"),
                foo_on("p-x1", "node-x"),
                foo_on("p-y1", "node-y"),
            ],
            foo_on("p-a1", "node-a"),
            "node-a",
            vec![want(
                2,
                [("zone1", 1), ("zone2", 2)],
                &[("zone1", 1), ("zone2", 2)],
            )],
        ),
        (
            "delete an irrelevant pod won't help",
            preemptor(),
            abxy(),
            vec![
                pod("p-a0").on("node-a").label("bar", ""),
                foo_on("p-a1", "node-a"),
                foo_on("p-b1", "node-b"),
                foo_on("p-x1", "node-x"),
                foo_on("p-y1", "node-y"),
            ],
            pod("p-a0").on("node-a").label("bar", ""),
            "node-a",
            vec![want(
                2,
                [("zone1", 2), ("zone2", 2)],
                &[("zone1", 2), ("zone2", 2)],
            )],
        ),
        (
            "delete a non-existing pod won't help",
            preemptor(),
            abxy(),
            vec![
                foo_on("p-a1", "node-a"),
                foo_on("p-b1", "node-b"),
                foo_on("p-x1", "node-x"),
                foo_on("p-y1", "node-y"),
            ],
            pod("p-a0").on("node-a").label("bar", ""),
            "node-a",
            vec![want(
                2,
                [("zone1", 2), ("zone2", 2)],
                &[("zone1", 2), ("zone2", 2)],
            )],
        ),
        (
            "two spreadConstraints",
            zone_and_node(),
            abx(),
            vec![
                foo_on("p-a1", "node-a"),
                foo_on("p-a2", "node-a"),
                foo_on("p-b1", "node-b"),
                foo_on("p-x1", "node-x"),
                foo_on("p-x2", "node-x"),
            ],
            foo_on("p-x1", "node-x"),
            "node-x",
            vec![
                want(
                    2,
                    [("zone2", 1), ("zone1", 3)],
                    &[("zone1", 3), ("zone2", 1)],
                ),
                want(
                    3,
                    [("node-b", 1), ("node-x", 1)],
                    &[("node-a", 2), ("node-b", 1), ("node-x", 1)],
                ),
            ],
        ),
        (
            "remove a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled",
            on_zone(pod("p").label("foo", "")).node_affinity(
                "foo",
                NodeSelectorOperator::NotIn,
                &["bar"],
            ),
            foo_nodes(),
            vec![
                foo_pod("p-a2", "node-a", "zone1"),
                foo_pod("p-b1", "node-b", "zone2"),
            ],
            foo_pod("p-a1", "node-a", "zone1"),
            "node-a",
            vec![want(
                1,
                [("zone2", 1), ("", MAX)],
                &[("zone1", 0), ("zone2", 1)],
            )],
        ),
        (
            "remove a pod when scheduling node affinity matched pod with NodeInclusionPolicy enabled",
            preemptor(),
            foo_nodes(),
            vec![
                foo_pod("p-a1", "node-a", "zone1"),
                foo_pod("p-b2", "node-b", "zone2"),
            ],
            foo_pod("p-b1", "node-b", "zone2"),
            "node-b",
            vec![want(
                2,
                [("zone2", 0), ("zone1", 1)],
                &[("zone1", 1), ("zone2", 0)],
            )],
        ),
    ];
    for (name, preemptor, nodes, existing, removed, node, wants) in cases {
        let store = run(&p, Op::Remove, &preemptor, nodes, existing, &removed, node);
        check(name, &store, &wants);
    }
}

#[test]
fn pods_and_nodes_that_change_nothing() {
    let p = list_plugin();
    let nodes = || {
        vec![
            zn("node-a", "zone1"),
            zn("node-b", "zone2"),
            // No "node" label: not a domain of the two constraints.
            node("bare", &[("zone", "zone1")]),
            tainted(zn("node-t", "zone3")),
        ]
    };
    let existing = || vec![pod("p-b1").on("node-b").label("foo", "")];
    let unchanged = || {
        vec![
            want(
                3,
                [("zone1", 0), ("zone3", 0)],
                &[("zone1", 0), ("zone2", 1)],
            ),
            want(
                3,
                [("node-a", 0), ("node-t", 0)],
                &[("node-a", 0), ("node-b", 1)],
            ),
        ]
    };
    for op in [Op::Add, Op::Remove] {
        let cases = [
            (
                "a node without every topology key",
                pod("x").on("bare").label("foo", ""),
                "bare",
            ),
            (
                "a terminating pod (PreFilter does not count it)",
                pod("x").on("node-a").label("foo", "").terminating(),
                "node-a",
            ),
            (
                "a pod of another namespace",
                pod("x").namespace("other").on("node-a").label("foo", ""),
                "node-a",
            ),
            (
                "a pod the selector does not match",
                pod("x").on("node-a").label("bar", ""),
                "node-a",
            ),
        ];
        for (name, other, node) in cases {
            let store = run(&p, op, &zone_and_node(), nodes(), existing(), &other, node);
            check(&format!("{op:?} {name}"), &store, &unchanged());
        }
    }
    // nodeTaintsPolicy Honor: the tainted node is no domain, and a pod on it does
    // not count.
    let honor = pod("p")
        .label("foo", "")
        .spread_with(1, "zone", DoNotSchedule, foo(), |c| {
            c.node_taints_policy = Some(Honor);
        });
    let store = run(
        &p,
        Op::Add,
        &honor,
        nodes(),
        existing(),
        &pod("x").on("node-t").label("foo", ""),
        "node-t",
    );
    check(
        "a node whose taints the pod does not tolerate",
        &store,
        &[want(2, [("zone1", 0), ("zone2", 1)], &[("zone3", 0)])],
    );
    // Tolerated, it counts.
    let store = run(
        &p,
        Op::Add,
        &honor.tolerate("node.kubernetes.io/unschedulable"),
        nodes(),
        existing(),
        &pod("x").on("node-t").label("foo", ""),
        "node-t",
    );
    check(
        "a node whose taints the pod tolerates",
        &store,
        // Upstream's paths: zone3 (0) was the second path and stays there with 1; the
        // second path need not be the second smallest.
        &[want(3, [("zone1", 0), ("zone3", 1)], &[("zone3", 1)])],
    );
}

#[test]
fn add_then_remove_restores_the_state() {
    let p = list_plugin();
    let infos = cluster(
        vec![
            zn("node-a", "zone1"),
            zn("node-b", "zone1"),
            zn("node-x", "zone2"),
        ],
        vec![
            pod("p-a1").on("node-a").label("foo", ""),
            pod("p-x1").on("node-x").label("foo", ""),
        ],
    );
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let preemptor = zone_and_node();
    assert!(
        p.pre_filter(&state, &preemptor.0, &refs)
            .status
            .is_success()
    );
    let before: PreFilterState = state.read(PRE_FILTER_STATE_KEY).unwrap();
    let other = pod("p-b1").on("node-b").label("foo", "");
    assert!(
        p.add_pod(&state, &preemptor.0, &other.0, &infos[1])
            .is_success()
    );
    assert_ne!(
        state.read::<PreFilterState>(PRE_FILTER_STATE_KEY),
        Some(before.clone())
    );
    assert!(
        p.remove_pod(&state, &preemptor.0, &other.0, &infos[1])
            .is_success()
    );
    let after: PreFilterState = state.read(PRE_FILTER_STATE_KEY).unwrap();
    for (a, b) in after.constraints.iter().zip(&before.constraints) {
        assert_eq!(
            sorted(a.critical_paths.clone()),
            sorted(b.critical_paths.clone())
        );
        assert_eq!(a.domains, b.domains);
    }
}

/// Upstream's TestDryRunPreemption "preemption to resolve pod topology spread filter
/// failure", at the plugin: Filter on the copy of node-a as its lower-priority pods
/// are removed and the more important one is reprieved.
#[test]
fn removing_pods_of_the_crowded_domain_makes_room() {
    let p = list_plugin();
    let preemptor = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, foo())
        .spread(1, "node", DoNotSchedule, foo());
    let infos = cluster(
        vec![
            zn("node-a", "zone1"),
            zn("node-b", "zone1"),
            zn("node-x", "zone2"),
        ],
        vec![
            pod("pod-a1").on("node-a").label("foo", ""),
            pod("pod-a2").on("node-a").label("foo", ""),
            pod("pod-b1").on("node-b").label("foo", ""),
            pod("pod-x1").on("node-x").label("foo", ""),
            pod("pod-x2").on("node-x").label("foo", ""),
        ],
    );
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    assert!(
        p.pre_filter(&state, &preemptor.0, &refs)
            .status
            .is_success()
    );
    let node_a = &infos[0];
    let filter = |s: &CycleState| p.filter(s, &preemptor.0, node_a).code;
    assert_eq!(filter(&state), NO);
    let a1 = &node_a.pods[0];
    let a2 = &node_a.pods[1];
    for victim in [a1, a2] {
        assert!(
            p.remove_pod(&state, &preemptor.0, victim, node_a)
                .is_success()
        );
    }
    assert_eq!(filter(&state), OK);
    // pod-a1 (more important) is reprieved; pod-a2 then cannot be.
    assert!(p.add_pod(&state, &preemptor.0, a1, node_a).is_success());
    assert_eq!(filter(&state), OK);
    assert!(p.add_pod(&state, &preemptor.0, a2, node_a).is_success());
    assert_eq!(filter(&state), NO);
}

/// A pod nominated to node-a counts there for a later pod of the same spread.
#[test]
fn an_added_pod_fills_its_domain() {
    let p = list_plugin();
    let incoming = on_node(pod("p").label("foo", ""));
    let infos = cluster(vec![zn("node-a", "zone1"), zn("node-b", "zone1")], vec![]);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    assert!(p.pre_filter(&state, &incoming.0, &refs).status.is_success());
    let nominated = pod("n").on("node-a").label("foo", "");
    assert!(
        p.add_pod(&state, &incoming.0, &nominated.0, &infos[0])
            .is_success()
    );
    assert_eq!(p.filter(&state, &incoming.0, &infos[0]).code, NO);
    assert_eq!(p.filter(&state, &incoming.0, &infos[1]).code, OK);
}

#[test]
fn without_pre_filter_state_the_extensions_are_an_error() {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let n = NodeInfo::new(Node::default());
    let want = Status::error("reading \"PreFilterPodTopologySpread\" from cycleState: not found");
    let p = list_plugin();
    assert_eq!(
        p.add_pod(&state, &Pod::default(), &Pod::default(), &n),
        want
    );
    assert_eq!(
        p.remove_pod(&state, &Pod::default(), &Pod::default(), &n),
        want
    );
}
