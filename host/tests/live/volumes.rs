//! VolumeBinding end to end, against a real kube-apiserver and etcd and the real
//! PersistentVolume controller (kube-controller-manager running only the
//! persistentvolume-binder; tests/e2e/apiserver.sh builds and starts them): `berth
//! run`, with no more rights than deploy/'s RBAC grants, puts each pod of a
//! StatefulSet-like set on the node of a local volume that fits its claim
//! (WaitForFirstConsumer), writes the volume's claimRef and binds the pod only once
//! the controller has bound the claim; a pod whose claim fits no volume stays pending,
//! saying why; and a claim of a provisioning class gets the node Berth chose
//! (`volume.kubernetes.io/selected-node`), its pod bound once the test, playing the
//! provisioner, has made a volume there and the controller has bound it.

use crate::apiserver::*;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

const NS: &str = "default";
const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];
/// The local volumes (name, node, size): two on node-a, two on node-b, none on
/// node-c. The four claims below take all four, so a volume given to two claims, or
/// a pod put where its volume is not, leaves a claim without one.
const VOLUMES: [(&str, &str, &str); 4] = [
    ("local-a-0", "node-a", "1Gi"),
    ("local-a-1", "node-a", "1Gi"),
    ("local-b-0", "node-b", "1Gi"),
    ("local-b-1", "node-b", "2Gi"),
];
/// The pods `web-N`, each with its claim `data-web-N` of 1Gi.
const REPLICAS: usize = 4;
const PROVISIONER: &str = "example.com/berth-test-provisioner";
const BIND_CONFLICT: &str = "didn't find available persistent volumes to bind";

/// A Ready node labelled `kubernetes.io/hostname: NAME`.
fn ready_node(name: &str) -> k8s::Node {
    let mut n = node(name, "4", "8Gi", 110);
    let status = n.status.get_or_insert_with(Default::default);
    status.conditions = Some(vec![k8s::NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: Some("KubeletReady".into()),
        ..Default::default()
    }]);
    n
}

fn storage_class(name: &str, provisioner: &str) -> StorageClass {
    serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .unwrap()
}

fn local_volume(name: &str, node: &str, size: &str) -> k8s::PersistentVolume {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "local",
            "local": {"path": format!("/mnt/disks/{name}")},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]},
            ]}]}},
        },
    }))
    .unwrap()
}

fn claim(name: &str, size: &str) -> k8s::PersistentVolumeClaim {
    claim_of_class(name, size, "local")
}

fn claim_of_class(name: &str, size: &str, class: &str) -> k8s::PersistentVolumeClaim {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "resources": {"requests": {"storage": size}},
        },
    }))
    .unwrap()
}

/// A pod `NAME` of the set, mounting its claim `data-NAME`.
fn pod_with_claim(name: &str) -> k8s::Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "containers": [{
                "name": "c",
                "image": "registry.example/app:1",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }],
            "volumes": [{
                "name": "data",
                "persistentVolumeClaim": {"claimName": format!("data-{name}")},
            }],
        },
    }))
    .unwrap()
}

