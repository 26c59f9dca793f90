//! deploy/ on a current control plane (Kubernetes 1.37.2, tests/e2e/apiserver.sh):
//! its grants compared with what the API server bootstraps for kube-scheduler, and
//! Berth, under deploy/'s ServiceAccount alone, scheduling a plain pod, a pod with a
//! device claim made from a template by the real resourceclaim controller, and a gang.

use crate::apiserver::*;
use crate::common::workspace;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::rbac::v1 as rbac;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// One permission: API group, resource (with subresource), verb, and the object
/// names it is limited to ("" for all).
type Grant = (String, String, String, String);

/// Every (group, resource, verb, name) a list of rules grants.
fn grants(rules: &[rbac::PolicyRule]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for r in rules {
        let names = match r.resource_names.as_deref() {
            Some(n) if !n.is_empty() => n.to_vec(),
            _ => vec![String::new()],
        };
        for g in r.api_groups.iter().flatten() {
            for res in r.resources.iter().flatten() {
                for v in &r.verbs {
                    for n in &names {
                        out.insert((g.clone(), res.clone(), v.clone(), n.clone()));
                    }
                }
            }
        }
    }
    out
}

/// The documents of deploy/'s files, in name order, as JSON.
fn deploy_documents() -> Vec<(String, Value)> {
    let dir = workspace().join("deploy");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let docs = berth::yaml::documents(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for v in docs {
            if !v.is_null() {
                out.push((f.file_name().unwrap().to_string_lossy().into_owned(), v));
            }
        }
    }
    out
}

/// What deploy/'s ServiceAccount may do: its ClusterRole and leader-election Role
/// (the Role's Lease rules count as cluster-wide here: kube-scheduler's are in a
/// ClusterRole limited by name), and system:auth-delegator's reviews.
fn deploy_grants() -> BTreeSet<Grant> {
    let mut rules = Vec::new();
    for (file, v) in deploy_documents() {
        let kind = v["kind"].as_str().unwrap_or_default();
        let name = v["metadata"]["name"].as_str().unwrap_or_default();
        if (kind == "ClusterRole" && name == "berth")
            || (kind == "Role" && name == "berth-leader-election")
        {
            let r: Vec<rbac::PolicyRule> = serde_json::from_value(v["rules"].clone())
                .unwrap_or_else(|e| panic!("{file}: {name}: {e}"));
            rules.extend(r);
        }
    }
    assert!(!rules.is_empty(), "deploy/ has no ClusterRole named berth");
    let mut g = grants(&rules);
    // deploy/ binds system:auth-delegator, which grants exactly these two.
    for (group, res) in [
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ] {
        g.insert((group.into(), res.into(), "create".into(), String::new()));
    }
    g
}

/// The differences from kube-scheduler's roles deploy/ keeps, each as
/// deploy/10-rbac.yaml explains it: (group, resource, verbs).
const NOT_GRANTED: &[(&str, &str, &[&str])] = &[
    // core/v1 events: Berth writes events.k8s.io/v1 only, and never updates one.
    ("", "events", &["create", "patch", "update"]),
    ("events.k8s.io", "events", &["update"]),
    // Leader election is a plain Lease, read and replaced by name.
    ("coordination.k8s.io", "leases", &["list", "watch"]),
    (
        "coordination.k8s.io",
        "leasecandidates",
        &[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ],
    ),
    // Binds go to pods/binding; status changes are merge patches; VolumeBinding's
    // PreBind patches a claim and replaces a volume (system:volume-scheduler grants
    // both ways).
    ("", "bindings", &["create"]),
    ("", "pods/status", &["update"]),
    // `get` only where one object is read.
    ("", "nodes", &["get"]),
    ("", "namespaces", &["get"]),
    ("", "services", &["get"]),
    ("", "replicationcontrollers", &["get"]),
    ("apps", "replicasets", &["get"]),
    ("extensions", "replicasets", &["get", "list", "watch"]),
    ("apps", "statefulsets", &["get"]),
    ("policy", "poddisruptionbudgets", &["get"]),
    ("", "persistentvolumeclaims", &["get", "update"]),
    ("", "persistentvolumes", &["patch"]),
    ("storage.k8s.io", "storageclasses", &["get"]),
    ("storage.k8s.io", "csinodes", &["get"]),
    ("storage.k8s.io", "csidrivers", &["get"]),
    ("storage.k8s.io", "csistoragecapacities", &["get"]),
    ("resource.k8s.io", "deviceclasses", &["get"]),
    ("resource.k8s.io", "resourceslices", &["get"]),
    ("resource.k8s.io", "devicetaintrules", &["get"]),
    // VolumeAttachments are not read: volume limits count CSINode allocatable.
    (
        "storage.k8s.io",
        "volumeattachments",
        &["get", "list", "watch"],
    ),
    // Claims and PodGroups: merge patches, never updates; the status is read from
    // the claim itself.
    ("resource.k8s.io", "resourceclaims", &["update"]),
    (
        "resource.k8s.io",
        "resourceclaims/status",
        &["get", "list", "watch", "update"],
    ),
    ("resource.k8s.io", "resourceclaims/binding", &["update"]),
    ("scheduling.k8s.io", "podgroups/status", &["update"]),
];

