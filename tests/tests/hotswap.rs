//! Hot swap through the real host: a plugin module swapped under load (by replacing
//! its file and by pointing the configuration elsewhere), a bad module refused in
//! between while the old one keeps serving, the pods a reconfigured plugin rejected
//! retried, a QueueSort replaced with the queue carried over, and the changes a
//! reload refuses.

use berth::clock::VirtualClock;
use berth::cluster::memory::MemoryCluster;
use berth::config::Configuration;
use berth::metrics::AttemptResult;
use berth::queue::QueueName;
use berth::reload::ReloadSource;
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_artifacts::fixtures::{
    FIXTURE_PREFER_FIRST_NODE, FIXTURE_PREFER_LAST_NODE, FIXTURE_WRONG_VERSION,
};
use berth_sdk::{Container, Node, Pod, ResourceList, Resources};
use berth_tests::runtime;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn node(name: &str) -> Node {
    Node {
        name: name.into(),
        labels: BTreeMap::from([("kubernetes.io/hostname".to_owned(), name.to_owned())]),
        allocatable: Resources {
            milli_cpu: 1 << 40,
            memory: 1 << 50,
            allowed_pod_number: 1 << 20,
            ..Resources::default()
        },
        ..Node::default()
    }
}

fn pod(name: &str, cpu: i64) -> Pod {
    Pod {
        uid: format!("uid-{name}"),
        namespace: "default".into(),
        name: name.into(),
        scheduler_name: "default-scheduler".into(),
        containers: vec![Container {
            name: "c".into(),
            requests: ResourceList::from([("cpu".to_owned(), cpu)]),
            ..Container::default()
        }],
        ..Pod::default()
    }
}

/// A configuration that scores with NodePreference (weight 50: it decides) from
/// `module`, with `extra` appended to the profile. The plugins that keep every pod of
/// a node in their replicas are left out: the pods pile up on one node, and resending
/// it whole after each binding would make the test quadratic.
fn write_config(dir: &Path, module: &str, extra: &str) -> PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      disabled: [{{name: InterPodAffinity}}, {{name: PodTopologySpread}}]\n    score:\n      enabled: [{{name: NodePreference, weight: 50}}]\n{extra}berth:\n  modules:\n  - {{name: NodePreference, path: {module}}}\n"
        ),
    )
    .unwrap();
    path
}

fn scheduler(config: &Path, cluster: Arc<MemoryCluster>) -> Scheduler {
    let c = Configuration::load(config).unwrap();
    let options = SchedulerOptions {
        max_attempts: 20,
        ..SchedulerOptions::default()
    };
    let mut s = Scheduler::new(
        &runtime(),
        &c,
        &config.display().to_string(),
        &options,
        cluster,
        Arc::new(VirtualClock::default()),
    )
    .unwrap();
    for n in ["alpha", "mike", "zulu"] {
        s.add_or_update_node(node(n));
    }
    s
}

/// Where the scheduling cycle put a pod (assumed or bound), if it was scheduled.
fn decided(s: &Scheduler, uid: &str) -> Option<String> {
    s.cache()
        .pod(uid)
        .map(|p| p.node_name.clone())
        .filter(|n| !n.is_empty())
}

