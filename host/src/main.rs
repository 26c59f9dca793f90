//! The `berth` command.

use anyhow::Context;
use berth::bench::BenchOptions;
use berth::scheduler::SchedulerOptions;
use berth::simulate::{SimulateOptions, simulate};
use berth::wasm::{Runtime, RuntimeOptions};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// Berth: a Kubernetes scheduler whose plugins are WebAssembly components.
#[derive(Parser, Debug)]
#[command(name = "berth", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Schedule the pending pods of manifest files on an embedded cluster.
    Simulate(SimulateCommand),
    /// Schedule the pods of a Kubernetes cluster, until SIGINT or SIGTERM.
    ///
    /// Kubernetes versions: Berth follows kube-scheduler 1.37 and is tested against
    /// kube-apiserver 1.37.2. On an API server that serves less (found by discovery at
    /// start), the kinds it lacks are said once as a warning and scheduling goes on
    /// without them: resource.k8s.io/v1 (DRA, 1.34 and later; pods with claims
    /// wait), scheduling.k8s.io/v1beta1 PodGroups (1.37 with the API server's
    /// GenericWorkload on; read only with --feature-gates GenericWorkload=true, then
    /// pods naming a group wait), CSIStorageCapacities (1.24 and later; a driver that
    /// publishes capacity has none).
    #[command(verbatim_doc_comment)]
    Run(RunArgs),
    /// Show every plugin's answer for one pending pod on every node.
    Explain(ExplainArgs),
    /// Run scheduler_perf-shaped workloads and report pods/s, attempt latency,
    /// peak memory and the wasm/native ratio.
    Bench(BenchArgs),
    /// Check a configuration file, or print the default one.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Write, build, check, test and push plugins: new, build, check, test, push.
    #[command(subcommand)]
    Plugin(berth::plugin_cli::PluginCommand),
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Check a configuration as the scheduler would use it (modules loaded,
    /// multiPoint expanded, plugins given their args) and report every problem.
    Validate {
        /// The KubeSchedulerConfiguration or BerthConfiguration file.
        file: PathBuf,
        /// Where compiled plugin components are cached.
        #[arg(long)]
        cache_dir: Option<PathBuf>,
        /// Feature gates the configuration is checked under, as `berth run` takes them
        /// (`GenericWorkload=true` adds GangScheduling to the default profile).
        #[arg(long, value_name = "NAME=BOOL,...")]
        feature_gates: Option<String>,
    },
    /// Print the effective default configuration (a KubeSchedulerConfiguration).
    Default {
        /// Where compiled plugin components are cached.
        #[arg(long)]
        cache_dir: Option<PathBuf>,
        /// Feature gates, as `berth run` takes them (`GenericWorkload=true` adds
        /// GangScheduling to the default profile).
        #[arg(long, value_name = "NAME=BOOL,...")]
        feature_gates: Option<String>,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// A KubeSchedulerConfiguration (or BerthConfiguration) file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Feature gates, as kube-scheduler 1.37.2's flag: every gate it accepts, at its
    /// default; `OpportunisticBatching=false` turns opportunistic batching off; a gate
    /// Berth cannot follow is refused by name (docs/src/operators/feature-gates.md).
    #[arg(long, value_name = "NAME=BOOL,...")]
    feature_gates: Option<String>,
    /// Read the configuration from this ConfigMap through the API, and watch it
    /// (instead of --config); module paths are relative to the working directory.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "config")]
    config_map: Option<String>,
    /// The ConfigMap key that holds the configuration.
    #[arg(long, default_value = "config.yaml", value_name = "KEY")]
    config_map_key: String,
    /// The kubeconfig file (default: clientConnection.kubeconfig, else $KUBECONFIG,
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Worker threads for Filter and Score (default: the number of cores).
    #[arg(long)]
    parallelism: Option<usize>,
    /// Binding cycles that may run at once.
    #[arg(long, default_value_t = berth::scheduler::DEFAULT_PARALLEL_BINDINGS)]
    parallel_bindings: usize,
    /// Seconds a bound pod may wait for the API server to show it bound before the
    /// cache forgets it (0: never).
    #[arg(long, default_value_t = berth::scheduler::DEFAULT_ASSUMED_POD_EXPIRY.as_secs())]
    assumed_pod_expiry_seconds: u64,
    /// Where compiled plugin components are cached.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile plugin components every time instead of caching them.
    #[arg(long)]
    no_cache: bool,
    /// Run the built-in plugins natively (compiled into the host).
    #[arg(long)]
    native: bool,
    /// The port of /healthz, /livez, /readyz and /metrics (0: do not serve them).
    #[arg(long, default_value_t = berth::server::DEFAULT_SECURE_PORT)]
    secure_port: u16,
    /// The address to serve them on.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: std::net::IpAddr,
    /// A PEM certificate (chain) for HTTPS (default: a self-signed one made at start).
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// The PEM private key of --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// Serve the endpoints over plain HTTP to anyone, without authentication or
    /// authorization (for local development only, as kube-scheduler's former insecure
    /// port).
    #[arg(long, conflicts_with_all = ["tls_cert_file", "tls_private_key_file"])]
    serve_http: bool,
    /// A kubeconfig with the right to create tokenreviews, to authenticate the
    /// endpoints' bearer tokens (default: the in-cluster service account; out of a
    /// cluster without it, every request is anonymous).
    #[arg(long, conflicts_with = "serve_http")]
    authentication_kubeconfig: Option<PathBuf>,
    /// A kubeconfig with the right to create subjectaccessreviews, to authorize
    /// requests to the endpoints (default: the in-cluster service account; out of a
    /// cluster without it, only the always-allowed paths are served).
    #[arg(long, conflicts_with = "serve_http")]
    authorization_kubeconfig: Option<PathBuf>,
    /// Paths served to anyone without asking the API server (a trailing `*` matches a
    /// prefix; empty: none).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        conflicts_with = "serve_http"
    )]
    authorization_always_allow_paths: Vec<String>,
    /// Elect a leader among replicas through a Lease (overrides
    /// leaderElection.leaderElect; on by default, as kube-scheduler).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    leader_elect: Option<bool>,
    /// Seconds a graceful shutdown (SIGTERM, SIGINT) waits for binding cycles under
    /// way before it releases the Lease and exits.
    #[arg(long, default_value_t = berth::run::DEFAULT_SHUTDOWN_TIMEOUT.as_secs())]
    shutdown_timeout_seconds: u64,
    /// Test hook: the scheduling loop panics after this many scheduling cycles (0:
    /// never), to show that a dead loop ends the process.
    #[arg(long, hide = true, default_value_t = 0)]
    debug_panic_after_cycles: u64,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Compare {
    /// Run each workload natively too and report wasm time over native time.
    Native,
}

