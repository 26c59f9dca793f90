//! End to end against a real kube-apiserver and etcd (tests/e2e/apiserver.sh builds
//! them from Debian's source package once and starts them on loopback): `berth run`
//! binds pods created through the API, writes upstream's events and conditions, and
//! loses nothing when the API server dies, a pod is bound by someone else, or a pod is
//! deleted while its binding cycle runs.

use crate::common;

use crate::apiserver::*;
use crate::proxy::{Fault, FaultProxy};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use std::collections::{BTreeMap, HashSet};

const NS: &str = "default";

async fn events(client: &kube::Client) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

fn events_of<'a>(events: &'a [Event], pod: &str, reason: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
        })
        .collect()
}

/// Waits until every pod named in `names` is bound; returns pod -> node.
async fn all_bound(
    client: &kube::Client,
    names: &HashSet<String>,
    secs: u64,
) -> BTreeMap<String, String> {
    eventually(secs, "every pod bound", || async {
        let pods = list_pods(client, NS).await?;
        let bound: BTreeMap<String, String> = pods
            .iter()
            .filter(|p| names.contains(&name_of(p)))
            .filter_map(|p| node_of(p).map(|n| (name_of(p), n)))
            .collect();
        if bound.len() == names.len() {
            Ok(bound)
        } else {
            Err(format!("{} of {} bound", bound.len(), names.len()))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_pods_writes_events_and_conditions() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    create_nodes(
        &client,
        &[
            node("node-a", "4", "8Gi", 110),
            node("node-b", "4", "8Gi", 110),
            node("node-c", "4", "8Gi", 110),
        ],
    )
    .await;
    let pods: Vec<k8s::Pod> = (0..20)
        .map(|i| pod(&format!("web-{i}"), "100m", "default-scheduler"))
        .collect();
    create_pods(&client, NS, &pods).await;
    // Too big for every node, until a big node joins.
    create_pods(&client, NS, &[pod("huge", "6", "default-scheduler")]).await;
    // Another scheduler's pod: Berth must leave it alone.
    create_pods(&client, NS, &[pod("not-mine", "100m", "other-scheduler")]).await;

    let berth = Berth::run_in(server.dir.path(), &server.kubeconfig(), &[]);

    let names: HashSet<String> = (0..20).map(|i| format!("web-{i}")).collect();
    let bound = all_bound(&client, &names, 60).await;
    assert_eq!(bound.len(), 20);

    // One Scheduled event per pod, as upstream writes it.
    let evs = eventually(30, "a Scheduled event per pod", || async {
        let evs = events(&client).await;
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| events_of(&evs, n, "Scheduled").is_empty())
            .collect();
        if missing.is_empty() {
            Ok(evs)
        } else {
            Err(format!("no Scheduled event for {missing:?}"))
        }
    })
    .await;
    for (pod, node) in &bound {
        let e = events_of(&evs, pod, "Scheduled");
        assert_eq!(e.len(), 1, "{pod}: {e:?}");
        let e = e[0];
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(e.action.as_deref(), Some("Binding"));
        assert_eq!(e.reporting_controller.as_deref(), Some("default-scheduler"));
        assert_eq!(
            e.note.as_deref(),
            Some(format!("Successfully assigned default/{pod} to {node}").as_str())
        );
    }

    // The pod that fits nowhere: FailedScheduling and the PodScheduled condition.
    // More CPU than any node has: evicting pods cannot help, and DefaultPreemption (in
    // the default profile) says so after Filter's reasons, as upstream.
    let message = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
    let huge = eventually(30, "huge's PodScheduled condition", || async {
        let api: Api<k8s::Pod> = Api::namespaced(client.clone(), NS);
        let p = api.get("huge").await.map_err(|e| e.to_string())?;
        match pod_scheduled(&p) {
            Some(c) if c.status == "False" => Ok(c),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(huge.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(huge.message.as_deref(), Some(message));
    let evs = events(&client).await;
    let failed = events_of(&evs, "huge", "FailedScheduling");
    assert!(!failed.is_empty());
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    assert_eq!(failed[0].action.as_deref(), Some("Scheduling"));
    assert_eq!(failed[0].note.as_deref(), Some(message));

    // A big node joins, cordoned: huge is tried again and fails again. The second
    // FailedScheduling folds into the first as client-go's event series do: one event,
    // whose series counts two, with the first note.
    let mut cordoned = node("node-cordoned", "16", "32Gi", 110);
    cordoned.spec = Some(k8s::NodeSpec {
        unschedulable: Some(true),
        ..Default::default()
    });
    create_nodes(&client, &[cordoned]).await;
    let series = eventually(30, "huge's FailedScheduling series", || async {
        let evs = events(&client).await;
        let failed: Vec<Event> = events_of(&evs, "huge", "FailedScheduling")
            .into_iter()
            .cloned()
            .collect();
        match failed.as_slice() {
            [one] if one.series.as_ref().is_some_and(|s| s.count >= 2) => Ok(one.clone()),
            all => Err(format!(
                "{} FailedScheduling event(s), series {:?}",
                all.len(),
                all.iter()
                    .map(|e| e.series.as_ref().map(|s| s.count))
                    .collect::<Vec<_>>()
            )),
        }
    })
    .await;
    assert_eq!(series.note.as_deref(), Some(message));

    // A big node joins: the pod lands there (a node event moves it out of the
    // unschedulable pods), and the API server marks it scheduled.
    create_nodes(&client, &[node("node-big", "16", "32Gi", 110)]).await;
    let big = all_bound(&client, &HashSet::from(["huge".to_owned()]), 60).await;
    assert_eq!(big["huge"], "node-big");
    let api: Api<k8s::Pod> = Api::namespaced(client.clone(), NS);
    let p = api.get("huge").await.unwrap();
    assert_eq!(pod_scheduled(&p).map(|c| c.status).as_deref(), Some("True"));

    // The other scheduler's pod is still pending.
    let p = api.get("not-mine").await.unwrap();
    assert_eq!(node_of(&p), None);
    let log = berth.log_text();
    assert!(!log.contains("Forbidden"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_killed_mid_run_loses_and_doubles_nothing() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    // 20 nodes of 10 pods each: exactly room for the 200 pods. A pod the cache lost or
    // counted twice would put 11 on some node or leave one pending.
    create_ten_pod_nodes(&client, 20).await;
    // Without leader election: with it, an API server down longer than the renew
    // deadline ends the leader's run (as kube-scheduler exits), which is tested in
    // live/operations.rs; here the watches and the cache are under test.
    let berth = Berth::run_in(
        server.dir.path(),
        &server.kubeconfig(),
        &["--leader-elect=false"],
    );

    let first: Vec<k8s::Pod> = (0..100)
        .map(|i| pod(&format!("p{i:03}"), "10m", "default-scheduler"))
        .collect();
    create_pods(&client, NS, &first).await;
    // Kill the API server while bindings are under way.
    eventually(60, "some pods bound", || async {
        let pods = list_pods(&client, NS).await?;
        let n = pods.iter().filter(|p| node_of(p).is_some()).count();
        if n >= 10 {
            Ok(())
        } else {
            Err(format!("{n} bound"))
        }
    })
    .await;
    server.kill();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    server.restart();
    let client = server.client().await;
    // A node deleted and one added while Berth's watches were down or relisting.
    let second: Vec<k8s::Pod> = (100..200)
        .map(|i| pod(&format!("p{i:03}"), "10m", "default-scheduler"))
        .collect();
    create_pods(&client, NS, &second).await;

    let names: HashSet<String> = (0..200).map(|i| format!("p{i:03}")).collect();
    let bound = all_bound(&client, &names, 180).await;
    assert_ten_per_node(&bound, 20);
    let log = berth.log_text();
    assert!(
        log.contains("watch failed, retrying") || log.contains("listed"),
        "the watches should have noticed the restart:\n{log}"
    );
}

fn gang_config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("berth.yaml");
    std::fs::write(
        &path,
        format!(
            "modules:\n- name: Gang\n  path: {}\nprofiles:\n- plugins:\n    permit:\n      enabled: [{{name: Gang}}]\n",
            berth_artifacts::fixtures::FIXTURE_GANG
        ),
    )
    .unwrap();
    path
}

fn gang_pod(name: &str, group: &str, size: u32) -> k8s::Pod {
    let mut p = pod(name, "100m", "default-scheduler");
    p.metadata.labels = Some(
        [
            ("berth.test/gang".to_owned(), group.to_owned()),
            ("berth.test/gang-size".to_owned(), size.to_string()),
            (
                "berth.test/gang-timeout-seconds".to_owned(),
                "300".to_owned(),
            ),
        ]
        .into(),
    );
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_bound_elsewhere_or_deleted_during_their_binding_cycle() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    create_nodes(
        &client,
        &[
            node("node-a", "4", "8Gi", 110),
            node("node-b", "4", "8Gi", 110),
        ],
    )
    .await;
    let config = gang_config(server.dir.path());
    let berth = Berth::run_in(
        server.dir.path(),
        &server.kubeconfig(),
        &["--config", config.to_str().unwrap()],
    );
    let api: Api<k8s::Pod> = Api::namespaced(client.clone(), NS);

    // Deleted while waiting at Permit: dropped, its reservation given back.
    create_pods(&client, NS, &[gang_pod("doomed", "g1", 2)]).await;
    let waiting = |pod: &'static str| {
        let log = berth.log.clone();
        move || {
            let log = log.clone();
            async move {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if text.lines().any(|l| {
                    l.contains("waiting at Permit") && l.contains(&format!("default/{pod}"))
                }) {
                    Ok(())
                } else {
                    Err(format!("no \"waiting at Permit\" for {pod} in the log"))
                }
            }
        }
    };
    eventually(30, "doomed waiting at Permit", waiting("doomed")).await;
    api.delete("doomed", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();

    // Bound by someone else while waiting at Permit: when its gang fills, Berth's bind
    // is refused (409) and it does not retry.
    create_pods(&client, NS, &[gang_pod("taken", "g2", 2)]).await;
    eventually(30, "taken waiting at Permit", waiting("taken")).await;
    // Bound to the node Berth did not choose (the log line names Berth's).
    let chosen_b = berth.log_text().lines().any(|l| {
        l.contains("waiting at Permit") && l.contains("default/taken") && l.contains("node-b")
    });
    let elsewhere = if chosen_b { "node-a" } else { "node-b" };
    let taken = api.get("taken").await.unwrap();
    let binding = serde_json::json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "taken", "uid": taken.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": elsewhere},
    });
    let _: serde_json::Value = api
        .create_subresource("binding", "taken", &PostParams::default(), &binding)
        .await
        .expect("bind taken ourselves");
    create_pods(&client, NS, &[gang_pod("partner", "g2", 2)]).await;
    let bound = all_bound(&client, &HashSet::from(["partner".to_owned()]), 60).await;
    assert!(bound.contains_key("partner"));
    let p = api.get("taken").await.unwrap();
    assert_eq!(node_of(&p).as_deref(), Some(elsewhere));

    // A third gang of one binds normally: the scheduler is healthy, and nothing of
    // the deleted pod is left in its cache (both nodes still have room).
    create_pods(&client, NS, &[gang_pod("after", "g3", 1)]).await;
    all_bound(&client, &HashSet::from(["after".to_owned()]), 60).await;
    let log = berth.log_text();
    assert!(log.contains("bound by someone else"), "{log}");
    let evs = events(&client).await;
    assert!(events_of(&evs, "taken", "Scheduled").is_empty());
    assert!(events_of(&evs, "doomed", "Scheduled").is_empty());
}

#[test]
fn run_names_a_bad_kubeconfig_and_an_unreachable_server() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("kubeconfig");
    std::fs::write(&bad, "clusters: [this is not a kubeconfig").unwrap();
    let out = common::berth(&["run", "--kubeconfig", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(
        err.contains(&format!("kubeconfig {}", bad.display())),
        "{err}"
    );

    // A kubeconfig for a port nobody listens on.
    let port = free_port();
    let unreachable = dir.path().join("unreachable");
    std::fs::write(
        &unreachable,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let out = common::berth(&["run", "--kubeconfig", unreachable.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(
        err.contains(&format!(
            "cannot reach the API server at https://127.0.0.1:{port}"
        )),
        "{err}"
    );

    // A configuration naming an unknown plugin is refused before connecting.
    let config = dir.path().join("berth.yaml");
    std::fs::write(
        &config,
        "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NoSuchPlugin}]\n",
    )
    .unwrap();
    let out = common::berth(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--kubeconfig",
        unreachable.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(err.contains("NoSuchPlugin"), "{err}");
}

/// The value of one series in Berth's `/metrics` (plain HTTP on `port`).
async fn metric(port: u16, series: &str) -> Result<f64, String> {
    let (status, body) = http_get(port, "/metrics").await?;
    if status != 200 {
        return Err(format!("/metrics answered {status}: {body}"));
    }
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .ok_or_else(|| format!("no {series} in /metrics"))
}

/// A 60 s brown-out of every request but the watches (30 s of requests that hang,
/// then 30 s of 500s): the loop goes on scheduling the pods it learns of meanwhile
/// (each assumed on a node, its bind waiting), and afterwards every pod is bound
/// exactly once, ten to a node on nodes of room for ten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brown_out_stops_the_binds_not_the_loop_and_loses_nothing() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    create_ten_pod_nodes(&client, 12).await;
    let proxy = FaultProxy::start(server.dir.path(), server.port()).await;
    let kubeconfig = proxy.write_kubeconfig(server.dir.path());
    let port = free_port();
    // Without leader election: a brown-out outlasts the renew deadline, and a replica
    // that lost its Lease rightly stops.
    let berth = Berth::run_in(
        server.dir.path(),
        &kubeconfig,
        &[
            "--leader-elect=false",
            &format!("--secure-port={port}"),
            "--bind-address=127.0.0.1",
            "--serve-http",
        ],
    );
    let scheduled =
        "scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"}";
    let batch = |from: usize| -> Vec<k8s::Pod> {
        (from..from + 40)
            .map(|i| pod(&format!("b{i:03}"), "10m", "default-scheduler"))
            .collect()
    };
    let names = |n: usize| -> HashSet<String> { (0..n).map(|i| format!("b{i:03}")).collect() };
    create_pods(&client, NS, &batch(0)).await;
    all_bound(&client, &names(40), 60).await;

    // Requests hang; the watches go on: the loop schedules the pods it is told of,
    // and none of them is bound.
    proxy.set(Fault::HangRequests);
    let start = std::time::Instant::now();
    create_pods(&client, NS, &batch(40)).await;
    eventually(25, "the loop schedules during the brown-out", || async {
        let n = metric(port, scheduled).await?;
        if n >= 80.0 {
            Ok(())
        } else {
            Err(format!("{n} pods scheduled"))
        }
    })
    .await;
    let pods = list_pods(&client, NS).await.unwrap();
    let bound_meanwhile: Vec<String> = pods
        .iter()
        .filter(|p| name_of(p).as_str() >= "b040" && node_of(p).is_some())
        .map(name_of)
        .collect();
    assert!(
        bound_meanwhile.is_empty(),
        "bound through a hung API server: {bound_meanwhile:?}"
    );
    tokio::time::sleep(std::time::Duration::from_secs(30).saturating_sub(start.elapsed())).await;

    // Then every request is answered 500.
    proxy.set(Fault::FailRequests(500));
    create_pods(&client, NS, &batch(80)).await;
    tokio::time::sleep(std::time::Duration::from_secs(60).saturating_sub(start.elapsed())).await;
    proxy.set(Fault::None);

    let bound = all_bound(&client, &names(120), 240).await;
    assert_ten_per_node(&bound, 12);
    let log = berth.log_text();
    assert!(
        log.contains("injected by the test proxy"),
        "the 500s should have been seen:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_dropped_connections_and_error_answers_lose_nothing() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    // 12 nodes of 10 pods: exactly room for the 120 pods below.
    create_ten_pod_nodes(&client, 12).await;
    let proxy = FaultProxy::start(server.dir.path(), server.port()).await;
    let kubeconfig = proxy.write_kubeconfig(server.dir.path());
    // Without leader election: the faults below outlast the renew deadline (see
    // api_server_killed_mid_run_loses_and_doubles_nothing).
    let berth = Berth::run_in(server.dir.path(), &kubeconfig, &["--leader-elect=false"]);
    let batch = |from: usize| -> Vec<k8s::Pod> {
        (from..from + 30)
            .map(|i| pod(&format!("p{i:03}"), "10m", "default-scheduler"))
            .collect()
    };
    let settle = || tokio::time::sleep(std::time::Duration::from_secs(4));

    // A slow network: every chunk held 100 ms.
    proxy.set(Fault::Delay(std::time::Duration::from_millis(100)));
    proxy.drop_connections();
    create_pods(&client, NS, &batch(0)).await;
    settle().await;

    // An API server that answers 500 to every new connection for a while.
    proxy.set(Fault::Status(500));
    proxy.drop_connections();
    create_pods(&client, NS, &batch(30)).await;
    settle().await;

    // Then one that throttles (429).
    proxy.set(Fault::Status(429));
    proxy.drop_connections();
    create_pods(&client, NS, &batch(60)).await;
    settle().await;

    // Then connections dropped over and over, and refused for a moment.
    proxy.set(Fault::None);
    create_pods(&client, NS, &batch(90)).await;
    for i in 0..10 {
        proxy.drop_connections();
        if i == 5 {
            proxy.set(Fault::Refuse);
        }
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    }
    proxy.set(Fault::None);

    let names: HashSet<String> = (0..120).map(|i| format!("p{i:03}")).collect();
    let bound = all_bound(&client, &names, 240).await;
    assert_ten_per_node(&bound, 12);
    let log = berth.log_text();
    assert!(
        log.contains("injected by the test proxy"),
        "the faults should have been seen:\n{log}"
    );
}
