//! The cases of upstream's filtering_test.go (PreFilterExtensions among them) and
//! scoring_test.go, run natively.

mod extension_cases;

use std::collections::BTreeMap;

use super::*;
use crate::scoring::{IGNORED_SCORE, PRE_SCORE_STATE_KEY, topology_normalizing_weight};
use berth_sdk::types::{
    LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, NodeAffinity,
    NodeInclusionPolicy, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm,
};
use berth_sdk::{
    Code, Labels, MemoryState, Node, NormalizeScore, PreScore, Score, Taint, TaintEffect,
    Toleration, TolerationOperator,
};

use NodeInclusionPolicy::{Honor, Ignore};
use WhenUnsatisfiable::{DoNotSchedule, ScheduleAnyway};

const HOSTNAME: &str = LABEL_HOSTNAME;

fn exists(key: &str) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: Labels::new(),
        match_expressions: vec![LabelSelectorRequirement {
            key: key.into(),
            operator: LabelSelectorOperator::Exists,
            values: vec![],
        }],
    })
}

fn label_is(key: &str, value: &str) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: [(key.to_owned(), value.to_owned())].into(),
        match_expressions: vec![],
    })
}

fn foo() -> Option<LabelSelector> {
    exists("foo")
}

fn bar() -> Option<LabelSelector> {
    exists("bar")
}

/// A pod under construction, as upstream's `st.MakePod()`.
struct P(Pod);

fn pod(name: &str) -> P {
    P(Pod {
        uid: name.into(),
        name: name.into(),
        namespace: "default".into(),
        ..Pod::default()
    })
}

impl P {
    fn label(mut self, k: &str, v: &str) -> P {
        self.0.labels.insert(k.into(), v.into());
        self
    }
    fn namespace(mut self, ns: &str) -> P {
        self.0.namespace = ns.into();
        self
    }
    fn on(mut self, node: &str) -> P {
        self.0.node_name = node.into();
        self
    }
    fn terminating(mut self) -> P {
        self.0.terminating = true;
        self
    }
    fn node_selector(mut self, k: &str, v: &str) -> P {
        self.0.node_selector.insert(k.into(), v.into());
        self
    }
    fn node_affinity(mut self, key: &str, op: NodeSelectorOperator, values: &[&str]) -> P {
        self.0.affinity.node_affinity = Some(NodeAffinity {
            required: Some(vec![NodeSelectorTerm {
                match_expressions: vec![NodeSelectorRequirement {
                    key: key.into(),
                    operator: op,
                    values: values.iter().map(|v| (*v).into()).collect(),
                }],
                match_fields: vec![],
            }]),
            preferred: vec![],
        });
        self
    }
    fn tolerate(mut self, key: &str) -> P {
        self.0.tolerations.push(Toleration {
            key: key.into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoSchedule),
            toleration_seconds: None,
        });
        self
    }
    fn spread(
        self,
        max_skew: i32,
        key: &str,
        when: WhenUnsatisfiable,
        sel: Option<LabelSelector>,
    ) -> P {
        self.spread_with(max_skew, key, when, sel, |_| {})
    }
    fn spread_with(
        mut self,
        max_skew: i32,
        key: &str,
        when: WhenUnsatisfiable,
        sel: Option<LabelSelector>,
        edit: impl FnOnce(&mut TopologySpreadConstraint),
    ) -> P {
        let mut c = TopologySpreadConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: when,
            label_selector: sel,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: vec![],
        };
        edit(&mut c);
        self.0.topology_spread_constraints.push(c);
        self
    }
    fn default_selector(mut self, sel: Option<LabelSelector>) -> P {
        self.0.default_selector = sel;
        self
    }
}

/// A node named `name` with labels.
fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        ..Node::default()
    }
}

/// A node with zone and node labels, as most upstream cases use.
fn zn(name: &str, zone: &str) -> Node {
    node(name, &[("zone", zone), ("node", name)])
}

/// The node.kubernetes.io/unschedulable:NoSchedule taint of upstream's tests.
fn tainted(mut n: Node) -> Node {
    n.taints.push(Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    n
}

/// The snapshot: nodes with the existing pods placed on them.
fn cluster(nodes: Vec<Node>, pods: Vec<P>) -> Vec<NodeInfo> {
    let mut infos: Vec<NodeInfo> = nodes.into_iter().map(NodeInfo::new).collect();
    for P(p) in pods {
        let info = infos
            .iter_mut()
            .find(|i| i.name() == p.node_name)
            .expect("pod on an unknown node");
        info.add_pod(&p);
    }
    infos
}

fn list_plugin() -> PodTopologySpread {
    PodTopologySpread::with_args(SpreadArgs {
        defaulting_type: DefaultingType::List,
        default_constraints: vec![],
    })
}

fn system_plugin() -> PodTopologySpread {
    PodTopologySpread::with_args(SpreadArgs::default())
}

/// PreFilter, then Filter on every node: what the host runs.
fn filter_with(plugin: &PodTopologySpread, p: &P, infos: &[NodeInfo]) -> Vec<(String, Status)> {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let pre = plugin.pre_filter(&state, &p.0, &refs);
    assert!(pre.status.is_success(), "PreFilter: {:?}", pre.status);
    assert_eq!(pre.node_names, None);
    infos
        .iter()
        .map(|n| (n.name().to_owned(), plugin.filter(&state, &p.0, n)))
        .collect()
}

/// Filter codes per node, with the list-defaulting plugin.
fn codes(p: &P, infos: &[NodeInfo]) -> BTreeMap<String, Code> {
    filter_with(&list_plugin(), p, infos)
        .into_iter()
        .map(|(n, s)| (n, s.code))
        .collect()
}

fn want(pairs: &[(&str, Code)]) -> BTreeMap<String, Code> {
    pairs.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect()
}

use Code::{Success as OK, Unschedulable as NO, UnschedulableAndUnresolvable as NEVER};

/// PreFilter's counts per constraint, sorted for comparison.
fn prefilter_counts(
    plugin: &PodTopologySpread,
    p: &P,
    infos: &[NodeInfo],
) -> Vec<BTreeMap<String, i64>> {
    let constraints = plugin.constraints(&p.0, DoNotSchedule);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    count_matching_pods(&p.0, &constraints, &refs)
        .into_iter()
        .map(|m| m.into_iter().collect())
        .collect()
}

fn domains(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// PreScore over `feasible` (all nodes counted), Score on each, NormalizeScore.
fn scores_with(
    plugin: &PodTopologySpread,
    p: &P,
    infos: &[NodeInfo],
    feasible: &[&str],
) -> Vec<i64> {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let all: Vec<&NodeInfo> = infos.iter().collect();
    let nodes: Vec<&NodeInfo> = feasible
        .iter()
        .map(|f| *all.iter().find(|n| n.name() == *f).unwrap())
        .collect();
    let status = plugin.pre_score(&state, &p.0, &nodes, &all);
    if status.code == Code::Skip {
        return vec![0; nodes.len()];
    }
    assert!(status.is_success(), "PreScore: {status:?}");
    let mut scores: Vec<i64> = nodes
        .iter()
        .map(|n| plugin.score(&state, &p.0, n).unwrap())
        .collect();
    assert!(
        plugin
            .normalize_score(&state, &p.0, &mut scores)
            .is_success()
    );
    scores
}

/// Scores with upstream's score-test setup (system defaulting), every node feasible.
fn scores(p: &P, infos: &[NodeInfo]) -> Vec<i64> {
    let names: Vec<&str> = infos.iter().map(|n| n.name()).collect();
    scores_with(&system_plugin(), p, infos, &names)
}

// ---- TestPreFilterState ----

#[test]
fn prefilter_clean_cluster_counts_every_domain() {
    let p = pod("p")
        .label("foo", "")
        .spread(5, "zone", DoNotSchedule, label_is("foo", "bar"));
    let infos = cluster(
        vec![
            zn("node-a", "zone1"),
            zn("node-b", "zone1"),
            zn("node-x", "zone2"),
            zn("node-y", "zone2"),
        ],
        vec![],
    );
    assert_eq!(
        prefilter_counts(&list_plugin(), &p, &infos),
        [domains(&[("zone1", 0), ("zone2", 0)])]
    );
}

fn five_pods() -> Vec<P> {
    vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-a2").on("node-a").label("foo", ""),
        pod("p-b1").on("node-b").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", ""),
        pod("p-y2").on("node-y").label("foo", ""),
    ]
}

fn four_nodes() -> Vec<Node> {
    vec![
        zn("node-a", "zone1"),
        zn("node-b", "zone1"),
        zn("node-x", "zone2"),
        zn("node-y", "zone2"),
    ]
}

#[test]
fn prefilter_normal_case_and_three_zones() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, foo());
    let infos = cluster(four_nodes(), five_pods());
    let counts = prefilter_counts(&list_plugin(), &p, &infos);
    assert_eq!(counts, [domains(&[("zone1", 3), ("zone2", 2)])]);
    let paths = critical_paths(&counts[0].clone().into_iter().collect());
    assert_eq!(
        paths,
        CriticalPaths([
            CriticalPath {
                value: "zone2".into(),
                match_num: 2
            },
            CriticalPath {
                value: "zone1".into(),
                match_num: 3
            },
        ])
    );

    let mut nodes = four_nodes();
    nodes.extend([zn("node-o", "zone3"), zn("node-p", "zone3")]);
    let counts = prefilter_counts(&list_plugin(), &p, &cluster(nodes, five_pods()));
    assert_eq!(
        counts,
        [domains(&[("zone1", 3), ("zone2", 2), ("zone3", 0)])]
    );
}

