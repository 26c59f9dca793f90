//! What a plugin author does, end to end: the example plugins of examples/plugins
//! built out of the workspace and run in `berth simulate`; `berth plugin new`,
//! `check` and `test`; the SDK's table of cases played natively and through the
//! component; a plugin in Python when componentize-py is at hand, and plugins in
//! Go (the example, and one from `berth plugin new --lang go`) when Go is.
//!
//! The example crates are built by a nested cargo, as an author builds them, with
//! a target directory of their own under this build's (the outer build holds the
//! lock on the main one), without the flags the outer build passes down, and
//! offline (their dependencies are the SDK's, already fetched for the workspace).

use berth::testing::ComponentHarness;
use berth::wasm::{Runtime, RuntimeOptions};
use berth_sdk::testing::{Case, GI, node, pod};
use berth_sdk::{Code, TaintEffect};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BERTH: &str = env!("CARGO_BIN_EXE_berth");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ sits in the repository")
        .to_path_buf()
}

/// Where the nested cargo builds: shared by every crate these tests build, so
/// their common dependencies compile once.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-authors")
}

/// The wasm target directory `berth_sdk::check_component!` uses for a crate built
/// with `target_dir()`: building there first lets the crate's own tests reuse it.
fn wasm_target_dir() -> PathBuf {
    target_dir().join("tmp").join("berth-component")
}

fn cargo(dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(dir);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MAKEFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    // The test run needs no network: the examples' dependencies are the SDK's,
    // which the workspace build has already fetched.
    cmd.env("CARGO_NET_OFFLINE", "true");
    cmd
}

fn ok(what: &str, out: Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `cargo build --target wasm32-wasip2 --release` of the crate in `dir`.
fn build_component(dir: &Path, crate_name: &str) -> PathBuf {
    let out = cargo(dir)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(wasm_target_dir())
        .output()
        .expect("run cargo");
    ok(&format!("building {crate_name} for wasm32-wasip2"), out);
    let wasm = wasm_target_dir()
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", crate_name.replace('-', "_")));
    assert!(wasm.is_file(), "{} is missing", wasm.display());
    wasm
}

/// The example's config with its module path pointing at the component this test
/// built (the example names `../target/...`, what an author's plain build makes).
fn config_for(example: &str, wasm: &Path, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join(example).join("simulate/config.yaml")).unwrap();
    let file = wasm.file_name().unwrap().to_str().unwrap();
    let from = format!("path: ../target/wasm32-wasip2/release/{file}");
    assert!(text.contains(&from), "{example}'s config names {from}");
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        text.replace(&from, &format!("path: {}", wasm.display())),
    )
    .unwrap();
    config
}

fn simulate(config: &Path, files: &[PathBuf]) -> String {
    let out = Command::new(BERTH)
        .arg("simulate")
        .arg("--config")
        .arg(config)
        .args(files)
        .output()
        .unwrap();
    ok("berth simulate", out)
}

/// The pod lines of a simulate report and its summary without the timing.
fn placements(report: &str) -> Vec<String> {
    report
        .lines()
        .map(|l| match l.split_once(" pods in ") {
            Some((summary, _)) => summary.to_owned(),
            None => l.trim_end().to_owned(),
        })
        .collect()
}

/// Runs the example crate's own tests: its table natively, and through the
/// component with `berth plugin test` (the `berth` under test).
fn crate_tests_pass(dir: &Path) {
    let out = cargo(dir)
        .args(["test", "--release", "--target-dir"])
        .arg(target_dir())
        .env("BERTH", BERTH)
        .output()
        .expect("run cargo test");
    let stdout = ok(&format!("cargo test in {}", dir.display()), out);
    assert!(
        stdout.contains("test native_and_component_agree ... ok"),
        "{stdout}"
    );
}

