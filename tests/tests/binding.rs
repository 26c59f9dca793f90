//! The binding cycle and the queue with real components: failures at Permit, PreBind
//! and Bind, a cluster that refuses binds, waiting pods, and a stress run that checks
//! that every pod ends bound exactly once or pending with a reason, never lost.

use berth::clock::{Clock, VirtualClock};
use berth::cluster::Binder;
use berth::cluster::memory::MemoryCluster;
use berth::config::{Configuration, ModuleSource};
use berth::metrics::AttemptResult;
use berth::queue::QueueName;
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_sdk::{Container, Node, Pod, ResourceList, Resources};
use berth_tests::runtime;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn config(extra: &str) -> Configuration {
    let text = format!(
        "modules:\n- name: Flaky\n  path: {}\n- name: Gang\n  path: {}\nprofiles:\n- plugins:\n    permit:\n      enabled: [{{name: Flaky}}, {{name: Gang}}]\n    preBind:\n      enabled: [{{name: Flaky}}]\n    bind:\n      disabled: [{{name: '*'}}]\n      enabled: [{{name: Flaky}}, {{name: DefaultBinder}}]\n{extra}",
        berth_artifacts::fixtures::FIXTURE_FLAKY,
        berth_artifacts::fixtures::FIXTURE_GANG
    );
    let c = Configuration::parse("test.yaml", &text).unwrap();
    assert_eq!(
        c.modules[0],
        ModuleSource::file("Flaky", berth_artifacts::fixtures::FIXTURE_FLAKY)
    );
    c
}

fn scheduler(cluster: Arc<MemoryCluster>) -> Scheduler {
    let options = SchedulerOptions {
        max_attempts: 20,
        ..SchedulerOptions::default()
    };
    scheduler_with(cluster, &options, Arc::new(VirtualClock::default()))
}

fn scheduler_with(
    cluster: Arc<MemoryCluster>,
    options: &SchedulerOptions,
    clock: Arc<VirtualClock>,
) -> Scheduler {
    scheduler_from(&config(""), cluster, options, clock)
}

/// A scheduler of `config` binding through `binder`.
fn scheduler_from(
    config: &Configuration,
    binder: Arc<dyn Binder>,
    options: &SchedulerOptions,
    clock: Arc<VirtualClock>,
) -> Scheduler {
    Scheduler::new(&runtime(), config, "test.yaml", options, binder, clock).unwrap()
}

fn node(name: &str, cpu: i64) -> Node {
    Node {
        name: name.into(),
        allocatable: Resources {
            milli_cpu: cpu,
            memory: 1 << 40,
            allowed_pod_number: 10_000,
            ..Resources::default()
        },
        ..Node::default()
    }
}

fn pod(name: &str, cpu: i64, labels: &[(&str, &str)]) -> Pod {
    Pod {
        uid: format!("uid-{name}"),
        namespace: "default".into(),
        name: name.into(),
        scheduler_name: "default-scheduler".into(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        containers: vec![Container {
            name: "c".into(),
            requests: ResourceList::from([("cpu".to_owned(), cpu)]),
            ..Container::default()
        }],
        ..Pod::default()
    }
}

#[test]
fn failures_in_the_binding_cycle_unreserve_and_retry_with_backoff() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    s.add_or_update_node(node("n1", 4000));
    for (name, at) in [
        ("p-permit", "permit"),
        ("p-prebind", "prebind"),
        ("p-bind", "bind"),
        ("p-ok", ""),
    ] {
        s.add_pod(pod(name, 1000, &[("berth.test/fail-at", at)]))
            .unwrap();
    }
    s.run_until_idle();
    let bindings = cluster.bindings();
    for name in ["p-permit", "p-prebind", "p-bind", "p-ok"] {
        let uid = format!("uid-{name}");
        assert_eq!(
            bindings.get(&uid).map(|(_, n)| n.as_str()),
            Some("n1"),
            "{name}"
        );
        let o = s.outcome(&uid).unwrap();
        let expected = if name == "p-ok" { 1 } else { 2 };
        assert_eq!(o.attempts, expected, "{name}: {o:?}");
    }
    // Every failed attempt gave its reservation back: the node holds the four pods once.
    assert_eq!(s.cache().node("n1").unwrap().requested.milli_cpu, 4000);
    assert!(s.is_quiet());
    assert_eq!(s.metrics().attempts(AttemptResult::Scheduled), 7);
}

#[test]
fn a_cluster_that_refuses_a_bind_gets_the_pod_again_later() {
    let cluster = Arc::new(MemoryCluster::new());
    let refused = Arc::new(std::sync::Mutex::new(0));
    let r = refused.clone();
    cluster.refuse_bindings(Box::new(move |pod, _| {
        let mut n = r.lock().unwrap();
        (pod.name == "p" && *n < 2).then(|| {
            *n += 1;
            "etcdserver: request timed out".to_owned()
        })
    }));
    let mut s = scheduler(cluster.clone());
    s.add_or_update_node(node("n1", 4000));
    s.add_pod(pod("p", 100, &[])).unwrap();
    s.run_until_idle();
    assert_eq!(*refused.lock().unwrap(), 2);
    assert_eq!(s.outcome("uid-p").unwrap().attempts, 3);
    assert_eq!(s.outcome("uid-p").unwrap().node.as_deref(), Some("n1"));
}

#[test]
fn a_pod_bound_by_someone_else_is_dropped_not_retried() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    s.add_or_update_node(node("n1", 4000));
    s.add_or_update_node(node("n2", 4000));
    // Another scheduler binds the pod first.
    let p = pod("p", 100, &[]);
    cluster.bind(&p, "n2").unwrap();
    s.add_pod(p).unwrap();
    s.run_until_idle();
    let o = s.outcome("uid-p").unwrap();
    assert_eq!(o.node.as_deref(), Some("n2"), "{o:?}");
    assert!(o.message.contains("by someone else"), "{o:?}");
    assert_eq!(o.attempts, 1);
    assert!(s.queue().get("uid-p").is_none());
    assert_eq!(
        s.cache().node("n1").unwrap().pod_count,
        0,
        "the reservation was given back"
    );
}