#[test]
fn prefilter_null_selector_counts_nothing() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, None);
    let counts = prefilter_counts(&list_plugin(), &p, &cluster(four_nodes(), five_pods()));
    assert_eq!(counts, [domains(&[("zone1", 0), ("zone2", 0)])]);
}

#[test]
fn prefilter_other_namespaces_do_not_count() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, foo());
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-a2").on("node-a").namespace("ns1").label("foo", ""),
        pod("p-b1").on("node-b").label("foo", ""),
        pod("p-y1").on("node-y").namespace("ns2").label("foo", ""),
        pod("p-y2").on("node-y").label("foo", ""),
    ];
    let counts = prefilter_counts(&list_plugin(), &p, &cluster(four_nodes(), pods));
    assert_eq!(counts, [domains(&[("zone1", 2), ("zone2", 1)])]);
}

fn seven_pods() -> Vec<P> {
    let mut pods = five_pods();
    pods.push(pod("p-y3").on("node-y").label("foo", ""));
    pods.push(pod("p-y4").on("node-y").label("foo", ""));
    pods
}

#[test]
fn prefilter_two_constraints_and_soft_ones_bypassed() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", ScheduleAnyway, foo())
        .spread(1, "zone", DoNotSchedule, foo())
        .spread(1, "node", ScheduleAnyway, foo())
        .spread(1, "node", DoNotSchedule, foo());
    let counts = prefilter_counts(&list_plugin(), &p, &cluster(four_nodes(), seven_pods()));
    assert_eq!(
        counts,
        [
            domains(&[("zone1", 3), ("zone2", 4)]),
            domains(&[("node-a", 2), ("node-b", 1), ("node-x", 0), ("node-y", 4)]),
        ]
    );
}

#[test]
fn prefilter_different_selectors() {
    let p = pod("p")
        .label("foo", "")
        .label("bar", "")
        .spread(1, "zone", DoNotSchedule, foo())
        .spread(1, "node", DoNotSchedule, bar());
    let nodes = vec![
        zn("node-a", "zone1"),
        zn("node-b", "zone1"),
        zn("node-y", "zone2"),
    ];
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-a2").on("node-a").label("foo", "").label("bar", ""),
        pod("p-b1").on("node-b").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", ""),
        pod("p-y2").on("node-y").label("foo", "").label("bar", ""),
        pod("p-y3").on("node-y").label("foo", ""),
        pod("p-y4").on("node-y").label("foo", "").label("bar", ""),
    ];
    let counts = prefilter_counts(&list_plugin(), &p, &cluster(nodes, pods));
    assert_eq!(
        counts,
        [
            domains(&[("zone1", 3), ("zone2", 4)]),
            domains(&[("node-a", 1), ("node-b", 0), ("node-y", 2)]),
        ]
    );
}

#[test]
fn prefilter_node_affinity_excludes_nodes() {
    let p = pod("p")
        .label("foo", "")
        .node_affinity("node", NodeSelectorOperator::NotIn, &["node-x"])
        .spread(1, "zone", DoNotSchedule, foo())
        .spread(1, "node", DoNotSchedule, foo());
    let counts = prefilter_counts(&list_plugin(), &p, &cluster(four_nodes(), seven_pods()));
    assert_eq!(
        counts,
        [
            domains(&[("zone1", 3), ("zone2", 4)]),
            domains(&[("node-a", 2), ("node-b", 1), ("node-y", 4)]),
        ]
    );
}

fn policy_nodes() -> Vec<Node> {
    vec![
        node("node-a", &[("node", "node-a"), ("foo", "")]),
        node("node-b", &[("node", "node-b"), ("foo", "")]),
        node("node-c", &[("node", "node-c"), ("bar", "")]),
    ]
}

fn policy_pods() -> Vec<P> {
    vec![
        pod("p-a").on("node-a").label("bar", ""),
        pod("p-b").on("node-b").label("bar", ""),
        pod("p-c").on("node-b").label("bar", ""),
        pod("p-d").on("node-c"),
    ]
}

#[test]
fn prefilter_node_affinity_policy() {
    let honored =
        pod("p")
            .label("foo", "")
            .node_selector("foo", "")
            .spread(1, "node", DoNotSchedule, bar());
    assert_eq!(
        prefilter_counts(
            &list_plugin(),
            &honored,
            &cluster(policy_nodes(), policy_pods())
        ),
        [domains(&[("node-a", 1), ("node-b", 2)])]
    );
    let ignored = pod("p")
        .label("foo", "")
        .node_selector("foo", "")
        .spread_with(1, "node", DoNotSchedule, bar(), |c| {
            c.node_affinity_policy = Some(Ignore)
        });
    assert_eq!(
        prefilter_counts(
            &list_plugin(),
            &ignored,
            &cluster(policy_nodes(), policy_pods())
        ),
        [domains(&[("node-a", 1), ("node-b", 2), ("node-c", 0)])]
    );
    let honored = pod("p")
        .label("foo", "")
        .node_affinity("foo", NodeSelectorOperator::In, &[""])
        .spread(1, "node", DoNotSchedule, bar());
    assert_eq!(
        prefilter_counts(
            &list_plugin(),
            &honored,
            &cluster(policy_nodes(), policy_pods())
        ),
        [domains(&[("node-a", 1), ("node-b", 2)])]
    );
    let ignored = pod("p")
        .label("foo", "")
        .node_affinity("foo", NodeSelectorOperator::In, &[""])
        .spread_with(1, "node", DoNotSchedule, bar(), |c| {
            c.node_affinity_policy = Some(Ignore)
        });
    assert_eq!(
        prefilter_counts(
            &list_plugin(),
            &ignored,
            &cluster(policy_nodes(), policy_pods())
        ),
        [domains(&[("node-a", 1), ("node-b", 2), ("node-c", 0)])]
    );
}

fn taint_nodes() -> Vec<Node> {
    vec![
        node("node-a", &[("node", "node-a")]),
        node("node-b", &[("node", "node-b")]),
        tainted(node("node-c", &[("node", "node-c"), ("bar", "")])),
    ]
}

#[test]
fn prefilter_node_taints_policy() {
    let ignored = pod("p")
        .label("foo", "")
        .spread(1, "node", DoNotSchedule, bar());
    assert_eq!(
        prefilter_counts(
            &list_plugin(),
            &ignored,
            &cluster(taint_nodes(), policy_pods())
        ),
        [domains(&[("node-a", 1), ("node-b", 2), ("node-c", 0)])]
    );
    let honored = pod("p")
        .label("foo", "")
        .spread_with(1, "node", DoNotSchedule, bar(), |c| {
            c.node_taints_policy = Some(Honor)
        });
    assert_eq!(
        prefilter_counts(
            &list_plugin(),
            &honored,
            &cluster(taint_nodes(), policy_pods())
        ),
        [domains(&[("node-a", 1), ("node-b", 2)])]
    );
    // A tolerated taint keeps the node in.
    let tolerating = pod("p")
        .label("foo", "")
        .tolerate("node.kubernetes.io/unschedulable")
        .spread_with(1, "node", DoNotSchedule, bar(), |c| {
            c.node_taints_policy = Some(Honor)
        });
    assert_eq!(
        prefilter_counts(
            &list_plugin(),
            &tolerating,
            &cluster(taint_nodes(), policy_pods())
        ),
        [domains(&[("node-a", 1), ("node-b", 2), ("node-c", 0)])]
    );
}

