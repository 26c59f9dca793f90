//! Which plugins a pod's cycle calls, and on which nodes. Plugins sit out the cycles
//! of pods they have nothing to do with: NodeAffinity, PodTopologySpread and
//! InterPodAffinity are not called for a pod without a node selector or affinity,
//! spread constraints, something that selects it, or pod affinity terms (of its own
//! or of any pod in the cluster), and are called, and decide, as soon as the pod or
//! the cluster has them. A PreFilter that names the only nodes that can fit leaves
//! the others out, reported as upstream reports them.

use berth::clock::VirtualClock;
use berth::cluster::memory::MemoryCluster;
use berth::config::Configuration;
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_tests::{apply, plugin_calls, runtime};
use std::sync::Arc;

fn scheduler(config: &Configuration) -> Scheduler {
    Scheduler::new(
        &runtime(),
        config,
        "<test>",
        &SchedulerOptions::default(),
        Arc::new(MemoryCluster::new()),
        Arc::new(VirtualClock::default()),
    )
    .unwrap()
}

fn nodes() -> String {
    ["n1", "n2"]
        .iter()
        .map(|n| {
            format!(
                "apiVersion: v1\nkind: Node\nmetadata: {{name: {n}, labels: {{kubernetes.io/hostname: {n}, topology.kubernetes.io/zone: z-{n}}}}}\nstatus: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}}}\n---\n"
            )
        })
        .collect()
}

/// A pod labelled `app: <name>`, with `spec` lines added under `spec:`.
fn pod(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}, labels: {{app: {name}}}}}\nspec:\n  containers: [{{name: c, image: app, resources: {{requests: {{cpu: 100m}}}}}}]\n{spec}---\n"
    )
}

const SAT_OUT: [&str; 3] = ["NodeAffinity", "PodTopologySpread", "InterPodAffinity"];

fn pre_filter_calls(s: &Scheduler) -> [u64; 3] {
    SAT_OUT.map(|p| plugin_calls(s, p, "PreFilter"))
}

fn node_of(s: &Scheduler, name: &str) -> String {
    let o = s.outcome(&format!("uid-{name}")).unwrap();
    o.node
        .clone()
        .unwrap_or_else(|| panic!("{name}: {}", o.message))
}

#[test]
fn affinity_and_spread_plugins_take_part_only_for_pods_that_need_them() {
    let mut s = scheduler(&Configuration::default());
    apply(&mut s, &(nodes() + &pod("plain", "")));
    s.run_until_idle();
    node_of(&s, "plain");
    for plugin in SAT_OUT {
        for point in ["PreFilter", "Filter", "PreScore", "Score"] {
            assert_eq!(plugin_calls(&s, plugin, point), 0, "{plugin} at {point}");
        }
    }
    assert!(plugin_calls(&s, "NodeResourcesFit", "PreFilter") > 0);

    // A node selector brings NodeAffinity in, and it decides.
    apply(
        &mut s,
        &pod("pinned", "  nodeSelector: {kubernetes.io/hostname: n2}\n"),
    );
    s.run_until_idle();
    assert_eq!(node_of(&s, "pinned"), "n2");
    assert_eq!(pre_filter_calls(&s), [1, 0, 0]);

    // Spread constraints bring PodTopologySpread in.
    apply(
        &mut s,
        &pod(
            "spread",
            "  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: spread}}}\n",
        ),
    );
    s.run_until_idle();
    node_of(&s, "spread");
    assert_eq!(pre_filter_calls(&s), [1, 1, 0]);

    // A Service that selects the pod gives it the default constraints (soft ones:
    // PreFilter answers Skip, PreScore works).
    let scored = plugin_calls(&s, "PodTopologySpread", "PreScore");
    apply(
        &mut s,
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec: {selector: {app: served}}\n---\n",
    );
    apply(&mut s, &pod("served", ""));
    s.run_until_idle();
    node_of(&s, "served");
    assert_eq!(
        plugin_calls(&s, "PodTopologySpread", "PreScore"),
        scored + 1
    );
    assert_eq!(pre_filter_calls(&s), [1, 2, 0]);

    // Anti-affinity of the pod's own brings InterPodAffinity in.
    apply(
        &mut s,
        &pod(
            "lonely",
            "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: crowd}}}\n",
        ),
    );
    s.run_until_idle();
    let lonely = node_of(&s, "lonely");
    assert_eq!(pre_filter_calls(&s), [1, 2, 1]);

    // Now a pod in the cluster has terms: InterPodAffinity takes part for a pod
    // without any, and keeps it off the node whose pod refuses it.
    apply(&mut s, &pod("crowd", ""));
    s.run_until_idle();
    assert_eq!(pre_filter_calls(&s), [1, 2, 2]);
    assert_ne!(node_of(&s, "crowd"), lonely);
}

#[test]
fn node_affinity_with_added_affinity_takes_part_for_every_pod() {
    let config = Configuration::parse(
        "config.yaml",
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          - matchExpressions:\n            - {key: kubernetes.io/hostname, operator: In, values: [n1]}\n",
    )
    .unwrap();
    let mut s = scheduler(&config);
    apply(&mut s, &(nodes() + &pod("plain", "")));
    s.run_until_idle();
    assert_eq!(node_of(&s, "plain"), "n1", "the added affinity decides");
    assert_eq!(pre_filter_calls(&s), [1, 0, 0]);
}

#[test]
fn nodes_a_pre_filter_leaves_out_are_reported_as_upstream_reports_them() {
    let mut s = scheduler(&Configuration::default());
    let mut yaml = nodes();
    yaml += "apiVersion: v1\nkind: Node\nmetadata: {name: n3, labels: {kubernetes.io/hostname: n3}}\nstatus: {allocatable: {cpu: 50m, memory: 8Gi, pods: '110'}}\n---\n";
    // NodeAffinity's PreFilter names the node of a `metadata.name` field selector
    // (one value, as upstream's field selectors take); n3 is too small.
    yaml += &pod(
        "named",
        "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields:\n          - {key: metadata.name, operator: In, values: [n2]}\n",
    );
    yaml += &pod(
        "narrowed-to-small",
        "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields:\n          - {key: metadata.name, operator: In, values: [n3]}\n",
    );
    apply(&mut s, &yaml);
    s.run_until_idle();
    assert_eq!(node_of(&s, "named"), "n2");
    let o = s.outcome("uid-narrowed-to-small").unwrap();
    assert_eq!(o.node, None);
    assert!(
        o.message.starts_with(
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
        ),
        "{}",
        o.message
    );
}