/// What deploy/ grants beyond kube-scheduler's role: (group, resource, verbs).
const BEYOND: &[(&str, &str, &[&str])] = &[
    // Read with the other DRA kinds: simulate --from-cluster makes claims from them.
    (
        "resource.k8s.io",
        "resourceclaimtemplates",
        &["list", "watch"],
    ),
    // explain names a PodGroup's Workload.
    ("scheduling.k8s.io", "workloads", &["list", "watch"]),
];

fn expand(table: &[(&str, &str, &[&str])]) -> BTreeSet<(String, String, String)> {
    table
        .iter()
        .flat_map(|(g, r, verbs)| {
            verbs
                .iter()
                .map(move |v| (g.to_string(), r.to_string(), v.to_string()))
        })
        .collect()
}

/// Names dropped: kube-scheduler's lease rule names its Lease, deploy/'s Role names
/// Berth's; both are limited to one name.
fn unnamed(g: &BTreeSet<Grant>) -> BTreeSet<(String, String, String)> {
    g.iter()
        .map(|(g, r, v, _)| (g.clone(), r.clone(), v.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_grants_differ_from_the_bootstrap_kube_scheduler_roles_only_as_explained() {
    let _serial = serial().await;
    let server = ApiServer::start_with(&["--rbac"]);
    let admin = server.client().await;
    // What the API server grants kube-scheduler: every ClusterRole bound to its user
    // (system:kube-scheduler itself, and system:volume-scheduler).
    let bindings: Api<rbac::ClusterRoleBinding> = Api::all(admin.clone());
    let roles: Api<rbac::ClusterRole> = Api::all(admin);
    let bound: Vec<String> = eventually(30, "the bootstrap bindings of kube-scheduler", || {
        let bindings = bindings.clone();
        async move {
            let list = bindings
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let names: Vec<String> = list
                .items
                .iter()
                .filter(|b| {
                    b.subjects
                        .iter()
                        .flatten()
                        .any(|s| s.kind == "User" && s.name == "system:kube-scheduler")
                })
                .map(|b| b.role_ref.name.clone())
                .collect();
            if names.iter().any(|n| n == "system:kube-scheduler") {
                Ok(names)
            } else {
                Err(format!("bound so far: {names:?}"))
            }
        }
    })
    .await;
    let mut rules = Vec::new();
    for name in &bound {
        let role = roles
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        rules.extend(role.rules.unwrap_or_default());
    }
    let upstream = unnamed(&grants(&rules));
    let ours = unnamed(&deploy_grants());

    let missing: BTreeSet<_> = upstream.difference(&ours).cloned().collect();
    let extra: BTreeSet<_> = ours.difference(&upstream).cloned().collect();
    let (not_granted, beyond) = (expand(NOT_GRANTED), expand(BEYOND));
    let show = |s: &BTreeSet<(String, String, String)>| {
        s.iter()
            .map(|(g, r, v)| format!("  {g:?} {r} {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let unexplained_missing: BTreeSet<_> = missing.difference(&not_granted).cloned().collect();
    let unexplained_extra: BTreeSet<_> = extra.difference(&beyond).cloned().collect();
    let stale_missing: BTreeSet<_> = not_granted.difference(&missing).cloned().collect();
    let stale_extra: BTreeSet<_> = beyond.difference(&extra).cloned().collect();
    assert!(
        unexplained_missing.is_empty() && unexplained_extra.is_empty(),
        "deploy/10-rbac.yaml differs from what Kubernetes 1.37.2 grants kube-scheduler in ways \
         it does not explain:\nkube-scheduler may, deploy/ may not:\n{}\ndeploy/ may, \
         kube-scheduler may not:\n{}",
        show(&unexplained_missing),
        show(&unexplained_extra)
    );
    assert!(
        stale_missing.is_empty() && stale_extra.is_empty(),
        "differences explained that are no longer there (drop them from the test and \
         from deploy/10-rbac.yaml's comment):\n{}\n{}",
        show(&stale_missing),
        show(&stale_extra)
    );
}

/// Applies every document of deploy/'s files, in order, as `kubectl apply -f deploy/`
/// makes them (server-side apply, the admin's client).
async fn apply_deploy(client: &kube::Client) {
    for (file, v) in deploy_documents() {
        let obj: DynamicObject = serde_json::from_value(v.clone()).unwrap();
        let name = obj.metadata.name.clone().unwrap();
        let api = api_for(client, &obj).await;
        api.patch(
            &name,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("{file}: applying {name}: {e}"));
    }
}

/// The configuration file deploy/'s ConfigMap holds.
fn deploy_config() -> String {
    deploy_documents()
        .into_iter()
        .find(|(_, v)| v["kind"] == "ConfigMap" && v["metadata"]["name"] == "berth-config")
        .and_then(|(_, v)| v["data"]["config.yaml"].as_str().map(str::to_owned))
        .expect("deploy/ has the berth-config ConfigMap")
}

/// Creates node-a (with two devices) and node-b, the device class, the claim
/// template `one-gpu` and the PodGroup `trio` (a gang of three).
async fn create_nodes_devices_and_the_gang(admin: &kube::Client) {
    create_nodes_a_and_b(admin).await;
    // Two devices on node-a, of a class every device of the driver belongs to.
    create_object(admin, gpu_class()).await;
    create_object(
        admin,
        gpu_slice("node-a", &[("gpu-0", "a100"), ("gpu-1", "a100")]),
    )
    .await;
    create_object(admin, one_gpu_template()).await;
    create_object(
        admin,
        json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "trio", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        }),
    )
    .await;
}

/// Creates the pods for deploy/'s profile (`schedulerName: berth`): `plain`,
/// `with-gpu` (a claim from `one-gpu`) and the gang's `trio-0` to `trio-2`.
async fn create_plain_device_and_gang_pods(api: &Api<k8s::Pod>) {
    // deploy/'s profile serves `schedulerName: berth`.
    let ours = |mut extra: Value| {
        merge_json(&mut extra, json!({"spec": {"schedulerName": "berth"}}));
        extra
    };
    let mut pods = vec![
        pod_json("plain", "1", ours(json!({}))),
        pod_json(
            "with-gpu",
            "1",
            ours(json!({"spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{
                    "name": "c", "image": "registry.example/app:1",
                    "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
                }],
            }})),
        ),
    ];
    for i in 0..3 {
        pods.push(pod_json(
            &format!("trio-{i}"),
            "2",
            ours(json!({"spec": {"schedulingGroup": {"podGroupName": "trio"}}})),
        ));
    }
    for p in &pods {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(p.clone()).unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("creating pod {}: {e}", p["metadata"]["name"]));
    }
}

