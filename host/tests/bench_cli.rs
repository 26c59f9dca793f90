//! `berth bench` (and the native twins it compares against) end to end, as a user
//! runs it. No timing is asserted: only that the runs happen and report sane fields.

use crate::common;

use common::{berth, stderr, stdout};
use std::process::Output;

/// `--output json`'s lines, one object each.
fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn quick_json_reports_every_measured_pod_in_both_modes() {
    let out = berth(&[
        "bench",
        "--quick",
        "--output",
        "json",
        "--workload",
        "SchedulingBasic",
        "--workload",
        "SchedulingPodAntiAffinity",
        "--compare",
        "native",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("bench: "), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 4, "{}", stdout(&out));
    let expected = [
        ("SchedulingBasic", "wasm"),
        ("SchedulingBasic", "native"),
        ("SchedulingPodAntiAffinity", "wasm"),
        ("SchedulingPodAntiAffinity", "native"),
    ];
    for (r, (workload, mode)) in lines.iter().zip(expected) {
        assert_eq!(r["workload"], workload);
        assert_eq!(r["mode"], mode);
        assert_eq!(r["nodes"], 100);
        let measured = r["measured_pods"].as_u64().unwrap();
        assert!(measured > 0);
        // Every measured pod fits (the anti-affinity workload has a node for each).
        assert_eq!(r["scheduled"].as_u64(), Some(measured), "{r}");
        for field in ["pods_per_second", "p50_ms", "p99_ms", "peak_rss_mib"] {
            let x = r[field].as_f64().unwrap_or(-1.0);
            assert!(x > 0.0 && x.is_finite(), "{field} in {r}");
        }
        assert!(r["p50_ms"].as_f64() <= r["p99_ms"].as_f64(), "{r}");
        assert!(r["cores"].as_u64().unwrap() >= 1);
        match mode {
            "wasm" => assert!(r["wasm_over_native"].as_f64().unwrap() > 0.0, "{r}"),
            _ => assert!(r.get("wasm_over_native").is_none(), "{r}"),
        }
    }
}

#[test]
fn text_output_is_a_table_and_unknown_workloads_are_refused() {
    let out = berth(&[
        "bench",
        "--quick",
        "--workload",
        "unschedulable",
        "--native",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("workload"), "{text}");
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[0], "Unschedulable");
    assert_eq!(row[4], "native");
    assert!(lines[2].ends_with("cores"), "{text}");

    let out = berth(&["bench", "--quick", "--workload", "Nope"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no workload \"Nope\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pod_group_workloads_report_their_groups_and_sizes_are_named() {
    let out = berth(&[
        "bench",
        "--quick",
        "--output",
        "json",
        "--workload",
        "GangScheduling",
        "--workload",
        "basicscheduling/100Nodes_10Groups",
        "--native",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "{}", stdout(&out));
    for (r, workload) in lines.iter().zip(["GangScheduling", "BasicScheduling"]) {
        assert_eq!(r["workload"], workload);
        // 100 nodes and 10 groups of 3, divided by 5: 20 nodes, 2 groups, no initial pods.
        assert_eq!(r["nodes"], 20, "{r}");
        assert_eq!(r["init_pods"], 0, "{r}");
        assert_eq!(r["pod_groups"], 2, "{r}");
        assert_eq!(r["pods_per_group"], 3, "{r}");
        assert_eq!(r["measured_pods"], 6, "{r}");
        assert_eq!(r["scheduled"], 6, "{r}");
    }
    assert!(
        stderr(&out).contains("GangScheduling/100Nodes_10Gangs 20 nodes native"),
        "{}",
        stderr(&out)
    );

    let out = berth(&["bench", "--quick", "--workload", "GangScheduling/5000Nodes"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("workload GangScheduling has no size \"5000Nodes\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn dra_workloads_report_their_sizes_and_devices() {
    let out = berth(&[
        "bench",
        "--quick",
        "--output",
        "json",
        "--workload",
        "SchedulingWithResourceClaimTemplate",
        "--workload",
        "SteadyStateClusterResourceClaimTemplate",
        "--native",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "{}", stdout(&out));
    // Upstream's `fast`, as it is: a node with ten devices and one without.
    for r in &lines {
        assert_eq!(r["size"], "fast", "{r}");
        assert_eq!(r["nodes"], 2, "{r}");
        assert_eq!(r["devices_per_node"], 10, "{r}");
        assert_eq!(r["held_claims"], 0, "{r}");
        assert_eq!(r["scheduled"], r["measured_pods"], "{r}");
    }
    assert_eq!(lines[0]["workload"], "SchedulingWithResourceClaimTemplate");
    assert_eq!(lines[0]["measured_pods"], 10);
    // The steady state makes pods for its two seconds, ten pending at a time: more
    // than the ten devices, each deleted once bound.
    assert_eq!(
        lines[1]["workload"],
        "SteadyStateClusterResourceClaimTemplate"
    );
    assert!(
        lines[1]["measured_pods"].as_u64().unwrap() > 10,
        "{}",
        lines[1]
    );
    assert!(
        stderr(&out).contains("SteadyStateClusterResourceClaimTemplate/fast 2 nodes native: 10 pods pending at a time for 2 s"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn native_twins_place_the_example_as_the_components_do() {
    let wasm = berth(&["simulate", "--output", "json", "examples/cluster.yaml"]);
    let native = berth(&[
        "simulate",
        "--native",
        "--output",
        "json",
        "examples/cluster.yaml",
    ]);
    assert!(wasm.status.success(), "{}", stderr(&wasm));
    assert!(native.status.success(), "{}", stderr(&native));
    let pods = |o: &Output| {
        let v: serde_json::Value = serde_json::from_str(&stdout(o)).unwrap();
        v["pods"].clone()
    };
    assert_eq!(pods(&wasm), pods(&native));
    assert!(pods(&native).as_array().unwrap().len() >= 2);
}

/// A churn keeps memory for what is live only: at every sample the scheduler holds
/// no more pods than the nodes carry (three batches of 1000) and nothing for pods
/// already deleted; at the end it holds nothing; every pod was bound exactly once.
/// The memory figure is checked with room to spare: a leak of half a KiB per pod
/// would show as 12 MiB over the last 25,000 pods.
#[test]
fn a_churn_keeps_memory_for_live_pods_only() {
    let out = berth(&[
        "bench",
        "--churn",
        "30000",
        "--sample-every",
        "5000",
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bench: churn: 5000 lifecycles"),
        "{}",
        stderr(&out)
    );
    let r: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("one JSON object");
    assert_eq!(r["lifecycles"], 30000, "{r}");
    assert_eq!(r["nodes"], 100, "{r}");
    assert_eq!(r["binds"], 30000, "{r}");
    assert_eq!(r["double_binds"], 0, "{r}");
    assert_eq!(r["never_bound"], 0, "{r}");
    let samples = r["samples"].as_array().unwrap();
    let at: Vec<u64> = samples
        .iter()
        .map(|x| x["lifecycles"].as_u64().unwrap())
        .collect();
    assert_eq!(at, [5000, 10000, 15000, 20000, 25000, 30000], "{r}");
    let kept = |b: &serde_json::Value, field: &str| b[field].as_u64().unwrap_or(u64::MAX);
    for x in samples {
        let b = &x["bookkeeping"];
        assert!(kept(b, "cached_pods") <= 3000, "{x}");
        for field in [
            "queued",
            "in_flight",
            "queue_events",
            "outcomes",
            "binding",
            "unconfirmed",
            "doubtful",
            "nominated",
        ] {
            assert_eq!(kept(b, field), 0, "{field} in {x}");
        }
        assert!(x["rss_mib"].as_f64().unwrap() > 0.0, "{x}");
    }
    let end = r["end"].as_object().unwrap();
    assert!(end.values().all(|v| v == 0), "left at the end: {r}");
    assert_eq!(r["baseline_lifecycles"], 5000, "{r}");
    let growth = r["rss_growth_mib"].as_f64().unwrap();
    assert!(growth < 12.0, "RSS grew {growth} MiB over 25,000 pods: {r}");
}

#[test]
fn batching_workloads_place_pods_from_a_batch_unless_the_gate_is_off() {
    let run = |gate: &str| {
        let out = berth(&[
            "bench",
            "--nodes",
            "10",
            "--output",
            "json",
            "--workload",
            "HostPortConflict",
            "--workload",
            "ResourceSaturation",
            "--feature-gates",
            gate,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        json_lines(&out)
    };
    let on = run("OpportunisticBatching=true");
    assert_eq!(on.len(), 2, "{on:?}");
    for r in &on {
        // Upstream's integration size: ten nodes, ten pods, one pod per node.
        assert_eq!(r["nodes"], 10, "{r}");
        assert_eq!(r["scheduled"], r["measured_pods"], "{r}");
        // The first pod's cycle ranks the nodes; the nine after it take the next
        // one each.
        assert_eq!(r["batched"], 9, "{r}");
    }
    let off = run("OpportunisticBatching=false");
    for r in &off {
        assert_eq!(r["scheduled"], r["measured_pods"], "{r}");
        assert_eq!(r["batched"], 0, "{r}");
    }

    let out = berth(&["bench", "--quick", "--feature-gates", "Batching=true"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unrecognized feature gate: Batching "),
        "{}",
        stderr(&out)
    );
}

#[test]
fn preemption_async_places_the_measured_pods_while_preemptors_arrive() {
    let out = berth(&[
        "bench",
        "--workload",
        "PreemptionAsync/5Nodes",
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{}", stdout(&out));
    let r = &lines[0];
    // Upstream's integration size: 5 nodes, 4 low-priority pods on each, 5 measured.
    assert_eq!(r["nodes"], 5, "{r}");
    assert_eq!(r["init_pods"], 20, "{r}");
    assert_eq!(r["measured_pods"], 5, "{r}");
    // The measured pods are small and always fit, preemptors or not.
    assert_eq!(r["scheduled"], 5, "{r}");
    // The churn made its first preemptor as the measurement began, and the pod,
    // needing three CPUs on nodes with 0.4 free, went through preemption.
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains("churn pods made while measuring"))
        .unwrap_or_else(|| panic!("no churn line in {err}"));
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    // "PreemptionAsync 5 nodes wasm: C churn pods made while measuring, A preemption
    // attempts"
    let [.., churned, attempts] = numbers[..] else {
        panic!("{line}")
    };
    assert!(churned >= 1, "{line}");
    assert!(attempts >= 1, "{line}");
}
