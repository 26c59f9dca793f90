//! Shadow runs through the real host: a candidate module beside a live plugin, run on
//! the same cycles, reports exactly the pods on which it would decide otherwise, never
//! changes a placement, and is promoted by a configuration change that hot-swaps it in.

use berth::clock::VirtualClock;
use berth::cluster::memory::MemoryCluster;
use berth::config::Configuration;
use berth::reload::ReloadSource;
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_artifacts::fixtures::{FIXTURE_PREFER_FIRST_NODE, FIXTURE_PREFER_LAST_NODE};
use berth_sdk::{Container, Node, Pod, ResourceList, Resources};
use berth_tests::runtime;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn node(name: &str, zone: &str) -> Node {
    Node {
        name: name.into(),
        labels: BTreeMap::from([
            ("kubernetes.io/hostname".to_owned(), name.to_owned()),
            ("topology.kubernetes.io/zone".to_owned(), zone.to_owned()),
        ]),
        allocatable: Resources {
            milli_cpu: 1 << 40,
            memory: 1 << 50,
            allowed_pod_number: 1 << 20,
            ..Resources::default()
        },
        ..Node::default()
    }
}

/// A pod, pinned to a node by a hostname nodeSelector when `pin` names one.
fn pod(name: &str, pin: Option<&str>) -> Pod {
    Pod {
        uid: format!("uid-{name}"),
        namespace: "default".into(),
        name: name.into(),
        scheduler_name: "default-scheduler".into(),
        node_selector: pin
            .map(|n| BTreeMap::from([("kubernetes.io/hostname".to_owned(), n.to_owned())]))
            .unwrap_or_default(),
        containers: vec![Container {
            name: "c".into(),
            requests: ResourceList::from([("cpu".to_owned(), 10)]),
            ..Container::default()
        }],
        ..Pod::default()
    }
}

fn scheduler(config: &Path, cluster: Arc<MemoryCluster>) -> Scheduler {
    let c = Configuration::load(config).unwrap();
    let mut s = Scheduler::new(
        &runtime(),
        &c,
        &config.display().to_string(),
        &SchedulerOptions::default(),
        cluster,
        Arc::new(VirtualClock::default()),
    )
    .unwrap();
    for (n, zone) in [("alpha", "z1"), ("mike", "z1"), ("zulu", "z2")] {
        s.add_or_update_node(node(n, zone));
    }
    s
}

/// The pods a shadow of `plugin` disagreed on, with the kinds of each.
fn disagreements(s: &Scheduler, plugin: &str) -> BTreeMap<String, Vec<&'static str>> {
    let reports = s.shadow_reports();
    let r = reports
        .iter()
        .find(|r| r.plugin == plugin)
        .unwrap_or_else(|| panic!("no shadow of {plugin}: {reports:?}"));
    r.recent
        .iter()
        .map(|d| (d.pod.clone(), d.kinds.clone()))
        .collect()
}

/// A configuration scoring with NodePreference (weight 50: it decides) from `live`,
/// with `candidate` as its shadow when given.
fn write_preference_config(dir: &Path, live: &str, candidate: Option<&str>) -> PathBuf {
    let path = dir.join("config.yaml");
    let shadow = candidate
        .map(|c| format!("  plugins:\n  - name: NodePreference\n    shadow: {{path: {c}}}\n"))
        .unwrap_or_default();
    std::fs::write(
        &path,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      enabled: [{{name: NodePreference, weight: 50}}]\nberth:\n  modules:\n  - {{name: NodePreference, path: {live}}}\n{shadow}"
        ),
    )
    .unwrap();
    path
}

