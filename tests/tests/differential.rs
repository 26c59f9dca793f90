//! Differential conformance in CI: a fixed-seed run of generated clusters, each
//! explained by Berth (wasm and native) and by upstream kube-scheduler 1.37.2's own
//! plugins through the Go oracle (tests/oracle), which must agree on every verdict,
//! score, chosen node and FailedScheduling message. Larger runs:
//! `cargo run --release -p berth-tests --bin differential -- --seed N --cases N`.

use berth_tests::differential::{Differential, oracle_bin, out_dir};

/// The seed and size of CI's run.
const SEED: u64 = 20261129;
const CASES: u64 = 2000;

#[test]
fn berth_answers_as_upstreams_own_plugins_on_generated_clusters() {
    let bin = oracle_bin().unwrap_or_else(|e| panic!("{e}"));
    let mut d = Differential::new(berth_tests::runtime(), &bin).unwrap();
    let out = out_dir();
    let summary = d.run(SEED, CASES, &out, |_| {});
    eprintln!("differential: seed {SEED}: {summary}");
    assert!(
        summary.clean(),
        "Berth and upstream 1.37.2 disagree (shrunk cases in {}):\n{summary}",
        out.display()
    );
}
