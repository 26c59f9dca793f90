//! Queue transitions, driven by explicit times (no sleeps).

use super::*;
use std::collections::HashMap;

/// A fake oracle: per plugin, which event resources it registered, and whether its
/// hint says Queue.
#[derive(Default)]
struct Oracle(HashMap<&'static str, (Vec<EventResource>, QueueingHint)>);

impl HintOracle for Oracle {
    fn hint(
        &self,
        plugin: &str,
        event: &ClusterEvent,
        _: &Pod,
        _: Option<&Object>,
        _: Option<&Object>,
    ) -> QueueingHint {
        match self.0.get(plugin) {
            Some((resources, hint)) if resources.contains(&event.resource) => *hint,
            _ => QueueingHint::QueueSkip,
        }
    }
}

fn pod(uid: &str) -> Pod {
    Pod {
        uid: uid.into(),
        namespace: "default".into(),
        name: uid.into(),
        ..Pod::default()
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn plugins(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn node_add() -> ClusterEvent {
    ClusterEvent::new(EventResource::Node, ActionType::ADD)
}

fn fit_oracle(hint: QueueingHint) -> Oracle {
    Oracle(HashMap::from([("Fit", (vec![EventResource::Node], hint))]))
}

#[test]
fn pops_by_key_then_enqueue_order() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(pod("low"), vec![0], None, secs(0));
    q.add(pod("high-1"), vec![-100], None, secs(0));
    q.add(pod("high-2"), vec![-100], None, secs(0));
    let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|q| q.pod.uid).collect();
    assert_eq!(order, ["high-1", "high-2", "low"]);
}

#[test]
fn backoff_doubles_from_initial_up_to_max() {
    let q = SchedulingQueue::new(QueueConfig::default());
    let got: Vec<u64> = (1..=6).map(|a| q.backoff_for(a).as_secs()).collect();
    assert_eq!(got, [1, 2, 4, 8, 10, 10]);
    let q = SchedulingQueue::new(QueueConfig {
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(250),
        ..QueueConfig::default()
    });
    assert_eq!(q.backoff_for(1), Duration::from_millis(100));
    assert_eq!(q.backoff_for(2), Duration::from_millis(200));
    assert_eq!(q.backoff_for(3), Duration::from_millis(250));
}

#[test]
fn an_error_backs_off_and_returns_when_the_backoff_ends() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(pod("a"), vec![0], None, secs(0));
    let a = q.pop().unwrap();
    assert!(q.is_in_flight("a"));
    let went = q.requeue_failed(
        a,
        BTreeSet::new(),
        "boom".into(),
        secs(10),
        &Oracle::default(),
    );
    assert_eq!(went, Some(QueueName::Backoff));
    assert!(!q.is_in_flight("a"));
    // First failure: 1 s of backoff, flushed on the next 1 s tick.
    assert_eq!(q.next_backoff_flush(u32::MAX), Some(secs(11)));
    assert_eq!(q.flush_backoff(Duration::from_millis(10_999)), 0);
    assert!(q.pop().is_none());
    assert_eq!(q.flush_backoff(secs(11)), 1);
    let a = q.pop().unwrap();
    assert_eq!(a.attempts, 2);
    // Second failure: 2 s.
    q.requeue_failed(
        a,
        BTreeSet::new(),
        "boom".into(),
        secs(20),
        &Oracle::default(),
    );
    assert_eq!(q.next_backoff_flush(u32::MAX), Some(secs(22)));
    // A pod past the attempt limit does not wake a virtual clock.
    assert_eq!(q.next_backoff_flush(2), None);
}

#[test]
fn rejected_pods_wait_until_a_hint_says_queue() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(pod("a"), vec![0], None, secs(0));
    let a = q.pop().unwrap();
    let went = q.requeue_failed(
        a,
        plugins(&["Fit"]),
        "Insufficient cpu".into(),
        secs(0),
        &fit_oracle(QueueingHint::Queue),
    );
    assert_eq!(went, Some(QueueName::Unschedulable));

    // A plugin's hint says the event does not help: the pod stays.
    assert_eq!(
        q.on_event(
            node_add(),
            None,
            None,
            secs(5),
            &fit_oracle(QueueingHint::QueueSkip)
        ),
        0
    );
    assert_eq!(q.queue_of("a"), Some(QueueName::Unschedulable));
    // An event the rejecting plugin did not register: the pod stays.
    let ns = ClusterEvent::new(EventResource::Namespace, ActionType::ADD);
    assert_eq!(
        q.on_event(ns, None, None, secs(5), &fit_oracle(QueueingHint::Queue)),
        0
    );
    // The hint says Queue; the backoff (1 s from t=0) is over, so straight to activeQ.
    assert_eq!(
        q.on_event(
            node_add(),
            None,
            None,
            secs(5),
            &fit_oracle(QueueingHint::Queue)
        ),
        1
    );
    assert_eq!(q.queue_of("a"), Some(QueueName::Active));
    assert_eq!(q.incoming()[&("NodeAdd".to_owned(), QueueName::Active)], 1);
}

