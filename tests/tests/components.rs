//! Component tests: the real plugin components, loaded from files by the real host.

use berth::config::{Configuration, ModuleSource};
use berth::framework::registry::{RegistryError, load_modules};
use berth::scheduler::SchedulerOptions;
use berth::simulate::{Report, SimulateError, SimulateOptions, simulate};
use berth::wasm::{Limits, LoadError, Runtime, RuntimeOptions};
use berth_sdk::ExtensionPoint;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn runtime_with(limits: Limits) -> Arc<Runtime> {
    Runtime::new(RuntimeOptions {
        cache_dir: Some(berth_tests::component_cache()),
        limits,
        ..RuntimeOptions::default()
    })
    .expect("runtime")
}

fn runtime() -> Arc<Runtime> {
    runtime_with(Limits::default())
}

use berth_tests::{TWO_NODES as NODES, pod, write};

fn run(
    runtime: &Arc<Runtime>,
    files: Vec<PathBuf>,
    config: Option<PathBuf>,
) -> Result<Report, SimulateError> {
    simulate(
        runtime,
        &SimulateOptions {
            files,
            config,
            ..SimulateOptions::default()
        },
    )
}

#[test]
fn every_built_in_plugin_loads_from_its_file_with_its_metadata() {
    let rt = runtime();
    for artifact in berth_artifacts::PLUGINS {
        let module = rt
            .load_file(Path::new(artifact.path))
            .expect(artifact.crate_name);
        let expected = berth::framework::registry::plugin_name_of_crate(artifact.crate_name);
        assert_eq!(module.name(), expected);
        assert!(
            !module.extension_points().is_empty(),
            "{expected} implements nothing"
        );
    }
    let fit = rt
        .load_file(Path::new(berth_artifacts::plugin_paths::NODE_RESOURCES_FIT))
        .unwrap();
    for p in [
        ExtensionPoint::PreFilter,
        ExtensionPoint::Filter,
        ExtensionPoint::Score,
    ] {
        assert!(
            fit.extension_points().contains(&p),
            "NodeResourcesFit lacks {p:?}"
        );
    }
}

/// Swapping the module file behind a plugin name changes where pods land: the
/// plugins really are loaded from the files, not linked in.
#[test]
fn replacing_a_module_file_changes_placements() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(
        dir.path(),
        "cluster.yaml",
        &format!("{NODES}{}", pod("p", "")),
    );
    let module = dir.path().join("preference.wasm");
    let config = write(
        dir.path(),
        "config.yaml",
        "modules:\n- name: NodePreference\n  path: preference.wasm\nprofiles:\n- plugins:\n    score:\n      enabled:\n      - name: NodePreference\n        weight: 50\n",
    );
    let rt = runtime();

    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_PREFER_FIRST_NODE,
        &module,
    )
    .unwrap();
    let first = run(&rt, vec![cluster.clone()], Some(config.clone())).unwrap();
    assert_eq!(first.pods[0].node.as_deref(), Some("alpha"));

    std::fs::copy(berth_artifacts::fixtures::FIXTURE_PREFER_LAST_NODE, &module).unwrap();
    let last = run(&rt, vec![cluster], Some(config)).unwrap();
    assert_eq!(last.pods[0].node.as_deref(), Some("zulu"));
}

/// An upstream-shaped configuration names a module under `berth.modules` and enables
/// it through `multiPoint` (it lands at Score, the only point it implements).
#[test]
fn a_kube_scheduler_configuration_with_a_berth_module_through_multi_point() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(
        dir.path(),
        "cluster.yaml",
        &format!("{NODES}{}", pod("p", "")),
    );
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_PREFER_LAST_NODE,
        dir.path().join("preference.wasm"),
    )
    .unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled:\n      - name: NodePreference\n        weight: 50\nberth:\n  modules:\n  - name: NodePreference\n    path: preference.wasm\n",
    );
    let report = run(&runtime(), vec![cluster], Some(config)).unwrap();
    assert_eq!(report.pods[0].node.as_deref(), Some("zulu"));
}