#[derive(clap::Args, Debug)]
struct BenchArgs {
    /// Run only this workload (repeatable): SchedulingBasic, SchedulingNodeAffinity,
    /// TopologySpreading, SchedulingPodAntiAffinity, SchedulingPodAffinity,
    /// PreemptionBasic, PreemptionAsync, Unschedulable, GangScheduling,
    /// BasicScheduling, SchedulingWithResourceClaimTemplate,
    /// SteadyStateClusterResourceClaimTemplate, SchedulingWithExtendedResource,
    /// HostPortConflict, ResourceSaturation;
    /// NAME/SIZE runs one size (GangScheduling/5000Nodes_1000Gangs_3000Pods).
    #[arg(long)]
    workload: Vec<String>,
    /// Run only the sizes with this many nodes (500 or 5000, 5 too for
    /// PreemptionAsync, 100 or 5000 for the pod group workloads, 2, 100, 200 or 500
    /// for the DRA ones, 10, 5000 or 20000 for the batching ones; another count runs the
    /// nearest sizes' pods on that many nodes).
    #[arg(long)]
    nodes: Option<usize>,
    /// Override the number of initial pods.
    #[arg(long)]
    init_pods: Option<usize>,
    /// Override the number of measured pods (of a steady state: the pods pending at
    /// once).
    #[arg(long)]
    measure_pods: Option<usize>,
    /// Small node and pod counts: the whole run takes seconds.
    #[arg(long)]
    quick: bool,
    /// Run the plugins natively (compiled into the host) instead of as wasm.
    #[arg(long, conflicts_with = "compare")]
    native: bool,
    /// Also run each workload natively and report the wasm/native ratio.
    #[arg(long, value_enum)]
    compare: Option<Compare>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Worker threads for Filter and Score (default: the number of cores).
    #[arg(long)]
    parallelism: Option<usize>,
    /// Feature gates, as kube-scheduler 1.37.2's flag: every gate it accepts, at its
    /// default; `OpportunisticBatching=false` turns opportunistic batching off; a gate
    /// Berth cannot follow is refused by name (docs/src/operators/feature-gates.md).
    #[arg(long, value_name = "NAME=BOOL,...")]
    feature_gates: Option<String>,
    /// Where compiled plugin components are cached.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile plugin components every time instead of caching them.
    #[arg(long)]
    no_cache: bool,
    /// Run SchedulingBasic through a real API server instead of the embedded
    /// cluster: nodes and pods are created through it, throughput is taken from the
    /// bind times (the cluster must have no nodes).
    #[arg(long, conflicts_with_all = ["compare", "native", "quick"])]
    api: bool,
    /// With --api: the kubeconfig (default: kube's inference).
    #[arg(long, requires = "api")]
    kubeconfig: Option<PathBuf>,
    /// With --api: run this command as the scheduler under test (for example
    /// kube-scheduler) instead of Berth in this process.
    #[arg(long, requires = "api")]
    scheduler_command: Option<String>,
    /// With --api: no scheduler; the benchmark binds each measured pod itself
    /// (round-robin over the nodes, each bind followed by its Scheduled event, with
    /// Berth's binder and as many binds at once as `berth run`): the API server's own
    /// ceiling for the workload.
    #[arg(long, requires = "api", conflicts_with_all = ["scheduler_command", "churn", "config"])]
    bind_only: bool,
    /// With --api: Berth's configuration (clientConnection.qps and burst, profiles).
    #[arg(long, requires = "api")]
    config: Option<PathBuf>,
    /// Instead of the workloads: this many pod lifecycles (created, bound, seen bound,
    /// deleted) on the embedded cluster at full speed, with the process's resident
    /// memory sampled (100 nodes unless --nodes says otherwise). With --api: through
    /// the API server, with `berth run` (or --scheduler-command) as its own process,
    /// whose memory is sampled.
    #[arg(long, value_name = "LIFECYCLES", conflicts_with_all = ["compare", "quick", "workload", "init_pods", "measure_pods"])]
    churn: Option<usize>,
    /// With --churn: sample memory after every this many lifecycles.
    #[arg(long, requires = "churn", default_value_t = 100_000)]
    sample_every: usize,
    /// With --churn: lifecycles before the sample that memory growth is measured
    /// from (default: the first sample).
    #[arg(long, requires = "churn")]
    warmup: Option<usize>,
}

