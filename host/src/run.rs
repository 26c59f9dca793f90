//! `berth run`: schedule the pods of a real cluster. Connects to the API server,
//! starts the watchers, the scheduling loop and the binding threads, serves
//! `/healthz`, `/readyz` and `/metrics`, and — with leader election on, the default —
//! schedules only while it holds the Lease. Runs until told to stop (SIGINT or
//! SIGTERM), then shuts down gracefully: no new pods, binding cycles under way finish
//! (up to a timeout), the Lease is released so that the next leader starts at once,
//! and the events still queued are written (within what is left of the timeout).
//! Losing the Lease stops scheduling at once and ends `run` with an error, as
//! kube-scheduler exits; the process is restarted as a follower.

use crate::clock::{Clock, RealClock};
use crate::cluster::kube::lease::default_identity;
use crate::cluster::kube::{
    KubeBinder, KubeCluster, KubeError, KubeOptions, KubeRecorder, LeaderElector, LeaseConfig,
    start_watchers,
};
use crate::config::{ConfigError, Configuration};
use crate::framework::registry::RegistryError;
use crate::live::LiveLoop;
use crate::scheduler::{Scheduler, SchedulerError, SchedulerOptions};
use crate::server::{Health, ServeError, ServeOptions, Server};
use crate::wasm::Runtime;
use crate::watch::ConfigMapError;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a graceful shutdown waits for binding cycles under way.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);

/// What `berth run` needs.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The configuration file (absent: the default profile).
    pub config: Option<PathBuf>,
    /// The ConfigMap that holds the configuration, read through the API and watched
    /// (instead of `config`).
    pub config_map: Option<crate::watch::ConfigMapSource>,
    /// A kubeconfig that overrides the configuration's `clientConnection.kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// How the scheduler runs (`confirm_bindings` is turned on).
    pub scheduler: SchedulerOptions,
    /// Where and to whom `/healthz`, `/readyz`, `/metrics`, ... are served (none: not
    /// served).
    pub serve: Option<ServeOptions>,
    /// Overrides the configuration's `leaderElection.leaderElect`.
    pub leader_elect: Option<bool>,
    /// This replica's Lease holder identity (default: host name and a random suffix).
    pub identity: Option<String>,
    /// How long a graceful shutdown waits for binding cycles under way.
    pub shutdown_timeout: Duration,
    /// A test's way to kill the scheduling loop alone (`--debug-panic-after-cycles`).
    pub panic_after: crate::live::PanicAfter,
}

/// Why `run` could not start, or ended with an error after scheduling started.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The working directory (the base of a ConfigMap's module paths) is unknown.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("cannot read the working directory: {0}")]
    WorkingDir(std::io::Error),
    /// The configuration was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The configuration could not be read from its ConfigMap.
    #[error(transparent)]
    ConfigMap(#[from] ConfigMapError),
    /// A module the configuration names could not be loaded.
    #[error(transparent)]
    Modules(#[from] RegistryError),
    /// The API server cannot be used.
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// The scheduler could not be built.
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// The scheduling loop's thread could not be started.
    #[error("cannot start the scheduling loop: {0}")]
    Loop(std::io::Error),
    /// The endpoints could not be served.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The endpoints' address could not be read back.
    #[error("cannot read the address the endpoints are served on: {0}")]
    ServeAddr(std::io::Error),
    /// A task that loads modules off the async threads panicked or was cancelled.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
    /// Another replica leads now, or the Lease could not be renewed in time.
    #[error("leader election lost: {0}")]
    LeadershipLost(crate::cluster::kube::LeadershipLost),
}

/// What tells [`run`] to stop: a signal, a test's own trigger. Boxed, so that `run`
/// is compiled once, in this crate, whatever its callers wait for.
pub type Stop<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// What [`run`] answers: its future, boxed for the same reason as [`Stop`].
pub type RunFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), RunError>> + Send + 'a>>;

/// Runs until `stop` resolves. Errors before scheduling starts (a bad configuration,
/// an unreachable server) are returned; afterwards problems are logged and retried.
///
/// The future comes boxed: an async fn's body is compiled wherever it is polled, and
/// `run`'s (the watchers, the API types' decoders, the server) cost the `berth` binary
/// minutes of build when it was compiled there rather than here.
pub fn run<'a>(
    runtime: &'a Arc<Runtime>,
    options: &'a RunOptions,
    stop: Stop<'a>,
) -> RunFuture<'a> {
    Box::pin(run_until(runtime, options, stop))
}