#[test]
fn node_cost_builds_alone_and_places_pods_cheapest_first() {
    let example = "examples/plugins/node-cost";
    let dir = repo().join(example);
    let wasm = build_component(&dir, "node-cost");
    let tmp = tempfile::tempdir().unwrap();
    let config = config_for(example, &wasm, tmp.path());
    let report = simulate(&config, &[dir.join("simulate/cluster.yaml")]);
    // As README.md shows it.
    assert_eq!(
        placements(&report),
        [
            "default/web-1     spot-small  1 attempt",
            "default/web-2     spot-small  1 attempt",
            "default/web-3     spot-large  1 attempt",
            "default/postgres  od-large    1 attempt",
            "4 scheduled, 0 unschedulable, 4",
        ],
        "{report}"
    );
    crate_tests_pass(&dir);
}

#[test]
fn maintenance_window_builds_alone_keeps_pods_off_and_lets_them_back() {
    let example = "examples/plugins/maintenance-window";
    let dir = repo().join(example);
    let wasm = build_component(&dir, "maintenance-window");
    let tmp = tempfile::tempdir().unwrap();
    let config = config_for(example, &wasm, tmp.path());
    let cluster = dir.join("simulate/cluster.yaml");
    let report = simulate(&config, std::slice::from_ref(&cluster));
    assert_eq!(
        placements(&report),
        [
            "default/web-1              node-a     1 attempt",
            "default/web-2              node-c     1 attempt",
            "kube-system/upgrade-agent  node-b     1 attempt",
            "default/cache-b            <pending>  1 attempt   0/3 nodes are available: 1 node(s) in a maintenance window, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
            "3 scheduled, 1 unschedulable, 4",
        ],
        "{report}"
    );
    let report = simulate(&config, &[cluster, dir.join("simulate/window-over.yaml")]);
    assert_eq!(
        placements(&report),
        [
            "default/web-1              node-a  1 attempt",
            "default/web-2              node-c  1 attempt",
            "kube-system/upgrade-agent  node-b  1 attempt",
            "default/cache-b            node-b  2 attempts",
            "4 scheduled, 0 unschedulable, 4",
        ],
        "{report}"
    );
    crate_tests_pass(&dir);
}

#[test]
fn plugin_new_writes_crates_that_test_build_check_and_run() {
    let tmp = tempfile::Builder::new()
        .prefix("plugin-new-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    for (name, point, crate_name, plugin) in [
        ("GPUGuard", "filter", "gpu-guard", "GPUGuard"),
        ("prefer-rank", "score", "prefer-rank", "PreferRank"),
    ] {
        let dir = tmp.path().join(crate_name);
        let out = Command::new(BERTH)
            .args(["plugin", "new", name, "--point", point, "--dir"])
            .arg(&dir)
            .output()
            .unwrap();
        let said = ok("berth plugin new", out);
        assert!(
            said.starts_with(&format!("created plugin {plugin} (crate {crate_name}) in ")),
            "{said}"
        );
        for f in [
            "Cargo.toml",
            "src/lib.rs",
            "src/cases.rs",
            "tests/component.rs",
        ] {
            assert!(dir.join(f).is_file(), "{f} missing");
        }
        // Its own tests: the table natively, then through the component.
        crate_tests_pass(&dir);
        let wasm = build_component(&dir, crate_name);
        let out = Command::new(BERTH)
            .args(["plugin", "check", "--output", "json"])
            .arg(&wasm)
            .output()
            .unwrap();
        let report: serde_json::Value =
            serde_json::from_str(&ok("berth plugin check", out)).unwrap();
        assert_eq!(report["name"], plugin);
        assert_eq!(report["version"], "0.1.0");
        assert_eq!(report["refused"], serde_json::Value::Null);
        let points: Vec<&str> = report["extension_points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        // The templates sign pods, so that their profiles may batch.
        let want: &[&str] = if point == "filter" {
            &["filter", "signPod"]
        } else {
            &["score", "normalizeScore", "signPod"]
        };
        assert_eq!(points, want);
    }
    // A second `new` into a non-empty directory is refused, naming it.
    let dir = tmp.path().join("gpu-guard");
    let out = Command::new(BERTH)
        .args(["plugin", "new", "GPUGuard", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}: the directory exists and is not empty",
            dir.display()
        )),
        "{err}"
    );
}