#[test]
fn waiting_pods_bind_together_or_time_out() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    s.add_or_update_node(node("n1", 8000));
    let gang = |name: &str, group: &str, size: &str| {
        pod(
            name,
            100,
            &[
                ("berth.test/gang", group),
                ("berth.test/gang-size", size),
                ("berth.test/gang-timeout-seconds", "5"),
            ],
        )
    };
    s.add_pod(gang("a1", "a", "3")).unwrap();
    s.add_pod(gang("a2", "a", "3")).unwrap();
    s.add_pod(gang("b1", "b", "2")).unwrap();
    // Schedule without letting the virtual clock run out the waits.
    while s.schedule_one() {}
    assert!(
        cluster.bindings().is_empty(),
        "nothing binds while the gangs are incomplete"
    );
    assert_eq!(
        s.outcome("uid-a1").unwrap().message,
        "waiting at Permit on node n1"
    );
    // The third member of gang a arrives: the gang binds.
    s.add_pod(gang("a3", "a", "3")).unwrap();
    s.run_until_idle();
    let bindings = cluster.bindings();
    for p in ["a1", "a2", "a3"] {
        assert!(
            bindings.contains_key(&format!("uid-{p}")),
            "{p} not bound: {bindings:?}"
        );
    }
    // Gang b never fills: it timed out at Permit and went back to the queue.
    assert!(!bindings.contains_key("uid-b1"));
    let o = s.outcome("uid-b1").unwrap();
    assert!(o.message.contains("rejected at Permit by Gang"), "{o:?}");
    assert!(o.message.contains("timeout"), "{o:?}");
    assert_eq!(
        s.cache().node("n1").unwrap().pod_count,
        3,
        "b1's reservation was given back"
    );
}

#[test]
fn a_pod_deleted_while_waiting_gives_its_reservation_back() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    s.add_or_update_node(node("n1", 8000));
    s.add_pod(pod(
        "w",
        500,
        &[("berth.test/gang", "g"), ("berth.test/gang-size", "2")],
    ))
    .unwrap();
    while s.schedule_one() {}
    assert_eq!(s.cache().node("n1").unwrap().requested.milli_cpu, 500);
    s.delete_pod("uid-w");
    assert_eq!(s.cache().node("n1").unwrap().requested.milli_cpu, 0);
    assert!(s.is_quiet());
    s.run_until_idle();
    assert!(cluster.bindings().is_empty());
}

#[test]
fn unschedulable_pods_come_back_when_a_node_joins_and_metrics_count_it() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    s.add_or_update_node(node("small", 1000));
    s.add_pod(pod("big", 4000, &[])).unwrap();
    s.run_until_idle();
    assert_eq!(s.queue_of("uid-big"), Some(QueueName::Unschedulable));
    let text = s.metrics_text();
    assert!(
        text.contains("scheduler_unschedulable_pods{plugin=\"NodeResourcesFit\",profile=\"default-scheduler\"} 1"),
        "{text}"
    );
    // The node joins while the pod's first backoff (1 s) still runs: it moves to
    // backoffQ, then to activeQ when the virtual clock reaches the backoff's end.
    s.add_or_update_node(node("large", 8000));
    s.run_until_idle();
    let o = s.outcome("uid-big").unwrap();
    assert_eq!((o.node.as_deref(), o.attempts), (Some("large"), 2));
    let text = s.metrics_text();
    assert!(
        text.contains("scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"unschedulable\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("scheduler_queue_incoming_pods_total{event=\"NodeAdd\",queue=\"backoff\"} 1"),
        "{text}"
    );
    // Two cycles ran PreFilter; one bound the pod; the wasm calls were timed.
    assert!(
        text.contains("scheduler_framework_extension_point_duration_seconds_count{extension_point=\"PreFilter\",profile=\"default-scheduler\",status=\"Success\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Bind\",profile=\"default-scheduler\",status=\"Success\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("berth_plugin_call_duration_seconds_count{extension_point=\"Bind\",plugin=\"DefaultBinder\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("scheduler_pending_pods{queue=\"unschedulable\"} 0"),
        "{text}"
    );
    // Bound: no plugin keeps it out any more.
    assert!(
        text.contains("scheduler_unschedulable_pods{plugin=\"NodeResourcesFit\",profile=\"default-scheduler\"} 0"),
        "{text}"
    );
}

/// A few thousand pods, random failures everywhere: every pod ends bound exactly
/// once, or pending with a reason; none is lost, none is left assumed.
#[test]
fn stress_every_pod_ends_bound_once_or_pending_with_a_reason() {
    stress(1);
}

#[test]
fn stress_with_concurrent_binding_cycles() {
    stress(8);
}

/// 2500 pods, failures injected at Permit, PreBind, Bind and in the cluster, with
/// `parallel_bindings` binding cycles at once. The Flaky fixture fails a pod the
/// first time each of its instances sees it, so with several binding-cycle instances a
/// pod may fail more than once; it must still end bound exactly once.
fn stress(parallel_bindings: usize) {
    let cluster = Arc::new(MemoryCluster::new());
    let refusals = Arc::new(std::sync::Mutex::new(BTreeMap::<String, u32>::new()));
    let r = refusals.clone();
    cluster.refuse_bindings(Box::new(move |pod, _| {
        // About one pod in seven is refused once by the cluster.
        let h = pod
            .name
            .bytes()
            .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(b.into()));
        let mut seen = r.lock().unwrap();
        let n = seen.entry(pod.uid.clone()).or_default();
        (h % 7 == 0 && *n == 0).then(|| {
            *n += 1;
            "refused by the test cluster".to_owned()
        })
    }));
    let options = SchedulerOptions {
        max_attempts: 20,
        parallel_bindings,
        ..SchedulerOptions::default()
    };
    let mut s = scheduler_with(cluster.clone(), &options, Arc::new(VirtualClock::default()));
    for i in 0..50 {
        s.add_or_update_node(node(&format!("n{i:02}"), 40_000));
    }
    let points = ["", "", "", "permit", "prebind", "bind"];
    let total = 2500;
    let mut x: u64 = 0x2545F4914F6CDD1D;
    for i in 0..total {
        // xorshift: deterministic pseudo-random failures.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = points[(x % points.len() as u64) as usize];
        // A few pods are too big for any node: they must end pending with a reason.
        let cpu = if i % 250 == 0 { 100_000 } else { 500 };
        s.add_pod(pod(&format!("p{i:04}"), cpu, &[("berth.test/fail-at", at)]))
            .unwrap();
        if i % 100 == 0 {
            s.run_until_idle();
        }
    }
    s.run_until_idle();
    assert!(s.is_quiet(), "something is still in flight");
    let bindings = cluster.bindings();
    let mut bound = 0;
    let mut pending = 0;
    for i in 0..total {
        let uid = format!("uid-p{i:04}");
        let o = s.outcome(&uid).unwrap_or_else(|| panic!("{uid} was lost"));
        match &o.node {
            Some(n) => {
                bound += 1;
                assert_eq!(bindings.get(&uid).map(|(_, b)| b), Some(n), "{uid}");
                assert!(!s.cache().is_assumed(&uid), "{uid} still assumed");
                assert!(
                    s.cache().pod(&uid).is_some(),
                    "{uid} bound but not in the cache"
                );
            }
            None => {
                pending += 1;
                assert!(
                    !bindings.contains_key(&uid),
                    "{uid} bound but reported pending"
                );
                assert!(
                    o.message.starts_with("0/50 nodes are available"),
                    "{uid}: {o:?}"
                );
                assert!(
                    s.queue().get(&uid).is_some(),
                    "{uid} pending but not queued"
                );
            }
        }
    }
    assert_eq!(pending, 10);
    assert_eq!(bound + pending, total);
    assert_eq!(bindings.len(), bound, "a pod was bound twice or by mistake");
    assert_only_bound_pods_counted(&s, 50, bound);
}

/// The CPU the cache counts on nodes `n00`.. is that of the `bound` pods of 500m
/// and no more: no reservation leaked.
fn assert_only_bound_pods_counted(s: &Scheduler, nodes: usize, bound: usize) {
    let requested: i64 = (0..nodes)
        .map(|i| {
            s.cache()
                .node(&format!("n{i:02}"))
                .unwrap()
                .requested
                .milli_cpu
        })
        .sum();
    assert_eq!(requested, 500 * bound as i64, "a reservation leaked");
}

#[test]
fn nominated_pods_count_on_their_node_for_lower_priority_pods() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    s.add_or_update_node(node("n1", 2000));
    s.add_or_update_node(node("n2", 2000));
    // A high-priority pod nominated to n1, held back by a scheduling gate.
    let mut nominee = pod("nominee", 1500, &[]);
    nominee.priority = 100;
    nominee.nominated_node_name = "n1".into();
    nominee.scheduling_gates = vec!["example.com/hold".into()];
    s.add_pod(nominee).unwrap();
    assert_eq!(s.nominated()["n1"].len(), 1);
    // A lower-priority pod does not fit n1 with the nominee counted there.
    s.add_pod(pod("low", 1000, &[])).unwrap();
    s.run_until_idle();
    assert_eq!(s.outcome("uid-low").unwrap().node.as_deref(), Some("n2"));
    // A higher-priority pod ignores the nomination: n1 (emptier) is best for it.
    let mut high = pod("high", 1000, &[]);
    high.priority = 200;
    s.add_pod(high).unwrap();
    s.run_until_idle();
    assert_eq!(s.outcome("uid-high").unwrap().node.as_deref(), Some("n1"));
}

