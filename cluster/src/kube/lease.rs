//! Leader election on a `coordination.k8s.io/v1` Lease, the protocol client-go's
//! `leaderelection` package speaks, so Berth's replicas take turns as kube-scheduler's
//! do (and tools that read the Lease understand it).
//!
//! - A replica takes the Lease when nobody holds it, when the holder released it (an
//!   empty holder), or when the holder's record has not changed for the record's
//!   `leaseDurationSeconds` *as this replica observed it* (its own clock, never the
//!   timestamps in the object: clocks of replicas differ).
//! - Every write is a replace with the `resourceVersion` last read, so of two replicas
//!   racing for the Lease exactly one wins; the other gets 409 Conflict.
//! - The leader renews every retry period; when it has not renewed within the renew
//!   deadline, or sees another holder, it has lost the Lease.
//! - On a clean shutdown the leader releases the Lease (empty holder, 1-second
//!   duration) so that a follower takes over at once.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How a replica competes for the Lease.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity (its holder name).
    pub identity: String,
    /// How long a lease lasts after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up.
    pub renew_deadline: Duration,
    /// How often to try to take or renew.
    pub retry_period: Duration,
}

/// What a replica knows of its leadership, for health checks and logs.
#[derive(Debug, Default)]
pub struct LeaderStatus {
    leading: AtomicBool,
    last_renewal: Mutex<Option<Instant>>,
}

impl LeaderStatus {
    /// Whether this replica holds the Lease.
    pub fn is_leading(&self) -> bool {
        self.leading.load(Ordering::Relaxed)
    }

    /// How long ago the Lease was last renewed by this replica (while leading).
    pub fn since_last_renewal(&self) -> Option<Duration> {
        self.last_renewal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|t| t.elapsed())
    }

    fn renewed(&self) {
        *self.last_renewal.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        self.leading.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) {
        self.leading.store(false, Ordering::Relaxed);
    }
}

/// Why leading ended.
#[derive(Debug, thiserror::Error)]
pub enum LeadershipLost {
    /// Another replica holds the Lease now.
    #[error("the lease is now held by {0:?}")]
    TakenBy(String),
    /// Renewing did not succeed within the renew deadline.
    #[error("the lease could not be renewed within {0:?}: {1}")]
    RenewFailed(Duration, String),
}

/// A record as last observed, and when (on this replica's clock) it last changed.
struct Observed {
    holder: String,
    renew_time: Option<MicroTime>,
    lease_duration: Duration,
    at: Instant,
}

/// One replica's side of the election.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<Observed>,
    status: Arc<LeaderStatus>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A holder identity as upstream makes one: the host name and a random suffix, so
/// two processes on one host differ.
pub fn default_identity() -> String {
    let host = super::hostname();
    format!("{host}_{:016x}", rand::random::<u64>())
}

enum Try {
    /// This replica holds the Lease (it took or renewed it).
    Held,
    /// Someone else holds a valid Lease.
    HeldBy(String),
    /// Another replica wrote first; look again.
    Raced,
}

