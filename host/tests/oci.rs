//! Plugin modules from an OCI registry, against a real one on loopback (Debian's
//! `docker-registry`, htpasswd auth): `berth plugin push` and the digest it prints,
//! a configuration naming the module by tag and by digest that `berth simulate`
//! schedules with, a wrong digest and a wrong password refused with clear errors,
//! the cached module serving while the registry is stopped (and a cached layer whose
//! bytes changed not served), and a running scheduler that follows a tag to a new
//! push through the registry poll and a reload's checks.

use crate::{common, registry};

use berth::cluster::Change;
use berth::cluster::memory::MemoryCluster;
use berth::config::Configuration;
use berth::live::{Input, LiveLoop, PanicAfter};
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth::wasm::{Runtime, RuntimeOptions};
use berth_artifacts::fixtures::{FIXTURE_PREFER_FIRST_NODE, FIXTURE_PREFER_LAST_NODE};
use common::{stderr, stdout, workspace};
use registry::{PASSWORD, Registry, USER};
use sha2::Digest as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::{Duration, Instant};

const REPO: &str = "plugins/node-preference";

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&sha2::Sha256::digest(bytes)))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Runs `berth` with its caches (components and pulled modules) in `cache`.
fn berth_in(cache: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(args)
        .env("BERTH_CACHE_DIR", cache)
        .env("BERTH_CACHE_KEY_DIR", cache.with_extension("keys"))
        .env_remove("DOCKER_CONFIG")
        .current_dir(workspace())
        .output()
        .expect("run berth")
}

/// `berth plugin push MODULE oci://HOST/REPO:TAG`; the printed digest.
fn push(reg: &Registry, module: &str, tag: &str, docker_config: &Path) -> String {
    reg.push(module, &format!("{REPO}:{tag}"), docker_config)
}

/// Two nodes and a pending pod; NodePreference decides where it goes.
fn write_cluster(dir: &Path) -> PathBuf {
    let node = |n: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {n}\n  labels: {{kubernetes.io/hostname: {n}}}\nstatus:\n  allocatable: {{cpu: '8', memory: 16Gi, pods: '110'}}\n"
        )
    };
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\nspec:\n  containers:\n  - name: c\n    image: nginx\n    resources: {requests: {cpu: 100m}}\n";
    let path = dir.join("cluster.yaml");
    std::fs::write(
        &path,
        format!("{}---\n{}---\n{pod}", node("alpha"), node("zulu")),
    )
    .unwrap();
    path
}