#[derive(clap::Args, Debug)]
struct ExplainArgs {
    /// The pending pod to explain, as NAMESPACE/NAME.
    #[arg(long)]
    pod: String,
    #[command(flatten)]
    common: SimulateArgs,
}

#[derive(clap::Args, Debug)]
struct SimulateCommand {
    #[command(flatten)]
    common: SimulateArgs,
    /// After the run, serve a page of it until interrupted: the nodes with their pods
    /// and free room, each pending pod's explanation (node × plugin), the timeline.
    /// `http://ADDR/` is the page, `/page.json` its data, `/metrics` the run's
    /// metrics. Plain HTTP and unauthenticated: anyone who can reach ADDR can read it,
    /// so keep it on loopback (`127.0.0.1:8080`; port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    serve: Option<std::net::SocketAddr>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(clap::Args, Debug)]
struct SimulateArgs {
    /// Node and Pod manifests (YAML or JSON, multi-document, `v1 List`); with
    /// --from-cluster, applied on top of the cluster's objects.
    #[arg(required_unless_present_any = ["from_cluster", "kubeconfig"])]
    files: Vec<PathBuf>,
    /// Start from a snapshot of a cluster: its nodes, pods and every object the
    /// plugins read, listed once through the API (read-only; nothing is written to
    /// the cluster). Its pending pods are scheduled (or explained) with the files'.
    #[arg(long)]
    from_cluster: bool,
    /// The kubeconfig of --from-cluster (implies it; default: $KUBECONFIG,
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// A BerthConfiguration file (profiles, plugin args, modules).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Worker threads for Filter and Score (default: the number of cores).
    #[arg(long)]
    parallelism: Option<usize>,
    /// Seed of the random choice among equally good nodes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where compiled plugin components are cached (default: $BERTH_CACHE_DIR, else
    /// $XDG_CACHE_HOME/berth, else ~/.cache/berth).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile plugin components every time instead of caching them.
    #[arg(long)]
    no_cache: bool,
    /// A pod that failed this many attempts is no longer retried on the virtual
    /// clock alone (a cluster event still retries it).
    #[arg(long, default_value_t = 5)]
    max_attempts: u32,
    /// Run the built-in plugins natively (compiled into the host) instead of as
    /// wasm components.
    #[arg(long)]
    native: bool,
    /// Feature gates, as kube-scheduler 1.37.2's flag: every gate it accepts, at its
    /// default; `OpportunisticBatching=false` turns opportunistic batching off; a gate
    /// Berth cannot follow is refused by name (docs/src/operators/feature-gates.md).
    #[arg(long, value_name = "NAME=BOOL,...")]
    feature_gates: Option<String>,
}

/// Applies `--feature-gates` (kube-scheduler's gates, `berth::features`), warning of
/// the gates set to a value that changes nothing Berth decides.
fn feature_gates(
    list: &str,
    framework: &mut berth::framework::FrameworkOptions,
) -> anyhow::Result<()> {
    for warning in berth::features::apply(list, framework).map_err(anyhow::Error::msg)? {
        tracing::warn!("{warning}");
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BERTH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime(cache_dir: &Option<PathBuf>, no_cache: bool) -> anyhow::Result<std::sync::Arc<Runtime>> {
    let cache_dir = if no_cache {
        None
    } else {
        cache_dir.clone().or_else(RuntimeOptions::default_cache_dir)
    };
    Runtime::new(RuntimeOptions {
        cache_dir,
        ..RuntimeOptions::default()
    })
    .context("starting the WebAssembly runtime")
}

fn options(args: &SimulateArgs) -> anyhow::Result<(std::sync::Arc<Runtime>, SimulateOptions)> {
    let runtime = runtime(&args.cache_dir, args.no_cache)?;
    let mut scheduler = SchedulerOptions::default();
    scheduler.framework.seed = args.seed;
    scheduler.framework.native = args.native;
    if let Some(list) = &args.feature_gates {
        feature_gates(list, &mut scheduler.framework)?;
    }
    if let Some(p) = args.parallelism {
        anyhow::ensure!(p > 0, "--parallelism must be at least 1");
        scheduler.framework.parallelism = p;
    }
    anyhow::ensure!(args.max_attempts > 0, "--max-attempts must be at least 1");
    scheduler.max_attempts = args.max_attempts;
    let cluster = if args.from_cluster || args.kubeconfig.is_some() {
        Some(read_cluster(args.kubeconfig.clone())?)
    } else {
        None
    };
    Ok((
        runtime,
        SimulateOptions {
            files: args.files.clone(),
            config: args.config.clone(),
            cluster,
            scheduler,
        },
    ))
}

/// `--from-cluster`: the cluster's objects, read once; a line on stderr says how many.
fn read_cluster(
    kubeconfig: Option<PathBuf>,
) -> anyhow::Result<berth::cluster::kube::ClusterSnapshot> {
    use berth::cluster::kube::{KubeCluster, KubeOptions, snapshot};
    let rt = io_runtime()?;
    let snapshot = rt.block_on(async {
        let cluster = KubeCluster::connect(&KubeOptions {
            kubeconfig,
            ..KubeOptions::default()
        })
        .await?;
        anyhow::Ok(snapshot(&cluster).await?)
    })?;
    eprintln!("berth: {}", snapshot.summary());
    Ok(snapshot)
}

/// The async runtime the API client and the endpoints run on.
fn io_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("berth-io")
        .build()
        .context("starting the async runtime")
}

fn bench_api_churn(args: BenchArgs, lifecycles: usize) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(lifecycles > 0, "--churn must be at least 1");
    anyhow::ensure!(args.sample_every > 0, "--sample-every must be at least 1");
    let opts = berth::apibench::ApiChurnOptions {
        kubeconfig: args.kubeconfig,
        nodes: args.nodes.unwrap_or(100),
        lifecycles,
        batch: 500,
        live_batches: 2,
        sample_every: args.sample_every,
        scheduler_command: args.scheduler_command,
        config: args.config,
        stall_timeout: std::time::Duration::from_secs(60),
    };
    anyhow::ensure!(opts.nodes > 0, "--nodes must be at least 1");
    let rt = io_runtime()?;
    let mut progress = |line: &str| eprintln!("bench: {line}");
    let r = rt.block_on(berth::apibench::run_api_churn(&opts, &mut progress))?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string(&r)?),
        Output::Text => {
            for x in &r.samples {
                println!(
                    "{:>9} lifecycles  {:>8.1} s  RSS {:>7.1} MiB",
                    x.lifecycles, x.seconds, x.rss_mib
                );
            }
            println!(
                "{} lifecycles through the API server on {} nodes, {}: {:.1} s, {:.0} pods/s; RSS {:+.1} MiB from the first sample to the last ({} cores)",
                r.lifecycles,
                r.nodes,
                r.scheduler,
                r.seconds,
                r.pods_per_second,
                r.rss_growth_mib,
                r.cores
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_api(args: BenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(lifecycles) = args.churn {
        return bench_api_churn(args, lifecycles);
    }
    anyhow::ensure!(
        args.workload.iter().all(|w| w == "SchedulingBasic"),
        "--api runs SchedulingBasic only"
    );
    let runtime = runtime(&args.cache_dir, args.no_cache)?;
    let mut scheduler = SchedulerOptions::default();
    if let Some(p) = args.parallelism {
        anyhow::ensure!(p > 0, "--parallelism must be at least 1");
        scheduler.framework.parallelism = p;
    }
    let opts = berth::apibench::ApiBenchOptions {
        kubeconfig: args.kubeconfig,
        nodes: args.nodes.unwrap_or(5000),
        init_pods: args.init_pods.unwrap_or(1000),
        measure_pods: args.measure_pods.unwrap_or(1000),
        scheduler_command: args.scheduler_command,
        bind_only: args.bind_only,
        run: berth::run::RunOptions {
            config: args.config,
            kubeconfig: None,
            scheduler,
            // One replica, measured alone: no endpoints, no Lease.
            serve: None,
            leader_elect: Some(false),
            ..berth::run::RunOptions::default()
        },
        stall_timeout: std::time::Duration::from_secs(60),
    };
    anyhow::ensure!(opts.measure_pods > 1, "--measure-pods must be at least 2");
    let rt = io_runtime()?;
    let mut progress = |line: &str| eprintln!("bench: {line}");
    let r = rt.block_on(berth::apibench::run_api_bench(
        &runtime,
        &opts,
        &mut progress,
    ))?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string(&r)?),
        Output::Text => println!(
            "{} through the API server, {}: {} nodes, {} initial pods, {}/{} measured pods bound in {:.2} s: {:.0} pods/s ({} cores)",
            r.workload,
            r.scheduler,
            r.nodes,
            r.init_pods,
            r.scheduled,
            r.measured_pods,
            r.seconds,
            r.pods_per_second,
            r.cores
        ),
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_churn(args: BenchArgs, lifecycles: usize) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(lifecycles > 0, "--churn must be at least 1");
    anyhow::ensure!(args.sample_every > 0, "--sample-every must be at least 1");
    let runtime = runtime(&args.cache_dir, args.no_cache)?;
    let mut scheduler = SchedulerOptions::default();
    if let Some(p) = args.parallelism {
        anyhow::ensure!(p > 0, "--parallelism must be at least 1");
        scheduler.framework.parallelism = p;
    }
    if let Some(list) = &args.feature_gates {
        feature_gates(list, &mut scheduler.framework)?;
    }
    let defaults = berth::bench::ChurnOptions::default();
    let nodes = args.nodes.unwrap_or(defaults.nodes);
    anyhow::ensure!(nodes > 0, "--nodes must be at least 1");
    let opts = berth::bench::ChurnOptions {
        lifecycles,
        nodes,
        sample_every: args.sample_every,
        warmup: args.warmup.unwrap_or(args.sample_every),
        native: args.native,
        scheduler,
        ..defaults
    };
    let mut progress = |line: &str| eprintln!("bench: {line}");
    let r = berth::bench::run_churn(&runtime, &opts, &mut progress)?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string(&r)?),
        Output::Text => print!("{}", berth::bench::churn_to_text(&r)),
    }
    Ok(ExitCode::SUCCESS)
}

fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    if args.api {
        return bench_api(args);
    }
    if let Some(lifecycles) = args.churn {
        return bench_churn(args, lifecycles);
    }
    let runtime = runtime(&args.cache_dir, args.no_cache)?;
    let mut scheduler = SchedulerOptions::default();
    if let Some(p) = args.parallelism {
        anyhow::ensure!(p > 0, "--parallelism must be at least 1");
        scheduler.framework.parallelism = p;
    }
    if let Some(list) = &args.feature_gates {
        feature_gates(list, &mut scheduler.framework)?;
    }
    if let Some(n) = args.nodes {
        anyhow::ensure!(n > 0, "--nodes must be at least 1");
    }
    let opts = BenchOptions {
        workloads: args.workload,
        nodes: args.nodes,
        init_pods: args.init_pods,
        measure_pods: args.measure_pods,
        quick: args.quick,
        native: args.native,
        compare_native: matches!(args.compare, Some(Compare::Native)),
        scheduler,
    };
    let json = matches!(args.output, Output::Json);
    let mut progress = |line: &str| eprintln!("bench: {line}");
    let mut results = Vec::new();
    // Print each JSON line as soon as its workload is done.
    let names: Vec<String> = if opts.workloads.is_empty() {
        berth::bench::WORKLOADS
            .iter()
            .map(|w| w.name.to_owned())
            .collect()
    } else {
        opts.workloads.clone()
    };
    for name in names {
        let one = BenchOptions {
            workloads: vec![name],
            ..opts.clone()
        };
        let r = berth::bench::run(&runtime, &one, &mut progress)?;
        if json {
            for x in &r {
                println!("{}", serde_json::to_string(x)?);
            }
        }
        results.extend(r);
    }
    if !json {
        print!("{}", berth::bench::to_text(&results));
    }
    Ok(ExitCode::SUCCESS)
}