fn annotation<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn phase_of_claim(c: &k8s::PersistentVolumeClaim) -> &str {
    c.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn volume_name(c: &k8s::PersistentVolumeClaim) -> Option<&str> {
    c.spec
        .as_ref()?
        .volume_name
        .as_deref()
        .filter(|v| !v.is_empty())
}

/// What the logs say, for a failure's message.
fn logs(server: &ApiServer, berth: &Berth) -> String {
    let cm = std::fs::read_to_string(server.dir.path().join("controller-manager.log"))
        .unwrap_or_default();
    let cm: Vec<&str> = cm.lines().filter(|l| !l.contains("is disabled")).collect();
    format!(
        "--- berth ---\n{}\n--- kube-controller-manager ---\n{}",
        berth.log_text(),
        cm.join("\n")
    )
}

/// Creates the storage classes `local` (no provisioner) and `provisioned` (the test
/// plays its provisioner), and the local volumes of [`VOLUMES`].
async fn create_classes_and_volumes(admin: &kube::Client) {
    // Local volumes made beforehand, and a class whose volumes a provisioner makes
    // on the node the scheduler selects (the test plays that provisioner).
    for class in [
        storage_class("local", "kubernetes.io/no-provisioner"),
        storage_class("provisioned", PROVISIONER),
    ] {
        Api::<StorageClass>::all(admin.clone())
            .create(&PostParams::default(), &class)
            .await
            .expect("create a storage class");
    }
    let pvs: Api<k8s::PersistentVolume> = Api::all(admin.clone());
    for (name, node, size) in VOLUMES {
        pvs.create(&PostParams::default(), &local_volume(name, node, size))
            .await
            .expect("create a persistent volume");
    }
}

/// Creates the set's claims and pods (`names`), and `huge`, whose claim no volume is
/// big enough for.
async fn create_set_and_huge(admin: &kube::Client, names: &[String]) {
    let pvcs: Api<k8s::PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    for name in names {
        pvcs.create(
            &PostParams::default(),
            &claim(&format!("data-{name}"), "1Gi"),
        )
        .await
        .expect("create a claim");
    }
    pvcs.create(&PostParams::default(), &claim("data-huge", "10Gi"))
        .await
        .expect("create a claim");
    let pods: Vec<k8s::Pod> = names.iter().map(|n| pod_with_claim(n)).collect();
    create_pods(admin, NS, &pods).await;
    create_pods(admin, NS, &[pod_with_claim("huge")]).await;
}

/// Waits until every pod of the set (`names`) is bound, failing if one is bound
/// before its claim; the set's pods then, pod -> node.
async fn wait_set_bound(
    admin: &kube::Client,
    names: &[String],
    server: &ApiServer,
    berth: &Berth,
) -> BTreeMap<String, String> {
    let pvcs: Api<k8s::PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    // Every pod of the set bound; a pod is bound only after its claim is (PreBind
    // waits for the controller): pods are listed before claims, and a bound claim
    // stays bound, so a bound pod whose claim is not yet Bound is a pod bound too
    // early.
    eventually(60, "every pod of the set bound", || async {
        let listed = list_pods(admin, NS).await?;
        let claims = pvcs
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items;
        let claims: BTreeMap<String, &k8s::PersistentVolumeClaim> = claims
            .iter()
            .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
            .collect();
        let mut bound = BTreeMap::new();
        for p in listed.iter().filter(|p| names.contains(&name_of(p))) {
            let Some(node) = node_of(p) else { continue };
            let c = claims[&format!("data-{}", name_of(p))];
            assert!(
                phase_of_claim(c) == "Bound" && volume_name(c).is_some(),
                "{} was bound to {node} before its claim was: {:?}\n{}",
                name_of(p),
                c.status,
                logs(server, berth)
            );
            bound.insert(name_of(p), node);
        }
        if bound.len() == names.len() {
            Ok(bound)
        } else {
            Err(format!(
                "{} of {} bound ({bound:?})\n{}",
                bound.len(),
                names.len(),
                logs(server, berth)
            ))
        }
    })
    .await
}

/// Asserts each bound pod of the set is on the node of its claim's volume, bound by
/// the controller to the volume Berth chose, no volume shared, two pods on each node
/// with volumes.
async fn assert_set_on_its_volumes(admin: &kube::Client, bound: &BTreeMap<String, String>) {
    let pvcs: Api<k8s::PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let pvs: Api<k8s::PersistentVolume> = Api::all(admin.clone());
    let node_of_volume: BTreeMap<&str, &str> = VOLUMES.iter().map(|(v, n, _)| (*v, *n)).collect();
    // Each pod is on the node of the volume its claim is bound to, the claim bound by
    // the controller (bind-completed) to the volume Berth chose (the volume's claimRef
    // names the claim, UID included), and no volume went to two claims.
    let claims = pvcs.list(&ListParams::default()).await.unwrap().items;
    let volumes = pvs.list(&ListParams::default()).await.unwrap().items;
    let volumes: BTreeMap<String, &k8s::PersistentVolume> = volumes
        .iter()
        .map(|v| (v.metadata.name.clone().unwrap_or_default(), v))
        .collect();
    let mut used = BTreeSet::new();
    for (pod, node) in bound {
        let c = claims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(format!("data-{pod}").as_str()))
            .unwrap();
        assert_eq!(phase_of_claim(c), "Bound", "{pod}: {c:?}");
        assert_eq!(
            annotation(&c.metadata, "pv.kubernetes.io/bind-completed"),
            Some("yes"),
            "{pod}: {c:?}"
        );
        let v = volume_name(c).unwrap();
        assert_eq!(
            node_of_volume.get(v).copied(),
            Some(node.as_str()),
            "{pod} is on {node}, its claim bound to {v}"
        );
        assert!(used.insert(v.to_owned()), "{v} bound to two claims");
        let pv = volumes[v];
        let status = pv.status.as_ref().and_then(|s| s.phase.as_deref());
        assert_eq!(status, Some("Bound"), "{v}: {pv:?}");
        let claim_ref = pv.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
        assert_eq!(
            (claim_ref.namespace.as_deref(), claim_ref.name.as_deref()),
            (Some(NS), c.metadata.name.as_deref()),
            "{v}: {pv:?}"
        );
        assert_eq!(claim_ref.uid, c.metadata.uid, "{v}: {pv:?}");
    }
    assert_eq!(used.len(), VOLUMES.len());
    // No pod on node-c, which has no volume; two on each of the others.
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for n in bound.values() {
        *per_node.entry(n).or_default() += 1;
    }
    assert_eq!(
        per_node,
        BTreeMap::from([("node-a", 2), ("node-b", 2)]),
        "{bound:?}"
    );
}