/// A configuration that scores with NodePreference from `oci`, reaching the
/// registry with `docker_config` (none: anonymously). Only the plugins a profile
/// cannot do without beside it: each run compiles its components into a cache of
/// its own.
fn write_config(
    dir: &Path,
    name: &str,
    reg: &Registry,
    oci: &str,
    docker_config: Option<&Path>,
    poll: &str,
) -> PathBuf {
    let credentials = docker_config
        .map(|f| format!("    dockerConfig: {}\n", f.display()))
        .unwrap_or_default();
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      disabled: [{{name: '*'}}]\n      enabled: [{{name: PrioritySort}}, {{name: DefaultBinder}}]\n    score:\n      enabled: [{{name: NodePreference, weight: 50}}]\nberth:\n  modules:\n  - name: NodePreference\n    oci: {oci}\n  oci:\n{credentials}    plainHttp: ['{}']\n    pollInterval: {poll}\n",
        reg.host
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `berth simulate`'s line for default/web: its node.
fn placed(out: &Output) -> String {
    assert!(out.status.success(), "simulate failed: {}", stderr(out));
    let text = stdout(out);
    let line = text
        .lines()
        .find(|l| l.starts_with("default/web "))
        .unwrap_or_else(|| panic!("no line for default/web: {text}"));
    line.split_whitespace().nth(1).unwrap().to_owned()
}

#[test]
fn a_pushed_module_loads_by_tag_and_by_digest_and_schedules() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::start(&dir.path().join("registry"));
    let creds = reg.docker_config("docker.json", USER, PASSWORD);
    let digest = push(&reg, FIXTURE_PREFER_LAST_NODE, "1.0", &creds);

    // What the registry serves under the tag is the manifest of that digest, a wasm
    // artifact whose one layer is the component.
    let (manifest, served) = reg.manifest(REPO, "1.0");
    assert_eq!(sha256(&manifest), digest);
    assert_eq!(served, digest);
    let m: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = m["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{m}");
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    let component = std::fs::read(FIXTURE_PREFER_LAST_NODE).unwrap();
    assert_eq!(layers[0]["digest"], sha256(&component));
    assert_eq!(layers[0]["size"], component.len());
    assert_eq!(
        m["annotations"]["org.opencontainers.image.title"],
        "NodePreference"
    );
    let (status, _, config) = reg
        .get(
            &format!(
                "/v2/{REPO}/blobs/{}",
                m["config"]["digest"].as_str().unwrap()
            ),
            Some((USER, PASSWORD)),
            &[],
        )
        .unwrap();
    assert_eq!(status, 200);
    let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"][0], sha256(&component));
    assert!(
        config["component"]["exports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("berth:scheduler/score@")),
        "{config}"
    );

    let cluster = write_cluster(dir.path());
    let cache = dir.path().join("cache");
    let by_tag = write_config(
        dir.path(),
        "tag.yaml",
        &reg,
        &format!("oci://{}/{REPO}:1.0", reg.host),
        Some(&creds),
        "1m",
    );
    let args = |c: &Path| {
        vec![
            "simulate".to_owned(),
            "--config".to_owned(),
            c.display().to_string(),
            cluster.display().to_string(),
        ]
    };
    let run = |c: &Path| {
        let a = args(c);
        berth_in(&cache, &a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    assert_eq!(placed(&run(&by_tag)), "zulu");
    let pinned = write_config(
        dir.path(),
        "pinned.yaml",
        &reg,
        &format!("oci://{}/{REPO}:1.0@{digest}", reg.host),
        Some(&creds),
        "1m",
    );
    assert_eq!(placed(&run(&pinned)), "zulu");

    // `berth config validate` loads it the same way.
    let out = berth_in(&cache, &["config", "validate", pinned.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("NodePreference"), "{}", stdout(&out));
}

#[test]
fn a_wrong_digest_a_wrong_password_and_no_credentials_are_refused_with_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::start(&dir.path().join("registry"));
    let creds = reg.docker_config("docker.json", USER, PASSWORD);
    let digest = push(&reg, FIXTURE_PREFER_LAST_NODE, "1.0", &creds);
    let cluster = write_cluster(dir.path());
    let cache = dir.path().join("cache");
    let simulate = |config: &Path| {
        berth_in(
            &cache,
            &[
                "simulate",
                "--config",
                config.to_str().unwrap(),
                cluster.to_str().unwrap(),
            ],
        )
    };

    // A digest that is not the tag's: refused, naming the pin and where the tag is.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let reference = format!("oci://{}/{REPO}:1.0@{wrong}", reg.host);
    let config = write_config(
        dir.path(),
        "wrong-digest.yaml",
        &reg,
        &reference,
        Some(&creds),
        "1m",
    );
    let out = simulate(&config);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{reference}: fetching manifest {wrong}: the registry has none"
        )),
        "{err}"
    );
    assert!(err.contains(&format!("tag 1.0 is at {digest}")), "{err}");

    // A wrong password: refused, naming the registry, the user and the file.
    let bad = reg.docker_config("bad.json", USER, "not-the-password");
    let reference = format!("oci://{}/{REPO}:1.0", reg.host);
    let config = write_config(
        dir.path(),
        "bad-password.yaml",
        &reg,
        &reference,
        Some(&bad),
        "1m",
    );
    let out = simulate(&config);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{reference}: registry {} refused access: fetching tag 1.0: the registry refused user \"{USER}\" (credentials from {})",
            reg.host,
            bad.display()
        )),
        "{err}"
    );

    // No credentials at all.
    let config = write_config(dir.path(), "anonymous.yaml", &reg, &reference, None, "1m");
    let err = stderr(&simulate(&config));
    assert!(
        err.contains(
            "the registry wants credentials and none are configured (berth.oci.dockerConfig"
        ),
        "{err}"
    );

    // A push with the wrong password pushes nothing.
    let out = berth_in(
        &cache,
        &[
            "plugin",
            "push",
            FIXTURE_PREFER_FIRST_NODE,
            &format!("oci://{}/{REPO}:2.0", reg.host),
            "--docker-config",
            bad.to_str().unwrap(),
            "--plain-http",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("refused access: pushing the layer"),
        "{}",
        stderr(&out)
    );
    let (status, _, _) = reg
        .get(
            &format!("/v2/{REPO}/manifests/2.0"),
            Some((USER, PASSWORD)),
            &[],
        )
        .unwrap();
    assert_eq!(status, 404);

    // A module the scheduler would refuse is not pushed.
    let out = berth_in(
        &cache,
        &[
            "plugin",
            "push",
            berth_artifacts::fixtures::FIXTURE_WRONG_VERSION,
            &format!("oci://{}/{REPO}:bad", reg.host),
            "--docker-config",
            creds.to_str().unwrap(),
            "--plain-http",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not pushed: the scheduler would refuse it"),
        "{}",
        stderr(&out)
    );

    // A reference that is not one is a configuration error naming the field.
    let config = write_config(
        dir.path(),
        "typo.yaml",
        &reg,
        &format!("{}/{REPO}:1.0", reg.host),
        Some(&creds),
        "1m",
    );
    let err = stderr(&simulate(&config));
    assert!(
        err.contains("berth.modules[0].oci: ") && err.contains("does not start with oci://"),
        "{err}"
    );
}

#[test]
fn the_cached_module_serves_while_the_registry_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let mut reg = Registry::start(&dir.path().join("registry"));
    let creds = reg.docker_config("docker.json", USER, PASSWORD);
    let digest = push(&reg, FIXTURE_PREFER_LAST_NODE, "stable", &creds);
    let cluster = write_cluster(dir.path());
    let cache = dir.path().join("cache");
    let simulate = |cache: &Path, config: &Path| {
        berth_in(
            cache,
            &[
                "simulate",
                "--config",
                config.to_str().unwrap(),
                cluster.to_str().unwrap(),
            ],
        )
    };
    let tag = format!("oci://{}/{REPO}:stable", reg.host);
    let by_tag = write_config(dir.path(), "tag.yaml", &reg, &tag, Some(&creds), "1m");
    let pinned = write_config(
        dir.path(),
        "pinned.yaml",
        &reg,
        &format!("{tag}@{digest}"),
        Some(&creds),
        "1m",
    );
    assert_eq!(placed(&simulate(&cache, &by_tag)), "zulu");

    reg.stop();
    // The tag loads what it last resolved to, with a warning.
    let out = simulate(&cache, &by_tag);
    assert_eq!(placed(&out), "zulu");
    let err = stderr(&out);
    assert!(
        err.contains(&format!("registry {} cannot be reached", reg.host))
            && err.contains("loading the module it last served"),
        "{err}"
    );
    // A pinned module that is kept needs no registry at all.
    let out = simulate(&cache, &pinned);
    assert_eq!(placed(&out), "zulu");
    assert!(
        !stderr(&out).contains("cannot be reached"),
        "{}",
        stderr(&out)
    );
    // Nothing kept: refused, saying so.
    let out = simulate(&dir.path().join("empty-cache"), &by_tag);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("{tag}: cannot reach registry {}: ", reg.host))
            && stderr(&out).contains("and no copy of it is kept"),
        "{}",
        stderr(&out)
    );

    // A kept layer whose bytes changed is not served ...
    let component = std::fs::read(FIXTURE_PREFER_LAST_NODE).unwrap();
    let layer = cache
        .join("oci/blobs/sha256")
        .join(&sha256(&component)["sha256:".len()..]);
    let mut bytes = std::fs::read(&layer).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&layer, &bytes).unwrap();
    let out = simulate(&cache, &by_tag);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("no copy of it is kept"),
        "{}",
        stderr(&out)
    );
    // ... and is fetched again once the registry is back.
    reg.restart();
    assert_eq!(placed(&simulate(&cache, &by_tag)), "zulu");
    assert_eq!(std::fs::read(&layer).unwrap(), component);
}

