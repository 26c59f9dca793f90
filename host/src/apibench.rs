//! `berth bench --api`: the SchedulingBasic workload through a real API server.
//!
//! Nodes, initial pods (already bound, round-robin) and the measured pods (pending)
//! are created through the API first; then the scheduler starts — Berth in this
//! process, or any scheduler as a command (`--scheduler-command`, for example
//! kube-scheduler) — and a watch notes when each measured pod shows up bound.
//! Throughput is taken from the bind times alone: (measured pods − 1) over the time
//! from the first bind to the last, so neither pod creation nor the scheduler's start
//! is counted, whichever scheduler runs.

use crate::bench::cores;
use crate::cluster::Binder;
use crate::cluster::Recorder;
use crate::cluster::kube::{KubeBinder, KubeCluster, KubeError, KubeOptions, KubeRecorder};
use crate::run::{RunError, RunOptions, run};
use crate::wasm::Runtime;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1 as k8s;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The namespace of the benchmark's pods.
pub const NAMESPACE: &str = "berth-bench";

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum ApiBenchError {
    /// The API server cannot be reached.
    #[error(transparent)]
    Connect(#[from] KubeError),
    /// A request to the API server failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// The cluster has nodes already.
    #[error(
        "bench --api needs a cluster without nodes: {server} has some (start a fresh one with tests/e2e/apiserver.sh start DIR)"
    )]
    NotEmpty {
        /// The API server's URL.
        server: String,
    },
    /// The benchmark's namespace object could not be made.
    #[error(transparent)]
    Namespace(#[from] serde_json::Error),
    /// Creating the nodes or pods failed.
    // The API's error is a `source`: printed after this message as before, with its own
    // chain.
    #[error("creating {what}")]
    Create {
        /// What was being created ("nodes", "initial pods", "measured pods").
        what: String,
        /// The request's error.
        #[source]
        error: CreateError,
    },
    /// The `--bind-only` binds could not be waited for.
    #[error("the binds of --bind-only: {0}")]
    Binds(String),
    /// `--scheduler-command` has no program.
    #[error("--scheduler-command is empty")]
    EmptyCommand,
    /// The scheduler command could not be started.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("starting {program}: {error}")]
    Start {
        /// The program.
        program: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// The scheduler command ended before every measured pod was bound.
    #[error("{scheduler} exited with {status} before every pod was bound")]
    Exited {
        /// The scheduler's name (the program's file name).
        scheduler: String,
        /// How it ended.
        status: std::process::ExitStatus,
    },
    /// A churn's pods were not all bound in time.
    #[error("{waiting} pods of a batch were still not bound by {scheduler} after {after:?}")]
    Stalled {
        /// The scheduler's name.
        scheduler: String,
        /// Pods of the batch not bound.
        waiting: usize,
        /// How long the bench waited for a bind.
        after: Duration,
    },
    /// Berth, run in this process, failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// Berth's task in this process panicked.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// Why one object could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The object is not one of its kind.
    #[error(transparent)]
    Object(#[from] serde_json::Error),
    /// The API server refused it.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ApiBenchOptions {
    /// How to reach the API server (kube's inference without it).
    pub kubeconfig: Option<PathBuf>,
    /// Nodes to create.
    pub nodes: usize,
    /// Pods created already bound.
    pub init_pods: usize,
    /// Pods to schedule and measure.
    pub measure_pods: usize,
    /// A command that runs the scheduler under test (split on whitespace); without
    /// it, Berth runs in this process.
    pub scheduler_command: Option<String>,
    /// No scheduler: the benchmark binds each measured pod itself, round-robin over
    /// the nodes, with Berth's binder and event recorder and as many binds in flight
    /// as `berth run` allows: what the API server takes with no scheduling work, the
    /// ceiling of this workload on it.
    pub bind_only: bool,
    /// Berth's own options, when it runs in this process.
    pub run: RunOptions,
    /// Give up after this long without a new bind.
    pub stall_timeout: Duration,
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct ApiBenchResult {
    /// `SchedulingBasic`.
    pub workload: String,
    /// `berth` or the command's program name.
    pub scheduler: String,
    /// Nodes.
    pub nodes: usize,
    /// Initial (bound) pods.
    pub init_pods: usize,
    /// Measured pods.
    pub measured_pods: usize,
    /// Measured pods seen bound.
    pub scheduled: usize,
    /// From the first bind to the last, seconds.
    pub seconds: f64,
    /// (scheduled − 1) / seconds.
    pub pods_per_second: f64,
    /// The machine's cores.
    pub cores: usize,
}

fn node(i: usize) -> serde_json::Value {
    let name = format!("node-{i}");
    // scheduler_perf's default node: 4 CPUs, 32Gi, 110 pods.
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
        },
    })
}

