//! A snapshot of a cluster: every object the scheduler reads, listed once through the
//! same table of kinds and the same conversions as the watchers, so that `berth
//! explain --from-cluster` and `berth simulate --from-cluster` start from what `berth
//! run` would see. It only reads: the lists are its only requests.

use super::KubeCluster;
use super::watch::{Mode, start};
use crate::Change;
use crate::manifest::{PriorityClass, priority_class_from_k8s};
use kube::api::{Api, ListParams};
use std::time::Duration;

/// How long a snapshot may take before it is given up.
pub const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(120);

/// What a cluster held when it was read.
#[derive(Clone, Debug, Default)]
pub struct ClusterSnapshot {
    /// The API server it was read from.
    pub server: String,
    /// Its objects, as the watchers would have reported them at start (nodes, pods,
    /// namespaces, storage objects, budgets, selectors); without the final
    /// [`Change::Synced`].
    pub changes: Vec<Change>,
    /// Its PriorityClasses, for the priority admission of manifests applied on top.
    pub priority_classes: Vec<PriorityClass>,
}

impl ClusterSnapshot {
    /// A line for the operator: how much was read, from where.
    pub fn summary(&self) -> String {
        let (mut nodes, mut pods, mut pending) = (0, 0, 0);
        for c in &self.changes {
            match c {
                Change::Node(_) => nodes += 1,
                Change::Pod(p) => {
                    pods += 1;
                    if p.node_name.is_empty() {
                        pending += 1;
                    }
                }
                _ => {}
            }
        }
        format!(
            "read {nodes} node(s) and {pods} pod(s) ({pending} pending) and {} other object(s) from {}",
            self.changes.len() - nodes - pods + self.priority_classes.len(),
            self.server
        )
    }
}

/// Why a cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Lists the API server refused or failed (one sentence each, naming the kind
    /// and the server's words: a missing permission reads "forbidden").
    #[error("reading the cluster at {server} failed: {}", problems.join("; "))]
    Lists {
        /// The server.
        server: String,
        /// What failed.
        problems: Vec<String>,
    },
    /// The lists did not end in time.
    #[error("reading the cluster at {server} did not finish within {} s", timeout.as_secs())]
    Timeout {
        /// The server.
        server: String,
        /// The limit.
        timeout: Duration,
    },
}

/// Reads every kind the scheduler reads, once.
pub async fn snapshot(cluster: &KubeCluster) -> Result<ClusterSnapshot, SnapshotError> {
    let server = cluster.server.clone();
    let (tx, rx) = std::sync::mpsc::channel::<Change>();
    let (failures_tx, failures) = std::sync::mpsc::channel::<String>();
    let tasks = start(
        cluster,
        &tokio::runtime::Handle::current(),
        tx,
        Mode::ListOnce(failures_tx.clone()),
        // The snapshot holds what the cluster has; the scheduler's own gate decides
        // whether it schedules the PodGroups as groups.
        true,
    );
    let classes = {
        let api: Api<k8s_openapi::api::scheduling::v1::PriorityClass> =
            Api::all(cluster.client.clone());
        async move { api.list(&ListParams::default()).await }
    };
    // The changes arrive on a std channel (the scheduling loop's kind): drain it on a
    // blocking thread until the last kind has listed.
    let collect = tokio::task::spawn_blocking(move || {
        let mut changes = Vec::new();
        for change in rx {
            if matches!(change, Change::Synced) {
                break;
            }
            changes.push(change);
        }
        changes
    });
    let read = async {
        let classes = classes.await;
        let changes = collect.await.unwrap_or_default();
        (classes, changes)
    };
    let (classes, changes) = match tokio::time::timeout(SNAPSHOT_TIMEOUT, read).await {
        Ok(r) => r,
        Err(_) => {
            for t in &tasks {
                t.abort();
            }
            return Err(SnapshotError::Timeout {
                server,
                timeout: SNAPSHOT_TIMEOUT,
            });
        }
    };
    for t in tasks {
        let _ = t.await;
    }
    let mut problems: Vec<String> = failures.try_iter().collect();
    let mut priority_classes = Vec::new();
    match classes {
        Ok(list) => {
            for pc in &list.items {
                match priority_class_from_k8s(pc) {
                    Ok(c) => priority_classes.push(c),
                    Err(e) => tracing::warn!(
                        "priorityclasses: ignoring {}: {e}",
                        pc.metadata.name.as_deref().unwrap_or_default()
                    ),
                }
            }
        }
        Err(e) => problems.push(format!(
            "cannot list priorityclasses: {}",
            super::error_message(&e)
        )),
    }
    if !problems.is_empty() {
        return Err(SnapshotError::Lists { server, problems });
    }
    Ok(ClusterSnapshot {
        server,
        changes,
        priority_classes,
    })
}