#[test]
fn a_nominated_pod_tries_its_nominated_node_first() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    s.add_or_update_node(node("n1", 4000));
    s.add_or_update_node(node("n2", 4000));
    let mut filler = pod("filler", 3000, &[]);
    filler.node_name = "n2".into();
    s.add_pod(filler).unwrap();
    // Scoring prefers the empty n1, but the pod was nominated to n2 and fits there.
    let mut nominated = pod("nominated", 100, &[]);
    nominated.nominated_node_name = "n2".into();
    s.add_pod(nominated).unwrap();
    s.run_until_idle();
    assert_eq!(
        s.outcome("uid-nominated").unwrap().node.as_deref(),
        Some("n2")
    );
    assert!(
        s.nominated().is_empty(),
        "a bound pod is no longer nominated"
    );
    // Without a nomination the same pod goes to n1.
    s.add_pod(pod("free", 100, &[])).unwrap();
    s.run_until_idle();
    assert_eq!(s.outcome("uid-free").unwrap().node.as_deref(), Some("n1"));
}

#[test]
fn bound_pods_stay_assumed_until_the_cluster_confirms_them() {
    let cluster = Arc::new(MemoryCluster::new());
    let clock = Arc::new(VirtualClock::default());
    let options = SchedulerOptions {
        confirm_bindings: true,
        assumed_pod_expiry: Some(Duration::from_secs(60)),
        ..SchedulerOptions::default()
    };
    let mut s = scheduler_with(cluster.clone(), &options, clock.clone());
    s.add_or_update_node(node("n1", 4000));
    for name in ["a", "b"] {
        s.apply(berth::cluster::Change::Pod(pod(name, 1000, &[])))
            .unwrap();
    }
    s.run_until_idle();
    assert_eq!(cluster.bindings().len(), 2);
    // Bound, but not yet seen bound: both assumed and counted.
    assert!(s.cache().is_assumed("uid-a") && s.cache().is_assumed("uid-b"));
    assert_eq!(s.unconfirmed(), 2);
    assert_eq!(s.cache().node("n1").unwrap().requested.milli_cpu, 2000);

    // The watch shows `a` bound: counted for good, once.
    let mut a = pod("a", 1000, &[]);
    a.node_name = "n1".into();
    s.apply(berth::cluster::Change::Pod(a)).unwrap();
    assert!(!s.cache().is_assumed("uid-a"));
    assert_eq!(s.unconfirmed(), 1);
    assert_eq!(s.cache().node("n1").unwrap().requested.milli_cpu, 2000);

    // `b` is never confirmed: after the expiry the cache forgets it.
    clock.advance_to(Duration::from_secs(61));
    s.poll(Duration::from_secs(61));
    assert_eq!(s.unconfirmed(), 0);
    assert!(s.cache().pod("uid-b").is_none());
    assert_eq!(s.cache().node("n1").unwrap().requested.milli_cpu, 1000);
    // `a` stays.
    assert!(s.cache().pod("uid-a").is_some());
}