#[test]
fn a_pod_still_backing_off_moves_to_backoff_not_active() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(pod("a"), vec![0], None, secs(0));
    let a = q.pop().unwrap();
    q.requeue_failed(
        a,
        plugins(&["Fit"]),
        "no".into(),
        secs(100),
        &Oracle::default(),
    );
    q.on_event(
        node_add(),
        None,
        None,
        Duration::from_millis(100_500),
        &fit_oracle(QueueingHint::Queue),
    );
    assert_eq!(q.queue_of("a"), Some(QueueName::Backoff));
}

#[test]
fn an_event_during_the_cycle_is_not_missed() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(pod("a"), vec![0], None, secs(0));
    let a = q.pop().unwrap();
    // While "a" is being scheduled, a node arrives.
    q.on_event(
        node_add(),
        None,
        None,
        secs(1),
        &fit_oracle(QueueingHint::Queue),
    );
    let went = q.requeue_failed(
        a,
        plugins(&["Fit"]),
        "no".into(),
        secs(1),
        &fit_oracle(QueueingHint::Queue),
    );
    assert_eq!(went, Some(QueueName::Backoff));

    // The same with a hint that says the event does not help.
    q.flush_backoff(secs(100));
    let a = q.pop().unwrap();
    q.on_event(
        node_add(),
        None,
        None,
        secs(101),
        &fit_oracle(QueueingHint::QueueSkip),
    );
    let went = q.requeue_failed(
        a,
        plugins(&["Fit"]),
        "no".into(),
        secs(101),
        &fit_oracle(QueueingHint::QueueSkip),
    );
    assert_eq!(went, Some(QueueName::Unschedulable));
}

#[test]
fn long_unschedulable_pods_are_flushed_after_five_minutes() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(pod("a"), vec![0], None, secs(0));
    let a = q.pop().unwrap();
    q.requeue_failed(
        a,
        plugins(&["Fit"]),
        "no".into(),
        secs(0),
        &Oracle::default(),
    );
    assert_eq!(q.flush_unschedulable_leftover(secs(300)), 0);
    assert_eq!(q.flush_unschedulable_leftover(secs(301)), 1);
    assert_eq!(q.queue_of("a"), Some(QueueName::Active));
}

#[test]
fn gated_pods_wait_outside_active_until_their_gates_are_removed() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    let gate = Some((
        "SchedulingGates".to_owned(),
        "waiting for scheduling gates: [g]".to_owned(),
    ));
    q.add(pod("a"), vec![0], gate.clone(), secs(0));
    assert_eq!(q.queue_of("a"), Some(QueueName::Gated));
    assert!(q.pop().is_none());
    // Events do not release gated pods.
    q.on_event(
        node_add(),
        None,
        None,
        secs(1),
        &fit_oracle(QueueingHint::Queue),
    );
    assert_eq!(q.queue_of("a"), Some(QueueName::Gated));
    // An update that keeps a gate keeps it out; one without gates lets it in.
    q.update(pod("a"), vec![0], gate, secs(2), &Oracle::default());
    assert_eq!(q.queue_of("a"), Some(QueueName::Gated));
    q.update(pod("a"), vec![0], None, secs(3), &Oracle::default());
    assert_eq!(q.queue_of("a"), Some(QueueName::Active));
    assert_eq!(q.pending()[&QueueName::Gated], 0);
}

#[test]
fn updates_and_deletes_of_queued_and_in_flight_pods() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(pod("a"), vec![0], None, secs(0));
    q.add(pod("b"), vec![1], None, secs(0));
    // Updating a pod in activeQ keeps its place and takes the new version.
    let mut newer = pod("b");
    newer.labels.insert("v".into(), "2".into());
    q.update(newer, vec![1], None, secs(0), &Oracle::default());
    assert!(q.delete("a"));
    let b = q.pop().unwrap();
    assert_eq!(b.pod.labels.get("v").map(String::as_str), Some("2"));
    // Updated while in flight: the newer version comes back.
    let mut newest = pod("b");
    newest.labels.insert("v".into(), "3".into());
    q.update(newest, vec![1], None, secs(1), &Oracle::default());
    q.requeue_failed(
        b,
        BTreeSet::new(),
        "err".into(),
        secs(1),
        &Oracle::default(),
    );
    assert_eq!(
        q.get("b").unwrap().pod.labels.get("v").map(String::as_str),
        Some("3")
    );
    // Deleted while in flight: dropped when its cycle ends.
    q.flush_backoff(secs(100));
    let b = q.pop().unwrap();
    assert!(q.delete("b"));
    assert!(q.deleted_in_flight("b"));
    assert_eq!(
        q.requeue_failed(
            b,
            BTreeSet::new(),
            "err".into(),
            secs(101),
            &Oracle::default()
        ),
        None
    );
    assert!(q.get("b").is_none());
    assert!(!q.is_in_flight("b"));
}