impl LeaderElector {
    /// An elector for `config` through `client`.
    pub fn new(client: kube::Client, config: LeaseConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            status: Arc::new(LeaderStatus::default()),
        }
    }

    /// Its status (shared with health checks).
    pub fn status(&self) -> Arc<LeaderStatus> {
        self.status.clone()
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    fn jittered_retry(&self) -> Duration {
        // client-go waits between 1 and 2.2 retry periods between attempts to take the
        // lease, so that followers do not all ask at once.
        self.config
            .retry_period
            .mul_f64(1.0 + rand::random::<f64>() * 1.2)
    }

    /// Waits until this replica holds the Lease.
    pub async fn acquire(&mut self) {
        let mut last_holder = String::new();
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Try::Held) => {
                    tracing::info!(
                        lease = %format!("{}/{}", self.config.namespace, self.config.name),
                        identity = %self.config.identity,
                        "acquired the lease; leading"
                    );
                    return;
                }
                Ok(Try::HeldBy(holder)) => {
                    if holder != last_holder {
                        tracing::info!(
                            lease = %format!("{}/{}", self.config.namespace, self.config.name),
                            "the lease is held by {holder:?}; waiting to lead"
                        );
                        last_holder = holder;
                    }
                }
                Ok(Try::Raced) => {}
                Err(e) => tracing::warn!(
                    lease = %format!("{}/{}", self.config.namespace, self.config.name),
                    "cannot take the lease: {}",
                    super::error_message(&e)
                ),
            }
            tokio::time::sleep(self.jittered_retry()).await;
        }
    }

    /// Renews the Lease every retry period until that fails; returns why it stopped.
    /// The caller must stop scheduling at once.
    pub async fn hold(&mut self) -> LeadershipLost {
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let deadline = Instant::now() + self.config.renew_deadline;
            let mut last_error = String::from("no answer");
            loop {
                match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                    Ok(Ok(Try::Held)) => break,
                    Ok(Ok(Try::HeldBy(holder))) => {
                        self.status.stopped();
                        return LeadershipLost::TakenBy(holder);
                    }
                    Ok(Ok(Try::Raced)) => last_error = "conflicting write".into(),
                    Ok(Err(e)) => last_error = super::error_message(&e),
                    Err(_) => {
                        self.status.stopped();
                        return LeadershipLost::RenewFailed(self.config.renew_deadline, last_error);
                    }
                }
                let next = Instant::now() + self.config.retry_period;
                if next >= deadline {
                    self.status.stopped();
                    return LeadershipLost::RenewFailed(self.config.renew_deadline, last_error);
                }
                tokio::time::sleep_until(next).await;
            }
        }
    }

    /// Gives the Lease up (when this replica holds it) so that another replica takes it
    /// at once.
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        self.status.stopped();
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await?;
        tracing::info!(
            lease = %format!("{}/{}", self.config.namespace, self.config.name),
            "released the lease"
        );
        Ok(())
    }

    async fn try_acquire_or_renew(&mut self) -> Result<Try, kube::Error> {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let seconds =
            i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now.clone()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            let written = self.api.create(&PostParams::default(), &lease).await;
            return self.settle(written, now);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let record_duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        self.observe(&holder, spec.renew_time.clone(), record_duration);
        let mine = holder == self.config.identity;
        if !holder.is_empty() && !mine {
            let observed = self.observed.as_ref().expect("just observed");
            if observed.at + observed.lease_duration > Instant::now() {
                return Ok(Try::HeldBy(holder));
            }
            tracing::info!(
                lease = %format!("{}/{}", self.config.namespace, self.config.name),
                "the lease held by {holder:?} expired; taking it"
            );
        }
        if !mine {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.config.identity.clone());
        spec.lease_duration_seconds = Some(seconds);
        spec.renew_time = Some(now.clone());
        let written = self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await;
        self.settle(written, now)
    }

    /// What a write of this replica's record (renewed at `now`) means: held, or lost
    /// to a replica that wrote first (409).
    fn settle(
        &mut self,
        written: Result<Lease, kube::Error>,
        now: MicroTime,
    ) -> Result<Try, kube::Error> {
        match written {
            Ok(_) => {
                let me = self.config.identity.clone();
                self.observe(&me, Some(now), self.config.lease_duration);
                self.status.renewed();
                Ok(Try::Held)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Try::Raced),
            Err(e) => Err(e),
        }
    }

    /// Notes the record just read; its clock starts when its holder or renew time
    /// changes.
    fn observe(&mut self, holder: &str, renew_time: Option<MicroTime>, lease_duration: Duration) {
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.holder != holder || o.renew_time != renew_time);
        if changed {
            self.observed = Some(Observed {
                holder: holder.to_owned(),
                renew_time,
                lease_duration,
                at: Instant::now(),
            });
        }
    }
}