/// A cluster whose binds happen but whose answers are lost, and which cannot be asked
/// about the pod for the first `unknown` lookups (a dropped connection, then an API
/// server that does not answer).
struct LostAnswers {
    cluster: Arc<MemoryCluster>,
    unknown: std::sync::atomic::AtomicUsize,
}

impl Binder for LostAnswers {
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), berth::cluster::WriteError> {
        self.cluster.bind(pod, node)?;
        Err(berth::cluster::WriteError::Unanswered(
            "connection reset by peer".into(),
        ))
    }

    fn lookup(&self, pod: &Pod) -> berth::cluster::PodState {
        use std::sync::atomic::Ordering;
        if self
            .unknown
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return berth::cluster::PodState::Unknown;
        }
        self.cluster.lookup(pod)
    }
}

/// A bind whose answer is lost while the cluster cannot be asked keeps the pod's room
/// on its node until the cluster answers: the next pod goes elsewhere, the one after
/// finds no room, and once the cluster can be asked both binds count as done. (Forgetting
/// the pod and retrying it, as a plain failure, let another pod take a room the first
/// one already had: a node over-committed.)
#[test]
fn a_bind_that_may_have_happened_keeps_its_room_until_the_cluster_answers() {
    let cluster = Arc::new(MemoryCluster::new());
    let binder = Arc::new(LostAnswers {
        cluster: cluster.clone(),
        unknown: std::sync::atomic::AtomicUsize::new(3),
    });
    let options = SchedulerOptions {
        max_attempts: 20,
        ..SchedulerOptions::default()
    };
    let mut s = scheduler_from(
        &config(""),
        binder,
        &options,
        Arc::new(VirtualClock::default()),
    );
    // Room for one pod on each node.
    s.add_or_update_node(node("n1", 1000));
    s.add_or_update_node(node("n2", 1000));
    s.add_pod(pod("a", 1000, &[])).unwrap();
    s.add_pod(pod("b", 1000, &[])).unwrap();
    s.run_until_idle();
    s.add_pod(pod("c", 1000, &[])).unwrap();
    s.run_until_idle();

    let bindings = cluster.bindings();
    assert_eq!(bindings.len(), 2, "{bindings:?}");
    let (a, b) = (&bindings["uid-a"].1, &bindings["uid-b"].1);
    assert_ne!(a, b, "two pods on a node with room for one");
    for (uid, node) in [("uid-a", a), ("uid-b", b)] {
        let o = s.outcome(uid).unwrap();
        assert_eq!(o.node.as_ref(), Some(node), "{uid}: {o:?}");
        assert!(
            o.message.starts_with("Successfully assigned"),
            "{uid}: {o:?}"
        );
        assert_eq!(o.attempts, 1, "{uid}: {o:?}");
    }
    let c = s.outcome("uid-c").unwrap();
    assert_eq!(c.node, None, "{c:?}");
    assert_eq!(s.queue().queue_of("uid-c"), Some(QueueName::Unschedulable));
    assert!(s.is_quiet());
}