#[test]
fn an_unschedulable_pod_moves_when_its_own_update_may_help() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    let oracle = Oracle(HashMap::from([(
        "TaintToleration",
        (vec![EventResource::UnscheduledPod], QueueingHint::Queue),
    )]));
    q.add(pod("a"), vec![0], None, secs(0));
    let a = q.pop().unwrap();
    q.requeue_failed(
        a,
        plugins(&["TaintToleration"]),
        "taint".into(),
        secs(0),
        &oracle,
    );
    let mut tolerant = pod("a");
    tolerant.tolerations.push(berth_sdk::Toleration {
        key: String::new(),
        operator: berth_sdk::TolerationOperator::Exists,
        value: String::new(),
        effect: None,
        toleration_seconds: None,
    });
    assert_eq!(
        pod_update_actions(&pod("a"), &tolerant),
        ActionType::UPDATE_POD_TOLERATION
    );
    q.update(tolerant, vec![0], None, secs(10), &oracle);
    assert_eq!(q.queue_of("a"), Some(QueueName::Active));
}

#[test]
fn activate_moves_a_pod_to_active_now_or_when_its_cycle_ends() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    let skip = fit_oracle(QueueingHint::QueueSkip);
    // Unschedulable, and still in its backoff: activeQ at once all the same.
    q.add(pod("a"), vec![0], None, secs(0));
    let a = q.pop().unwrap();
    q.requeue_failed(a, plugins(&["Fit"]), "no".into(), secs(0), &skip);
    assert!(q.activate("a"));
    assert_eq!(q.queue_of("a"), Some(QueueName::Active));
    // In backoffQ (an error): activeQ at once, and the stale backoff entry moves nothing.
    let a = q.pop().unwrap();
    q.requeue_failed(a, BTreeSet::new(), "error".into(), secs(0), &skip);
    assert_eq!(q.queue_of("a"), Some(QueueName::Backoff));
    assert!(q.activate("a"));
    assert_eq!(q.queue_of("a"), Some(QueueName::Active));
    assert_eq!(q.flush_backoff(secs(60)), 0);
    // In flight: activeQ when the failed cycle comes back, not unschedulable.
    let a = q.pop().unwrap();
    assert!(q.activate("a"));
    let went = q.requeue_failed(a, plugins(&["Fit"]), "no".into(), secs(0), &skip);
    assert_eq!(went, Some(QueueName::Active));
    // The flag is the cycle's: the next failure waits as usual.
    let a = q.pop().unwrap();
    let went = q.requeue_failed(a, plugins(&["Fit"]), "no".into(), secs(0), &skip);
    assert_eq!(went, Some(QueueName::Unschedulable));
    // Gated or unknown pods are not let in.
    q.add(
        pod("g"),
        vec![0],
        Some(("Gates".into(), "gated".into())),
        secs(0),
    );
    assert!(!q.activate("g"));
    assert!(!q.activate("nobody"));
    assert_eq!(
        q.incoming()[&("ForceActivate".to_owned(), QueueName::Active)],
        3
    );
}

#[test]
fn rekeying_reorders_active_q_and_keeps_ties_in_enqueue_order() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    for (uid, key) in [("a", 0), ("b", -1), ("c", -2), ("d", -2)] {
        q.add(pod(uid), vec![key], None, secs(0));
    }
    // The new QueueSort plugin sorts the other way round.
    let keys: HashMap<String, Vec<i64>> = q
        .waiting()
        .map(|w| (w.pod.uid.clone(), vec![-w.key[0]]))
        .collect();
    q.rekey(&keys, &HashMap::new());
    let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|q| q.pod.uid).collect();
    assert_eq!(order, ["a", "b", "c", "d"]);
}

#[test]
fn a_reloaded_plugin_moves_the_pods_it_rejected_and_only_those() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    for uid in ["fit", "ports", "gated"] {
        q.add(
            pod(uid),
            vec![0],
            (uid == "gated").then(|| ("Gate".to_owned(), "Gate: wait".to_owned())),
            secs(0),
        );
    }
    for (uid, by) in [("fit", "Fit"), ("ports", "Ports")] {
        let p = q.pop().unwrap();
        assert_eq!(p.pod.uid, uid);
        q.requeue_failed(p, plugins(&[by]), "no".into(), secs(0), &Oracle::default());
    }
    assert_eq!(q.queue_of("fit"), Some(QueueName::Unschedulable));
    // Long after the backoff: straight to activeQ.
    assert_eq!(
        q.move_rejected_by(&plugins(&["Fit", "Gate"]), secs(60), "PluginReload"),
        1
    );
    assert_eq!(q.queue_of("fit"), Some(QueueName::Active));
    assert_eq!(q.queue_of("ports"), Some(QueueName::Unschedulable));
    assert_eq!(q.queue_of("gated"), Some(QueueName::Gated));
    let gated: Vec<String> = q
        .gated_by(&plugins(&["Gate"]))
        .into_iter()
        .map(|p| p.uid)
        .collect();
    assert_eq!(gated, ["gated"]);
    assert!(q.gated_by(&plugins(&["Fit"])).is_empty());
    assert_eq!(
        q.incoming()[&("PluginReload".to_owned(), QueueName::Active)],
        1
    );
}

