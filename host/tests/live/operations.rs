//! Operating `berth run` as a cluster operator does, against a real kube-apiserver
//! and etcd (tests/e2e/apiserver.sh): the RBAC objects of deploy/ suffice, replicas
//! take turns through a Lease, a leader that cannot renew stops, SIGTERM shuts down
//! without losing a pod, `/readyz` waits for the state to be listed and `/metrics`
//! counts what happened. The first test's API server serves no PodGroups
//! (scheduling.k8s.io/v1beta1 turned off), as releases before 1.37 do; PodGroups
//! served are tested in `deploy.rs` and `pod_groups.rs`.

use crate::apiserver::*;
use crate::proxy::{Fault, FaultProxy};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const NS: &str = "default";

/// Short leader-election timings so the tests do not wait 15 s per takeover
/// (lease 4 s, renew deadline 3 s, retry 1 s: upstream's proportions).
const LEASE: Duration = Duration::from_secs(4);
const RETRY: Duration = Duration::from_secs(1);

fn config(dir: &Path) -> PathBuf {
    let path = dir.join("berth-operations.yaml");
    std::fs::write(
        &path,
        "leaderElection:\n  leaseDuration: 4s\n  renewDeadline: 3s\n  retryPeriod: 1s\n",
    )
    .unwrap();
    path
}

/// Starts `berth run` with the short lease, serving plain HTTP on `port`, with its
/// log in DIR/NAME.log.
fn start(dir: &Path, name: &str, kubeconfig: &Path, port: u16) -> Berth {
    start_with(dir, name, kubeconfig, port, &[])
}

/// [`start`] with `extra` arguments.
fn start_with(dir: &Path, name: &str, kubeconfig: &Path, port: u16, extra: &[&str]) -> Berth {
    let config = config(dir);
    let port = format!("--secure-port={port}");
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        &port,
        "--bind-address=127.0.0.1",
        "--serve-http",
        "--shutdown-timeout-seconds=30",
    ];
    args.extend_from_slice(extra);
    Berth::start(&args, dir.join(format!("{name}.log")))
}

async fn scrape(port: u16) -> prometheus_parse::Scrape {
    let (status, body) = http_get(port, "/metrics").await.expect("GET /metrics");
    assert_eq!(status, 200, "{body}");
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("/metrics parses as Prometheus text")
}

/// The sum of the samples named `name` whose labels include `labels`.
fn value(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    use prometheus_parse::Value;
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(_) | Value::Summary(_) => 0.0,
        })
        .sum()
}

async fn lease_holder(client: &kube::Client) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    api.get_opt("berth")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

async fn all_bound(client: &kube::Client, count: usize, secs: u64) -> BTreeMap<String, String> {
    eventually(secs, "every pod bound", || async {
        let pods = list_pods(client, NS).await?;
        let bound: BTreeMap<String, String> = pods
            .iter()
            .filter_map(|p| node_of(p).map(|n| (name_of(p), n)))
            .collect();
        if bound.len() == count {
            Ok(bound)
        } else {
            Err(format!("{} of {count} bound", bound.len()))
        }
    })
    .await
}

fn pods(from: usize, to: usize) -> Vec<k8s::Pod> {
    (from..to)
        .map(|i| pod(&format!("p{i:03}"), "10m", "default-scheduler"))
        .collect()
}

/// Asserts `/readyz` answers 500 (its verbose form naming the handlers' sync) while
/// Berth's account may list nothing, and `/healthz` 200.
async fn assert_not_ready_without_the_role(port: u16) {
    let body = eventually(60, "/readyz answering", || async {
        http_get(port, "/readyz").await
    })
    .await;
    assert_eq!(body.0, 500, "{body:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, body) = http_get(port, "/readyz?verbose").await.unwrap();
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("[-]sched-handler-sync failed"), "{body}");
    assert_eq!(http_get(port, "/healthz").await.unwrap().0, 200);
}

