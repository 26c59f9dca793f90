//! Preemption, case by case against what kube-scheduler does: each case of
//! tests/preemption/cases.yaml is a small cluster (nodes, running pods, budgets) and a
//! pending pod, run through `berth simulate` with the default profile (the real
//! components, DefaultPreemption among them). The pod must end on the expected node
//! (after the evictions, on a later attempt) or stay pending with upstream's message,
//! and exactly the expected pods must be evicted.

use berth::scheduler::SchedulerOptions;
use berth::simulate::{Report, SimulateOptions, simulate};
use berth::wasm::Runtime;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::Arc;

use berth_tests::runtime;

/// A node of the compact form: `{name, cpu, memory, pods, labels, taints,
/// unschedulable}`.
fn node(v: &Value) -> Value {
    let mut alloc = Map::new();
    alloc.insert("cpu".into(), v.get("cpu").cloned().unwrap_or(json!("4")));
    alloc.insert(
        "memory".into(),
        v.get("memory").cloned().unwrap_or(json!("8Gi")),
    );
    alloc.insert(
        "pods".into(),
        v.get("pods").cloned().unwrap_or(json!("110")),
    );
    let mut labels = v.get("labels").cloned().unwrap_or(json!({}));
    labels["kubernetes.io/hostname"] = v["name"].clone();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": v["name"], "labels": labels},
        "spec": {
            "taints": v.get("taints").cloned().unwrap_or(json!([])),
            "unschedulable": v.get("unschedulable").cloned().unwrap_or(json!(false)),
        },
        "status": {"allocatable": alloc},
    })
}

/// A label selector of the compact form: `{labels: {k: v}, exists: [k]}`, as
/// `matchLabels` and `Exists` expressions.
fn selector(v: &Value) -> Value {
    let mut s = json!({"matchLabels": v.get("labels").cloned().unwrap_or(json!({}))});
    if let Some(keys) = v.get("exists").and_then(Value::as_array) {
        s["matchExpressions"] = keys
            .iter()
            .map(|k| json!({"key": k, "operator": "Exists"}))
            .collect();
    }
    s
}

/// Required pod (anti-)affinity terms of the compact form: `[{labels, exists,
/// topology}]`, the topology key defaulting to the hostname label.
fn terms(v: &Value) -> Value {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            json!({
                "labelSelector": selector(t),
                "topologyKey": t.get("topology").cloned()
                    .unwrap_or(json!("kubernetes.io/hostname")),
            })
        })
        .collect()
}

