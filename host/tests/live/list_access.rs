//! A kind Berth's account may not list (403) against a real API server (Kubernetes
//! 1.37.2, RBAC on): deploy/'s ClusterRole without its `resource.k8s.io` rules. Berth
//! still starts scheduling; a plain pod is bound; a pod with a device claim waits,
//! unschedulable, its status and event naming the kinds and the API server's words;
//! the log, `/readyz?verbose` and `/metrics` say which kinds and why. Once the role
//! grants them again, the retried lists succeed and the device pod is scheduled.

use crate::apiserver::*;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1 as rbac;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::time::Duration;

/// What the API server answers Berth's account for DeviceClasses.
const FORBIDDEN_CLASSES: &str = "deviceclasses.resource.k8s.io is forbidden: User \"system:serviceaccount:kube-system:berth\" cannot list resource \"deviceclasses\" in API group \"resource.k8s.io\" at the cluster scope";

/// The status message of a pod with a device claim while the DRA kinds are forbidden.
fn waiting_message() -> String {
    format!(
        "the scheduler may not list deviceclasses.resource.k8s.io, \
         resourceclaims.resource.k8s.io, resourceclaimtemplates.resource.k8s.io, \
         resourceslices.resource.k8s.io, devicetaintrules.resource.k8s.io, which \
         scheduling this pod needs: {FORBIDDEN_CLASSES}"
    )
}

/// Replaces deploy/'s ClusterRole `berth` with one without its `resource.k8s.io`
/// rules (an administrator who left DRA out): (the role as granted, as replaced).
async fn drop_dra_from_the_role(
    roles: &Api<rbac::ClusterRole>,
) -> (rbac::ClusterRole, rbac::ClusterRole) {
    // deploy/'s role without resource.k8s.io: an administrator who left DRA out.
    let granted = roles.get("berth").await.unwrap();
    let mut without_dra = granted.clone();
    let rules = without_dra.rules.take().unwrap_or_default();
    let before = rules.len();
    without_dra.rules = Some(
        rules
            .into_iter()
            .filter(|r| {
                !r.api_groups
                    .iter()
                    .flatten()
                    .any(|g| g == "resource.k8s.io")
            })
            .collect(),
    );
    assert!(
        without_dra.rules.as_ref().unwrap().len() < before,
        "deploy/'s role grants resource.k8s.io"
    );
    let without_dra = roles
        .replace("berth", &PostParams::default(), &without_dra)
        .await
        .unwrap();
    (granted, without_dra)
}

/// Creates node-a (with one device) and node-b, the device class and the claim `gpu`.
async fn create_nodes_device_and_claim(admin: &kube::Client) {
    create_nodes_a_and_b(admin).await;
    create_object(admin, gpu_class()).await;
    create_object(admin, gpu_slice("node-a", &[("gpu-0", "a100")])).await;
    create_object(
        admin,
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "gpu", "namespace": "default"},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}},
            ]}},
        }),
    )
    .await;
}

/// Creates the pods `plain` and `with-gpu` (which uses the claim `gpu`).
async fn create_plain_and_device_pods(pods: &Api<k8s::Pod>) {
    for p in [
        pod_json("plain", "1", json!({})),
        pod_json(
            "with-gpu",
            "1",
            json!({"spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                "containers": [{
                    "name": "c", "image": "registry.example/app:1",
                    "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
                }],
            }}),
        ),
    ] {
        pods.create(&PostParams::default(), &serde_json::from_value(p).unwrap())
            .await
            .unwrap();
    }
}

/// Asserts `plain` is bound and `with-gpu` waits, unschedulable, its condition and
/// its one FailedScheduling event naming the forbidden kinds.
async fn assert_only_the_device_pod_waits(
    admin: &kube::Client,
    pods: &Api<k8s::Pod>,
    berth: &Berth,
) {
    // The plain pod does not need them: bound.
    eventually(60, "plain bound", || async {
        let p = pods.get("plain").await.map_err(|e| e.to_string())?;
        node_of(&p).ok_or_else(|| format!("{:?}", pod_scheduled(&p)))
    })
    .await;
    // The device pod waits, and says for what.
    let message = waiting_message();
    let condition = eventually(60, "with-gpu unschedulable", || async {
        let p = pods.get("with-gpu").await.map_err(|e| e.to_string())?;
        match pod_scheduled(&p) {
            Some(c) if c.status == "False" => Ok(c),
            other => Err(format!("{other:?}, node {:?}", node_of(&p))),
        }
    })
    .await;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(
        condition.message.as_deref(),
        Some(message.as_str()),
        "{}",
        berth.log_text()
    );
    let failed: Vec<Event> = failed_scheduling_events(admin, "default", "with-gpu").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    assert_eq!(failed[0].note.as_deref(), Some(message.as_str()));
}