async fn run_until(
    runtime: &Arc<Runtime>,
    options: &RunOptions,
    stop: Stop<'_>,
) -> Result<(), RunError> {
    let cwd = std::env::current_dir().map_err(RunError::WorkingDir)?;
    let (config, config_name, config_text) = read_config(options, &cwd).await?;
    let mut election = config
        .leader_election
        .clone()
        .unwrap_or_default()
        .resolve(&config_name)?;
    if let Some(on) = options.leader_elect {
        election.enabled = on;
    }
    check_profiles(runtime, &config, &config_name, options).await?;
    let cluster = KubeCluster::connect(&kube_options(&config, options)).await?;
    let handle = tokio::runtime::Handle::current();
    let binder = Arc::new(KubeBinder::new(cluster.clone(), handle.clone()));
    let fence = binder.clone();
    let recorder = Arc::new(KubeRecorder::start(cluster.clone(), &handle));
    let clock: Arc<dyn Clock> = Arc::new(RealClock::default());
    let scheduler = build_scheduler(
        runtime,
        options,
        &config,
        config_name,
        binder,
        clock.clone(),
    )
    .await?;
    let events = recorder.clone();
    let mut scheduler = scheduler;
    scheduler.set_recorder(recorder);
    let metrics = scheduler.metrics().clone();
    {
        let metrics = metrics.clone();
        events.count_drops_with(Box::new(move || metrics.count_record_dropped()));
    }
    let plugins = scheduler.plugins_view();
    let shadows = scheduler.shadows_view();
    let followed = scheduler.followed_view();
    // A dead loop must not leave a live-looking leader: end the process, so that the
    // Lease is no longer renewed and a follower takes over.
    let live = LiveLoop::start(
        scheduler,
        clock,
        !election.enabled,
        options.panic_after,
        |why| {
            tracing::error!(
                "the scheduling loop panicked: {why}; exiting so that another replica takes over"
            );
            std::process::exit(1);
        },
    )
    .map_err(RunError::Loop)?;
    let mut tasks = watch_configuration(options, &live, &cluster, config_text, cwd, &handle);
    // `oci:` modules that follow a tag: their registries are asked where the tags
    // point, and a moved tag is reloaded.
    tasks.push(crate::watch::poll_registries(
        followed,
        live.sender(),
        &handle,
    ));
    let mut elector = election.enabled.then(|| {
        LeaderElector::new(
            cluster.client.clone(),
            LeaseConfig {
                namespace: election.namespace.clone(),
                name: election.name.clone(),
                identity: options.identity.clone().unwrap_or_else(default_identity),
                lease_duration: election.lease_duration,
                renew_deadline: election.renew_deadline,
                retry_period: election.retry_period,
            },
        )
    });
    let health = Arc::new(Health {
        metrics,
        synced: live.synced_flag(),
        shutting_down: AtomicBool::new(false),
        leader: elector
            .as_ref()
            .map(|e| (e.status(), election.lease_duration)),
        plugins: Some(plugins),
        shadows: Some(shadows),
        heartbeat: Some(live.heartbeat()),
        loop_input: Some(live.sender()),
        page: None,
        access: Some(cluster.access.clone()),
    });
    let server = serve(options, &health).await?;
    tasks.extend(start_watchers(
        &cluster,
        &handle,
        live.sender(),
        options.scheduler.framework.generic_workload,
    ));
    tracing::info!(server = %cluster.server, "berth is running");
    let lost = lead_until_stopped(elector.as_mut(), &election, &live, stop).await;
    health.shutting_down.store(true, Ordering::Relaxed);
    for t in &tasks {
        t.abort();
    }
    let result = match lost {
        // Another replica may be scheduling already: stop at once, finish nothing.
        Some(why) => {
            tracing::error!("leader election lost ({why}); stopping scheduling at once");
            fence.fence();
            let _ = tokio::task::spawn_blocking(move || live.stop()).await;
            Err(RunError::LeadershipLost(why))
        }
        None => shut_down(live, elector, &fence, &events, options.shutdown_timeout).await,
    };
    if let Some(s) = server {
        s.abort();
    }
    if result.is_ok() {
        tracing::info!("stopped");
    }
    result
}