#[test]
fn prefilter_two_constraints_with_mixed_policies() {
    // zone: honor/ignore, node: ignore/ignore
    let p = pod("p")
        .label("foo", "")
        .node_selector("foo", "")
        .spread(1, "zone", DoNotSchedule, foo())
        .spread_with(1, "node", DoNotSchedule, foo(), |c| {
            c.node_affinity_policy = Some(Ignore)
        });
    let nodes = vec![
        node(
            "node-a",
            &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
        ),
        node("node-b", &[("zone", "zone1"), ("node", "node-b")]),
        node(
            "node-x",
            &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
        ),
    ];
    let pods = || {
        vec![
            pod("p-b1").on("node-b").label("foo", ""),
            pod("p-b2").on("node-b").label("foo", ""),
            pod("p-x1").on("node-x").label("foo", ""),
        ]
    };
    assert_eq!(
        prefilter_counts(&list_plugin(), &p, &cluster(nodes, pods())),
        [
            domains(&[("zone1", 0), ("zone2", 1)]),
            domains(&[("node-a", 0), ("node-b", 2), ("node-x", 1)]),
        ]
    );
    // zone: ignore/ignore, node: honor/honor
    let p = pod("p")
        .label("foo", "")
        .node_selector("foo", "")
        .spread_with(1, "zone", DoNotSchedule, foo(), |c| {
            c.node_affinity_policy = Some(Ignore)
        })
        .spread_with(1, "node", DoNotSchedule, foo(), |c| {
            c.node_taints_policy = Some(Honor)
        });
    let nodes = vec![
        node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
        tainted(node(
            "node-b",
            &[("zone", "zone1"), ("node", "node-b"), ("foo", "")],
        )),
        node(
            "node-x",
            &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
        ),
        node(
            "node-y",
            &[("zone", "zone2"), ("node", "node-y"), ("foo", "")],
        ),
    ];
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-a2").on("node-a").label("foo", ""),
        pod("p-x1").on("node-x").label("foo", ""),
        pod("p-x2").on("node-x").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", ""),
    ];
    assert_eq!(
        prefilter_counts(&list_plugin(), &p, &cluster(nodes, pods)),
        [
            domains(&[("zone1", 2), ("zone2", 3)]),
            domains(&[("node-x", 2), ("node-y", 1)]),
        ]
    );
}

#[test]
fn prefilter_match_label_keys() {
    // ANDed with a non-empty selector.
    let p = pod("p").label("foo", "").label("bar", "a").spread_with(
        1,
        "zone",
        DoNotSchedule,
        foo(),
        |c| c.match_label_keys = vec!["bar".into()],
    );
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-a2").on("node-a").label("foo", "").label("bar", "a"),
        pod("p-b1").on("node-b").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", "").label("bar", "a"),
        pod("p-y2").on("node-y").label("bar", ""),
    ];
    assert_eq!(
        prefilter_counts(&list_plugin(), &p, &cluster(four_nodes(), pods)),
        [domains(&[("zone1", 1), ("zone2", 1)])]
    );
    let foo_a = || {
        vec![
            pod("p-a1").on("node-a").label("foo", "a"),
            pod("p-a2").on("node-a").label("foo", "a"),
            pod("p-b1").on("node-b").label("foo", "a"),
            pod("p-y1").on("node-y").label("foo", "a"),
            pod("p-y2").on("node-y").label("foo", "a"),
        ]
    };
    // ANDed with an empty selector.
    let p = pod("p").label("foo", "a").spread_with(
        1,
        "zone",
        DoNotSchedule,
        Some(LabelSelector::default()),
        |c| c.match_label_keys = vec!["foo".into()],
    );
    assert_eq!(
        prefilter_counts(&list_plugin(), &p, &cluster(four_nodes(), foo_a())),
        [domains(&[("zone1", 3), ("zone2", 2)])]
    );
    // A nil selector stays nil.
    let p = pod("p")
        .label("foo", "")
        .spread_with(1, "zone", DoNotSchedule, None, |c| {
            c.match_label_keys = vec!["bar".into()]
        });
    assert_eq!(
        prefilter_counts(&list_plugin(), &p, &cluster(four_nodes(), foo_a())),
        [domains(&[("zone1", 0), ("zone2", 0)])]
    );
    // Keys the pod has no label for are ignored.
    let p = pod("p")
        .label("foo", "")
        .spread_with(1, "zone", DoNotSchedule, foo(), |c| {
            c.match_label_keys = vec!["bar".into()]
        });
    assert_eq!(
        prefilter_counts(&list_plugin(), &p, &cluster(four_nodes(), foo_a())),
        [domains(&[("zone1", 3), ("zone2", 2)])]
    );
}

fn prefilter_code(plugin: &PodTopologySpread, p: &P) -> Code {
    let store = MemoryState::default();
    let infos = cluster(vec![zn("node-a", "zone1")], vec![]);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    plugin
        .pre_filter(&CycleState::new(&store), &p.0, &refs)
        .status
        .code
}

fn list_defaults(constraints: &[(i32, &str, WhenUnsatisfiable)]) -> PodTopologySpread {
    PodTopologySpread::with_args(SpreadArgs {
        defaulting_type: DefaultingType::List,
        default_constraints: constraints
            .iter()
            .map(|(max_skew, key, when)| TopologySpreadConstraint {
                max_skew: *max_skew,
                topology_key: (*key).into(),
                when_unsatisfiable: *when,
                label_selector: None,
                min_domains: None,
                node_affinity_policy: None,
                node_taints_policy: None,
                match_label_keys: vec![],
            })
            .collect(),
    })
}

#[test]
fn prefilter_default_constraints() {
    let plugin = list_defaults(&[
        (3, "node", DoNotSchedule),
        (2, "node", ScheduleAnyway),
        (5, "rack", DoNotSchedule),
    ]);
    // A Service selects foo=bar: the hard defaults apply with its selector.
    let p = pod("p")
        .label("foo", "bar")
        .label("baz", "kar")
        .default_selector(label_is("foo", "bar"));
    let constraints = plugin.constraints(&p.0, DoNotSchedule);
    assert_eq!(constraints.len(), 2);
    assert_eq!(
        (
            constraints[0].max_skew,
            constraints[0].topology_key.as_str()
        ),
        (3, "node")
    );
    assert_eq!(
        (
            constraints[1].max_skew,
            constraints[1].topology_key.as_str()
        ),
        (5, "rack")
    );
    assert!(
        constraints
            .iter()
            .all(|c| c.selector == label_is("foo", "bar"))
    );
    assert_eq!(prefilter_code(&plugin, &p), Code::Success);

    // Nothing selects the pod: no defaults, PreFilter skips.
    let p = pod("p").label("foo", "bar");
    assert_eq!(prefilter_code(&plugin, &p), Code::Skip);
    let p = pod("p")
        .label("foo", "bar")
        .default_selector(Some(LabelSelector::default()));
    assert_eq!(prefilter_code(&plugin, &p), Code::Skip);

    // The pod's own constraints win over the defaults.
    let p = pod("p")
        .label("foo", "bar")
        .label("baz", "tar")
        .default_selector(label_is("foo", "bar"))
        .spread(1, "zone", DoNotSchedule, label_is("baz", "tar"))
        .spread(2, "planet", ScheduleAnyway, label_is("fot", "rok"));
    let constraints = plugin.constraints(&p.0, DoNotSchedule);
    assert_eq!(constraints.len(), 1);
    assert_eq!(constraints[0].topology_key, "zone");
    assert_eq!(constraints[0].selector, label_is("baz", "tar"));

    // Only soft defaults: nothing to filter.
    let soft = list_defaults(&[(2, "node", ScheduleAnyway)]);
    let p = pod("p")
        .label("foo", "bar")
        .default_selector(label_is("foo", "bar"));
    assert_eq!(prefilter_code(&soft, &p), Code::Skip);
    // System defaults are all soft.
    assert_eq!(prefilter_code(&system_plugin(), &p), Code::Skip);
}

#[test]
fn prefilter_skips_without_constraints() {
    assert_eq!(
        prefilter_code(&list_plugin(), &pod("p").label("foo", "")),
        Code::Skip
    );
    // Soft constraints only.
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", ScheduleAnyway, foo());
    assert_eq!(prefilter_code(&list_plugin(), &p), Code::Skip);
}

#[test]
fn filter_without_prefilter_state_is_an_error() {
    let store = MemoryState::default();
    let infos = cluster(vec![zn("node-a", "zone1")], vec![]);
    let p = pod("p").spread(1, "zone", DoNotSchedule, foo());
    let status = list_plugin().filter(&CycleState::new(&store), &p.0, &infos[0]);
    assert_eq!(
        status,
        Status::error("reading \"PreFilterPodTopologySpread\" from cycleState: not found")
    );
}

// ---- TestSingleConstraint ----

#[test]
fn single_no_existing_pods() {
    let infos = cluster(four_nodes(), vec![]);
    let all_ok = want(&[
        ("node-a", OK),
        ("node-b", OK),
        ("node-x", OK),
        ("node-y", OK),
    ]);
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, foo());
    assert_eq!(codes(&p, &infos), all_ok);
    // The incoming pod doesn't match itself.
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, bar());
    assert_eq!(codes(&p, &infos), all_ok);
}