#[test]
fn a_pod_whose_key_or_gate_failed_is_held_back_until_they_are_asked_again() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add_failed(pod("a"), "plugin P trapped".into(), secs(0));
    assert_eq!(q.queue_of("a"), Some(QueueName::Backoff));
    assert_eq!(q.get("a").unwrap().attempts, 1);
    // Its backoff ends: on its way to activeQ it is held back, not popped.
    assert_eq!(q.flush_backoff(secs(1)), 1);
    assert!(q.pop().is_none());
    assert_eq!(q.queue_of("a"), Some(QueueName::Backoff));
    // An update meanwhile is the version asked.
    let mut newer = pod("a");
    newer.labels.insert("v".into(), "2".into());
    q.update(newer, vec![9], None, secs(1), &Oracle::default());
    let taken = q.take_regating();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].pod.labels["v"], "2");
    assert!(q.take_regating().is_empty());
    // Asked again and failing again: it backs off longer.
    let qp = taken.into_iter().next().unwrap();
    q.regate_failed(qp, "plugin P trapped".into(), secs(1));
    assert_eq!(q.get("a").unwrap().attempts, 2);
    assert_eq!(q.next_backoff_flush(u32::MAX), Some(secs(3)));
    q.flush_backoff(secs(3));
    // Asked again and answered: in it goes, with its key.
    let qp = q.take_regating().into_iter().next().unwrap();
    q.regated(qp, vec![5], None, "PreEnqueueRetry");
    let a = q.pop().unwrap();
    assert_eq!((a.key.as_slice(), a.regate), (&[5][..], false));
    // Deleted while held back: gone.
    q.add_failed(pod("b"), "plugin P trapped".into(), secs(10));
    q.flush_backoff(secs(11));
    assert!(q.delete("b"));
    assert!(q.take_regating().is_empty());
}

#[test]
fn a_pod_on_its_way_to_active_q_whose_key_fails_again_is_queued_once() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add_failed(pod("a"), "plugin P trapped".into(), secs(0));
    q.flush_backoff(secs(1));
    // On its way to activeQ (its key and gate not asked yet), an update whose key
    // fails: the one pod backs off again, it is not left behind as well.
    q.add_failed(pod("a"), "plugin P trapped again".into(), secs(1));
    assert!(q.take_regating().is_empty());
    assert_eq!(q.queue_of("a"), Some(QueueName::Backoff));
    let a = q.get("a").unwrap();
    assert_eq!(a.attempts, 2);
    assert_eq!(a.last_failure.as_deref(), Some("plugin P trapped again"));
    q.flush_backoff(secs(60));
    assert_eq!(q.take_regating().len(), 1);
}

#[test]
fn events_are_kept_for_pods_in_a_scheduling_cycle_not_in_a_binding_cycle() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(pod("binding"), vec![0], None, secs(0));
    q.add(pod("deciding"), vec![1], None, secs(0));
    let binding = q.pop().unwrap();
    assert_eq!(binding.pod.uid, "binding");
    q.on_event(node_add(), None, None, secs(0), &Oracle::default());
    assert_eq!(q.events_kept(), 1);
    // Past Permit: its binding cycle's end depends on no event.
    q.binding_started("binding");
    assert_eq!(q.events_kept(), 0);
    q.on_event(node_add(), None, None, secs(0), &Oracle::default());
    assert_eq!(q.events_kept(), 0);
    // A pod in its scheduling cycle needs the events from its start on.
    let deciding = q.pop().unwrap();
    q.on_event(node_add(), None, None, secs(1), &Oracle::default());
    assert_eq!(q.events_kept(), 1);
    // Its rejection sees the event: a Node add may help Fit.
    let oracle = fit_oracle(QueueingHint::Queue);
    let went = q.requeue_failed(deciding, plugins(&["Fit"]), "no".into(), secs(1), &oracle);
    assert_eq!(went, Some(QueueName::Backoff));
    assert_eq!(q.events_kept(), 0);
    // The binding cycle still ends as before: still in flight, it fails with an error.
    assert!(q.is_in_flight("binding"));
    let went = q.requeue_failed(binding, BTreeSet::new(), "bind".into(), secs(2), &oracle);
    assert_eq!(went, Some(QueueName::Backoff));
}

