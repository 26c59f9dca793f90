//! Berth's table of kube-scheduler's feature gates against upstream's own registry:
//! `featuregates`, built by tests/e2e/apiserver.sh from the same Go module as the
//! control plane, prints every gate kube-scheduler 1.37.2 registers with its default,
//! lock and stage.

use berth::features::KUBE_SCHEDULER_1_37;
use std::process::Command;

#[test]
fn every_gate_kube_scheduler_1_37_2_accepts_is_in_berth_s_table_as_upstream_has_it() {
    let out = Command::new("bash")
        .arg(crate::common::workspace().join("tests/e2e/apiserver.sh"))
        .arg("build")
        .output()
        .expect("run tests/e2e/apiserver.sh build");
    assert!(
        out.status.success(),
        "apiserver.sh build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let printed = Command::new(format!("{bin}/featuregates"))
        .output()
        .expect("run featuregates");
    assert!(printed.status.success(), "{printed:?}");
    let upstream: Vec<String> = String::from_utf8(printed.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(upstream.len() > 200, "{upstream:?}");
    let ours: Vec<String> = KUBE_SCHEDULER_1_37
        .iter()
        .map(|g| {
            format!(
                "{}\t{}\t{}\t{}",
                g.name,
                g.default,
                g.locked,
                g.stage.as_str()
            )
        })
        .collect();
    let missing: Vec<&String> = upstream.iter().filter(|l| !ours.contains(l)).collect();
    let extra: Vec<&String> = ours.iter().filter(|l| !upstream.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "upstream has (name, default, locked, stage), Berth's table does not:\n{}\n\
         Berth's table has, upstream does not:\n{}",
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        extra
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