/// A plugin is held to its own extension point and its own cycle: the Hostile fixture
/// tries to approve another plugin's waiting pod, to bind a waiting pod past Permit,
/// to bind its pod to a node it was not reserved, to write storage from Filter, to
/// evict a higher-priority pod, and to evict a budget-protected one saying it is not. Each attempt is refused, fails its own pod's cycle
/// with the plugin, the host call and the extension point named, and is counted; the
/// honest plugins decide where every pod lands.
#[test]
fn a_plugin_acts_only_for_its_own_pod_at_its_own_extension_point() {
    let text = format!(
        "modules:\n- name: Hostile\n  path: {}\n- name: Gang\n  path: {}\nprofiles:\n- plugins:\n    filter:\n      enabled: [{{name: Hostile}}]\n    postFilter:\n      enabled: [{{name: Hostile}}]\n    permit:\n      enabled: [{{name: Gang}}, {{name: Hostile}}]\n    bind:\n      disabled: [{{name: '*'}}]\n      enabled: [{{name: Hostile}}, {{name: DefaultBinder}}]\n",
        berth_artifacts::fixtures::FIXTURE_HOSTILE,
        berth_artifacts::fixtures::FIXTURE_GANG
    );
    let config = Configuration::parse("test.yaml", &text).unwrap();
    let cluster = Arc::new(MemoryCluster::new());
    let options = SchedulerOptions {
        max_attempts: 5,
        ..SchedulerOptions::default()
    };
    let clock = Arc::new(VirtualClock::default());
    let mut s = scheduler_from(&config, cluster.clone(), &options, clock.clone());
    let mut n1 = node("n1", 4000);
    n1.labels.insert("zone".into(), "a".into());
    let mut n2 = node("n2", 1000);
    n2.labels.insert("zone".into(), "b".into());
    s.add_or_update_node(n1);
    s.add_or_update_node(n2);
    // Only n1 has room for it.
    let mut high = pod("high", 3000, &[]);
    high.priority = 1000;
    s.add_pod(high).unwrap();
    // A pod no disruption is allowed for, on n1 too.
    let mut kept = pod("kept", 100, &[("app", "kept")]);
    kept.node_selector.insert("zone".into(), "a".into());
    s.add_pod(kept).unwrap();
    s.add_or_update_budget(berth_sdk::PodDisruptionBudget {
        namespace: "default".into(),
        name: "kept".into(),
        selector: Some(berth_sdk::affinity::LabelSelector {
            match_labels: [("app".to_owned(), "kept".to_owned())]
                .into_iter()
                .collect(),
            ..Default::default()
        }),
        disruptions_allowed: 0,
        ..Default::default()
    });
    s.run_until_idle();
    // Half a gang: it waits at Permit until its second member comes.
    let gang = [
        ("berth.test/gang", "g"),
        ("berth.test/gang-size", "2"),
        ("berth.test/gang-timeout-seconds", "3600"),
    ];
    s.add_pod(pod("g1", 100, &gang)).unwrap();
    // Scheduled without letting the virtual clock run out its wait.
    while s.schedule_one() {}
    let g1 = s.outcome("uid-g1").unwrap();
    assert!(
        g1.message.starts_with("waiting at Permit on node "),
        "{g1:?}"
    );
    let hostile = |name: &str, cpu: i64, attack: &str, node: &str| {
        let mut p = pod(
            name,
            cpu,
            &[
                ("berth.test/hostile", attack),
                ("berth.test/hostile-node", node),
            ],
        );
        p.node_selector.insert("zone".into(), "a".into());
        p
    };
    s.add_pod(hostile("h-approve", 100, "approve-other", ""))
        .unwrap();
    s.add_pod(hostile("h-bind-other", 100, "bind-other", ""))
        .unwrap();
    s.add_pod(hostile("h-elsewhere", 100, "bind-elsewhere", "n2"))
        .unwrap();
    s.add_pod(hostile("h-storage", 100, "storage-from-filter", ""))
        .unwrap();
    // Fits nowhere, and only higher-priority pods could make room.
    s.add_pod(hostile("h-evict", 3500, "evict-higher", "n1"))
        .unwrap();
    // Fits nowhere either; its victims would be of lower priority, but a budget
    // protects one of them and it says none does.
    let mut protected = hostile("h-protected", 3500, "evict-protected", "n1");
    protected.priority = 500;
    s.add_pod(protected).unwrap();
    s.add_pod(pod("plain", 100, &[])).unwrap();
    // One attempt each while g1 waits: the scheduling cycles, then the binding
    // cycles' results, without moving the clock.
    while s.schedule_one() {}
    let said = |s: &Scheduler, name: &str, what: &str| {
        s.outcome(&format!("uid-{name}"))
            .is_some_and(|o| o.message.contains(what))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !(said(&s, "h-bind-other", "bind-pod refused")
        && said(&s, "h-elsewhere", "bind-pod refused")
        && said(&s, "plain", "Successfully assigned"))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
        s.poll(clock.now());
    }

    let refusals = [
        (
            "h-approve",
            "allow-waiting-pod",
            "Permit",
            "allow-waiting-pod refused at Permit: plugin Hostile may allow or reject only its own waits, not \"Gang\"'s",
        ),
        (
            "h-bind-other",
            "bind-pod",
            "Bind",
            "bind-pod refused at Bind: bind-pod may bind only the cycle's pod default/h-bind-other (uid uid-h-bind-other), not uid uid-g1",
        ),
        (
            "h-elsewhere",
            "bind-pod",
            "Bind",
            "bind-pod refused at Bind: bind-pod may name only the reserved node n1, not n2",
        ),
        (
            "h-storage",
            "assume-claim-provisioned",
            "Filter",
            "assume-claim-provisioned refused at Filter: assume-claim-provisioned is allowed only at Reserve, Unreserve, PreBind",
        ),
        (
            "h-evict",
            "evict",
            "PostFilter",
            "was refused evictions at PostFilter: named victim default/",
        ),
    ];
    let refusals = refusals.into_iter().chain([(
        "h-protected",
        "evict",
        "PostFilter",
        "was refused evictions at PostFilter: reported 0 PodDisruptionBudget violations on node n1, but its victims cause at least 1",
    )]);
    let bindings = cluster.bindings();
    for (name, call, point, message) in refusals {
        let o = s.outcome(&format!("uid-{name}")).unwrap();
        assert_eq!(o.node, None, "{name}: {o:?}");
        assert!(
            o.message.contains("plugin Hostile") && o.message.contains(message),
            "{name}: {o:?}"
        );
        assert!(!bindings.contains_key(&format!("uid-{name}")), "{name}");
        assert!(
            s.metrics().refused_calls("Hostile", call, point) >= 1,
            "{name}: {}",
            s.metrics_text()
        );
    }
    let evict = s.outcome("uid-h-evict").unwrap();
    assert!(
        evict.message.contains("not lower than the preemptor's 0"),
        "{evict:?}"
    );
    // Nothing the hostile plugin tried took effect: the half gang still waits, the
    // higher-priority pod still runs; the plain pod landed as the honest plugins
    // chose. Let the clock run: the gang's own plugin times the half gang out.
    let g1 = s.outcome("uid-g1").unwrap();
    assert!(
        g1.message.starts_with("waiting at Permit on node "),
        "{g1:?}"
    );
    s.run_until_idle();
    let bindings = cluster.bindings();
    assert!(!bindings.contains_key("uid-g1"), "{bindings:?}");
    let g1 = s.outcome("uid-g1").unwrap();
    assert!(
        g1.message.contains("rejected at Permit by Gang") && g1.message.contains("timeout"),
        "{g1:?}"
    );
    assert_eq!(bindings["uid-high"].1, "n1");
    assert_eq!(bindings["uid-kept"].1, "n1");
    assert!(cluster.evictions().is_empty(), "{:?}", cluster.evictions());
    assert!(bindings.contains_key("uid-plain"), "{bindings:?}");
}

/// A scheduler of the configuration `text` on its embedded cluster and a virtual
/// clock, its FailedScheduling events recorded.
fn recorded_scheduler(
    text: &str,
    options: &SchedulerOptions,
) -> (
    Scheduler,
    Arc<MemoryCluster>,
    Arc<VirtualClock>,
    Arc<Events>,
) {
    let config = Configuration::parse("test.yaml", text).unwrap();
    let cluster = Arc::new(MemoryCluster::new());
    let clock = Arc::new(VirtualClock::default());
    let mut s = scheduler_from(&config, cluster.clone(), options, clock.clone());
    let events = Arc::new(Events::default());
    s.set_recorder(events.clone());
    (s, cluster, clock, events)
}

/// Every FailedScheduling event, as `namespace/name: reason: message`.
#[derive(Default)]
struct Events(std::sync::Mutex<Vec<String>>);

