//! Events and pod status, as kube-scheduler writes them: an `events.k8s.io/v1` event
//! `Scheduled` (Normal, action `Binding`) when a pod is bound, `FailedScheduling`
//! (Warning, action `Scheduling`) when an attempt fails, and on failure the pod's
//! `PodScheduled` condition set to False with reason `Unschedulable` or
//! `SchedulerError` and the attempt's message.
//!
//! The scheduling loop only queues a record; a task on the tokio runtime writes it,
//! under the event client's rate limit, and a failed write is logged, never retried
//! in a way that could hold up scheduling. At most [`QUEUED_RECORDS`] records wait,
//! as client-go's event broadcaster keeps 1000 and drops the rest: an API server
//! that does not keep up costs events (counted and logged), never the scheduler's
//! memory.

use super::{KubeCluster, error_message};
use crate::cluster::{FailureReason, Recorder};
use berth_sdk::Pod;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// What a record says of its pod.
struct PodRef {
    namespace: String,
    name: String,
    uid: String,
}

impl PodRef {
    fn of(pod: &Pod) -> Self {
        PodRef {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

enum Record {
    Event {
        reporting_controller: String,
        pod: PodRef,
        normal: bool,
        reason: &'static str,
        action: &'static str,
        note: String,
    },
    Condition {
        pod: PodRef,
        reason: FailureReason,
        message: String,
    },
}

/// Records that may wait for the writer.
pub const QUEUED_RECORDS: usize = 1000;

/// The loop's end of the records' queue: a record that finds it full is dropped and
/// counted.
#[derive(Debug, Clone)]
struct Outbox {
    tx: mpsc::Sender<Record>,
    dropped: Arc<AtomicU64>,
}

impl Outbox {
    fn send(&self, record: Record) {
        if self.tx.try_send(record).is_err() {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n == 1 || n.is_multiple_of(1000) {
                tracing::warn!(
                    dropped = n,
                    "the API server is not keeping up with events and pod conditions: {n} dropped so far"
                );
            }
        }
    }
}

/// Writes events and conditions to the API server.
#[derive(Debug, Clone)]
pub struct KubeRecorder {
    outbox: Outbox,
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
        let (tx, mut rx) = mpsc::channel::<Record>(QUEUED_RECORDS);
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
            outbox: Outbox {
                tx,
                dropped: Arc::default(),
            },
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
        self.outbox.send(Record::Event {
            reporting_controller: scheduler_name.to_owned(),
            pod: PodRef::of(pod),
            normal: true,
            reason: "Scheduled",
            action: "Binding",
            note: format!("Successfully assigned {} to {node}", pod.key()),
        });
    }

    fn preempted(&self, victim: &Pod, preemptor: &Pod, node: &str) {
        self.outbox.send(Record::Event {
            reporting_controller: preemptor.scheduler_name.clone(),
            pod: PodRef::of(victim),
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
        self.outbox.send(Record::Event {
            reporting_controller: scheduler_name.to_owned(),
            pod: PodRef::of(pod),
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
            self.outbox.send(Record::Condition {
                pod: PodRef::of(pod),
                reason,
                message: message.to_owned(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_past_the_queue_s_bound_are_dropped_and_counted() {
        let (tx, mut rx) = mpsc::channel::<Record>(QUEUED_RECORDS);
        let outbox = Outbox {
            tx,
            dropped: Arc::default(),
        };
        let pod = Pod {
            namespace: "ns".into(),
            name: "p".into(),
            ..Pod::default()
        };
        for _ in 0..QUEUED_RECORDS + 5 {
            outbox.send(Record::Condition {
                pod: PodRef::of(&pod),
                reason: FailureReason::Unschedulable,
                message: "no".into(),
            });
        }
        assert_eq!(outbox.dropped.load(Ordering::Relaxed), 5);
        assert!(rx.try_recv().is_ok());
        outbox.send(Record::Condition {
            pod: PodRef::of(&pod),
            reason: FailureReason::Unschedulable,
            message: "room again".into(),
        });
        assert_eq!(outbox.dropped.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn notes_are_cut_on_a_character_boundary() {
        assert_eq!(truncate("abc", 10), "abc");
        let long = "é".repeat(600);
        let t = truncate(&long, 1024);
        assert!(t.len() <= 1024 && t.ends_with("..."));
    }
}
