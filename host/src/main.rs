//! The `berth` command.

use anyhow::Context;
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

fn options(args: &SimulateArgs) -> anyhow::Result<(std::sync::Arc<Runtime>, SimulateOptions)> {
    let cache_dir = if args.no_cache {
        None
    } else {
        args.cache_dir
            .clone()
            .or_else(RuntimeOptions::default_cache_dir)
    };
    let runtime = Runtime::new(RuntimeOptions {
        cache_dir,
        ..RuntimeOptions::default()
    })
    .context("starting the WebAssembly runtime")?;
    let mut scheduler = SchedulerOptions::default();
    scheduler.framework.seed = args.seed;
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

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
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