/// A plugin that panics, loops forever or eats memory fails only the pod it is
/// working on, with an Error naming the plugin; the next pods still schedule.
#[test]
fn misbehaving_plugins_fail_only_their_pod() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = NODES.to_owned();
    text += &pod("before", "");
    text += &pod("panics", "berth.test/misbehave: panic");
    text += &pod("loops", "berth.test/misbehave: loop");
    text += &pod("hogs", "berth.test/misbehave: hog");
    text += &pod("after", "");
    let cluster = write(dir.path(), "cluster.yaml", &text);
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_MISBEHAVE,
        dir.path().join("misbehave.wasm"),
    )
    .unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "modules:\n- name: Misbehave\n  path: misbehave.wasm\nprofiles:\n- plugins:\n    filter:\n      enabled:\n      - name: Misbehave\n",
    );
    let rt = runtime_with(Limits {
        call_deadline: Duration::from_millis(300),
        max_memory_bytes: 64 << 20,
        ..Limits::default()
    });
    let report = run(&rt, vec![cluster], Some(config)).unwrap();
    let by_name = |n: &str| report.pods.iter().find(|p| p.name == n).unwrap();

    assert!(by_name("before").node.is_some());
    // Errors back off and are retried; a pod stops moving the virtual clock once it
    // reaches the attempt limit (others may still move it past its backoff).
    assert!(by_name("panics").attempts >= SchedulerOptions::default().max_attempts);
    assert!(by_name("after").node.is_some(), "{:?}", by_name("after"));
    for (name, what) in [
        ("panics", "misbehave: asked to panic"),
        ("loops", "deadline"),
        ("hogs", "trapped"),
    ] {
        let p = by_name(name);
        assert_eq!(p.node, None, "{name} was scheduled");
        assert!(
            p.message.starts_with("plugin Misbehave: trapped"),
            "{name}: {}",
            p.message
        );
        assert!(p.message.contains(what), "{name}: {}", p.message);
    }
    assert_eq!(report.summary.scheduled, 2);
    assert_eq!(report.summary.unschedulable, 3);
}

#[test]
fn a_file_that_is_not_a_component_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.wasm", "not wasm at all");
    let e = runtime().load_file(&bad).unwrap_err();
    assert!(matches!(e, LoadError::Compile { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "{}: not a valid WebAssembly component",
            bad.display()
        )),
        "{e}"
    );

    let missing = dir.path().join("missing.wasm");
    let e = runtime().load_file(&missing).unwrap_err();
    assert!(
        e.to_string()
            .contains("missing.wasm: cannot read plugin module"),
        "{e}"
    );
}

#[test]
fn modules_are_checked_against_their_name_and_hash() {
    let rt = runtime();
    let path = PathBuf::from(berth_artifacts::fixtures::FIXTURE_MISBEHAVE);
    let wrong_name = ModuleSource::file("NodeResourcesFit", path.clone());
    let e = load_modules(&rt, &[wrong_name], &["NodeResourcesFit".into()]).unwrap_err();
    assert!(matches!(e, RegistryError::Name { .. }), "{e}");
    assert!(
        e.to_string().contains("module says it is plugin Misbehave"),
        "{e}"
    );

    let wrong_hash = ModuleSource {
        sha256: Some("00".repeat(32)),
        ..ModuleSource::file("Misbehave", path)
    };
    let e = load_modules(&rt, &[wrong_hash], &["Misbehave".into()]).unwrap_err();
    assert!(matches!(e, RegistryError::Sha256 { .. }), "{e}");

    let e = load_modules(&rt, &[], &["NoSuchPlugin".into()]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "plugin NoSuchPlugin is not built in and no entry of `modules` names it"
    );
}