#[test]
fn single_other_namespaces_do_not_count() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, foo());
    let pods = vec![
        pod("p-a1").namespace("ns1").on("node-a").label("foo", ""),
        pod("p-b1").namespace("ns2").on("node-a").label("foo", ""),
        pod("p-x1").on("node-x").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", ""),
    ];
    assert_eq!(
        codes(&p, &cluster(four_nodes(), pods)),
        want(&[
            ("node-a", OK),
            ("node-b", OK),
            ("node-x", NO),
            ("node-y", NO)
        ])
    );
}

#[test]
fn single_null_selector_matches_nothing() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, None);
    let pods = vec![
        pod("p-x1").on("node-x").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", ""),
    ];
    assert_eq!(
        codes(&p, &cluster(four_nodes(), pods)),
        want(&[
            ("node-a", OK),
            ("node-b", OK),
            ("node-x", OK),
            ("node-y", OK)
        ])
    );
}

fn six_pods() -> Vec<P> {
    vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-a2").on("node-a").label("foo", ""),
        pod("p-b1").on("node-b").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", ""),
        pod("p-y2").on("node-y").label("foo", ""),
        pod("p-y3").on("node-y").label("foo", ""),
    ]
}

#[test]
fn single_zones_3_3_all_fit() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, foo());
    assert_eq!(
        codes(&p, &cluster(four_nodes(), six_pods())),
        want(&[
            ("node-a", OK),
            ("node-b", OK),
            ("node-x", OK),
            ("node-y", OK)
        ])
    );
}

#[test]
fn single_missing_zone_label() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, foo());
    let nodes = vec![
        zn("node-a", "zone1"),
        node("node-b", &[("zon", "zone1"), ("node", "node-b")]),
        zn("node-x", "zone2"),
        zn("node-y", "zone2"),
    ];
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-b1").on("node-b").label("foo", ""),
        pod("p-x1").on("node-x").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", ""),
    ];
    let infos = cluster(nodes, pods);
    assert_eq!(
        codes(&p, &infos),
        want(&[
            ("node-a", OK),
            ("node-b", NEVER),
            ("node-x", NO),
            ("node-y", NO)
        ])
    );
    let statuses = filter_with(&list_plugin(), &p, &infos);
    assert_eq!(
        statuses[1].1,
        Status::unresolvable(
            "node(s) didn't match pod topology spread constraints (missing required label)"
        )
    );
    assert_eq!(
        statuses[2].1,
        Status::unschedulable("node(s) didn't match pod topology spread constraints")
    );
}

#[test]
fn single_no_node_has_the_label() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "rack", DoNotSchedule, foo());
    let infos = cluster(vec![zn("node-a", "zone1"), zn("node-x", "zone2")], vec![]);
    assert_eq!(
        codes(&p, &infos),
        want(&[("node-a", NEVER), ("node-x", NEVER)])
    );
}

#[test]
fn single_nodes_2_1_0_3() {
    let infos = cluster(four_nodes(), six_pods());
    let p = pod("p")
        .label("foo", "")
        .spread(1, "node", DoNotSchedule, foo());
    assert_eq!(
        codes(&p, &infos),
        want(&[
            ("node-a", NO),
            ("node-b", NO),
            ("node-x", OK),
            ("node-y", NO)
        ])
    );
    let p = pod("p")
        .label("foo", "")
        .spread(2, "node", DoNotSchedule, foo());
    assert_eq!(
        codes(&p, &infos),
        want(&[
            ("node-a", NO),
            ("node-b", OK),
            ("node-x", OK),
            ("node-y", NO)
        ])
    );
    // The pod doesn't match itself, so placing it changes nothing.
    let p = pod("p")
        .label("bar", "")
        .spread(1, "node", DoNotSchedule, foo());
    assert_eq!(
        codes(&p, &infos),
        want(&[
            ("node-a", NO),
            ("node-b", OK),
            ("node-x", OK),
            ("node-y", NO)
        ])
    );
}

#[test]
fn single_node_affinity_restricts_counted_nodes() {
    // Only node-a and node-y count: 2/~1~/~0~/3.
    let p = pod("p")
        .label("foo", "")
        .node_affinity("node", NodeSelectorOperator::In, &["node-a", "node-y"])
        .spread(1, "node", DoNotSchedule, foo());
    assert_eq!(
        codes(&p, &cluster(four_nodes(), six_pods())),
        want(&[
            ("node-a", OK),
            ("node-b", OK),
            ("node-x", OK),
            ("node-y", NO)
        ])
    );
    // 0/~2~/0/1 on zones.
    let p = pod("p")
        .label("foo", "")
        .node_affinity("node", NodeSelectorOperator::NotIn, &["node-b"])
        .spread(1, "zone", DoNotSchedule, foo());
    let pods = vec![
        pod("p-b1").on("node-b").label("foo", ""),
        pod("p-b2").on("node-b").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", ""),
    ];
    assert_eq!(
        codes(&p, &cluster(four_nodes(), pods)),
        want(&[
            ("node-a", OK),
            ("node-b", OK),
            ("node-x", NO),
            ("node-y", NO)
        ])
    );
}

#[test]
fn single_terminating_pods_are_excluded() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, "node", DoNotSchedule, foo());
    let nodes = vec![
        node("node-a", &[("node", "node-a")]),
        node("node-b", &[("node", "node-b")]),
    ];
    let pods = vec![
        pod("p-a").on("node-a").label("foo", "").terminating(),
        pod("p-b").on("node-b").label("foo", ""),
    ];
    assert_eq!(
        codes(&p, &cluster(nodes, pods)),
        want(&[("node-a", OK), ("node-b", NO)])
    );
}

#[test]
fn single_min_domains() {
    let nodes = || {
        vec![
            node("node-a", &[("node", "node-a")]),
            node("node-b", &[("node", "node-b")]),
            node("node-c", &[("node", "node-c")]),
        ]
    };
    let pods = || {
        vec![
            pod("p-a1").on("node-a").label("foo", ""),
            pod("p-a2").on("node-a").label("foo", ""),
            pod("p-b1").on("node-b").label("foo", ""),
            pod("p-b2").on("node-b").label("foo", ""),
            pod("p-c1").on("node-c").label("foo", ""),
        ]
    };
    let with_min = |m: i32, key: &str| {
        pod("p")
            .label("foo", "")
            .spread_with(2, key, DoNotSchedule, foo(), |c| c.min_domains = Some(m))
    };
    // 2/2/1 with fewer domains (3) than minDomains (4): the global minimum is 0.
    assert_eq!(
        codes(&with_min(4, "node"), &cluster(nodes(), pods())),
        want(&[("node-a", NO), ("node-b", NO), ("node-c", OK)])
    );
    assert_eq!(
        codes(&with_min(2, "node"), &cluster(nodes(), pods())),
        want(&[("node-a", OK), ("node-b", OK), ("node-c", OK)])
    );
    let zone_pods = || {
        vec![
            pod("p-b1").on("node-a").label("foo", ""),
            pod("p-b2").on("node-b").label("foo", ""),
            pod("p-y1").on("node-y").label("foo", ""),
        ]
    };
    assert_eq!(
        codes(&with_min(3, "zone"), &cluster(four_nodes(), zone_pods())),
        want(&[
            ("node-a", NO),
            ("node-b", NO),
            ("node-x", OK),
            ("node-y", OK)
        ])
    );
    assert_eq!(
        codes(&with_min(1, "zone"), &cluster(four_nodes(), zone_pods())),
        want(&[
            ("node-a", OK),
            ("node-b", OK),
            ("node-x", OK),
            ("node-y", OK)
        ])
    );
}

fn inclusion_pods() -> Vec<P> {
    vec![
        pod("p-b1").on("node-a").label("foo", ""),
        pod("p-b2").on("node-b").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", ""),
    ]
}