/// Waits until all five pods are bound, and asserts `with-gpu` is on node-a and the
/// gang spans both nodes.
async fn assert_every_pod_bound(admin: &kube::Client) {
    let bound: BTreeMap<String, String> = eventually(90, "every pod bound", || {
        let admin = admin.clone();
        async move {
            let pods = list_pods(&admin, "default").await?;
            let bound: BTreeMap<_, _> = pods
                .iter()
                .filter_map(|p| node_of(p).map(|n| (name_of(p), n)))
                .collect();
            if bound.len() == 5 {
                Ok(bound)
            } else {
                Err(format!("bound so far: {bound:?}"))
            }
        }
    })
    .await;
    assert_eq!(bound["with-gpu"], "node-a", "the devices are on node-a");
    // Three pods of 2 CPUs and two of 1 on two nodes of 4: the gang spans both.
    let trio: BTreeSet<_> = (0..3)
        .map(|i| bound[&format!("trio-{i}")].clone())
        .collect();
    assert_eq!(trio.len(), 2, "the gang's members: {bound:?}");
}

/// Asserts the claim the controller made for `with-gpu` is allocated one of node-a's
/// devices and reserved for the pod, as Berth wrote it.
async fn assert_the_pod_claim_allocated(admin: &kube::Client, api: &Api<k8s::Pod>) {
    // The claim the controller made: allocated one of node-a's devices and reserved
    // for the pod, as Berth wrote it.
    let pod = api.get("with-gpu").await.unwrap();
    let claim_name = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .and_then(|s| s.first())
        .and_then(|s| s.resource_claim_name.clone())
        .expect("the pod's claim is named in its status");
    let claim = get_object(
        admin,
        "resource.k8s.io/v1",
        "ResourceClaim",
        "resourceclaims",
        &claim_name,
    )
    .await;
    let results = &claim["status"]["allocation"]["devices"]["results"];
    assert_eq!(results.as_array().map(Vec::len), Some(1), "{claim:#}");
    assert_eq!(results[0]["pool"], "node-a", "{claim:#}");
    assert!(
        ["gpu-0", "gpu-1"].contains(&results[0]["device"].as_str().unwrap_or_default()),
        "{claim:#}"
    );
    let reserved = &claim["status"]["reservedFor"];
    assert_eq!(reserved[0]["name"], "with-gpu", "{claim:#}");
    assert_eq!(
        reserved[0]["uid"].as_str(),
        pod.metadata.uid.as_deref(),
        "{claim:#}"
    );
}

