//! `berth run`: schedule the pods of a real cluster. Connects to the API server,
//! starts the watchers, the scheduling loop and the binding threads, and runs until
//! told to stop (SIGINT or SIGTERM).

use crate::clock::{Clock, RealClock};
use crate::cluster::kube::{KubeBinder, KubeCluster, KubeOptions, KubeRecorder, start_watchers};
use crate::config::Configuration;
use crate::live::LiveLoop;
use crate::scheduler::{Scheduler, SchedulerOptions};
use crate::wasm::Runtime;
use std::path::PathBuf;
use std::sync::Arc;

/// What `berth run` needs.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The configuration file (absent: the default profile).
    pub config: Option<PathBuf>,
    /// A kubeconfig that overrides the configuration's `clientConnection.kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// How the scheduler runs (`confirm_bindings` is turned on).
    pub scheduler: SchedulerOptions,
}

/// Runs until `stop` resolves. Errors before scheduling starts (a bad configuration,
/// an unreachable server) are returned; afterwards problems are logged and retried.
pub async fn run(
    runtime: &Arc<Runtime>,
    options: &RunOptions,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let (config, config_name) = match &options.config {
        Some(p) => (Configuration::load(p)?, p.display().to_string()),
        None => (
            Configuration::default(),
            "<default configuration>".to_owned(),
        ),
    };
    let cc = config.client_connection.clone().unwrap_or_default();
    let kube_options = KubeOptions {
        kubeconfig: options
            .kubeconfig
            .clone()
            .or(cc.kubeconfig.filter(|k| !k.as_os_str().is_empty())),
        qps: cc.qps.unwrap_or(crate::cluster::kube::DEFAULT_QPS),
        burst: cc.burst.unwrap_or(crate::cluster::kube::DEFAULT_BURST),
    };
    // Profiles and modules are checked before the server is asked anything.
    let mut names: Vec<String> = Vec::new();
    for p in config.resolve_profiles(&config_name)? {
        for n in p.plugin_names() {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    {
        let runtime = runtime.clone();
        let modules = config.modules.clone();
        tokio::task::spawn_blocking(move || {
            crate::framework::registry::load_modules(&runtime, &modules, &names)
        })
        .await??;
    }
    let cluster = KubeCluster::connect(&kube_options).await?;
    let handle = tokio::runtime::Handle::current();
    let binder = Arc::new(KubeBinder::new(cluster.clone(), handle.clone()));
    let recorder = Arc::new(KubeRecorder::start(cluster.clone(), &handle));
    let clock: Arc<dyn Clock> = Arc::new(RealClock::default());
    let mut scheduler_options = options.scheduler.clone();
    scheduler_options.confirm_bindings = true;
    let runtime = runtime.clone();
    let loop_clock = clock.clone();
    let config_for_build = config.clone();
    // Loading modules compiles components: off the async threads.
    let mut scheduler = tokio::task::spawn_blocking(move || {
        Scheduler::new(
            &runtime,
            &config_for_build,
            &config_name,
            &scheduler_options,
            binder,
            loop_clock,
        )
    })
    .await??;
    scheduler.set_recorder(recorder);
    let live = LiveLoop::start(scheduler, clock)?;
    let watchers = start_watchers(&cluster, &handle, live.sender());
    tracing::info!(server = %cluster.server, "berth is running");
    stop.await;
    tracing::info!("stopping");
    for w in &watchers {
        w.abort();
    }
    let _ = tokio::task::spawn_blocking(move || live.stop()).await;
    Ok(())
}
