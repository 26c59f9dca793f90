//! The sandbox through the real host: misbehaving fixture components, per-plugin
//! limits and grants from the configuration, output forwarding, failurePolicy.

use berth::clock::VirtualClock;
use berth::cluster::manifest::{self, Object};
use berth::cluster::memory::MemoryCluster;
use berth::config::Configuration;
use berth::scheduler::{PodOutcome, Scheduler, SchedulerOptions};
use berth::simulate::{Report, SimulateOptions, simulate};
use berth::wasm::abi::WIT_VERSION;
use berth::wasm::{LoadError, Runtime};
use berth_tests::{TWO_NODES as NODES, pod, runtime, write};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A scheduler on the embedded cluster, fed the manifests in `cluster` and run until
/// nothing more can happen: each pod's outcome by name, and the metrics.
fn schedule(
    runtime: &Arc<Runtime>,
    config_file: &Path,
    cluster: &str,
) -> (HashMap<String, PodOutcome>, String) {
    let config = Configuration::load(config_file).unwrap();
    let name = config_file.display().to_string();
    let mut s = Scheduler::new(
        runtime,
        &config,
        &name,
        &SchedulerOptions::default(),
        Arc::new(MemoryCluster::new()),
        Arc::new(VirtualClock::default()),
    )
    .unwrap();
    let mut uids = Vec::new();
    for doc in manifest::load_str("cluster.yaml", cluster).unwrap() {
        match doc.object {
            Object::Node(n) => s.add_or_update_node(n),
            Object::Pod(p) => {
                uids.push(p.uid.clone());
                s.add_pod(p).unwrap();
            }
            _ => {}
        }
    }
    s.run_until_idle();
    let outcomes = uids
        .iter()
        .filter_map(|u| s.outcome(u))
        .map(|o| (o.name.clone(), o.clone()))
        .collect();
    (outcomes, s.metrics_text())
}

/// The value of a counter in the metrics text (0 when absent).
fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

fn misbehave_config(dir: &Path, extra: &str) -> PathBuf {
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_MISBEHAVE,
        dir.join("misbehave.wasm"),
    )
    .unwrap();
    // The deadline must stop an endless loop yet leave a flood of megabytes room to
    // finish on a loaded 2-core machine (200 ms did not, with other builds running).
    write(
        dir,
        "config.yaml",
        &format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    filter:\n      enabled: [{{name: Misbehave}}]\n    score:\n      enabled: [{{name: Misbehave, weight: 10}}]\nberth:\n  modules:\n  - {{name: Misbehave, path: misbehave.wasm}}\n  plugins:\n  - name: Misbehave\n    sandbox: {{callDeadline: 2s, memoryLimit: 48Mi}}\n{extra}"
        ),
    )
}

/// Every way the Misbehave fixture fails (a panic, an endless loop, a memory bomb at
/// Filter; scores out of range before and after normalizing, saturated infinities,
/// wrapped products, a panic at Score) fails only its own pod, with an Error that
/// names the plugin, the pod and a node; pods before and after it schedule, so each
/// broken instance was rebuilt; an output flood of megabytes costs nothing but log
/// lines.
#[test]
fn each_misbehaviour_fails_only_its_pod_naming_plugin_pod_and_node() {
    let dir = tempfile::tempdir().unwrap();
    let config = misbehave_config(dir.path(), "");
    let cases = [
        (
            "panics",
            "berth.test/misbehave: panic",
            "misbehave: asked to panic for default/panics",
        ),
        (
            "loops",
            "berth.test/misbehave: loop",
            "deadline of 2s exceeded",
        ),
        ("hogs", "berth.test/misbehave: hog", "trapped at Filter"),
        (
            "raw-101",
            "berth.test/score: out-of-range",
            "invalid score 101",
        ),
        (
            "raw-infinity",
            "berth.test/score: overflow",
            "invalid score 9223372036854775807",
        ),
        (
            "raw-minus-infinity",
            "berth.test/score: negative-overflow",
            "invalid score -9223372036854775808",
        ),
        (
            "normalized-150",
            "berth.test/normalize: out-of-range",
            "invalid score 150",
        ),
        (
            "normalized-wrapped",
            "berth.test/normalize: overflow",
            "invalid score",
        ),
        (
            "score-panics",
            "berth.test/score: panic",
            "trapped at Score",
        ),
    ];
    let mut text = NODES.to_owned();
    text += &pod("before", "");
    for (name, label, _) in &cases {
        text += &pod(name, label);
        text += &pod(&format!("after-{name}"), "");
    }
    text += &pod("floods", "berth.test/misbehave: flood");
    text += &pod("after", "");
    let (out, metrics) = schedule(&runtime(), &config, &text);

    for name in ["before", "floods", "after"] {
        assert_eq!(out[name].node.as_deref(), Some("zulu"), "{:?}", out[name]);
    }
    for (name, _, what) in &cases {
        let o = &out[*name];
        assert_eq!(o.node, None, "{name} was scheduled");
        let m = &o.message;
        assert!(m.starts_with("plugin Misbehave: "), "{name}: {m}");
        assert!(m.contains(&format!("pod default/{name}")), "{name}: {m}");
        assert!(m.contains("alpha") || m.contains("zulu"), "{name}: {m}");
        assert!(m.contains(what), "{name}: {m}");
        // The pod after each one still lands where the healthy plugin sends it.
        let after = &out[&format!("after-{name}")];
        assert_eq!(after.node.as_deref(), Some("zulu"), "{after:?}");
    }
    assert!(counter(&metrics, "berth_plugin_traps_total{plugin=\"Misbehave\"}") >= 4);
    // Megabytes of output: the rate limit logged a burst and suppressed the rest.
    let logged = counter(
        &metrics,
        "berth_plugin_output_lines_total{outcome=\"logged\",plugin=\"Misbehave\"}",
    );
    let suppressed = counter(
        &metrics,
        "berth_plugin_output_lines_total{outcome=\"suppressed\",plugin=\"Misbehave\"}",
    );
    assert!(logged >= u64::from(berth::wasm::BURST_LINES), "{logged}");
    assert!(suppressed > 20_000, "{suppressed}\n{metrics}");
}