/// Thousands of pods scheduled while NodePreference's module is swapped 20 times
/// between a build that prefers alpha and one that prefers zulu, half by replacing the
/// file and half by pointing the configuration at the other file, each swap with pods
/// still waiting in the queue and binding cycles under way; a module of another WIT
/// version is refused in between. Every pod is bound exactly once, each where the
/// module serving at its scheduling cycle sends it; the refused module never serves.
#[test]
fn a_module_swapped_twenty_times_under_load_loses_no_pod_and_binds_none_twice() {
    const ROUNDS: usize = 21;
    const PER_ROUND: usize = 150;
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.wasm");
    let last = dir.path().join("last.wasm");
    std::fs::copy(FIRST, &first).unwrap();
    std::fs::copy(LAST, &last).unwrap();
    let module = dir.path().join("preference.wasm");
    std::fs::copy(FIRST, &module).unwrap();
    let config = write_config(dir.path(), "preference.wasm", "");
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(&config, cluster.clone());
    let reload = |s: &mut Scheduler| s.reload(ReloadSource::File(config.clone()));

    // Where each pod was sent, checked against the preference serving at its cycle.
    let mut want: BTreeMap<String, &str> = BTreeMap::new();
    let mut uids: Vec<String> = Vec::new();
    let take_decisions = |s: &Scheduler,
                          uids: &[String],
                          want: &mut BTreeMap<String, &str>,
                          prefers: &'static str| {
        for uid in uids {
            if want.contains_key(uid) {
                continue;
            }
            if let Some(n) = decided(s, uid) {
                assert_eq!(n, prefers, "{uid}");
                want.insert(uid.clone(), prefers);
            }
        }
    };
    let mut prefers = "alpha";
    for round in 0..ROUNDS {
        for i in 0..PER_ROUND {
            s.add_pod(pod(&format!("r{round}-p{i}"), 10)).unwrap();
            uids.push(format!("uid-r{round}-p{i}"));
        }
        // Fewer cycles than pods came, so that a swap always finds pods waiting in the
        // queue (and binding cycles under way).
        for _ in 0..PER_ROUND * 2 / 3 {
            assert!(s.schedule_one());
        }
        take_decisions(&s, &uids, &mut want, prefers);
        if round == ROUNDS - 1 {
            break;
        }
        if round == 9 {
            // A module of another WIT version where the module was: refused, the
            // running one keeps serving.
            std::fs::copy(FIXTURE_WRONG_VERSION, &module).unwrap();
            let e = reload(&mut s).unwrap_err();
            assert_eq!(e.plugin.as_deref(), Some("NodePreference"));
            assert_eq!(e.module.as_deref(), Some(module.to_str().unwrap()));
            assert_eq!(e.field.as_deref(), Some("berth.modules[0]"));
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("{}: berth.modules[0]: ", config.display()))
                    && text.contains("berth:scheduler@0.1.0"),
                "{text}"
            );
            for _ in 0..10 {
                assert!(s.schedule_one());
            }
            take_decisions(&s, &uids, &mut want, prefers);
            std::fs::copy(if prefers == "alpha" { FIRST } else { LAST }, &module).unwrap();
        }
        let next = if prefers == "alpha" { "zulu" } else { "alpha" };
        let (file, other) = if next == "alpha" {
            (FIRST, "first.wasm")
        } else {
            (LAST, "last.wasm")
        };
        if round % 2 == 0 {
            // The file replaced in place.
            std::fs::copy(file, &module).unwrap();
        } else {
            // The configuration pointed at the other file.
            write_config(dir.path(), other, "");
        }
        let report = reload(&mut s).unwrap();
        assert_eq!(
            report.changed,
            BTreeSet::from(["NodePreference".to_owned()]),
            "round {round}"
        );
        prefers = next;
        if round % 2 == 1 {
            // Back to the file that swaps in place, with the same bytes: a reload
            // (the module's path changed) and the same decisions.
            std::fs::copy(file, &module).unwrap();
            write_config(dir.path(), "preference.wasm", "");
            reload(&mut s).unwrap();
        }
    }
    s.run_until_idle();
    take_decisions(&s, &uids, &mut want, prefers);

    let bindings = cluster.bindings();
    assert_eq!(bindings.len(), ROUNDS * PER_ROUND, "a pod was lost");
    assert_eq!(want.len(), ROUNDS * PER_ROUND);
    let wrong: Vec<String> = want
        .iter()
        .filter(|(uid, node)| bindings.get(*uid).map(|(_, n)| n.as_str()) != Some(**node))
        .map(|(uid, node)| format!("{uid}: want {node}, got {:?}", bindings.get(uid)))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} misplaced: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    for uid in want.keys() {
        let o = s.outcome(uid).unwrap();
        assert_eq!(o.attempts, 1, "{uid}: {o:?}");
        assert!(
            o.message.starts_with("Successfully assigned"),
            "{uid}: {o:?}"
        );
    }
    assert!(s.is_quiet());
    // One scheduling cycle per pod, none failed: nothing was bound twice or retried.
    assert_eq!(
        s.metrics().attempts(AttemptResult::Scheduled),
        (ROUNDS * PER_ROUND) as u64
    );
    assert_eq!(s.metrics().attempts(AttemptResult::Error), 0);
    assert_eq!(s.metrics().reloads("NodePreference", "success"), 30);
    assert_eq!(s.metrics().reloads("NodePreference", "refused"), 1);
    assert_eq!(s.generation().number, 31);
    let text = s.metrics_text();
    assert!(
        text.contains(
            "berth_plugin_reloads_total{plugin=\"NodePreference\",result=\"refused\"} 1\n"
        ),
        "{text}"
    );
}