fn pod(name: &str, node: Option<&str>, measured: bool) -> serde_json::Value {
    // scheduler_perf's default pod: a pause container asking 100m CPU and 500Mi.
    let mut spec = serde_json::json!({
        "containers": [{
            "name": "pause",
            "image": "registry.k8s.io/pause:3.10",
            "ports": [{"containerPort": 80}],
            "resources": {
                "limits": {"cpu": "100m", "memory": "500Mi"},
                "requests": {"cpu": "100m", "memory": "500Mi"},
            },
        }],
    });
    if let Some(n) = node {
        spec["nodeName"] = n.into();
    }
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"berth.dev/bench": if measured { "measure" } else { "init" }},
        },
        "spec": spec,
    })
}

/// A scheduler process, killed when the benchmark ends however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the scheduler under test as its own process (its output dropped): its
/// name (the program's file name) and the process, killed when dropped.
fn spawn_scheduler(
    program: &str,
    args: Vec<String>,
) -> Result<(String, KillOnDrop), ApiBenchError> {
    let child = std::process::Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|error| ApiBenchError::Start {
            program: program.to_owned(),
            error,
        })?;
    let name = std::path::Path::new(program)
        .file_name()
        .map_or(program.to_owned(), |n| n.to_string_lossy().into_owned());
    Ok((name, KillOnDrop(child)))
}

/// Creates objects with `concurrency` requests in flight.
async fn create_all<K>(
    api: &Api<K>,
    objects: Vec<serde_json::Value>,
    what: &str,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<(), ApiBenchError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let total = objects.len();
    let started = Instant::now();
    let mut stream = futures::stream::iter(objects.into_iter().map(|o| {
        let api = api.clone();
        async move {
            let obj: K = serde_json::from_value(o)?;
            api.create(&PostParams::default(), &obj).await?;
            Ok::<(), CreateError>(())
        }
    }))
    .buffer_unordered(64);
    let mut done = 0;
    while let Some(r) = stream.next().await {
        r.map_err(|error| ApiBenchError::Create {
            what: what.to_owned(),
            error,
        })?;
        done += 1;
        if done % 1000 == 0 || done == total {
            progress(&format!(
                "created {done}/{total} {what} ({:.1} s)",
                started.elapsed().as_secs_f64()
            ));
        }
    }
    Ok(())
}

/// Watches the benchmark's measured pods: each name, with when it was seen, every
/// time the watch shows it bound.
fn watch_bound(
    pods: &Api<k8s::Pod>,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::mpsc::UnboundedReceiver<(String, Instant)>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let pods = pods.clone();
    let watch = tokio::spawn(async move {
        let config = watcher::Config::default().labels("berth.dev/bench=measure");
        let mut stream = watcher::watcher(pods, config).boxed();
        while let Ok(Some(ev)) = stream.try_next().await {
            let (watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = ev else {
                continue;
            };
            let bound = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty());
            if bound && let Some(name) = p.metadata.name {
                let _ = tx.send((name, Instant::now()));
            }
        }
    });
    (watch, rx)
}