/// Waits until the PodGroup `trio` says PodGroupInitiallyScheduled=True.
async fn wait_the_gang_initially_scheduled(admin: &kube::Client) {
    // The gang's PodGroup says it was scheduled (written after the binds).
    eventually(30, "the PodGroup's PodGroupInitiallyScheduled=True", || {
        let admin = admin.clone();
        async move {
            let group = get_object(
                &admin,
                "scheduling.k8s.io/v1beta1",
                "PodGroup",
                "podgroups",
                "trio",
            )
            .await;
            let condition = group["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "PodGroupInitiallyScheduled")
                .cloned();
            match condition {
                Some(c) if c["status"] == "True" => Ok(()),
                _ => Err(format!("{group:#}")),
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_as_the_readme_applies_it_schedules_a_plain_pod_a_device_pod_and_a_gang() {
    let _serial = serial().await;
    let server = ApiServer::start_with(&["--rbac"]);
    // The resourceclaim controller makes the pod's claim from its template.
    server.start_controller_manager();
    let admin = server.client().await;
    apply_deploy(&admin).await;
    create_nodes_devices_and_the_gang(&admin).await;

    // Berth as deploy/'s ServiceAccount, with deploy/'s configuration.
    let dir = server.dir.path();
    let config = dir.join("deploy-config.yaml");
    std::fs::write(&config, deploy_config()).unwrap();
    let sa = dir.join("kubeconfig-sa");
    // With the gate deploy/30-deployment.yaml names for pod groups (this API server
    // serves them).
    let berth = Berth::run_in(
        dir,
        &sa,
        &[
            "--config",
            config.to_str().unwrap(),
            "--feature-gates=GenericWorkload=true",
        ],
    );

    let api: Api<k8s::Pod> = Api::namespaced(admin.clone(), "default");
    create_plain_device_and_gang_pods(&api).await;
    assert_every_pod_bound(&admin).await;
    assert_the_pod_claim_allocated(&admin, &api).await;
    wait_the_gang_initially_scheduled(&admin).await;

    // Nothing was refused to Berth's account along the way.
    let log = berth.log_text();
    assert!(
        !log.to_lowercase().contains("forbidden"),
        "berth's log names a refusal:\n{log}"
    );
}