fn check(path: &Path) -> (bool, String) {
    let out = Command::new(BERTH)
        .args(["plugin", "check"])
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A copy of a component with the version of every `berth:scheduler/` name
/// replaced: what an SDK for another WIT version would have built. Names keep their
/// length, so the binary stays well-formed.
fn with_berth_names_renamed(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let prefix = b"berth:scheduler/";
    let mut i = 0;
    let mut renamed = 0;
    while let Some(at) = find(&out[i..], prefix) {
        let start = i + at;
        let end = (start + 64).min(out.len());
        if let Some(v) = find(&out[start..end], from.as_bytes()) {
            out[start + v..start + v + from.len()].copy_from_slice(to.as_bytes());
            renamed += 1;
        }
        i = start + prefix.len();
    }
    assert!(renamed > 0, "no berth:scheduler names in the component");
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn plugin_check_answers_good_and_refused_modules_exactly() {
    let good = Path::new(berth_artifacts::plugin_paths::NODE_UNSCHEDULABLE);
    let (loads, text) = check(good);
    assert!(loads, "{text}");
    // The host's version, and (when it loads more: earlier patches of its track,
    // adapted tracks) what else it loads.
    let v = berth::wasm::abi::WIT_VERSION;
    let policy = berth::wasm::abi::Policy::current();
    let loads_range = policy.supported_range();
    let speaks = if loads_range == format!("@{v}") {
        format!("this host speaks @{v}")
    } else {
        format!("this host speaks @{v} and loads {loads_range}")
    };
    let track = policy.host().track();
    for want in [
        "kind              component\n",
        "plugin            NodeUnschedulable\n",
        "version           0.1.0\n",
        &format!("WIT               berth:scheduler@{v} (current; {speaks})\n"),
        // SignPod too: NodeUnschedulable signs pods by their tolerations.
        "extension points  filter, signPod\n",
        &format!("imports           berth:scheduler/types@{v}\n"),
        "filter on berth-check-node: Success\n",
        "ok: the scheduler would load this module\n",
    ] {
        assert!(text.contains(want), "want {want:?} in\n{text}");
    }
    assert!(text.contains("\ncompile           "), "{text}");
    assert!(text.contains("\nsize              "), "{text}");
    // NodeUnschedulable takes part for every pod; NodePorts only for pods with host
    // ports, in the same column as the other fields.
    assert!(!text.contains("takes part for"), "{text}");
    let (loads, ports) = check(Path::new(berth_artifacts::plugin_paths::NODE_PORTS));
    assert!(loads, "{ports}");
    assert!(
        ports.contains("\ntakes part for    pods with host-ports\n"),
        "{ports}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(good).unwrap();

    // Built against another WIT version.
    let old = tmp.path().join("old.wasm");
    std::fs::write(
        &old,
        with_berth_names_renamed(&bytes, &format!("@{v}"), "@0.1.0"),
    )
    .unwrap();
    let (loads, text) = check(&old);
    assert!(!loads, "{text}");
    assert!(
        text.contains(&format!(
            "WIT               berth:scheduler@0.1.0 (refused: an earlier track than {track}, which this host does not adapt; {speaks})\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "refused: {}: built against berth:scheduler@0.1.0, this host speaks @{v}{}: rebuild it with a berth-sdk for WIT {v} (",
            old.display(),
            if loads_range == format!("@{v}") {
                String::new()
            } else {
                format!(" (it loads {loads_range})")
            }
        )),
        "{text}"
    );

    // A newer patch of the host's track: wasmtime would link it by its
    // semver-compatible names, and the host refuses it before linking.
    let newer = tmp.path().join("newer.wasm");
    let later = format!("{track}.9");
    assert_eq!(later.len(), v.len(), "renaming keeps the module's layout");
    std::fs::write(
        &newer,
        with_berth_names_renamed(&bytes, &format!("@{v}"), &format!("@{later}")),
    )
    .unwrap();
    let (loads, text) = check(&newer);
    assert!(!loads, "{text}");
    assert!(
        text.contains(&format!(
            "WIT               berth:scheduler@{later} (refused: a newer patch of the {track} track, which may use what this host lacks; {speaks})\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "refused: {}: built against berth:scheduler@{later}, a newer patch than this host's @{v} (it loads {loads_range}): run it on a Berth that speaks @{later} or later, or rebuild it with a berth-sdk for WIT {v} (",
            newer.display()
        )),
        "{text}"
    );

    // One export missing (post-bind is exported under another name).
    let partial = tmp.path().join("partial.wasm");
    std::fs::write(
        &partial,
        with_berth_names_renamed(&bytes, "post-bind@", "post-bond@"),
    )
    .unwrap();
    let (loads, text) = check(&partial);
    assert!(!loads, "{text}");
    assert!(
        text.contains(&format!(
            "refused: {}: missing export berth:scheduler/post-bind@{v} (the plugin world needs all 17; the SDK exports them all) (",
            partial.display()
        )),
        "{text}"
    );

    // The core module inside the component, on its own: not a component.
    let core = tmp.path().join("core.wasm");
    std::fs::write(&core, first_core_module(&bytes)).unwrap();
    let (loads, text) = check(&core);
    assert!(!loads, "{text}");
    assert!(text.contains("kind              core module\n"), "{text}");
    assert!(
        text.contains(&format!(
            "refused: {}: a core WebAssembly module, not a component: build the plugin for wasm32-wasip2",
            core.display()
        )),
        "{text}"
    );

    // Not WebAssembly, and no file at all.
    let junk = tmp.path().join("junk.wasm");
    std::fs::write(&junk, "#!/bin/sh\necho hi\n").unwrap();
    let (loads, text) = check(&junk);
    assert!(!loads);
    assert!(text.contains("not a WebAssembly file"), "{text}");
    let (loads, text) = check(&tmp.path().join("absent.wasm"));
    assert!(!loads);
    assert!(
        text.contains("absent.wasm: cannot read plugin module"),
        "{text}"
    );
}

/// The bytes of the first core module nested in a component.
fn first_core_module(component: &[u8]) -> Vec<u8> {
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        if let wasmparser::Payload::ModuleSection {
            unchecked_range, ..
        } = payload.unwrap()
        {
            return component[unchecked_range].to_vec();
        }
    }
    panic!("no core module in the component");
}

/// The SDK's harness, native and through the component, on real plugins: the
/// built-in plugins link into the host natively and load as components, so one
/// table must give the same outcome both ways, to the last score.
#[test]
fn one_table_native_and_component_agree_on_built_in_plugins() {
    let runtime = Runtime::new(RuntimeOptions::default()).unwrap();
    let nodes = || {
        [
            node("small")
                .cpu(2000)
                .memory(4 * GI)
                .pod(pod("busy").cpu(1500).memory(GI)),
            node("large")
                .cpu(8000)
                .memory(32 * GI)
                .image("redis:7", 150 << 20),
            node("tainted")
                .cpu(8000)
                .memory(32 * GI)
                .taint("dedicated", "gpu", TaintEffect::NoSchedule)
                .taint("spot", "", TaintEffect::PreferNoSchedule),
            node("cordoned").cpu(8000).memory(32 * GI).unschedulable(),
        ]
    };
    let table = |nodes: [berth_sdk::testing::NodeBuilder; 4]| {
        let mut c = Case::new("mixed nodes").pod(pod("web").cpu(1000).memory(GI).image("redis:7"));
        for n in nodes {
            c = c.node(n);
        }
        c
    };
    let check =
        |path: &str, cases: Vec<Case>, native: &dyn Fn(&Case) -> berth_sdk::testing::Outcome| {
            let harness = ComponentHarness::load_with(&runtime, Path::new(path)).unwrap();
            harness.check_all(&cases).unwrap();
            for case in &cases {
                assert_eq!(
                    harness.run(case).unwrap(),
                    native(case),
                    "{}: {}",
                    path,
                    case.name
                );
            }
        };

    let fit = vec![
        table(nodes())
            .pre_filter_code(Code::Success)
            .feasible(["large", "tainted", "cordoned"])
            .rejects("small", Code::Unschedulable, "Insufficient cpu"),
    ];
    check(
        berth_artifacts::plugin_paths::NODE_RESOURCES_FIT,
        fit,
        &|c| berth_sdk::testing::run::<node_resources_fit::NodeResourcesFit>(c).unwrap(),
    );

    // A case the harness cannot set up is named once, with the node it stopped at.
    let twice = pod("twice").cpu(100);
    let bad = Case::new("one pod twice").pod(pod("web").cpu(100)).node(
        node("n1")
            .cpu(1000)
            .memory(GI)
            .pod(twice.clone())
            .pod(twice),
    );
    let harness = ComponentHarness::load_with(
        &runtime,
        Path::new(berth_artifacts::plugin_paths::NODE_RESOURCES_FIT),
    )
    .unwrap();
    let err = harness.check_all(&[bad]).unwrap_err().to_string();
    assert!(
        err.contains("case \"one pod twice\": node n1: pod default/twice is already in the cache"),
        "{err}"
    );
    assert_eq!(err.matches("one pod twice").count(), 1, "{err}");

    let taints = vec![
        table(nodes())
            .feasible(["small", "large", "cordoned"])
            .rejects("tainted", Code::UnschedulableAndUnresolvable, "")
            .scores([("small", 100), ("large", 100), ("cordoned", 100)]),
        Case::new("PreferNoSchedule taints lower the score")
            .pod(pod("p").toleration("dedicated", "gpu", Some(TaintEffect::NoSchedule)))
            .node(node("plain"))
            .node(node("spotty").taint("spot", "", TaintEffect::PreferNoSchedule))
            .node(node("gpu").taint("dedicated", "gpu", TaintEffect::NoSchedule))
            .feasible(["plain", "spotty", "gpu"])
            .scores([("plain", 100), ("spotty", 0), ("gpu", 100)]),
    ];
    check(
        berth_artifacts::plugin_paths::TAINT_TOLERATION,
        taints,
        &|c| berth_sdk::testing::run::<taint_toleration::TaintToleration>(c).unwrap(),
    );

    let unschedulable = vec![
        table(nodes())
            .feasible(["small", "large", "tainted"])
            .rejects(
                "cordoned",
                Code::UnschedulableAndUnresolvable,
                "node(s) were unschedulable",
            ),
    ];
    check(
        berth_artifacts::plugin_paths::NODE_UNSCHEDULABLE,
        unschedulable,
        &|c| berth_sdk::testing::run::<node_unschedulable::NodeUnschedulable>(c).unwrap(),
    );

    // ImageLocality reads each image's node count, which the harness counts as the
    // host's cache does.
    let images = vec![table(nodes()).feasible(["small", "large", "tainted", "cordoned"])];
    check(
        berth_artifacts::plugin_paths::IMAGE_LOCALITY,
        images.clone(),
        &|c| berth_sdk::testing::run::<image_locality::ImageLocality>(c).unwrap(),
    );
    let got = berth_sdk::testing::run::<image_locality::ImageLocality>(&images[0]).unwrap();
    assert!(got.scores["large"] > got.scores["small"], "{got:?}");
}

/// A table whose expectations are wrong fails through the component with every
/// difference named, and `berth plugin test` exits 1.
#[test]
fn plugin_test_reports_failing_cases() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = vec![
        Case::new("right")
            .node(node("a"))
            .node(node("b").unschedulable())
            .feasible(["a"]),
        Case::new("wrong")
            .node(node("a"))
            .node(node("b").unschedulable())
            .feasible(["a", "b"])
            .rejects("a", Code::Unschedulable, ""),
    ];
    let file = tmp.path().join("cases.json");
    std::fs::write(&file, serde_json::to_string(&cases).unwrap()).unwrap();
    let out = Command::new(BERTH)
        .args(["plugin", "test", "--cases"])
        .arg(&file)
        .arg(berth_artifacts::plugin_paths::NODE_UNSCHEDULABLE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("ok    right\nFAIL  wrong\n"), "{text}");
    assert!(
        text.contains("feasible: want [\"a\", \"b\"], got [\"a\"]"),
        "{text}"
    );
    assert!(
        text.contains("Filter on a: want Unschedulable, got Success []"),
        "{text}"
    );
    assert!(text.ends_with("1 passed, 1 failed\n"), "{text}");

    std::fs::write(&file, "[{\"name\": 3}]").unwrap();
    let out = Command::new(BERTH)
        .args(["plugin", "test", "--cases"])
        .arg(&file)
        .arg(berth_artifacts::plugin_paths::NODE_UNSCHEDULABLE)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}: line 1 column ", file.display()))
            && err.contains("not an array of cases"),
        "{err}"
    );
}

