//! Hot swap in `berth run` against a real kube-apiserver: the configuration file of a
//! running Berth is edited (a plugin's module path changed) and the next pods follow
//! the new module; a module path that does not exist is refused while scheduling goes
//! on with the module that serves; `/plugins` and `/metrics` say so. The same through
//! a ConfigMap that `berth run --config-map` reads and watches through the API. A
//! plugin rolled out from an OCI registry by moving its tag.

use crate::apiserver::*;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;

const NS: &str = "default";

fn config_text(module: &str) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      enabled: [{{name: NodePreference, weight: 50}}]\nberth:\n  modules:\n  - {{name: NodePreference, path: {module}}}\n"
    )
}

fn write_config(path: &Path, module: &str) {
    let text = config_text(module);
    // As an editor or a ConfigMap update would: the new file replaces the old at once.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Creates `count` pods `prefix-0..` and waits until all are bound: pod -> node.
async fn schedule(client: &kube::Client, prefix: &str, count: usize) -> BTreeMap<String, String> {
    let pods: Vec<_> = (0..count)
        .map(|i| pod(&format!("{prefix}-{i}"), "100m", "default-scheduler"))
        .collect();
    create_pods(client, NS, &pods).await;
    let names: HashSet<String> = (0..count).map(|i| format!("{prefix}-{i}")).collect();
    eventually(60, &format!("the {prefix} pods bound"), || async {
        let bound: BTreeMap<String, String> = list_pods(client, NS)
            .await?
            .iter()
            .filter(|p| names.contains(&name_of(p)))
            .filter_map(|p| node_of(p).map(|n| (name_of(p), n)))
            .collect();
        if bound.len() == names.len() {
            Ok(bound)
        } else {
            Err(format!("{} of {} bound", bound.len(), names.len()))
        }
    })
    .await
}

fn nodes_of(bound: &BTreeMap<String, String>) -> Vec<&str> {
    let mut n: Vec<&str> = bound.values().map(String::as_str).collect();
    n.dedup();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_config_swaps_the_module_and_a_bad_one_is_refused() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    create_nodes(
        &client,
        &[
            node("alpha", "8", "16Gi", 110),
            node("zulu", "8", "16Gi", 110),
        ],
    )
    .await;
    let dir = server.dir.path();
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_PREFER_FIRST_NODE,
        dir.join("first.wasm"),
    )
    .unwrap();
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_PREFER_LAST_NODE,
        dir.join("last.wasm"),
    )
    .unwrap();
    let config = dir.join("config.yaml");
    write_config(&config, "first.wasm");
    let port = free_port();
    let mut berth = Berth::run_in(
        dir,
        &server.kubeconfig(),
        &[
            "--config",
            config.to_str().unwrap(),
            &format!("--secure-port={port}"),
            "--bind-address=127.0.0.1",
            "--serve-http",
        ],
    );
    berth.wait_log("watching the configuration", Duration::from_secs(10));

    let bound = schedule(&client, "before", 4).await;
    assert_eq!(nodes_of(&bound), ["alpha"], "{bound:?}");

    // Another module for the plugin: the next pods follow it.
    write_config(&config, "last.wasm");
    berth.wait_log("configuration reloaded", Duration::from_secs(30));
    let bound = schedule(&client, "after", 4).await;
    assert_eq!(nodes_of(&bound), ["zulu"], "{bound:?}");
    let (status, body) = http_get(port, "/plugins").await.unwrap();
    assert_eq!(status, 200);
    let view: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(view["generation"], 2, "{body}");
    let plugins = view["profiles"][0]["plugins"].as_array().unwrap();
    let pref = plugins
        .iter()
        .find(|p| p["name"] == "NodePreference")
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(
        pref["module"],
        dir.join("last.wasm").display().to_string(),
        "{body}"
    );
    assert_eq!(pref["witVersion"], berth::wasm::abi::WIT_VERSION);
    assert_eq!(pref["sha256"].as_str().unwrap().len(), 64);

    // A module path that does not exist: refused, the last module keeps serving.
    write_config(&config, "missing.wasm");
    berth.wait_log("reload refused", Duration::from_secs(30));
    let log = berth.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("reload refused"))
        .unwrap()
        .to_owned();
    assert!(
        line.contains("NodePreference") && line.contains("missing.wasm"),
        "{line}"
    );
    let bound = schedule(&client, "refused", 4).await;
    assert_eq!(nodes_of(&bound), ["zulu"], "{bound:?}");

    let (_, metrics) = http_get(port, "/metrics").await.unwrap();
    for line in [
        "berth_plugin_reloads_total{plugin=\"NodePreference\",result=\"success\"} 1",
        "berth_plugin_reloads_total{plugin=\"NodePreference\",result=\"refused\"} 1",
    ] {
        assert!(metrics.contains(line), "no {line} in:\n{metrics}");
    }
    let (_, body) = http_get(port, "/plugins").await.unwrap();
    assert!(body.contains("last.wasm"), "{body}");
}

/// Writes the configuration into ConfigMap default/berth-config (key config.yaml),
/// creating it the first time.
async fn put_config_map(client: &kube::Client, module: &str) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), NS);
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("berth-config".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "config.yaml".to_owned(),
            config_text(module),
        )])),
        ..Default::default()
    };
    match api.get_opt("berth-config").await.unwrap() {
        None => {
            api.create(&Default::default(), &cm).await.unwrap();
        }
        Some(old) => {
            let cm = ConfigMap {
                metadata: old.metadata,
                ..cm
            };
            api.replace("berth-config", &Default::default(), &cm)
                .await
                .unwrap();
        }
    }
}

