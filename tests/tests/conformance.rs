//! Conformance tables: each plugin's real component, loaded by the real host, answers
//! as kube-scheduler does for the same pod and nodes. The format is described in
//! tests/conformance/README.md.

use berth::cache::{Cache, Snapshot};
use berth::cluster::dra::Dra;
use berth::cluster::manifest::{self, Object};
use berth::cluster::memory::MemoryCluster;
use berth::cluster::storage::Storage;
use berth::cluster::{Binder, Namespaces};
use berth::config::Profile;
use berth::framework::registry::load_modules;
use berth::framework::waiting::WaitingPods;
use berth::framework::{CyclePod, ExplainOptions, Framework, FrameworkOptions, NominatedPods};
use berth::wasm::module::HostServices;
use berth::wasm::{Module, Runtime};
use berth_sdk::ExtensionPoint;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn tables() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// Converts a manifest given as a YAML value (apiVersion/kind optional) through the
/// same loader `berth simulate` uses.
fn object(mut v: Value, kind: &str, what: &str) -> Object {
    let map = v
        .as_object_mut()
        .unwrap_or_else(|| panic!("{what}: not a mapping"));
    map.entry("apiVersion").or_insert_with(|| "v1".into());
    map.entry("kind").or_insert_with(|| kind.into());
    let docs = manifest::load_str(what, &v.to_string()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(docs.len(), 1, "{what}");
    docs.into_iter().next().unwrap().object
}

fn profile_for(plugin: &str, module: &Module, args: Option<&Value>) -> Profile {
    let mut points: BTreeMap<ExtensionPoint, Vec<(String, i64)>> = BTreeMap::new();
    for &p in module.extension_points() {
        if p != ExtensionPoint::NormalizeScore {
            points.entry(p).or_default().push((plugin.to_owned(), 1));
        }
    }
    points
        .entry(ExtensionPoint::QueueSort)
        .or_insert_with(|| vec![("PrioritySort".into(), 1)]);
    points
        .entry(ExtensionPoint::Bind)
        .or_insert_with(|| vec![("DefaultBinder".into(), 1)]);
    let mut all_args = BTreeMap::new();
    if let Some(a) = args {
        all_args.insert(plugin.to_owned(), a.clone());
    }
    Profile {
        scheduler_name: "default-scheduler".into(),
        points,
        args: all_args,
        percentage_of_nodes_to_score: None,
        fail_open: Default::default(),
        shadows: Default::default(),
    }
}

struct Checker {
    failures: Vec<String>,
    cases: usize,
}

impl Checker {
    fn expect_eq<T: PartialEq + std::fmt::Debug>(
        &mut self,
        case: &str,
        what: &str,
        got: T,
        want: T,
    ) {
        if got != want {
            self.failures
                .push(format!("{case}: {what}: got {got:?}, want {want:?}"));
        }
    }
}

fn run_table(runtime: &Arc<Runtime>, path: &Path, checker: &mut Checker) {
    let text = std::fs::read_to_string(path).unwrap();
    let table: Value =
        berth::yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let plugin = table["plugin"].as_str().expect("plugin").to_owned();
    let modules: HashMap<String, Arc<Module>> = load_modules(
        runtime,
        &[],
        &[
            plugin.clone(),
            "PrioritySort".into(),
            "DefaultBinder".into(),
        ],
    )
    .unwrap();
    let module = modules[&plugin].clone();
    let file = path.file_name().unwrap().to_string_lossy().to_string();

    for case in table["cases"].as_array().expect("cases") {
        let name = format!("{file}: {}", case["name"].as_str().expect("case name"));
        checker.cases += 1;
        let namespaces = Namespaces::new();
        for ns in case["namespaces"].as_array().into_iter().flatten() {
            let labels = ns["labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            namespaces.set(ns["name"].as_str().unwrap(), labels);
        }
        let storage = Storage::new();
        for o in case["storage"].as_array().into_iter().flatten() {
            let docs = manifest::load_str(&name, &o.to_string()).unwrap_or_else(|e| panic!("{e}"));
            for d in docs {
                match d.object {
                    Object::Claim(c) => {
                        storage.set_claim(c);
                    }
                    Object::Volume(v) => {
                        storage.set_volume(v);
                    }
                    Object::StorageClass(c) => {
                        storage.set_class(c);
                    }
                    Object::CsiNode(n) => {
                        storage.set_csi_node(n);
                    }
                    Object::CsiDriver(d) => {
                        storage.set_csi_driver(d);
                    }
                    Object::CsiStorageCapacity(c) => {
                        storage.set_capacity(c);
                    }
                    other => panic!("{name}: storage: not a storage object: {other:?}"),
                }
            }
        }
        let dra = Dra::new();
        for o in case["dra"].as_array().into_iter().flatten() {
            let docs = manifest::load_str(&name, &o.to_string()).unwrap_or_else(|e| panic!("{e}"));
            for d in docs {
                match d.object {
                    Object::DeviceClass(c) => {
                        dra.set_class(c);
                    }
                    Object::ResourceClaim(c) => {
                        dra.set_claim(c);
                    }
                    Object::ResourceClaimTemplate(t) => {
                        dra.set_template(t);
                    }
                    Object::ResourceSlice(s) => {
                        dra.set_slice(s);
                    }
                    Object::DeviceTaintRule(r) => {
                        dra.set_taint_rule(r);
                    }
                    other => panic!("{name}: dra: not a resource.k8s.io object: {other:?}"),
                }
            }
        }
        let mut cache = Cache::new();
        for n in case["nodes"].as_array().into_iter().flatten() {
            let Object::Node(node) = object(n.clone(), "Node", &name) else {
                unreachable!()
            };
            cache.add_or_update_node(node);
        }
        for p in case["pods"].as_array().into_iter().flatten() {
            let Object::Pod(pod) = object(p.clone(), "Pod", &name) else {
                unreachable!()
            };
            cache
                .add_pod(&pod)
                .unwrap_or_else(|e| panic!("{name}: existing pod: {e}"));
        }
        let Object::Pod(pod) = object(case["pod"].clone(), "Pod", &name) else {
            unreachable!()
        };
        let mut snapshot = Snapshot::default();
        cache.update_snapshot(&mut snapshot);

        let profile = profile_for(&plugin, &module, case.get("args"));
        let options = FrameworkOptions {
            parallelism: 1,
            ..FrameworkOptions::default()
        };
        let cluster = Arc::new(MemoryCluster::new());
        cluster.attach_dra(&dra);
        let services = HostServices {
            binder: Some(cluster.clone()),
            claim_writer: Some(cluster),
            namespaces,
            waiting: WaitingPods::new(),
            metrics: None,
            budgets: Default::default(),
            storage,
            pod_groups: Default::default(),
            dra,
            gates: Default::default(),
        };
        let fw = match Framework::new(&profile, &modules, &options, &services) {
            Ok(fw) => fw,
            Err(e) => {
                checker.failures.push(format!("{name}: framework: {e}"));
                continue;
            }
        };
        let expect = &case["expect"];
        let score_nodes: Option<Vec<String>> = expect["score"]
            .as_object()
            .map(|m| m.keys().cloned().collect());
        let explain = fw.explain(
            &CyclePod::new(pod.clone()),
            &snapshot,
            &NominatedPods::new(),
            &ExplainOptions {
                // Normalization depends on the set of nodes, not their order.
                score_nodes,
            },
        );
        let explain = match explain {
            Ok(e) => e,
            Err(e) => {
                checker.failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        if let Some(want) = expect["preFilter"].as_str() {
            let got = explain
                .prefilter
                .iter()
                .find(|p| p.plugin == plugin)
                .map(|p| p.code.clone())
                .unwrap_or_else(|| "Success".into());
            checker.expect_eq(&name, "preFilter", got.as_str(), want);
        }
        for (node, want) in expect["filter"].as_object().into_iter().flatten() {
            let Some(n) = explain.nodes.iter().find(|n| &n.node == node) else {
                checker.failures.push(format!("{name}: no node {node}"));
                continue;
            };
            let got = n
                .filters
                .iter()
                .find(|f| f.plugin == plugin)
                .map(|f| f.code.clone())
                .unwrap_or_else(|| "Success".into());
            checker.expect_eq(
                &name,
                &format!("filter on {node}"),
                got.as_str(),
                want.as_str().unwrap(),
            );
        }
        for (node, want) in expect["reasons"].as_object().into_iter().flatten() {
            let n = explain.nodes.iter().find(|n| &n.node == node);
            let got: Vec<String> = n
                .and_then(|n| n.filters.iter().find(|f| f.plugin == plugin))
                .map(|f| f.reasons.clone())
                .unwrap_or_default();
            let want: Vec<String> = want
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap().to_owned())
                .collect();
            checker.expect_eq(&name, &format!("reasons on {node}"), got, want);
        }
        for (node, want) in expect["score"].as_object().into_iter().flatten() {
            let n = explain.nodes.iter().find(|n| &n.node == node);
            let got = n
                .and_then(|n| n.scores.iter().find(|s| s.plugin == plugin))
                .map(|s| s.normalized);
            checker.expect_eq(&name, &format!("score on {node}"), got, want.as_i64());
        }
    }
}

#[test]
fn every_plugin_answers_as_kube_scheduler() {
    let runtime = berth_tests::runtime();
    let mut checker = Checker {
        failures: Vec::new(),
        cases: 0,
    };
    let files = tables();
    assert!(!files.is_empty(), "no conformance tables");
    for f in &files {
        run_table(&runtime, f, &mut checker);
    }
    assert!(
        checker.failures.is_empty(),
        "{} of {} cases failed:\n{}",
        checker.failures.len(),
        checker.cases,
        checker.failures.join("\n")
    );
    eprintln!(
        "{} conformance cases in {} tables passed",
        checker.cases,
        files.len()
    );
}
