//! The DRA workloads of `berth bench` (upstream's `scheduler_perf/dra`), run small in
//! wasm and natively: every pod's claim is made from its namespace's template (or,
//! for a pod asking for an extended resource, by DynamicResources) and given a
//! device of the node the pod lands on, no device goes to two claims at once, no
//! node gives more devices than it has, and the claims held before measuring keep
//! theirs. Behaviour only; BENCHMARKS.md has the speed.

use berth::bench::{Devices, Held, Mode, Placed, Placements, Size, find, placed};
use berth::scheduler::SchedulerOptions;
use berth_sdk::dra::DeviceId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const DRIVER: &str = "test-driver.cdi.k8s.io";

fn options() -> SchedulerOptions {
    let mut options = SchedulerOptions::default();
    options.framework.seed = 5;
    options.framework.parallelism = 2;
    options
}

/// Runs `name` at `size` as wasm and natively; both must place every pod and give
/// every device alike.
fn both(name: &str, size: Size) -> Placements {
    let (w, _) = find(name).unwrap();
    let runtime = berth_tests::runtime();
    let wasm = placed(&runtime, w, size, Mode::Wasm, &options()).expect("wasm run");
    let native = placed(&runtime, w, size, Mode::Native, &options()).expect("native run");
    assert_eq!(wasm, native, "{name}: wasm and native differ");
    assert_eq!(wasm.pods.len(), size.placed_pods(), "{name}");
    assert!(
        wasm.device_conflicts.is_empty(),
        "{name}: {:?}",
        wasm.device_conflicts
    );
    wasm
}

/// The one device each placed pod got: the test driver's, in its node's pool.
fn device_on_its_node(p: &Placed) -> (&str, &DeviceId) {
    let node = p.node.as_deref().expect("placed");
    assert_eq!(p.devices.len(), 1, "{}: {:?}", p.uid, p.devices);
    let d = &p.devices[0];
    assert_eq!(d.driver, DRIVER, "{}", p.uid);
    assert_eq!(d.pool, node, "{}: a device of another node", p.uid);
    (node, d)
}

fn template_size(
    plain: usize,
    with_devices: usize,
    per_node: usize,
    init: usize,
    measured: usize,
) -> Size {
    Size {
        name: "small",
        nodes: plain + with_devices,
        init_pods: init,
        measure_pods: measured,
        pods_per_group: 0,
        devices: Devices {
            plain_nodes: plain,
            per_node,
            held: Held::Empty,
            classes: 0,
        },
        steady: None,
    }
}

#[test]
fn scheduling_with_a_claim_template_fills_every_device_once() {
    // One node without devices and three with four each; 4 initial and 8 measured
    // pods take all twelve devices.
    let size = template_size(1, 3, 4, 4, 8);
    let run = both("SchedulingWithResourceClaimTemplate", size);
    let unplaced: Vec<&str> = run
        .pods
        .iter()
        .filter(|p| p.node.is_none())
        .map(|p| p.uid.as_str())
        .collect();
    assert!(unplaced.is_empty(), "pods left pending: {unplaced:?}");
    let mut by_node: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for p in &run.pods {
        let (node, d) = device_on_its_node(p);
        assert!(
            by_node.entry(node).or_default().insert(d.device.as_str()),
            "{node}: {} given twice",
            d.device
        );
    }
    // node-0 has no devices; each other node gave each of its four once.
    let devices: BTreeSet<&str> = ["instance-0", "instance-1", "instance-2", "instance-3"].into();
    assert_eq!(
        by_node.keys().copied().collect::<Vec<_>>(),
        ["node-1", "node-2", "node-3"]
    );
    for (node, given) in &by_node {
        assert_eq!(given, &devices, "{node}");
    }

    // Upstream's `fast`: one node of each kind, ten devices, ten pods.
    let (_, sizes) = find("SchedulingWithResourceClaimTemplate/fast").unwrap();
    let run = both("SchedulingWithResourceClaimTemplate", sizes[0]);
    let given: BTreeSet<&str> = run
        .pods
        .iter()
        .map(|p| {
            let (node, d) = device_on_its_node(p);
            assert_eq!(node, "node-1");
            d.device.as_str()
        })
        .collect();
    assert_eq!(given.len(), 10);
}

