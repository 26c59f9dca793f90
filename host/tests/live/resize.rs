//! An in-place resize against a real API server (Kubernetes 1.37.2): the test plays
//! the kubelet, writing the container statuses and the resize condition a kubelet
//! would. While a resize is pending, a bound pod takes the larger of what its spec
//! asks and what was allocated; once the kubelet says the resize is infeasible, what
//! was allocated alone; a pod waiting for that room then lands.

use crate::apiserver::*;
use k8s_openapi::api::core::v1 as k8s;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;

/// The status a kubelet writes for the running pod `app`: one container with 1 CPU
/// allocated and actuated, and `conditions`.
fn kubelet_status(conditions: serde_json::Value) -> serde_json::Value {
    json!({"status": {
        "phase": "Running",
        "conditions": conditions,
        "containerStatuses": [{
            "name": "c", "image": "registry.example/app:1", "imageID": "", "ready": true,
            "restartCount": 0, "started": true,
            "state": {"running": {"startedAt": "2026-11-29T00:00:00Z"}},
            "allocatedResources": {"cpu": "1", "memory": "64Mi"},
            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
        }],
    }})
}

async fn unschedulable_message(pods: &Api<k8s::Pod>, name: &str) -> String {
    eventually(60, &format!("{name} unschedulable"), || {
        let pods = pods.clone();
        let name = name.to_owned();
        async move {
            let p = pods.get(&name).await.map_err(|e| e.to_string())?;
            match pod_scheduled(&p) {
                Some(c) if c.reason.as_deref() == Some("Unschedulable") => {
                    Ok(c.message.unwrap_or_default())
                }
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_resize_holds_its_room_until_the_kubelet_finds_it_infeasible() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let admin = server.client().await;
    create_nodes(&admin, &[node("node-a", "4", "8Gi", 110)]).await;
    let berth = Berth::run_in(
        server.dir.path(),
        &server.kubeconfig(),
        &["--leader-elect=false"],
    );
    let pods: Api<k8s::Pod> = Api::namespaced(admin.clone(), "default");
    let create = |name: &str, cpu: &str| {
        let (pods, p) = (pods.clone(), pod_json(name, cpu, json!({})));
        async move {
            pods.create(&PostParams::default(), &serde_json::from_value(p).unwrap())
                .await
                .unwrap()
        }
    };
    create("app", "1").await;
    eventually(60, "app bound", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("app").await.map_err(|e| e.to_string())?;
            node_of(&p).ok_or_else(|| "not yet".to_owned())
        }
    })
    .await;
    // Running with 1 CPU; then resized to 3 (the resize subresource, as kubectl does).
    let pp = PatchParams::default();
    pods.patch_status("app", &pp, &Patch::Merge(&kubelet_status(json!([]))))
        .await
        .unwrap();
    pods.patch_subresource(
        "resize",
        "app",
        &pp,
        &Patch::Strategic(json!({"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "3"}}},
        ]}})),
    )
    .await
    .unwrap();
    // Berth sees the resize before the next pod comes.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // 3 of 4 CPUs held while the resize is pending: 2 more do not fit.
    create("next", "2").await;
    let message = unschedulable_message(&pods, "next").await;
    assert!(message.contains("Insufficient cpu"), "{message}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(node_of(&pods.get("next").await.unwrap()), None);

    // The kubelet finds the resize infeasible: only the allocated CPU counts, and
    // "next" lands.
    let infeasible = json!([{
        "type": "PodResizePending", "status": "True", "reason": "Infeasible",
        "message": "Node didn't have enough capacity",
    }]);
    pods.patch_status("app", &pp, &Patch::Merge(&kubelet_status(infeasible)))
        .await
        .unwrap();
    let node = eventually(60, "next bound", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("next").await.map_err(|e| e.to_string())?;
            node_of(&p).ok_or_else(|| format!("{:?}", pod_scheduled(&p)))
        }
    })
    .await;
    assert_eq!(node, "node-a", "{}", berth.log_text());
}