const FIRST: &str = FIXTURE_PREFER_FIRST_NODE;
const LAST: &str = FIXTURE_PREFER_LAST_NODE;

/// NodeAffinity's args require a label no node has: the pods are rejected by
/// NodeAffinity and wait as unschedulable. A reload that drops those args retries them
/// at once (no cluster event needed): the one that fits now is bound, the one too big
/// for every node waits again, rejected by NodeResourcesFit alone.
#[test]
fn pods_a_reconfigured_plugin_rejected_are_retried_at_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIRST, dir.path().join("preference.wasm")).unwrap();
    let strict = "  pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          - matchExpressions:\n            - {key: zone, operator: In, values: [nowhere]}\n";
    let config = write_config(dir.path(), "preference.wasm", strict);
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(&config, cluster.clone());
    s.add_pod(pod("picky", 10)).unwrap();
    s.add_pod(pod("huge", 1 << 41)).unwrap();
    s.run_until_idle();
    assert_eq!(s.queue_of("uid-picky"), Some(QueueName::Unschedulable));
    assert_eq!(s.queue_of("uid-huge"), Some(QueueName::Unschedulable));
    assert!(
        s.outcome("uid-picky").unwrap().message.contains("affinity"),
        "{:?}",
        s.outcome("uid-picky")
    );

    // Args NodeAffinity refuses: the reload is refused, naming the args' field.
    let bad = "  pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity: 7\n";
    write_config(dir.path(), "preference.wasm", bad);
    let e = s.reload(ReloadSource::File(config.clone())).unwrap_err();
    assert_eq!(e.plugin.as_deref(), Some("NodeAffinity"));
    assert_eq!(
        e.field.as_deref(),
        Some("profiles[0].pluginConfig[0].args"),
        "{e}"
    );
    assert_eq!(s.queue_of("uid-picky"), Some(QueueName::Unschedulable));

    write_config(dir.path(), "preference.wasm", "");
    let report = s.reload(ReloadSource::File(config.clone())).unwrap();
    assert_eq!(report.changed, BTreeSet::from(["NodeAffinity".to_owned()]));
    assert_eq!(report.moved, 2);
    s.run_until_idle();
    assert_eq!(s.queue_of("uid-huge"), Some(QueueName::Unschedulable));
    let huge = &s.outcome("uid-huge").unwrap().message;
    assert!(
        huge.contains("Insufficient cpu") && !huge.contains("affinity"),
        "{huge}"
    );
    assert_eq!(
        cluster.bindings().get("uid-picky").map(|(_, n)| n.as_str()),
        Some("alpha")
    );
    assert_eq!(s.metrics().reloads("NodeAffinity", "success"), 1);
    assert_eq!(s.metrics().reloads("NodeAffinity", "refused"), 1);

    // Touched, not changed: nothing swapped.
    let report = s.reload(ReloadSource::File(config.clone())).unwrap();
    assert!(report.changed.is_empty());
    assert_eq!(s.generation().number, 2);
}