/// Live NodePreference prefers alpha, its candidate zulu. Pods pinned to one node
/// leave nothing to score, so only the free pods are reported, each for its scores
/// and its node; every pod is still placed by the live module. Promoting the
/// candidate (a configuration change) hot-swaps it in and ends the shadow.
#[test]
fn a_scoring_candidate_reports_exactly_the_pods_it_would_place_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIXTURE_PREFER_FIRST_NODE, dir.path().join("first.wasm")).unwrap();
    std::fs::copy(FIXTURE_PREFER_LAST_NODE, dir.path().join("last.wasm")).unwrap();
    let config = write_preference_config(dir.path(), "first.wasm", Some("last.wasm"));
    let valid = berth::config_cli::validate(&runtime(), &config, &Default::default()).unwrap();
    assert!(
        valid.contains(&format!(
            "  shadow      NodePreference: candidate {}\n",
            dir.path().join("last.wasm").display()
        )),
        "{valid}"
    );
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(&config, cluster.clone());

    let mut free = BTreeSet::new();
    for i in 0..60 {
        let (name, pin) = match i % 3 {
            0 => (format!("free-{i}"), None),
            1 => (format!("on-mike-{i}"), Some("mike")),
            _ => (format!("on-zulu-{i}"), Some("zulu")),
        };
        if pin.is_none() {
            free.insert(format!("default/{name}"));
        }
        s.add_pod(pod(&name, pin)).unwrap();
    }
    s.run_until_idle();

    let bindings = cluster.bindings();
    assert_eq!(bindings.len(), 60);
    for (uid, (_, node)) in &bindings {
        let want = if uid.contains("free") {
            "alpha"
        } else if uid.contains("mike") {
            "mike"
        } else {
            "zulu"
        };
        assert_eq!(node, want, "{uid}: the candidate must not place pods");
    }
    let found = disagreements(&s, "NodePreference");
    assert_eq!(found.keys().cloned().collect::<BTreeSet<_>>(), free);
    for (pod, kinds) in &found {
        assert_eq!(kinds, &["score", "node"], "{pod}");
    }
    let report = &s.shadow_reports()[0];
    assert_eq!(report.cycles, 60);
    assert_eq!(report.disagreeing_cycles, 20);
    assert_eq!(report.by_kind.get("score"), Some(&20));
    assert_eq!(report.by_kind.get("node"), Some(&20));
    assert_eq!(report.by_kind.get("filter"), None);
    assert!(report.candidate.ends_with("last.wasm"), "{report:?}");
    let detail = &s.shadow_reports()[0].recent[0].detail;
    assert!(
        detail.contains("live picked alpha") && detail.contains("would pick zulu"),
        "{detail}"
    );
    let text = s.metrics_text();
    assert!(
        text.contains("berth_shadow_cycles_total{plugin=\"NodePreference\"} 60\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "berth_shadow_disagreements_total{kind=\"node\",plugin=\"NodePreference\"} 20\n"
        ),
        "{text}"
    );

    // Promote: the candidate becomes the module, the shadow goes.
    write_preference_config(dir.path(), "last.wasm", None);
    let report = s.reload(ReloadSource::File(config.clone())).unwrap();
    assert_eq!(
        report.changed,
        BTreeSet::from(["NodePreference".to_owned()])
    );
    assert!(s.shadow_reports().is_empty());
    s.add_pod(pod("after", None)).unwrap();
    s.run_until_idle();
    assert_eq!(cluster.bindings()["uid-after"].1, "zulu");
}

/// NodeAffinity's candidate is the same module with an added affinity for zone z1:
/// it rejects zulu (zone z2) for every pod. Pods that may go anywhere and pods pinned
/// to zulu are reported (for Filter; those pinned to zulu also for their node); pods
/// pinned to alpha are not, since live rejects what the candidate rejects.
#[test]
fn a_filtering_candidate_reports_exactly_the_pods_whose_verdicts_differ() {
    let dir = tempfile::tempdir().unwrap();
    let affinity = berth_artifacts::PLUGINS
        .iter()
        .find(|a| a.crate_name == "node-affinity")
        .unwrap();
    std::fs::write(dir.path().join("node-affinity.wasm"), affinity.bytes).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\nberth:\n  plugins:\n  - name: NodeAffinity\n    shadow:\n      path: node-affinity.wasm\n      args:\n        addedAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n            nodeSelectorTerms:\n            - matchExpressions:\n              - {key: topology.kubernetes.io/zone, operator: In, values: [z1]}\n",
    )
    .unwrap();
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(&config, cluster.clone());
    let mut want: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    for i in 0..30 {
        let (name, pin) = match i % 3 {
            0 => (format!("free-{i}"), None),
            1 => (format!("on-alpha-{i}"), Some("alpha")),
            _ => (format!("on-zulu-{i}"), Some("zulu")),
        };
        s.add_pod(pod(&name, pin)).unwrap();
        match pin {
            None => {
                want.insert(format!("default/{name}"), vec!["filter"]);
            }
            Some("zulu") => {
                want.insert(format!("default/{name}"), vec!["filter", "node"]);
            }
            _ => {}
        }
    }
    s.run_until_idle();
    let bindings = cluster.bindings();
    assert_eq!(bindings.len(), 30);
    for (uid, (_, node)) in &bindings {
        if uid.contains("on-zulu") {
            assert_eq!(node, "zulu", "{uid}: the candidate must not place pods");
        }
    }
    let mut found = disagreements(&s, "NodeAffinity");
    // A free pod the live cycle happened to send to zulu is also reported for its node.
    for (pod, kinds) in found.iter_mut() {
        let uid = format!("uid-{}", pod.trim_start_matches("default/"));
        if pod.contains("free") && bindings[&uid].1 == "zulu" {
            assert_eq!(kinds, &["filter", "node"], "{pod}");
            kinds.pop();
        }
    }
    assert_eq!(found, want);
    let report = &s.shadow_reports()[0];
    assert_eq!(report.cycles, 30);
    assert_eq!(report.by_kind.get("score"), None);
    let zulu = s.shadow_reports()[0]
        .recent
        .iter()
        .find(|d| d.pod.contains("on-zulu"))
        .unwrap()
        .detail
        .clone();
    assert!(
        zulu.contains("candidate rejects 1 node(s) live lets through (zulu)"),
        "{zulu}"
    );
}

