//! Dynamic resource allocation end to end against Kubernetes 1.37.2's API server and
//! resourceclaim controller (no kubelet is needed for scheduling: the test publishes
//! the ResourceSlices a driver would). Claims made from templates by the controller,
//! a claim two pods share, a request with alternatives (firstAvailable), a device
//! tainted by a DeviceTaintRule, and a device freed when its pod is deleted: each
//! allocation and reservation Berth writes is read back as stored, and the API
//! server's validation never refuses one.

use crate::apiserver::*;
use k8s_openapi::api::core::v1 as k8s;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const CLASS: &str = GPU_CLASS;

/// A pod using the claims named (claim name in the pod => template or claim).
fn dra_pod(name: &str, claims: &[(&str, Value)]) -> Value {
    let pod_claims: Vec<Value> = claims
        .iter()
        .map(|(n, source)| {
            let mut c = json!({"name": n});
            merge_json(&mut c, source.clone());
            c
        })
        .collect();
    let uses: Vec<Value> = claims.iter().map(|(n, _)| json!({"name": n})).collect();
    pod_json(
        name,
        "100m",
        json!({"spec": {
            "resourceClaims": pod_claims,
            "containers": [{
                "name": "c", "image": "registry.example/app:1",
                "resources": {"requests": {"cpu": "100m"}, "claims": uses},
            }],
        }}),
    )
}

/// The claim of `pod` named `claim` in its spec, as stored: its name from the pod's
/// status (template claims) or the spec (claims named directly).
async fn claim_of(admin: &kube::Client, pod: &k8s::Pod, claim: &str) -> Value {
    let spec = pod.spec.as_ref().unwrap();
    let entry = spec
        .resource_claims
        .iter()
        .flatten()
        .find(|c| c.name == claim)
        .unwrap();
    let name = match &entry.resource_claim_name {
        Some(n) => n.clone(),
        None => pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .and_then(|s| s.iter().find(|s| s.name == claim))
            .and_then(|s| s.resource_claim_name.clone())
            .expect("the controller named the claim in the pod's status"),
    };
    get_object(
        admin,
        "resource.k8s.io/v1",
        "ResourceClaim",
        "resourceclaims",
        &name,
    )
    .await
}

/// The devices a claim was allocated: (request, pool, device).
fn results(claim: &Value) -> Vec<(String, String, String)> {
    claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("request"), s("pool"), s("device"))
        })
        .collect()
}

fn reserved_for(claim: &Value) -> Vec<String> {
    let mut v: Vec<String> = claim["status"]["reservedFor"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect();
    v.sort();
    v
}

/// A CEL selector of the devices of this model.
fn model(m: &str) -> Value {
    json!([{"cel": {"expression": format!("device.attributes['{CLASS}'].model == '{m}'")}}])
}

/// Creates node-a (two a100s) and node-b (one h100), the device class, the claim
/// `shared` (node-b's h100) and the templates `b200-or-a100` and `one-gpu`.
async fn create_devices_claims_and_templates(admin: &kube::Client) {
    create_nodes_a_and_b(admin).await;
    create_object(admin, gpu_class()).await;
    create_object(
        admin,
        gpu_slice("node-a", &[("gpu-0", "a100"), ("gpu-1", "a100")]),
    )
    .await;
    create_object(admin, gpu_slice("node-b", &[("gpu-0", "h100")])).await;
    // One claim for two pods: node-b's h100.
    create_object(
        admin,
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": "default"},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": CLASS, "selectors": model("h100")}},
            ]}},
        }),
    )
    .await;
    // Alternatives in order: a b200 (there is none), else an a100.
    create_object(
        admin,
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "b200-or-a100", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
                {"name": "b200", "deviceClassName": CLASS, "selectors": model("b200")},
                {"name": "a100", "deviceClassName": CLASS, "selectors": model("a100")},
            ]}]}}},
        }),
    )
    .await;
    create_object(admin, one_gpu_template()).await;
}

/// Creates a pod given as JSON.
async fn create_pod(pods: &Api<k8s::Pod>, p: Value) {
    pods.create(&PostParams::default(), &serde_json::from_value(p).unwrap())
        .await
        .unwrap();
}

