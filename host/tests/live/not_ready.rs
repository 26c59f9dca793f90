//! KEP-5501 against a real API server: a pod a PreEnqueue plugin holds back says so
//! in its status (`PodScheduled` False, reason `NotReadyForScheduling`, the plugin's
//! message) and in an event, after the hold's delay; a new message replaces it; once
//! let past, the pod's own attempt writes the condition, and the hold's removal never
//! removes that one.

use crate::apiserver::*;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::time::{Duration, Instant};

/// The pod's PodScheduled condition: (reason, message).
async fn condition(client: &kube::Client, name: &str) -> Option<(String, String)> {
    let p = Api::<k8s::Pod>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .ok()?;
    pod_scheduled(&p).map(|c| (c.reason.unwrap_or_default(), c.message.unwrap_or_default()))
}

async fn set_hold(client: &kube::Client, name: &str, hold: Option<&str>) {
    let patch = serde_json::json!({"metadata": {"labels": {"berth.test/hold": hold}}});
    Api::<k8s::Pod>::namespaced(client.clone(), "default")
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_held_at_pre_enqueue_says_why_in_its_status() {
    let _serial = serial().await;
    let api = ApiServer::start();
    let client = api.client().await;
    let dir = api.dir.path();
    let config = dir.join("berth.yaml");
    std::fs::write(
        &config,
        format!(
            "modules:\n- name: Flaky\n  path: {}\nprofiles:\n- plugins:\n    preEnqueue:\n      enabled: [{{name: Flaky}}]\n",
            berth_artifacts::fixtures::FIXTURE_FLAKY
        ),
    )
    .unwrap();
    let kubeconfig = api.kubeconfig();
    let _berth = Berth::run_in(
        dir,
        &kubeconfig,
        &["--config", config.to_str().unwrap(), "--leader-elect=false"],
    );

    // No node: once let past, the pod's attempt fails, and says so itself.
    let mut held = pod("held", "100m", "default-scheduler");
    held.metadata.labels =
        Some([("berth.test/hold".to_owned(), "quota_exhausted".to_owned())].into());
    let created = Instant::now();
    create_pods(&client, "default", &[held]).await;
    let (reason, message) = eventually(30, "the hold in the pod's status", || async {
        condition(&client, "held")
            .await
            .ok_or_else(|| "no PodScheduled condition yet".to_owned())
    })
    .await;
    // Not before the delay: a hold of a moment costs no write.
    assert!(
        created.elapsed() >= Duration::from_secs(4),
        "{:?}",
        created.elapsed()
    );
    assert_eq!(reason, "NotReadyForScheduling");
    assert_eq!(message, "held: quota exhausted");
    let events = eventually(30, "the NotReadyForScheduling event", || async {
        let list = Api::<Event>::namespaced(client.clone(), "default")
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let found: Vec<Event> = list
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("NotReadyForScheduling"))
            .collect();
        if found.is_empty() {
            Err("none yet".to_owned())
        } else {
            Ok(found)
        }
    })
    .await;
    assert_eq!(events[0].note.as_deref(), Some("held: quota exhausted"));
    assert_eq!(events[0].type_.as_deref(), Some("Normal"));

    // A new message replaces the old one.
    set_hold(&client, "held", Some("waiting_for_gpus")).await;
    eventually(30, "the new message", || async {
        match condition(&client, "held").await {
            Some((r, m)) if r == "NotReadyForScheduling" && m == "held: waiting for gpus" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // Let past: its attempt finds no node and writes Unschedulable; the hold's end,
    // written after its delay, must leave that condition alone.
    set_hold(&client, "held", None).await;
    eventually(30, "the attempt's condition", || async {
        match condition(&client, "held").await {
            Some((r, _)) if r == "Unschedulable" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let (reason, message) = condition(&client, "held").await.unwrap();
    assert_eq!(reason, "Unschedulable", "{message}");

    // Held again, then let past onto a node before the delay ends: nothing written
    // of the hold, the pod binds.
    let mut brief = pod("brief", "100m", "default-scheduler");
    brief.metadata.labels = Some([("berth.test/hold".to_owned(), "a_moment".to_owned())].into());
    create_pods(&client, "default", &[brief]).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    create_nodes(&client, &[node("n1", "4", "8Gi", 10)]).await;
    set_hold(&client, "brief", None).await;
    eventually(30, "brief bound", || async {
        let p = Api::<k8s::Pod>::namespaced(client.clone(), "default")
            .get("brief")
            .await
            .map_err(|e| e.to_string())?;
        node_of(&p).ok_or_else(|| "not bound".to_owned())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let events = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        !events
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("NotReadyForScheduling")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("brief")),
        "a hold shorter than the delay was written"
    );
    let c = condition(&client, "brief").await;
    assert!(
        c.as_ref().is_none_or(|(r, _)| r != "NotReadyForScheduling"),
        "{c:?}"
    );
}
