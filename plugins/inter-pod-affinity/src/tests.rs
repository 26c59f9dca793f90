//! The cases of upstream's filtering_test.go (PreFilterExtensions among them) and
//! scoring_test.go, run through the extension points as the host runs them, and
//! Berth's own.

use super::*;
use berth_sdk::types::{
    LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, PodAffinityTerm,
    WeightedPodAffinityTerm,
};
use berth_sdk::{HostApi, Labels, LogLevel, MemoryState, Node, Registered, serde_json::json};

mod extension_cases;
mod filter_cases;
mod score_cases;

/// The namespaces of upstream's tests (scoring_test.go's `namespaces`, and NS1).
struct TestHost;

impl HostApi for TestHost {
    fn log(&self, _level: LogLevel, _message: &str) {}
    fn bind_pod(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Err("not in tests".into())
    }
    fn namespace_labels(&self, namespace: &str) -> Option<Labels> {
        let team = match namespace {
            "subteam1.team1" | "subteam2.team1" => "team1",
            "subteam1.team2" | "subteam2.team2" => "team2",
            "NS1" => return Some(Labels::new()),
            _ => return None,
        };
        Some(labels(&[("team", team)]))
    }
}

/// The host is process-wide and tests run in parallel, so every test installs the
/// same one.
fn install_host() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| berth_sdk::set_native_host(Arc::new(TestHost)));
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

fn expr(key: &str, operator: LabelSelectorOperator, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator,
        values: values.iter().map(|v| (*v).into()).collect(),
    }
}

fn selector(exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
    LabelSelector {
        match_labels: Labels::new(),
        match_expressions: exprs,
    }
}

/// A term with a selector of `exprs` over `topology_key`.
fn term(exprs: Vec<LabelSelectorRequirement>, topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(selector(exprs)),
        topology_key: topology_key.into(),
        ..PodAffinityTerm::default()
    }
}

fn weighted(weight: i32, term: PodAffinityTerm) -> WeightedPodAffinityTerm {
    WeightedPodAffinityTerm { weight, term }
}

use LabelSelectorOperator::{DoesNotExist, Exists, In, NotIn};

/// Upstream's `st.MakePod()`: a pod in the "" namespace.
#[derive(Clone, Debug, Default)]
struct PodBuilder(Pod);

fn pod() -> PodBuilder {
    PodBuilder::default()
}

impl PodBuilder {
    fn name(mut self, name: &str) -> Self {
        self.0.name = name.into();
        self.0.uid = name.into();
        self
    }
    fn namespace(mut self, ns: &str) -> Self {
        self.0.namespace = ns.into();
        self
    }
    fn labels(mut self, l: &[(&str, &str)]) -> Self {
        self.0.labels.extend(labels(l));
        self
    }
    fn node(mut self, node: &str) -> Self {
        self.0.node_name = node.into();
        self
    }
    fn terminating(mut self) -> Self {
        self.0.terminating = true;
        self
    }
    fn affinity(mut self, t: PodAffinityTerm) -> Self {
        self.0.affinity.pod_affinity.required.push(t);
        self
    }
    fn anti(mut self, t: PodAffinityTerm) -> Self {
        self.0.affinity.pod_anti_affinity.required.push(t);
        self
    }
    fn preferred(mut self, weight: i32, t: PodAffinityTerm) -> Self {
        self.0
            .affinity
            .pod_affinity
            .preferred
            .push(weighted(weight, t));
        self
    }
    fn preferred_anti(mut self, weight: i32, t: PodAffinityTerm) -> Self {
        self.0
            .affinity
            .pod_anti_affinity
            .preferred
            .push(weighted(weight, t));
        self
    }
    fn affinity_in(self, key: &str, topology: &str, values: &[&str]) -> Self {
        self.affinity(term(vec![expr(key, In, values)], topology))
    }
    fn affinity_not_in(self, key: &str, topology: &str, values: &[&str]) -> Self {
        self.affinity(term(vec![expr(key, NotIn, values)], topology))
    }
    fn affinity_exists(self, key: &str, topology: &str) -> Self {
        self.affinity(term(vec![expr(key, Exists, &[])], topology))
    }
    fn anti_in(self, key: &str, topology: &str, values: &[&str]) -> Self {
        self.anti(term(vec![expr(key, In, values)], topology))
    }
    fn anti_not_in(self, key: &str, topology: &str, values: &[&str]) -> Self {
        self.anti(term(vec![expr(key, NotIn, values)], topology))
    }
    fn anti_exists(self, key: &str, topology: &str) -> Self {
        self.anti(term(vec![expr(key, Exists, &[])], topology))
    }
    fn obj(self) -> Pod {
        self.0
    }
}

