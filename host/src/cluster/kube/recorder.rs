//! Events and pod status, as kube-scheduler writes them: an `events.k8s.io/v1` event
//! `Scheduled` (Normal, action `Binding`) when a pod is bound, `FailedScheduling`
//! (Warning, action `Scheduling`) when an attempt fails, and on failure the pod's
//! `PodScheduled` condition set to False with reason `Unschedulable` or
//! `SchedulerError` and the attempt's message.
//!
//! The scheduling loop only queues a record; a task on the tokio runtime writes it,
//! under the event client's rate limit, and a failed write is logged, never retried
//! in a way that could hold up scheduling.

use super::{KubeCluster, error_message};
use crate::cluster::{FailureReason, Recorder};
use berth_sdk::Pod;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

enum Record {
    Event {
        reporting_controller: String,
        pod: Pod,
        normal: bool,
        reason: &'static str,
        action: &'static str,
        note: String,
    },
    Condition {
        pod: Pod,
        reason: FailureReason,
        message: String,
    },
}

/// Writes events and conditions to the API server.
#[derive(Debug, Clone)]
pub struct KubeRecorder {
    tx: mpsc::UnboundedSender<Record>,
    /// The condition last written per pod UID, so an unchanged one is not written
    /// again (as upstream skips an unchanged status).
    last_condition: Arc<Mutex<HashMap<String, (FailureReason, String)>>>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Record")
    }
}

/// Writes that may be in flight at once.
const CONCURRENT_WRITES: usize = 16;

impl KubeRecorder {
    /// Starts the writer task on `handle`'s runtime.
    pub fn start(cluster: KubeCluster, handle: &tokio::runtime::Handle) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Record>();
        let instance = super::hostname();
        handle.spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(CONCURRENT_WRITES));
            while let Some(record) = rx.recv().await {
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    break;
                };
                let cluster = cluster.clone();
                let instance = instance.clone();
                tokio::spawn(async move {
                    cluster.event_limiter.acquire().await;
                    write(&cluster, &instance, record).await;
                    drop(permit);
                });
            }
        });
        KubeRecorder {
            tx,
            last_condition: Arc::default(),
        }
    }
}

async fn write(cluster: &KubeCluster, instance: &str, record: Record) {
    match record {
        Record::Event {
            reporting_controller,
            pod,
            normal,
            reason,
            action,
            note,
        } => {
            let now = k8s_openapi::jiff::Timestamp::now();
            let event = serde_json::json!({
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {
                    "name": format!("{}.{:x}", pod.name, now.as_nanosecond()),
                    "namespace": pod.namespace,
                },
                "eventTime": now.to_string(),
                "reportingController": reporting_controller,
                "reportingInstance": format!("{reporting_controller}-{instance}"),
                "action": action,
                "reason": reason,
                "type": if normal { "Normal" } else { "Warning" },
                // The API server limits a note to 1 KiB.
                "note": truncate(&note, 1024),
                "regarding": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "uid": pod.uid,
                },
            });
            let event: Event = match serde_json::from_value(event) {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(pod = %pod.key(), "cannot build the {reason} event: {e}");
                    return;
                }
            };
            let api: Api<Event> = Api::namespaced(cluster.client.clone(), &pod.namespace);
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                tracing::debug!(pod = %pod.key(), "writing the {reason} event: {}", error_message(&e));
            }
        }
        Record::Condition {
            pod,
            reason,
            message,
        } => {
            let patch = serde_json::json!({
                "status": {
                    "conditions": [{
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": reason.as_str(),
                        "message": message,
                        "lastProbeTime": null,
                        "lastTransitionTime": k8s_openapi::jiff::Timestamp::now()
                            .round(k8s_openapi::jiff::Unit::Second)
                            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now())
                            .to_string(),
                    }],
                },
            });
            let api: Api<k8s::Pod> = Api::namespaced(cluster.client.clone(), &pod.namespace);
            if let Err(e) = api
                .patch_status(
                    &pod.name,
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await
            {
                tracing::debug!(pod = %pod.key(), "patching the PodScheduled condition: {}", error_message(&e));
            }
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

impl Recorder for KubeRecorder {
    fn scheduled(&self, scheduler_name: &str, pod: &Pod, node: &str) {
        self.last_condition
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pod.uid);
        let _ = self.tx.send(Record::Event {
            reporting_controller: scheduler_name.to_owned(),
            pod: pod.clone(),
            normal: true,
            reason: "Scheduled",
            action: "Binding",
            note: format!("Successfully assigned {} to {node}", pod.key()),
        });
    }

    fn preempted(&self, victim: &Pod, preemptor: &Pod, node: &str) {
        let _ = self.tx.send(Record::Event {
            reporting_controller: preemptor.scheduler_name.clone(),
            pod: victim.clone(),
            normal: true,
            reason: "Preempted",
            action: "Preempting",
            note: format!("Preempted by pod {} on node {node}", preemptor.uid),
        });
    }

    fn forget(&self, uid: &str) {
        self.last_condition
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }

    fn failed(&self, scheduler_name: &str, pod: &Pod, reason: FailureReason, message: &str) {
        let _ = self.tx.send(Record::Event {
            reporting_controller: scheduler_name.to_owned(),
            pod: pod.clone(),
            normal: false,
            reason: "FailedScheduling",
            action: "Scheduling",
            note: message.to_owned(),
        });
        let changed = {
            let mut last = self
                .last_condition
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let new = (reason, message.to_owned());
            if last.get(&pod.uid) == Some(&new) {
                false
            } else {
                last.insert(pod.uid.clone(), new);
                true
            }
        };
        if changed {
            let _ = self.tx.send(Record::Condition {
                pod: pod.clone(),
                reason,
                message: message.to_owned(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn notes_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("abc", 10), "abc");
        let long = "é".repeat(600);
        let t = truncate(&long, 1024);
        assert!(t.len() <= 1024 && t.ends_with("..."));
    }
}