#[test]
fn a_pod_whose_cycle_saw_events_dropped_for_room_backs_off_rather_than_wait() {
    let mut q = SchedulingQueue::new(QueueConfig {
        max_kept_events: 3,
        ..QueueConfig::default()
    });
    let oracle = fit_oracle(QueueingHint::Queue);
    // A Node event helps Fit; a Pod delete elsewhere does not (no hint registered).
    let pod_delete = || ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
    q.add(pod("a"), vec![0], None, secs(0));
    let a = q.pop().unwrap();
    q.on_event(node_add(), None, None, secs(0), &oracle);
    for _ in 0..5 {
        q.on_event(pod_delete(), None, None, secs(0), &oracle);
    }
    assert_eq!(q.events_kept(), 3);
    // The node event was dropped: without it the pod would wait in unschedulable.
    let went = q.requeue_failed(a, plugins(&["Fit"]), "no".into(), secs(0), &oracle);
    assert_eq!(went, Some(QueueName::Backoff));
    // A pod whose own cycle lost nothing still waits for a helpful event.
    q.add(pod("b"), vec![0], None, secs(0));
    q.flush_backoff(secs(60));
    let popped: Vec<QueuedPod> = std::iter::from_fn(|| q.pop()).collect();
    assert_eq!(popped.len(), 2);
    let b = popped.into_iter().find(|p| p.pod.uid == "b").unwrap();
    q.on_event(pod_delete(), None, None, secs(60), &oracle);
    let went = q.requeue_failed(b, plugins(&["Fit"]), "no".into(), secs(60), &oracle);
    assert_eq!(went, Some(QueueName::Unschedulable));
}

#[test]
fn each_plugin_counts_the_pending_pods_it_keeps_out_until_their_next_attempt() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    let oracle = fit_oracle(QueueingHint::QueueSkip);
    let count = |q: &SchedulingQueue| -> Vec<(String, String, usize)> {
        q.unschedulable_by_plugin()
            .into_iter()
            .map(|((plugin, profile), n)| (plugin, profile, n))
            .collect()
    };
    let named = |uid: &str, profile: &str| Pod {
        scheduler_name: profile.into(),
        ..pod(uid)
    };
    q.add(named("a", "default-scheduler"), vec![0], None, secs(0));
    q.add(named("b", "default-scheduler"), vec![0], None, secs(0));
    q.add(named("c", "other"), vec![0], None, secs(0));
    q.add(
        named("gated", "default-scheduler"),
        vec![0],
        Some(("SchedulingGates".into(), "waiting for gates".into())),
        secs(0),
    );
    // Only the gate counts before any attempt.
    assert_eq!(
        count(&q),
        [("SchedulingGates".into(), "default-scheduler".into(), 1)]
    );
    for _ in 0..3 {
        let qp = q.pop().unwrap();
        let by = if qp.pod.uid == "a" {
            plugins(&["Fit", "TaintToleration"])
        } else {
            plugins(&["Fit"])
        };
        q.requeue_failed(qp, by, "0/1 nodes".into(), secs(1), &oracle);
    }
    assert_eq!(
        count(&q),
        [
            ("Fit".into(), "default-scheduler".into(), 2),
            ("Fit".into(), "other".into(), 1),
            ("SchedulingGates".into(), "default-scheduler".into(), 1),
            ("TaintToleration".into(), "default-scheduler".into(), 1),
        ]
    );
    // A deleted pod leaves the count; an ungated one counts for its gate until its
    // first attempt starts, as upstream's.
    q.delete("c");
    q.update(
        named("gated", "default-scheduler"),
        vec![0],
        None,
        secs(2),
        &oracle,
    );
    assert_eq!(
        count(&q),
        [
            ("Fit".into(), "default-scheduler".into(), 2),
            ("SchedulingGates".into(), "default-scheduler".into(), 1),
            ("TaintToleration".into(), "default-scheduler".into(), 1),
        ]
    );
    assert_eq!(q.pop().unwrap().pod.uid, "gated");
    assert_eq!(
        count(&q),
        [
            ("Fit".into(), "default-scheduler".into(), 2),
            ("TaintToleration".into(), "default-scheduler".into(), 1),
        ]
    );
    // An attempt under way counts for none of its plugins.
    q.flush_unschedulable_leftover(secs(1000));
    q.flush_backoff(secs(1000));
    let popped = q.pop().unwrap();
    let other: Vec<(String, String, usize)> = if popped.pod.uid == "a" {
        vec![("Fit".into(), "default-scheduler".into(), 1)]
    } else {
        vec![
            ("Fit".into(), "default-scheduler".into(), 1),
            ("TaintToleration".into(), "default-scheduler".into(), 1),
        ]
    };
    assert_eq!(count(&q), other);
    // It fails again, by another plugin.
    q.requeue_failed(
        popped,
        plugins(&["NodePorts"]),
        "ports".into(),
        secs(1001),
        &oracle,
    );
    let mut expected = other;
    expected.push(("NodePorts".into(), "default-scheduler".into(), 1));
    expected.sort();
    assert_eq!(count(&q), expected);
}