/// Asserts `huge`, whose claim fits nowhere, stays pending with FailedScheduling and
/// its PodScheduled condition saying why, its claim untouched.
async fn assert_huge_pending(admin: &kube::Client, server: &ApiServer, berth: &Berth) {
    let pvcs: Api<k8s::PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    // The pod whose claim fits nowhere: pending, with FailedScheduling and the
    // PodScheduled condition saying why; its claim untouched.
    let pod_api: Api<k8s::Pod> = Api::namespaced(admin.clone(), NS);
    let condition = eventually(30, "huge's PodScheduled condition", || async {
        let p = pod_api.get("huge").await.map_err(|e| e.to_string())?;
        match pod_scheduled(&p) {
            Some(c) if c.status == "False" => Ok(c),
            other => Err(format!("{other:?}\n{}", logs(server, berth))),
        }
    })
    .await;
    // VolumeBinding's Filter answers UnschedulableAndUnresolvable: preemption cannot
    // help, and DefaultPreemption says so, as upstream.
    let message = format!(
        "0/3 nodes are available: 3 node(s) {BIND_CONFLICT}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(condition.message.as_deref(), Some(message.as_str()));
    let failed = failed_scheduling_events(admin, NS, "huge").await;
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    assert_eq!(failed[0].note.as_deref(), Some(message.as_str()));
    let huge = pod_api.get("huge").await.unwrap();
    assert_eq!(node_of(&huge), None);
    let c = pvcs.get("data-huge").await.unwrap();
    assert_eq!(phase_of_claim(&c), "Pending", "{c:?}");
    assert_eq!(volume_name(&c), None, "{c:?}");
    assert_eq!(
        annotation(&c.metadata, "volume.kubernetes.io/selected-node"),
        None,
        "{c:?}"
    );
}

/// Creates a claim of the `provisioned` class and its pod, and asserts Berth selects a
/// node for the claim and binds the pod there only once the test, playing the
/// provisioner, has made the volume and the controller has bound it.
async fn provisioned_claim_bound_where_berth_selected(
    admin: &kube::Client,
    server: &ApiServer,
    berth: &Berth,
) {
    let pvcs: Api<k8s::PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let pvs: Api<k8s::PersistentVolume> = Api::all(admin.clone());
    let pod_api: Api<k8s::Pod> = Api::namespaced(admin.clone(), NS);
    // A claim to provision: Berth selects a node for it (a merge patch of the
    // claim) and waits; the pod is not bound while no volume exists.
    pvcs.create(
        &PostParams::default(),
        &claim_of_class("data-provisioned", "1Gi", "provisioned"),
    )
    .await
    .expect("create a claim");
    create_pods(admin, NS, &[pod_with_claim("provisioned")]).await;
    let (selected, uid) = eventually(30, "a node selected for data-provisioned", || async {
        let c = pvcs
            .get("data-provisioned")
            .await
            .map_err(|e| e.to_string())?;
        match annotation(&c.metadata, "volume.kubernetes.io/selected-node") {
            Some(n) => Ok((n.to_owned(), c.metadata.uid.clone().unwrap())),
            None => Err(format!("{:?}\n{}", c.metadata, logs(server, berth))),
        }
    })
    .await;
    assert!(NODES.contains(&selected.as_str()), "{selected}");
    // The provisioner's part: the PersistentVolume, on that node, made for the claim.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let p = pod_api.get("provisioned").await.unwrap();
    assert_eq!(node_of(&p), None, "bound before its claim");
    pvs.create(&PostParams::default(), &provisioned_volume(&selected, uid))
        .await
        .expect("create the provisioned volume");
    let node = eventually(60, "provisioned bound", || async {
        let p = pod_api
            .get("provisioned")
            .await
            .map_err(|e| e.to_string())?;
        node_of(&p).ok_or_else(|| format!("pending\n{}", logs(server, berth)))
    })
    .await;
    assert_eq!(node, selected);
    let c = pvcs.get("data-provisioned").await.unwrap();
    assert_eq!(phase_of_claim(&c), "Bound", "{c:?}");
    assert_eq!(volume_name(&c), Some("provisioned-pv"), "{c:?}");
}

/// The volume the provisioner makes for `data-provisioned` (UID `uid`) on `node`.
fn provisioned_volume(node: &str, uid: String) -> k8s::PersistentVolume {
    let mut made = local_volume("provisioned-pv", node, "1Gi");
    made.metadata.annotations = Some(
        [(
            "pv.kubernetes.io/provisioned-by".to_owned(),
            PROVISIONER.to_owned(),
        )]
        .into(),
    );
    let spec = made.spec.as_mut().unwrap();
    spec.storage_class_name = Some("provisioned".into());
    spec.persistent_volume_reclaim_policy = Some("Delete".into());
    spec.claim_ref = Some(k8s::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: Some(NS.into()),
        name: Some("data-provisioned".into()),
        uid: Some(uid),
        ..Default::default()
    });
    made
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_volumes_bound_by_the_pv_controller_and_a_claim_that_fits_nowhere() {
    let started = std::time::Instant::now();
    let _serial = serial().await;
    let server = ApiServer::start_with(&["--rbac"]);
    server.start_controller_manager();
    let admin = server.client().await;
    apply_deploy_rbac(&admin).await;
    create_nodes(&admin, &NODES.map(ready_node)).await;
    create_classes_and_volumes(&admin).await;

    // Berth as its ServiceAccount, with deploy/'s role.
    let sa = server.dir.path().join("kubeconfig-sa");
    let berth = Berth::run_in(server.dir.path(), &sa, &[]);

    // The set's claims and pods, and a pod whose claim no volume is big enough for.
    let names: Vec<String> = (0..REPLICAS).map(|i| format!("web-{i}")).collect();
    create_set_and_huge(&admin, &names).await;
    let bound = wait_set_bound(&admin, &names, &server, &berth).await;
    assert_set_on_its_volumes(&admin, &bound).await;
    assert_huge_pending(&admin, &server, &berth).await;
    provisioned_claim_bound_where_berth_selected(&admin, &server, &berth).await;

    let log = berth.log_text();
    assert!(!log.to_lowercase().contains("forbidden"), "{log}");
    eprintln!("live_volumes: {:?}", started.elapsed());
}

/// 64 pods whose claims wait for a provisioner that never comes (their PreBind
/// waits, up to `bindTimeoutSeconds`, for the claims to be bound) do not hold up the
/// binds of 500 others: each waiting binding cycle lets another binding thread take
/// its place. Deleting the 64 then ends their waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_cycles_waiting_for_a_provisioner_do_not_hold_up_other_binds() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let admin = server.client().await;
    let nodes: Vec<k8s::Node> = (0..4)
        .map(|i| node(&format!("big-{i}"), "64", "256Gi", 200))
        .collect();
    create_nodes(&admin, &nodes).await;
    Api::<StorageClass>::all(admin.clone())
        .create(
            &PostParams::default(),
            &storage_class("unprovisioned", "example.com/nobody-provisions"),
        )
        .await
        .expect("create a storage class");
    let config = server.dir.path().join("fast-client.yaml");
    std::fs::write(
        &config,
        "apiVersion: berth.dev/v1alpha1\nkind: BerthConfiguration\nclientConnection: {qps: 500, burst: 500}\n",
    )
    .unwrap();
    let berth = Berth::run_in(
        server.dir.path(),
        &server.kubeconfig(),
        &["--leader-elect=false", "--config", config.to_str().unwrap()],
    );

    let pvcs: Api<k8s::PersistentVolumeClaim> = Api::namespaced(admin.clone(), NS);
    let waiting: Vec<String> = (0..64).map(|i| format!("db-{i}")).collect();
    for name in &waiting {
        pvcs.create(
            &PostParams::default(),
            &claim_of_class(&format!("data-{name}"), "1Gi", "unprovisioned"),
        )
        .await
        .expect("create a claim");
    }
    let pods: Vec<k8s::Pod> = waiting.iter().map(|n| pod_with_claim(n)).collect();
    create_pods(&admin, NS, &pods).await;
    // Each PreBind selects a node for its claim, then waits for the claim's volume.
    eventually(60, "a node selected for every claim", || async {
        let claims = pvcs
            .list(&ListParams::default().labels("app=web"))
            .await
            .map_err(|e| e.to_string())?;
        let selected = claims
            .items
            .iter()
            .filter(|c| annotation(&c.metadata, "volume.kubernetes.io/selected-node").is_some())
            .count();
        if selected == 64 {
            Ok(())
        } else {
            Err(format!("{selected} of 64 claims have a selected node"))
        }
    })
    .await;

    let others: Vec<k8s::Pod> = (0..500)
        .map(|i| pod(&format!("web-{i:03}"), "10m", "default-scheduler"))
        .collect();
    create_pods(&admin, NS, &others).await;
    eventually(120, "the other pods bound", || async {
        let all = list_pods(&admin, NS).await?;
        let bound = all
            .iter()
            .filter(|p| name_of(p).starts_with("web-") && node_of(p).is_some())
            .count();
        if bound == 500 {
            Ok(())
        } else {
            Err(format!("{bound} of 500 bound\n{}", berth.log_text()))
        }
    })
    .await;
    let all = list_pods(&admin, NS).await.unwrap();
    let bound_waiting: Vec<String> = all
        .iter()
        .filter(|p| name_of(p).starts_with("db-") && node_of(p).is_some())
        .map(name_of)
        .collect();
    assert!(
        bound_waiting.is_empty(),
        "bound without their volumes: {bound_waiting:?}"
    );

    // Deleted, the 64 end their waits: Berth says each binding cycle ended.
    let api: Api<k8s::Pod> = Api::namespaced(admin.clone(), NS);
    for name in &waiting {
        api.delete(name, &kube::api::DeleteParams::default())
            .await
            .expect("delete a waiting pod");
    }
    eventually(60, "the waits ended", || async {
        let log = berth.log_text();
        let ended = log.matches("deleted while being bound").count();
        if ended == 64 {
            Ok(())
        } else {
            Err(format!("{ended} of 64 waits ended"))
        }
    })
    .await;
}