fn node(name: &str, l: &[(&str, &str)]) -> Node {
    Node {
        name: name.into(),
        labels: labels(l),
        ..Node::default()
    }
}

/// The snapshot's nodes with the pods bound to them; pods on other nodes are left
/// out, as upstream's snapshot does.
fn snapshot(nodes: &[Node], pods: &[Pod]) -> Vec<NodeInfo> {
    nodes
        .iter()
        .map(|n| {
            let mut info = NodeInfo::new(n.clone());
            for p in pods.iter().filter(|p| p.node_name == n.name) {
                info.add_pod(p);
            }
            info
        })
        .collect()
}

fn plugin() -> InterPodAffinity {
    InterPodAffinity::new(berth_sdk::serde_json::Value::Null).unwrap()
}

/// PreFilter, then Filter on every node (all Success after a Skip, as the host).
fn run_filter(
    p: &InterPodAffinity,
    incoming: &Pod,
    nodes: &[Node],
    pods: &[Pod],
) -> (Status, Vec<Status>) {
    install_host();
    let infos = snapshot(nodes, pods);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let result = p.pre_filter(&state, incoming, &refs);
    assert_eq!(result.node_names, None);
    let statuses = match result.status.code {
        Code::Skip => vec![Status::success(); infos.len()],
        Code::Success => infos
            .iter()
            .map(|n| p.filter(&state, incoming, n))
            .collect(),
        _ => Vec::new(),
    };
    (result.status, statuses)
}

/// PreScore, Score on every node, NormalizeScore; the PreScore status when it is not
/// Success.
fn run_score(
    p: &InterPodAffinity,
    incoming: &Pod,
    nodes: &[Node],
    pods: &[Pod],
) -> Result<Vec<i64>, Status> {
    install_host();
    let infos = snapshot(nodes, pods);
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let status = p.pre_score(&state, incoming, &refs, &refs);
    if !status.is_success() {
        return Err(status);
    }
    let mut scores: Vec<i64> = infos
        .iter()
        .map(|n| p.score(&state, incoming, n).unwrap())
        .collect();
    let status = p.normalize_score(&state, incoming, &mut scores);
    assert!(status.is_success(), "{status:?}");
    Ok(scores)
}

fn ok() -> Status {
    Status::success()
}
fn affinity_fails() -> Status {
    Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
}
fn anti_fails() -> Status {
    Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
}
fn existing_fails() -> Status {
    Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
}

#[test]
fn exports_its_extension_points_and_wants_pods() {
    use berth_sdk::ExtensionPoint as E;
    assert_eq!(
        InterPodAffinity::vtable().extension_points(),
        [
            E::PreFilter,
            E::Filter,
            E::PreScore,
            E::Score,
            E::NormalizeScore,
            E::SignPod
        ]
    );
    assert!(InterPodAffinity::vtable().pre_filter_extensions.is_some());
    assert_eq!(InterPodAffinity::NAME, "InterPodAffinity");
    const { assert!(InterPodAffinity::WANTS_PODS) };
}

#[test]
fn bad_args_refuse_the_plugin() {
    let err = InterPodAffinity::new(json!({"hardPodAffinityWeight": 101}))
        .err()
        .unwrap();
    assert_eq!(
        err,
        "hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"
    );
    let p = InterPodAffinity::new(json!({"hardPodAffinityWeight": 7})).unwrap();
    assert_eq!(p.args().hard_pod_affinity_weight, 7);
}