/// Creates `share-0` and `share-1` (the claim `shared`) and `either` (a claim from
/// `b200-or-a100`), and asserts each is bound where its device is, its claim
/// allocated and reserved; the device `either` got.
async fn assert_shared_and_prioritized_claims(
    admin: &kube::Client,
    pods: &Api<k8s::Pod>,
) -> String {
    let shared = json!({"resourceClaimName": "shared"});
    create_pod(pods, dra_pod("share-0", &[("gpu", shared.clone())])).await;
    create_pod(pods, dra_pod("share-1", &[("gpu", shared)])).await;
    create_pod(
        pods,
        dra_pod(
            "either",
            &[("gpu", json!({"resourceClaimTemplateName": "b200-or-a100"}))],
        ),
    )
    .await;
    let b = wait_bound(admin, &["share-0", "share-1", "either"]).await;
    assert_eq!(b["share-0"], "node-b", "{b:?}");
    assert_eq!(b["share-1"], "node-b", "{b:?}");
    assert_eq!(b["either"], "node-a", "{b:?}");
    let claim = claim_of(admin, &pods.get("share-0").await.unwrap(), "gpu").await;
    assert_eq!(
        results(&claim),
        [("gpu".to_owned(), "node-b".to_owned(), "gpu-0".to_owned())],
        "{claim:#}"
    );
    assert_eq!(reserved_for(&claim), ["share-0", "share-1"], "{claim:#}");
    let either = pods.get("either").await.unwrap();
    let claim = claim_of(admin, &either, "gpu").await;
    let r = results(&claim);
    assert_eq!(r.len(), 1, "{claim:#}");
    assert_eq!(r[0].0, "gpu/a100", "the second alternative: {claim:#}");
    assert_eq!(r[0].1, "node-a", "{claim:#}");
    let either_device = r[0].2.clone();
    assert_eq!(reserved_for(&claim), ["either"], "{claim:#}");
    either_device
}

/// Taints node-a's a100 other than `either_device` by a DeviceTaintRule, creates
/// `late` (a claim from `one-gpu`), and asserts it waits, unschedulable.
async fn assert_late_waits_for_a_free_device(
    admin: &kube::Client,
    pods: &Api<k8s::Pod>,
    either_device: &str,
) {
    // node-a's other a100 tainted by a rule: a pod asking for any GPU finds none free
    // (node-b's is taken by the shared claim, not shareable by another claim).
    let other = if either_device == "gpu-0" {
        "gpu-1"
    } else {
        "gpu-0"
    };
    create_object(
        admin,
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": "maintenance"},
            "spec": {
                "deviceSelector": {"driver": CLASS, "pool": "node-a", "device": other},
                "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
            },
        }),
    )
    .await;
    // Berth sees the rule before the pod comes (its watch is as fast as the pod's).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    create_pod(
        pods,
        dra_pod(
            "late",
            &[("gpu", json!({"resourceClaimTemplateName": "one-gpu"}))],
        ),
    )
    .await;
    let waiting = eventually(60, "late unschedulable", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("late").await.map_err(|e| e.to_string())?;
            match pod_scheduled(&p) {
                Some(c) if c.reason.as_deref() == Some("Unschedulable") => Ok(c),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    assert_eq!(node_of(&pods.get("late").await.unwrap()), None);
    assert!(
        waiting
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("cannot allocate all claims"),
        "{waiting:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_from_templates_shared_prioritized_tainted_and_freed() {
    let _serial = serial().await;
    let server = ApiServer::start();
    server.start_controller_manager();
    let admin = server.client().await;
    create_devices_claims_and_templates(&admin).await;
    let berth = Berth::run_in(
        server.dir.path(),
        &server.kubeconfig(),
        &["--leader-elect=false"],
    );
    let pods: Api<k8s::Pod> = Api::namespaced(admin.clone(), "default");
    let either_device = assert_shared_and_prioritized_claims(&admin, &pods).await;
    assert_late_waits_for_a_free_device(&admin, &pods, &either_device).await;

    // "either" deleted: the controller deletes its claim, the a100 is free again, and
    // "late" gets it (not the tainted one).
    pods.delete("either", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let b = wait_bound(&admin, &["late"]).await;
    assert_eq!(b["late"], "node-a", "{b:?}");
    let claim = claim_of(&admin, &pods.get("late").await.unwrap(), "gpu").await;
    assert_eq!(
        results(&claim),
        [("gpu".to_owned(), "node-a".to_owned(), either_device.clone())],
        "the freed device, not the tainted one: {claim:#}"
    );
    assert_eq!(reserved_for(&claim), ["late"], "{claim:#}");

    let log = berth.log_text();
    assert!(
        !log.contains("refused") && !log.contains("Invalid"),
        "the API server refused a write:\n{log}"
    );
}
