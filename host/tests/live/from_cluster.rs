//! `berth explain --kubeconfig` and `berth simulate --from-cluster` against a real API
//! server: they read the cluster (and nothing else: no write reaches it), and answer
//! as the embedded commands answer on the same objects written to a file.

use crate::apiserver::*;
use crate::common::{berth, stderr, stdout};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::rbac::v1 as rbac;
use kube::api::{Api, ListParams, PostParams};

const NS: &str = "default";

/// Two nodes, a pod running on the smaller one, a pending pod that only the bigger
/// one has room for, and a PriorityClass the manifests on top name.
async fn populate(client: &kube::Client) {
    create_nodes(
        client,
        &[node("n1", "2", "4Gi", 10), node("n2", "4", "8Gi", 10)],
    )
    .await;
    let mut running = pod("running", "1500m", "default-scheduler");
    running.spec.as_mut().unwrap().node_name = Some("n1".into());
    create_pods(client, NS, &[running, pod("big", "1", "default-scheduler")]).await;
    let high: k8s_openapi::api::scheduling::v1::PriorityClass =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }))
        .unwrap();
    Api::<k8s_openapi::api::scheduling::v1::PriorityClass>::all(client.clone())
        .create(&PostParams::default(), &high)
        .await
        .unwrap();
}

/// The cluster's nodes, pods and PriorityClasses as one JSON manifest stream, as
/// `kubectl get -o json` would give them (typed objects carry apiVersion and kind).
async fn cluster_as_manifest(client: &kube::Client) -> String {
    let mut out = String::new();
    let lp = ListParams::default();
    for n in Api::<k8s::Node>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        out.push_str(&serde_json::to_string(&n).unwrap());
        out.push('\n');
    }
    for c in Api::<k8s_openapi::api::scheduling::v1::PriorityClass>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        out.push_str(&serde_json::to_string(&c).unwrap());
        out.push('\n');
    }
    for p in Api::<k8s::Pod>::namespaced(client.clone(), NS)
        .list(&lp)
        .await
        .unwrap()
    {
        out.push_str(&serde_json::to_string(&p).unwrap());
        out.push('\n');
    }
    out
}

/// A pod on top of the cluster: it names the cluster's PriorityClass, and fits only
/// on n2 once `big` (priority 0) has gone from there: it preempts big.
const LATE: &str = "
apiVersion: v1
kind: Pod
metadata: {name: late, namespace: default}
spec:
  priorityClassName: high
  containers:
  - name: c
    image: registry.example/app:1
    resources: {requests: {cpu: 3500m, memory: 64Mi}}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_simulate_read_a_live_cluster_as_the_embedded_ones_read_its_objects() {
    let _serial = serial().await;
    let api = ApiServer::start();
    let client = api.client().await;
    populate(&client).await;
    let kubeconfig = api.kubeconfig();
    let kc = kubeconfig.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects.json");
    std::fs::write(&objects, cluster_as_manifest(&client).await).unwrap();
    let late = dir.path().join("late.yaml");
    std::fs::write(&late, LATE).unwrap();

    // explain: the live pod, against the live cluster.
    let out = berth(&["explain", "--kubeconfig", kc, "--pod", "default/big"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let n1 = text.lines().find(|l| l.starts_with("n1")).unwrap_or("");
    assert!(n1.contains("Insufficient cpu"), "{text}");
    assert!(
        stderr(&out).contains("read 2 node(s) and 2 pod(s) (1 pending)"),
        "{}",
        stderr(&out)
    );
    // The same answer, to the byte, as explain on the same objects in a file.
    let live = berth(&[
        "explain",
        "--kubeconfig",
        kc,
        "--pod",
        "default/big",
        "--output",
        "json",
    ]);
    let embedded = berth(&[
        "explain",
        objects.to_str().unwrap(),
        "--pod",
        "default/big",
        "--output",
        "json",
    ]);
    assert!(embedded.status.success(), "{}", stderr(&embedded));
    assert_eq!(stdout(&live), stdout(&embedded));

    // A pod the cluster does not have as pending: named, with the server.
    let out = berth(&["explain", "--kubeconfig", kc, "--pod", "default/running"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no pending pod default/running in the cluster at https://"),
        "{}",
        stderr(&out)
    );

    // simulate: the cluster's pending pod and a manifest on top, which names the
    // cluster's PriorityClass; as the embedded run on the same objects.
    let live = berth(&[
        "simulate",
        "--from-cluster",
        "--kubeconfig",
        kc,
        late.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(live.status.success(), "{}", stderr(&live));
    let embedded = berth(&[
        "simulate",
        objects.to_str().unwrap(),
        late.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(embedded.status.success(), "{}", stderr(&embedded));
    let report = |o: &std::process::Output| {
        let mut v: serde_json::Value = serde_json::from_str(&stdout(o)).unwrap();
        v["summary"]["seconds"] = serde_json::Value::Null;
        v
    };
    let (live, embedded) = (report(&live), report(&embedded));
    assert_eq!(live, embedded);
    let late = live["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "late")
        .cloned();
    // big lands on n2 (n1 has half a CPU left); late, 3.5 CPUs at priority 1000, then
    // fits only on n2, where it preempts big.
    assert_eq!(late.map(|p| p["node"].clone()), Some("n2".into()), "{live}");
    assert_eq!(live["evicted"][0]["name"], "big", "{live}");

    // Nothing was written: big is still pending, and no event was recorded.
    let big = Api::<k8s::Pod>::namespaced(client.clone(), NS)
        .get("big")
        .await
        .unwrap();
    assert_eq!(node_of(&big), None);
    assert!(big.status.and_then(|s| s.conditions).is_none());
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(events.items.is_empty(), "{:?}", events.items);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_only_role_of_deploy_is_all_a_snapshot_needs() {
    let _serial = serial().await;
    let api = ApiServer::start_with(&["--rbac"]);
    let client = api.client().await;
    populate(&client).await;
    // A user with no role at all: the kubeconfig of the static token berth-nobody.
    let admin = std::fs::read_to_string(api.kubeconfig()).unwrap();
    assert!(admin.contains("berth-admin-token"));
    let nobody = api.dir.path().join("kubeconfig-nobody");
    std::fs::write(
        &nobody,
        admin.replace("berth-admin-token", "berth-nobody-token"),
    )
    .unwrap();
    let nobody = nobody.to_str().unwrap();

    let out = berth(&["explain", "--kubeconfig", nobody, "--pod", "default/big"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("cannot list pods: ") && err.contains("forbidden"),
        "{err}"
    );

    // deploy/'s reader role, bound to that user, is enough.
    let text =
        std::fs::read_to_string(crate::common::workspace().join("deploy/40-reader-rbac.yaml"))
            .unwrap();
    let role: rbac::ClusterRole = berth::yaml::from_str(&text).unwrap();
    Api::<rbac::ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: rbac::ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "nobody-reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "berth-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "berth-e2e-nobody"}],
    }))
    .unwrap();
    Api::<rbac::ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let out = eventually(30, "the reader role to take effect", || async {
        let out = berth(&["explain", "--kubeconfig", nobody, "--pod", "default/big"]);
        if out.status.success() {
            Ok(out)
        } else {
            Err(stderr(&out))
        }
    })
    .await;
    assert!(
        stdout(&out).contains("Insufficient cpu"),
        "{}",
        stdout(&out)
    );
    let out = berth(&["simulate", "--kubeconfig", nobody, "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
}