#[test]
fn a_plugin_at_an_extension_point_it_lacks_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(dir.path(), "cluster.yaml", NODES);
    let config = write(
        dir.path(),
        "config.yaml",
        "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: NodeUnschedulable\n",
    );
    let e = run(&runtime(), vec![cluster], Some(config.clone())).unwrap_err();
    let msg = format!("{e:#}");
    // Refused when the profile is expanded, naming the file, the field, the point and
    // what the module implements.
    assert!(
        msg.contains(&format!(
            "{}: profiles[0].plugins.score.enabled[0]: plugin \"NodeUnschedulable\" does not implement score (it implements filter)",
            config.display()
        )),
        "{msg}"
    );
}

#[test]
fn bad_plugin_args_are_refused_at_start_with_the_plugin_name() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(dir.path(), "cluster.yaml", NODES);
    let config = write(
        dir.path(),
        "config.yaml",
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Nonsense\n",
    );
    let e = run(&runtime(), vec![cluster], Some(config)).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("plugin NodeResourcesFit"), "{msg}");
    assert_eq!(msg.matches("refused its args").count(), 1, "{msg}");
    assert!(msg.contains("scoringStrategy"), "{msg}");

    // A built-in plugin the profile disables has its args checked all the same, as
    // kube-scheduler does.
    let config = write(
        dir.path(),
        "disabled.yaml",
        "profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: NodeResourcesFit}]\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Nonsense\n",
    );
    let cluster = write(dir.path(), "cluster.yaml", NODES);
    let e = run(&runtime(), vec![cluster], Some(config)).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("plugin NodeResourcesFit"), "{msg}");
    assert_eq!(msg.matches("refused its args").count(), 1, "{msg}");
    assert!(msg.contains("scoringStrategy"), "{msg}");
}

#[test]
fn the_default_multi_point_list_expands_to_upstream_s_order_with_the_real_modules() {
    let c = Configuration::parse("x", "{}").unwrap();
    // With GenericWorkload on: GangScheduling is there (without, see below).
    let specs = c.resolve_profiles("x", true).unwrap();
    assert_eq!(specs.len(), 1);
    let modules = load_modules(&runtime(), &[], &specs[0].plugin_names()).unwrap();
    let p = &berth::config::expand_profiles(&specs, "x", &modules).unwrap()[0];
    let at = |point| -> Vec<(&str, i64)> {
        p.plugins_at(point)
            .iter()
            .map(|(n, w)| (n.as_str(), *w))
            .collect()
    };
    use ExtensionPoint as E;
    // GangScheduling comes last, as upstream appends it when its gate is on.
    assert_eq!(
        at(E::PreEnqueue),
        [
            ("SchedulingGates", 1),
            ("DynamicResources", 1),
            ("GangScheduling", 1)
        ]
    );
    assert_eq!(at(E::PlacementFeasible), [("GangScheduling", 1)]);
    // The placement plugins are there to enable, not on by default.
    assert!(at(E::PlacementGenerate).is_empty());
    assert!(at(E::PlacementScore).is_empty());
    assert_eq!(at(E::QueueSort), [("PrioritySort", 1)]);
    let ones = |names: &[&'static str]| -> Vec<(&'static str, i64)> {
        names.iter().map(|n| (*n, 1)).collect()
    };
    assert_eq!(
        at(E::PreFilter),
        ones(&[
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources",
            "NodeDeclaredFeatures"
        ])
    );
    assert_eq!(
        at(E::Filter),
        ones(&[
            "NodeName",
            "NodeUnschedulable",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources",
            "NodeDeclaredFeatures"
        ])
    );
    assert_eq!(
        at(E::PreScore),
        ones(&[
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "VolumeBinding",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources",
            "NodeResourcesBalancedAllocation",
            "ImageLocality"
        ])
    );
    assert_eq!(
        at(E::Score),
        [
            ("TaintToleration", 3),
            ("NodeAffinity", 2),
            ("NodeResourcesFit", 1),
            ("VolumeBinding", 1),
            ("PodTopologySpread", 2),
            ("InterPodAffinity", 2),
            ("DynamicResources", 2),
            ("NodeResourcesBalancedAllocation", 1),
            ("ImageLocality", 1)
        ]
    );
    // DynamicResources before DefaultPreemption, as upstream inserts it.
    assert_eq!(
        at(E::PostFilter),
        [("DynamicResources", 1), ("DefaultPreemption", 1)]
    );
    assert_eq!(at(E::PodGroupPostFilter), [("DefaultPreemption", 1)]);
    assert_eq!(at(E::Bind), [("DefaultBinder", 1)]);
    assert_eq!(
        at(E::Reserve),
        [("VolumeBinding", 1), ("DynamicResources", 1)]
    );
    assert_eq!(
        at(E::PreBind),
        [("VolumeBinding", 1), ("DynamicResources", 1)]
    );
    for point in [E::Permit, E::PostBind] {
        assert!(at(point).is_empty(), "{point:?}: {:?}", at(point));
    }
    // With GenericWorkload off (the default) the same list lacks GangScheduling only.
    let off = c.resolve_profiles("x", false).unwrap();
    let q = &berth::config::expand_profiles(&off, "x", &modules).unwrap()[0];
    for (point, plugins) in &p.points {
        let without: Vec<(String, i64)> = plugins
            .iter()
            .filter(|(n, _)| n != "GangScheduling")
            .cloned()
            .collect();
        assert_eq!(q.plugins_at(*point), without, "{point:?}");
    }
}

