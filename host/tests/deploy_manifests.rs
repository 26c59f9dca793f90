//! deploy/ is what an operator applies: every manifest must be exactly what its
//! Kubernetes type accepts (a misspelt field would be dropped silently by the API
//! server), the ConfigMap must hold a configuration Berth loads, and the Deployment
//! must run Berth with flags it knows and probe the endpoints it serves.

use crate::common;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn manifests() -> Vec<(PathBuf, Value)> {
    let dir = common::workspace().join("deploy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "deploy/ holds the manifests: {files:?}");
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let docs = berth::yaml::documents(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for v in docs {
            if !v.is_null() {
                out.push((f.clone(), v));
            }
        }
    }
    out
}

/// Parses `v` as `T` and checks nothing was lost on the way (an unknown or misspelt
/// field would be).
fn exact<T: serde::de::DeserializeOwned + serde::Serialize>(file: &Path, v: &Value) -> T {
    let t: T =
        serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let back = serde_json::to_value(&t).unwrap();
    assert_eq!(
        &back,
        v,
        "{}: a field is not part of {}",
        file.display(),
        std::any::type_name::<T>()
    );
    t
}

/// Parses every manifest of deploy/ into its Kubernetes type exactly, and asserts
/// which kinds there are; the ConfigMap and the Deployment.
fn parse_every_manifest() -> (ConfigMap, Deployment) {
    let mut kinds = Vec::new();
    let mut deployment = None;
    let mut config = None;
    for (file, v) in manifests() {
        let kind = v["kind"].as_str().unwrap_or_default().to_owned();
        match kind.as_str() {
            "ServiceAccount" => {
                exact::<ServiceAccount>(&file, &v);
            }
            "ClusterRole" => {
                exact::<ClusterRole>(&file, &v);
            }
            "ClusterRoleBinding" => {
                exact::<ClusterRoleBinding>(&file, &v);
            }
            "Role" => {
                exact::<Role>(&file, &v);
            }
            "RoleBinding" => {
                exact::<RoleBinding>(&file, &v);
            }
            "ConfigMap" => config = Some(exact::<ConfigMap>(&file, &v)),
            "Deployment" => deployment = Some(exact::<Deployment>(&file, &v)),
            other => panic!("{}: unexpected kind {other:?}", file.display()),
        }
        kinds.push(kind);
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            // Berth's own; berth-metrics-reader and berth-endpoints-reader for readers
            // of the endpoints; berth-reader (40-reader-rbac.yaml) for `explain
            // --kubeconfig` and `simulate --from-cluster`.
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            // Berth's own; system:auth-delegator for the endpoints' reviews.
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Role",
            "RoleBinding",
            "ServiceAccount"
        ]
    );
    (config.unwrap(), deployment.unwrap())
}

/// Asserts the ConfigMap's configuration `text` loads, with leader election on the
/// Lease the Role grants; its plugins' total memory limit.
fn assert_the_configuration_loads(text: &str) -> usize {
    let c = berth::config::Configuration::parse("deploy/20-configmap.yaml", text).unwrap();
    c.resolve_profiles("deploy/20-configmap.yaml", false)
        .unwrap();
    let plugin_memory = c
        .total_memory_limit()
        .expect("berth.totalMemoryLimit is set");
    let le = c
        .leader_election
        .unwrap()
        .resolve("deploy/20-configmap.yaml")
        .unwrap();
    assert!(le.enabled);
    assert_eq!(
        (le.name.as_str(), le.namespace.as_str()),
        ("berth", "kube-system")
    );
    plugin_memory
}

/// Asserts the registry credentials are an optional Secret mounted read-only where
/// the ConfigMap's example (`config_text`) names the docker config file.
fn assert_registry_credentials_mounted(
    pod: &k8s_openapi::api::core::v1::PodSpec,
    c: &k8s_openapi::api::core::v1::Container,
    config_text: &str,
) {
    // Registry credentials for `oci:` modules: an optional Secret, mounted read-only
    // where the ConfigMap's example names the docker config file.
    let volume = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "registry-credentials")
        .expect("a registry-credentials volume");
    let secret = volume.secret.as_ref().expect("a Secret volume");
    assert_eq!(secret.optional, Some(true));
    let item = &secret.items.as_ref().unwrap()[0];
    assert_eq!(
        (item.key.as_str(), item.path.as_str()),
        (".dockerconfigjson", "config.json")
    );
    let mount = c
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.name == "registry-credentials")
        .expect("the registry credentials mounted");
    assert_eq!(mount.read_only, Some(true));
    assert!(
        config_text.contains(&format!("dockerConfig: {}/config.json", mount.mount_path)),
        "the ConfigMap's example names the mounted file"
    );
}

/// Asserts the container's arguments are `run` and flags `berth run` accepts.
fn assert_berth_run_accepts_the_args(c: &k8s_openapi::api::core::v1::Container) {
    let mut args: Vec<&str> = c
        .args
        .as_ref()
        .unwrap()
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(args.remove(0), "run");
    let mut cli = vec!["run"];
    cli.extend(args);
    cli.push("--help");
    let out = common::berth(&cli);
    assert!(
        out.status.success(),
        "berth {cli:?}: {}",
        common::stderr(&out)
    );
}

