//! The plugin ABI lasts: a module built against `berth:scheduler@0.7.0` (the
//! `fixture-wit-0-7-0` fixture: raw wit-bindgen on a frozen copy of that WIT, not the
//! SDK) loads through the current host, `berth plugin check` says where its world
//! stands, and it schedules in a profile. Every additive WIT change on the 0.7 track
//! must keep this test passing unchanged; only a minor bump (with the 0.7 world kept
//! and adapted) may touch it, and then only its expectations of the classification.

use berth::plugin_cli;
use berth::simulate::{SimulateOptions, simulate};
use berth::wasm::abi::{Policy, Support, WIT_VERSION};
use berth_artifacts::fixtures::FIXTURE_WIT_0_7_0;
use berth_sdk::ExtensionPoint;
use berth_tests::{runtime, write};
use sha2::{Digest, Sha256};
use std::path::Path;

/// The sha256 of `wit/scheduler.wit` at 0.7.0 (commit cfdc859), which the fixture's
/// copy must keep: the frozen WIT is never edited.
const FROZEN_WIT_SHA256: &str = "5d34dc266435e86a28d52bdf7c7c3df4992a7777e38484e83564682e6a9e74f8";

/// What the host should make of a 0.7.0 module: current while it speaks 0.7.0, an
/// older patch of its track after an additive bump.
fn expected_support() -> Support {
    if WIT_VERSION == "0.7.0" {
        Support::Current
    } else {
        Support::OlderPatch
    }
}

#[test]
fn the_frozen_wit_is_the_0_7_0_one_unedited() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fixture-wit-0-7-0/wit/scheduler.wit");
    let text = std::fs::read(&path).unwrap();
    let sha: String = Sha256::digest(&text)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        sha,
        FROZEN_WIT_SHA256,
        "{} was edited: it is the WIT old modules were built against, and stays as it was",
        path.display()
    );
    assert!(
        String::from_utf8(text)
            .unwrap()
            .starts_with("package berth:scheduler@0.7.0;\n")
    );
}

#[test]
fn a_0_7_0_module_loads_through_the_current_host() {
    let module = runtime().load_file(Path::new(FIXTURE_WIT_0_7_0)).unwrap();
    assert_eq!(module.name(), "AvoidAndRank");
    assert_eq!(
        module.extension_points(),
        [ExtensionPoint::Filter, ExtensionPoint::Score]
    );
    assert_eq!(module.wit_version(), "0.7.0");
    assert_eq!(
        Policy::current().classify(module.wit_version()),
        expected_support()
    );
}

#[test]
fn plugin_check_says_which_world_a_0_7_0_module_targets() {
    let report = plugin_cli::check(&runtime(), Path::new(FIXTURE_WIT_0_7_0), "{}");
    assert_eq!(report.refused, None, "{}", report.to_text());
    assert_eq!(report.wit_version.as_deref(), Some("0.7.0"));
    assert_eq!(report.host_wit_version, WIT_VERSION);
    let support = expected_support();
    assert_eq!(report.wit_status.as_deref(), Some(support.status()));
    assert_eq!(report.wit_detail, Policy::current().explain(&support));

    let text = report.to_text();
    if WIT_VERSION == "0.7.0" {
        assert!(
            text.contains(
                "WIT               berth:scheduler@0.7.0 (current; this host speaks @0.7.0)\n"
            ),
            "{text}"
        );
    } else {
        assert!(
            text.contains(&format!(
                "WIT               berth:scheduler@0.7.0 (supported: an older patch of the 0.7 track; this host speaks @{WIT_VERSION} and loads @0.7.0 to @{WIT_VERSION})\n"
            )),
            "{text}"
        );
    }
    // The trial ran its Filter and Score on the built-in node (no labels of its own).
    for want in [
        "filter on berth-check-node: Success\n",
        "score on berth-check-node: 0\n",
        "ok: the scheduler would load this module\n",
    ] {
        assert!(text.contains(want), "want {want:?} in\n{text}");
    }

    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["wit_version"], "0.7.0");
    assert_eq!(json["wit_status"], support.status());
}

/// Three nodes alike but for their labels: `bravo` ranks highest but is labelled
/// `berth.test/avoid`.
const NODES: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: alpha, labels: {kubernetes.io/hostname: alpha, berth.test/rank: "10"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: bravo, labels: {kubernetes.io/hostname: bravo, berth.test/rank: "100", berth.test/avoid: "yes"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: zulu, labels: {kubernetes.io/hostname: zulu, berth.test/rank: "90"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"#;

#[test]
fn a_0_7_0_module_filters_and_scores_in_a_profile() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = NODES.to_owned();
    cluster += &berth_tests::pod("plain", "");
    cluster += &berth_tests::pod("tolerant", "berth.test/tolerate-avoid: \"yes\"");
    cluster += "---\napiVersion: v1\nkind: Pod\nmetadata: {name: pinned}\nspec:\n  nodeSelector: {kubernetes.io/hostname: bravo}\n  containers:\n  - name: c\n    image: busybox\n    resources: {requests: {cpu: 100m, memory: 64Mi}}\n";
    let cluster = write(dir.path(), "cluster.yaml", &cluster);
    std::fs::copy(FIXTURE_WIT_0_7_0, dir.path().join("avoid.wasm")).unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "modules:\n- name: AvoidAndRank\n  path: avoid.wasm\nprofiles:\n- plugins:\n    filter:\n      enabled:\n      - name: AvoidAndRank\n    score:\n      enabled:\n      - name: AvoidAndRank\n        weight: 50\n",
    );
    let report = simulate(
        &runtime(),
        &SimulateOptions {
            files: vec![cluster],
            config: Some(config),
            ..SimulateOptions::default()
        },
    )
    .unwrap();
    let by_name = |n: &str| report.pods.iter().find(|p| p.name == n).unwrap();

    // Filter keeps it off bravo; Score prefers zulu (90) to alpha (10).
    assert_eq!(by_name("plain").node.as_deref(), Some("zulu"), "{report:?}");
    // The pod's labels reach the old world's Filter: bravo is allowed, and ranks first.
    assert_eq!(
        by_name("tolerant").node.as_deref(),
        Some("bravo"),
        "{report:?}"
    );
    // Only bravo matches its selector, and the plugin rejects it, saying why.
    let pinned = by_name("pinned");
    assert_eq!(pinned.node, None, "{report:?}");
    assert!(
        pinned.message.contains("node is labelled berth.test/avoid"),
        "{}",
        pinned.message
    );
    assert_eq!(report.summary.scheduled, 2);
}