/// componentize-py: `$COMPONENTIZE_PY`, else the venv that
/// examples/plugins/python-fewest-pods/install-toolchain.sh makes, else `PATH`.
fn componentize_py() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("COMPONENTIZE_PY") {
        return Some(p.into());
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let venv = home.map(|h| h.join(".cache/berth-py/bin/componentize-py"));
    if let Some(v) = venv.filter(|v| v.is_file()) {
        return Some(v);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("componentize-py"))
        .find(|p| p.is_file())
}

/// The Python plugin: built with componentize-py against the repository's WIT,
/// checked, and run in `berth simulate` beside the built-in plugins.
#[test]
fn a_plugin_in_python_builds_loads_and_schedules() {
    let Some(tool) = componentize_py() else {
        println!(
            "skipped: componentize-py not found ($COMPONENTIZE_PY, ~/.cache/berth-py, PATH); run examples/plugins/python-fewest-pods/install-toolchain.sh to install it from PyPI"
        );
        return;
    };
    let dir = repo().join("examples/plugins/python-fewest-pods");
    let tmp = tempfile::tempdir().unwrap();
    let wasm = tmp.path().join("fewest_pods.wasm");
    let out = Command::new(dir.join("build.sh"))
        .arg(&wasm)
        .env("COMPONENTIZE_PY", &tool)
        // Keep the source tree free of __pycache__.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    ok("build.sh (componentize-py)", out);

    let out = Command::new(BERTH)
        .args(["plugin", "check", "--output", "json"])
        .arg(&wasm)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_str(&ok("berth plugin check", out)).unwrap();
    assert_eq!(report["name"], "FewestPods");
    assert_eq!(report["wit_version"], berth::wasm::abi::WIT_VERSION);
    assert_eq!(report["refused"], serde_json::Value::Null);
    assert_eq!(
        report["extension_points"],
        serde_json::json!(["score", "normalizeScore", "signPod"])
    );

    // The same harness as for Rust plugins.
    let harness = ComponentHarness::load(&wasm).unwrap();
    let busy = |name: &str, n: usize| {
        let mut b = node(name).cpu(8000).memory(32 * GI);
        for i in 0..n {
            b = b.pod(pod(&format!("{name}-{i}")));
        }
        b
    };
    harness
        .check_all(&[
            Case::new("fewest pods first")
                .node(busy("ten", 10))
                .node(busy("none", 0))
                .node(busy("fifty", 50))
                .scores([("none", 100), ("ten", 80), ("fifty", 0)]),
            Case::new("args: count pods only")
                .args(serde_json::json!({"weightByCapacity": false}))
                .node(busy("one", 1).max_pods(10))
                .node(busy("two", 2))
                .scores([("one", 100), ("two", 0)]),
        ])
        .unwrap();
    let e = harness
        .run(&Case::new("bad args").args(serde_json::json!({"weightByCapacity": "yes"})))
        .unwrap_err();
    assert!(
        format!("{e:#}").contains("weightByCapacity: want true or false, got \"yes\""),
        "{e:#}"
    );

    let cluster = dir.join("simulate/cluster.yaml");
    let config = dir.join("simulate/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "path: ../fewest_pods.wasm",
        &format!("path: {}", wasm.display()),
    );
    let config = tmp.path().join("config.yaml");
    std::fs::write(&config, text).unwrap();
    let report = simulate(&config, &[cluster]);
    assert_eq!(
        placements(&report),
        [
            "default/web-1  quiet  1 attempt",
            "default/web-2  quiet  1 attempt",
            "2 scheduled (1 from a batch), 0 unschedulable, 2",
        ],
        "{report}"
    );
}