/// The configuration `run` starts from, its name for messages, and (read from a
/// ConfigMap) its text: a file, a ConfigMap read with the kubeconfig of the command
/// line (the configuration's own clientConnection is in the ConfigMap, its module
/// paths relative to the working directory `cwd`), or the default.
async fn read_config(
    options: &RunOptions,
    cwd: &std::path::Path,
) -> Result<(Configuration, String, Option<String>), RunError> {
    Ok(match (&options.config, &options.config_map) {
        (Some(p), _) => (Configuration::load(p)?, p.display().to_string(), None),
        (None, Some(cm)) => {
            let bootstrap = KubeCluster::connect(&KubeOptions {
                kubeconfig: options.kubeconfig.clone(),
                qps: crate::cluster::kube::DEFAULT_QPS,
                burst: crate::cluster::kube::DEFAULT_BURST,
            })
            .await?;
            let text = cm.fetch(&bootstrap.client).await?;
            let config = cm.parse_config(&text, cwd)?;
            (config, cm.label(), Some(text))
        }
        (None, None) => (
            Configuration::default(),
            "<default configuration>".to_owned(),
            None,
        ),
    })
}

/// How to reach the API server: the command line's kubeconfig over the
/// configuration's `clientConnection`, whose qps and burst apply.
fn kube_options(config: &Configuration, options: &RunOptions) -> KubeOptions {
    let cc = config.client_connection.clone().unwrap_or_default();
    KubeOptions {
        kubeconfig: options
            .kubeconfig
            .clone()
            .or(cc.kubeconfig.filter(|k| !k.as_os_str().is_empty())),
        qps: cc.qps.unwrap_or(crate::cluster::kube::DEFAULT_QPS),
        burst: cc.burst.unwrap_or(crate::cluster::kube::DEFAULT_BURST),
    }
}

/// Checks the profiles and loads the modules they name before the server is asked
/// anything (loading compiles components: off the async threads).
async fn check_profiles(
    runtime: &Arc<Runtime>,
    config: &Configuration,
    config_name: &str,
    options: &RunOptions,
) -> Result<(), RunError> {
    let specs =
        config.resolve_profiles(config_name, options.scheduler.framework.generic_workload)?;
    let names = crate::config::plugin_names_of(&specs);
    let runtime = runtime.clone();
    let sources = config.modules();
    let file = config_name.to_owned();
    tokio::task::spawn_blocking(move || -> Result<(), RunError> {
        let modules = crate::framework::registry::load_modules(&runtime, &sources, &names)?;
        crate::config::expand_profiles(&specs, &file, &modules)?;
        Ok(())
    })
    .await?
}

/// The scheduler of a real cluster: bindings confirmed by the watch, never waited
/// on by the loop, no outcome kept once bound (built off the async threads: it loads
/// modules).
async fn build_scheduler(
    runtime: &Arc<Runtime>,
    options: &RunOptions,
    config: &Configuration,
    config_name: String,
    binder: Arc<KubeBinder>,
    clock: Arc<dyn Clock>,
) -> Result<Scheduler, RunError> {
    let mut scheduler_options = options.scheduler.clone();
    scheduler_options.confirm_bindings = true;
    // The loop never waits on a bind against an API server.
    scheduler_options.settle_bindings = false;
    scheduler_options.keep_bound_outcomes = false;
    crate::features::complete(&mut scheduler_options.framework);
    let runtime = runtime.clone();
    let config = config.clone();
    Ok(tokio::task::spawn_blocking(move || {
        Scheduler::new(
            &runtime,
            &config,
            &config_name,
            &scheduler_options,
            binder,
            clock,
        )
    })
    .await??)
}

/// Hot swap's watches: the configuration file and the modules it names, or the
/// ConfigMap that holds the configuration (first read as `config_text`). A file that
/// cannot be watched leaves scheduling going on without hot swap.
fn watch_configuration(
    options: &RunOptions,
    live: &LiveLoop,
    cluster: &KubeCluster,
    config_text: Option<String>,
    cwd: PathBuf,
    handle: &tokio::runtime::Handle,
) -> Vec<tokio::task::JoinHandle<()>> {
    if let Some(path) = &options.config {
        match crate::watch::watch_config(
            path.clone(),
            live.sender(),
            crate::watch::DEFAULT_DEBOUNCE,
        ) {
            Ok(()) => tracing::info!(
                config = %path.display(),
                "watching the configuration and the modules it names; a change is checked and swapped in while scheduling goes on"
            ),
            // Scheduling does not depend on it: go on without hot swap.
            Err(e) => tracing::warn!(
                config = %path.display(),
                "cannot watch the configuration, changes take a restart: {e:#}"
            ),
        }
    }
    match (&options.config_map, config_text) {
        (Some(cm), Some(first)) => {
            tracing::info!(
                configmap = %cm.label(),
                "watching the configuration in the ConfigMap; a change is checked and swapped in while scheduling goes on"
            );
            vec![crate::watch::watch_config_map(
                cluster.client.clone(),
                cm.clone(),
                first,
                cwd,
                live.sender(),
                handle,
            )]
        }
        _ => Vec::new(),
    }
}