impl berth::cluster::Recorder for Events {
    fn scheduled(&self, _: &str, _: &Pod, _: &str) {}
    fn failed(&self, _: &str, pod: &Pod, reason: berth::cluster::FailureReason, message: &str) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{}: {}: {message}", pod.key(), reason.as_str()));
    }
}

/// A pod whose QueueSort key or PreEnqueue gate fails (the plugin traps) is not
/// dropped: it backs off as after an error, with a FailedScheduling event naming the
/// plugin each time, is asked again when its backoff ends, and once the cause is gone
/// (here an update of the pod) it is scheduled.
#[test]
fn a_pod_whose_queue_sort_or_pre_enqueue_fails_backs_off_and_is_asked_again() {
    let text = format!(
        "modules:\n- name: Flaky\n  path: {}\nprofiles:\n- plugins:\n    queueSort:\n      disabled: [{{name: '*'}}]\n      enabled: [{{name: Flaky}}]\n    preEnqueue:\n      enabled: [{{name: Flaky}}]\n",
        berth_artifacts::fixtures::FIXTURE_FLAKY
    );
    let options = SchedulerOptions {
        max_attempts: 4,
        ..SchedulerOptions::default()
    };
    let (mut s, cluster, clock, events) = recorded_scheduler(&text, &options);
    s.add_or_update_node(node("n1", 4000));
    for (name, at) in [("sort", "queuesort"), ("gate", "preenqueue"), ("ok", "")] {
        s.add_pod(pod(name, 100, &[("berth.test/fail-at", at)]))
            .unwrap();
    }
    s.run_until_idle();
    assert_eq!(cluster.bindings()["uid-ok"].1, "n1");
    for (name, point) in [("sort", "QueueSort"), ("gate", "PreEnqueue")] {
        let uid = format!("uid-{name}");
        let o = s.outcome(&uid).unwrap();
        assert_eq!(o.node, None, "{o:?}");
        assert!(
            o.message.starts_with(&format!(
                "cannot enqueue the pod: plugin Flaky: trapped at {point} for pod default/{name}: "
            )) && o
                .message
                .contains(&format!("flaky: panicked at {}", point.to_lowercase())),
            "{o:?}"
        );
        // Asked again after each backoff, until the virtual clock's attempt limit.
        assert_eq!(o.attempts, 4, "{o:?}");
        assert_eq!(s.queue_of(&uid), Some(QueueName::Backoff), "{o:?}");
        let said: Vec<String> = events
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.starts_with(&format!("default/{name}: ")))
            .cloned()
            .collect();
        assert_eq!(said.len(), 4, "{said:?}");
        assert!(
            said.iter().all(|e| e.starts_with(&format!(
                "default/{name}: SchedulerError: cannot enqueue the pod: plugin Flaky: trapped at {point}"
            ))),
            "{said:?}"
        );
    }
    // The cause goes away: each pod comes in at its next retry and is scheduled.
    for name in ["sort", "gate"] {
        s.update_pod(pod(name, 100, &[])).unwrap();
    }
    clock.advance_to(clock.now() + Duration::from_secs(30));
    s.run_until_idle();
    let bindings = cluster.bindings();
    for name in ["sort", "gate"] {
        assert_eq!(bindings[&format!("uid-{name}")].1, "n1", "{name}");
    }
    assert!(s.is_quiet());
}

/// A cluster that does not answer the bind of `uid-slow` (it did not happen) and
/// whose answer about where that pod is hangs until the test lets it go.
#[derive(Default)]
struct HangingLookup {
    cluster: Arc<MemoryCluster>,
    failed_once: std::sync::atomic::AtomicBool,
    released: std::sync::atomic::AtomicBool,
    answered: std::sync::atomic::AtomicBool,
}

impl Binder for HangingLookup {
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), berth::cluster::WriteError> {
        use std::sync::atomic::Ordering;
        if pod.uid == "uid-slow" && !self.failed_once.swap(true, Ordering::SeqCst) {
            return Err(berth::cluster::WriteError::Unanswered(
                "the API server did not answer".into(),
            ));
        }
        self.cluster.bind(pod, node)
    }

    fn lookup(&self, pod: &Pod) -> berth::cluster::PodState {
        use std::sync::atomic::Ordering;
        if pod.uid == "uid-slow" {
            // At most 30 s, so that a loop that does wait is seen waiting, not hung.
            let until = std::time::Instant::now() + Duration::from_secs(30);
            while !self.released.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            self.answered.store(true, Ordering::SeqCst);
        }
        self.cluster.lookup(pod)
    }
}

/// After a failed bind the cluster is asked where the pod is on the binding thread,
/// not on the scheduling loop: while that question hangs, other pods are scheduled and
/// bound; once it is answered (not bound), the pod is retried and bound once.
#[test]
fn the_loop_goes_on_while_the_cluster_is_asked_about_a_failed_bind() {
    use std::sync::atomic::Ordering;
    let binder = Arc::new(HangingLookup::default());
    let cluster = binder.cluster.clone();
    let clock = Arc::new(VirtualClock::default());
    // Binding threads as berth run has them (more than one): the lookup holds one.
    // And as berth run, binding results are taken in as they come: an embedded run
    // (which settles its binding cycles before each scheduling cycle, so as to be
    // deterministic) would wait for the lookup, as it waits for any bind.
    let options = SchedulerOptions {
        max_attempts: 20,
        parallel_bindings: 4,
        settle_bindings: false,
        ..SchedulerOptions::default()
    };
    let mut s = scheduler_from(&config(""), binder.clone(), &options, clock.clone());
    s.add_or_update_node(node("n1", 4000));
    s.add_pod(pod("slow", 100, &[])).unwrap();
    while s.schedule_one() {}
    for name in ["a", "b"] {
        s.add_pod(pod(name, 100, &[])).unwrap();
    }
    while s.schedule_one() {}
    let bound = |s: &Scheduler, name: &str| {
        s.outcome(&format!("uid-{name}"))
            .is_some_and(|o| o.node.is_some())
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !(bound(&s, "a") && bound(&s, "b")) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        s.poll(clock.now());
    }
    assert!(
        bound(&s, "a") && bound(&s, "b"),
        "{:?} {:?}",
        s.outcome("uid-a"),
        s.outcome("uid-b")
    );
    assert!(
        !binder.answered.load(Ordering::SeqCst),
        "the loop waited for the cluster's answer about the failed bind"
    );
    assert!(!cluster.bindings().contains_key("uid-slow"));
    assert_eq!(s.bindings_in_flight(), 1, "the lookup is still under way");
    binder.released.store(true, Ordering::SeqCst);
    s.run_until_idle();
    let bindings = cluster.bindings();
    assert_eq!(bindings.len(), 3, "{bindings:?}");
    let slow = s.outcome("uid-slow").unwrap();
    assert_eq!(slow.node.as_deref(), Some("n1"), "{slow:?}");
    assert_eq!(slow.attempts, 2, "{slow:?}");
}