#[test]
fn a_gated_pod_is_asked_again_when_its_gating_plugin_s_hint_says_queue() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    let gate = |p: &str| Some((p.to_owned(), format!("{p}: waiting")));
    q.add(pod("member"), vec![0], gate("Gang"), secs(0));
    q.add(pod("other"), vec![0], gate("Gates"), secs(0));
    let pod_add = ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD);
    // Only the gating plugin's own hint counts: the other gate stays shut.
    let oracle = Oracle(HashMap::from([
        (
            "Gang",
            (vec![EventResource::UnscheduledPod], QueueingHint::Queue),
        ),
        ("Gates", (vec![EventResource::Node], QueueingHint::Queue)),
    ]));
    assert_eq!(q.on_event(pod_add, None, None, secs(1), &oracle), 1);
    let regating: Vec<String> = q.take_regating().into_iter().map(|q| q.pod.uid).collect();
    assert_eq!(regating, ["member"]);
    assert_eq!(q.queue_of("other"), Some(QueueName::Gated));
    // A hint that says QueueSkip leaves a gated pod where it is.
    let skip = Oracle(HashMap::from([(
        "Gates",
        (vec![EventResource::UnscheduledPod], QueueingHint::QueueSkip),
    )]));
    assert_eq!(q.on_event(pod_add, None, None, secs(2), &skip), 0);
    assert_eq!(q.queue_of("other"), Some(QueueName::Gated));
}

#[test]
fn a_group_s_members_are_taken_from_any_queue_but_the_gated_and_in_flight() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    for uid in ["active", "backoff", "unschedulable", "gated", "flying"] {
        q.add(pod(uid), vec![0], None, secs(0));
    }
    // Put each where its name says.
    let mut popped: HashMap<String, QueuedPod> = std::iter::from_fn(|| q.pop())
        .map(|qp| (qp.pod.uid.clone(), qp))
        .collect();
    let oracle = Oracle::default();
    let b = popped.remove("backoff").unwrap();
    q.requeue_failed(b, BTreeSet::new(), "error".into(), secs(0), &oracle);
    let u = popped.remove("unschedulable").unwrap();
    q.requeue_failed(u, plugins(&["Fit"]), "no room".into(), secs(0), &oracle);
    let a = popped.remove("active").unwrap();
    q.requeue_failed(a, plugins(&["Fit"]), "no room".into(), secs(0), &oracle);
    assert!(q.activate("active"));
    q.done("gated");
    q.add(
        popped.remove("gated").unwrap().pod,
        vec![0],
        Some(("Gang".into(), "Gang: waiting".into())),
        secs(0),
    );
    assert_eq!(q.queue_of("backoff"), Some(QueueName::Backoff));
    assert_eq!(q.queue_of("unschedulable"), Some(QueueName::Unschedulable));
    assert_eq!(q.queue_of("active"), Some(QueueName::Active));

    for uid in ["active", "backoff", "unschedulable"] {
        let qp = q.pop_specific(uid).unwrap_or_else(|| panic!("{uid}"));
        assert_eq!(qp.pod.uid, uid);
        assert!(q.is_in_flight(uid), "{uid} is in its group's cycle");
        assert_eq!(q.queue_of(uid), None);
    }
    assert!(q.pop_specific("gated").is_none());
    assert!(q.pop_specific("flying").is_none(), "already in a cycle");
    assert!(q.pop_specific("unknown").is_none());
    // The stale heap entries of the members taken are skipped.
    assert!(q.pop().is_none());
}

#[test]
fn a_changed_group_moves_its_waiting_members() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(
        pod("gated"),
        vec![0],
        Some(("Gang".into(), "Gang: waiting".into())),
        secs(0),
    );
    q.add(pod("rejected"), vec![0], None, secs(0));
    q.add(pod("queued"), vec![0], None, secs(0));
    let oracle = Oracle::default();
    let r = q.pop().unwrap();
    assert_eq!(r.pod.uid, "rejected");
    q.requeue_failed(
        r,
        plugins(&["Gang"]),
        "cannot be placed".into(),
        secs(0),
        &oracle,
    );
    let members: Vec<String> = ["gated", "rejected", "queued", "stranger"]
        .map(str::to_owned)
        .to_vec();
    // The gated one has its gate asked again; the rejected one is retried once its
    // backoff ends; the one already in activeQ stays.
    assert_eq!(q.group_changed(&members, secs(0), "PodGroupUpdate"), 2);
    let regating: Vec<String> = q.take_regating().into_iter().map(|q| q.pod.uid).collect();
    assert_eq!(regating, ["gated"]);
    assert_eq!(q.queue_of("rejected"), Some(QueueName::Backoff));
    assert_eq!(q.queue_of("queued"), Some(QueueName::Active));
}

fn member(uid: &str, group: &str) -> Pod {
    Pod {
        scheduling_group: Some(group.into()),
        ..pod(uid)
    }
}

fn gid(name: &str) -> GroupId {
    ("default".to_owned(), name.to_owned())
}