/// A pod too large for one plugin's memory limit fails with an Error naming that
/// plugin and the pod, whichever crossing carried it into the guest (the sync that
/// begins its cycle, or `begin-cycle`); the pods around it schedule.
#[test]
fn a_pod_too_large_for_a_plugin_s_memory_is_an_error_naming_the_pod() {
    let dir = tempfile::tempdir().unwrap();
    let config = misbehave_config(dir.path(), "");
    // A smaller limit than the other tests', so that the pod need not be huge.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("memoryLimit: 48Mi", "memoryLimit: 4Mi"),
    )
    .unwrap();
    // Past Misbehave's 4 MiB; well inside the default plugins' 256 MiB.
    let image = "i".repeat(5 << 20);
    let mut text = NODES.to_owned();
    text += &pod("before", "");
    text += &pod("huge", "").replace("image: busybox", &format!("image: {image}"));
    text += &pod("after", "");
    let (out, metrics) = schedule(&runtime(), &config, &text);

    for name in ["before", "after"] {
        assert_eq!(out[name].node.as_deref(), Some("zulu"), "{:?}", out[name]);
    }
    let huge = &out["huge"];
    assert_eq!(huge.node, None);
    let m = &huge.message;
    assert!(m.starts_with("plugin Misbehave: trapped at "), "{m}");
    assert!(
        m.contains("beginning the cycle of pod default/huge")
            || m.contains("at BeginCycle for pod default/huge"),
        "{m}"
    );
    assert!(counter(&metrics, "berth_plugin_traps_total{plugin=\"Misbehave\"}") >= 1);
}

fn wrong_length_config(dir: &Path) -> PathBuf {
    write(
        dir,
        "config.yaml",
        &format!(
            "berth:\n  modules:\n  - {{name: WrongLength, path: {}}}\nprofiles:\n- plugins:\n    score:\n      enabled: [{{name: WrongLength}}]\n",
            berth_artifacts::fixtures::FIXTURE_WRONG_LENGTH
        ),
    )
}

/// Answers of the wrong length from Score and NormalizeScore are Errors naming the
/// plugin, the pod and the nodes; the pods around them schedule.
#[test]
fn lists_of_the_wrong_length_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = wrong_length_config(dir.path());
    let mut text = NODES.to_owned();
    text += &pod("long", "berth.test/wrong-length: score");
    text += &pod("short", "berth.test/wrong-length: normalize");
    text += &pod("fine", "");
    let (out, _) = schedule(&runtime(), &config, &text);
    assert!(out["fine"].node.is_some(), "{:?}", out["fine"]);
    let long = &out["long"].message;
    assert!(
        long.starts_with(
            "plugin WrongLength: answered badly at Score for pod default/long on nodes "
        ) && long.contains("alpha")
            && long.contains("zulu")
            && long.contains(": answered 3 scores for 2 nodes"),
        "{long}"
    );
    let short = &out["short"].message;
    assert!(
        short.starts_with(
            "plugin WrongLength: answered badly at NormalizeScore for pod default/short: answered 1 normalized scores for 2 nodes (normalizing nodes "
        ) && short.contains("alpha")
            && short.contains("zulu"),
        "{short}"
    );
}

