//! Feature gates as kube-scheduler 1.37.2 has them, shown on the same objects:
//! kube-scheduler 1.37.2 (built from Go modules beside the API server) and `berth run`,
//! one after the other and each given the same `--feature-gates`, schedule the same
//! pods against one API server, and must leave them alike: which bind, and for those
//! that do not, the PodScheduled condition each scheduler wrote.

use crate::apiserver::*;
use k8s_openapi::api::core::v1 as k8s;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use std::time::Duration;

/// Who schedules a run.
#[derive(Clone, Copy, Debug)]
enum Scheduler {
    Upstream,
    Berth,
}

/// What a run left: per pod (sorted, names aside), whether it bound and its
/// PodScheduled condition's status, reason and message; and the PodGroups'
/// PodGroupInitiallyScheduled conditions (status and reason).
#[derive(Debug, PartialEq)]
struct Outcome {
    pods: Vec<(bool, String, String, String)>,
    groups: Vec<(String, String)>,
}

impl Outcome {
    fn bound(&self) -> usize {
        self.pods.iter().filter(|p| p.0).count()
    }

    /// The same without the messages.
    fn verdicts(&self) -> Vec<(bool, String, String)> {
        self.pods
            .iter()
            .map(|(b, s, r, _)| (*b, s.clone(), r.clone()))
            .collect()
    }
}

/// The pods of `ns` once each is bound or marked unschedulable, read again after a
/// pause (nothing more may bind), with the PodGroups' conditions.
async fn settle(admin: &kube::Client, ns: &str, count: usize) -> Outcome {
    let pods: Api<k8s::Pod> = Api::namespaced(admin.clone(), ns);
    let read = || async {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        let mut out: Vec<(bool, String, String, String)> = list
            .iter()
            .map(|p| {
                let c = pod_scheduled(p);
                (
                    node_of(p).is_some(),
                    c.as_ref().map(|c| c.status.clone()).unwrap_or_default(),
                    c.as_ref()
                        .and_then(|c| c.reason.clone())
                        .unwrap_or_default(),
                    c.and_then(|c| c.message).unwrap_or_default(),
                )
            })
            .collect();
        out.sort();
        out
    };
    eventually(90, "every pod bound or unschedulable", || async {
        let now = read().await;
        if now.len() == count && now.iter().all(|p| p.0 || p.1 == "False") {
            Ok(())
        } else {
            Err(format!("{now:?}"))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let groups = group_conditions(admin, ns).await;
    Outcome {
        pods: read().await,
        groups,
    }
}

/// The PodGroupInitiallyScheduled condition of each PodGroup of `ns`, by name.
async fn group_conditions(admin: &kube::Client, ns: &str) -> Vec<(String, String)> {
    let gvk = kube::api::GroupVersionKind::gvk("scheduling.k8s.io", "v1beta1", "PodGroup");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "podgroups");
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(admin.clone(), ns, &resource);
    let mut out = Vec::new();
    for g in api.list(&ListParams::default()).await.unwrap().items {
        let v = serde_json::to_value(&g).unwrap();
        for c in v["status"]["conditions"].as_array().into_iter().flatten() {
            if c["type"] == "PodGroupInitiallyScheduled" {
                out.push((
                    c["status"].as_str().unwrap_or_default().to_owned(),
                    c["reason"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    out
}

/// Creates the cluster-scoped objects `cluster` (nodes, slices), and `objects` and
/// `pods` in a new namespace `ns`, has `who` schedule them with
/// `--feature-gates=GATES`, and returns what it left; the scheduler is then stopped,
/// the pods removed (bound ones too: no kubelet holds them) and `cluster` deleted, so
/// that the next run starts on the same room.
async fn run(
    server: &ApiServer,
    who: Scheduler,
    ns: &str,
    gates: &str,
    cluster: &[Value],
    objects: &[Value],
    pods: &[Value],
) -> Outcome {
    let admin = server.client().await;
    let mut made = Vec::new();
    for o in cluster {
        made.push(create_object(&admin, o.clone()).await);
    }
    let namespaces: Api<k8s::Namespace> = Api::all(admin.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let in_ns = |v: &Value| {
        let mut v = v.clone();
        merge_json(&mut v, json!({"metadata": {"namespace": ns}}));
        v
    };
    for o in objects {
        create_object(&admin, in_ns(o)).await;
    }
    for p in pods {
        create_object(&admin, in_ns(p)).await;
    }
    let dir = server.dir.path();
    let outcome = match who {
        Scheduler::Upstream => {
            let ks = KubeScheduler::start(server, gates, &format!("kube-scheduler-{ns}"));
            let o = settle(&admin, ns, pods.len()).await;
            drop(ks);
            o
        }
        Scheduler::Berth => {
            let gates = format!("--feature-gates={gates}");
            let mut berth = Berth::start(
                &[
                    "--kubeconfig",
                    server.kubeconfig().to_str().unwrap(),
                    "--leader-elect=false",
                    &gates,
                ],
                dir.join(format!("berth-{ns}.log")),
            );
            berth.wait_running();
            let o = settle(&admin, ns, pods.len()).await;
            drop(berth);
            o
        }
    };
    let api: Api<k8s::Pod> = Api::namespaced(admin.clone(), ns);
    api.delete_collection(
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
        &ListParams::default(),
    )
    .await
    .unwrap();
    eventually(30, "the run's pods gone", || async {
        let left = api.list(&ListParams::default()).await.unwrap().items.len();
        if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} left"))
        }
    })
    .await;
    for o in made {
        let name = o.metadata.name.clone().unwrap();
        api_for(&admin, &o)
            .await
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    }
    outcome
}

/// A gang of three members of 2 CPUs (PodGroup minCount 3) on two nodes of 2 CPUs:
/// two members would fit.
fn gang() -> (Vec<Value>, Vec<Value>) {
    let group = json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
    });
    let pods = (0..3)
        .map(|i| {
            pod_json(
                &format!("train-{i}"),
                "2",
                json!({"spec": {"schedulingGroup": {"podGroupName": "train"}}}),
            )
        })
        .collect();
    (vec![group], pods)
}

/// `GenericWorkload` off (1.37's default) and on: kube-scheduler 1.37.2 and Berth
/// leave the same gang alike. Off, neither knows the PodGroup: two members bind, the
/// third is unschedulable with the same message, and the PodGroup gets no condition.
/// On, the gang binds nothing and its PodGroup says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_workload_off_and_on_as_kube_scheduler() {
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
    let (objects, pods) = gang();
    for (tag, gates) in [
        ("off", "GenericWorkload=false"),
        ("on", "GenericWorkload=true"),
    ] {
        let upstream = run(
            &server,
            Scheduler::Upstream,
            &format!("{tag}-upstream"),
            gates,
            &[],
            &objects,
            &pods,
        )
        .await;
        let berth = run(
            &server,
            Scheduler::Berth,
            &format!("{tag}-berth"),
            gates,
            &[],
            &objects,
            &pods,
        )
        .await;
        match tag {
            "off" => {
                assert_eq!(upstream.bound(), 2, "{upstream:#?}");
                assert!(upstream.groups.is_empty(), "{upstream:#?}");
                assert_eq!(berth, upstream, "{gates}: Berth and kube-scheduler differ");
            }
            _ => {
                assert_eq!(upstream.bound(), 0, "{upstream:#?}");
                assert_eq!(
                    upstream.groups,
                    [("False".to_owned(), "Unschedulable".to_owned())],
                    "{upstream:#?}"
                );
                // The members' and the PodGroup's messages are worded differently
                // (each names the group its own way); the verdicts are the same.
                assert_eq!(
                    berth.verdicts(),
                    upstream.verdicts(),
                    "{gates}: Berth {berth:#?}\nkube-scheduler {upstream:#?}"
                );
                assert_eq!(berth.groups, upstream.groups, "{berth:#?}\n{upstream:#?}");
            }
        }
    }
}

/// A node whose one device draws on counters its pool shares (a partitionable
/// device): the driver publishes the counters in one slice and the device in another.
/// Named after the run, so that a claim an earlier run allocated (its pods gone, the
/// claim kept) holds no device of this one.
fn partitionable_node(run: &str) -> Vec<Value> {
    let name = format!("dra-{run}");
    let pool = json!({"name": name, "generation": 1, "resourceSliceCount": 2});
    vec![
        serde_json::to_value(node(&name, "4", "8Gi", 110)).unwrap(),
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{name}-counters")},
            "spec": {
                "driver": GPU_CLASS, "nodeName": name, "pool": pool,
                "sharedCounters": [{"name": "gpu-0-memory", "counters": {"memory": {"value": "8Gi"}}}],
            },
        }),
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{name}-gpus")},
            "spec": {
                "driver": GPU_CLASS, "nodeName": name, "pool": pool,
                "devices": [{
                    "name": "gpu-0-whole",
                    "consumesCounters": [{"counterSet": "gpu-0-memory", "counters": {"memory": {"value": "8Gi"}}}],
                }],
            },
        }),
    ]
}

