//! NodeDeclaredFeatures against a real API server (Kubernetes 1.37.2): the test plays
//! the kubelets, writing each node's `status.declaredFeatures` through the status
//! subresource. A pod whose spec needs a feature lands only on a node declaring it;
//! with none declaring it, it waits with kube-scheduler's words; a plain pod goes
//! anywhere; and a node that comes to declare the feature lets the waiting pod in.
//!
//! The API server refuses `hostNetwork` with `hostUsers: false` and drops
//! `bindMountOptions` unless its alpha gates UserNamespacesHostNetworkSupport and
//! VolumeBindMountOptions are on: tests/e2e/apiserver.sh turns them on.

use crate::apiserver::*;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::Duration;

/// What a kubelet would write: the node's declared features (kept sorted, as the API
/// server requires).
async fn declare(nodes: &Api<k8s::Node>, node: &str, features: &[&str]) {
    let status = json!({"status": {"declaredFeatures": features}});
    let n = nodes
        .patch_status(node, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("{node}'s status: {e}"));
    let stored = n
        .status
        .and_then(|s| s.declared_features)
        .unwrap_or_default();
    assert_eq!(stored, features, "{node}'s declared features as stored");
}

/// A pod whose one container carries `container` (merged into its spec).
fn pod_with(name: &str, spec: Value, container: Value) -> Value {
    let mut c = json!({
        "name": "c", "image": "registry.example/app:1",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    });
    merge_json(&mut c, container);
    let mut spec = spec;
    merge_json(&mut spec, json!({"containers": [c]}));
    pod_json(name, "100m", json!({"spec": spec}))
}

/// Needs RestartAllContainersOnContainerExits: a rule restarting the whole pod.
fn restarts_all(name: &str) -> Value {
    pod_with(
        name,
        json!({}),
        json!({
            "restartPolicy": "Never",
            "restartPolicyRules": [{
                "action": "RestartAllContainers",
                "exitCodes": {"operator": "In", "values": [42]},
            }],
        }),
    )
}

/// Needs VolumeBindMountOptions: a mount with bind mount options.
fn bind_mount_options(name: &str) -> Value {
    pod_with(
        name,
        json!({"volumes": [{"name": "scratch", "emptyDir": {}}]}),
        json!({"volumeMounts": [{
            "name": "scratch", "mountPath": "/scratch", "bindMountOptions": ["noexec"],
        }]}),
    )
}

/// Needs UserNamespacesHostNetworkSupport: the host's network in a user namespace.
fn user_namespace_on_host_network(name: &str) -> Value {
    pod_with(
        name,
        json!({"hostNetwork": true, "hostUsers": false}),
        json!({}),
    )
}

/// The pod's `PodScheduled` condition once it is False.
async fn unschedulable(pods: &Api<k8s::Pod>, name: &str) -> k8s::PodCondition {
    eventually(60, &format!("{name} unschedulable"), || async {
        let p = pods.get(name).await.map_err(|e| e.to_string())?;
        match pod_scheduled(&p) {
            Some(c) if c.status == "False" => Ok(c),
            other => Err(format!("{other:?}, node {:?}", node_of(&p))),
        }
    })
    .await
}

