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
    Simulate(SimulateArgs),
    /// Show every plugin's answer for one pending pod on every node.
    Explain(ExplainArgs),
    /// Run scheduler_perf-shaped workloads and report pods/s, attempt latency,
    /// peak memory and the wasm/native ratio.
    Bench(BenchArgs),
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
    /// Unschedulable.
    #[arg(long)]
    workload: Vec<String>,
    /// Run only the size with this many nodes (500 or 5000; another count runs the
    /// nearest size's pods on that many nodes).
    #[arg(long)]
    nodes: Option<usize>,
    /// Override the number of initial pods.
    #[arg(long)]
    init_pods: Option<usize>,
    /// Override the number of measured pods.
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
    /// Where compiled plugin components are cached.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile plugin components every time instead of caching them.
    #[arg(long)]
    no_cache: bool,
}

#[derive(clap::Args, Debug)]
struct ExplainArgs {
    /// The pending pod to explain, as NAMESPACE/NAME.
    #[arg(long)]
    pod: String,
    #[command(flatten)]
    common: SimulateArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(clap::Args, Debug)]
struct SimulateArgs {
    /// Node and Pod manifests (YAML or JSON, multi-document, `v1 List`).
    #[arg(required = true)]
    files: Vec<PathBuf>,
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
    if let Some(p) = args.parallelism {
        anyhow::ensure!(p > 0, "--parallelism must be at least 1");
        scheduler.framework.parallelism = p;
    }
    anyhow::ensure!(args.max_attempts > 0, "--max-attempts must be at least 1");
    scheduler.max_attempts = args.max_attempts;
    Ok((
        runtime,
        SimulateOptions {
            files: args.files.clone(),
            config: args.config.clone(),
            scheduler,
        },
    ))
}

fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let runtime = runtime(&args.cache_dir, args.no_cache)?;
    let mut scheduler = SchedulerOptions::default();
    if let Some(p) = args.parallelism {
        anyhow::ensure!(p > 0, "--parallelism must be at least 1");
        scheduler.framework.parallelism = p;
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

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Bench(args) => bench(args),
        Command::Explain(args) => {
            let (runtime, opts) = options(&args.common)?;
            let explanation = berth::simulate::explain(&runtime, &opts, &args.pod)?;
            match args.common.output {
                Output::Text => print!("{}", explanation.to_text()),
                Output::Json => println!("{}", serde_json::to_string(&explanation)?),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Simulate(args) => {
            let (runtime, opts) = options(&args)?;
            let report = simulate(&runtime, &opts)?;
            match args.output {
                Output::Text => print!("{}", report.to_text()),
                Output::Json => println!("{}", serde_json::to_string(&report)?),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
