//! Pod groups against a real API server (Kubernetes 1.37.2 serves PodGroup and
//! Workload in scheduling.k8s.io/v1beta1 with GenericWorkload on): a gang that does
//! not fit binds nothing and its PodGroup says why, as stored; a node added lets it
//! land whole, and the condition turns True.

use crate::apiserver::*;
use k8s_openapi::api::core::v1 as k8s;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The PodGroup's PodGroupInitiallyScheduled condition, once it has one.
async fn condition(admin: &kube::Client, name: &str) -> Option<Value> {
    let group = get_object(
        admin,
        "scheduling.k8s.io/v1beta1",
        "PodGroup",
        "podgroups",
        name,
    )
    .await;
    group["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodGroupInitiallyScheduled")
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_does_not_fit_binds_nothing_then_lands_whole_when_a_node_comes() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let admin = server.client().await;
    create_nodes(
        &admin,
        &[
            node("node-a", "2", "8Gi", 110),
            node("node-b", "2", "8Gi", 110),
        ],
    )
    .await;
    create_object(
        &admin,
        json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {
                "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
                "podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}],
            },
        }),
    )
    .await;
    create_object(
        &admin,
        json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {
                "workloadRef": {"workloadName": "train", "templateName": "workers"},
                "schedulingPolicy": {"gang": {"minCount": 3}},
            },
        }),
    )
    .await;
    let dir = server.dir.path();
    let berth = Berth::run_in(
        dir,
        &server.kubeconfig(),
        &[
            "--leader-elect=false",
            "--feature-gates=GenericWorkload=true",
        ],
    );
    let pods: Api<k8s::Pod> = Api::namespaced(admin.clone(), "default");
    // Three members of 2 CPUs on two nodes of 2: two would fit, the gang does not.
    for i in 0..3 {
        let p = pod_json(
            &format!("train-{i}"),
            "2",
            json!({"spec": {"schedulingGroup": {"podGroupName": "train"}}}),
        );
        pods.create(&PostParams::default(), &serde_json::from_value(p).unwrap())
            .await
            .unwrap();
    }
    let waiting = eventually(60, "PodGroupInitiallyScheduled=False", || {
        let admin = admin.clone();
        async move {
            match condition(&admin, "train").await {
                Some(c) if c["status"] == "False" => Ok(c),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    assert_eq!(waiting["reason"], "Unschedulable", "{waiting:#}");
    let message = waiting["message"].as_str().unwrap_or_default();
    assert!(message.contains("minCount"), "{waiting:#}");
    // The API server keeps no metadata.generation on PodGroups (1.37.2), so there is
    // none to observe: upstream's condition leaves it out too (zero, omitted).
    assert_eq!(waiting.get("observedGeneration"), None, "{waiting:#}");
    // Nothing of the gang bound, then or a moment later.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        bound_pods(&admin).await,
        BTreeMap::new(),
        "{}",
        berth.log_text()
    );
    // Each member says it waits for its group.
    for i in 0..3 {
        let p = pods.get(&format!("train-{i}")).await.unwrap();
        let c = pod_scheduled(&p).expect("a PodScheduled condition");
        assert_eq!(c.status, "False", "{c:?}");
        assert_eq!(c.reason.as_deref(), Some("Unschedulable"), "{c:?}");
    }

    create_nodes(&admin, &[node("node-c", "2", "8Gi", 110)]).await;
    let all = eventually(60, "the gang bound whole", || {
        let admin = admin.clone();
        async move {
            let b = bound_pods(&admin).await;
            if b.len() == 3 {
                Ok(b)
            } else {
                Err(format!("{b:?}"))
            }
        }
    })
    .await;
    let nodes: std::collections::BTreeSet<_> = all.values().collect();
    assert_eq!(nodes.len(), 3, "one member per node: {all:?}");
    eventually(30, "PodGroupInitiallyScheduled=True", || {
        let admin = admin.clone();
        async move {
            match condition(&admin, "train").await {
                Some(c) if c["status"] == "True" && c["reason"] == "Scheduled" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
}