#[test]
fn single_node_inclusion_policies() {
    let nodes = || {
        vec![
            node("node-a", &[("node", "node-a"), ("foo", "")]),
            node("node-b", &[("node", "node-b"), ("foo", "")]),
            node("node-x", &[("node", "node-x"), ("foo", "")]),
            node("node-y", &[("node", "node-y")]),
        ]
    };
    // 1/1/0/~0~: node-y is out, so its pod doesn't raise the minimum.
    let honored =
        pod("p")
            .label("foo", "")
            .node_selector("foo", "")
            .spread(1, "node", DoNotSchedule, foo());
    let honored_want = want(&[
        ("node-a", NO),
        ("node-b", NO),
        ("node-x", OK),
        ("node-y", OK),
    ]);
    assert_eq!(
        codes(&honored, &cluster(nodes(), inclusion_pods())),
        honored_want
    );
    let ignored_want = want(&[
        ("node-a", NO),
        ("node-b", NO),
        ("node-x", OK),
        ("node-y", NO),
    ]);
    let ignored = pod("p")
        .label("foo", "")
        .node_selector("foo", "")
        .spread_with(1, "node", DoNotSchedule, foo(), |c| {
            c.node_affinity_policy = Some(Ignore)
        });
    assert_eq!(
        codes(&ignored, &cluster(nodes(), inclusion_pods())),
        ignored_want
    );
    let honored = pod("p")
        .label("foo", "")
        .node_affinity("foo", NodeSelectorOperator::In, &[""])
        .spread(1, "node", DoNotSchedule, foo());
    assert_eq!(
        codes(&honored, &cluster(nodes(), inclusion_pods())),
        honored_want
    );
    let ignored = pod("p")
        .label("foo", "")
        .node_affinity("foo", NodeSelectorOperator::In, &[""])
        .spread_with(1, "node", DoNotSchedule, foo(), |c| {
            c.node_affinity_policy = Some(Ignore)
        });
    assert_eq!(
        codes(&ignored, &cluster(nodes(), inclusion_pods())),
        ignored_want
    );

    let tainted_nodes = || {
        vec![
            node("node-a", &[("node", "node-a"), ("foo", "")]),
            node("node-b", &[("node", "node-b"), ("foo", "")]),
            node("node-x", &[("node", "node-x"), ("foo", "")]),
            tainted(node("node-y", &[("node", "node-y")])),
        ]
    };
    let honored = pod("p")
        .label("foo", "")
        .spread_with(1, "node", DoNotSchedule, foo(), |c| {
            c.node_taints_policy = Some(Honor)
        });
    assert_eq!(
        codes(&honored, &cluster(tainted_nodes(), inclusion_pods())),
        honored_want
    );
    let ignored = pod("p")
        .label("foo", "")
        .spread(1, "node", DoNotSchedule, foo());
    assert_eq!(
        codes(&ignored, &cluster(tainted_nodes(), inclusion_pods())),
        ignored_want
    );
}

// ---- TestMultipleConstraints ----

fn zone_and_node(p: P) -> P {
    p.spread(1, "zone", DoNotSchedule, foo())
        .spread(1, "node", DoNotSchedule, foo())
}

#[test]
fn multiple_zone_and_node() {
    let p = zone_and_node(pod("p").label("foo", ""));
    assert_eq!(
        codes(&p, &cluster(four_nodes(), six_pods())),
        want(&[
            ("node-a", NO),
            ("node-b", NO),
            ("node-x", OK),
            ("node-y", NO)
        ])
    );
    let mut pods = six_pods();
    pods.push(pod("p-y4").on("node-y").label("foo", ""));
    assert_eq!(
        codes(&p, &cluster(four_nodes(), pods)),
        want(&[
            ("node-a", NO),
            ("node-b", NO),
            ("node-x", NO),
            ("node-y", NO)
        ])
    );
}

#[test]
fn multiple_different_selectors() {
    let p = pod("p")
        .label("foo", "")
        .label("bar", "")
        .spread(1, "zone", DoNotSchedule, foo())
        .spread(1, "node", DoNotSchedule, bar());
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-y1").on("node-y").label("bar", ""),
    ];
    assert_eq!(
        codes(&p, &cluster(four_nodes(), pods)),
        want(&[
            ("node-a", NO),
            ("node-b", NO),
            ("node-x", OK),
            ("node-y", NO)
        ])
    );
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-x1").on("node-x").label("bar", ""),
        pod("p-y1").on("node-y").label("bar", ""),
    ];
    assert_eq!(
        codes(&p, &cluster(four_nodes(), pods)),
        want(&[
            ("node-a", NO),
            ("node-b", NO),
            ("node-x", NO),
            ("node-y", NO)
        ])
    );
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-a2").on("node-a").label("foo", "").label("bar", ""),
        pod("p-y1").on("node-y").label("foo", ""),
        pod("p-y2").on("node-y").label("foo", "").label("bar", ""),
        pod("p-y3").on("node-y").label("foo", ""),
    ];
    assert_eq!(
        codes(&p, &cluster(four_nodes(), pods)),
        want(&[
            ("node-a", NO),
            ("node-b", OK),
            ("node-x", NO),
            ("node-y", NO)
        ])
    );
    // The pod doesn't match itself on the zone constraint.
    let p = pod("p")
        .label("bar", "")
        .spread(1, "zone", DoNotSchedule, foo())
        .spread(1, "node", DoNotSchedule, bar());
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-x1").on("node-x").label("bar", ""),
        pod("p-y1").on("node-y").label("bar", ""),
    ];
    assert_eq!(
        codes(&p, &cluster(four_nodes(), pods)),
        want(&[
            ("node-a", OK),
            ("node-b", OK),
            ("node-x", NO),
            ("node-y", NO)
        ])
    );
}

#[test]
fn multiple_missing_node_label() {
    let p = zone_and_node(pod("p").label("foo", ""));
    let nodes = vec![
        zn("node-a", "zone1"),
        zn("node-b", "zone1"),
        node("node-x", &[("zone", "zone2")]),
        zn("node-y", "zone2"),
    ];
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-y3").on("node-y").label("foo", ""),
    ];
    assert_eq!(
        codes(&p, &cluster(nodes, pods)),
        want(&[
            ("node-a", NO),
            ("node-b", OK),
            ("node-x", NEVER),
            ("node-y", NO)
        ])
    );
}

#[test]
fn multiple_inclusion_policies() {
    let nodes = || {
        vec![
            node(
                "node-a",
                &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
            ),
            node(
                "node-b",
                &[("zone", "zone1"), ("node", "node-b"), ("foo", "")],
            ),
            node(
                "node-x",
                &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
            ),
            node("node-y", &[("zone", "zone2"), ("node", "node-y")]),
        ]
    };
    let pods = || {
        vec![
            pod("p-a1").on("node-a").label("foo", ""),
            pod("p-b1").on("node-b").label("foo", ""),
            pod("p-y1").on("node-y").label("foo", ""),
        ]
    };
    // zone: honor/ignore, node: ignore/ignore
    let p = pod("p")
        .label("foo", "")
        .node_selector("foo", "")
        .spread(1, "zone", DoNotSchedule, foo())
        .spread_with(1, "node", DoNotSchedule, foo(), |c| {
            c.node_affinity_policy = Some(Ignore)
        });
    assert_eq!(
        codes(&p, &cluster(nodes(), pods())),
        want(&[
            ("node-a", NO),
            ("node-b", NO),
            ("node-x", OK),
            ("node-y", NO)
        ])
    );
    // zone: honor/honor, node: honor/ignore
    let mut tainted_nodes = nodes();
    tainted_nodes[3] = tainted(tainted_nodes[3].clone());
    let p = pod("p")
        .label("foo", "")
        .spread_with(1, "zone", DoNotSchedule, foo(), |c| {
            c.node_taints_policy = Some(Honor)
        })
        .spread(1, "node", DoNotSchedule, foo());
    assert_eq!(
        codes(&p, &cluster(tainted_nodes, pods())),
        want(&[
            ("node-a", NO),
            ("node-b", NO),
            ("node-x", OK),
            ("node-y", NO)
        ])
    );
    // zone: honor/ignore, node: honor/ignore
    let nodes2 = vec![
        node(
            "node-a",
            &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
        ),
        node("node-b", &[("zone", "zone1"), ("node", "node-b")]),
        node(
            "node-x",
            &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
        ),
        tainted(node(
            "node-y",
            &[("zone", "zone2"), ("node", "node-y"), ("foo", "")],
        )),
    ];
    let p = zone_and_node(pod("p").label("foo", "").node_selector("foo", ""));
    assert_eq!(
        codes(&p, &cluster(nodes2, pods())),
        want(&[
            ("node-a", NO),
            ("node-b", OK),
            ("node-x", OK),
            ("node-y", NO)
        ])
    );
}

// ---- TestPreScoreStateEmptyNodes / TestPreScoreSkip ----