/// A what-if version of a node replaces the replica's for the calls that follow, a
/// second one on the same node replaces the first, and the next sync puts the
/// snapshot's version back: Filter sees each in turn.
#[test]
fn overlays_replace_a_node_in_the_replica_until_the_next_sync() {
    use berth::cache::Cache;
    use berth::framework::cycle_state::CycleState;
    use berth::framework::{CyclePod, PluginCalls};
    use berth::wasm::module::HostServices;
    use berth_sdk::testing::{node, pod};

    let rt = runtime();
    let fit = rt
        .load_file(Path::new(berth_artifacts::plugin_paths::NODE_RESOURCES_FIT))
        .unwrap();
    let mut inst = fit.instantiate("{}", HostServices::default()).unwrap();
    let mut cache = Cache::new();
    cache.add_or_update_node(node("n1").cpu(1000).memory(1 << 30).build().node);
    let mut busy = pod("busy").cpu(800).build();
    busy.node_name = "n1".into();
    cache.add_pod(&busy).unwrap();
    let mut snapshot = Default::default();
    cache.update_snapshot(&mut snapshot);
    let slot = snapshot.slot_of("n1").unwrap();
    let full = snapshot.node(slot).unwrap().clone();
    let mut emptied = full.clone();
    emptied.remove_pod(&busy);
    let mut fuller = full.clone();
    let mut other = pod("other").cpu(100).build();
    other.node_name = "n1".into();
    fuller.add_pod(&other);

    let incoming = CyclePod::new(pod("incoming").cpu(300).build());
    let fits = |inst: &mut berth::wasm::Instance| {
        let state = CycleState::new();
        let r = inst.pre_filter(&state, &incoming).unwrap();
        assert!(r.status.is_success(), "{r:?}");
        inst.filter(&state, &incoming, &[slot]).unwrap().is_empty()
    };
    inst.sync(&snapshot).unwrap();
    assert!(!fits(&mut inst), "800m of 1000m are taken");
    inst.sync_overlaid(&snapshot, &[(slot, &emptied)]).unwrap();
    assert!(fits(&mut inst), "the what-if without the busy pod has room");
    inst.sync_overlaid(&snapshot, &[(slot, &fuller)]).unwrap();
    assert!(!fits(&mut inst), "the second what-if replaces the first");
    inst.sync_overlaid(&snapshot, &[(slot, &emptied)]).unwrap();
    assert!(fits(&mut inst), "and a third the second");
    inst.sync(&snapshot).unwrap();
    assert!(!fits(&mut inst), "the sync puts the snapshot's node back");
}