/// A cluster of the size Berth aims at, timed: `cargo test -p inter-pod-affinity
/// --release -- --ignored --nocapture large_cluster`.
#[test]
#[ignore]
fn large_cluster() {
    install_host();
    let zones = 50;
    let infos: Vec<NodeInfo> = (0..5000)
        .map(|i| {
            let name = format!("node{i}");
            let mut info = NodeInfo::new(node(
                &name,
                &[("hostname", &name), ("zone", &format!("z{}", i % zones))],
            ));
            for j in 0..2 {
                let app = format!("app{}", (i * 2 + j) % 100);
                let p = pod()
                    .name(&format!("p{i}-{j}"))
                    .node(&name)
                    .labels(&[("app", &app)])
                    .anti_in("app", "hostname", &[&app])
                    .preferred(10, term(vec![expr("app", In, &[&app])], "zone"))
                    .obj();
                info.add_pod(&p);
            }
            info
        })
        .collect();
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let incoming = pod()
        .labels(&[("app", "app7")])
        .anti_in("app", "hostname", &["app7"])
        .affinity_in("app", "zone", &["app8"])
        .preferred_anti(5, term(vec![expr("app", In, &["app7"])], "hostname"))
        .obj();
    let p = plugin();
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let t = std::time::Instant::now();
    assert!(p.pre_filter(&state, &incoming, &refs).status.is_success());
    let pre_filter = t.elapsed();
    let t = std::time::Instant::now();
    let passed = infos
        .iter()
        .filter(|n| p.filter(&state, &incoming, n).is_success())
        .count();
    let filter = t.elapsed();
    // app8 lives in zone z4 only, where no pod is app7.
    assert_eq!(passed, 100);
    let t = std::time::Instant::now();
    assert!(p.pre_score(&state, &incoming, &refs, &refs).is_success());
    let pre_score = t.elapsed();
    let t = std::time::Instant::now();
    let mut scores: Vec<i64> = infos
        .iter()
        .map(|n| p.score(&state, &incoming, n).unwrap())
        .collect();
    assert!(
        p.normalize_score(&state, &incoming, &mut scores)
            .is_success()
    );
    let score = t.elapsed();
    println!(
        "{passed} nodes pass; PreFilter {pre_filter:?}, Filter x5000 {filter:?}, \
         PreScore {pre_score:?}, Score x5000 {score:?}"
    );
}