fn node(name: &str) -> berth_sdk::Node {
    berth_sdk::Node {
        name: name.into(),
        labels: [("kubernetes.io/hostname".to_owned(), name.to_owned())].into(),
        allocatable: berth_sdk::Resources {
            milli_cpu: 8000,
            memory: 16 << 30,
            allowed_pod_number: 110,
            ..berth_sdk::Resources::default()
        },
        ..berth_sdk::Node::default()
    }
}

fn pod(name: &str) -> berth_sdk::Pod {
    berth_sdk::Pod {
        uid: format!("uid-{name}"),
        namespace: "default".into(),
        name: name.into(),
        scheduler_name: "default-scheduler".into(),
        containers: vec![berth_sdk::Container {
            name: "c".into(),
            requests: [("cpu".to_owned(), 100)].into(),
            ..berth_sdk::Container::default()
        }],
        ..berth_sdk::Pod::default()
    }
}

/// Waits (bounded) until `done` says yes.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A running scheduler (the live loop `berth run` drives, on the embedded cluster)
/// whose NodePreference follows a tag: pods go where the first push sends them; a
/// push to the tag of a module that calls itself by another plugin's name is pulled
/// by the registry poll and refused by the reload's checks while the first keeps
/// serving; the next push of a good module is pulled, checked and swapped in, and the
/// next pods follow it.
#[test]
fn a_running_scheduler_follows_a_moved_tag_through_the_registry_poll() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::start(&dir.path().join("registry"));
    let creds = reg.docker_config("docker.json", USER, PASSWORD);
    push(&reg, FIXTURE_PREFER_FIRST_NODE, "stable", &creds);
    let tag = format!("oci://{}/{REPO}:stable", reg.host);
    let config_path = write_config(dir.path(), "config.yaml", &reg, &tag, Some(&creds), "1s");
    let config = Configuration::load(&config_path).unwrap();
    let runtime = Runtime::new(RuntimeOptions {
        cache_dir: Some(dir.path().join("cache")),
        cache_key_dir: Some(dir.path().join("keys")),
        ..RuntimeOptions::default()
    })
    .unwrap();
    let cluster = Arc::new(MemoryCluster::new());
    let scheduler = Scheduler::new(
        &runtime,
        &config,
        &config_path.display().to_string(),
        &SchedulerOptions::default(),
        cluster.clone(),
        Arc::new(berth::clock::RealClock::default()),
    )
    .unwrap();
    let followed = scheduler.followed_view();
    let first = std::fs::read(FIXTURE_PREFER_FIRST_NODE).unwrap();
    {
        let f = followed.read().unwrap();
        assert_eq!(f.interval, Some(Duration::from_secs(1)));
        assert_eq!(f.modules.len(), 1, "{f:?}");
        assert_eq!(f.modules[0].plugin, "NodePreference");
        assert_eq!(f.modules[0].reference.to_string(), tag);
        assert_eq!(format!("sha256:{}", f.modules[0].sha256), sha256(&first));
    }
    let plugins = scheduler.plugins_view();
    let metrics = scheduler.metrics().clone();
    let live = LiveLoop::start(
        scheduler,
        Arc::new(berth::clock::RealClock::default()),
        true,
        PanicAfter::default(),
        |why| panic!("the loop panicked: {why}"),
    )
    .unwrap();
    let tx = live.sender();
    for n in ["alpha", "zulu"] {
        tx.send(Input::Change(Change::Node(node(n)))).unwrap();
    }
    tx.send(Input::Change(Change::Synced)).unwrap();
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let poll = berth::watch::poll_registries(followed.clone(), tx.clone(), io.handle());
    let bound = |prefix: &str| -> Vec<String> {
        cluster
            .bindings()
            .values()
            .filter(|(pod, _)| pod.starts_with(&format!("default/{prefix}-")))
            .map(|(_, node)| node.clone())
            .collect()
    };
    let schedule = |prefix: &str| {
        for i in 0..3 {
            tx.send(Input::Change(Change::Pod(pod(&format!("{prefix}-{i}")))))
                .unwrap();
        }
        eventually(&format!("the {prefix} pods bound"), || {
            bound(prefix).len() == 3
        });
        bound(prefix)
    };
    assert_eq!(schedule("before"), ["alpha"; 3]);

    // Another plugin's module pushed to the tag: pulled, refused by the checks.
    push(
        &reg,
        berth_artifacts::plugin_paths::NODE_UNSCHEDULABLE,
        "stable",
        &creds,
    );
    eventually("the other plugin's module refused", || {
        metrics.reloads("NodePreference", "refused") >= 1
    });
    assert_eq!(plugins.read().unwrap()["generation"], 1);
    assert_eq!(schedule("between"), ["alpha"; 3]);

    // The next good push: pulled, checked, swapped in.
    let last = std::fs::read(FIXTURE_PREFER_LAST_NODE).unwrap();
    push(&reg, FIXTURE_PREFER_LAST_NODE, "stable", &creds);
    eventually("the moved tag's module swapped in", || {
        followed
            .read()
            .unwrap()
            .modules
            .first()
            .is_some_and(|m| format!("sha256:{}", m.sha256) == sha256(&last))
    });
    let view = plugins.read().unwrap().clone();
    assert_eq!(view["generation"], 2, "{view}");
    let pref = view["profiles"][0]["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "NodePreference")
        .cloned()
        .unwrap();
    assert_eq!(pref["module"], tag.as_str());
    assert_eq!(
        format!("sha256:{}", pref["sha256"].as_str().unwrap()),
        sha256(&last)
    );
    assert_eq!(metrics.reloads("NodePreference", "success"), 1);
    assert_eq!(schedule("after"), ["zulu"; 3]);
    poll.abort();
    drop(io);
    live.stop().expect("the loop ran until asked to stop");
}
