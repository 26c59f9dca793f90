//! `berth simulate` end to end, as a user runs it.

use crate::common;

use common::{berth, stderr, stdout};

#[test]
fn simulate_places_the_example_and_explains_the_pod_that_fits_nowhere() {
    let out = berth(&["simulate", "examples/cluster.yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["default/web-1", "small-1", "1", "attempt"]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["default/web-2", "small-1", "1", "attempt"]
    );
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        ["jobs/batch-1", "large-1", "1", "attempt"]
    );
    assert_eq!(
        lines[3].split_whitespace().collect::<Vec<_>>(),
        ["ml/trainer", "gpu-1", "1", "attempt"]
    );
    assert!(lines[4].starts_with("default/huge"), "{text}");
    assert!(
        lines[4].ends_with(
            "1 attempt   0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        ),
        "{text}"
    );
    assert!(
        lines[5].starts_with("4 scheduled (1 from a batch), 1 unschedulable, 5 pods in "),
        "{text}"
    );
}

#[test]
fn simulate_json_has_exactly_the_documented_shape() {
    let out = berth(&["simulate", "--output", "json", "examples/cluster.yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let top: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(top, ["pods", "summary"]);
    let pods = v["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 5);
    for p in pods {
        let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
        // `batched` only on a pod placed from a batch: web-2, signed like web-1.
        if p["name"] == "web-2" {
            assert_eq!(
                keys,
                [
                    "attempts",
                    "batched",
                    "message",
                    "name",
                    "namespace",
                    "node"
                ]
            );
            assert_eq!(p["batched"], true);
        } else {
            assert_eq!(keys, ["attempts", "message", "name", "namespace", "node"]);
        }
    }
    assert_eq!(pods[0]["node"], "small-1");
    assert_eq!(
        pods[0]["message"],
        "Successfully assigned default/web-1 to small-1"
    );
    assert_eq!(pods[4]["name"], "huge");
    assert!(pods[4]["node"].is_null());
    let summary = v["summary"].as_object().unwrap();
    assert_eq!(
        summary.keys().collect::<Vec<_>>(),
        ["batched", "scheduled", "seconds", "unschedulable"]
    );
    assert_eq!(summary["scheduled"], 4);
    assert_eq!(summary["batched"], 1);
    assert_eq!(summary["unschedulable"], 1);
    assert!(summary["seconds"].as_f64().unwrap() >= 0.0);
}

#[test]
fn a_malformed_file_names_the_file_and_position_and_prints_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {cpu: lots}}\n",
    )
    .unwrap();
    let out = berth(&["simulate", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stdout(&out).is_empty(), "printed: {}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}: document 2 (line 5)", bad.display())),
        "{err}"
    );
    assert!(
        err.contains("spec.containers[0].resources.requests.cpu"),
        "{err}"
    );

    std::fs::write(&bad, "apiVersion: v1\nkind: Node\nmetadata: {name: n\n").unwrap();
    let out = berth(&["simulate", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&format!("{}:", bad.display())), "{err}");
    assert!(stdout(&out).is_empty());
}

#[test]
fn a_missing_file_and_a_bad_config_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = berth(&["simulate", "does-not-exist.yaml"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("does-not-exist.yaml"),
        "{}",
        stderr(&out)
    );

    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "percentageOfNodesToScore: 150\n").unwrap();
    let out = berth(&[
        "simulate",
        "--config",
        config.to_str().unwrap(),
        "examples/cluster.yaml",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("config.yaml: percentageOfNodesToScore: 150 is not in 0..=100"),
        "{}",
        stderr(&out)
    );
}

/// A claim allocated a GPU of node `old`, which is gone; n1 has the only GPU now.
const STALE_ALLOCATION: &str = r#"apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: '4', memory: 8Gi}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpus}
spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: stale, resourceVersion: '7'}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
status:
  allocation:
    devices: {results: [{request: gpu, driver: gpu.example.com, pool: old, device: gpu-0}]}
    nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [old]}]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {resourceClaims: [{name: gpu, resourceClaimName: stale}], containers: [{name: c}]}