/// PreFilter's counts and PreScore's weights kept across cycles are what a walk of
/// the whole cluster gives, cycle after cycle, as nodes change (each change with a
/// new stamp), as the incoming pod changes, and for a node without a stamp.
#[test]
fn counts_kept_across_cycles_are_those_of_a_full_walk() {
    install_host();
    let stamp = std::cell::Cell::new(0);
    let stamped = |n: &Node, pods: &[&Pod], with_stamp: bool| {
        let mut info = NodeInfo::new(n.clone());
        for p in pods {
            info.add_pod(p);
        }
        if with_stamp {
            stamp.set(stamp.get() + 1);
            info.stamp = stamp.get();
        }
        info
    };
    let n1 = node("n1", &[("zone", "z1"), ("hostname", "n1")]);
    let n2 = node("n2", &[("zone", "z1"), ("hostname", "n2")]);
    let n3 = node("n3", &[("zone", "z2"), ("hostname", "n3")]);
    let n4 = node("n4", &[("zone", "z3"), ("hostname", "n4")]);
    let p1 = pod()
        .name("p1")
        .labels(&[("app", "a")])
        .anti_in("app", "hostname", &["x"])
        .obj();
    let p2 = pod()
        .name("p2")
        .labels(&[("app", "b")])
        .preferred(5, term(vec![expr("app", In, &["x"])], "zone"))
        .affinity_in("app", "zone", &["x"])
        .obj();
    let p3 = pod().name("p3").labels(&[("app", "a")]).obj();
    let a = pod()
        .name("incoming-a")
        .labels(&[("app", "x")])
        .affinity_in("app", "zone", &["a"])
        .anti_in("app", "hostname", &["b"])
        .preferred(3, term(vec![expr("app", In, &["a"])], "zone"))
        .preferred_anti(2, term(vec![expr("app", In, &["b"])], "hostname"))
        .obj();
    let b = pod()
        .name("incoming-b")
        .labels(&[("app", "y")])
        .preferred(4, term(vec![expr("app", In, &["b"])], "zone"))
        .obj();

    let p = plugin();
    let check = |incoming: &Pod, infos: &[&NodeInfo], step: &str| {
        let terms = terms::PodTerms::of(incoming).unwrap();
        assert_eq!(
            filtering::compute_kept(&p.pre_filter_counts, incoming, &terms, infos),
            filtering::compute(incoming, &terms, infos),
            "PreFilter, {step}"
        );
        assert_eq!(
            scoring::compute_kept(&p.pre_score_weights, &p.args, incoming, &terms, infos),
            scoring::compute(&p.args, incoming, &terms, infos),
            "PreScore, {step}"
        );
    };

    let mut i1 = stamped(&n1, &[&p1], true);
    let mut i2 = stamped(&n2, &[], true);
    let mut i3 = stamped(&n3, &[&p2], true);
    let i4 = stamped(&n4, &[&p3], false);
    check(&a, &[&i1, &i2, &i3, &i4], "first cycle");
    check(&a, &[&i1, &i2, &i3, &i4], "nothing changed");
    i3 = stamped(&n3, &[&p2, &p3], true);
    check(&a, &[&i1, &i2, &i3, &i4], "a pod added");
    i1 = stamped(&n1, &[], true);
    check(&a, &[&i1, &i2, &i3, &i4], "a pod removed");
    let moved = node("n2", &[("zone", "z2"), ("hostname", "n2")]);
    i2 = stamped(&moved, &[&p1], true);
    check(&a, &[&i1, &i2, &i3, &i4], "a node relabelled");
    check(&b, &[&i1, &i2, &i3, &i4], "another incoming pod");
    check(&a, &[&i1, &i2, &i3, &i4], "the first pod again");
    check(&a, &[&i1, &i3, &i4], "a node gone");
    let unstamped = stamped(&n4, &[&p1, &p2], false);
    check(
        &a,
        &[&i1, &i3, &unstamped],
        "a node without a stamp changed",
    );
}

#[test]
fn pods_with_terms_of_their_own_are_not_signable() {
    let p = plugin();
    let t = || term(vec![expr("app", Exists, &[])], "zone");
    for incoming in [
        pod().affinity(t()),
        pod().anti(t()),
        pod().preferred(5, t()),
        pod().preferred_anti(5, t()),
    ] {
        let err = p.sign_pod(&incoming.obj()).unwrap_err();
        assert_eq!(err.code, Code::Unschedulable);
    }
}

#[test]
fn signs_the_namespace_and_labels_existing_terms_select_by() {
    let p = plugin();
    let sign = |b: PodBuilder| p.sign_pod(&b.obj()).unwrap();
    let web = || {
        pod()
            .name("a")
            .namespace("subteam1.team1")
            .labels(&[("app", "web")])
    };
    assert_ne!(sign(web()), sign(web().labels(&[("tier", "front")])));
    assert_ne!(sign(web()), sign(web().namespace("subteam1.team2")));
    // Another pod with the same namespace and labels, elsewhere different.
    let mut other = web().name("b").obj();
    other.tolerations.push(berth_sdk::Toleration {
        key: "k".into(),
        operator: berth_sdk::TolerationOperator::Exists,
        value: String::new(),
        effect: None,
        toleration_seconds: None,
    });
    other.node_selector = labels(&[("zone", "z1")]);
    assert_eq!(sign(web()), p.sign_pod(&other).unwrap());
    // Existing pods' terms judge both alike.
    let nodes = [node("n1", &[("zone", "z1")]), node("n2", &[("zone", "z2")])];
    let existing = [pod()
        .name("e")
        .namespace("subteam1.team1")
        .node("n1")
        .anti_in("app", "zone", &["web"])
        .obj()];
    let (_, a) = run_filter(&p, &web().obj(), &nodes, &existing);
    let (_, b) = run_filter(&p, &other, &nodes, &existing);
    assert_eq!(a, b);
    assert_eq!(a, [existing_fails(), ok()]);
}