fn pop_order(q: &mut SchedulingQueue) -> Vec<String> {
    std::iter::from_fn(|| q.pop()).map(|q| q.pod.uid).collect()
}

#[test]
fn a_keyed_group_is_sorted_by_its_own_key_not_its_members() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    // The PodGroup's priority is 1000; its members' own is 0.
    q.set_group_key(gid("gang"), vec![-1000]);
    q.add(pod("plain"), vec![-500], None, secs(0));
    q.add(member("m1", "gang"), vec![0], None, secs(0));
    q.add(member("m2", "gang"), vec![0], None, secs(0));
    q.add(pod("low"), vec![0], None, secs(0));
    // The group pops first, member by member in arrival order while it keeps its
    // place (the scheduler takes the rest with pop_specific; popping shows the place).
    assert_eq!(pop_order(&mut q), ["m1", "m2", "plain", "low"]);
}

#[test]
fn a_group_is_placed_by_its_first_member_and_gone_with_its_last() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.set_group_key(gid("g"), vec![0]);
    q.add(pod("a"), vec![0], None, secs(0));
    q.add(member("m1", "g"), vec![0], None, secs(0));
    q.add(pod("b"), vec![0], None, secs(0));
    q.add(member("m2", "g"), vec![0], None, secs(0));
    assert_eq!(q.pop().unwrap().pod.uid, "a");
    // m2 arrived after b, yet goes with its group, before b.
    assert_eq!(q.pop().unwrap().pod.uid, "m1");
    assert_eq!(q.pop_specific("m2").unwrap().pod.uid, "m2");
    assert_eq!(pop_order(&mut q), ["b"]);
    // A member arriving later places the group anew, behind what waits.
    q.add(pod("c"), vec![0], None, secs(0));
    q.add(member("m3", "g"), vec![0], None, secs(0));
    assert_eq!(pop_order(&mut q), ["c", "m3"]);
}

#[test]
fn members_of_a_group_without_a_key_wait_as_pods() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(member("m1", "g"), vec![0], None, secs(0));
    q.add(pod("high"), vec![-10], None, secs(0));
    q.add(member("m2", "g"), vec![0], None, secs(0));
    assert_eq!(pop_order(&mut q), ["high", "m1", "m2"]);
}

#[test]
fn a_group_key_changed_or_forgotten_reorders_its_waiting_members() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.set_group_key(gid("g"), vec![0]);
    q.add(member("m1", "g"), vec![-5], None, secs(0));
    q.add(pod("mid"), vec![-3], None, secs(0));
    q.add(member("m2", "g"), vec![1], None, secs(0));
    // Raised above `mid`: the group moves ahead of it.
    q.set_group_key(gid("g"), vec![-4]);
    assert_eq!(q.pop().unwrap().pod.uid, "m1");
    q.add(member("m3", "g"), vec![-5], None, secs(0));
    // Forgotten (its PodGroup deleted): each member by its own key.
    q.forget_group(&gid("g"));
    assert!(!q.has_group_key(&gid("g")));
    assert_eq!(pop_order(&mut q), ["m3", "mid", "m2"]);
}

#[test]
fn rekey_gives_groups_their_new_keys_and_forgets_the_rest() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.set_group_key(gid("kept"), vec![0]);
    q.set_group_key(gid("dropped"), vec![-100]);
    q.add(pod("p"), vec![-1], None, secs(0));
    q.add(member("k1", "kept"), vec![5], None, secs(0));
    q.add(member("d1", "dropped"), vec![5], None, secs(0));
    let groups = HashMap::from([(gid("kept"), vec![-2])]);
    q.rekey(&HashMap::new(), &groups);
    assert!(!q.has_group_key(&gid("dropped")));
    assert_eq!(pop_order(&mut q), ["k1", "p", "d1"]);
}

#[test]
fn a_member_leaving_activeq_leaves_its_group_there_for_the_others() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.set_group_key(gid("g"), vec![-1]);
    q.add(member("m1", "g"), vec![0], None, secs(0));
    q.add(member("m2", "g"), vec![0], None, secs(0));
    q.add(pod("p"), vec![0], None, secs(0));
    assert!(q.delete("m1"));
    assert_eq!(q.pending()[&QueueName::Active], 2);
    assert_eq!(pop_order(&mut q), ["m2", "p"]);
    assert_eq!(q.pending()[&QueueName::Active], 0);
}