/// Modules that cannot be plugins are refused at load, naming the module and why.
#[test]
fn modules_that_are_not_plugins_are_refused_naming_the_module() {
    let rt = runtime();
    let load = |path: &str| rt.load_file(Path::new(path)).unwrap_err();

    let e = load(berth_artifacts::fixtures::FIXTURE_WRONG_VERSION);
    assert!(matches!(e, LoadError::World { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: does not fit the berth:scheduler@{WIT_VERSION} plugin world: built against berth:scheduler@0.1.0, this host speaks @{WIT_VERSION}{}",
            berth_artifacts::fixtures::FIXTURE_WRONG_VERSION,
            // When it loads more than its own version, the host names what.
            match berth::wasm::abi::Policy::current().supported_range() {
                range if range == format!("@{WIT_VERSION}") => String::new(),
                range => format!(" (it loads {range})"),
            }
        )
    );

    let e = load(berth_artifacts::fixtures::FIXTURE_MISSING_EXPORT);
    assert!(matches!(e, LoadError::World { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "{}: does not fit the berth:scheduler@{WIT_VERSION} plugin world: ",
            berth_artifacts::fixtures::FIXTURE_MISSING_EXPORT
        )),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("berth:scheduler/replica@{WIT_VERSION}")),
        "{msg}"
    );

    // A valid WebAssembly module, but a core module, not a component.
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let e = rt.load_file(&core).unwrap_err();
    assert!(matches!(e, LoadError::Compile { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "{}: not a valid WebAssembly component",
            core.display()
        )),
        "{e}"
    );
}

fn probe(dir: &Path, grants: &str) -> Report {
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_PROBE,
        dir.join("probe.wasm"),
    )
    .unwrap();
    let config = write(
        dir,
        "config.yaml",
        &format!(
            "profiles:\n- plugins:\n    filter:\n      enabled: [{{name: Probe}}]\nberth:\n  modules:\n  - {{name: Probe, path: probe.wasm}}\n  plugins:\n  - name: Probe\n    sandbox:\n      callDeadline: 1s\n      grants: {grants}\n"
        ),
    );
    let mut text = NODES.to_owned();
    for what in [
        "env",
        "file",
        "write",
        "wall-clock",
        "monotonic",
        "sleep",
        "random",
        "secure-random",
        "insecure-random",
        "net",
    ] {
        text += &pod(what, &format!("berth.test/probe: {what}"));
    }
    let cluster = write(dir, "cluster.yaml", &text);
    simulate(
        &runtime(),
        &SimulateOptions {
            files: vec![cluster],
            config: Some(config),
            ..SimulateOptions::default()
        },
    )
    .unwrap()
}

fn seen(report: &Report, what: &str) -> String {
    let p = report.pods.iter().find(|p| p.name == what).unwrap();
    assert_eq!(p.node, None, "{p:?}");
    p.message.clone()
}

/// The hexadecimal values the probe `what` answered, read from the first of its
/// reasons in the pod's message (the message holds one reason per node it was
/// filtered on).
fn values(report: &Report, what: &str) -> Vec<String> {
    let m = seen(report, what);
    let tag = format!("probe {what}: ");
    let at = m.find(&tag).unwrap_or_else(|| panic!("{m}")) + tag.len();
    let v: Vec<String> = m[at..]
        .split(|c: char| !c.is_ascii_hexdigit())
        .take_while(|w| w.len() == 16)
        .map(str::to_owned)
        .collect();
    assert!(!v.is_empty(), "{m}");
    v
}

