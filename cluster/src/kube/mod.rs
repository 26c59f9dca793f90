//! The Kubernetes API backend: kube-rs watchers feed the scheduling loop with
//! [`Change`](super::Change)s, bindings go through the `pods/binding` subresource, and
//! what became of each pod is written back as `events.k8s.io/v1` events and the
//! `PodScheduled` condition, and what became of each pod group as its PodGroup's
//! `PodGroupInitiallyScheduled` condition.
//!
//! Requests are rate limited as client-go limits them (`clientConnection.qps` and
//! `burst`), with two buckets as kube-scheduler has two clients: binds (and the reads
//! after a failed bind) have their own, so a storm of event writes never delays a
//! bind. Berth adds a third for preemption's writes (nominations and evictions), so
//! that a wave of preemptions never delays a bind either.

mod binder;
#[cfg(test)]
mod fake;
pub mod lease;
mod pod_group_status;
pub mod ratelimit;
mod recorder;
mod snapshot;
mod watch;

pub use binder::KubeBinder;
pub use lease::{LeaderElector, LeaderStatus, LeadershipLost, LeaseConfig};
pub use pod_group_status::{POD_GROUP_CONDITION, PodGroupStatuses};
pub use recorder::KubeRecorder;
pub use snapshot::{ClusterSnapshot, SNAPSHOT_TIMEOUT, SnapshotError, snapshot};
pub use watch::start_watchers;

use ratelimit::RateLimiter;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// kube-scheduler's `clientConnection` defaults.
pub const DEFAULT_QPS: f32 = 50.0;
/// kube-scheduler's `clientConnection` defaults.
pub const DEFAULT_BURST: u32 = 100;

/// How to reach the API server.
#[derive(Clone, Debug)]
pub struct KubeOptions {
    /// A kubeconfig file; without it, kube's inference: `$KUBECONFIG`,
    /// `~/.kube/config`, then the in-cluster service account.
    pub kubeconfig: Option<PathBuf>,
    /// Requests per second (0: no limit).
    pub qps: f32,
    /// Requests that may go at once after a quiet spell.
    pub burst: u32,
}

impl Default for KubeOptions {
    fn default() -> Self {
        KubeOptions {
            kubeconfig: None,
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
        }
    }
}

/// Why the API server cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {file}: {message}")]
    Kubeconfig {
        /// The file.
        file: String,
        /// What was wrong.
        message: String,
    },
    /// No configuration could be inferred.
    #[error(
        "no cluster configuration found: not in a pod, $KUBECONFIG unset and ~/.kube/config unreadable ({0}); pass --kubeconfig"
    )]
    Infer(String),
    /// The client could not be built.
    #[error("cannot build a client for {server}: {message}")]
    Client {
        /// The server URL.
        server: String,
        /// What was wrong.
        message: String,
    },
    /// The API server did not answer.
    #[error("cannot reach the API server at {server}: {message}")]
    Unreachable {
        /// The server URL.
        server: String,
        /// What was wrong.
        message: String,
    },
}

/// A connection to the API server, with its rate limiters.
#[derive(Clone)]
pub struct KubeCluster {
    /// The client (cheap to clone).
    pub client: kube::Client,
    /// The server's URL, for messages.
    pub server: String,
    /// The bucket of binds.
    pub bind_limiter: Arc<RateLimiter>,
    /// The bucket of events and status writes.
    pub event_limiter: Arc<RateLimiter>,
    /// The bucket of preemption's writes: nominations and evictions.
    pub preemption_limiter: Arc<RateLimiter>,
    /// The PodGroups as the watcher last saw them, which the recorder writes their
    /// condition from.
    pub pod_groups: Arc<PodGroupStatuses>,
    /// The kinds the watchers may not list, for the health endpoints.
    pub access: Arc<crate::access::ListAccess>,
}

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCluster")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl KubeCluster {
    /// Loads the configuration, builds the client and checks that the server answers
    /// (its `/version`).
    pub async fn connect(options: &KubeOptions) -> Result<Self, KubeError> {
        let config = match &options.kubeconfig {
            Some(path) => {
                let file = path.display().to_string();
                let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                    KubeError::Kubeconfig {
                        file: file.clone(),
                        message: e.to_string(),
                    }
                })?;
                kube::Config::from_custom_kubeconfig(kc, &Default::default())
                    .await
                    .map_err(|e| KubeError::Kubeconfig {
                        file,
                        message: e.to_string(),
                    })?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| KubeError::Infer(e.to_string()))?,
        };
        let server = config.cluster_url.to_string();
        let mut config = config;
        config.connect_timeout = Some(Duration::from_secs(10));
        let client = kube::Client::try_from(config).map_err(|e| KubeError::Client {
            server: server.clone(),
            message: e.to_string(),
        })?;
        match tokio::time::timeout(Duration::from_secs(30), client.apiserver_version()).await {
            Ok(Ok(v)) => tracing::info!(%server, version = %v.git_version, "connected"),
            Ok(Err(e)) => {
                return Err(KubeError::Unreachable {
                    server,
                    message: e.to_string(),
                });
            }
            Err(_) => {
                return Err(KubeError::Unreachable {
                    server,
                    message: "no answer within 30 s".into(),
                });
            }
        }
        Ok(KubeCluster {
            client,
            server,
            bind_limiter: Arc::new(RateLimiter::new(options.qps, options.burst)),
            event_limiter: Arc::new(RateLimiter::new(options.qps, options.burst)),
            preemption_limiter: Arc::new(RateLimiter::new(options.qps, options.burst)),
            pod_groups: Arc::default(),
            access: Arc::default(),
        })
    }
}

/// The short message of a kube error: the API server's own words where it gave any.
pub fn error_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            if s.message.is_empty() {
                format!("{} ({})", s.reason, s.code)
            } else {
                s.message.clone()
            }
        }
        other => other.to_string(),
    }
}

/// This host's name (`$HOSTNAME`, else /etc/hostname), for event sources and lease
/// identities.
pub fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "berth".into())
}