/// Asserts the Deployment runs two replicas, locked down, within its memory limit
/// (`plugin_memory` and its request), probing the endpoints Berth serves, with the
/// registry credentials mounted and flags `berth run` accepts.
fn assert_the_deployment(d: Deployment, plugin_memory: usize, config_text: &str) {
    let spec = d.spec;
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("berth"));
    let c = &pod.containers[0];
    // The plugins' memory together, with the host's own (its request), fits the
    // container's limit.
    let resources = c.resources.as_ref().unwrap();
    let quantity = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| {
        berth::cluster::quantity::value(&q.0).unwrap() as usize
    };
    let limit = quantity(&resources.limits.as_ref().unwrap()["memory"]);
    let request = quantity(&resources.requests.as_ref().unwrap()["memory"]);
    assert!(
        plugin_memory + request <= limit,
        "berth.totalMemoryLimit {plugin_memory} and the host's {request} pass the container's {limit}"
    );
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        pod.security_context.as_ref().unwrap().run_as_non_root,
        Some(true)
    );
    let path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap()
            .path
            .clone()
            .unwrap()
    };
    assert_registry_credentials_mounted(&pod, c, config_text);
    assert_eq!(path(&c.liveness_probe), "/livez");
    assert_eq!(path(&c.readiness_probe), "/readyz");
    assert!(c.resources.as_ref().unwrap().limits.is_some());
    assert_berth_run_accepts_the_args(c);
}

#[test]
fn every_manifest_parses_into_its_kubernetes_type() {
    let (config, deployment) = parse_every_manifest();

    // The ConfigMap's configuration loads, with leader election on the Lease the Role
    // grants.
    let text = &config.data.as_ref().unwrap()["config.yaml"];
    let plugin_memory = assert_the_configuration_loads(text);

    // The Deployment: two replicas, locked down, probing the endpoints Berth serves,
    // with flags `berth run` accepts.
    assert_the_deployment(deployment, plugin_memory, text);
}

/// The ClusterRole named `name` in deploy/.
fn cluster_role(name: &str) -> ClusterRole {
    manifests()
        .into_iter()
        .filter(|(_, v)| v["kind"] == "ClusterRole" && v["metadata"]["name"] == name)
        .map(|(file, v)| exact::<ClusterRole>(&file, &v))
        .next()
        .unwrap_or_else(|| panic!("no ClusterRole {name} in deploy/"))
}

/// Whether `role` lets `verb` reach `resource` (a subresource as `podgroups/status`)
/// of the API group `group`.
fn grants(role: &ClusterRole, group: &str, resource: &str, verb: &str) -> bool {
    let has = |list: &Option<Vec<String>>, item: &str| {
        list.as_ref()
            .is_some_and(|l| l.iter().any(|x| x == item || x == "*"))
    };
    role.rules.iter().flatten().any(|r| {
        has(&r.api_groups, group)
            && has(&r.resources, resource)
            && r.verbs.iter().any(|v| v == verb)
    })
}

#[test]
fn the_roles_reach_the_pod_groups_and_workloads_as_the_kube_backend_does() {
    // `berth run` watches PodGroups, reads one again when its write was refused, and
    // patches its status; nothing else of them. It watches Workloads, and writes
    // nothing of them.
    let berth = cluster_role("berth");
    for verb in ["list", "watch"] {
        assert!(
            grants(&berth, "scheduling.k8s.io", "workloads", verb),
            "{verb} workloads"
        );
    }
    for verb in ["create", "update", "patch", "delete"] {
        assert!(
            !grants(&berth, "scheduling.k8s.io", "workloads", verb),
            "{verb} workloads"
        );
    }
    for verb in ["get", "list", "watch"] {
        assert!(
            grants(&berth, "scheduling.k8s.io", "podgroups", verb),
            "{verb} podgroups"
        );
    }
    assert!(grants(
        &berth,
        "scheduling.k8s.io",
        "podgroups/status",
        "patch"
    ));
    for verb in ["create", "update", "patch", "delete"] {
        assert!(
            !grants(&berth, "scheduling.k8s.io", "podgroups", verb),
            "{verb} podgroups"
        );
    }
    // The reader's snapshot lists them, and writes nothing anywhere.
    let reader = cluster_role("berth-reader");
    assert!(grants(&reader, "scheduling.k8s.io", "podgroups", "list"));
    assert!(grants(&reader, "scheduling.k8s.io", "workloads", "list"));
    for rule in reader.rules.iter().flatten() {
        let allowed: &[&str] = if rule.non_resource_urls.is_some() {
            &["get"]
        } else {
            &["list"]
        };
        assert!(
            rule.verbs.iter().all(|v| allowed.contains(&v.as_str())),
            "berth-reader: {rule:?}"
        );
    }
}