#[test]
fn no_node_gives_more_devices_than_it_has() {
    // Thirteen pods for twelve devices: one stays pending, no node gives a fifth.
    let size = template_size(1, 3, 4, 4, 9);
    let run = both("SchedulingWithResourceClaimTemplate", size);
    let pending: Vec<&Placed> = run.pods.iter().filter(|p| p.node.is_none()).collect();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(pending[0].devices.is_empty(), "{pending:?}");
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for p in run.pods.iter().filter(|p| p.node.is_some()) {
        let (node, _) = device_on_its_node(p);
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(per_node.values().copied().collect::<Vec<_>>(), [4, 4, 4]);
}

fn steady_size(
    plain: usize,
    with_devices: usize,
    per_node: usize,
    held: Held,
    pending: usize,
) -> Size {
    Size {
        name: "small",
        nodes: plain + with_devices,
        init_pods: 0,
        measure_pods: pending,
        pods_per_group: 0,
        devices: Devices {
            plain_nodes: plain,
            per_node,
            held,
            classes: 0,
        },
        steady: Some(Duration::from_secs(1)),
    }
}

#[test]
fn a_steady_state_cycles_pods_through_the_devices_left_free() {
    let name = "SteadyStateClusterResourceClaimTemplate";
    // Two nodes of four devices, all but three held by claims without pods: the
    // three pending pods, deleted once bound and replaced, take only those three.
    let size = steady_size(1, 2, 4, Held::Full, 3);
    assert_eq!(size.init_claims(), 5);
    let run = both(name, size);
    let mut used: BTreeSet<(&str, &str)> = BTreeSet::new();
    for p in &run.pods {
        let (node, d) = device_on_its_node(p);
        used.insert((node, d.device.as_str()));
    }
    assert_eq!(run.pods.len(), 30);
    assert_eq!(used.len(), 3, "{used:?}");

    // Half held: four free devices for three pending pods.
    let size = steady_size(0, 2, 4, Held::Half, 3);
    let run = both(name, size);
    assert!(run.pods.iter().all(|p| p.node.is_some()));
    let used: BTreeSet<&DeviceId> = run.pods.iter().map(|p| device_on_its_node(p).1).collect();
    assert!(used.len() <= 4, "{used:?}");

    // Upstream's `fast`: one node of each kind, nothing held, ten pending.
    let (_, sizes) = find("SteadyStateClusterResourceClaimTemplate/fast").unwrap();
    let run = both(name, sizes[0]);
    assert_eq!(run.pods.len(), 100);
    for p in &run.pods {
        assert_eq!(device_on_its_node(p).0, "node-1");
    }
}

fn extended_size(
    classes: usize,
    plain: usize,
    with_devices: usize,
    per_node: usize,
    init: usize,
    measured: usize,
) -> Size {
    Size {
        devices: Devices {
            classes,
            ..template_size(plain, with_devices, per_node, init, measured).devices
        },
        ..template_size(plain, with_devices, per_node, init, measured)
    }
}

#[test]
fn extended_resources_get_a_device_each_through_the_claim_made_for_the_pod() {
    let name = "SchedulingWithExtendedResource";
    // Upstream's `fast`: ten classes, one node of each kind, ten devices, ten pods,
    // pod <i> asking for example.com/gpu-<i>. Every pod lands on the node with
    // devices, each with its own.
    let (_, sizes) = find("SchedulingWithExtendedResource/fast").unwrap();
    let run = both(name, sizes[0]);
    assert_eq!(run.pods.len(), 10);
    let given: BTreeSet<&str> = run
        .pods
        .iter()
        .map(|p| {
            let (node, d) = device_on_its_node(p);
            assert_eq!(node, "node-1", "{}", p.uid);
            d.device.as_str()
        })
        .collect();
    assert_eq!(given.len(), 10, "{given:?}");

    // Initial and measured pods count their indices from 0 each, so both ask for
    // example.com/gpu-0 to -2 of three classes: eight pods on two nodes of four
    // devices take every device once.
    let run = both(name, extended_size(5, 1, 2, 4, 3, 5));
    let mut by_node: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for p in &run.pods {
        let (node, d) = device_on_its_node(p);
        assert!(
            by_node.entry(node).or_default().insert(d.device.as_str()),
            "{node}: {} given twice",
            d.device
        );
    }
    assert_eq!(
        by_node.keys().copied().collect::<Vec<_>>(),
        ["node-1", "node-2"]
    );
    assert!(
        by_node.values().all(|given| given.len() == 4),
        "{by_node:?}"
    );

    // One pod more than the devices: it stays pending, with no device.
    let run = both(name, extended_size(5, 1, 2, 4, 4, 5));
    let pending: Vec<&Placed> = run.pods.iter().filter(|p| p.node.is_none()).collect();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(pending[0].devices.is_empty(), "{pending:?}");
    assert_eq!(
        run.pods.iter().filter(|p| p.node.is_some()).count(),
        8,
        "{:?}",
        run.pods
    );
}
