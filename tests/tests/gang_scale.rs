//! Gangs at the scale of upstream's scheduler_perf pod group workloads (issue 32): a
//! gang of 1000 on 5000 nodes lands whole, and binds nothing when one member fits
//! nowhere. Behaviour only; `berth bench` measures the speed (BENCHMARKS.md).

use berth::bench::{Mode, Size, default_node, find, placements};
use berth::clock::VirtualClock;
use berth::cluster::memory::MemoryCluster;
use berth::cluster::pod_groups::{PodGroupObject, PodGroupPolicy};
use berth::config::Configuration;
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_sdk::{Container, Pod, ResourceList};
use berth_tests::runtime;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Upstream's `GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup` with one of its
/// three gangs.
fn one_gang_of_1000() -> Size {
    let (_, sizes) = find("GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup").unwrap();
    let size = Size {
        measure_pods: 1000,
        ..sizes[0]
    };
    assert_eq!(
        (size.nodes, size.pod_groups(), size.pods_per_group),
        (5000, 1, 1000)
    );
    size
}

#[test]
fn a_gang_of_1000_on_5000_nodes_lands_whole_in_wasm_and_natively_alike() {
    let (w, _) = find("GangScheduling").unwrap();
    let size = one_gang_of_1000();
    let runtime = runtime();
    let mut options = SchedulerOptions::default();
    options.framework.seed = 11;
    let wasm = placements(&runtime, w, size, Mode::Wasm, &options).expect("wasm run");
    let native = placements(&runtime, w, size, Mode::Native, &options).expect("native run");
    assert_eq!(wasm.len(), 1000);
    let unplaced: Vec<&str> = wasm
        .iter()
        .filter(|(_, node)| node.is_none())
        .map(|(uid, _)| uid.as_str())
        .collect();
    assert!(unplaced.is_empty(), "members left pending: {unplaced:?}");
    // 100m each on 4-CPU nodes: the members spread over many nodes, none overfull.
    let nodes: BTreeSet<&str> = wasm.iter().filter_map(|(_, n)| n.as_deref()).collect();
    assert!(nodes.len() > 25, "{} nodes", nodes.len());
    assert_eq!(wasm, native, "wasm and native placed the gang differently");
}

fn member(i: usize, milli_cpu: i64) -> Pod {
    Pod {
        uid: format!("member-{i:04}"),
        name: format!("member-{i:04}"),
        namespace: "gang-ns-0".into(),
        scheduler_name: "default-scheduler".into(),
        scheduling_group: Some("gang-0".into()),
        containers: vec![Container {
            name: "pause".into(),
            requests: ResourceList::from([("cpu".to_owned(), milli_cpu)]),
            ..Container::default()
        }],
        ..Pod::default()
    }
}

#[test]
fn a_gang_of_1000_with_one_member_that_fits_nowhere_binds_nothing() {
    for native in [false, true] {
        let mut options = SchedulerOptions::default();
        options.framework.native = native;
        options.framework.generic_workload = true;
        let mut s = Scheduler::new(
            &runtime(),
            &Configuration::default(),
            "<default configuration>",
            &options,
            Arc::new(MemoryCluster::new()),
            Arc::new(VirtualClock::default()),
        )
        .unwrap();
        for i in 0..5000 {
            s.add_or_update_node(default_node(i));
        }
        s.add_or_update_pod_group(PodGroupObject {
            namespace: "gang-ns-0".into(),
            name: "gang-0".into(),
            policy: PodGroupPolicy::Gang { min_count: 1000 },
            topology_keys: Vec::new(),
            ..Default::default()
        });
        // 999 members fit anywhere; the last asks for more than any node has, and is
        // tried last (members go by name when their priorities are equal).
        for i in 0..999 {
            s.add_pod(member(i, 100)).unwrap();
        }
        s.add_pod(member(999, 5000)).unwrap();
        s.run_until_idle();
        let bound: Vec<usize> = (0..1000)
            .filter(|i| {
                s.outcome(&format!("member-{i:04}"))
                    .is_some_and(|o| o.node.is_some())
            })
            .collect();
        assert!(
            bound.is_empty(),
            "native {native}: {} members bound, the first {:?}",
            bound.len(),
            bound.first()
        );
        // Every assumption of the cycle was undone.
        assert_eq!(s.cache().pod_count(), 0, "native {native}");
        let message = &s.outcome("member-0000").unwrap().message;
        assert!(
            message.contains("pod group gang-ns-0/gang-0 cannot be placed"),
            "native {native}: {message}"
        );
        let message = &s.outcome("member-0999").unwrap().message;
        assert!(
            message.contains("0/5000 nodes are available"),
            "native {native}: {message}"
        );
    }
}