/// `DRAPartitionableDevices` on (the default) and off: with it on, both schedulers
/// give the pod's claim the device that draws on shared counters; with it off, both
/// leave such a device out, and the pod is unschedulable in the same words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_partitionable_devices_on_and_off_as_kube_scheduler() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let admin = server.client().await;
    create_object(&admin, gpu_class()).await;
    let claim = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "gpu"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}},
    });
    let pod = pod_json(
        "trainer",
        "1",
        json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]}}),
    );
    for (tag, gates) in [
        ("on", "DRAPartitionableDevices=true"),
        ("off", "DRAPartitionableDevices=false"),
    ] {
        let mut outcomes = Vec::new();
        for who in [Scheduler::Upstream, Scheduler::Berth] {
            let ns = format!("{tag}-{}", format!("{who:?}").to_lowercase());
            outcomes.push(
                run(
                    &server,
                    who,
                    &ns,
                    gates,
                    &partitionable_node(&ns),
                    std::slice::from_ref(&claim),
                    std::slice::from_ref(&pod),
                )
                .await,
            );
        }
        let (upstream, berth) = (&outcomes[0], &outcomes[1]);
        assert_eq!(
            upstream.bound(),
            usize::from(tag == "on"),
            "{gates}: {upstream:#?}"
        );
        assert_eq!(berth, upstream, "{gates}: Berth and kube-scheduler differ");
    }
}
