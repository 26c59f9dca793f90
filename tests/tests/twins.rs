//! The plugins as wasm components and as their native twins place every pod of every
//! bench workload on the same node, with the same seed: the sandbox changes the cost
//! of a plugin, never its answers.

use berth::bench::{Mode, WORKLOADS, placements};
use berth::scheduler::SchedulerOptions;

#[test]
fn wasm_and_native_place_every_workload_identically() {
    let runtime = berth_tests::runtime();
    let mut options = SchedulerOptions::default();
    options.framework.seed = 7;
    // Two workers, so the fan-out's split (when a batch is large enough) is covered.
    options.framework.parallelism = 2;
    let mut pods = 0;
    for w in &WORKLOADS {
        // The smallest size: 500 nodes and 500 to 2000 pods per workload; for the pod
        // group workloads upstream's integration size, 100 nodes and 10 groups of 3;
        // for the DRA ones upstream's `fast`, two nodes and ten pods (a steady state
        // cycling them ten times over).
        let size = w.sizes[0];
        let wasm = placements(&runtime, w, size, Mode::Wasm, &options).expect("wasm run");
        let native = placements(&runtime, w, size, Mode::Native, &options).expect("native run");
        assert_eq!(wasm.len(), size.placed_pods(), "{}", w.name);
        for (a, b) in wasm.iter().zip(&native) {
            assert_eq!(a, b, "{}: wasm and native placed a pod differently", w.name);
        }
        assert!(
            wasm.iter().any(|(_, node)| node.is_some()),
            "{}: nothing was placed",
            w.name
        );
        if size.pods_per_group > 0 {
            // Every group fits, so every member lands.
            assert!(
                wasm.iter().all(|(_, node)| node.is_some()),
                "{}: a member was left pending",
                w.name
            );
        }
        pods += wasm.len();
    }
    assert!(pods >= 5000, "{pods} pods");
}