/// A pod of the compact form: `{name, node, cpu, memory, priority, labels, start
/// (hour of 2026-11-01), policy, nominated, terminating, ports, affinity, anti,
/// spread, spec}` (`spec` merged last). `affinity` and `anti` are required pod
/// (anti-)affinity terms (see [`terms`]); `spread` is a list of
/// `{maxSkew (1), topology, labels, exists, when (DoNotSchedule)}`.
fn pod(v: &Value) -> Value {
    let mut requests = Map::new();
    requests.insert("cpu".into(), v.get("cpu").cloned().unwrap_or(json!("1")));
    if let Some(m) = v.get("memory") {
        requests.insert("memory".into(), m.clone());
    }
    let mut container = json!({
        "name": "c",
        "image": "registry.example/app:1",
        "resources": {"requests": requests},
    });
    if let Some(ports) = v.get("ports") {
        container["ports"] = ports
            .as_array()
            .unwrap()
            .iter()
            .map(|p| json!({"containerPort": p, "hostPort": p}))
            .collect();
    }
    let mut spec = json!({"containers": [container]});
    if let Some(n) = v.get("node") {
        spec["nodeName"] = n.clone();
    }
    spec["priority"] = v.get("priority").cloned().unwrap_or(json!(0));
    if let Some(p) = v.get("policy") {
        spec["preemptionPolicy"] = p.clone();
    }
    if let Some(t) = v.get("affinity") {
        spec["affinity"]["podAffinity"] =
            json!({"requiredDuringSchedulingIgnoredDuringExecution": terms(t)});
    }
    if let Some(t) = v.get("anti") {
        spec["affinity"]["podAntiAffinity"] =
            json!({"requiredDuringSchedulingIgnoredDuringExecution": terms(t)});
    }
    if let Some(list) = v.get("spread").and_then(Value::as_array) {
        spec["topologySpreadConstraints"] = list
            .iter()
            .map(|c| {
                json!({
                    "maxSkew": c.get("maxSkew").cloned().unwrap_or(json!(1)),
                    "topologyKey": c["topology"],
                    "whenUnsatisfiable": c.get("when").cloned()
                        .unwrap_or(json!("DoNotSchedule")),
                    "labelSelector": selector(c),
                })
            })
            .collect();
    }
    if let Some(extra) = v.get("spec").and_then(Value::as_object) {
        for (k, x) in extra {
            spec[k] = x.clone();
        }
    }
    let mut metadata = json!({
        "name": v["name"],
        "namespace": v.get("namespace").cloned().unwrap_or(json!("default")),
        "labels": v.get("labels").cloned().unwrap_or(json!({})),
    });
    let mut status = json!({});
    if let Some(h) = v.get("start").and_then(Value::as_u64) {
        status["startTime"] = json!(format!("2026-11-01T{h:02}:00:00Z"));
    }
    if let Some(n) = v.get("nominated") {
        status["nominatedNodeName"] = n.clone();
    }
    if v.get("terminating").and_then(Value::as_bool) == Some(true) {
        metadata["deletionTimestamp"] = json!("2026-11-01T23:00:00Z");
        status["conditions"] = json!([{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
        }]);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status})
}

/// A budget of the compact form: `{name, selector (matchLabels), allowed, disrupted}`.
fn budget(v: &Value) -> Value {
    let disrupted: Map<String, Value> = v
        .get("disrupted")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|n| {
            (
                n.as_str().unwrap().to_owned(),
                json!("2026-11-01T12:00:00Z"),
            )
        })
        .collect();
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": v["name"], "namespace": "default"},
        "spec": {"selector": {"matchLabels": v["selector"]}},
        "status": {
            "disruptionsAllowed": v.get("allowed").cloned().unwrap_or(json!(0)),
            "disruptedPods": disrupted,
        },
    })
}

fn run_case(runtime: &Arc<Runtime>, dir: &Path, case: &Value) -> Result<Report, String> {
    run_case_with(runtime, dir, case, SchedulerOptions::default())
}

fn run_case_with(
    runtime: &Arc<Runtime>,
    dir: &Path,
    case: &Value,
    scheduler: SchedulerOptions,
) -> Result<Report, String> {
    let name = case["name"].as_str().unwrap();
    let mut docs: Vec<Value> = Vec::new();
    for b in case["pdbs"].as_array().into_iter().flatten() {
        docs.push(budget(b));
    }
    for n in case["nodes"].as_array().into_iter().flatten() {
        docs.push(node(n));
    }
    for p in case["pods"].as_array().into_iter().flatten() {
        docs.push(pod(p));
    }
    for p in case["pending"].as_array().into_iter().flatten() {
        docs.push(pod(p));
    }
    let text: String = docs
        .iter()
        .map(|d| format!("---\n{}\n", serde_json::to_string(d).unwrap()))
        .collect();
    let file = dir.join(format!("{}.yaml", name.replace([' ', '/'], "_")));
    std::fs::write(&file, text).unwrap();
    let config = case.get("args").map(|args| {
        let path = dir.join(format!("{}.config.yaml", name.replace([' ', '/'], "_")));
        let cfg = json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{
                "schedulerName": "default-scheduler",
                "pluginConfig": [{"name": "DefaultPreemption", "args": args}],
            }],
        });
        std::fs::write(&path, serde_json::to_string(&cfg).unwrap()).unwrap();
        path
    });
    let config = config.or_else(|| {
        case.get("config").map(|cfg| {
            let path = dir.join(format!("{}.config.yaml", name.replace([' ', '/'], "_")));
            std::fs::write(&path, serde_json::to_string(cfg).unwrap()).unwrap();
            path
        })
    });
    simulate(
        runtime,
        &SimulateOptions {
            files: vec![file],
            config,
            scheduler,
            ..SimulateOptions::default()
        },
    )
    .map_err(|e| format!("{e:#}"))
}

