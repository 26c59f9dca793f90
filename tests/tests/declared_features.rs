//! NodeDeclaredFeatures in the default profile, end to end: its component is asked at
//! PreFilter for every pod's cycle, and a pod that needs no feature fits nodes with
//! and without `status.declaredFeatures` (PreFilter answers Skip, so Filter is never
//! called).
//!
//! Upstream would also refuse a pod that uses the host network in its own user
//! namespace on a node that does not declare UserNamespacesHostNetworkSupport ("0/1
//! nodes are available: 1 node(s) didn't match Pod's required features."). Berth's
//! pod record (WIT 0.8.2) carries neither `hostNetwork` nor `hostUsers`, nor any
//! other field 1.37's features infer a requirement from, so no pod needs a feature
//! yet: tests/conformance/node-declared-features.yaml lists those cases and where
//! Berth differs.

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