#[test]
fn prescore_skips_without_soft_constraints() {
    let infos = cluster(
        vec![
            node("node-a", &[(HOSTNAME, "node-a")]),
            node("node-b", &[(HOSTNAME, "node-b")]),
        ],
        vec![],
    );
    let p = pod("p");
    assert_eq!(
        scores_with(&list_plugin(), &p, &infos, &["node-a", "node-b"]),
        [0, 0]
    );
    let store = MemoryState::default();
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let status = list_plugin().pre_score(&CycleState::new(&store), &p.0, &refs, &refs);
    assert_eq!(status.code, Code::Skip);
    // Default constraints, but nothing selects the pod.
    let plugin = list_defaults(&[(2, "planet", ScheduleAnyway)]);
    let p = pod("p").label("foo", "bar");
    let status = plugin.pre_score(&CycleState::new(&store), &p.0, &refs, &refs);
    assert_eq!(status.code, Code::Skip);
    // No nodes at all.
    let p = pod("p")
        .label("foo", "")
        .spread(1, HOSTNAME, ScheduleAnyway, foo());
    let status = list_plugin().pre_score(&CycleState::new(&store), &p.0, &[], &[]);
    assert_eq!(status.code, Code::Skip);
}

#[test]
fn prescore_weights() {
    assert!((topology_normalizing_weight(0) - 2f64.ln()).abs() < 1e-12);
    assert!((topology_normalizing_weight(4) - 6f64.ln()).abs() < 1e-12);
}

/// The weights are Go's `math.Log(float64(size + 2))` to the bit, whatever the
/// platform's C library says: glibc's last bit differs for sizes 1, 12, 46, 72, 174
/// and 4833, and wasi-libc's from glibc's for 277860.
#[test]
fn prescore_weights_are_upstreams_bits() {
    let go_math_log = [
        (0, 0x3fe6_2e42_fefa_39ef),
        (1, 0x3ff1_93ea_7aad_030a),
        (2, 0x3ff6_2e42_fefa_39ef),
        (3, 0x3ff9_c041_f7ed_8d33),
        (4, 0x3ffc_ab0b_fa2a_2002),
        (12, 0x4005_1cca_16d7_bba8),
        (46, 0x400e_f838_3c50_bb74),
        (72, 0x4011_375c_d6fc_ab1c),
        (174, 0x4014_ae93_5b3c_b89e),
        (4833, 0x4020_f79f_30f6_1004),
        (277_860, 0x4029_11db_c61c_360a),
    ];
    for (size, bits) in go_math_log {
        assert_eq!(
            topology_normalizing_weight(size).to_bits(),
            bits,
            "ln({size} + 2)"
        );
    }
}

#[test]
fn score_and_normalize_without_prescore_state_are_errors() {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let infos = cluster(vec![node("node-a", &[(HOSTNAME, "node-a")])], vec![]);
    let p = pod("p").spread(1, HOSTNAME, ScheduleAnyway, foo());
    let err =
        Status::error("error reading \"PreScorePodTopologySpread\" from cycleState: not found");
    assert_eq!(
        list_plugin().score(&state, &p.0, &infos[0]),
        Err(err.clone())
    );
    assert_eq!(list_plugin().normalize_score(&state, &p.0, &mut [1]), err);
}

#[test]
fn prescore_writes_counts_only_for_feasible_domains() {
    // Upstream's "node-x doesn't have label zone": node-x is ignored.
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", ScheduleAnyway, foo())
        .spread(1, HOSTNAME, ScheduleAnyway, bar());
    let infos = cluster(
        vec![
            node("node-a", &[("zone", "zone1"), (HOSTNAME, "node-a")]),
            node("node-b", &[("zone", "zone2"), (HOSTNAME, "node-b")]),
            node("node-x", &[(HOSTNAME, "node-x")]),
        ],
        vec![
            pod("p-a").on("node-a").label("foo", ""),
            pod("p-x").on("node-x").label("foo", ""),
        ],
    );
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    assert!(
        list_plugin()
            .pre_score(&state, &p.0, &refs, &refs)
            .is_success()
    );
    assert_eq!(
        state.read::<i64>(&format!("{PRE_SCORE_STATE_KEY}/0/zone1")),
        Some(1)
    );
    assert_eq!(
        list_plugin().score(&state, &p.0, &infos[2]),
        Ok(IGNORED_SCORE)
    );
    let mut scores: Vec<i64> = infos
        .iter()
        .map(|n| list_plugin().score(&state, &p.0, n).unwrap())
        .collect();
    // zone weight ln(2+2), hostname weight ln(2+2): a = 1*ln4 + 0 -> 1, b = 0 -> 0.
    assert_eq!(scores, [1, 0, IGNORED_SCORE]);
    assert!(
        list_plugin()
            .normalize_score(&state, &p.0, &mut scores)
            .is_success()
    );
    assert_eq!(scores, [0, 100, 0]);
}

// ---- TestPodTopologySpreadScore ----

fn hosts(names: &[&str]) -> Vec<Node> {
    names.iter().map(|n| node(n, &[(HOSTNAME, n)])).collect()
}

fn foo_pods(spread: &[(&str, usize)]) -> Vec<P> {
    spread
        .iter()
        .flat_map(|(n, k)| (0..*k).map(move |i| pod(&format!("p-{n}{i}")).on(n).label("foo", "")))
        .collect()
}

#[test]
fn score_one_constraint_on_node() {
    let p = |skew| {
        pod("p")
            .label("foo", "")
            .spread(skew, HOSTNAME, ScheduleAnyway, foo())
    };
    // No existing pods.
    assert_eq!(
        scores(&p(1), &cluster(hosts(&["node-a", "node-b"]), vec![])),
        [100, 100]
    );
    // Only one candidate node.
    let infos = cluster(
        hosts(&["node-a", "node-b"]),
        foo_pods(&[("node-a", 2), ("node-b", 1)]),
    );
    assert_eq!(
        scores_with(&system_plugin(), &p(1), &infos, &["node-a"]),
        [100]
    );
    // Same number of matching pods everywhere.
    let infos = cluster(
        hosts(&["node-a", "node-b"]),
        foo_pods(&[("node-a", 1), ("node-b", 1)]),
    );
    assert_eq!(scores(&p(1), &infos), [100, 100]);
    // 2/1/0/3.
    let four = || {
        cluster(
            hosts(&["node-a", "node-b", "node-c", "node-d"]),
            foo_pods(&[("node-a", 2), ("node-b", 1), ("node-d", 3)]),
        )
    };
    assert_eq!(scores(&p(1), &four()), [20, 60, 100, 0]);
    assert_eq!(scores(&p(2), &four()), [33, 66, 100, 16]);
    // A null selector: every node alike.
    let null = pod("p")
        .label("foo", "")
        .spread(1, HOSTNAME, ScheduleAnyway, None);
    assert_eq!(scores(&null, &four()), [100, 100, 100, 100]);
    // 4/3/2/1, maxSkew 3.
    let infos = cluster(
        hosts(&["node-a", "node-b", "node-c", "node-d"]),
        foo_pods(&[("node-a", 4), ("node-b", 3), ("node-c", 2), ("node-d", 1)]),
    );
    assert_eq!(scores(&p(3), &infos), [44, 66, 77, 100]);
}

#[test]
fn score_system_defaulting_without_zones() {
    // A Service selects foo; nodes have no zone label, yet hostname spreading holds.
    let p = pod("p")
        .label("foo", "")
        .default_selector(label_is("foo", ""));
    let infos = cluster(
        hosts(&["node-a", "node-b", "node-c", "node-d"]),
        foo_pods(&[("node-a", 4), ("node-b", 3), ("node-c", 2), ("node-d", 1)]),
    );
    assert_eq!(scores(&p, &infos), [44, 66, 77, 100]);
}

#[test]
fn score_some_nodes_not_candidates() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, HOSTNAME, ScheduleAnyway, foo());
    let pods = || foo_pods(&[("node-a", 4), ("node-b", 2), ("node-x", 1), ("node-y", 3)]);
    // 4/2/1/~3~
    let infos = cluster(hosts(&["node-a", "node-b", "node-x", "node-y"]), pods());
    assert_eq!(
        scores_with(
            &system_plugin(),
            &p,
            &infos,
            &["node-a", "node-b", "node-x"]
        ),
        [33, 83, 100]
    );
    // 4/?2?/1/~3~: node-b lacks the hostname label and scores 0.
    let mut nodes = hosts(&["node-a", "node-b", "node-x", "node-y"]);
    nodes[1] = node("node-b", &[("n", "node-b")]);
    let infos = cluster(nodes, pods());
    assert_eq!(
        scores_with(
            &system_plugin(),
            &p,
            &infos,
            &["node-a", "node-b", "node-x"]
        ),
        [16, 0, 100]
    );
}

fn zone_hosts() -> Vec<Node> {
    vec![
        node("node-a", &[("zone", "zone1"), (HOSTNAME, "node-a")]),
        node("node-b", &[("zone", "zone1"), (HOSTNAME, "node-b")]),
        node("node-x", &[("zone", "zone2"), (HOSTNAME, "node-x")]),
        node("node-y", &[("zone", "zone2"), (HOSTNAME, "node-y")]),
    ]
}