/// `--bind-only`: binds every measured pod round-robin over the nodes, each bind
/// followed by its Scheduled event, as Berth's binding threads do (the same binder,
/// recorder and limits, `DEFAULT_PARALLEL_BINDINGS` threads). Answers a task that
/// ends with the number of binds that failed.
async fn bind_all(
    opts: &ApiBenchOptions,
    pods: &Api<k8s::Pod>,
) -> Result<tokio::task::JoinHandle<usize>, ApiBenchError> {
    let cluster = KubeCluster::connect(&KubeOptions {
        kubeconfig: opts.kubeconfig.clone(),
        // No client-side limit: the API server's own rate is what is measured.
        qps: 0.0,
        burst: 1,
    })
    .await?;
    let handle = tokio::runtime::Handle::current();
    let binder = KubeBinder::new(cluster.clone(), handle.clone());
    let recorder = KubeRecorder::start(cluster, &handle);
    let listed = pods
        .list(&ListParams::default().labels("berth.dev/bench=measure"))
        .await?;
    let jobs: Vec<(berth_sdk::Pod, String)> = listed
        .items
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let pod = berth_sdk::Pod {
                namespace: p.metadata.namespace.unwrap_or_default(),
                name: p.metadata.name.unwrap_or_default(),
                uid: p.metadata.uid.unwrap_or_default(),
                ..berth_sdk::Pod::default()
            };
            (pod, format!("node-{}", i % opts.nodes.max(1)))
        })
        .collect();
    let jobs = Arc::new(std::sync::Mutex::new(jobs));
    Ok(tokio::task::spawn_blocking(move || {
        let threads: Vec<_> = (0..crate::scheduler::DEFAULT_PARALLEL_BINDINGS)
            .map(|_| {
                let (jobs, binder, recorder) = (jobs.clone(), binder.clone(), recorder.clone());
                std::thread::spawn(move || {
                    let mut failed = 0;
                    loop {
                        let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).pop();
                        let Some((pod, node)) = job else {
                            return failed;
                        };
                        match binder.bind(&pod, &node) {
                            Ok(()) => recorder.scheduled(
                                crate::config::DEFAULT_SCHEDULER_NAME,
                                &pod,
                                &node,
                            ),
                            Err(_) => failed += 1,
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or(0)).sum()
    }))
}

/// Connects, checks that the cluster has no nodes (the counts would be wrong
/// otherwise), and makes the benchmark's namespace and `nodes` nodes; answers the
/// namespace's pods.
async fn prepare_cluster(
    kubeconfig: Option<PathBuf>,
    nodes: usize,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Api<k8s::Pod>, ApiBenchError> {
    let cluster = KubeCluster::connect(&KubeOptions {
        kubeconfig,
        qps: 0.0,
        burst: 1,
    })
    .await?;
    let client = cluster.client.clone();
    let node_api: Api<k8s::Node> = Api::all(client.clone());
    let existing = node_api.list(&ListParams::default().limit(1)).await?;
    if !existing.items.is_empty() {
        return Err(ApiBenchError::NotEmpty {
            server: cluster.server.to_string(),
        });
    }
    let namespaces: Api<k8s::Namespace> = Api::all(client.clone());
    let ns: k8s::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    // Service accounts are not needed by pods on this API server (the admission
    // plugin may be on): wait for the default one if it appears, but do not insist.
    create_all(&node_api, (0..nodes).map(node).collect(), "nodes", progress).await?;
    Ok(Api::namespaced(client, NAMESPACE))
}

/// Runs the benchmark against the cluster the options reach, which must hold no
/// nodes yet (the counts would be wrong otherwise). The future comes boxed, as
/// [`crate::run::run`]'s, so that its body is compiled here and not in the binary.
pub fn run_api_bench<'a>(
    runtime: &'a Arc<Runtime>,
    opts: &'a ApiBenchOptions,
    progress: &'a mut (dyn FnMut(&str) + Send),
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ApiBenchResult, ApiBenchError>> + Send + 'a>,
> {
    Box::pin(api_bench(runtime, opts, progress))
}

async fn api_bench(
    runtime: &Arc<Runtime>,
    opts: &ApiBenchOptions,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<ApiBenchResult, ApiBenchError> {
    let pods = prepare_cluster(opts.kubeconfig.clone(), opts.nodes, progress).await?;
    create_all(
        &pods,
        (0..opts.init_pods)
            .map(|i| {
                let n = format!("node-{}", i % opts.nodes.max(1));
                pod(&format!("init-{i}"), Some(&n), false)
            })
            .collect(),
        "initial pods",
        progress,
    )
    .await?;
    create_all(
        &pods,
        (0..opts.measure_pods)
            .map(|i| pod(&format!("measure-{i}"), None, true))
            .collect(),
        "measured pods",
        progress,
    )
    .await?;

    // Watch the measured pods before the scheduler starts.
    let (watch, mut rx) = watch_bound(&pods);

    let binds = if opts.bind_only {
        Some(bind_all(opts, &pods).await?)
    } else {
        None
    };
    let (scheduler, mut child, stop) = match &opts.scheduler_command {
        _ if opts.bind_only => ("bind-only".to_owned(), None, None),
        Some(cmd) => {
            let mut words = cmd.split_whitespace().map(str::to_owned);
            let program = words.next().ok_or(ApiBenchError::EmptyCommand)?;
            let (name, child) = spawn_scheduler(&program, words.collect())?;
            (name, Some(child), None)
        }
        None => {
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let runtime = runtime.clone();
            let mut run_opts = opts.run.clone();
            if run_opts.kubeconfig.is_none() {
                run_opts.kubeconfig = opts.kubeconfig.clone();
            }
            let task = tokio::spawn(async move {
                run(
                    &runtime,
                    &run_opts,
                    Box::pin(async {
                        let _ = stop_rx.await;
                    }),
                )
                .await
            });
            ("berth".to_owned(), None, Some((stop_tx, task)))
        }
    };
    progress(&format!("{scheduler} started; waiting for binds"));

    let mut bound: HashMap<String, Instant> = HashMap::new();
    let mut last_report = Instant::now();
    while bound.len() < opts.measure_pods {
        match tokio::time::timeout(opts.stall_timeout, rx.recv()).await {
            Ok(Some((name, at))) => {
                bound.entry(name).or_insert(at);
            }
            Ok(None) => break,
            Err(_) => {
                progress(&format!(
                    "no bind for {:?}; stopping with {}/{} bound",
                    opts.stall_timeout,
                    bound.len(),
                    opts.measure_pods
                ));
                break;
            }
        }
        if let Some(c) = &mut child
            && let Ok(Some(status)) = c.0.try_wait()
        {
            return Err(ApiBenchError::Exited { scheduler, status });
        }
        if last_report.elapsed() > Duration::from_secs(2) {
            progress(&format!("{}/{} bound", bound.len(), opts.measure_pods));
            last_report = Instant::now();
        }
    }
    watch.abort();
    if let Some(binds) = binds {
        let failed = binds
            .await
            .map_err(|e| ApiBenchError::Binds(e.to_string()))?;
        if failed > 0 {
            progress(&format!("{failed} binds failed"));
        }
    }
    drop(child);
    if let Some((stop_tx, task)) = stop {
        let _ = stop_tx.send(());
        task.await??;
    }
    let first = bound.values().min().copied();
    let last = bound.values().max().copied();
    let seconds = match (first, last) {
        (Some(f), Some(l)) => l.duration_since(f).as_secs_f64(),
        _ => 0.0,
    };
    let pods_per_second = if seconds > 0.0 {
        (bound.len() - 1) as f64 / seconds
    } else {
        0.0
    };
    Ok(ApiBenchResult {
        workload: "SchedulingBasic".into(),
        scheduler,
        nodes: opts.nodes,
        init_pods: opts.init_pods,
        measured_pods: opts.measure_pods,
        scheduled: bound.len(),
        seconds,
        pods_per_second,
        cores: cores(),
    })
}

/// What an API churn runs (`berth bench --api --churn N`).
#[derive(Clone, Debug)]
pub struct ApiChurnOptions {
    /// How to reach the API server (kube's inference without it).
    pub kubeconfig: Option<PathBuf>,
    /// Nodes to create.
    pub nodes: usize,
    /// Pods created, bound and deleted in all.
    pub lifecycles: usize,
    /// Pods created at a time.
    pub batch: usize,
    /// Bound batches kept before the oldest is deleted.
    pub live_batches: usize,
    /// The scheduler's resident memory is sampled after every this many lifecycles.
    pub sample_every: usize,
    /// The scheduler, as a command (split on whitespace); without it, `berth run`
    /// from this executable with `--kubeconfig`, `--config` and leader election off.
    pub scheduler_command: Option<String>,
    /// With the default command: Berth's configuration (clientConnection.qps and
    /// burst: the defaults, 50 and 100, would be what is measured).
    pub config: Option<PathBuf>,
    /// Give up after this long without a new bind.
    pub stall_timeout: Duration,
}

/// The scheduler's memory after some lifecycles.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApiChurnSample {
    /// Pods deleted so far.
    pub lifecycles: usize,
    /// Seconds since the churn began.
    pub seconds: f64,
    /// The scheduler process's resident memory (VmRSS), in MiB.
    pub rss_mib: f64,
}

/// What an API churn measured.
#[derive(Clone, Debug, Serialize)]
pub struct ApiChurnResult {
    /// `berth` or the command's program name.
    pub scheduler: String,
    /// Nodes.
    pub nodes: usize,
    /// Pods created, bound and deleted.
    pub lifecycles: usize,
    /// Wall time of the churn, seconds.
    pub seconds: f64,
    /// Lifecycles per second (creation and deletion included).
    pub pods_per_second: f64,
    /// A sample after every `sample_every` lifecycles, and one at the end.
    pub samples: Vec<ApiChurnSample>,
    /// Resident memory at the last sample minus at the first, in MiB.
    pub rss_growth_mib: f64,
    /// The machine's cores.
    pub cores: usize,
}

/// Pod lifecycles through a real API server: nodes are created, the scheduler starts
/// as its own process, then pods are created a batch at a time, each batch waited
/// for until bound, and deleted (at once, grace period 0: no kubelet runs) once
/// `live_batches` newer batches are bound; the scheduler's resident memory is read
/// from `/proc` after every `sample_every` lifecycles. The cluster must have no
/// nodes. The future comes boxed, as [`run_api_bench`]'s.
pub fn run_api_churn<'a>(
    opts: &'a ApiChurnOptions,
    progress: &'a mut (dyn FnMut(&str) + Send),
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ApiChurnResult, ApiBenchError>> + Send + 'a>,
> {
    Box::pin(api_churn(opts, progress))
}

async fn api_churn(
    opts: &ApiChurnOptions,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<ApiChurnResult, ApiBenchError> {
    let pods = prepare_cluster(opts.kubeconfig.clone(), opts.nodes, progress).await?;
    let (watch, mut rx) = watch_bound(&pods);

    let (program, args): (String, Vec<String>) = match &opts.scheduler_command {
        Some(cmd) => {
            let mut words = cmd.split_whitespace().map(str::to_owned);
            let program = words.next().ok_or(ApiBenchError::EmptyCommand)?;
            (program, words.collect())
        }
        None => {
            let exe = std::env::current_exe().map_err(|error| ApiBenchError::Start {
                program: "berth".into(),
                error,
            })?;
            let mut args = vec![
                "run".to_owned(),
                "--leader-elect=false".to_owned(),
                "--secure-port=0".to_owned(),
            ];
            if let Some(k) = &opts.kubeconfig {
                args.extend(["--kubeconfig".to_owned(), k.display().to_string()]);
            }
            if let Some(c) = &opts.config {
                args.extend(["--config".to_owned(), c.display().to_string()]);
            }
            (exe.display().to_string(), args)
        }
    };
    let (scheduler, mut child) = spawn_scheduler(&program, args)?;
    let pid = child.0.id();
    progress(&format!("{scheduler} started (pid {pid})"));

    let batch = opts.batch.max(1);
    let sample_every = opts.sample_every.max(1);
    let mut batches: std::collections::VecDeque<Vec<String>> = Default::default();
    let (mut created, mut deleted) = (0, 0);
    let mut samples = Vec::new();
    let start = Instant::now();
    while deleted < opts.lifecycles {
        if created < opts.lifecycles {
            let n = batch.min(opts.lifecycles - created);
            let names: Vec<String> = (created..created + n)
                .map(|i| format!("churn-{i}"))
                .collect();
            create_all(
                &pods,
                names.iter().map(|name| pod(name, None, true)).collect(),
                "pods",
                &mut |_| {},
            )
            .await?;
            created += n;
            let mut waiting: std::collections::HashSet<&str> =
                names.iter().map(String::as_str).collect();
            while !waiting.is_empty() {
                match tokio::time::timeout(opts.stall_timeout, rx.recv()).await {
                    Ok(Some((name, _))) => {
                        waiting.remove(name.as_str());
                    }
                    Ok(None) | Err(_) => {
                        return Err(ApiBenchError::Stalled {
                            scheduler,
                            waiting: waiting.len(),
                            after: opts.stall_timeout,
                        });
                    }
                }
                if let Ok(Some(status)) = child.0.try_wait() {
                    return Err(ApiBenchError::Exited { scheduler, status });
                }
            }
            batches.push_back(names);
        }
        if batches.len() > opts.live_batches || created >= opts.lifecycles {
            let Some(oldest) = batches.pop_front() else {
                break;
            };
            let delete = kube::api::DeleteParams {
                grace_period_seconds: Some(0),
                ..kube::api::DeleteParams::default()
            };
            let count = oldest.len();
            let mut stream = futures::stream::iter(oldest.into_iter().map(|name| {
                let (pods, delete) = (pods.clone(), delete.clone());
                async move { pods.delete(&name, &delete).await.map(|_| ()) }
            }))
            .buffer_unordered(64);
            while let Some(r) = stream.next().await {
                r?;
            }
            let before = deleted;
            deleted += count;
            if deleted / sample_every > before / sample_every || deleted >= opts.lifecycles {
                let sample = ApiChurnSample {
                    lifecycles: deleted,
                    seconds: start.elapsed().as_secs_f64(),
                    rss_mib: crate::bench::proc_status_mib(Some(pid), "VmRSS:"),
                };
                progress(&format!(
                    "{} lifecycles, {:.1} s, {scheduler} RSS {:.1} MiB",
                    sample.lifecycles, sample.seconds, sample.rss_mib
                ));
                samples.push(sample);
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    watch.abort();
    drop(child);
    let rss_growth_mib = match (samples.first(), samples.last()) {
        (Some(f), Some(l)) => l.rss_mib - f.rss_mib,
        _ => 0.0,
    };
    Ok(ApiChurnResult {
        scheduler,
        nodes: opts.nodes,
        lifecycles: deleted,
        seconds,
        pods_per_second: if seconds > 0.0 {
            deleted as f64 / seconds
        } else {
            0.0
        },
        samples,
        rss_growth_mib,
        cores: cores(),
    })
}