/// `berth run --config-map`: the configuration read from a ConfigMap through the API;
/// an edit of the ConfigMap swaps the module, and an edit naming a missing module is refused, the running one
/// serving on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_config_map_swaps_the_module_and_a_bad_one_is_refused() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    create_nodes(
        &client,
        &[
            node("alpha", "8", "16Gi", 110),
            node("zulu", "8", "16Gi", 110),
        ],
    )
    .await;
    let dir = server.dir.path();
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_PREFER_FIRST_NODE,
        dir.join("first.wasm"),
    )
    .unwrap();
    std::fs::copy(
        berth_artifacts::fixtures::FIXTURE_PREFER_LAST_NODE,
        dir.join("last.wasm"),
    )
    .unwrap();
    // berth runs in the workspace: the ConfigMap names the modules by absolute path.
    let path = |f: &str| dir.join(f).display().to_string();
    put_config_map(&client, &path("first.wasm")).await;
    let mut berth = Berth::run_in(
        dir,
        &server.kubeconfig(),
        &["--config-map", "default/berth-config", "--secure-port=0"],
    );
    berth.wait_log(
        "watching the configuration in the ConfigMap",
        Duration::from_secs(10),
    );
    let bound = schedule(&client, "before", 4).await;
    assert_eq!(nodes_of(&bound), ["alpha"], "{bound:?}");

    put_config_map(&client, &path("last.wasm")).await;
    berth.wait_log("configuration reloaded", Duration::from_secs(30));
    let bound = schedule(&client, "after", 4).await;
    assert_eq!(nodes_of(&bound), ["zulu"], "{bound:?}");

    put_config_map(&client, &path("missing.wasm")).await;
    berth.wait_log("reload refused", Duration::from_secs(30));
    let log = berth.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("reload refused"))
        .unwrap()
        .to_owned();
    assert!(
        line.contains("configmap default/berth-config[config.yaml]")
            && line.contains("missing.wasm"),
        "{line}"
    );
    let bound = schedule(&client, "refused", 4).await;
    assert_eq!(nodes_of(&bound), ["zulu"], "{bound:?}");
}

/// An operator rolls a new plugin version from a registry: `berth run` loads
/// NodePreference from a tag in a registry with htpasswd authentication (credentials
/// from a docker config file); the next build is pushed to the tag, and the registry
/// poll pulls it, checks it and swaps it in; the next pods follow it, and `/plugins`
/// shows the new component under the same reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_rolls_out_when_its_tag_moves_in_a_registry() {
    use crate::registry::{PASSWORD, Registry, USER};
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    create_nodes(
        &client,
        &[
            node("alpha", "8", "16Gi", 110),
            node("zulu", "8", "16Gi", 110),
        ],
    )
    .await;
    let dir = server.dir.path();
    let reg = Registry::start(&dir.join("registry"));
    let creds = reg.docker_config("docker.json", USER, PASSWORD);
    let repo = "plugins/node-preference:stable";
    reg.push(
        berth_artifacts::fixtures::FIXTURE_PREFER_FIRST_NODE,
        repo,
        &creds,
    );
    let reference = format!("oci://{}/{repo}", reg.host);
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      enabled: [{{name: NodePreference, weight: 50}}]\nberth:\n  modules:\n  - {{name: NodePreference, oci: \"{reference}\"}}\n  oci:\n    dockerConfig: {}\n    plainHttp: ['{}']\n    pollInterval: 1s\n",
            creds.display(),
            reg.host
        ),
    )
    .unwrap();
    let port = free_port();
    let mut berth = Berth::run_in(
        dir,
        &server.kubeconfig(),
        &[
            "--config",
            config.to_str().unwrap(),
            &format!("--secure-port={port}"),
            "--bind-address=127.0.0.1",
            "--serve-http",
        ],
    );
    let bound = schedule(&client, "v1", 4).await;
    assert_eq!(nodes_of(&bound), ["alpha"], "{bound:?}");

    // The next build, pushed to the tag.
    reg.push(
        berth_artifacts::fixtures::FIXTURE_PREFER_LAST_NODE,
        repo,
        &creds,
    );
    berth.wait_log("the tag moved to", Duration::from_secs(60));
    berth.wait_log("configuration reloaded", Duration::from_secs(60));
    let bound = schedule(&client, "v2", 4).await;
    assert_eq!(nodes_of(&bound), ["zulu"], "{bound:?}");
    let (status, body) = http_get(port, "/plugins").await.unwrap();
    assert_eq!(status, 200);
    let view: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(view["generation"], 2, "{body}");
    let pref = view["profiles"][0]["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "NodePreference")
        .cloned()
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(pref["module"], reference.as_str(), "{body}");
    let last = std::fs::read(berth_artifacts::fixtures::FIXTURE_PREFER_LAST_NODE).unwrap();
    let hex: String = {
        use sha2::Digest as _;
        sha2::Sha256::digest(&last)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    assert_eq!(pref["sha256"], hex.as_str(), "{body}");
}