#[test]
fn score_zone_constraint_with_a_failed_node() {
    // 4/2/1/~3~ on zones.
    let p = pod("p")
        .label("foo", "")
        .spread(1, "zone", ScheduleAnyway, foo());
    let infos = cluster(
        zone_hosts(),
        foo_pods(&[("node-a", 4), ("node-b", 2), ("node-x", 1), ("node-y", 3)]),
    );
    assert_eq!(
        scores_with(
            &system_plugin(),
            &p,
            &infos,
            &["node-a", "node-b", "node-x"]
        ),
        [75, 75, 100]
    );
}

#[test]
fn score_two_constraints() {
    let both = |p: P, z: Option<LabelSelector>, h: Option<LabelSelector>| {
        p.spread(1, "zone", ScheduleAnyway, z)
            .spread(1, HOSTNAME, ScheduleAnyway, h)
    };
    // 2/~1~/2/~4~
    let p = both(pod("p").label("foo", ""), foo(), foo());
    let infos = cluster(
        zone_hosts(),
        foo_pods(&[("node-a", 2), ("node-b", 1), ("node-x", 2), ("node-y", 4)]),
    );
    assert_eq!(
        scores_with(&system_plugin(), &p, &infos, &["node-a", "node-x"]),
        [100, 63]
    );

    let p = both(pod("p").label("foo", "").label("bar", ""), foo(), bar());
    let pods = || {
        vec![
            pod("p-a1").on("node-a").label("foo", ""),
            pod("p-b1").on("node-b").label("foo", "").label("bar", ""),
            pod("p-y1").on("node-y").label("foo", ""),
            pod("p-y2").on("node-y").label("bar", ""),
        ]
    };
    assert_eq!(
        scores(&p, &cluster(zone_hosts(), pods())),
        [60, 20, 100, 60]
    );
    // Some nodes hold no pods.
    let pods2 = vec![
        pod("p-b1").on("node-b").label("bar", ""),
        pod("p-x1").on("node-x").label("foo", ""),
        pod("p-y1").on("node-y").label("foo", "").label("bar", ""),
    ];
    assert_eq!(scores(&p, &cluster(zone_hosts(), pods2)), [100, 60, 40, 0]);
    // 3 of 4 nodes are candidates.
    assert_eq!(
        scores_with(
            &system_plugin(),
            &p,
            &cluster(zone_hosts(), pods()),
            &["node-a", "node-b", "node-x"]
        ),
        [50, 25, 100]
    );
}

#[test]
fn score_namespaces_and_terminating_pods() {
    let p = pod("p")
        .label("foo", "")
        .spread(1, HOSTNAME, ScheduleAnyway, foo());
    let pods = vec![
        pod("p-a1").namespace("ns1").on("node-a").label("foo", ""),
        pod("p-a2").on("node-a").label("foo", ""),
        pod("p-b1").on("node-b").label("foo", ""),
        pod("p-b2").on("node-b").label("foo", ""),
    ];
    assert_eq!(
        scores(&p, &cluster(hosts(&["node-a", "node-b"]), pods)),
        [100, 33]
    );
    let pods = vec![
        pod("p-a").on("node-a").label("foo", "").terminating(),
        pod("p-b").on("node-b").label("foo", ""),
    ];
    assert_eq!(
        scores(&p, &cluster(hosts(&["node-a", "node-b"]), pods)),
        [100, 0]
    );
}

#[test]
fn score_min_domains_has_no_effect() {
    let p = pod("p")
        .label("foo", "")
        .spread_with(2, "node", ScheduleAnyway, foo(), |c| {
            c.min_domains = Some(10)
        });
    let nodes = vec![
        node("node-a", &[("node", "node-a")]),
        node("node-b", &[("node", "node-b")]),
        node("node-c", &[("node", "node-c")]),
    ];
    let infos = cluster(
        nodes,
        foo_pods(&[("node-a", 2), ("node-b", 2), ("node-c", 1)]),
    );
    assert_eq!(scores(&p, &infos), [75, 75, 100]);
}

#[test]
fn score_node_inclusion_policies() {
    let nodes = || {
        vec![
            node("node-a", &[("node", "node-a"), ("foo", "")]),
            node("node-b", &[("node", "node-b"), ("foo", "")]),
            node("node-c", &[("node", "node-c")]),
        ]
    };
    let pods = || foo_pods(&[("node-a", 2), ("node-b", 1), ("node-c", 1)]);
    let honored_want = [0, 33, 100];
    let ignored_want = [66, 100, 100];
    let sel = pod("p").label("foo", "").node_selector("foo", "");
    assert_eq!(
        scores(
            &sel.spread(1, "node", ScheduleAnyway, foo()),
            &cluster(nodes(), pods())
        ),
        honored_want
    );
    let sel = pod("p").label("foo", "").node_selector("foo", "");
    let ignored = sel.spread_with(1, "node", ScheduleAnyway, foo(), |c| {
        c.node_affinity_policy = Some(Ignore)
    });
    assert_eq!(scores(&ignored, &cluster(nodes(), pods())), ignored_want);
    let aff = || {
        pod("p")
            .label("foo", "")
            .node_affinity("foo", NodeSelectorOperator::In, &[""])
    };
    assert_eq!(
        scores(
            &aff().spread(1, "node", ScheduleAnyway, foo()),
            &cluster(nodes(), pods())
        ),
        honored_want
    );
    let ignored = aff().spread_with(1, "node", ScheduleAnyway, foo(), |c| {
        c.node_affinity_policy = Some(Ignore)
    });
    assert_eq!(scores(&ignored, &cluster(nodes(), pods())), ignored_want);

    let tainted_nodes = || {
        vec![
            node("node-a", &[("node", "node-a")]),
            node("node-b", &[("node", "node-b")]),
            tainted(node("node-c", &[("node", "node-c")])),
        ]
    };
    let honored = pod("p")
        .label("foo", "")
        .spread_with(1, "node", ScheduleAnyway, foo(), |c| {
            c.node_taints_policy = Some(Honor)
        });
    assert_eq!(
        scores(&honored, &cluster(tainted_nodes(), pods())),
        honored_want
    );
    let ignored = pod("p")
        .label("foo", "")
        .spread(1, "node", ScheduleAnyway, foo());
    assert_eq!(
        scores(&ignored, &cluster(tainted_nodes(), pods())),
        ignored_want
    );
}

#[test]
fn score_match_label_keys() {
    let nodes = || {
        vec![
            node("node-a", &[("zone", "zone1"), (HOSTNAME, "node-a")]),
            node("node-b", &[("zone", "zone1"), (HOSTNAME, "node-b")]),
            node("node-c", &[("zone", "zone2"), (HOSTNAME, "node-c")]),
            node("node-d", &[("zone", "zone2"), (HOSTNAME, "node-d")]),
        ]
    };
    let pods = || {
        vec![
            pod("p-a1").on("node-a").label("foo", ""),
            pod("p-b1").on("node-b").label("foo", "").label("bar", ""),
            pod("p-y1").on("node-c").label("foo", ""),
            pod("p-y2").on("node-c").label("bar", ""),
        ]
    };
    // Empty selectors made specific by matchLabelKeys.
    let p = pod("p")
        .label("foo", "")
        .label("bar", "")
        .spread_with(
            1,
            "zone",
            ScheduleAnyway,
            Some(LabelSelector::default()),
            |c| c.match_label_keys = vec!["foo".into()],
        )
        .spread_with(
            1,
            HOSTNAME,
            ScheduleAnyway,
            Some(LabelSelector::default()),
            |c| c.match_label_keys = vec!["bar".into()],
        );
    assert_eq!(scores(&p, &cluster(nodes(), pods())), [60, 20, 60, 100]);
    // ANDed with a non-empty selector.
    let p = pod("p")
        .label("foo", "")
        .label("bar", "")
        .label("baz", "")
        .spread(1, "zone", ScheduleAnyway, foo())
        .spread_with(1, HOSTNAME, ScheduleAnyway, bar(), |c| {
            c.match_label_keys = vec!["baz".into()]
        });
    let pods = vec![
        pod("p-a1").on("node-a").label("foo", ""),
        pod("p-b1")
            .on("node-b")
            .label("foo", "")
            .label("bar", "")
            .label("baz", ""),
        pod("p-c1").on("node-c").label("foo", ""),
        pod("p-c2").on("node-c").label("bar", ""),
        pod("p-d3").on("node-c").label("bar", "").label("baz", ""),
    ];
    assert_eq!(scores(&p, &cluster(nodes(), pods)), [60, 20, 60, 100]);
}

