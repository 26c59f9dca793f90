//! The plugin ABI lasts: a module built against `berth:scheduler@0.7.0` (the
//! `fixture-wit-0-7-0` fixture: raw wit-bindgen on a frozen copy of that WIT, not the
//! SDK) loads through the current host, `berth plugin check` says where its world
//! stands, and it schedules in a profile. Every additive WIT change on the 0.7 track
//! must keep this test passing unchanged; only a minor bump (with the 0.7 world kept
//! and adapted) may touch it, and then only its expectations of the classification.

use berth::config::Profile;
use berth::framework::{CycleState, Framework, FrameworkOptions};
use berth::plugin_cli;
use berth::simulate::{SimulateOptions, simulate};
use berth::wasm::abi::{Policy, Support, WIT_VERSION};
use berth::wasm::module::HostServices;
use berth_artifacts::fixtures::{
    FIXTURE_GANG, FIXTURE_WIT_0_7_0, FIXTURE_WIT_0_8_2, FIXTURE_WIT_0_9_3,
};
use berth_sdk::{
    ExtensionPoint, Placement, Plugin, PodGroup, PodGroupAssignments, ProposedAssignment,
    Registered,
};
use berth_tests::{runtime, write};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The sha256 of `wit/scheduler.wit` at 0.7.0 (commit cfdc859), which the fixture's
/// copy must keep: the frozen WIT is never edited.
const FROZEN_WIT_SHA256: &str = "5d34dc266435e86a28d52bdf7c7c3df4992a7777e38484e83564682e6a9e74f8";