fn check(case: &Value, report: &Report) -> Vec<String> {
    let name = case["name"].as_str().unwrap();
    let expect = &case["expect"];
    let mut problems = Vec::new();
    let mut evicted: Vec<String> = report.evicted.iter().map(|e| e.name.clone()).collect();
    evicted.sort();
    let mut want: Vec<String> = expect["evicted"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    want.sort();
    if evicted != want {
        problems.push(format!("{name}: evicted {evicted:?}, expected {want:?}"));
    }
    for (pod, want) in expect["placed"].as_object().into_iter().flatten() {
        let Some(p) = report.pods.iter().find(|p| &p.name == pod) else {
            problems.push(format!("{name}: no report for pod {pod}"));
            continue;
        };
        let want_node = want.as_str().map(str::to_owned);
        if p.node != want_node {
            problems.push(format!(
                "{name}: {pod} on {:?}, expected {want_node:?} ({})",
                p.node, p.message
            ));
        }
    }
    for (pod, want) in expect["message"].as_object().into_iter().flatten() {
        let Some(p) = report.pods.iter().find(|p| &p.name == pod) else {
            continue;
        };
        if p.message != want.as_str().unwrap() {
            problems.push(format!(
                "{name}: {pod} says\n    {:?}\n  expected\n    {:?}",
                p.message,
                want.as_str().unwrap()
            ));
        }
    }
    problems
}

#[test]
fn preemption_follows_kube_scheduler_case_by_case() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("preemption/cases.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let table: Value = berth::yaml::from_str(&text).unwrap();
    let cases = table["cases"].as_array().expect("cases");
    assert!(cases.len() >= 25, "only {} cases", cases.len());
    let runtime = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let refused = case["expect"]["error"].as_bool() == Some(true);
        match (run_case(&runtime, dir.path(), case), refused) {
            (Ok(report), false) => problems.extend(check(case, &report)),
            (Err(e), false) => problems.push(format!("{name}: {e}")),
            (Ok(_), true) => problems.push(format!("{name}: ran, expected a refusal")),
            (Err(e), true) => {
                if !e.contains("DefaultPreemption") {
                    problems.push(format!("{name}: refused without naming the plugin: {e}"));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} cases disagree:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
}

/// The same table with two workers: DefaultPreemption's dry runs then run on the
/// workers (SelectVictimsOnNode per worker), and every case must come out the same.
#[test]
fn preemption_follows_kube_scheduler_with_the_dry_run_on_two_workers() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("preemption/cases.yaml");
    let table: Value = berth::yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let runtime = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    for case in table["cases"].as_array().unwrap() {
        if case["expect"]["error"].as_bool() == Some(true) {
            continue;
        }
        let mut options = SchedulerOptions::default();
        options.framework.parallelism = 2;
        match run_case_with(&runtime, dir.path(), case, options) {
            Ok(report) => problems.extend(check(case, &report)),
            Err(e) => problems.push(format!("{}: {e}", case["name"])),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A small deterministic generator (xorshift), so each seed is one cluster.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A cluster of `seed`: full nodes of low-priority pods (mixed priorities, start
/// times, budgets), a few nodes of high-priority pods, and pending pods that fit
/// nowhere without preemption; DefaultPreemption looks for few candidates, so the
/// search stops inside a batch of dry runs.
fn seeded_case(seed: u64) -> Value {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let n = 10 + rng.below(40);
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    for i in 0..n {
        let node = format!("n{i:02}");
        nodes.push(json!({"name": node, "cpu": "4"}));
        let per = 2 + rng.below(3);
        for j in 0..per {
            let priority = if rng.below(6) == 0 {
                2000
            } else {
                [0, 10, 100][rng.below(3) as usize]
            };
            let app = ["db", "web", "batch"][rng.below(3) as usize];
            pods.push(json!({
                "name": format!("{node}-p{j}"),
                "node": node,
                "cpu": format!("{}m", 4000 / per - rng.below(200)),
                "priority": priority,
                "start": rng.below(20),
                "labels": {"app": app},
            }));
        }
    }
    let pending: Vec<Value> = (0..3)
        .map(|k| {
            json!({
                "name": format!("high-{k}"),
                "cpu": format!("{}m", 1500 + rng.below(2000)),
                "priority": 1000,
            })
        })
        .collect();
    json!({
        "name": format!("seed {seed}"),
        "nodes": nodes,
        "pods": pods,
        "pending": pending,
        "pdbs": [{"name": "db", "selector": {"app": "db"}, "allowed": rng.below(3)}],
        "args": {
            "minCandidateNodesPercentage": rng.below(30),
            "minCandidateNodesAbsolute": 1 + rng.below(5),
        },
    })
}

/// Each pod's name, node and message.
type Placements = Vec<(String, Option<String>, String)>;

/// What a run decided: each pod's node and message, and the evicted pods in order.
fn outcome(report: &Report) -> (Placements, Vec<String>) {
    (
        report
            .pods
            .iter()
            .map(|p| (p.name.clone(), p.node.clone(), p.message.clone()))
            .collect(),
        report.evicted.iter().map(|e| e.name.clone()).collect(),
    )
}

#[test]
fn the_parallel_dry_run_chooses_the_node_and_victims_of_the_sequential_one() {
    let runtime = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut evictions = 0;
    for seed in 1..=12 {
        let case = seeded_case(seed);
        let runs: Vec<_> = [1, 2, 3]
            .into_iter()
            .map(|parallelism| {
                let mut options = SchedulerOptions::default();
                options.framework.parallelism = parallelism;
                let report = run_case_with(&runtime, dir.path(), &case, options)
                    .unwrap_or_else(|e| panic!("seed {seed}, parallelism {parallelism}: {e}"));
                outcome(&report)
            })
            .collect();
        assert_eq!(runs[0], runs[1], "seed {seed}: one worker and two disagree");
        assert_eq!(
            runs[0], runs[2],
            "seed {seed}: one worker and three disagree"
        );
        evictions += runs[0].1.len();
    }
    assert!(
        evictions > 12,
        "the clusters made too few preemptions ({evictions}) to compare"
    );
}

/// A module without the SelectVictimsOnNode export (as every module built before
/// WIT 0.9.3) is answered `None` when it asks for a batch of dry runs, even with
/// workers to spare, and still preempts with its own what-ifs.
#[test]
fn a_post_filter_module_without_select_victims_still_preempts() {
    let case = json!({
        "name": "naive",
        "nodes": [{"name": "n1", "cpu": "2"}, {"name": "n2", "cpu": "2"}],
        "pods": [
            {"name": "a", "node": "n1", "cpu": "2", "priority": 1000},
            {"name": "b", "node": "n2", "cpu": "1", "priority": 1},
            {"name": "c", "node": "n2", "cpu": "1", "priority": 2},
        ],
        "pending": [{"name": "high", "cpu": "2", "priority": 100}],
        "config": {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "berth": {"modules": [{
                "name": "NaivePreemption",
                "path": berth_artifacts::fixtures::FIXTURE_NAIVE_PREEMPTION,
            }]},
            "profiles": [{
                "schedulerName": "default-scheduler",
                "plugins": {"postFilter": {
                    "disabled": [{"name": "DefaultPreemption"}],
                    "enabled": [{"name": "NaivePreemption"}],
                }},
            }],
        },
    });
    let runtime = runtime();
    let dir = tempfile::tempdir().unwrap();
    for parallelism in [1, 2] {
        let mut options = SchedulerOptions::default();
        options.framework.parallelism = parallelism;
        let report = run_case_with(&runtime, dir.path(), &case, options).unwrap();
        let (pods, mut evicted) = outcome(&report);
        evicted.sort();
        assert_eq!(evicted, ["b", "c"], "parallelism {parallelism}: {pods:?}");
        let high = pods.iter().find(|p| p.0 == "high").unwrap();
        assert_eq!(
            high.1.as_deref(),
            Some("n2"),
            "parallelism {parallelism}: {high:?}"
        );
    }
}

/// A scheduler with the default profile that binds and evicts through `cluster`, on
/// the virtual `clock`: the tests below drive its cycles one by one.
fn embedded_scheduler(
    cluster: Arc<dyn berth::cluster::Binder>,
    clock: Arc<berth::clock::VirtualClock>,
) -> berth::scheduler::Scheduler {
    berth::scheduler::Scheduler::new(
        &runtime(),
        &berth::config::Configuration::default(),
        "<default>",
        &berth::scheduler::SchedulerOptions::default(),
        cluster,
        clock,
    )
    .unwrap()
}

/// The one object of a manifest document, as the embedded cluster reads it.
fn object_of(v: Value) -> berth::cluster::manifest::Object {
    let docs = berth::cluster::manifest::load_str("case", &v.to_string()).unwrap();
    docs.into_iter().next().unwrap().object
}

/// A node of the compact form (see [`node`]), as the scheduler takes it.
fn node_object(v: Value) -> berth_sdk::Node {
    match object_of(node(&v)) {
        berth::cluster::manifest::Object::Node(n) => n,
        other => panic!("not a node: {other:?}"),
    }
}

/// A pod of the compact form (see [`pod`]), as the scheduler takes it.
fn pod_object(v: Value) -> berth_sdk::Pod {
    match object_of(pod(&v)) {
        berth::cluster::manifest::Object::Pod(p) => p,
        other => panic!("not a pod: {other:?}"),
    }
}

/// While the victims' room waits for the preemptor (nominated, in backoff), a pod of
/// lower priority that arrives meanwhile must not take it: the nomination counts on
/// the node. Then the preemptor lands there.
#[test]
fn the_room_made_by_preemption_is_kept_for_the_preemptor() {
    use berth::cluster::memory::MemoryCluster;
    use berth::scheduler::Scheduler;

    let cluster = Arc::new(MemoryCluster::new());
    let mut scheduler = embedded_scheduler(cluster.clone(), Arc::default());
    scheduler.add_or_update_node(node_object(json!({"name": "n1", "cpu": "2"})));
    let mut uids = std::collections::HashMap::new();
    let mut add = |scheduler: &mut Scheduler, v: Value| {
        let p = pod_object(v);
        uids.insert(p.name.clone(), p.uid.clone());
        scheduler.add_pod(p).unwrap();
    };
    add(
        &mut scheduler,
        json!({"name": "low", "node": "n1", "cpu": "2", "priority": 1}),
    );
    add(
        &mut scheduler,
        json!({"name": "high", "cpu": "2", "priority": 100}),
    );
    // High's first attempt: nothing fits; it preempts low and waits out its backoff.
    assert!(scheduler.schedule_one());
    let evicted: Vec<String> = cluster.evictions().into_iter().map(|e| e.key).collect();
    assert_eq!(evicted, ["default/low"]);
    assert_eq!(
        scheduler.nominated().get("n1").map(|p| p.len()),
        Some(1),
        "high is nominated to n1"
    );
    // Meanwhile a pod of lower priority arrives and is tried first.
    add(
        &mut scheduler,
        json!({"name": "medium", "cpu": "2", "priority": 50}),
    );
    assert!(scheduler.schedule_one());
    let medium = scheduler.outcome(&uids["medium"]).unwrap();
    assert_eq!(medium.node, None, "{}", medium.message);
    // Then the preemptor lands on the room made for it.
    scheduler.run_until_idle();
    let high = scheduler.outcome(&uids["high"]).unwrap();
    assert_eq!(high.node.as_deref(), Some("n1"), "{}", high.message);
    assert_eq!(high.attempts, 2);
    let medium = scheduler.outcome(&uids["medium"]).unwrap();
    assert_eq!(medium.node, None);
    assert_eq!(cluster.evictions().len(), 1, "medium preempts nobody");
}

/// The embedded cluster with its evictions answered by `evict` (which may pass them
/// on to it), and deletions reported by a watch or not: the tests' own clusters.
struct CustomEvictions {
    inner: Arc<berth::cluster::memory::MemoryCluster>,
    evict: Box<EvictFn>,
    reports_deletions: bool,
}

type EvictFn = dyn Fn(
        &berth::cluster::memory::MemoryCluster,
        &berth_sdk::Pod,
        &berth_sdk::Pod,
        &str,
    ) -> Result<(), berth::cluster::WriteError>
    + Send
    + Sync;

impl berth::cluster::Binder for CustomEvictions {
    fn bind(&self, pod: &berth_sdk::Pod, node: &str) -> Result<(), berth::cluster::WriteError> {
        self.inner.bind(pod, node)
    }
    fn nominate(&self, pod: &berth_sdk::Pod, node: &str) -> Result<(), berth::cluster::WriteError> {
        self.inner.nominate(pod, node)
    }
    fn evict(
        &self,
        victim: &berth_sdk::Pod,
        by: &berth_sdk::Pod,
        message: &str,
    ) -> Result<(), berth::cluster::WriteError> {
        (self.evict)(&self.inner, victim, by, message)
    }
    fn reports_deletions(&self) -> bool {
        self.reports_deletions
    }
}

/// When an eviction fails the preemption cannot succeed: as upstream, the victims
/// left are spared and the preemptor goes back to activeQ at once instead of waiting
/// out its backoff for room that will not come.
#[test]
fn a_failed_eviction_spares_the_other_victims_and_retries_the_preemptor_at_once() {
    use berth::cluster::memory::MemoryCluster;
    use berth::queue::QueueName;

    let memory = Arc::new(MemoryCluster::new());
    // The victims are evicted most important first: `mid` is asked first and refused.
    let cluster = Arc::new(CustomEvictions {
        inner: memory.clone(),
        evict: Box::new(
            |inner: &MemoryCluster, victim: &berth_sdk::Pod, by: &berth_sdk::Pod, message: &str| {
                if victim.name == "mid" {
                    return Err(berth::cluster::WriteError::Refused(
                        "admission webhook denied the request".to_owned(),
                    ));
                }
                berth::cluster::Binder::evict(inner, victim, by, message)
            },
        ),
        reports_deletions: false,
    });
    let mut scheduler = embedded_scheduler(cluster, Arc::default());
    scheduler.add_or_update_node(node_object(json!({"name": "n1", "cpu": "2"})));
    let mut uids = std::collections::HashMap::new();
    for v in [
        json!({"name": "least", "node": "n1", "cpu": "1", "priority": 1}),
        json!({"name": "mid", "node": "n1", "cpu": "1", "priority": 2}),
        json!({"name": "high", "cpu": "2", "priority": 100}),
    ] {
        let p = pod_object(v);
        uids.insert(p.name.clone(), p.uid.clone());
        scheduler.add_pod(p).unwrap();
    }
    assert!(scheduler.schedule_one());
    assert!(memory.evictions().is_empty(), "{:?}", memory.evictions());
    assert_eq!(
        scheduler.queue_of(&uids["high"]),
        Some(QueueName::Active),
        "the preemptor waits for a backoff after a failed eviction"
    );
}

/// Evictions that wait until the test lets them through, as evictions do behind a
/// slow API server.
#[derive(Default)]
struct SlowEvictions {
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
    /// Eviction requests made, and those answered.
    asked: std::sync::atomic::AtomicUsize,
    answered: std::sync::atomic::AtomicUsize,
}

impl SlowEvictions {
    fn let_through(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    /// Waits until let through, then evicts from `inner`.
    fn evict(
        &self,
        inner: &berth::cluster::memory::MemoryCluster,
        victim: &berth_sdk::Pod,
        by: &berth_sdk::Pod,
        message: &str,
    ) -> Result<(), berth::cluster::WriteError> {
        use std::sync::atomic::Ordering;
        self.asked.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        drop(open);
        let r = berth::cluster::Binder::evict(inner, victim, by, message);
        self.answered.fetch_add(1, Ordering::SeqCst);
        r
    }
}

/// Waits (a few seconds at most) until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Upstream's "preempting" set: while a preemptor's evictions are on their way it
/// waits at PreEnqueue, so a cluster event that would retry it meanwhile cannot make
/// it choose victims again (the pods it is evicting are not terminating yet); when
/// the evictions end it is activated and lands where they made room.
#[test]
fn a_preemptor_waits_for_its_evictions_and_does_not_choose_victims_again() {
    use berth::clock::{Clock, VirtualClock};
    use berth::cluster::memory::MemoryCluster;
    use berth::queue::QueueName;
    use std::sync::atomic::Ordering;

    let memory = Arc::new(MemoryCluster::new());
    // A remote-like cluster: its watch reports deletions.
    let slow = Arc::new(SlowEvictions::default());
    let gate = slow.clone();
    let cluster = Arc::new(CustomEvictions {
        inner: memory.clone(),
        evict: Box::new(
            move |inner: &MemoryCluster,
                  victim: &berth_sdk::Pod,
                  by: &berth_sdk::Pod,
                  message: &str| { gate.evict(inner, victim, by, message) },
        ),
        reports_deletions: true,
    });
    let clock = Arc::new(VirtualClock::default());
    let mut scheduler = embedded_scheduler(cluster, clock.clone());
    scheduler.add_or_update_node(node_object(json!({"name": "n1", "cpu": "2"})));
    let low = pod_object(json!({"name": "low", "node": "n1", "cpu": "2", "priority": 1}));
    let high = pod_object(json!({"name": "high", "cpu": "2", "priority": 100}));
    scheduler.add_pod(low.clone()).unwrap();
    scheduler.add_pod(high.clone()).unwrap();

    // High's first attempt: nothing fits; it preempts low, whose eviction hangs.
    assert!(scheduler.schedule_one());
    wait_until("the eviction asked", || {
        slow.asked.load(Ordering::SeqCst) == 1
    });
    assert_eq!(scheduler.queue_of(&high.uid), Some(QueueName::Gated));

    // Meanwhile a node joins (too small for high): an event that retries pods
    // NodeResourcesFit rejected. Backoffs and the unschedulable pods' timeout pass too.
    scheduler.add_or_update_node(node_object(json!({"name": "n2", "cpu": "1"})));
    let later = clock.now() + std::time::Duration::from_secs(600);
    clock.advance_to(later);
    scheduler.poll(later);
    scheduler.flush_backoff(later);
    scheduler.flush_unschedulable_leftover(later);
    assert!(
        !scheduler.schedule_one(),
        "the preemptor was tried again while its evictions were under way"
    );
    assert_eq!(scheduler.queue_of(&high.uid), Some(QueueName::Gated));
    let held = scheduler.queue().get(&high.uid).unwrap();
    assert_eq!(held.gated_by.as_deref(), Some("DefaultPreemption"));
    assert_eq!(
        held.last_failure.as_deref(),
        Some("DefaultPreemption: waiting for the preemption for this pod to be finished")
    );

    // The eviction goes through and the watch reports low gone: high is let in and
    // lands on n1, with no second eviction.
    slow.let_through();
    wait_until("the eviction answered", || {
        slow.answered.load(Ordering::SeqCst) == 1
    });
    scheduler.delete_pod(&low.uid);
    wait_until("the preemptor activated", || {
        scheduler.poll(clock.now());
        scheduler.queue_of(&high.uid) != Some(QueueName::Gated)
    });
    scheduler.run_until_idle();
    let outcome = scheduler.outcome(&high.uid).unwrap();
    assert_eq!(outcome.node.as_deref(), Some("n1"), "{}", outcome.message);
    assert_eq!(slow.asked.load(Ordering::SeqCst), 1, "low evicted twice");
    let evicted: Vec<String> = memory.evictions().into_iter().map(|e| e.key).collect();
    assert_eq!(evicted, ["default/low"]);
}