/// With nothing granted, a plugin sees no environment, no files, the epoch on the
/// wall clock, a frozen monotonic clock (a sleep of an hour returns at once), the same
/// insecure randomness in every instance (a stream that does not repeat), real
/// randomness where it is meant for secrets, and no network.
#[test]
fn nothing_is_granted_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let a = probe(dir.path(), "{}");
    let b = probe(dir.path(), "{}");
    let m = seen(&a, "env");
    assert!(
        m.contains("probe env: ZONE: environment variable not found"),
        "{m}"
    );
    let m = seen(&a, "file");
    assert!(m.contains("probe file: refused: "), "{m}");
    let m = seen(&a, "write");
    assert!(m.contains("probe write: refused: "), "{m}");
    let m = seen(&a, "wall-clock");
    assert!(m.contains("probe wall-clock: at the epoch"), "{m}");
    let m = seen(&a, "monotonic");
    assert!(m.contains("probe monotonic: frozen"), "{m}");
    let m = seen(&a, "sleep");
    assert!(m.contains("probe sleep: woke"), "{m}");
    assert!(
        seen(&a, "net").contains("probe net: refused: "),
        "{}",
        seen(&a, "net")
    );
    let random = seen(&a, "random");
    assert!(random.contains("probe random: hash "), "{random}");
    assert_eq!(random, seen(&b, "random"));
    let insecure = values(&a, "insecure-random");
    assert_eq!(insecure.len(), 2, "{insecure:?}");
    assert_ne!(insecure[0], insecure[1], "{insecure:?}");
    assert_eq!(insecure, values(&b, "insecure-random"));
    let secure = values(&a, "secure-random");
    assert_eq!(secure.len(), 1, "{secure:?}");
    assert_ne!(secure, values(&b, "secure-random"));
}

/// What a profile grants, the plugin gets: the environment it names, its directory
/// (read-only), the clocks, real randomness; a sleep beyond the call deadline is an
/// Error naming the plugin and pod rather than a stuck worker.
#[test]
fn grants_give_exactly_what_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("hello.txt"), "hello from the host\n").unwrap();
    let grants = "{wallClock: true, monotonicClock: true, random: true, env: [{name: ZONE, value: eu-1}], dirs: [{hostPath: data, guestPath: /data}]}";
    let a = probe(dir.path(), grants);
    let b = probe(dir.path(), grants);
    let m = seen(&a, "env");
    assert!(m.contains("probe env: ZONE=eu-1"), "{m}");
    let m = seen(&a, "file");
    assert!(
        m.contains("probe file: read \"hello from the host\""),
        "{m}"
    );
    let m = seen(&a, "write");
    assert!(m.contains("probe write: refused: "), "{m}");
    assert!(!data.join("new.txt").exists());
    let m = seen(&a, "wall-clock");
    assert!(m.contains("probe wall-clock: after the epoch"), "{m}");
    let m = seen(&a, "monotonic");
    assert!(m.contains("probe monotonic: moving"), "{m}");
    let m = seen(&a, "net");
    assert!(m.contains("probe net: refused: "), "{m}");
    assert_ne!(seen(&a, "random"), seen(&b, "random"));
    assert_ne!(values(&a, "insecure-random"), values(&b, "insecure-random"));
    assert_ne!(values(&a, "secure-random"), values(&b, "secure-random"));
    let sleep = seen(&a, "sleep");
    assert!(
        sleep.starts_with("plugin Probe: trapped at Filter for pod default/sleep on nodes ")
            && sleep
                .contains("the plugin asked to sleep 3600s, longer than its call deadline of 1s"),
        "{sleep}"
    );
}

fn fail_open_config(dir: &Path, policy: &str) -> PathBuf {
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_MISBEHAVE,
        dir.join("misbehave.wasm"),
    )
    .unwrap();
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_PREFER_FIRST_NODE,
        dir.join("prefer-first.wasm"),
    )
    .unwrap();
    write(
        dir,
        "config.yaml",
        &format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    score:\n      enabled: [{{name: Misbehave, weight: 50}}, {{name: NodePreference, weight: 5}}]\nberth:\n  modules:\n  - {{name: Misbehave, path: misbehave.wasm}}\n  - {{name: NodePreference, path: prefer-first.wasm}}\n  plugins:\n  - {{name: Misbehave, failurePolicy: {policy}}}\n"
        ),
    )
}

/// Misbehave (weight 50) sends pods to zulu, NodePreference (weight 5) to alpha. Fail
/// open, a Misbehave failure at Score (a trap, a score out of range) drops its scores
/// for that cycle: the pod lands on alpha, and the failure is counted. Fail closed
/// (the default), the same pods are Errors.
#[test]
fn a_fail_open_scorer_s_failure_drops_its_scores_for_the_cycle() {
    let mut text = NODES.to_owned();
    text += &pod("first", "");
    text += &pod("trap", "berth.test/score: panic");
    text += &pod("range", "berth.test/normalize: out-of-range");
    text += &pod("last", "");

    let dir = tempfile::tempdir().unwrap();
    let config = fail_open_config(dir.path(), "FailOpen");
    let (out, metrics) = schedule(&runtime(), &config, &text);
    let node = |n: &str| {
        out[n]
            .node
            .clone()
            .unwrap_or_else(|| panic!("{:?}", out[n]))
    };
    assert_eq!(node("first"), "zulu");
    assert_eq!(node("trap"), "alpha");
    assert_eq!(node("range"), "alpha");
    assert_eq!(node("last"), "zulu");
    assert_eq!(
        counter(
            &metrics,
            "berth_plugin_failures_ignored_total{plugin=\"Misbehave\"}"
        ),
        2,
        "{metrics}"
    );

    let config = fail_open_config(dir.path(), "FailClosed");
    let (out, metrics) = schedule(&runtime(), &config, &text);
    assert_eq!(out["first"].node.as_deref(), Some("zulu"));
    assert_eq!(out["last"].node.as_deref(), Some("zulu"));
    for n in ["trap", "range"] {
        assert_eq!(out[n].node, None, "{:?}", out[n]);
        assert!(
            out[n].message.starts_with("plugin Misbehave: "),
            "{:?}",
            out[n]
        );
    }
    assert_eq!(
        counter(
            &metrics,
            "berth_plugin_failures_ignored_total{plugin=\"Misbehave\"}"
        ),
        0
    );
}

