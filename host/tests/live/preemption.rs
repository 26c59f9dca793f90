//! Preemption end to end against a real kube-apiserver and etcd: `berth run` nominates
//! a high-priority pod, evicts the victims DefaultPreemption picks (a DisruptionTarget
//! condition, then a delete, then a `Preempted` event, as upstream), keeps a
//! PodDisruptionBudget's pods when another node does as well, and holds the room for
//! the preemptor while the victims terminate. Its deletes go through a proxy that holds
//! them: a cluster event that retries the preemptor meanwhile must not make it choose
//! (and evict) its victims again. There is no kubelet: the test plays its part and
//! removes terminating pods, but only once it has checked what they carry.

use crate::apiserver::*;
use crate::proxy::{Fault, FaultProxy};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use std::collections::{BTreeMap, BTreeSet};

const NS: &str = "default";

/// A pod of `priority` (through its PriorityClass `class`), optionally pinned to a node.
fn prio_pod(
    name: &str,
    cpu: &str,
    class: &str,
    priority: i32,
    app: &str,
    on: Option<&str>,
) -> k8s::Pod {
    let mut p = pod(name, cpu, "default-scheduler");
    p.metadata.labels = Some(BTreeMap::from([("app".to_owned(), app.to_owned())]));
    let spec = p.spec.as_mut().unwrap();
    spec.priority_class_name = Some(class.to_owned());
    // The Priority admission plugin accepts the value when it is the class's.
    spec.priority = Some(priority);
    if let Some(node) = on {
        spec.node_selector = Some(BTreeMap::from([(
            "kubernetes.io/hostname".to_owned(),
            node.to_owned(),
        )]));
    }
    p
}

async fn create_priority_class(client: &kube::Client, name: &str, value: i32) {
    let pc: PriorityClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }))
    .unwrap();
    Api::<PriorityClass>::all(client.clone())
        .create(&PostParams::default(), &pc)
        .await
        .expect("create priority class");
}

/// A PodDisruptionBudget over `app` that allows no disruption (policy/v1). No
/// disruption controller runs here, so its status never allows one.
async fn create_budget(client: &kube::Client, name: &str, app: &str) {
    let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
        }))
        .unwrap();
    Api::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .expect("create pod disruption budget");
}