/// The Go toolchain: `$GO`, else `go` on `PATH`.
fn go_tool() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GO") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("go"))
        .find(|p| p.is_file())
}

/// `berth plugin build DIR -o OUT --go GO`, one package at a time (the machine's
/// cores are the test run's).
fn go_build(go: &Path, dir: &Path, wasm: &Path) {
    let out = Command::new(BERTH)
        .args(["plugin", "build"])
        .arg(dir)
        .arg("-o")
        .arg(wasm)
        .arg("--go")
        .arg(go)
        .env("GOFLAGS", "-p=1")
        .output()
        .unwrap();
    ok("berth plugin build (Go)", out);
}

/// NodeResourcesAllocatable's normalized scores written again in Rust, the
/// comparison for the Go port: each node's allocatable CPU (millicores) and memory
/// (bytes) weighted and summed, negated in mode Least, then mapped linearly onto
/// [0, 100] (all equal: 0).
fn allocatable_scores(
    nodes: &[(&str, i64, i64)],
    weights: (i64, i64),
    most: bool,
) -> Vec<(String, i64)> {
    let raw: Vec<i64> = nodes
        .iter()
        .map(|&(_, cpu, mem)| {
            let s = cpu * weights.0 + mem * weights.1;
            if most { s } else { -s }
        })
        .collect();
    let lo = raw.iter().copied().min().unwrap_or(0);
    let hi = raw.iter().copied().max().unwrap_or(0);
    nodes
        .iter()
        .zip(raw)
        .map(|(&(name, ..), r)| {
            let s = if hi == lo {
                0
            } else {
                (r - lo) * 100 / (hi - lo)
            };
            (name.to_owned(), s)
        })
        .collect()
}