fn live(args: RunArgs) -> anyhow::Result<ExitCode> {
    use berth::server::auth::{AccessOptions, DelegationOptions};
    let runtime = runtime(&args.cache_dir, args.no_cache)?;
    let mut scheduler = SchedulerOptions::default();
    scheduler.framework.native = args.native;
    if let Some(list) = &args.feature_gates {
        feature_gates(list, &mut scheduler.framework)?;
    }
    if let Some(p) = args.parallelism {
        anyhow::ensure!(p > 0, "--parallelism must be at least 1");
        scheduler.framework.parallelism = p;
    }
    anyhow::ensure!(
        args.parallel_bindings > 0,
        "--parallel-bindings must be at least 1"
    );
    scheduler.parallel_bindings = args.parallel_bindings;
    scheduler.assumed_pod_expiry = (args.assumed_pod_expiry_seconds > 0)
        .then(|| std::time::Duration::from_secs(args.assumed_pod_expiry_seconds));
    let tls = match (
        args.serve_http,
        args.tls_cert_file,
        args.tls_private_key_file,
    ) {
        (true, _, _) => berth::server::Tls::None,
        (false, Some(cert), Some(key)) => berth::server::Tls::Files { cert, key },
        _ => berth::server::Tls::SelfSigned,
    };
    let config_map = args
        .config_map
        .as_deref()
        .map(|r| berth::watch::ConfigMapSource::parse(r, &args.config_map_key))
        .transpose()?;
    let opts = berth::run::RunOptions {
        config: args.config,
        config_map,
        kubeconfig: args.kubeconfig,
        scheduler,
        serve: (args.secure_port != 0).then(|| {
            let access = if args.serve_http {
                AccessOptions::Open
            } else {
                AccessOptions::Delegated(DelegationOptions {
                    authentication_kubeconfig: args.authentication_kubeconfig,
                    authorization_kubeconfig: args.authorization_kubeconfig,
                    always_allow_paths: args
                        .authorization_always_allow_paths
                        .into_iter()
                        .filter(|p| !p.is_empty())
                        .collect(),
                })
            };
            berth::server::ServeOptions::new(
                std::net::SocketAddr::new(args.bind_address, args.secure_port),
                tls,
                access,
            )
        }),
        leader_elect: args.leader_elect,
        identity: None,
        shutdown_timeout: std::time::Duration::from_secs(args.shutdown_timeout_seconds),
        panic_after: berth::live::PanicAfter(args.debug_panic_after_cycles),
    };
    let rt = io_runtime()?;
    rt.block_on(berth::run::run(
        &runtime,
        &opts,
        Box::pin(shutdown_signal()),
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn print_report(report: &berth::simulate::Report, output: Output) -> anyhow::Result<()> {
    use std::io::Write as _;
    match output {
        Output::Text => print!("{}", report.to_text()),
        Output::Json => println!("{}", serde_json::to_string(report)?),
    }
    // Before serving, which ends only with a signal.
    std::io::stdout().flush()?;
    Ok(())
}

/// `berth simulate --serve`: the run's page, its JSON and its metrics over plain HTTP,
/// open to anyone, until SIGINT or SIGTERM.
fn serve_page(addr: std::net::SocketAddr, run: berth::simulate::PageRun) -> anyhow::Result<()> {
    use berth::server::{Health, ServeOptions, Server, Tls, auth::AccessOptions};
    use std::sync::Arc;
    let health = Arc::new(Health {
        page: Some(Arc::new(std::sync::RwLock::new(run.page.render()))),
        ..Health::standalone(run.metrics)
    });
    let rt = io_runtime()?;
    rt.block_on(async {
        let server = Server::bind(
            &ServeOptions::new(addr, Tls::None, AccessOptions::Open),
            health,
        )
        .await?;
        let bound = server.local_addr().context("reading the bound address")?;
        eprintln!(
            "serving the page on http://{bound}/ (its data: http://{bound}/page.json); \
             plain HTTP, unauthenticated; Ctrl-C to stop"
        );
        tokio::select! {
            () = server.serve() => {}
            () = shutdown_signal() => {}
        }
        anyhow::Ok(())
    })
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => live(args),
        Command::Plugin(cmd) => Ok(berth::plugin_cli::run(cmd)?),
        Command::Bench(args) => bench(args),
        Command::Config(ConfigCommand::Validate {
            file,
            cache_dir,
            feature_gates: gates,
        }) => {
            let runtime = runtime(&cache_dir, false)?;
            let mut framework = berth::framework::FrameworkOptions::default();
            if let Some(list) = &gates {
                feature_gates(list, &mut framework)?;
            }
            match berth::config_cli::validate(&runtime, &file, &framework) {
                Ok(summary) => {
                    print!("{summary}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(errors) => {
                    for e in &errors {
                        eprintln!("{e}");
                    }
                    eprintln!("{}: {} problem(s) found", file.display(), errors.len());
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Config(ConfigCommand::Default {
            cache_dir,
            feature_gates: gates,
        }) => {
            let runtime = runtime(&cache_dir, false)?;
            let mut framework = berth::framework::FrameworkOptions::default();
            if let Some(list) = &gates {
                feature_gates(list, &mut framework)?;
            }
            print!(
                "{}",
                berth::config_cli::default_configuration(&runtime, &framework)?
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain(args) => {
            let (runtime, opts) = options(&args.common)?;
            let explanation = berth::simulate::explain(&runtime, &opts, &args.pod)?;
            match args.common.output {
                Output::Text => print!("{}", explanation.to_text()),
                Output::Json => println!("{}", serde_json::to_string(&explanation)?),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Simulate(SimulateCommand { common, serve }) => {
            let (runtime, opts) = options(&common)?;
            let Some(addr) = serve else {
                print_report(&simulate(&runtime, &opts)?, common.output)?;
                return Ok(ExitCode::SUCCESS);
            };
            let files: Vec<String> = common
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            let page_options = berth::page::PageOptions {
                title: format!("berth simulate {}", files.join(" ")),
                ..berth::page::PageOptions::default()
            };
            let run = berth::simulate::simulate_page(&runtime, &opts, &page_options)?;
            print_report(&run.report, common.output)?;
            serve_page(addr, run)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