/// With the default profile, DynamicResources allocates the device each pod's claim
/// (made from a template) asks for: the first pod gets zulu's one GPU, the second
/// finds none left anywhere.
#[test]
fn the_default_profile_allocates_the_devices_of_claims() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = NODES.to_owned();
    text += r#"---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: zulu-gpus}
spec:
  driver: gpu.example.com
  nodeName: zulu
  pool: {name: zulu, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
"#;
    for name in ["first", "second"] {
        text += &format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  resourceClaims: [{{name: gpu, resourceClaimTemplateName: one-gpu}}]\n  containers:\n  - {{name: c, image: busybox, resources: {{claims: [{{name: gpu}}]}}}}\n"
        );
    }
    let cluster = write(dir.path(), "cluster.yaml", &text);
    let report = run(&runtime(), vec![cluster], None).unwrap();
    let by_name = |n: &str| report.pods.iter().find(|p| p.name == n).unwrap();
    assert_eq!(by_name("first").node.as_deref(), Some("zulu"));
    let second = by_name("second");
    assert_eq!(second.node, None);
    assert!(
        second.message.contains("cannot allocate all claims"),
        "{}",
        second.message
    );
}

#[test]
fn pod_level_resources_and_resource_claims_are_not_placed_as_if_absent() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = NODES.to_owned();
    // Its containers ask for little, the pod as a whole for more than a node has.
    text += r#"---
apiVersion: v1
kind: Pod
metadata: {name: whole-pod-too-big}
spec:
  resources: {requests: {cpu: "5"}}
  containers:
  - {name: c, image: busybox, resources: {requests: {cpu: 100m}}}
---
apiVersion: v1
kind: Pod
metadata: {name: whole-pod-fits}
spec:
  resources: {requests: {cpu: "3"}}
  containers:
  - {name: c, image: busybox, resources: {requests: {cpu: 100m}}}
---
apiVersion: v1
kind: Pod
metadata: {name: wants-a-gpu}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers:
  - {name: c, image: busybox, resources: {claims: [{name: gpu}]}}
"#;
    let cluster = write(dir.path(), "cluster.yaml", &text);
    // A profile without DynamicResources, which allocates devices in the default one.
    let config = write(
        dir.path(),
        "config.yaml",
        "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      disabled: [{name: DynamicResources}]\n",
    );
    let report = run(&runtime(), vec![cluster], Some(config.clone())).unwrap();
    let by_name = |n: &str| report.pods.iter().find(|p| p.name == n).unwrap();

    let big = by_name("whole-pod-too-big");
    assert_eq!(big.node, None);
    assert!(big.message.contains("Insufficient cpu"), "{}", big.message);
    assert!(by_name("whole-pod-fits").node.is_some());

    // explain says the same, on every node.
    let why = berth::simulate::explain(
        &runtime(),
        &SimulateOptions {
            files: vec![dir.path().join("cluster.yaml")],
            config: Some(config),
            ..SimulateOptions::default()
        },
        "default/wants-a-gpu",
    )
    .unwrap();
    assert_eq!(why.prefilter[0].plugin, "DynamicResources");
    assert_eq!(why.prefilter[0].code, "UnschedulableAndUnresolvable");
    assert_eq!(why.nodes.len(), 2);
    for n in &why.nodes {
        assert!(!n.feasible, "{n:?}");
        assert!(
            n.filters.iter().any(|f| f.plugin == "DynamicResources"
                && f.reasons[0].starts_with("pod has ResourceClaims (\"gpu\")")),
            "{n:?}"
        );
    }

    let gpu = by_name("wants-a-gpu");
    assert_eq!(gpu.node, None, "placed as if it claimed no device");
    assert!(
        gpu.message.contains(
            "pod has ResourceClaims (\"gpu\") and the profile has no DynamicResources plugin to allocate their devices"
        ),
        "{}",
        gpu.message
    );
}