/// A plugin whose grants name another plugin's waits (`sandbox.grants.waitsOf`) may
/// let them go: the Hostile fixture, so granted, releases Gang's half gang, and
/// nothing is refused. `config validate` says what the grant allows.
#[test]
fn a_plugin_granted_another_plugin_s_waits_lets_them_go() {
    let dir = tempfile::tempdir().unwrap();
    let file = berth_tests::write(
        dir.path(),
        "config.yaml",
        &format!(
            "profiles:\n- plugins:\n    permit:\n      enabled: [{{name: Gang}}, {{name: Hostile}}]\nberth:\n  modules:\n  - {{name: Hostile, path: {}}}\n  - {{name: Gang, path: {}}}\n  plugins:\n  - name: Hostile\n    sandbox:\n      grants:\n        waitsOf: [Gang]\n",
            berth_artifacts::fixtures::FIXTURE_HOSTILE,
            berth_artifacts::fixtures::FIXTURE_GANG
        ),
    );
    let valid = berth::config_cli::validate(&runtime(), &file, &Default::default()).unwrap();
    assert!(
        valid.contains("  may         Hostile: allow-waiting-pod, reject-waiting-pod for the waits of Gang too (sandbox.grants.waitsOf)\n"),
        "{valid}"
    );
    let config = Configuration::load(&file).unwrap();
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler_from(
        &config,
        cluster.clone(),
        &SchedulerOptions::default(),
        Arc::new(VirtualClock::default()),
    );
    s.add_or_update_node(node("n1", 4000));
    s.add_pod(pod(
        "g1",
        100,
        &[
            ("berth.test/gang", "g"),
            ("berth.test/gang-size", "2"),
            ("berth.test/gang-timeout-seconds", "3600"),
        ],
    ))
    .unwrap();
    while s.schedule_one() {}
    s.add_pod(pod("h", 100, &[("berth.test/hostile", "approve-other")]))
        .unwrap();
    s.run_until_idle();
    let bindings = cluster.bindings();
    assert!(
        bindings.contains_key("uid-g1") && bindings.contains_key("uid-h"),
        "{bindings:?}"
    );
    assert_eq!(
        s.metrics()
            .refused_calls("Hostile", "allow-waiting-pod", "Permit"),
        0
    );
}

/// A live scheduler (`keep_bound_outcomes: false`, as `berth run`) keeps no outcome
/// for a pod once it is bound, so its memory follows what is pending rather than
/// every pod it ever bound; a pending pod's outcome stays, saying why.
#[test]
fn a_live_scheduler_keeps_outcomes_of_pending_pods_only() {
    let cluster = Arc::new(MemoryCluster::new());
    let options = SchedulerOptions {
        keep_bound_outcomes: false,
        ..SchedulerOptions::default()
    };
    let mut s = scheduler_with(cluster.clone(), &options, Arc::new(VirtualClock::default()));
    s.add_or_update_node(node("n1", 100_000));
    for i in 0..500 {
        s.add_pod(pod(&format!("p{i}"), 100, &[])).unwrap();
    }
    s.add_pod(pod("big", 1_000_000, &[])).unwrap();
    s.run_until_idle();
    assert_eq!(cluster.bindings().len(), 500);
    for i in 0..500 {
        assert!(s.outcome(&format!("uid-p{i}")).is_none(), "p{i}");
    }
    let big = s.outcome("uid-big").unwrap();
    assert_eq!(big.node, None);
    assert!(big.message.contains("Insufficient cpu"), "{big:?}");
}

/// Every extension point the Flaky fixture implements, as a `berth.test/trap-at`
/// label value.
const TRAP_POINTS: [&str; 14] = [
    "preenqueue",
    "queuesort",
    "prefilter",
    "filter",
    "postfilter",
    "prescore",
    "score",
    "normalizescore",
    "reserve",
    "unreserve",
    "permit",
    "prebind",
    "bind",
    "postbind",
];

/// Points where one pod misses the call deadline (an endless loop) instead of
/// panicking: each such call costs the deadline, so a few.
const LOOP_POINTS: [&str; 6] = [
    "queuesort",
    "filter",
    "normalizescore",
    "permit",
    "prebind",
    "postbind",
];