/// Creates 30 small pods and `huge` (which fits nowhere), and waits until the 30 are
/// bound and the Scheduled and FailedScheduling events and huge's PodScheduled=False
/// condition are written.
async fn schedule_thirty_and_one_that_waits(admin: &kube::Client) {
    let names: Vec<k8s::Pod> = pods(0, 30);
    create_pods(admin, NS, &names).await;
    create_pods(admin, NS, &[pod("huge", "6", "default-scheduler")]).await;
    let bound = eventually(60, "30 pods bound", || async {
        let pods = list_pods(admin, NS).await?;
        let n = pods.iter().filter(|p| node_of(p).is_some()).count();
        if n == 30 {
            Ok(n)
        } else {
            Err(format!("{n} bound"))
        }
    })
    .await;
    assert_eq!(bound, 30);
    // Events and the PodScheduled condition were written with the role's rights.
    eventually(30, "events and the condition", || async {
        let evs: Vec<Event> = Api::<Event>::namespaced(admin.clone(), NS)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items;
        let scheduled = evs
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Scheduled"))
            .count();
        let failed = evs
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedScheduling"));
        let huge = Api::<k8s::Pod>::namespaced(admin.clone(), NS)
            .get("huge")
            .await
            .map_err(|e| e.to_string())?;
        let condition = huge
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False");
        if scheduled == 30 && failed && condition {
            Ok(())
        } else {
            Err(format!(
                "{scheduled} Scheduled, FailedScheduling {failed}, condition {condition}"
            ))
        }
    })
    .await;
}

/// Asserts `/metrics` counts 30 pods scheduled and one kept out by NodeResourcesFit,
/// under upstream's names.
async fn assert_metrics_count_what_happened(port: u16) {
    // /metrics: upstream's names, and the counts of what happened.
    let m = eventually(30, "metrics up to date", || async {
        let m = scrape(port).await;
        let pending = value(&m, "scheduler_pending_pods", &[("queue", "unschedulable")]);
        if pending == 1.0 {
            Ok(m)
        } else {
            Err(format!("{pending} unschedulable"))
        }
    })
    .await;
    let attempts = |result| {
        value(
            &m,
            "scheduler_schedule_attempts_total",
            &[("result", result), ("profile", "default-scheduler")],
        )
    };
    assert_eq!(attempts("scheduled"), 30.0);
    assert!(attempts("unschedulable") >= 1.0);
    assert_eq!(attempts("error"), 0.0);
    // The pod that waits is kept out by NodeResourcesFit (upstream's gauge).
    assert_eq!(
        value(
            &m,
            "scheduler_unschedulable_pods",
            &[
                ("plugin", "NodeResourcesFit"),
                ("profile", "default-scheduler")
            ],
        ),
        1.0
    );
    assert_eq!(
        value(
            &m,
            "scheduler_pod_scheduling_sli_duration_seconds_count",
            &[("attempts", "1")]
        ),
        30.0
    );
    assert_eq!(
        value(
            &m,
            "scheduler_scheduling_attempt_duration_seconds_count",
            &[("result", "scheduled")]
        ),
        30.0
    );
    assert!(
        value(
            &m,
            "scheduler_queue_incoming_pods_total",
            &[("event", "PodAdd")]
        ) >= 31.0
    );
}