/// What the host should make of a 0.7.0 module: current while it speaks 0.7.0, an
/// older patch of its track after an additive bump, and of the adapted 0.7 track
/// once the host moved to 0.8.
fn expected_support() -> Support {
    if WIT_VERSION == "0.7.0" {
        Support::Current
    } else if WIT_VERSION.starts_with("0.7.") {
        Support::OlderPatch
    } else {
        Support::Adapted {
            track: "0.7".to_owned(),
        }
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

/// The sha256 of `wit/scheduler.wit` at 0.7.1 (the 0.7 track's last package, as
/// at commit b9f69a3), which `wit/adapted/0.7/scheduler.wit` keeps below its
/// three-line FROZEN header: the adapter binds exactly what 0.7 modules were built
/// against.
const ADAPTED_0_7_WIT_SHA256: &str =
    "7036b01abfbe357f6ff45c9b109787a78b3c682e2348ef6a51ed4b7e7a08635a";

#[test]
fn the_adapted_0_7_wit_is_the_0_7_1_one_unedited() {
    assert_frozen(
        "../wit/adapted/0.7/scheduler.wit",
        ADAPTED_0_7_WIT_SHA256,
        "0.7",
    );
}

/// Checks that the adapted WIT at `relative` (from this crate) keeps its three-line
/// FROZEN header and, below it, the package whose sha256 is `sha`: the WIT the
/// `track`'s modules were built against, never edited.
fn assert_frozen(relative: &str, sha: &str, track: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.split_inclusive('\n');
    let header: String = lines.by_ref().take(3).collect();
    assert!(header.starts_with("// FROZEN"), "{header}");
    let body: String = lines.collect();
    let got: String = Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        got,
        sha,
        "{} was edited: it is the WIT {track} modules were built against, and stays as it was",
        path.display()
    );
}

/// The sha256 of `wit/scheduler.wit` at 0.8.2 (the 0.8 track's last package, as
/// at commit 4fbc505), which `wit/adapted/0.8/scheduler.wit` keeps below its
/// three-line FROZEN header.
const ADAPTED_0_8_WIT_SHA256: &str =
    "c9b75c89043decc364411bc3de21b77318c469af0546a057bafe7e600ededd82";

#[test]
fn the_adapted_0_8_wit_is_the_0_8_2_one_unedited() {
    assert_frozen(
        "../wit/adapted/0.8/scheduler.wit",
        ADAPTED_0_8_WIT_SHA256,
        "0.8",
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
    } else if WIT_VERSION.starts_with("0.7.") {
        assert!(
            text.contains(&format!(
                "WIT               berth:scheduler@0.7.0 (supported: an older patch of the 0.7 track; this host speaks @{WIT_VERSION} and loads @0.7.0 to @{WIT_VERSION})\n"
            )),
            "{text}"
        );
    } else {
        assert!(
            text.contains(&format!(
                "WIT               berth:scheduler@0.7.0 (supported: the earlier 0.7 track, through an adapter; this host speaks @{WIT_VERSION} and loads {})\n",
                Policy::current().supported_range()
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
    filters_and_scores_in_a_profile(FIXTURE_WIT_0_7_0);
}

/// The 0.8 track's module, the same plugin written against `berth:scheduler@0.8.2`,
/// loads through the adapter (its WIT the host's frozen copy) and schedules alike.
#[test]
fn a_0_8_2_module_loads_through_the_adapter_and_filters_and_scores() {
    let fixture_wit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fixture-wit-0-8-2/wit/scheduler.wit"),
    )
    .unwrap();
    let adapted = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/adapted/0.8/scheduler.wit"),
    )
    .unwrap();
    assert_eq!(
        fixture_wit, adapted,
        "the fixture's WIT is the frozen 0.8.2"
    );
    let module = runtime().load_file(Path::new(FIXTURE_WIT_0_8_2)).unwrap();
    assert_eq!(module.name(), "AvoidAndRank");
    assert_eq!(module.wit_version(), "0.8.2");
    assert_eq!(
        module.extension_points(),
        [ExtensionPoint::Filter, ExtensionPoint::Score]
    );
    assert_eq!(
        Policy::current().classify("0.8.2"),
        Support::Adapted {
            track: "0.8".to_owned()
        }
    );
    let report = plugin_cli::check(&runtime(), Path::new(FIXTURE_WIT_0_8_2), "{}");
    assert_eq!(report.refused, None, "{}", report.to_text());
    assert!(
        report
            .to_text()
            .contains("(supported: the earlier 0.8 track, through an adapter;"),
        "{}",
        report.to_text()
    );
    filters_and_scores_in_a_profile(FIXTURE_WIT_0_8_2);
}

/// The sha256 of `wit/scheduler.wit` at 0.9.3 (as at commit f7f2130, before
/// `host.feature-gate`), which `fixture-wit-0-9-3` keeps: the frozen WIT is never
/// edited.
const FROZEN_0_9_3_WIT_SHA256: &str =
    "6bc3f3f0a64a726838e984c760fbe5cfa63b928d38d3ddde8c64b943b68be5af";

/// A module of an older patch of the track, built against 0.9.3 (before 0.9.4 added
/// `feature-gate` to the `host` import), loads as it is and schedules alike.
#[test]
fn a_0_9_3_module_loads_as_an_older_patch_and_filters_and_scores() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fixture-wit-0-9-3/wit/scheduler.wit");
    let text = std::fs::read(&path).unwrap();
    let sha: String = Sha256::digest(&text)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        sha,
        FROZEN_0_9_3_WIT_SHA256,
        "{} was edited: it is the WIT 0.9.3 modules were built against, and stays as it was",
        path.display()
    );
    let module = runtime().load_file(Path::new(FIXTURE_WIT_0_9_3)).unwrap();
    assert_eq!(module.name(), "AvoidAndRank");
    assert_eq!(module.wit_version(), "0.9.3");
    assert_eq!(Policy::current().classify("0.9.3"), Support::OlderPatch);
    let report = plugin_cli::check(&runtime(), Path::new(FIXTURE_WIT_0_9_3), "{}");
    assert_eq!(report.refused, None, "{}", report.to_text());
    assert!(
        report
            .to_text()
            .contains("(supported: an older patch of the 0.9 track;"),
        "{}",
        report.to_text()
    );
    filters_and_scores_in_a_profile(FIXTURE_WIT_0_9_3);
}

/// Schedules three pods with the AvoidAndRank module at `fixture` in a profile.
fn filters_and_scores_in_a_profile(fixture: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = NODES.to_owned();
    cluster += &berth_tests::pod("plain", "");
    cluster += &berth_tests::pod("tolerant", "berth.test/tolerate-avoid: \"yes\"");
    cluster += "---\napiVersion: v1\nkind: Pod\nmetadata: {name: pinned}\nspec:\n  nodeSelector: {kubernetes.io/hostname: bravo}\n  containers:\n  - name: c\n    image: busybox\n    resources: {requests: {cpu: 100m, memory: 64Mi}}\n";
    let cluster = write(dir.path(), "cluster.yaml", &cluster);
    std::fs::copy(fixture, dir.path().join("avoid.wasm")).unwrap();
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

/// The first extension point added on the 0.7 track, PlacementScore (with
/// NormalizePlacementScore), is an optional export: a module that has it says which
/// of its points it implements through the interface's own `implemented`, and
/// `plugin check` lists them; a 0.7.0 module lacks the export and implements none.
#[test]
fn an_extension_point_added_on_the_track_is_an_optional_export() {
    let gang = runtime().load_file(Path::new(FIXTURE_GANG)).unwrap();
    assert_eq!(gang.wit_version(), WIT_VERSION);
    assert_eq!(
        gang.extension_points(),
        [
            ExtensionPoint::Permit,
            ExtensionPoint::PlacementScore,
            ExtensionPoint::NormalizePlacementScore
        ]
    );
    let old = runtime().load_file(Path::new(FIXTURE_WIT_0_7_0)).unwrap();
    assert!(
        !old.extension_points()
            .contains(&ExtensionPoint::PlacementScore)
    );

    let report = plugin_cli::check(&runtime(), Path::new(FIXTURE_GANG), "{}");
    assert_eq!(report.refused, None, "{}", report.to_text());
    let text = report.to_text();
    assert!(
        text.contains("extension points  permit, placementScore, normalizePlacementScore\n"),
        "{text}"
    );
}

fn member(uid: &str, node: &str) -> ProposedAssignment {
    ProposedAssignment {
        pod_uid: uid.to_owned(),
        node: node.to_owned(),
    }
}

fn placement(name: &str, nodes: &[&str], members: &[(&str, &str)]) -> PodGroupAssignments {
    PodGroupAssignments {
        placement: Placement {
            name: name.to_owned(),
            nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
        },
        assignments: members.iter().map(|(u, n)| member(u, n)).collect(),
    }
}

/// PlacementScore's runner, through the sandbox: the Gang fixture scores each
/// placement as upstream's PodGroupPodsCount (members scheduled plus placed),
/// normalizes by the best, and the profile's weight multiplies; the SDK's own
/// dispatch of the fixture's type (what a native twin runs) answers the same. A
/// group placed nowhere fails the run, naming the plugin and the group.
#[test]
fn placement_score_ranks_a_pod_group_s_placements_through_the_sandbox() {
    let module = runtime().load_file(Path::new(FIXTURE_GANG)).unwrap();
    let profile = Profile {
        scheduler_name: "default-scheduler".to_owned(),
        points: BTreeMap::from([(ExtensionPoint::PlacementScore, vec![("Gang".to_owned(), 2)])]),
        args: BTreeMap::new(),
        percentage_of_nodes_to_score: None,
        fail_open: Default::default(),
        shadows: BTreeMap::new(),
    };
    let modules = HashMap::from([("Gang".to_owned(), module)]);
    let fw = Framework::new(
        &profile,
        &modules,
        &FrameworkOptions::default(),
        &HostServices::default(),
    )
    .unwrap();
    let pods: Vec<berth_sdk::Pod> = ["a", "b", "c"]
        .iter()
        .map(|n| berth_sdk::Pod {
            name: (*n).to_owned(),
            namespace: "default".to_owned(),
            uid: format!("uid-{n}"),
            ..Default::default()
        })
        .collect();
    let group = PodGroup {
        namespace: "default".to_owned(),
        name: "trainer".to_owned(),
        min_count: Some(4),
        scheduled_count: 1,
        unscheduled_pods: pods,
        ..PodGroup::default()
    };
    let placements = [
        placement(
            "rack-a",
            &["a1", "a2"],
            &[("uid-a", "a1"), ("uid-b", "a1"), ("uid-c", "a2")],
        ),
        placement("rack-b", &["b1"], &[("uid-a", "b1")]),
        placement("zone-1", &["a1", "b1"], &[("uid-a", "a1"), ("uid-b", "b1")]),
    ];
    let scores = fw
        .score_placements(&CycleState::new(), &group, &placements)
        .unwrap();
    // Raw 4, 2, 3; normalized by 4: 100, 50, 75; weight 2.
    assert_eq!(scores.totals, [200, 100, 150]);
    assert_eq!(scores.best(), Some(0));
    assert_eq!(
        scores.by_plugin,
        [("Gang".to_owned(), 2, vec![100, 50, 75])]
    );

    let gang = fixture_gang::Gang::new(serde_json::json!({})).unwrap();
    let vt = fixture_gang::Gang::vtable();
    let store = berth_sdk::MemoryState::default();
    let state = berth_sdk::CycleState::new(&store);
    let raw: Vec<i64> = placements
        .iter()
        .map(|p| {
            berth_sdk::points::score_placement(&gang, &vt, &state, &group, &NoNodes, p).unwrap()
        })
        .collect();
    let native =
        berth_sdk::points::normalize_placement_score(&gang, &vt, &state, &group, &NoNodes, &raw)
            .unwrap();
    assert_eq!(native, scores.by_plugin[0].2);

    let nowhere = PodGroup {
        scheduled_count: 0,
        ..group.clone()
    };
    let empty = [
        placement("rack-a", &["a1"], &[]),
        placement("rack-b", &["b1"], &[]),
    ];
    let e = fw
        .score_placements(&CycleState::new(), &nowhere, &empty)
        .unwrap_err();
    assert_eq!(e.plugin, "Gang");
    assert!(
        e.message
            .contains("NormalizePlacementScore of pod group default/trainer: Error")
            && e.message.contains("no pods from pod group are assigned"),
        "{e}"
    );
}

/// A profile enables PlacementScore plugins with weights, as Score's; a weight at a
/// point that has none is refused, naming the points that do.
#[test]
fn a_profile_weighs_placement_score_plugins() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIXTURE_GANG, dir.path().join("gang.wasm")).unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "modules:\n- name: Gang\n  path: gang.wasm\nprofiles:\n- plugins:\n    permit:\n      enabled: [{name: Gang}]\n    placementScore:\n      enabled: [{name: Gang, weight: 3}]\n",
    );
    let out = berth::config_cli::validate(&runtime(), &config, &Default::default()).unwrap();
    assert!(out.contains("  placementScore Gang(3)\n"), "{out}");
    assert!(out.contains("  permit      Gang\n"), "{out}");

    let config = write(
        dir.path(),
        "weighted-permit.yaml",
        "modules:\n- name: Gang\n  path: gang.wasm\nprofiles:\n- plugins:\n    permit:\n      enabled: [{name: Gang, weight: 2}]\n",
    );
    let errors = berth::config_cli::validate(&runtime(), &config, &Default::default()).unwrap_err();
    assert!(
        errors.iter().any(|e| e.contains("permit.enabled[0].weight")
            && e.contains("weights apply to score and placementScore plugins only")),
        "{errors:?}"
    );
}

/// A replica without nodes, for calling the SDK's placement points directly (they
/// read no node).
struct NoNodes;

impl berth_sdk::points::Replica for NoNodes {
    fn node(&self, _: u32) -> Option<&berth_sdk::NodeInfo> {
        None
    }
    fn missing(&self, slot: u32) -> berth_sdk::Status {
        berth_sdk::Status::error(format!("no node in slot {slot}"))
    }
    fn with_all<R>(&self, f: impl FnOnce(&[&berth_sdk::NodeInfo]) -> R) -> R {
        f(&[])
    }
}
