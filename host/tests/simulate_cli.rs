//! `berth simulate` end to end, as a user runs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn berth(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(args)
        .env("BERTH_CACHE_DIR", cache)
        .current_dir(workspace())
        .output()
        .expect("run berth")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn simulate_places_the_example_and_explains_the_pod_that_fits_nowhere() {
    let cache = tempfile::tempdir().unwrap();
    let out = berth(&["simulate", "examples/cluster.yaml"], cache.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["default/web-1", "small-1"]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["default/web-2", "small-1"]
    );
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        ["jobs/batch-1", "large-1"]
    );
    assert_eq!(
        lines[3].split_whitespace().collect::<Vec<_>>(),
        ["ml/trainer", "gpu-1"]
    );
    assert!(lines[4].starts_with("default/huge"), "{text}");
    assert!(
        lines[4].ends_with(
            "<pending>  0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu."
        ),
        "{text}"
    );
    assert!(
        lines[5].starts_with("4 scheduled, 1 unschedulable, 5 pods in "),
        "{text}"
    );
}

#[test]
fn simulate_json_has_exactly_the_documented_shape() {
    let cache = tempfile::tempdir().unwrap();
    let out = berth(
        &["simulate", "--output", "json", "examples/cluster.yaml"],
        cache.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let top: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(top, ["pods", "summary"]);
    let pods = v["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 5);
    for p in pods {
        let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["message", "name", "namespace", "node"]);
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
        ["scheduled", "seconds", "unschedulable"]
    );
    assert_eq!(summary["scheduled"], 4);
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
    let out = berth(&["simulate", bad.to_str().unwrap()], dir.path());
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
    let out = berth(&["simulate", bad.to_str().unwrap()], dir.path());
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&format!("{}:", bad.display())), "{err}");
    assert!(stdout(&out).is_empty());
}

#[test]
fn a_missing_file_and_a_bad_config_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = berth(&["simulate", "does-not-exist.yaml"], dir.path());
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("does-not-exist.yaml"),
        "{}",
        stderr(&out)
    );

    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "percentageOfNodesToScore: 150\n").unwrap();
    let out = berth(
        &[
            "simulate",
            "--config",
            config.to_str().unwrap(),
            "examples/cluster.yaml",
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("config.yaml: percentageOfNodesToScore: 150 is not in 0..=100"),
        "{}",
        stderr(&out)
    );
}