#[test]
fn score_default_constraints_with_a_selector() {
    // Upstream's "default constraints and a replicaset": hostname (1) and planet (2)
    // are soft, rack is hard and left to Filter.
    let plugin = list_defaults(&[
        (1, HOSTNAME, ScheduleAnyway),
        (2, "rack", DoNotSchedule),
        (2, "planet", ScheduleAnyway),
    ]);
    let p = pod("p")
        .label("foo", "tar")
        .label("baz", "sup")
        .default_selector(foo());
    let soft = plugin.constraints(&p.0, ScheduleAnyway);
    let keys: Vec<&str> = soft.iter().map(|c| c.topology_key.as_str()).collect();
    assert_eq!(keys, [HOSTNAME, "planet"]);
    let infos = cluster(
        vec![
            node(
                "node-a",
                &[("rack", "rack1"), (HOSTNAME, "node-a"), ("planet", "mars")],
            ),
            node(
                "node-b",
                &[("rack", "rack1"), (HOSTNAME, "node-b"), ("planet", "mars")],
            ),
        ],
        vec![pod("p-a").on("node-a").label("foo", "x")],
    );
    // a: 1*ln4 + 0 + 1*ln3 + 1 = 3.48 -> 3; b: 0 + 1*ln3 + 1 = 2.10 -> 2.
    assert_eq!(
        scores_with(&plugin, &p, &infos, &["node-a", "node-b"]),
        [66, 100]
    );
}

#[test]
fn normalize_treats_ignored_nodes_apart() {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let infos = cluster(hosts(&["node-a"]), vec![]);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let p = pod("p")
        .label("foo", "")
        .spread(1, HOSTNAME, ScheduleAnyway, foo());
    assert!(
        list_plugin()
            .pre_score(&state, &p.0, &refs, &refs)
            .is_success()
    );
    let mut scores = [IGNORED_SCORE, 4, 2, 0];
    assert!(
        list_plugin()
            .normalize_score(&state, &p.0, &mut scores)
            .is_success()
    );
    assert_eq!(scores, [0, 0, 50, 100]);
    let mut scores = [IGNORED_SCORE, 0, 0];
    assert!(
        list_plugin()
            .normalize_score(&state, &p.0, &mut scores)
            .is_success()
    );
    assert_eq!(scores, [0, 100, 100]);
    let mut scores = [IGNORED_SCORE];
    assert!(
        list_plugin()
            .normalize_score(&state, &p.0, &mut scores)
            .is_success()
    );
    assert_eq!(scores, [0]);
}

#[test]
fn the_plugin_asks_for_pods_and_exports_every_extension_point() {
    use berth_sdk::{ExtensionPoint as E, Registered};
    const { assert!(PodTopologySpread::WANTS_PODS) };
    assert_eq!(
        PodTopologySpread::vtable().extension_points(),
        [
            E::PreFilter,
            E::Filter,
            E::PreScore,
            E::Score,
            E::NormalizeScore,
            E::SignPod
        ]
    );
    assert!(PodTopologySpread::vtable().pre_filter_extensions.is_some());
    assert_eq!(PodTopologySpread::NAME, "PodTopologySpread");
    assert!(PodTopologySpread::new(berth_sdk::serde_json::Value::Null).is_ok());
}

// ---- Counts kept across cycles ----

/// Stamps `infos` as a replica would, after `before`: a node equal to its version
/// there keeps its stamp, any other gets a new one.
fn restamp(infos: &mut [NodeInfo], before: &[NodeInfo], last: &mut u64) {
    for info in infos.iter_mut() {
        match before.iter().find(|b| b.name() == info.name()) {
            Some(b) if b == info => info.stamp = b.stamp,
            _ => {
                *last += 1;
                info.stamp = *last;
            }
        }
    }
}

/// PreFilter's and PreScore's counts kept by one plugin across cycles are those of
/// a fresh plugin, as pods come and go, a node is relabelled or tainted, and the
/// incoming pod changes.
#[test]
fn counts_kept_across_cycles_are_those_of_a_full_walk() {
    let nodes = || {
        vec![
            zn("node-a", "zone1"),
            zn("node-b", "zone1"),
            zn("node-x", "zone2"),
            zn("node-y", "zone2"),
        ]
    };
    let foo = |name: &str, on: &str| pod(name).label("foo", "").on(on);
    let incoming = pod("p")
        .label("foo", "")
        .spread(1, "zone", DoNotSchedule, exists("foo"))
        .spread(1, "zone", ScheduleAnyway, exists("foo"))
        .spread(1, "node", ScheduleAnyway, exists("foo"));
    let other = pod("q")
        .label("foo", "")
        .node_affinity("zone", NodeSelectorOperator::In, &["zone2"])
        .spread(2, "zone", DoNotSchedule, exists("foo"))
        .spread(2, "zone", ScheduleAnyway, exists("foo"));
    let steps: Vec<(&str, Vec<NodeInfo>, &P)> = vec![
        (
            "first cycle",
            cluster(nodes(), vec![foo("a1", "node-a")]),
            &incoming,
        ),
        (
            "nothing changed",
            cluster(nodes(), vec![foo("a1", "node-a")]),
            &incoming,
        ),
        (
            "a pod added",
            cluster(nodes(), vec![foo("a1", "node-a"), foo("x1", "node-x")]),
            &incoming,
        ),
        (
            "a pod removed",
            cluster(nodes(), vec![foo("x1", "node-x")]),
            &incoming,
        ),
        (
            "a node relabelled",
            {
                let mut n = nodes();
                n[1] = zn("node-b", "zone3");
                cluster(n, vec![foo("x1", "node-x"), foo("b1", "node-b")])
            },
            &incoming,
        ),
        (
            "another incoming pod",
            cluster(nodes(), vec![foo("x1", "node-x"), foo("b1", "node-b")]),
            &other,
        ),
        (
            "a node tainted",
            {
                let mut n = nodes();
                n[2] = tainted(zn("node-x", "zone2"));
                cluster(n, vec![foo("x1", "node-x"), foo("b1", "node-b")])
            },
            &incoming,
        ),
        (
            "a node gone",
            cluster(nodes()[1..].to_vec(), vec![foo("x1", "node-x")]),
            &incoming,
        ),
    ];
    let kept = list_plugin();
    let mut before: Vec<NodeInfo> = Vec::new();
    let mut last = 0;
    for (step, mut infos, p) in steps {
        restamp(&mut infos, &before, &mut last);
        let constraints = kept.constraints(&p.0, DoNotSchedule);
        let refs: Vec<&NodeInfo> = infos.iter().collect();
        assert_eq!(
            count_matching_pods_kept(&kept.pre_filter_counts, &p.0, &constraints, &refs),
            count_matching_pods(&p.0, &constraints, &refs),
            "PreFilter, {step}"
        );
        let names: Vec<&str> = infos.iter().map(|n| n.name()).collect();
        assert_eq!(
            scores_with(&kept, p, &infos, &names[1..]),
            scores_with(&list_plugin(), p, &infos, &names[1..]),
            "PreScore, {step}"
        );
        before = infos;
    }
}

#[test]
fn pods_it_spreads_are_not_signable() {
    let unsignable = |plugin: &PodTopologySpread, p: &P| {
        assert_eq!(
            plugin.sign_pod(&p.0).unwrap_err().code,
            Code::Unschedulable,
            "{:?}",
            p.0.name
        )
    };
    let constrained = pod("p").spread(1, "zone", DoNotSchedule, foo());
    unsignable(&system_plugin(), &constrained);
    unsignable(&list_plugin(), &constrained);
    let soft = pod("p").spread(1, "zone", ScheduleAnyway, foo());
    unsignable(&system_plugin(), &soft);
    // System defaulting spreads the pods a Service or workload selects.
    unsignable(&system_plugin(), &pod("p").default_selector(foo()));
    unsignable(
        &system_plugin(),
        &pod("p").default_selector(Some(LabelSelector::default())),
    );
    // Default constraints of the args: every pod.
    let listed = list_defaults(&[(1, "zone", ScheduleAnyway)]);
    unsignable(&listed, &pod("p"));
    unsignable(&listed, &pod("p").default_selector(foo()));
}

#[test]
fn pods_it_does_not_spread_sign_with_nothing() {
    let signed = |plugin: &PodTopologySpread, p: &P| plugin.sign_pod(&p.0).unwrap();
    let a = pod("a").label("foo", "1");
    let b = pod("b").label("bar", "2").namespace("other").on("n1");
    assert_eq!(signed(&system_plugin(), &a), vec![]);
    assert_eq!(signed(&system_plugin(), &a), signed(&system_plugin(), &b));
    // Without default constraints a default selector spreads nothing.
    let selected = pod("c").default_selector(foo());
    assert_eq!(signed(&list_plugin(), &selected), vec![]);
    assert_eq!(
        signed(&list_plugin(), &a),
        signed(&list_plugin(), &selected)
    );
}
