//! Opportunistic batching through the real host and the built-in plugins: pods signed
//! alike are placed from the ranking of an earlier cycle, on a node that fits them,
//! where a full cycle would have put them; pods that cannot be signed, profiles with
//! a plugin that cannot sign, and the feature gate turned off run every cycle in
//! full.

use berth::clock::VirtualClock;
use berth::cluster::memory::MemoryCluster;
use berth::config::Configuration;
use berth::framework::ExplainOptions;
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_tests::{apply, plugin_calls, runtime};
use std::collections::BTreeMap;
use std::sync::Arc;

fn scheduler(config: &Configuration, batching: bool) -> Scheduler {
    let mut options = SchedulerOptions::default();
    options.framework.batching = batching;
    options.framework.seed = 3;
    Scheduler::new(
        &runtime(),
        config,
        "<test>",
        &options,
        Arc::new(MemoryCluster::new()),
        Arc::new(VirtualClock::default()),
    )
    .unwrap()
}

/// `count` nodes `n0`, `n1`, ..., node `i` with `4 + i` CPUs (so that their scores
/// differ) and 64 GiB.
fn nodes(count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, labels: {{kubernetes.io/hostname: n{i}}}}}\nstatus: {{allocatable: {{cpu: '{}', memory: 64Gi, pods: '110'}}}}\n---\n",
                4 + i
            )
        })
        .collect()
}

/// `count` identical pods `p0`, `p1`, ... of one CPU, with `spec` lines added under
/// the container.
fn pods(count: usize, container: &str) -> String {
    (0..count)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: default, uid: uid-p{i}, labels: {{app: web}}}}\nspec:\n  containers:\n  - name: c\n    image: web\n    resources: {{requests: {{cpu: '1', memory: 1Gi}}}}\n{container}---\n"
            )
        })
        .collect()
}

/// The node of each pod, by pod name.
fn placements(s: &Scheduler, count: usize) -> BTreeMap<String, String> {
    (0..count)
        .map(|i| {
            let o = s.outcome(&format!("uid-p{i}")).expect("an outcome");
            let node = o
                .node
                .clone()
                .unwrap_or_else(|| panic!("p{i} was not placed: {}", o.message));
            (format!("p{i}"), node)
        })
        .collect()
}

/// `scheduler_batch_attempts_total` for the default profile and `result`.
fn attempts(s: &Scheduler, result: &str) -> u64 {
    let line = format!(
        "scheduler_batch_attempts_total{{profile=\"default-scheduler\",result=\"{result}\"}} "
    );
    s.metrics_text()
        .lines()
        .find_map(|l| l.strip_prefix(line.as_str()))
        .map_or(0, |n| n.parse().unwrap())
}

fn batched(s: &Scheduler, count: usize) -> usize {
    (0..count)
        .filter(|i| s.outcome(&format!("uid-p{i}")).unwrap().batched)
        .count()
}

#[test]
fn identical_pods_go_to_a_best_node_of_a_full_cycle() {
    const NODES: usize = 12;
    const PODS: usize = 60;
    let mut s = scheduler(&Configuration::default(), true);
    apply(&mut s, &nodes(NODES));
    let all = pods(PODS, "");
    for (i, doc) in all.split("---\n").filter(|d| !d.is_empty()).enumerate() {
        apply(&mut s, doc);
        // What a full cycle makes of the pod now: every node filtered and scored.
        let (pod, _) = s.waiting_pod(&format!("default/p{i}")).expect("queued");
        let pod = pod.clone();
        let seen = s
            .explain(&pod, &ExplainOptions::default())
            .expect("explained");
        let best = seen
            .nodes
            .iter()
            .filter(|n| n.feasible)
            .map(|n| n.total)
            .max()
            .expect("a feasible node");
        s.run_until_idle();
        let o = s.outcome(&format!("uid-p{i}")).expect("an outcome");
        let node = o
            .node
            .clone()
            .unwrap_or_else(|| panic!("p{i}: {}", o.message));
        let total = seen.nodes.iter().find(|n| n.node == node).unwrap().total;
        assert_eq!(
            total, best,
            "p{i} (batched: {}) went to {node}, scored {total}; the best scored {best}",
            o.batched
        );
    }
    // The first pod's cycle ranks the nodes; the pods after it are offered the best
    // of them, and the node the last one went to is scored again each time.
    assert!(
        attempts(&s, "hint_used") >= (PODS as u64) / 2,
        "hints used: {}, not used: {}, none: {}",
        attempts(&s, "hint_used"),
        attempts(&s, "hint_not_used"),
        attempts(&s, "no_hint")
    );
    assert_eq!(
        batched(&s, PODS) as u64,
        attempts(&s, "hint_used"),
        "the outcomes say which pods came from a batch"
    );
    // The pods differ only in name and UID: one template, signed once by each
    // (built-in) plugin.
    assert_eq!(plugin_calls(&s, "NodeName", "SignPod"), 1);
    assert_eq!(plugin_calls(&s, "NodeResourcesFit", "SignPod"), 1);
    // A pod that asks for more is another template.
    apply(
        &mut s,
        &pods(PODS + 1, "")
            .split("---\n")
            .nth(PODS)
            .unwrap()
            .replace("cpu: '1'", "cpu: '2'"),
    );
    s.run_until_idle();
    assert_eq!(plugin_calls(&s, "NodeResourcesFit", "SignPod"), 2);

    // Without batching, every cycle is a full one.
    let mut off = scheduler(&Configuration::default(), false);
    apply(&mut off, &(nodes(NODES) + &all));
    off.run_until_idle();
    placements(&off, PODS);
    assert_eq!(attempts(&off, "hint_used"), 0);
    assert_eq!(batched(&off, PODS), 0);
}

