//! Pod-level resources (`spec.resources`, served by Kubernetes 1.37.2) against a real
//! API server: the pod's own requests count, not its containers' sum.

use crate::apiserver::*;
use k8s_openapi::api::core::v1 as k8s;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_level_requests_are_what_a_pod_takes_of_its_node() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let admin = server.client().await;
    create_nodes(
        &admin,
        &[
            node("node-a", "4", "8Gi", 110),
            node("node-b", "4", "8Gi", 110),
        ],
    )
    .await;
    let berth = Berth::run_in(
        server.dir.path(),
        &server.kubeconfig(),
        &["--leader-elect=false"],
    );
    let pods: Api<k8s::Pod> = Api::namespaced(admin.clone(), "default");
    // Each asks 3 CPUs for the pod as a whole; its two containers ask 100m each.
    for name in ["big-0", "big-1", "big-2"] {
        let p = pod_json(
            name,
            "100m",
            json!({"spec": {
                "resources": {"requests": {"cpu": "3", "memory": "1Gi"}},
                "containers": [
                    {"name": "a", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "100m"}}},
                    {"name": "b", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "100m"}}},
                ],
            }}),
        );
        pods.create(&PostParams::default(), &serde_json::from_value(p).unwrap())
            .await
            .unwrap();
    }
    let (placed, waiting) = eventually(60, "two placed, one unschedulable", || {
        let pods = pods.clone();
        async move {
            let mut placed = std::collections::BTreeMap::new();
            let mut waiting = Vec::new();
            for name in ["big-0", "big-1", "big-2"] {
                let p = pods.get(name).await.map_err(|e| e.to_string())?;
                match (node_of(&p), pod_scheduled(&p)) {
                    (Some(n), _) => {
                        placed.insert(name, n);
                    }
                    (None, Some(c)) if c.reason.as_deref() == Some("Unschedulable") => {
                        waiting.push((name, c.message.unwrap_or_default()))
                    }
                    _ => {}
                }
            }
            if placed.len() == 2 && waiting.len() == 1 {
                Ok((placed, waiting))
            } else {
                Err(format!("placed {placed:?}, waiting {waiting:?}"))
            }
        }
    })
    .await;
    let nodes: std::collections::BTreeSet<_> = placed.values().collect();
    assert_eq!(
        nodes.len(),
        2,
        "one per node: {placed:?}\n{}",
        berth.log_text()
    );
    assert!(waiting[0].1.contains("Insufficient cpu"), "{waiting:?}");
}