/// Asserts nothing was denied in `log` after byte `allowed_from`, and that the
/// missing PodGroups were warned about once.
fn assert_allowed_and_warned_once_about_pod_groups(log: &str, allowed_from: usize) {
    let after = &log[allowed_from..];
    assert!(
        !after.to_lowercase().contains("forbidden"),
        "a call was denied once the role existed:\n{after}"
    );
    // This API server serves no PodGroups (scheduling.k8s.io/v1beta1 off) and Berth was
    // asked for them: said once, as a warning, and the scheduler synced and scheduled
    // without them (above).
    let warning = "the API server serves no PodGroups (scheduling.k8s.io/v1beta1 or v1alpha3): \
                   pods naming a pod group wait at PreEnqueue until it appears";
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(warning)).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("WARN"), "{}", lines[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_rbac_suffices_readyz_waits_for_sync_and_metrics_count() {
    let _serial = serial().await;
    let server =
        ApiServer::start_with(&["--rbac", "--runtime-config=scheduling.k8s.io/v1beta1=false"]);
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
    let port = free_port();
    // Started as the ServiceAccount before its role exists: it cannot list anything
    // and must not claim to be ready.
    let sa = server.dir.path().join("kubeconfig-sa");
    // With pod groups asked for (GenericWorkload on), on a server that serves none.
    let mut berth = start_with(
        server.dir.path(),
        "berth",
        &sa,
        port,
        &["--feature-gates=GenericWorkload=true"],
    );
    assert_not_ready_without_the_role(port).await;

    apply_deploy_rbac(&admin).await;
    eventually(60, "/readyz ready", || async {
        match http_get(port, "/readyz").await? {
            (200, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    berth.wait_running();
    // The role exists, the lists and the lease went through: from here on every call
    // Berth makes (bindings, events, conditions, renewals) must be allowed.
    let allowed_from = berth.log_text().len();

    schedule_thirty_and_one_that_waits(&admin).await;
    let holder = lease_holder(&admin).await.expect("the lease is held");
    assert!(!holder.is_empty());
    assert_metrics_count_what_happened(port).await;

    berth.terminate();
    let status = berth.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "{status}:\n{}", berth.log_text());
    assert_eq!(lease_holder(&admin).await, None, "the lease is released");
    assert_allowed_and_warned_once_about_pod_groups(&berth.log_text(), allowed_from);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_schedules_and_the_other_takes_over() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    // 20 nodes of 10 pods: exactly room for the 200 pods. A pod bound twice or lost
    // would leave a node with 11 or 9.
    create_ten_pod_nodes(&client, 20).await;
    let dir = server.dir.path();
    let (port_a, port_b) = (free_port(), free_port());
    // The leader's scheduling loop dies (a panic, injected by a test hook) in the
    // middle of the second burst.
    let mut a = start_with(
        dir,
        "a",
        &server.kubeconfig(),
        port_a,
        &["--debug-panic-after-cycles=150"],
    );
    a.wait_running();
    let mut b = start(dir, "b", &server.kubeconfig(), port_b);
    b.wait_log("waiting for the lease", Duration::from_secs(120));

    create_pods(&client, NS, &pods(0, 100)).await;
    all_bound(&client, 100, 60).await;
    let scheduled = |m: &prometheus_parse::Scrape| {
        value(
            m,
            "scheduler_schedule_attempts_total",
            &[("result", "scheduled")],
        )
    };
    let ma = scrape(port_a).await;
    let mb = scrape(port_b).await;
    assert_eq!(scheduled(&ma), 100.0);
    assert_eq!(scheduled(&mb), 0.0, "the follower must not schedule");
    // A follower is ready (its state is listed) although it does not lead.
    assert_eq!(http_get(port_b, "/readyz").await.unwrap().0, 200);
    assert!(!b.log_text().contains("scheduling starts"));

    // The next burst: the leader's loop dies while it is being bound.
    create_pods(&client, NS, &pods(100, 200)).await;
    eventually(60, "some of the burst bound", || async {
        let pods = list_pods(&client, NS).await?;
        let n = pods.iter().filter(|p| node_of(p).is_some()).count();
        if n > 100 {
            Ok(())
        } else {
            Err(format!("{n} bound"))
        }
    })
    .await;
    // A dead loop ends the process, with an error, without releasing the Lease.
    let status = a.wait_exit(Duration::from_secs(60));
    let killed = Instant::now();
    assert_eq!(status.code(), Some(1), "{}", a.log_text());
    assert!(
        a.log_text().contains(
            "the scheduling loop panicked: panicking after 150 scheduling cycles, as --debug-panic-after-cycles asked; exiting so that another replica takes over"
        ),
        "{}",
        a.log_text()
    );
    b.wait_log("scheduling starts", Duration::from_secs(60));
    // The follower sees the leader's last renewal at most one poll (1 to 2.2 retry
    // periods) after the leader died, takes the lease LEASE after seeing it, at its
    // next poll; 2 s more for starting to schedule and logging it.
    let bound = LEASE + RETRY.mul_f64(2.0 * 2.2) + Duration::from_secs(2);
    assert!(
        killed.elapsed() <= bound,
        "took {:?} to take over (at most {bound:?} expected)",
        killed.elapsed()
    );
    let placed = all_bound(&client, 200, 120).await;
    assert_ten_per_node(&placed, 20);
    let holder = lease_holder(&client).await.unwrap();
    assert!(
        b.log_text().contains(&holder),
        "b holds the lease now ({holder})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_bindings_loses_nothing_and_hands_over_at_once() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    create_ten_pod_nodes(&client, 12).await;
    let dir = server.dir.path();
    // Slow answers keep many binding cycles in flight when SIGTERM arrives.
    let proxy = FaultProxy::start(dir, server.port()).await;
    let slow = proxy.write_kubeconfig(dir);
    let mut a = start(dir, "a", &slow, free_port());
    a.wait_running();
    proxy.set(Fault::Delay(Duration::from_millis(150)));
    create_pods(&client, NS, &pods(0, 120)).await;
    eventually(120, "a few pods bound", || async {
        let pods = list_pods(&client, NS).await?;
        let n = pods.iter().filter(|p| node_of(p).is_some()).count();
        if n >= 3 {
            Ok(())
        } else {
            Err(format!("{n} bound"))
        }
    })
    .await;
    a.terminate();
    let status = a.wait_exit(Duration::from_secs(90));
    assert!(status.success(), "exit {status}:\n{}", a.log_text());
    let log = a.log_text();
    assert!(log.contains("shutting down: taking no new pods"), "{log}");
    assert!(log.contains("released the lease"), "{log}");
    // SIGTERM did arrive while pods were being bound, and they were let finish.
    let in_flight: usize = log
        .lines()
        .find_map(|l| {
            l.split_once(" binding cycle(s) under way at shutdown")
                .and_then(|(head, _)| head.rsplit(' ').next()?.parse().ok())
        })
        .expect("the shutdown reports the binding cycles under way");
    assert!(in_flight > 0, "{log}");
    assert!(
        log.contains("every binding cycle under way finished"),
        "{log}"
    );
    assert_eq!(lease_holder(&client).await, None);

    // The next replica takes the released lease at its first try, and every pod is
    // bound exactly once: those A bound stay where they are, the rest B binds.
    let started = Instant::now();
    let mut b = start(dir, "b", &server.kubeconfig(), free_port());
    b.wait_running();
    // (It may list the cluster before its first try for the lease; what must not
    // happen is finding the lease held.)
    let log = b.log_text();
    assert!(
        log.contains("acquired the lease") && !log.contains("the lease is held by"),
        "the released lease is taken at once:\n{log}"
    );
    assert!(started.elapsed() < Duration::from_secs(120));
    let placed = all_bound(&client, 120, 120).await;
    assert_ten_per_node(&placed, 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_and_exits_with_an_error() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    create_ten_pod_nodes(&client, 2).await;
    let dir = server.dir.path();
    let mut a = start(dir, "a", &server.kubeconfig(), free_port());
    a.wait_running();
    server.kill();
    // The renew deadline is 3 s: well before 60 s the leader gives up.
    let status = a.wait_exit(Duration::from_secs(60));
    assert!(!status.success(), "losing the lease is an error exit");
    let log = a.log_text();
    assert!(log.contains("leader election lost"), "{log}");
    assert!(log.contains("stopping scheduling at once"), "{log}");
    server.restart();
}

/// `berth bench --api --churn` as an operator runs it, at a reduced count (the full
/// 120,000 is in BENCHMARKS.md): `berth run`, its own process, binds every pod of
/// 2000 created 500 at a time, each deleted once two newer batches are bound; the
/// bench samples the scheduler's memory, and at the end no pod is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_churn_through_the_api_server_binds_every_pod_and_samples_memory() {
    let _serial = serial().await;
    let server = ApiServer::start();
    let client = server.client().await;
    let config = server.dir.path().join("churn.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: berth.dev/v1alpha1\nkind: BerthConfiguration\nclientConnection: {{kubeconfig: {}, qps: 5000, burst: 5000}}\n",
            server.kubeconfig().display()
        ),
    )
    .unwrap();
    let args: Vec<String> = [
        "bench",
        "--api",
        "--churn",
        "2000",
        "--sample-every",
        "1000",
        "--output",
        "json",
        "--kubeconfig",
        server.kubeconfig().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]
    .map(str::to_owned)
    .to_vec();
    let out = tokio::task::spawn_blocking(move || {
        crate::common::berth(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    let err = crate::common::stderr(&out);
    assert!(out.status.success(), "{err}");
    let r: serde_json::Value =
        serde_json::from_str(crate::common::stdout(&out).trim()).expect("one JSON object");
    assert_eq!(r["scheduler"], "berth", "{r}");
    assert_eq!(r["nodes"], 100, "{r}");
    assert_eq!(r["lifecycles"], 2000, "{r}");
    let samples = r["samples"].as_array().unwrap();
    let at: Vec<u64> = samples
        .iter()
        .map(|x| x["lifecycles"].as_u64().unwrap())
        .collect();
    assert_eq!(at, [1000, 2000], "{r}");
    assert!(
        samples
            .iter()
            .all(|x| x["rss_mib"].as_f64().unwrap() > 10.0),
        "the scheduler's memory was not read: {r}"
    );
    let left = list_pods(&client, "berth-bench").await.unwrap();
    assert!(left.is_empty(), "{} pods left", left.len());
}