fn terminating(p: &k8s::Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

fn condition(p: &k8s::Pod, type_: &str) -> Option<k8s::PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

fn nominated(p: &k8s::Pod) -> Option<String> {
    p.status
        .as_ref()?
        .nominated_node_name
        .clone()
        .filter(|n| !n.is_empty())
}

/// Creates node-a and node-b, the classes `low` and `high`, the budget `protected`
/// and four low-priority pods, two pinned to each node; those pods.
async fn create_nodes_classes_and_low_pods(client: &kube::Client) -> [k8s::Pod; 4] {
    create_nodes(
        client,
        &[
            node("node-a", "2", "8Gi", 110),
            node("node-b", "2", "8Gi", 110),
        ],
    )
    .await;
    create_priority_class(client, "low", 1).await;
    create_priority_class(client, "high", 1000).await;
    // node-a's pods are under a budget that allows no disruption; node-b's are not.
    create_budget(client, "protected", "protected").await;
    let low = [
        prio_pod("protected-1", "1", "low", 1, "protected", Some("node-a")),
        prio_pod("protected-2", "1", "low", 1, "protected", Some("node-a")),
        prio_pod("batch-1", "1", "low", 1, "batch", Some("node-b")),
        prio_pod("batch-2", "1", "low", 1, "batch", Some("node-b")),
    ];
    create_pods(client, NS, &low).await;
    low
}

/// Waits until a pod carries a DisruptionTarget condition, then adds a big tainted
/// node: an event that retries the preemptor while the victims' deletes are held.
async fn add_a_tainted_node_once_victims_are_marked(client: &kube::Client) {
    // While the deletes are held, a big node that nobody may use joins: an event
    // that retries the preemptor (NodeResourcesFit: it would fit there).
    eventually(30, "the victims marked for disruption", || async {
        let pods = list_pods(client, NS).await?;
        let marked = pods
            .iter()
            .filter(|p| condition(p, "DisruptionTarget").is_some())
            .count();
        if marked > 0 {
            Ok(())
        } else {
            Err("no DisruptionTarget yet".to_owned())
        }
    })
    .await;
    let mut tainted = node("node-tainted", "16", "32Gi", 110);
    tainted.spec = Some(k8s::NodeSpec {
        taints: Some(vec![k8s::Taint {
            key: "dedicated".into(),
            value: Some("other".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    create_nodes(client, &[tainted]).await;
}

/// Waits until `critical` is nominated and two pods terminate, and asserts it is
/// nominated to node-b, not yet bound, node-b's pods the victims and node-a's kept.
async fn assert_critical_nominated_and_victims_terminating(client: &kube::Client) {
    let pods = eventually(
        60,
        "critical nominated and its victims terminating",
        || async {
            let pods = list_pods(client, NS).await?;
            let by_name: BTreeMap<String, k8s::Pod> =
                pods.into_iter().map(|p| (name_of(&p), p)).collect();
            let critical = by_name.get("critical").ok_or("no critical")?;
            let dying: BTreeSet<&str> = by_name
                .values()
                .filter(|p| terminating(p))
                .map(|p| p.metadata.name.as_deref().unwrap_or(""))
                .collect();
            if nominated(critical).is_some() && dying.len() == 2 {
                Ok(by_name)
            } else {
                Err(format!(
                    "critical nominated to {:?}, terminating {dying:?}",
                    nominated(critical)
                ))
            }
        },
    )
    .await;
    assert_eq!(nominated(&pods["critical"]).as_deref(), Some("node-b"));
    assert!(
        node_of(&pods["critical"]).is_none(),
        "bound while its victims still run"
    );
    for victim in ["batch-1", "batch-2"] {
        let p = &pods[victim];
        assert!(terminating(p), "{victim} is not being deleted");
        let c = condition(p, "DisruptionTarget")
            .unwrap_or_else(|| panic!("{victim}: no DisruptionTarget"));
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("PreemptionByScheduler"));
    }
    for kept in ["protected-1", "protected-2"] {
        assert!(
            !terminating(&pods[kept]),
            "{kept} is protected by its budget"
        );
    }
}

/// Waits until `critical` is bound and asserts it is on node-b, the victims gone,
/// node-a's pods kept and the latecomer pending; the pods by name then.
async fn assert_critical_bound_in_the_room_kept(
    client: &kube::Client,
) -> BTreeMap<String, k8s::Pod> {
    let pods = eventually(60, "critical bound", || async {
        let pods = list_pods(client, NS).await?;
        let by_name: BTreeMap<String, k8s::Pod> =
            pods.into_iter().map(|p| (name_of(&p), p)).collect();
        match by_name.get("critical").and_then(node_of) {
            Some(_) => Ok(by_name),
            None => Err("critical not bound".to_owned()),
        }
    })
    .await;
    assert_eq!(node_of(&pods["critical"]).as_deref(), Some("node-b"));
    assert!(!pods.contains_key("batch-1") && !pods.contains_key("batch-2"));
    assert_eq!(node_of(&pods["protected-1"]).as_deref(), Some("node-a"));
    assert_eq!(node_of(&pods["protected-2"]).as_deref(), Some("node-a"));
    // Nowhere to go: node-a is full, node-b is critical's.
    assert_eq!(
        node_of(&pods["latecomer"]),
        None,
        "the latecomer took a place"
    );
    pods
}

/// Asserts one Preempted event on each victim, naming the preemptor (UID
/// `critical_uid`), as upstream writes it.
async fn assert_each_victim_preempted_once(client: &kube::Client, critical_uid: &str) {
    // A Preempted event on each victim, naming the preemptor, as upstream writes it.
    let evs: Vec<Event> = Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items;
    for victim in ["batch-1", "batch-2"] {
        let preempted: Vec<&Event> = evs
            .iter()
            .filter(|e| {
                e.reason.as_deref() == Some("Preempted")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(victim)
            })
            .collect();
        // Once: the retry while its deletes were held did not preempt again.
        assert_eq!(
            preempted.len(),
            1,
            "{victim} preempted again: {preempted:?}"
        );
        let count = preempted[0].series.as_ref().map_or(1, |s| s.count);
        assert_eq!(count, 1, "{victim} preempted {count} times");
        let e = preempted[0];
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert!(
            e.note.as_deref().unwrap_or("").contains(critical_uid),
            "{victim}: {:?}",
            e.note
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_evicts_through_the_api_and_keeps_the_room_for_the_preemptor() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    let low = create_nodes_classes_and_low_pods(&client).await;

    // Berth's requests go through a proxy that, later, holds the victims' deletes.
    let proxy = FaultProxy::start(server.dir.path(), server.port()).await;
    let berth = Berth::run_in(
        server.dir.path(),
        &proxy.write_kubeconfig(server.dir.path()),
        &[],
    );
    let names = low.iter().map(name_of).collect::<BTreeSet<_>>();
    eventually(60, "the low-priority pods bound", || async {
        let pods = list_pods(&client, NS).await?;
        let bound = pods
            .iter()
            .filter(|p| names.contains(&name_of(p)) && node_of(p).is_some());
        match bound.count() {
            4 => Ok(()),
            n => Err(format!("{n} of 4 bound")),
        }
    })
    .await;

    // Nothing fits the preemptor: evicting two pods on either node would. node-a's
    // would violate the budget, so node-b is the one (pickOneNodeForPreemption's
    // first criterion). Each delete of a victim is held three seconds.
    proxy.set(Fault::Hold(
        "DELETE /api/v1/namespaces/default/pods/",
        std::time::Duration::from_secs(3),
    ));
    proxy.drop_connections();
    create_pods(
        &client,
        NS,
        &[prio_pod("critical", "2", "high", 1000, "critical", None)],
    )
    .await;
    add_a_tainted_node_once_victims_are_marked(&client).await;
    assert_critical_nominated_and_victims_terminating(&client).await;

    // While the victims terminate, a low-priority pod that would fit where they were
    // arrives: the room is critical's.
    create_pods(
        &client,
        NS,
        &[prio_pod("latecomer", "1", "low", 1, "batch", None)],
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    // The kubelet's part: the victims go.
    let pods_api: Api<k8s::Pod> = Api::namespaced(client.clone(), NS);
    for victim in ["batch-1", "batch-2"] {
        pods_api
            .delete(victim, &DeleteParams::default().grace_period(0))
            .await
            .expect("remove a terminated victim");
    }

    let pods = assert_critical_bound_in_the_room_kept(&client).await;
    let critical_uid = pods["critical"].metadata.uid.clone().unwrap();
    assert_each_victim_preempted_once(&client, &critical_uid).await;
    drop(berth);
    drop(proxy);
}