/// QueueSort served by another module (the built-in PrioritySort's component, named
/// by path): the swap gives every waiting pod its key from the new module, and they
/// pop in the same order. A change of the profiles' scheduler names is refused.
#[test]
fn a_queue_sort_swap_rekeys_the_queue_and_renaming_a_profile_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIRST, dir.path().join("preference.wasm")).unwrap();
    let config = write_config(dir.path(), "preference.wasm", "");
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(&config, cluster.clone());
    for (i, prio) in [1, 5, 3].iter().enumerate() {
        let mut p = pod(&format!("p{i}"), 10);
        p.priority = *prio;
        s.add_pod(p).unwrap();
    }
    let mut c = Configuration::load(&config).unwrap();
    c.berth
        .as_mut()
        .unwrap()
        .modules
        .push(berth::config::ModuleSource::file(
            "PrioritySort",
            berth_artifacts::plugin_paths::PRIORITY_SORT,
        ));
    let report = s
        .reload(ReloadSource::Config {
            config: Box::new(c.clone()),
            file: "edited.yaml".into(),
        })
        .unwrap();
    assert_eq!(report.changed, BTreeSet::from(["PrioritySort".to_owned()]));
    assert_eq!(report.rekeyed, 3);
    assert!(s.schedule_one());
    assert!(s.schedule_one());
    s.run_until_idle();
    let order: Vec<String> = ["uid-p1", "uid-p2", "uid-p0"]
        .iter()
        .map(|u| s.outcome(u).unwrap().name.clone())
        .collect();
    assert_eq!(order, ["p1", "p2", "p0"]);
    assert_eq!(cluster.bindings().len(), 3);

    c.profiles[0].scheduler_name = Some("other".into());
    let e = s
        .reload(ReloadSource::Config {
            config: Box::new(c),
            file: "edited.yaml".into(),
        })
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("profiles"));
    assert!(e.to_string().contains("scheduler names changed"), "{e}");
    assert_eq!(s.metrics().reloads("", "refused"), 1);
    assert!(s.serves("default-scheduler"));
}

/// `berth simulate` takes a KubeSchedulerConfiguration in its timeline as `berth run`
/// takes an edited file: the pods after it follow the new module; one naming a module
/// that does not exist is refused and the pods after it follow the module that serves.
#[test]
fn a_simulated_timeline_reloads_the_configuration_it_carries() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIRST, dir.path().join("first.wasm")).unwrap();
    std::fs::copy(LAST, dir.path().join("last.wasm")).unwrap();
    let config = write_config(dir.path(), "first.wasm", "");
    let reconfigure = |module: &str| {
        format!(
            "---\n{}",
            std::fs::read_to_string(write_config(dir.path(), module, "")).unwrap()
        )
    };
    let pods = |prefix: &str| -> String {
        (0..3)
            .map(|i| format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {prefix}-{i}}}\nspec:\n  containers:\n  - {{name: c, image: busybox, resources: {{requests: {{cpu: 100m}}}}}}\n"))
            .collect()
    };
    let nodes: String = ["alpha", "mike", "zulu"]
        .iter()
        .map(|n| format!("---\napiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\nstatus:\n  allocatable: {{cpu: '8', memory: 16Gi, pods: '110'}}\n"))
        .collect();
    let timeline = format!(
        "{nodes}{}{}{}{}{}",
        pods("before"),
        reconfigure("last.wasm"),
        pods("after"),
        reconfigure("missing.wasm"),
        pods("refused")
    );
    // The configuration the scheduler starts with (write_config wrote the last one).
    write_config(dir.path(), "first.wasm", "");
    let file = dir.path().join("timeline.yaml");
    std::fs::write(&file, timeline).unwrap();
    let report = berth::simulate::simulate(
        &runtime(),
        &berth::simulate::SimulateOptions {
            files: vec![file],
            config: Some(config),
            ..berth::simulate::SimulateOptions::default()
        },
    )
    .unwrap();
    let placed: BTreeMap<String, Option<String>> = report
        .pods
        .iter()
        .map(|p| (p.name.clone(), p.node.clone()))
        .collect();
    for (prefix, node) in [("before", "alpha"), ("after", "zulu"), ("refused", "zulu")] {
        for i in 0..3 {
            assert_eq!(
                placed[&format!("{prefix}-{i}")].as_deref(),
                Some(node),
                "{placed:?}"
            );
        }
    }
}