/// The notes of the pod's FailedScheduling events, once there is one.
async fn failed_scheduling(admin: &kube::Client, name: &str) -> Vec<String> {
    eventually(30, &format!("{name}'s FailedScheduling event"), || async {
        let notes: Vec<String> = Api::<Event>::namespaced(admin.clone(), "default")
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            })
            .map(|e| e.note.unwrap_or_default())
            .collect();
        if notes.is_empty() {
            Err("none yet".to_owned())
        } else {
            Ok(notes)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_needing_a_declared_feature_goes_only_where_a_kubelet_declares_it() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let admin = server.client().await;
    create_nodes(
        &admin,
        &[
            node("node-a", "4", "8Gi", 110),
            node("node-b", "4", "8Gi", 110),
            node("node-c", "4", "8Gi", 110),
        ],
    )
    .await;
    let nodes: Api<k8s::Node> = Api::all(admin.clone());
    // node-a's kubelet can restart all containers on a container's exit, node-b's
    // can apply bind mount options; node-c's declares nothing.
    declare(&nodes, "node-a", &["RestartAllContainersOnContainerExits"]).await;
    declare(&nodes, "node-b", &["VolumeBindMountOptions"]).await;
    let berth = Berth::run_in(
        server.dir.path(),
        &server.kubeconfig(),
        &["--leader-elect=false"],
    );
    let pods: Api<k8s::Pod> = Api::namespaced(admin.clone(), "default");
    let create = |p: Value| {
        let pods = pods.clone();
        async move {
            let p: k8s::Pod = serde_json::from_value(p).unwrap();
            pods.create(&PostParams::default(), &p)
                .await
                .unwrap_or_else(|e| panic!("creating {:?}: {e}", p.metadata.name))
        }
    };
    let userns = create(user_namespace_on_host_network("userns")).await;
    // The API server kept the fields the inference reads (an alpha gate off would
    // have refused or dropped them).
    let spec = userns.spec.unwrap();
    assert_eq!(
        (spec.host_network, spec.host_users),
        (Some(true), Some(false))
    );
    let mounts = create(bind_mount_options("mounts")).await;
    assert_eq!(
        mounts.spec.unwrap().containers[0]
            .volume_mounts
            .as_ref()
            .unwrap()[0]
            .bind_mount_options,
        Some(vec!["noexec".to_owned()])
    );
    for name in ["restarts-0", "restarts-1", "restarts-2"] {
        create(restarts_all(name)).await;
    }
    // Plain pods: several (each could go anywhere), and one held to the node that
    // declares nothing.
    for name in ["plain-0", "plain-1", "plain-2"] {
        create(pod_json(name, "100m", json!({}))).await;
    }
    create(pod_json(
        "plain-on-c",
        "100m",
        json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "node-c"}}}),
    ))
    .await;

    let bound = wait_bound(
        &admin,
        &[
            "mounts",
            "restarts-0",
            "restarts-1",
            "restarts-2",
            "plain-0",
            "plain-1",
            "plain-2",
            "plain-on-c",
        ],
    )
    .await;
    for name in ["restarts-0", "restarts-1", "restarts-2"] {
        assert_eq!(bound[name], "node-a", "{bound:?}");
    }
    assert_eq!(bound["mounts"], "node-b", "{bound:?}");
    assert_eq!(bound["plain-on-c"], "node-c", "{bound:?}");

    // No node declares UserNamespacesHostNetworkSupport: userns waits, and says why in
    // kube-scheduler 1.37.2's words (Filter's UnschedulableAndUnresolvable on every
    // node, so preemption cannot help either).
    let message = "0/3 nodes are available: 3 node(s) didn't match Pod's required features. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
    let condition = unschedulable(&pods, "userns").await;
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(
        condition.message.as_deref(),
        Some(message),
        "{}",
        berth.log_text()
    );
    let notes = failed_scheduling(&admin, "userns").await;
    assert_eq!(notes, [message]);
    assert_eq!(node_of(&pods.get("userns").await.unwrap()), None);

    // Another feature declared on node-c is no help; the pod stays where it is.
    declare(&nodes, "node-c", &["VolumeBindMountOptions"]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(node_of(&pods.get("userns").await.unwrap()), None);

    // node-c's kubelet comes to declare the feature: the node update queues userns
    // again, and it lands there, the one node that has it.
    declare(
        &nodes,
        "node-c",
        &["UserNamespacesHostNetworkSupport", "VolumeBindMountOptions"],
    )
    .await;
    let bound = wait_bound(&admin, &["userns"]).await;
    assert_eq!(bound["userns"], "node-c", "{bound:?}\n{}", berth.log_text());
    let p = pods.get("userns").await.unwrap();
    assert_eq!(pod_scheduled(&p).map(|c| c.status).as_deref(), Some("True"));
}