/// Asserts the log says once per kind that it may not be listed, with the API
/// server's words, and that `/readyz` (ready, verbose naming the kinds) and
/// `/metrics` say so too.
async fn assert_the_forbidden_kinds_reported(berth: &Berth, port: u16) {
    // Said once per kind in the log, with the API server's words.
    let log = berth.log_text();
    for kind in [
        "deviceclasses",
        "resourceclaims",
        "resourceclaimtemplates",
        "resourceslices",
        "devicetaintrules",
    ] {
        let said = format!("the scheduler may not list {kind}.resource.k8s.io:");
        assert_eq!(log.matches(&said).count(), 1, "{said}\n{log}");
    }
    assert!(log.contains(FORBIDDEN_CLASSES), "{log}");
    // Ready (it schedules), and /readyz?verbose and /metrics name the kinds.
    assert_eq!(http_get(port, "/readyz").await.unwrap(), (200, "ok".into()));
    let (status, body) = http_get(port, "/readyz?verbose").await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&format!(
            "[+]list-access ok: may not list deviceclasses.resource.k8s.io ({FORBIDDEN_CLASSES}), "
        )),
        "{body}"
    );
    let (_, metrics) = http_get(port, "/metrics").await.unwrap();
    for kind in ["deviceclasses", "resourceslices"] {
        let gauge = format!("berth_list_forbidden{{kind=\"{kind}.resource.k8s.io\"}} 1");
        assert!(metrics.contains(&gauge), "{gauge}\n{metrics}");
    }
}

/// Asserts, once the role grants `resource.k8s.io` again, that `with-gpu` is bound
/// to node-a with its claim allocated and reserved, and that `/readyz`, `/metrics`
/// and the log say the kinds list now.
async fn assert_the_device_pod_scheduled_once_granted(
    admin: &kube::Client,
    pods: &Api<k8s::Pod>,
    berth: &Berth,
    port: u16,
) {
    let node = eventually(90, "with-gpu bound", || async {
        let p = pods.get("with-gpu").await.map_err(|e| e.to_string())?;
        node_of(&p).ok_or_else(|| format!("{:?}", pod_scheduled(&p)))
    })
    .await;
    assert_eq!(node, "node-a", "{}", berth.log_text());
    let claim = get_object(
        admin,
        "resource.k8s.io/v1",
        "ResourceClaim",
        "resourceclaims",
        "gpu",
    )
    .await;
    let results = &claim["status"]["allocation"]["devices"]["results"];
    assert_eq!(results[0]["device"], "gpu-0", "{claim:#}");
    assert_eq!(
        claim["status"]["reservedFor"][0]["name"], "with-gpu",
        "{claim:#}"
    );
    let (_, body) = http_get(port, "/readyz?verbose").await.unwrap();
    assert!(body.contains("[+]list-access ok\n"), "{body}");
    let (_, metrics) = http_get(port, "/metrics").await.unwrap();
    let gauge = "berth_list_forbidden{kind=\"deviceclasses.resource.k8s.io\"} 0";
    assert!(metrics.contains(gauge), "{metrics}");
    assert!(
        berth
            .log_text()
            .contains("listed deviceclasses.resource.k8s.io: the scheduler may list it now"),
        "{}",
        berth.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_the_account_may_not_list_holds_only_the_pods_that_need_it() {
    let _serial = serial().await;
    let server = ApiServer::start_with(&["--rbac"]);
    let admin = server.client().await;
    apply_deploy_rbac(&admin).await;
    let roles: Api<rbac::ClusterRole> = Api::all(admin.clone());
    let (granted, without_dra) = drop_dra_from_the_role(&roles).await;
    create_nodes_device_and_claim(&admin).await;

    // Berth under deploy/'s ServiceAccount: it starts scheduling although five kinds
    // never list.
    let dir = server.dir.path();
    let port = free_port();
    let berth = Berth::run_in(
        dir,
        &dir.join("kubeconfig-sa"),
        &[
            "--leader-elect=false",
            &format!("--secure-port={port}"),
            "--bind-address=127.0.0.1",
            "--serve-http",
        ],
    );
    let pods: Api<k8s::Pod> = Api::namespaced(admin.clone(), "default");
    create_plain_and_device_pods(&pods).await;
    assert_only_the_device_pod_waits(&admin, &pods, &berth).await;
    assert_the_forbidden_kinds_reported(&berth, port).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(node_of(&pods.get("with-gpu").await.unwrap()), None);

    // The role grants resource.k8s.io again: the lists Berth retries succeed, and the
    // device pod is scheduled where the device is, its claim allocated.
    let mut restored = granted;
    restored.metadata.resource_version = without_dra.metadata.resource_version;
    roles
        .replace("berth", &PostParams::default(), &restored)
        .await
        .unwrap();
    assert_the_device_pod_scheduled_once_granted(&admin, &pods, &berth, port).await;
}