/// What a shadow cannot be: refused with the field and the reason, at start and in a
/// reload alike (the configuration keeps serving).
#[test]
fn a_shadow_that_cannot_be_compared_or_promoted_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIXTURE_PREFER_FIRST_NODE, dir.path().join("first.wasm")).unwrap();
    std::fs::copy(FIXTURE_PREFER_LAST_NODE, dir.path().join("last.wasm")).unwrap();
    let config = write_preference_config(dir.path(), "first.wasm", None);
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(&config, cluster);
    let base = std::fs::read_to_string(&config).unwrap();
    let cases = [
        // A candidate that calls itself by another name could not be promoted.
        (
            "  plugins:\n  - name: NodeAffinity\n    shadow: {path: last.wasm}\n",
            "berth.plugins[0].shadow",
            "module says it is plugin NodePreference",
        ),
        // DefaultBinder neither filters nor scores: nothing to compare.
        (
            "  plugins:\n  - name: DefaultBinder\n    shadow: {path: last.wasm}\n",
            "berth.plugins[0].shadow",
            "compares Filter and Score",
        ),
        (
            "  plugins:\n  - name: NodePreference\n    shadow: {path: missing.wasm}\n",
            "berth.plugins[0].shadow",
            "missing.wasm",
        ),
        (
            "  plugins:\n  - name: NodePreference\n    shadow: {path: last.wasm, sha256: '00'}\n",
            "berth.plugins[0].shadow",
            "sha256",
        ),
    ];
    for (extra, field, reason) in cases {
        std::fs::write(&config, format!("{base}{extra}")).unwrap();
        let e = s.reload(ReloadSource::File(config.clone())).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("{}: {field}: ", config.display())),
            "{text}"
        );
        assert!(text.contains(reason), "{text}");
    }
    assert!(s.shadow_reports().is_empty());
    assert_eq!(s.generation().number, 1);
}

/// `berth simulate` with a configuration naming a candidate reports the shadow run
/// after the pods: its totals and each disagreeing pod with what differed.
#[test]
fn simulate_reports_the_shadow_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIXTURE_PREFER_FIRST_NODE, dir.path().join("first.wasm")).unwrap();
    std::fs::copy(FIXTURE_PREFER_LAST_NODE, dir.path().join("last.wasm")).unwrap();
    let config = write_preference_config(dir.path(), "first.wasm", Some("last.wasm"));
    let mut docs: String = ["alpha", "mike", "zulu"]
        .iter()
        .map(|n| format!("---\napiVersion: v1\nkind: Node\nmetadata: {{name: {n}, labels: {{kubernetes.io/hostname: {n}}}}}\nstatus:\n  allocatable: {{cpu: '8', memory: 16Gi, pods: '110'}}\n"))
        .collect();
    for (name, selector) in [
        ("web-0", ""),
        ("web-1", ""),
        ("pinned", "  nodeSelector: {kubernetes.io/hostname: mike}\n"),
    ] {
        docs.push_str(&format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{selector}  containers:\n  - {{name: c, image: busybox, resources: {{requests: {{cpu: 100m}}}}}}\n"));
    }
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, docs).unwrap();
    let report = berth::simulate::simulate(
        &runtime(),
        &berth::simulate::SimulateOptions {
            files: vec![file],
            config: Some(config),
            ..berth::simulate::SimulateOptions::default()
        },
    )
    .unwrap();
    let placed: BTreeMap<&str, Option<&str>> = report
        .pods
        .iter()
        .map(|p| (p.name.as_str(), p.node.as_deref()))
        .collect();
    assert_eq!(
        placed,
        BTreeMap::from([
            ("pinned", Some("mike")),
            ("web-0", Some("alpha")),
            ("web-1", Some("alpha"))
        ])
    );
    assert_eq!(report.shadows.len(), 1);
    let text = report.to_text();
    let candidate = dir.path().join("last.wasm");
    assert!(
        text.contains(&format!(
            "shadow of NodePreference (profile default-scheduler, candidate {}): compared on 3 cycle(s), disagreed on 2 (node 2, score 2)\n",
            candidate.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("  default/web-0  score,node  Score differs on 3 of 3 node(s): alpha live 100 candidate 0"),
        "{text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("  default/pinned")),
        "{text}"
    );
}