#[test]
fn a_host_port_sends_each_pod_to_a_node_of_its_own() {
    // The node the last pod took no longer fits the next one, so the next hint is
    // the next node of the ranking, as in upstream's HostPortConflict workload.
    const NODES: usize = 20;
    let port = "    ports: [{containerPort: 80, hostPort: 8080}]\n";
    let mut s = scheduler(&Configuration::default(), true);
    apply(&mut s, &(nodes(NODES) + &pods(NODES, port)));
    s.run_until_idle();
    let placed = placements(&s, NODES);
    let mut used: Vec<&String> = placed.values().collect();
    used.sort();
    used.dedup();
    assert_eq!(used.len(), NODES, "two pods share a host port: {placed:?}");
    assert!(attempts(&s, "hint_used") >= (NODES as u64) / 2);

    // One more pod with the port fits nowhere; the batch does not make it fit.
    apply(&mut s, &pods(NODES + 1, port));
    s.run_until_idle();
    let last = s.outcome(&format!("uid-p{NODES}")).unwrap();
    assert_eq!(last.node, None, "{}", last.message);
}

#[test]
fn pods_that_cannot_be_signed_run_every_cycle_in_full() {
    // Topology spread constraints make a pod's verdicts depend on where the others
    // went: PodTopologySpread cannot sign it.
    let spread = "  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}\n";
    let manifests = nodes(6)
        + &pods(12, "")
            .split("---\n")
            .filter(|d| !d.is_empty())
            .map(|d| format!("{d}{spread}---\n"))
            .collect::<String>();
    let mut s = scheduler(&Configuration::default(), true);
    apply(&mut s, &manifests);
    s.run_until_idle();
    let placed = placements(&s, 12);
    assert_eq!(attempts(&s, "hint_used"), 0);
    // Each is a batch attempt without a hint, as upstream counts them.
    assert_eq!(attempts(&s, "no_hint"), 12);
    // Spread evenly: two per node.
    let mut per_node: BTreeMap<&String, usize> = BTreeMap::new();
    for n in placed.values() {
        *per_node.entry(n).or_default() += 1;
    }
    assert!(per_node.values().all(|&c| c == 2), "{per_node:?}");
}

#[test]
fn a_plugin_that_cannot_sign_turns_batching_off_for_its_profile() {
    // NodePreference (a test fixture) implements Score but not SignPod.
    let text = format!(
        "modules:\n- name: NodePreference\n  path: {}\nprofiles:\n- plugins:\n    score:\n      enabled: [{{name: NodePreference, weight: 5}}]\n",
        berth_artifacts::fixtures::FIXTURE_PREFER_FIRST_NODE
    );
    let config = Configuration::parse("test.yaml", &text).unwrap();
    let mut s = scheduler(&config, true);
    apply(&mut s, &(nodes(6) + &pods(12, "")));
    s.run_until_idle();
    placements(&s, 12);
    assert_eq!(attempts(&s, "hint_used"), 0);
    assert_eq!(attempts(&s, "no_hint"), 0);
    assert_eq!(batched(&s, 12), 0);
}

#[test]
fn the_feature_gate_turns_batching_off() {
    let mut options = berth::framework::FrameworkOptions::default();
    berth::features::apply("OpportunisticBatching=false", &mut options).unwrap();
    assert!(!options.batching);
    let mut s = scheduler(&Configuration::default(), options.batching);
    apply(&mut s, &(nodes(6) + &pods(12, "")));
    s.run_until_idle();
    placements(&s, 12);
    assert_eq!(attempts(&s, "hint_used") + attempts(&s, "no_hint"), 0);
}