"#;

#[test]
fn a_stale_allocation_is_deallocated_at_post_filter_in_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stale.yaml");
    std::fs::write(&file, STALE_ALLOCATION).unwrap();
    let file = file.to_str().unwrap();
    let out = berth(&["simulate", "-o", "json", file]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pod = &v["pods"][0];
    assert_eq!(pod["node"], "n1", "{v}");
    // DynamicResources' PostFilter deallocated the claim in the first attempt; the
    // claim's update brought the pod back, and the second allocated n1's GPU.
    assert_eq!(pod["attempts"], 2, "{v}");
    let text = stdout(&berth(&["simulate", file]));
    assert!(
        text.contains("default/stale  request gpu: device gpu.example.com/n1/gpu-0 (for p)\n"),
        "{text}"
    );
}

#[test]
fn simulate_runs_a_timeline_of_adds_updates_and_deletes() {
    let out = berth(&["simulate", "--output", "json", "examples/timeline.yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pods = v["pods"].as_array().unwrap();
    let names: Vec<&str> = pods.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["big", "gated"], "the deleted pod is not reported");
    // Too big for the small node; lands on the big node when it joins.
    assert_eq!(pods[0]["node"], "big");
    assert_eq!(pods[0]["attempts"], 2);
    // Gated first (no attempt), then scheduled once its gate is removed.
    assert_eq!(pods[1]["node"], "small");
    assert_eq!(pods[1]["attempts"], 1);
}

#[test]
fn simulate_allocates_the_dra_example_s_devices_request_by_request() {
    let out = berth(&["simulate", "examples/dra/cluster.yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let node_of = |pod: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("default/{pod} ")))
            .unwrap_or_else(|| panic!("no line for {pod}:\n{text}"));
        line.split_whitespace().nth(1).unwrap().to_owned()
    };
    // The shared claim's pods are where its GPU is; the training pods each need a
    // GPU and a NIC, which only gpu-a and gpu-b have; the prioritized list finds the
    // H100 taken and takes gpu-c's two A100s; the plain pod needs no device.
    assert_eq!(node_of("inference-0"), "gpu-a", "{text}");
    assert_eq!(node_of("inference-1"), "gpu-a", "{text}");
    let mut trains = [node_of("train-0"), node_of("train-1")];
    trains.sort();
    assert_eq!(trains, ["gpu-a", "gpu-b"], "{text}");
    assert_eq!(node_of("finetune"), "gpu-c", "{text}");
    assert!(text.contains(
        "default/shared-a100  request gpu: device gpu.example.com/gpu-a/gpu-0 (for inference-0, inference-1)\n"
    ), "{text}");
    let finetune: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("default/finetune-gpus-"))
        .collect();
    assert_eq!(finetune.len(), 2, "{text}");
    for (line, device) in finetune.iter().zip(["gpu-0", "gpu-1"]) {
        assert!(
            line.ends_with(&format!(
                "request gpus/two-a100: device gpu.example.com/gpu-c/{device} (for finetune)"
            )),
            "{line}"
        );
    }
    // Each training claim got one GPU and one NIC of its pod's node.
    for pod in ["train-0", "train-1"] {
        let node = node_of(pod);
        let claim: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("default/{pod}-devices-")))
            .collect();
        assert_eq!(claim.len(), 2, "{text}");
        assert!(
            claim[0].contains(&format!("request gpu: device gpu.example.com/{node}/")),
            "{text}"
        );
        assert!(
            claim[1].contains(&format!(
                "request nic: device rdma.example.com/{node}/nic-0"
            )),
            "{text}"
        );
    }
    assert!(
        text.contains("\n6 scheduled, 0 unschedulable, 6 pods in "),
        "{text}"
    );
    // The same in JSON.
    let out = berth(&["simulate", "-o", "json", "examples/dra/cluster.yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 7, "{v}");
    let shared = devices
        .iter()
        .find(|d| d["claim"] == "shared-a100")
        .unwrap();
    assert_eq!(
        shared,
        &serde_json::json!({
            "namespace": "default",
            "claim": "shared-a100",
            "request": "gpu",
            "device": "gpu.example.com/gpu-a/gpu-0",
            "reserved_for": ["inference-0", "inference-1"]
        })
    );
}

#[test]
fn simulate_gives_extended_resources_as_devices_where_no_device_plugin_does() {
    // The sandboxed components (the default), as README's example runs them.
    let out = berth(&["simulate", "examples/dra/extended-resources.yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let line_of = |pod: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("default/{pod} ")))
            .unwrap_or_else(|| panic!("no line for {pod}:\n{text}"))
            .to_owned()
    };
    let node_of = |pod: &str| line_of(pod).split_whitespace().nth(1).unwrap().to_owned();
    assert_eq!(node_of("trainer"), "dra-node", "{text}");
    assert_eq!(node_of("inference"), "dp-node", "{text}");
    assert_eq!(node_of("fpga-job"), "fpga-node", "{text}");
    assert_eq!(node_of("batch"), "<pending>", "{text}");
    assert!(
        line_of("batch").contains(
            "0/3 nodes are available: 1 Insufficient example.com/gpu, 2 cannot allocate all claims."
        ),
        "{text}"
    );
    // The claims made for the pods, request by request.
    let trainer: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("default/trainer-extended-resources-"))
        .collect();
    assert_eq!(trainer.len(), 2, "{text}");
    for (line, device) in trainer.iter().zip(["gpu-0", "gpu-1"]) {
        assert!(
            line.ends_with(&format!(
                "request container-0-request-1: device gpu.example.com/dra-node/{device} (for trainer)"
            )),
            "{line}"
        );
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("default/fpga-job-extended-resources-")
                && l.ends_with("device fpga.example.com/fpga-node/fpga-0 (for fpga-job)")),
        "{text}"
    );
    assert!(
        text.contains("\n3 scheduled, 1 unschedulable, 4 pods in "),
        "{text}"
    );
    // explain shows the devices the claim PreBind would make would get.
    let out = berth(&[
        "explain",
        "--pod",
        "default/trainer",
        "examples/dra/extended-resources.yaml",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Devices on dra-node (the node the cycle would choose), as Reserve would assume them:\n  default/trainer-extended-resources-*  request container-0-request-1: device gpu.example.com/dra-node/gpu-0 (for trainer)\n"),
        "{text}"
    );
}

#[test]
fn explain_shows_which_device_each_request_of_the_dra_example_would_get() {
    let out = berth(&[
        "explain",
        "--pod",
        "default/train-0",
        "examples/dra/cluster.yaml",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // gpu-a and gpu-b have a GPU and a NIC each and score the same: the first.
    assert!(
        text.contains(
            "Devices on gpu-a (the node the cycle would choose), as Reserve would assume them:\n"
        ),
        "{text}"
    );
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  default/train-0-devices-"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].ends_with("request gpu: device gpu.example.com/gpu-a/gpu-0 (for train-0)"),
        "{text}"
    );
    assert!(
        lines[1].ends_with("request nic: device rdma.example.com/gpu-a/nic-0 (for train-0)"),
        "{text}"
    );
    // A shared claim allocated by nobody yet, in JSON.
    let out = berth(&[
        "explain",
        "-o",
        "json",
        "--pod",
        "default/finetune",
        "examples/dra/cluster.yaml",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Alone in the cluster (explain schedules no other pending pod), finetune's
    // prioritized list gets its first choice, the H100.
    assert_eq!(v["devices"]["node"], "gpu-b", "{v}");
    assert_eq!(v["devices"]["devices"][0]["request"], "gpus/h100", "{v}");
    assert_eq!(
        v["devices"]["devices"][0]["device"], "gpu.example.com/gpu-b/gpu-0",
        "{v}"
    );
    // A pod without claims has no devices.
    let out = berth(&[
        "explain",
        "-o",
        "json",
        "--pod",
        "default/web",
        "examples/dra/cluster.yaml",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("devices").is_none(), "{v}");
}

/// Pod groups are scheduled as groups with this gate only, as in kube-scheduler 1.37.
const GATE: &str = "--feature-gates=GenericWorkload=true";

#[test]
fn simulate_places_the_example_s_gangs_whole_or_not_at_all() {
    let out = berth(&["simulate", GATE, "examples/gangs.yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |pod: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("default/{pod} ")))
            .unwrap_or_else(|| panic!("no line for {pod}:\n{text}"))
            .to_owned()
    };
    // The training gang lands whole; the wide one binds nothing (two of three fit).
    for i in 0..4 {
        assert!(!line(&format!("train-{i}")).contains("<pending>"), "{text}");
    }
    for i in 0..3 {
        assert!(line(&format!("wide-{i}")).contains("<pending>"), "{text}");
    }
    // The eval members waited for their PodGroup, then landed.
    assert!(!line("eval-0").contains("<pending>"), "{text}");
    assert!(!line("eval-1").contains("<pending>"), "{text}");
    // Each group names the Workload template it was made from; eval's Workload is
    // not in the file, and the group landed all the same.
    for group in [
        "pod group default/eval (gang, minCount 2; Workload default/eval, template evaluators, not known): 2 of 2 member(s) bound: placed",
        "pod group default/train (gang, minCount 4; Workload default/train, template workers): 4 of 4 member(s) bound: placed",
        "pod group default/wide (gang, minCount 3; Workload default/solve, template solvers): 0 of 3 member(s) bound: unschedulable",
    ] {
        assert!(text.contains(&format!("{group}\n")), "{group}:\n{text}");
    }
    assert!(
        text.contains("\n6 scheduled, 3 unschedulable, 9 pods in "),
        "{text}"
    );
    // The same in JSON.
    let out = berth(&["simulate", GATE, "-o", "json", "examples/gangs.yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups = v["groups"].as_array().unwrap();
    let workload = |name: &str| {
        groups
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("no group {name}: {v}"))["workload"]
            .clone()
    };
    assert_eq!(
        workload("train"),
        serde_json::json!({"workload": "default/train", "template": "workers", "known": true})
    );
    assert_eq!(
        workload("eval"),
        serde_json::json!({
            "workload": "default/eval",
            "template": "evaluators",
            "known": false,
            "missing": "the cluster has no Workload default/eval",
        })
    );
    // explain of a wide member shows its group's cycle, and where the group came
    // from.
    let out = berth(&[
        "explain",
        GATE,
        "--pod",
        "default/wide-0",
        "examples/gangs.yaml",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Pod group default/wide (gang, minCount 3): 0 member(s) scheduled before; its cycle would try 3:\n  made from Workload default/solve, template \"solvers\"\n"),
        "{text}"
    );
    // An eval member's group names a Workload the files lack: said, and the group
    // is tried all the same.
    let out = berth(&[
        "explain",
        GATE,
        "--pod",
        "default/eval-0",
        "examples/gangs.yaml",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("  made from Workload default/eval, template \"evaluators\": not known (the cluster has no Workload default/eval); the group is scheduled without it\n"),
        "{text}"
    );
    assert!(text.contains("  verdict: placed as above\n"), "{text}");
    let out = berth(&[
        "explain",
        GATE,
        "--pod",
        "default/eval-0",
        "-o",
        "json",
        "examples/gangs.yaml",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["pod_group"]["workload"]["known"], false, "{v}");
}

/// Without the gate (kube-scheduler 1.37's default) the same file schedules every
/// member alone: two of the wide gang's three members land, taking the room the eval
/// members then lack; no group is reported, and a warning says why.
#[test]
fn simulate_without_generic_workload_schedules_the_example_s_members_alone() {
    let out = berth(&["simulate", "examples/gangs.yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains("pod group "), "{text}");
    let bound = |prefix: &str| {
        text.lines()
            .filter(|l| l.starts_with(&format!("default/{prefix}")) && !l.contains("<pending>"))
            .count()
    };
    assert_eq!(bound("train-"), 4, "{text}");
    assert_eq!(bound("wide-"), 2, "{text}");
    assert_eq!(bound("eval-"), 0, "{text}");
    let err = stderr(&out);
    assert!(
        err.contains("PodGroup(s) not scheduled as groups: GenericWorkload is off"),
        "{err}"
    );
}

/// A Workload deleted in a timeline is no longer known: the report says so of the
/// groups made from it, and they are scheduled all the same.
#[test]
fn simulate_applies_and_deletes_workloads() {
    let dir = tempfile::tempdir().unwrap();
    let workload = "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {name: job}\nspec:\n  podGroupTemplates:\n  - {name: workers, schedulingPolicy: {gang: {minCount: 2}}}\n";
    let group_and_pods = r#"apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: job-workers}
spec:
  workloadRef: {workloadName: job, templateName: workers}
  schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n}, status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}}
- {apiVersion: v1, kind: Pod, metadata: {name: w-0}, spec: {schedulingGroup: {podGroupName: job-workers}, containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: w-1}, spec: {schedulingGroup: {podGroupName: job-workers}, containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"#;
    let delete = "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {name: job, annotations: {berth.dev/simulate: delete}}\n";
    let report = |documents: &[&str]| {
        let file = dir.path().join("workloads.yaml");
        std::fs::write(&file, documents.join("---\n")).unwrap();
        let out = berth(&["simulate", GATE, file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let group =
        "pod group default/job-workers (gang, minCount 2; Workload default/job, template workers";
    let placed = "): 2 of 2 member(s) bound: placed\n";
    let text = report(&[workload, group_and_pods]);
    assert!(text.contains(&format!("{group}{placed}")), "{text}");
    let text = report(&[workload, delete, group_and_pods]);
    assert!(
        text.contains(&format!("{group}, not known{placed}")),
        "{text}"
    );
}

/// `berth explain --pod default/web-1 -o json FILE`, parsed.
fn explain_web_1(file: &str) -> serde_json::Value {
    let out = berth(&["explain", "--pod", "default/web-1", "-o", "json", file]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn explain_prints_every_filter_and_score() {
    let v = explain_web_1("examples/cluster.yaml");
    let top: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(top, ["chosen", "nodes", "pod", "prefilter"]);
    assert_eq!(v["pod"], "default/web-1");
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    for n in nodes {
        let keys: Vec<&String> = n.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["feasible", "filters", "node", "scores", "total"]);
        // Every filter plugin whose PreFilter did not Skip answers on every node, even
        // after a failure.
        let plugins: Vec<&str> = n["filters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["plugin"].as_str().unwrap())
            .collect();
        assert_eq!(
            plugins,
            [
                "NodeName",
                "NodeUnschedulable",
                "TaintToleration",
                "NodeResourcesFit"
            ],
            "{n}"
        );
    }
    let gpu = nodes.iter().find(|n| n["node"] == "gpu-1").unwrap();
    assert_eq!(gpu["feasible"], false);
    let taint = gpu["filters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["plugin"] == "TaintToleration")
        .unwrap();
    assert_eq!(taint["code"], "UnschedulableAndUnresolvable");
    assert_eq!(taint["reasons"][0], "node(s) had untolerated taint(s)");
    let small = nodes.iter().find(|n| n["node"] == "small-1").unwrap();
    assert_eq!(small["feasible"], true);
    let scores = small["scores"].as_array().unwrap();
    // The default profile's nine Score plugins (VolumeBinding's PreScore skips: 0;
    // DynamicResources' too, for a pod without claims).
    assert_eq!(scores.len(), 9);
    let vb = scores
        .iter()
        .find(|s| s["plugin"] == "VolumeBinding")
        .unwrap();
    assert_eq!(vb["weighted"], 0);
    let total: i64 = scores.iter().map(|s| s["weighted"].as_i64().unwrap()).sum();
    assert_eq!(small["total"], total);
    let tt = scores
        .iter()
        .find(|s| s["plugin"] == "TaintToleration")
        .unwrap();
    assert_eq!(tt["normalized"], 100);
    assert_eq!(tt["weighted"], 300);

    let out = berth(&["explain", "--pod", "default/nope", "examples/cluster.yaml"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no pending pod default/nope"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn services_give_pods_the_default_spread_constraints() {
    let dir = tempfile::tempdir().unwrap();
    let base = r#"
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1, topology.kubernetes.io/zone: a}}
status: {allocatable: {cpu: "4", memory: 8Gi}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2, topology.kubernetes.io/zone: b}}
status: {allocatable: {cpu: "4", memory: 8Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, labels: {app: web}}
spec: {nodeName: n1, containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web}}
spec: {containers: [{name: c, image: nginx}]}
"#;
    let service =
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}}\n";
    let spread_scores = |text: &str| -> Vec<(String, i64)> {
        let f = dir.path().join("c.yaml");
        std::fs::write(&f, text).unwrap();
        let v = explain_web_1(f.to_str().unwrap());
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                let s = n["scores"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|s| s["plugin"] == "PodTopologySpread")
                    .unwrap();
                (
                    n["node"].as_str().unwrap().to_owned(),
                    s["normalized"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    // Without a Service nothing selects the pod: PodTopologySpread has nothing to do.
    assert_eq!(
        spread_scores(base),
        [("n1".to_owned(), 0), ("n2".to_owned(), 0)]
    );
    // The Service makes the system default constraints apply: n1 already runs a web pod.
    let with_service = spread_scores(&format!("{base}{service}"));
    assert!(with_service[0].1 < with_service[1].1, "{with_service:?}");
}

#[test]
fn the_volume_plugins_place_the_volumes_example_and_other_kinds_are_named_in_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let cron_job = dir.path().join("cron-job.yaml");
    std::fs::write(
        &cron_job,
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: d}\n",
    )
    .unwrap();
    let out = berth(&[
        "simulate",
        "examples/volumes/cluster.yaml",
        cron_job.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let placed: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().take(2).collect())
        .collect();
    // The StatefulSet's two pods take one local disk each, on either node.
    let kafka: Vec<&str> = placed[4..6].iter().map(|l| l[1]).collect();
    assert!(
        kafka == ["node-a", "node-b"] || kafka == ["node-b", "node-a"],
        "{text}"
    );
    let disk = |node: &str| if node == "node-a" { "disk-a" } else { "disk-b" };
    assert_eq!(
        placed[..4],
        [
            ["default/postgres", "node-b"],
            ["default/pg-reader", "<pending>"],
            ["default/cache", "node-a"],
            ["default/batch", "node-b"],
        ],
        "{text}"
    );
    assert_eq!(placed[4][0], "default/kafka-0");
    assert_eq!(placed[5][0], "default/kafka-1");
    // The claims the run bound: the scratch volume provisioned for batch's node,
    // each kafka claim to the disk of its pod's node.
    let claims: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("bound to volume"))
        .collect();
    assert_eq!(claims.len(), 3, "{text}");
    assert!(
        claims[0].starts_with("default/scratch  bound to volume pvc-")
            && claims[0].ends_with("(provisioned for node-b)"),
        "{text}"
    );
    assert_eq!(
        claims[1],
        format!("default/data-kafka-0  bound to volume {}", disk(kafka[0]))
    );
    assert_eq!(
        claims[2],
        format!("default/data-kafka-1  bound to volume {}", disk(kafka[1]))
    );
    assert!(text.contains("5 scheduled, 1 unschedulable"), "{text}");
    assert!(
        text.contains("0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod."),
        "{text}"
    );
    assert!(
        stderr(&out).contains(
            "ignoring objects of kinds scheduling does not read: batch/v1 CronJob (1); only v1 Node"
        ),
        "{}",
        stderr(&out)
    );
}

/// The pods of a `--output json` report, as `(name, node or "<pending>")`.
fn placements(out: &std::process::Output) -> Vec<(String, String)> {
    assert!(out.status.success(), "{}", stderr(out));
    let v: serde_json::Value = serde_json::from_str(&stdout(out)).unwrap();
    v["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["node"].as_str().unwrap_or("<pending>").to_owned(),
            )
        })
        .collect()
}

const TWO_NODES: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '20'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '20'}}
";

/// A workload of `kind` with `spec` lines added under its spec, and a pod template
/// labelled `app: NAME` asking for `cpu`.
fn workload(api: &str, kind: &str, name: &str, spec: &str, cpu: &str) -> String {
    format!(
        "---\napiVersion: {api}\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n{spec}  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers:\n      - {{name: c, image: app, resources: {{requests: {{cpu: '{cpu}'}}}}}}\n"
    )
}

/// The `selector:` line of a workload matching `app: NAME`.
fn selector(name: &str) -> String {
    format!("  selector: {{matchLabels: {{app: {name}}}}}\n")
}

/// The placements of `berth simulate FILE --output json`.
fn simulate_placements(file: &std::path::Path) -> Vec<(String, String)> {
    placements(&berth(&[
        "simulate",
        file.to_str().unwrap(),
        "--output",
        "json",
    ]))
}

/// Two nodes and five workloads: a Deployment `web`, an ordered StatefulSet `db`
/// whose pods fit nowhere, a Parallel one `cache` that fits nowhere either, an
/// Indexed Job `train` and an ordered StatefulSet `kv` that fits.
fn five_workloads() -> String {
    format!(
        "{TWO_NODES}{}{}{}{}{}",
        workload(
            "apps/v1",
            "Deployment",
            "web",
            &format!("  replicas: 3\n{}", selector("web")),
            "500m"
        ),
        // Ordered (the default): db-1 waits until db-0 runs, and db-0 fits nowhere.
        workload(
            "apps/v1",
            "StatefulSet",
            "db",
            &format!("  replicas: 3\n{}", selector("db")),
            "9"
        ),
        workload(
            "apps/v1",
            "StatefulSet",
            "cache",
            &format!(
                "  replicas: 2\n  podManagementPolicy: Parallel\n{}",
                selector("cache")
            ),
            "9"
        ),
        workload(
            "batch/v1",
            "Job",
            "train",
            "  parallelism: 2\n  completions: 5\n  completionMode: Indexed\n",
            "1"
        ),
        workload(
            "apps/v1",
            "StatefulSet",
            "kv",
            &format!("  replicas: 2\n{}", selector("kv")),
            "100m"
        ),
    )
}

/// Asserts the pods of [`five_workloads`]: the Deployment's three of one ReplicaSet,
/// db-0 alone and pending, both of cache pending, train's two lowest indexes and
/// both of kv placed.
fn assert_the_pods_of_five_workloads(placed: &[(String, String)]) {
    let names: Vec<&str> = placed.iter().map(|(n, _)| n.as_str()).collect();
    // The Deployment's three pods: NAME-HASH-XXXXX, one ReplicaSet's.
    let web: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.starts_with("web-"))
        .collect();
    assert_eq!(web.len(), 3, "{placed:?}");
    let hash = web[0].split('-').nth(1).unwrap();
    for w in &web {
        let parts: Vec<&str> = w.split('-').collect();
        assert_eq!(parts.len(), 3, "{w}");
        assert_eq!(parts[1], hash, "{web:?}");
        assert_eq!(parts[2].len(), 5, "{w}");
    }
    // db-0 is pending, so db-1 and db-2 were never created; the Parallel set's two
    // pods are both there; the Indexed Job runs its two lowest indexes; kv's ordered
    // pods both ran (kv-1 once kv-0 was bound).
    assert!(
        names.contains(&"db-0") && !names.contains(&"db-1"),
        "{placed:?}"
    );
    assert!(
        names.contains(&"cache-0") && names.contains(&"cache-1"),
        "{placed:?}"
    );
    let train: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.starts_with("train-"))
        .collect();
    assert_eq!(train.len(), 2, "{placed:?}");
    assert!(
        train[0].starts_with("train-0-") && train[1].starts_with("train-1-"),
        "{train:?}"
    );
    for (n, node) in placed {
        let pending = n.starts_with("db-") || n.starts_with("cache-");
        assert_eq!(node == "<pending>", pending, "{placed:?}");
    }
    assert!(
        names.contains(&"kv-0") && names.contains(&"kv-1"),
        "{placed:?}"
    );
}

/// Two nodes, the Deployment `web` of three pods scaled to one by a later document,
/// a pod `lone` labelled `app: rs`, and a ReplicaSet `rs` of two selecting it.
fn scaled_down_and_a_replica_set() -> String {
    let lone = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: lone, labels: {app: rs}}\nspec: {containers: [{name: c, image: app}]}\n";
    format!(
        "{TWO_NODES}{}{}{lone}{}",
        workload(
            "apps/v1",
            "Deployment",
            "web",
            &format!("  replicas: 3\n{}", selector("web")),
            "500m"
        ),
        workload(
            "apps/v1",
            "Deployment",
            "web",
            &format!("  replicas: 1\n{}", selector("web")),
            "500m"
        ),
        workload(
            "apps/v1",
            "ReplicaSet",
            "rs",
            &format!("  replicas: 2\n{}", selector("rs")),
            "100m"
        ),
    )
}

#[test]
fn workload_controllers_create_the_pods_their_controllers_would() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("workloads.yaml");
    std::fs::write(&file, five_workloads()).unwrap();
    let placed = simulate_placements(&file);
    assert_the_pods_of_five_workloads(&placed);
    // The same files, the same names: a run is repeatable.
    let again = simulate_placements(&file);
    assert_eq!(again, placed);

    // A later document scales the Deployment down to one pod; a ReplicaSet counts the
    // pods its selector already matches.
    let scaled = scaled_down_and_a_replica_set();
    std::fs::write(&file, &scaled).unwrap();
    let placed = simulate_placements(&file);
    let names: Vec<&str> = placed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| n.starts_with("web-")).count(),
        1,
        "{placed:?}"
    );
    assert_eq!(
        names.iter().filter(|n| n.starts_with("rs-")).count(),
        1,
        "{placed:?}"
    );
    assert!(names.contains(&"lone"), "{placed:?}");

    // Deleting the Deployment deletes its pod, as the garbage collector would.
    let deleted = format!(
        "{scaled}---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, annotations: {{berth.dev/simulate: delete}}}}\n"
    );
    std::fs::write(&file, &deleted).unwrap();
    let placed = simulate_placements(&file);
    assert!(
        placed.iter().all(|(n, _)| !n.starts_with("web-")),
        "{placed:?}"
    );
}

#[test]
fn a_workload_whose_selector_misses_its_template_is_refused_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        format!(
            "{TWO_NODES}{}",
            workload(
                "apps/v1",
                "Deployment",
                "web",
                "  selector: {matchLabels: {app: other}}\n",
                "1"
            )
        ),
    )
    .unwrap();
    let out = berth(&["simulate", file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains("spec.template.metadata.labels: `selector` does not match template `labels`"),
        "{}",
        stderr(&out)
    );
}