/// 1500 pods on 50 nodes with 8 binding cycles at once, a third of them trapping (a
/// panic, or a missed deadline) at one extension point each, every point included:
/// each pod ends bound exactly once or pending with a reason naming the plugin and a
/// FailedScheduling event, nothing in flight and no reservation leaked. Then the
/// cause goes away (the pods' labels are removed) and every pod that fits is bound,
/// once: no pod was dropped, and every broken instance was replaced.
#[test]
fn traps_and_missed_deadlines_at_every_extension_point_drop_no_pod() {
    let text = format!(
        "berth:\n  modules:\n  - name: Flaky\n    path: {}\n  plugins:\n  - name: Flaky\n    sandbox: {{callDeadline: 400ms}}\nprofiles:\n- plugins:\n    queueSort:\n      disabled: [{{name: '*'}}]\n      enabled: [{{name: Flaky}}]\n    preEnqueue:\n      enabled: [{{name: Flaky}}]\n    preFilter:\n      enabled: [{{name: Flaky}}]\n    filter:\n      enabled: [{{name: Flaky}}]\n    postFilter:\n      enabled: [{{name: Flaky}}]\n    preScore:\n      enabled: [{{name: Flaky}}]\n    score:\n      enabled: [{{name: Flaky, weight: 1}}]\n    reserve:\n      enabled: [{{name: Flaky}}]\n    permit:\n      enabled: [{{name: Flaky}}]\n    preBind:\n      enabled: [{{name: Flaky}}]\n    bind:\n      disabled: [{{name: '*'}}]\n      enabled: [{{name: Flaky}}, {{name: DefaultBinder}}]\n    postBind:\n      enabled: [{{name: Flaky}}]\n",
        berth_artifacts::fixtures::FIXTURE_FLAKY
    );
    let options = SchedulerOptions {
        max_attempts: 3,
        parallel_bindings: 8,
        ..SchedulerOptions::default()
    };
    let (mut s, cluster, clock, events) = recorded_scheduler(&text, &options);
    for i in 0..50 {
        s.add_or_update_node(node(&format!("n{i:02}"), 40_000));
    }
    let total = 1500;
    // Where each pod traps ("" for none).
    let mut trap: BTreeMap<String, &str> = BTreeMap::new();
    let mut looping = std::collections::BTreeSet::new();
    let mut x: u64 = 0x9E3779B97F4A7C15;
    for i in 0..total {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let name = format!("p{i:04}");
        // Every point gets pods early on; then a third of the pods trap.
        let at = if let Some(at) = TRAP_POINTS.get(i) {
            at
        } else if x.is_multiple_of(3) {
            TRAP_POINTS[((x >> 8) % TRAP_POINTS.len() as u64) as usize]
        } else {
            ""
        };
        let mut labels = vec![("berth.test/trap-at", at)];
        if LOOP_POINTS.contains(&at) && looping.insert(at) {
            labels.push(("berth.test/trap-how", "loop"));
        }
        // Unreserve runs only after a later failure: Permit rejects these once per
        // instance. PostFilter runs only for a pod that fits nowhere.
        if at == "unreserve" {
            labels.push(("berth.test/fail-at", "permit"));
        }
        let cpu = if at == "postfilter" { 100_000 } else { 500 };
        s.add_pod(pod(&name, cpu, &labels)).unwrap();
        trap.insert(name, at);
        if i % 100 == 0 {
            s.run_until_idle();
        }
    }
    s.run_until_idle();
    assert!(s.is_quiet(), "something is still in flight");
    assert_eq!(looping.len(), LOOP_POINTS.len());

    // Each pod: bound once, or pending with a reason and an event.
    let check = |s: &Scheduler, expect_pending: &dyn Fn(&str) -> Option<bool>| {
        let bindings = cluster.bindings();
        let said = events.0.lock().unwrap().clone();
        let mut bound = 0;
        for (name, at) in &trap {
            let uid = format!("uid-{name}");
            let o = s
                .outcome(&uid)
                .unwrap_or_else(|| panic!("{name} (trap at {at:?}) was lost"));
            match &o.node {
                Some(n) => {
                    bound += 1;
                    assert_eq!(bindings.get(&uid).map(|(_, b)| b), Some(n), "{name}");
                    assert_ne!(
                        expect_pending(at),
                        Some(true),
                        "{name} (trap at {at:?}) was bound: {o:?}"
                    );
                }
                None => {
                    assert!(!bindings.contains_key(&uid), "{name} bound but pending");
                    assert_ne!(
                        expect_pending(at),
                        Some(false),
                        "{name} (trap at {at:?}) is pending: {o:?}"
                    );
                    assert!(
                        s.queue().get(&uid).is_some(),
                        "{name} pending but not queued: {o:?}"
                    );
                    assert!(
                        said.iter()
                            .any(|e| e.starts_with(&format!("default/{name}: "))),
                        "{name} (trap at {at:?}) is pending with no event: {o:?}"
                    );
                }
            }
        }
        assert_eq!(bindings.len(), bound, "a pod was bound twice or by mistake");
        assert_only_bound_pods_counted(s, 50, bound);
        bound
    };
    // Traps before the bind keep the pod pending, with the plugin and point named;
    // after it (PostBind) they cost nothing; Unreserve's depends on which instance
    // counted the Permit rejection.
    let bound = check(&s, &|at: &str| match at {
        "" | "postbind" => Some(false),
        "unreserve" => None,
        _ => Some(true),
    });
    for (name, at) in &trap {
        if !at.is_empty() && *at != "postbind" && *at != "unreserve" {
            let o = s.outcome(&format!("uid-{name}")).unwrap();
            assert!(o.message.contains("Flaky"), "{name} (trap at {at}): {o:?}");
        }
    }
    let trapped = trap.values().filter(|at| !at.is_empty()).count();
    assert!(trapped > 400, "{trapped}");
    assert!(bound >= total - trapped, "{bound}");
    let metrics = s.metrics_text();
    let traps: u64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("berth_plugin_traps_total{plugin=\"Flaky\"}")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0);
    assert!(traps >= trapped as u64, "{traps} traps counted\n{metrics}");

    // The cause goes away (the pending pods lose their labels): every pod that fits
    // is bound, once.
    for name in trap.keys() {
        if s.outcome(&format!("uid-{name}")).unwrap().node.is_some() {
            continue;
        }
        let cpu = if trap[name] == "postfilter" {
            100_000
        } else {
            500
        };
        s.update_pod(pod(name, cpu, &[])).unwrap();
    }
    clock.advance_to(clock.now() + Duration::from_secs(600));
    s.flush_unschedulable_leftover(clock.now());
    s.flush_backoff(clock.now());
    s.run_until_idle();
    assert!(s.is_quiet(), "something is still in flight");
    let bound = check(&s, &|at: &str| Some(at == "postfilter"));
    let too_big = trap.values().filter(|at| **at == "postfilter").count();
    assert_eq!(bound, total - too_big);
    for (name, at) in &trap {
        if *at == "postfilter" {
            let o = s.outcome(&format!("uid-{name}")).unwrap();
            assert!(
                o.message.starts_with("0/50 nodes are available"),
                "{name}: {o:?}"
            );
        }
    }
}
