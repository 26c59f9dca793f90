//! NodeDeclaredFeatures in the default profile, end to end: its component is asked at
//! PreFilter for every pod's cycle, and a pod that needs no feature fits nodes with
//! and without `status.declaredFeatures` (PreFilter answers Skip, so Filter is never
//! called).
//!
//! A pod that uses the host network in its own user namespace needs
//! UserNamespacesHostNetworkSupport: it lands only on a node declaring it, and is
//! refused on one that does not ("0/1 nodes are available: 1 node(s) didn't match
//! Pod's required features.").

use berth::clock::VirtualClock;
use berth::cluster::memory::MemoryCluster;
use berth::config::Configuration;
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_tests::{apply, plugin_calls, runtime};
use std::sync::Arc;

const PLUGIN: &str = "NodeDeclaredFeatures";

fn scheduler() -> Scheduler {
    Scheduler::new(
        &runtime(),
        &Configuration::default(),
        "<test>",
        &SchedulerOptions::default(),
        Arc::new(MemoryCluster::new()),
        Arc::new(VirtualClock::default()),
    )
    .unwrap()
}

/// `old` declares nothing; `new` declares the features of 1.37 that scheduling can
/// need.
const NODES: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: old, labels: {kubernetes.io/hostname: old}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: new, labels: {kubernetes.io/hostname: new}}
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
  declaredFeatures: [RestartAllContainersOnContainerExits, UserNamespacesHostNetworkSupport, VolumeBindMountOptions]
"#;

/// A pod pinned to `node` by a node selector, with `spec` lines added under `spec:`.
fn pod(name: &str, node: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}}}\nspec:\n  nodeSelector: {{kubernetes.io/hostname: {node}}}\n  containers: [{{name: c, image: app, resources: {{requests: {{cpu: 100m}}}}}}]\n{spec}"
    )
}

fn node_of(s: &Scheduler, name: &str) -> Option<String> {
    s.outcome(&format!("uid-{name}")).unwrap().node.clone()
}

#[test]
fn a_pod_that_needs_no_feature_fits_nodes_with_and_without_declared_features() {
    let mut s = scheduler();
    apply(
        &mut s,
        &(NODES.to_owned() + &pod("on-old", "old", "") + &pod("on-new", "new", "")),
    );
    s.run_until_idle();
    assert_eq!(node_of(&s, "on-old").as_deref(), Some("old"));
    assert_eq!(node_of(&s, "on-new").as_deref(), Some("new"));
    // The default profile runs the plugin at PreFilter for each pod; its Skip keeps
    // its Filter out of both cycles.
    assert_eq!(plugin_calls(&s, PLUGIN, "PreFilter"), 2);
    assert_eq!(plugin_calls(&s, PLUGIN, "Filter"), 0);
}

#[test]
fn a_pod_that_needs_a_feature_lands_only_where_a_node_declares_it() {
    let mut s = scheduler();
    let spec = "  hostNetwork: true\n  hostUsers: false\n";
    apply(
        &mut s,
        &(NODES.to_owned() + &pod("isolated-old", "old", spec) + &pod("isolated-new", "new", spec)),
    );
    s.run_until_idle();
    assert_eq!(node_of(&s, "isolated-new").as_deref(), Some("new"));
    let refused = s.outcome("uid-isolated-old").unwrap();
    assert_eq!(refused.node, None);
    assert!(
        refused
            .message
            .contains("1 node(s) didn't match Pod's required features"),
        "{}",
        refused.message
    );
}