/// FailOpen is for plugins that only score: one that also filters is refused, with
/// the field, and so are settings for a plugin that does not exist.
#[test]
fn fail_open_is_refused_for_a_plugin_that_filters() {
    let dir = tempfile::tempdir().unwrap();
    let config = misbehave_config(dir.path(), "  - {name: Misbehave2}\n");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "sandbox: {callDeadline: 2s, memoryLimit: 48Mi}",
        "failurePolicy: FailOpen",
    );
    std::fs::write(&config, text).unwrap();
    let c = Configuration::load(&config).unwrap();
    let e = Scheduler::new(
        &runtime(),
        &c,
        "config.yaml",
        &SchedulerOptions::default(),
        Arc::new(MemoryCluster::new()),
        Arc::new(VirtualClock::default()),
    )
    .err()
    .unwrap();
    assert_eq!(
        format!("{e:#}"),
        "config.yaml: berth.plugins[1].name: unknown plugin \"Misbehave2\": neither built in nor named in berth.modules"
    );
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("  - {name: Misbehave2}\n", "");
    std::fs::write(&config, text).unwrap();
    let c = Configuration::load(&config).unwrap();
    let e = Scheduler::new(
        &runtime(),
        &c,
        "config.yaml",
        &SchedulerOptions::default(),
        Arc::new(MemoryCluster::new()),
        Arc::new(VirtualClock::default()),
    )
    .err()
    .unwrap();
    assert_eq!(
        format!("{e:#}"),
        "config.yaml: berth.plugins[0].failurePolicy: FailOpen is allowed only for plugins used at preScore and score alone; profile default-scheduler enables Misbehave at filter"
    );
}

/// With `berth.totalMemoryLimit`, a plugin that holds memory in every instance the
/// worst case makes at once (its own, one per worker, one per binding cycle) stays
/// under the bound: the instances that would pass it fail to start, saying so, and
/// every instance's memory is given back when it goes. `config validate` prints the
/// worst case and the bound.
#[test]
fn a_memory_bomb_in_every_instance_at_once_stays_under_the_total_bound() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "parallelism: 4\nberth:\n  totalMemoryLimit: 200Mi\n",
    );
    let rt = runtime();
    let valid = berth::config_cli::validate(&rt, &config, &Default::default()).unwrap();
    assert!(
        valid.contains(
            "plugin memory: 740 instances at most (1 + 4 workers + 32 binding cycles per plugin and profile), 189440Mi in the worst case; bounded by berth.totalMemoryLimit: 200Mi\n"
        ),
        "{valid}"
    );

    let parsed = Configuration::load(&config).unwrap();
    rt.memory().set_limit(parsed.total_memory_limit());
    let module = rt
        .load_file(Path::new(berth_artifacts::fixtures::FIXTURE_MISBEHAVE))
        .unwrap();
    let worst = 1 + 4 + berth::scheduler::DEFAULT_PARALLEL_BINDINGS;
    let mut live = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..worst {
        match module.instantiate(r#"{"holdMiB": 24}"#, Default::default()) {
            Ok(i) => live.push(i),
            Err(e) => refused.push(e.to_string()),
        }
    }
    let bound = 200 << 20;
    assert!(rt.memory().peak() <= bound, "{}", rt.memory().peak());
    // 24 MiB each and a little of its own: about seven fit, and far from all.
    assert!((5..=8).contains(&live.len()), "{} {refused:?}", live.len());
    assert!(
        refused.iter().all(|e| e.contains(
            "would take the plugins' memory together past berth.totalMemoryLimit (200 MiB)"
        )),
        "{refused:?}"
    );
    drop(live);
    assert_eq!(rt.memory().used(), 0);
}
