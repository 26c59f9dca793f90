//! The page's model read from a scheduler, as the live loop reads it: `Page::of`
//! lists every node with its rooms and pods, and every pending pod with its queue and
//! why it waits, the first ones explained with the profile's own plugins.

use berth::clock::VirtualClock;
use berth::cluster::memory::MemoryCluster;
use berth::config::Configuration;
use berth::page::{Page, PageOptions};
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_tests::{apply, runtime};
use std::sync::Arc;

const CLUSTER: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
spec:
  unschedulable: true
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}, {key: quiet, effect: PreferNoSchedule}]
status: {allocatable: {cpu: '1', memory: 2Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10', example.com/widget: '3'}}
---
apiVersion: v1
kind: Pod
metadata: {name: placed, namespace: default, uid: uid-placed}
spec:
  nodeName: n2
  priority: 7
  containers: [{name: c, image: app, resources: {requests: {cpu: 500m, memory: 1Gi, example.com/widget: '1'}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: fits, namespace: default, uid: uid-fits}
spec:
  containers: [{name: c, image: app, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: a-big, namespace: default, uid: uid-a-big}
spec:
  containers: [{name: c, image: app, resources: {requests: {cpu: '8'}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: b-big, namespace: default, uid: uid-b-big}
spec:
  containers: [{name: c, image: app, resources: {requests: {cpu: '9'}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: c-gated, namespace: default, uid: uid-c-gated}
spec:
  schedulingGates: [{name: example.com/quota}]
  containers: [{name: c, image: app}]
";

#[test]
fn the_page_of_a_scheduler_lists_its_nodes_and_explains_its_first_pending_pods() {
    let mut s = Scheduler::new(
        &runtime(),
        &Configuration::default(),
        "<test>",
        &SchedulerOptions::default(),
        Arc::new(MemoryCluster::new()),
        Arc::new(VirtualClock::default()),
    )
    .unwrap();
    apply(&mut s, CLUSTER);
    s.run_until_idle();
    let page = Page::of(
        &mut s,
        &PageOptions {
            title: "test".into(),
            explained: 1,
        },
    );
    assert_eq!(page.title, "test");
    assert!(page.timeline.is_empty());

    let names: Vec<&str> = page.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2"]);
    let n1 = &page.nodes[0];
    assert!(n1.unschedulable);
    assert_eq!(
        n1.taints,
        ["dedicated=gpu:NoSchedule", "quiet:PreferNoSchedule"]
    );
    assert_eq!(n1.labels.get("zone").map(String::as_str), Some("a"));
    assert!(n1.pods.is_empty());
    let n2 = &page.nodes[1];
    let rooms: Vec<(&str, i64, i64, i64)> = n2
        .resources
        .iter()
        .map(|r| (r.resource.as_str(), r.allocatable, r.requested, r.free))
        .collect();
    assert_eq!(
        rooms,
        [
            ("cpu", 2000, 600, 1400),
            (
                "memory",
                4 << 30,
                (1 << 30) + (64 << 20),
                (3 << 30) - (64 << 20)
            ),
            ("pods", 10, 2, 8),
            ("example.com/widget", 3, 1, 2),
        ]
    );
    let pods: Vec<(&str, i64, i64, i32)> = n2
        .pods
        .iter()
        .map(|p| (p.pod.as_str(), p.cpu, p.memory, p.priority))
        .collect();
    assert_eq!(
        pods,
        [
            ("default/fits", 100, 64 << 20, 0),
            ("default/placed", 500, 1 << 30, 7)
        ]
    );

    let pending: Vec<&str> = page.pending.iter().map(|p| p.pod.as_str()).collect();
    assert_eq!(
        pending,
        ["default/a-big", "default/b-big", "default/c-gated"]
    );
    let a = &page.pending[0];
    assert_eq!(a.queue, "unschedulable");
    assert_eq!(a.attempts, 1);
    assert!(
        a.message.starts_with("0/2 nodes are available"),
        "{}",
        a.message
    );
    let e = a
        .explanation
        .as_ref()
        .expect("the first pending pod is explained");
    assert_eq!(e.pod, "default/a-big");
    let explained: Vec<(&str, bool)> = e
        .nodes
        .iter()
        .map(|n| (n.node.as_str(), n.feasible))
        .collect();
    assert_eq!(explained.len(), 2);
    assert!(explained.iter().all(|(_, feasible)| !feasible), "{e:?}");
    let verdict = |node: &str, plugin: &str| {
        e.nodes
            .iter()
            .find(|n| n.node == node)
            .and_then(|n| n.filters.iter().find(|f| f.plugin == plugin))
            .map(|f| f.code.clone())
    };
    assert_eq!(
        verdict("n1", "NodeUnschedulable").as_deref(),
        Some("UnschedulableAndUnresolvable")
    );
    assert_eq!(
        verdict("n2", "NodeUnschedulable").as_deref(),
        Some("Success")
    );
    assert_ne!(
        verdict("n2", "NodeResourcesFit").as_deref(),
        Some("Success")
    );
    assert_eq!(a.unexplained, None);

    let b = &page.pending[1];
    assert_eq!(b.explanation, None);
    assert_eq!(
        b.unexplained.as_deref(),
        Some("only the first 1 pending pods are explained")
    );
    let c = &page.pending[2];
    assert_eq!(c.queue, "gated");
    assert_eq!(c.attempts, 0);
    assert_eq!(c.gated_by.as_deref(), Some("SchedulingGates"));
    assert_eq!(c.explanation, None);
    assert_eq!(
        c.unexplained.as_deref(),
        Some("gated by SchedulingGates: not tried yet")
    );

    // What the page serves: the model as JSON, and the HTML that shows it.
    let rendered = page.render();
    let json: serde_json::Value = serde_json::from_str(&rendered.json).unwrap();
    assert_eq!(json["pending"][0]["explanation"]["pod"], "default/a-big");
    assert!(json["pending"][1].get("explanation").is_none());
    assert!(rendered.html.starts_with("<!DOCTYPE html>"));
    for p in [
        "default/a-big",
        "default/b-big",
        "default/c-gated",
        "default/placed",
    ] {
        assert!(rendered.html.contains(p), "{p}");
    }
    // Explaining changed nothing: the pods still wait where they were.
    assert_eq!(Page::of(&mut s, &PageOptions::default()).nodes, page.nodes);
}
