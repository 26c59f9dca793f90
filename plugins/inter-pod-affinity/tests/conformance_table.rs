//! Runs tests/conformance/inter-pod-affinity.yaml through the plugin natively, with a
//! small stand-in for the host's manifest conversion (only the fields this plugin
//! reads), so the table and the plugin are checked against each other even where the
//! real harness (`cargo test -p berth-tests --test conformance`) is not at hand. The
//! real harness remains the authority: it runs the WebAssembly component in the host.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use berth_sdk::serde_json::Value;
use berth_sdk::types::{
    LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, PodAffinity, PodAffinityTerm,
    WeightedPodAffinityTerm,
};
use berth_sdk::{
    Code, CycleState, Filter, HostApi, Labels, LogLevel, MemoryState, Node, NodeInfo,
    NormalizeScore, Plugin, Pod, PreFilter, PreScore, Score,
};
use inter_pod_affinity::InterPodAffinity;

/// The namespaces of the case being run.
static NAMESPACES: Mutex<BTreeMap<String, Labels>> = Mutex::new(BTreeMap::new());

struct CaseHost;

impl HostApi for CaseHost {
    fn log(&self, _level: LogLevel, _message: &str) {}
    fn bind_pod(&self, _pod: &Pod, _node: &str) -> Result<(), String> {
        Err("not in tests".into())
    }
    fn namespace_labels(&self, namespace: &str) -> Option<Labels> {
        NAMESPACES.lock().unwrap().get(namespace).cloned()
    }
}

fn labels(v: &Value) -> Labels {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("label value").to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

fn selector(v: &Value) -> Option<LabelSelector> {
    if v.is_null() {
        return None;
    }
    let exprs = v["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Some(LabelSelector {
        match_labels: labels(&v["matchLabels"]),
        match_expressions: exprs
            .iter()
            .map(|e| LabelSelectorRequirement {
                key: e["key"].as_str().unwrap().to_owned(),
                operator: match e["operator"].as_str().unwrap() {
                    "In" => LabelSelectorOperator::In,
                    "NotIn" => LabelSelectorOperator::NotIn,
                    "Exists" => LabelSelectorOperator::Exists,
                    "DoesNotExist" => LabelSelectorOperator::DoesNotExist,
                    other => panic!("operator {other}"),
                },
                values: strings(&e["values"]),
            })
            .collect(),
    })
}

fn term(v: &Value) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: selector(&v["labelSelector"]),
        namespaces: strings(&v["namespaces"]),
        namespace_selector: selector(&v["namespaceSelector"]),
        topology_key: v["topologyKey"].as_str().unwrap().to_owned(),
        match_label_keys: strings(&v["matchLabelKeys"]),
        mismatch_label_keys: strings(&v["mismatchLabelKeys"]),
    }
}

fn pod_affinity(v: &Value) -> PodAffinity {
    let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
    PodAffinity {
        required: list("requiredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .map(term)
            .collect(),
        preferred: list("preferredDuringSchedulingIgnoredDuringExecution")
            .iter()
            .map(|w| WeightedPodAffinityTerm {
                weight: w["weight"].as_i64().unwrap() as i32,
                term: term(&w["podAffinityTerm"]),
            })
            .collect(),
    }
}

fn pod(v: &Value) -> Pod {
    let meta = &v["metadata"];
    let spec = &v["spec"];
    let namespace = meta["namespace"].as_str().unwrap_or("default").to_owned();
    let name = meta["name"].as_str().unwrap().to_owned();
    let mut p = Pod {
        uid: format!("{namespace}/{name}"),
        namespace,
        name,
        labels: labels(&meta["labels"]),
        node_name: spec["nodeName"].as_str().unwrap_or("").to_owned(),
        terminating: !meta["deletionTimestamp"].is_null(),
        ..Pod::default()
    };
    p.affinity.pod_affinity = pod_affinity(&spec["affinity"]["podAffinity"]);
    p.affinity.pod_anti_affinity = pod_affinity(&spec["affinity"]["podAntiAffinity"]);
    p
}

fn code(s: &str) -> Code {
    match s {
        "Success" => Code::Success,
        "Error" => Code::Error,
        "Unschedulable" => Code::Unschedulable,
        "UnschedulableAndUnresolvable" => Code::UnschedulableAndUnresolvable,
        "Skip" => Code::Skip,
        other => panic!("code {other}"),
    }
}

#[test]
fn the_conformance_table_holds_natively() {
    berth_sdk::set_native_host(Arc::new(CaseHost));
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/conformance/inter-pod-affinity.yaml"
    );
    // Read as Berth reads YAML (berth::yaml): `yes` and `08` stay strings.
    let options = serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
    };
    let text = std::fs::read_to_string(path).unwrap();
    let table: Value = serde_saphyr::from_str_with_options(&text, options).unwrap();
    assert_eq!(table["plugin"], "InterPodAffinity");
    let cases = table["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        *NAMESPACES.lock().unwrap() = case["namespaces"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|n| (n["name"].as_str().unwrap().to_owned(), labels(&n["labels"])))
                    .collect()
            })
            .unwrap_or_default();
        let plugin = InterPodAffinity::new(case["args"].clone()).unwrap();
        let mut infos: Vec<NodeInfo> = case["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                NodeInfo::new(Node {
                    name: n["metadata"]["name"].as_str().unwrap().to_owned(),
                    labels: labels(&n["metadata"]["labels"]),
                    ..Node::default()
                })
            })
            .collect();
        for p in case["pods"].as_array().cloned().unwrap_or_default() {
            let p = pod(&p);
            let info = infos.iter_mut().find(|i| i.name() == p.node_name).unwrap();
            info.add_pod(&p);
        }
        let all: Vec<&NodeInfo> = infos.iter().collect();
        let by_name: HashMap<&str, &NodeInfo> = infos.iter().map(|i| (i.name(), i)).collect();
        let incoming = pod(&case["pod"]);
        let expect = &case["expect"];

        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pre = plugin.pre_filter(&state, &incoming, &all);
        if let Some(want) = expect["preFilter"].as_str() {
            assert_eq!(pre.status.code, code(want), "{name}: preFilter");
        }
        for (node, want) in expect["filter"].as_object().cloned().unwrap_or_default() {
            let got = match pre.status.code {
                Code::Skip => berth_sdk::Status::success(),
                _ => plugin.filter(&state, &incoming, by_name[node.as_str()]),
            };
            assert_eq!(got.code, code(want.as_str().unwrap()), "{name}: {node}");
            if let Some(reasons) = expect["reasons"].get(&node) {
                assert_eq!(got.reasons, strings(reasons), "{name}: {node} reasons");
            }
        }
        if let Some(want) = expect["score"].as_object() {
            let nodes: Vec<&NodeInfo> = want.keys().map(|n| by_name[n.as_str()]).collect();
            let store = MemoryState::default();
            let state = CycleState::new(&store);
            let status = plugin.pre_score(&state, &incoming, &nodes, &all);
            let got: Vec<i64> = match status.code {
                Code::Skip => vec![0; nodes.len()],
                Code::Success => {
                    let mut s: Vec<i64> = nodes
                        .iter()
                        .map(|n| plugin.score(&state, &incoming, n).unwrap())
                        .collect();
                    assert!(
                        plugin
                            .normalize_score(&state, &incoming, &mut s)
                            .is_success()
                    );
                    s
                }
                _ => panic!("{name}: PreScore {status:?}"),
            };
            let want: Vec<i64> = want.values().map(|v| v.as_i64().unwrap()).collect();
            assert_eq!(got, want, "{name}: score");
        }
    }
}