/// The Go example, a port of scheduler-plugins' NodeResourcesAllocatable: built
/// from source with `berth plugin build` and the machine's Go, checked, its scores
/// compared with the same logic in Rust, and run in `berth simulate`.
#[test]
fn a_plugin_in_go_builds_loads_and_schedules() {
    let Some(go) = go_tool() else {
        println!("skipped: go not found ($GO, PATH)");
        return;
    };
    let dir = repo().join("examples/plugins/go-node-resources-allocatable");
    let tmp = tempfile::tempdir().unwrap();
    let wasm = tmp.path().join("node_resources_allocatable.wasm");
    go_build(&go, &dir, &wasm);

    let out = Command::new(BERTH)
        .args(["plugin", "check", "--output", "json"])
        .arg(&wasm)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_str(&ok("berth plugin check", out)).unwrap();
    assert_eq!(report["name"], "NodeResourcesAllocatable");
    assert_eq!(report["wit_version"], berth::wasm::abi::WIT_VERSION);
    assert_eq!(report["refused"], serde_json::Value::Null);
    assert_eq!(
        report["extension_points"],
        serde_json::json!(["score", "normalizeScore"])
    );

    // The same answers as the Rust version of the logic, case by case.
    let harness = ComponentHarness::load(&wasm).unwrap();
    let nodes = [
        ("small", 2000, 8 * GI),
        ("mid", 8000, 16 * GI),
        ("large", 32000, 128 * GI),
    ];
    let cluster = |case: Case| {
        nodes.iter().fold(case, |c, &(name, cpu, mem)| {
            c.node(node(name).cpu(cpu).memory(mem))
        })
    };
    let upstream_default = (1 << 20, 1);
    harness
        .check_all(&[
            cluster(Case::new("least: the smallest node first")).scores(allocatable_scores(
                &nodes,
                upstream_default,
                false,
            )),
            cluster(Case::new("most: the largest node first"))
                .args(serde_json::json!({"mode": "Most"}))
                .scores(allocatable_scores(&nodes, upstream_default, true)),
            cluster(Case::new("memory only"))
                .args(serde_json::json!({"resources": [{"name": "memory", "weight": 1}]}))
                .scores(allocatable_scores(&nodes, (0, 1), false)),
            Case::new("equal nodes score the minimum")
                .node(node("a").cpu(4000).memory(8 * GI))
                .node(node("b").cpu(4000).memory(8 * GI))
                .scores([("a", 0), ("b", 0)]),
        ])
        .unwrap();
    let e = harness
        .run(&Case::new("bad args").args(serde_json::json!({"mode": "Fastest"})))
        .unwrap_err();
    assert!(
        format!("{e:#}").contains("mode: want Least or Most, got \"Fastest\""),
        "{e:#}"
    );

    let config = dir.join("simulate/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "path: ../node_resources_allocatable.wasm",
        &format!("path: {}", wasm.display()),
    );
    let config = tmp.path().join("config.yaml");
    std::fs::write(&config, text).unwrap();
    let report = simulate(&config, &[dir.join("simulate/cluster.yaml")]);
    assert_eq!(
        placements(&report),
        [
            "default/web-1  small  1 attempt",
            "default/web-2  small  1 attempt",
            "2 scheduled, 0 unschedulable, 2",
        ],
        "{report}"
    );
}