#[test]
fn the_claims_made_for_a_pod_are_an_update_of_their_own() {
    let with_claim = |claim: Option<&str>| {
        let mut p = pod("a");
        p.resource_claim_statuses = vec![berth_sdk::PodResourceClaimStatus {
            name: "gpu".into(),
            resource_claim_name: claim.map(str::to_owned),
        }];
        p
    };
    let generated = ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM;
    assert_eq!(
        pod_update_actions(&pod("a"), &with_claim(Some("a-gpu"))),
        generated
    );
    assert_eq!(
        pod_update_actions(&with_claim(None), &with_claim(Some("a-gpu"))),
        generated
    );
    assert_eq!(
        pod_update_actions(&with_claim(Some("a-gpu")), &with_claim(Some("a-gpu"))),
        ActionType::UPDATE_OTHER
    );
    let mut extended = pod("a");
    extended.extended_resource_claim_status = Some(berth_sdk::PodExtendedResourceClaimStatus {
        resource_claim_name: "a-extended-resources".into(),
        request_mappings: Vec::new(),
    });
    assert_eq!(pod_update_actions(&pod("a"), &extended), generated);
    let mut relabeled = extended.clone();
    relabeled.labels.insert("app".into(), "web".into());
    assert_eq!(
        pod_update_actions(&pod("a"), &relabeled),
        generated | ActionType::UPDATE_POD_LABEL
    );
}

/// Queues a pod for DynamicResources only on an update of the claims made for it.
struct GeneratedClaims;

impl HintOracle for GeneratedClaims {
    fn hint(
        &self,
        plugin: &str,
        event: &ClusterEvent,
        _: &Pod,
        _: Option<&Object>,
        _: Option<&Object>,
    ) -> QueueingHint {
        let wanted = ClusterEvent::new(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
        );
        if plugin == "DynamicResources" && wanted.covers(event) {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    }
}

#[test]
fn a_pod_waiting_for_its_claims_moves_when_they_are_made() {
    let mut q = SchedulingQueue::new(QueueConfig::default());
    q.add(pod("a"), vec![0], None, secs(0));
    let a = q.pop().unwrap();
    q.requeue_failed(
        a,
        plugins(&["DynamicResources"]),
        "waiting for resourceclaim".into(),
        secs(0),
        &GeneratedClaims,
    );
    // Another update of the pod does not help.
    let mut relabeled = pod("a");
    relabeled.labels.insert("app".into(), "web".into());
    q.update(relabeled.clone(), vec![0], None, secs(10), &GeneratedClaims);
    assert_eq!(q.queue_of("a"), Some(QueueName::Unschedulable));
    // The resourceclaim controller made the claim: the pod is tried again.
    let mut made = relabeled;
    made.resource_claim_statuses = vec![berth_sdk::PodResourceClaimStatus {
        name: "gpu".into(),
        resource_claim_name: Some("a-gpu".into()),
    }];
    q.update(made, vec![0], None, secs(20), &GeneratedClaims);
    assert_eq!(q.queue_of("a"), Some(QueueName::Active));
}

/// Pods an event moves together leave the unschedulable set in queue order (each
/// one's timestamp, then the order it was queued), not in the set's hash order, which
/// differs from one process to the next: pods of equal keys then pop in the same
/// order on every run, into activeQ and through backoffQ alike.
#[test]
fn pods_an_event_moves_together_pop_in_queue_order_on_every_run() {
    // Failed in this order, half at t=0 and half at t=1; the last to fail first.
    let names: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
    let failed_order = |q: &mut SchedulingQueue| {
        for n in names.iter().rev() {
            q.add(pod(n), vec![0], None, secs(0));
        }
        let popped: Vec<QueuedPod> = std::iter::from_fn(|| q.pop()).collect();
        for (i, p) in popped.into_iter().enumerate() {
            let at = if i < 20 { secs(0) } else { secs(1) };
            q.requeue_failed(p, plugins(&["Fit"]), "no".into(), at, &Oracle::default());
        }
    };
    let expected: Vec<String> = names.iter().rev().cloned().collect();

    // Backoffs over: straight to activeQ.
    let mut q = SchedulingQueue::new(QueueConfig::default());
    failed_order(&mut q);
    assert_eq!(
        q.on_event(
            node_add(),
            None,
            None,
            secs(10),
            &fit_oracle(QueueingHint::Queue)
        ),
        40
    );
    assert_eq!(pop_order(&mut q), expected);

    // Still backing off: through backoffQ.
    let mut q = SchedulingQueue::new(QueueConfig::default());
    failed_order(&mut q);
    q.on_event(
        node_add(),
        None,
        None,
        Duration::from_millis(500),
        &fit_oracle(QueueingHint::Queue),
    );
    q.flush_backoff(secs(10));
    assert_eq!(pop_order(&mut q), expected);

    // Unschedulable too long: flushed in the same order.
    let mut q = SchedulingQueue::new(QueueConfig::default());
    failed_order(&mut q);
    assert_eq!(q.flush_unschedulable_leftover(secs(1000)), 40);
    q.flush_backoff(secs(1000));
    assert_eq!(pop_order(&mut q), expected);

    // A reloaded plugin's rejections: the same.
    let mut q = SchedulingQueue::new(QueueConfig::default());
    failed_order(&mut q);
    assert_eq!(
        q.move_rejected_by(&plugins(&["Fit"]), secs(10), "PluginReload"),
        40
    );
    assert_eq!(pop_order(&mut q), expected);
}