/// The endpoints, served on a task of their own when `options` asks for them.
async fn serve(
    options: &RunOptions,
    health: &Arc<Health>,
) -> Result<Option<tokio::task::JoinHandle<()>>, RunError> {
    let Some(serve) = &options.serve else {
        return Ok(None);
    };
    let server = Server::bind(serve, health.clone()).await?;
    let scheme = if server.is_tls() { "https" } else { "http" };
    let addr = server.local_addr().map_err(RunError::ServeAddr)?;
    tracing::info!(
        "serving /healthz, /livez, /readyz, /metrics, /plugins and /debug/explain on {scheme}://{addr}{}",
        if server.is_delegated() {
            ", authenticated and authorized through the API server"
        } else {
            ""
        }
    );
    if !server.is_delegated() {
        tracing::warn!(
            "the endpoints on {scheme}://{addr} answer anyone, without authentication \
             or authorization (--serve-http: for local development only)"
        );
    }
    Ok(Some(tokio::spawn(server.serve())))
}

/// Schedules until `stop` resolves: at once without leader election, else once the
/// Lease is acquired and while it is held. The reason the Lease was lost, if it was.
async fn lead_until_stopped(
    elector: Option<&mut LeaderElector>,
    election: &crate::config::LeaderElection,
    live: &LiveLoop,
    mut stop: Stop<'_>,
) -> Option<crate::cluster::kube::lease::LeadershipLost> {
    let Some(e) = elector else {
        stop.await;
        return None;
    };
    tracing::info!(identity = %e.identity(), lease = %format!("{}/{}", election.namespace, election.name), "competing for the lease");
    tokio::select! {
        _ = e.acquire() => {}
        _ = &mut stop => return None,
    }
    live.lead();
    tokio::select! {
        why = e.hold() => Some(why),
        _ = &mut stop => None,
    }
}

/// A graceful shutdown: no new pods; binding cycles under way may finish within
/// `timeout` while the Lease is kept (so that no other replica starts early), then
/// nothing binds any more, the Lease is released and the last events are written.
async fn shut_down(
    live: LiveLoop,
    mut elector: Option<LeaderElector>,
    fence: &KubeBinder,
    events: &KubeRecorder,
    timeout: Duration,
) -> Result<(), RunError> {
    let shutdown_began = std::time::Instant::now();
    tracing::info!(
        "shutting down: taking no new pods; binding cycles under way may finish within {timeout:?}"
    );
    let mut drain = tokio::task::spawn_blocking(move || {
        live.stop().map(|mut s| {
            tracing::info!(
                "{} binding cycle(s) under way at shutdown",
                s.bindings_in_flight()
            );
            let left = s.finish_in_flight(timeout);
            (left, s)
        })
    });
    // Keep the Lease while binding cycles finish, so no other replica starts early.
    let mut lost_while_draining = None;
    let drained = match elector.as_mut() {
        Some(e) => tokio::select! {
            r = &mut drain => r,
            why = e.hold() => {
                // Another replica may bind now: no bind of ours may start from here.
                tracing::warn!("the lease was lost while binding cycles finished: {why}; binding no more");
                fence.fence();
                lost_while_draining = Some(why);
                drain.await
            }
        },
        None => drain.await,
    };
    // Binding cycles that outlived the timeout must not bind once the Lease is
    // released and another replica may schedule.
    fence.fence();
    match drained {
        Ok(Some((0, _))) => tracing::info!("every binding cycle under way finished"),
        Ok(Some((left, _))) => tracing::warn!(
            "{left} binding cycle(s) did not finish within {timeout:?}; their pods stay pending for the next leader"
        ),
        _ => tracing::warn!("the scheduling loop had already stopped"),
    }
    if let Some(why) = lost_while_draining {
        // Not ours to release.
        return Err(RunError::LeadershipLost(why));
    }
    if let Some(e) = elector.as_mut()
        && let Err(err) = e.release().await
    {
        tracing::warn!(
            "cannot release the lease: {}",
            crate::cluster::kube::error_message(&err)
        );
    }
    // The events of the last attempts, and the series counts not written yet, within
    // what is left of the timeout (a second at least).
    let left = timeout
        .saturating_sub(shutdown_began.elapsed())
        .max(std::time::Duration::from_secs(1));
    match events.flush(left).await {
        0 => {}
        n => tracing::warn!(
            "{n} event(s) and pod condition(s) could not be written before the shutdown timeout"
        ),
    }
    Ok(())
}