/// From an empty directory to a Go plugin scheduling, by the commands the book
/// gives: `berth plugin new --lang go`, `berth plugin build`, `berth plugin check`,
/// `berth simulate`.
#[test]
fn a_go_plugin_from_berth_plugin_new_schedules() {
    let Some(go) = go_tool() else {
        println!("skipped: go not found ($GO, PATH)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("avoid-drain");
    let out = Command::new(BERTH)
        .args(["plugin", "new", "AvoidDrain", "--lang", "go", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let said = ok("berth plugin new --lang go", out);
    assert!(
        said.contains("berth plugin build . -o avoid_drain.wasm"),
        "{said}"
    );
    let wasm = dir.join("avoid_drain.wasm");
    go_build(&go, &dir, &wasm);
    let out = Command::new(BERTH)
        .args(["plugin", "check", "--output", "json"])
        .arg(&wasm)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_str(&ok("berth plugin check", out)).unwrap();
    assert_eq!(report["name"], "AvoidDrain");
    assert_eq!(report["refused"], serde_json::Value::Null);
    assert_eq!(report["extension_points"], serde_json::json!(["filter"]));

    let cluster = tmp.path().join("cluster.yaml");
    std::fs::write(
        &cluster,
        "apiVersion: v1\nkind: Node\nmetadata: {name: big, labels: {example.com/drain: \"true\"}}\nstatus:\n  allocatable: {cpu: \"64\", memory: 256Gi, pods: \"110\"}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: small}\nstatus:\n  allocatable: {cpu: \"4\", memory: 8Gi, pods: \"110\"}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: web, image: nginx, resources: {requests: {cpu: 500m}}}\n",
    )
    .unwrap();
    let config = tmp.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    filter:\n      enabled: [{{name: AvoidDrain}}]\nberth:\n  modules:\n  - name: AvoidDrain\n    path: {}\n",
            wasm.display()
        ),
    )
    .unwrap();
    let report = simulate(&config, &[cluster]);
    assert_eq!(
        placements(&report),
        [
            "default/web  small  1 attempt",
            "1 scheduled, 0 unschedulable, 1",
        ],
        "{report}"
    );
}

/// The Go SDK's PreFilter, CycleState and Filter path, and a host call (the log):
/// sdk-go/testdata/zone-of-label writes the pod's zone to the cycle state at
/// PreFilter and reads it back in Filter for every node.
#[test]
fn a_go_plugin_keeps_cycle_state_from_prefilter_to_filter() {
    let Some(go) = go_tool() else {
        println!("skipped: go not found ($GO, PATH)");
        return;
    };
    let dir = repo().join("sdk-go/testdata/zone-of-label");
    let tmp = tempfile::tempdir().unwrap();
    let wasm = tmp.path().join("zone_of_label.wasm");
    go_build(&go, &dir, &wasm);
    let text = std::fs::read_to_string(dir.join("config.yaml"))
        .unwrap()
        .replace(
            "path: zone_of_label.wasm",
            &format!("path: {}", wasm.display()),
        );
    let config = tmp.path().join("config.yaml");
    std::fs::write(&config, text).unwrap();
    let report = simulate(&config, &[dir.join("cluster.yaml")]);
    assert_eq!(
        placements(&report),
        [
            "default/in-b      small      1 attempt",
            "default/in-c      <pending>  2 attempts  0/2 nodes are available: 2 node(s) are not in zone c. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
            "default/anywhere  big        1 attempt",
            "2 scheduled, 1 unschedulable, 3",
        ],
        "{report}"
    );
}
