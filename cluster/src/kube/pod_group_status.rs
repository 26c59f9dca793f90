//! A PodGroup's status as kube-scheduler writes it (`updatePodGroupCondition` in
//! `pkg/scheduler/schedule_one_podgroup.go`): after each of the group's cycles, its
//! [`POD_GROUP_CONDITION`] condition says how the cycle ended: True with reason
//! `Scheduled`, or False with `Unschedulable` or `SchedulerError` and the cycle's
//! message; `observedGeneration` is the PodGroup's `metadata.generation`. A True is
//! never taken back to False (members past `minCount` that fail later do not undo
//! the group), and nothing is written when nothing would change.
//!
//! Upstream decides on its informer's copy of the PodGroup; Berth on the copy its
//! PodGroup watcher keeps in [`PodGroupStatuses`], so an unchanged outcome costs no
//! request. The write is a JSON merge patch of `status.conditions` on the status
//! subresource, sent under the `resourceVersion` of the copy it was computed from: a
//! merge patch replaces the list whole, and the API server refuses it (409) if the
//! PodGroup changed since, so a condition written meanwhile (by another scheduler
//! instance, say) is never overwritten. On a refusal the PodGroup is read again and
//! the decision made again.

use super::{KubeCluster, error_message};
use crate::PodGroupOutcome;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The condition kube-scheduler 1.37 writes on a PodGroup after each of its cycles
/// (the `scheduling.k8s.io/v1beta1` name; 1.36's `v1alpha2` called it
/// `PodGroupScheduled`).
pub const POD_GROUP_CONDITION: &str = "PodGroupInitiallyScheduled";

/// How many times one outcome is sent before it is given up: each refusal (the
/// PodGroup changed since it was read) reads it again first.
const WRITE_ATTEMPTS: usize = 3;

/// What the PodGroup watcher last saw of each PodGroup (its resourceVersion,
/// generation and conditions), and the resource the API server serves them as: what
/// the recorder decides its writes on.
#[derive(Debug, Default)]
pub struct PodGroupStatuses {
    pub(super) resource: OnceLock<ApiResource>,
    seen: Mutex<HashMap<String, Seen>>,
}

/// One PodGroup, as last seen.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Seen {
    pub(super) resource_version: Option<String>,
    pub(super) generation: Option<i64>,
    /// `status.conditions`, as served (written back whole).
    pub(super) conditions: Vec<Value>,
}

impl Seen {
    fn of(o: &DynamicObject) -> Self {
        Seen {
            resource_version: o.metadata.resource_version.clone(),
            generation: o.metadata.generation,
            conditions: o
                .data
                .get("status")
                .and_then(|s| s.get("conditions"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        }
    }
}

fn key_of(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or_default(),
        o.metadata.name.as_deref().unwrap_or_default()
    )
}

impl PodGroupStatuses {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Seen>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The API server serves PodGroups as `resource`.
    pub(super) fn serve(&self, resource: ApiResource) {
        let _ = self.resource.set(resource);
    }

    /// The watcher saw `o` (listed, added or changed).
    pub(super) fn observe(&self, o: &DynamicObject) {
        self.lock().insert(key_of(o), Seen::of(o));
    }

    /// `o` as a write or a read returned it: kept only if the PodGroup is still
    /// known (a PodGroup deleted meanwhile is not brought back).
    fn refresh(&self, o: &DynamicObject) {
        if let Some(seen) = self.lock().get_mut(&key_of(o)) {
            *seen = Seen::of(o);
        }
    }

    /// The PodGroup `namespace/name` is gone.
    pub(super) fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    pub(super) fn get(&self, key: &str) -> Option<Seen> {
        self.lock().get(key).cloned()
    }
}

/// The merge patch that writes `outcome` onto a PodGroup seen as `seen`, at `now`
/// (RFC 3339, for a transition); `None` when nothing would change, or when it
/// would take a True condition back to False. As upstream's `SetStatusCondition`:
/// the transition time moves only when the status does; reason, message and
/// observedGeneration are set either way; other conditions are kept as they are.
fn condition_patch(seen: &Seen, outcome: &PodGroupOutcome, now: &str) -> Option<Value> {
    let status = if outcome.scheduled { "True" } else { "False" };
    let mut conditions = seen.conditions.clone();
    let existing = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(POD_GROUP_CONDITION));
    let text = |c: &Value, field: &str| {
        c.get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let transition = match existing.map(|i| &conditions[i]) {
        Some(old) if text(old, "status") == "True" && !outcome.scheduled => return None,
        Some(old)
            if text(old, "status") == status
                && text(old, "reason") == outcome.reason
                && text(old, "message") == outcome.message
                && old.get("observedGeneration").and_then(Value::as_i64)
                    == seen.generation.filter(|g| *g != 0) =>
        {
            return None;
        }
        Some(old) if text(old, "status") == status => old
            .get("lastTransitionTime")
            .cloned()
            .unwrap_or_else(|| now.into()),
        _ => now.into(),
    };
    let mut condition = json!({
        "type": POD_GROUP_CONDITION,
        "status": status,
        "reason": outcome.reason,
        "message": outcome.message,
        "lastTransitionTime": transition,
    });
    if let Some(generation) = seen.generation.filter(|g| *g != 0) {
        condition["observedGeneration"] = generation.into();
    }
    match existing {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    let mut patch = json!({"status": {"conditions": conditions}});
    if let Some(rv) = &seen.resource_version {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    Some(patch)
}

fn now() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or(now)
        .to_string()
}

/// Writes `outcome` as the PodGroup's condition (see the module's doc). Failures are
/// logged; nothing is written when the API server serves no PodGroups or the
/// PodGroup is not known (deleted since its cycle).
pub(super) async fn write_condition(
    cluster: &KubeCluster,
    namespace: &str,
    name: &str,
    outcome: &PodGroupOutcome,
) {
    let statuses = &cluster.pod_groups;
    let Some(resource) = statuses.resource.get() else {
        return;
    };
    let key = format!("{namespace}/{name}");
    let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), namespace, resource);
    let mut current = statuses.get(&key);
    for attempt in 0..WRITE_ATTEMPTS {
        let Some(seen) = current.take() else {
            tracing::debug!(podgroup = %key, "not writing its {POD_GROUP_CONDITION} condition: no such PodGroup");
            return;
        };
        let Some(patch) = condition_patch(&seen, outcome, &now()) else {
            return;
        };
        if attempt > 0 {
            cluster.event_limiter.acquire().await;
        }
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(o) => {
                statuses.refresh(&o);
                return;
            }
            // Changed since it was read: read it again, decide again.
            Err(kube::Error::Api(s)) if s.code == 409 => {
                cluster.event_limiter.acquire().await;
                match api.get(name).await {
                    Ok(o) => {
                        statuses.refresh(&o);
                        current = Some(Seen::of(&o));
                    }
                    Err(e) => {
                        tracing::debug!(podgroup = %key, "reading the PodGroup again: {}", error_message(&e));
                        return;
                    }
                }
            }
            Err(e) => {
                tracing::debug!(podgroup = %key, "writing its {POD_GROUP_CONDITION} condition: {}", error_message(&e));
                return;
            }
        }
    }
    tracing::debug!(podgroup = %key, "not writing its {POD_GROUP_CONDITION} condition: it kept changing");
}

/// The outcomes waiting to be written, per group: one write of a group is queued or
/// under way at a time, and outcomes that come meanwhile replace each other, so the
/// newest is written last and a busy group costs one write per round, not one per
/// cycle.
#[derive(Debug, Default)]
pub(super) struct PendingOutcomes(Mutex<HashMap<(String, String), Option<PodGroupOutcome>>>);

impl PendingOutcomes {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), Option<PodGroupOutcome>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `outcome` as the group's newest; true when no write of the group is
    /// queued or under way, so the caller queues one.
    pub(super) fn offer(&self, namespace: &str, name: &str, outcome: PodGroupOutcome) -> bool {
        let mut pending = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        let first = !pending.contains_key(&key);
        pending.insert(key, Some(outcome));
        first
    }

    /// The group's newest outcome not taken yet; `None` ends its writes (the next
    /// offer queues one again).
    pub(super) fn take(&self, namespace: &str, name: &str) -> Option<PodGroupOutcome> {
        let mut pending = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        let next = pending.get_mut(&key)?.take();
        if next.is_none() {
            pending.remove(&key);
        }
        next
    }

    /// The queued write was dropped (the queue was full): the group's outcome with it.
    pub(super) fn dropped(&self, namespace: &str, name: &str) {
        self.lock().remove(&(namespace.to_owned(), name.to_owned()));
    }
}

/// Writes the group's outcomes, newest last, until none is left.
pub(super) async fn write_pending(
    cluster: &KubeCluster,
    pending: &PendingOutcomes,
    namespace: &str,
    name: &str,
) {
    let mut first = true;
    while let Some(outcome) = pending.take(namespace, name) {
        if !first {
            cluster.event_limiter.acquire().await;
        }
        first = false;
        write_condition(cluster, namespace, name, &outcome).await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{self, Answer};
    use super::*;
    use crate::Recorder;
    use crate::kube::KubeRecorder;
    use std::sync::Arc;

    const NOW: &str = "2026-11-26T20:00:00Z";
    const BEFORE: &str = "2026-11-26T19:00:00Z";

    fn outcome(scheduled: bool, reason: &'static str, message: &str) -> PodGroupOutcome {
        PodGroupOutcome {
            scheduled,
            reason,
            message: message.into(),
        }
    }

    fn condition(status: &str, reason: &str, message: &str, generation: i64) -> Value {
        json!({
            "type": POD_GROUP_CONDITION,
            "status": status,
            "observedGeneration": generation,
            "lastTransitionTime": BEFORE,
            "reason": reason,
            "message": message,
        })
    }

    fn seen(conditions: Vec<Value>) -> Seen {
        Seen {
            resource_version: Some("7".into()),
            generation: Some(2),
            conditions,
        }
    }

    #[test]
    fn each_outcome_is_written_as_upstream_writes_its_condition() {
        let fresh = seen(vec![]);
        let written = |o: &PodGroupOutcome| condition_patch(&fresh, o, NOW).unwrap();
        assert_eq!(
            written(&outcome(true, "Scheduled", "")),
            json!({
                "metadata": {"resourceVersion": "7"},
                "status": {"conditions": [{
                    "type": "PodGroupInitiallyScheduled",
                    "status": "True",
                    "reason": "Scheduled",
                    "message": "",
                    "lastTransitionTime": NOW,
                    "observedGeneration": 2,
                }]},
            })
        );
        let message = "pod group ml/trainer cannot be placed: 0/3 nodes are available";
        assert_eq!(
            written(&outcome(false, "Unschedulable", message)),
            json!({
                "metadata": {"resourceVersion": "7"},
                "status": {"conditions": [{
                    "type": "PodGroupInitiallyScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": NOW,
                    "observedGeneration": 2,
                }]},
            })
        );
        assert_eq!(
            written(&outcome(false, "SchedulerError", "plugin X failed"))["status"]["conditions"]
                [0],
            json!({
                "type": "PodGroupInitiallyScheduled",
                "status": "False",
                "reason": "SchedulerError",
                "message": "plugin X failed",
                "lastTransitionTime": NOW,
                "observedGeneration": 2,
            })
        );
    }

    #[test]
    fn true_is_never_taken_back_and_an_unchanged_condition_is_not_written() {
        let scheduled = seen(vec![condition("True", "Scheduled", "", 2)]);
        assert_eq!(
            condition_patch(&scheduled, &outcome(false, "Unschedulable", "no"), NOW),
            None
        );
        assert_eq!(
            condition_patch(&scheduled, &outcome(false, "SchedulerError", "boom"), NOW),
            None
        );
        assert_eq!(
            condition_patch(&scheduled, &outcome(true, "Scheduled", ""), NOW),
            None
        );
        let waiting = seen(vec![condition("False", "Unschedulable", "no room", 2)]);
        assert_eq!(
            condition_patch(&waiting, &outcome(false, "Unschedulable", "no room"), NOW),
            None
        );
        // True again with another message: the message changes, the transition
        // time does not.
        let p = condition_patch(&scheduled, &outcome(true, "Scheduled", "again"), NOW).unwrap();
        let c = &p["status"]["conditions"][0];
        assert_eq!(
            (c["message"].as_str(), c["lastTransitionTime"].as_str()),
            (Some("again"), Some(BEFORE))
        );
    }

    #[test]
    fn a_change_keeps_the_other_conditions_and_moves_the_time_only_with_the_status() {
        let disruption = json!({
            "type": "DisruptionTarget",
            "status": "True",
            "lastTransitionTime": BEFORE,
            "reason": "PreemptionByScheduler",
            "message": "preempted",
        });
        let waiting = seen(vec![
            disruption.clone(),
            condition("False", "Unschedulable", "no room", 1),
        ]);
        // Another message, and the PodGroup's generation moved (minCount changed).
        let p = condition_patch(
            &waiting,
            &outcome(false, "Unschedulable", "still no room"),
            NOW,
        )
        .unwrap();
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        let conditions = p["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions[0], disruption);
        assert_eq!(
            conditions[1],
            json!({
                "type": "PodGroupInitiallyScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "still no room",
                "lastTransitionTime": BEFORE,
                "observedGeneration": 2,
            })
        );
        // Only the generation moved: written too.
        let p =
            condition_patch(&waiting, &outcome(false, "Unschedulable", "no room"), NOW).unwrap();
        assert_eq!(p["status"]["conditions"][1]["observedGeneration"], 2);
        // False to True: a transition.
        let p = condition_patch(&waiting, &outcome(true, "Scheduled", ""), NOW).unwrap();
        let c = &p["status"]["conditions"][1];
        assert_eq!(
            (c["status"].as_str(), c["lastTransitionTime"].as_str()),
            (Some("True"), Some(NOW))
        );
    }

    #[test]
    fn a_busy_group_s_outcomes_fold_into_one_write_newest_last() {
        let pending = PendingOutcomes::default();
        assert!(pending.offer("ns", "g", outcome(false, "Unschedulable", "1")));
        // A write is queued: the next outcomes replace the first.
        assert!(!pending.offer("ns", "g", outcome(false, "Unschedulable", "2")));
        assert!(!pending.offer("ns", "g", outcome(true, "Scheduled", "")));
        assert!(pending.offer("ns", "other", outcome(true, "Scheduled", "")));
        assert_eq!(
            pending.take("ns", "g"),
            Some(outcome(true, "Scheduled", ""))
        );
        // While it is written, another comes: the same write takes it next.
        assert!(!pending.offer("ns", "g", outcome(false, "Unschedulable", "3")));
        assert_eq!(
            pending.take("ns", "g"),
            Some(outcome(false, "Unschedulable", "3"))
        );
        assert_eq!(pending.take("ns", "g"), None);
        // The group's writes ended: the next outcome queues one again.
        assert!(pending.offer("ns", "g", outcome(false, "Unschedulable", "4")));
        pending.dropped("ns", "g");
        assert!(pending.offer("ns", "g", outcome(false, "Unschedulable", "5")));
    }

    /// The PodGroup `ml/trainer` as a 1.37 API server serves it, at resourceVersion
    /// `rv`.
    fn served(rv: u64, conditions: Vec<Value>) -> Value {
        crate::manifest::pod_group::fixtures::served_pod_group(rv, conditions)
    }

    /// The status subresource of one PodGroup with the API server's optimistic
    /// concurrency: a merge patch naming another resourceVersion is refused (409),
    /// one that matches replaces `status.conditions` and moves the version.
    fn stand_in(
        object: Arc<Mutex<Value>>,
    ) -> impl Fn(&fake::Request) -> Answer + Send + Sync + 'static {
        const PATH: &str = "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups/trainer";
        move |r| {
            let mut o = object.lock().unwrap();
            match (r.method.as_str(), r.path.strip_prefix(PATH)) {
                ("GET", Some("")) => Answer::Json(200, o.clone()),
                ("PATCH", Some("/status")) => {
                    let rv = &o["metadata"]["resourceVersion"];
                    if r.body["metadata"]["resourceVersion"] != *rv {
                        return fake::status(
                            409,
                            "Conflict",
                            "Operation cannot be fulfilled on podgroups.scheduling.k8s.io \"trainer\": the object has been modified; please apply your changes to the latest version and try again",
                        );
                    }
                    let next: u64 = rv.as_str().unwrap().parse::<u64>().unwrap() + 1;
                    o["metadata"]["resourceVersion"] = next.to_string().into();
                    o["status"]["conditions"] = r.body["status"]["conditions"].clone();
                    Answer::Json(200, o.clone())
                }
                _ => fake::not_found(),
            }
        }
    }

    fn resource() -> ApiResource {
        let gvk = kube::api::GroupVersionKind::gvk("scheduling.k8s.io", "v1beta1", "PodGroup");
        ApiResource::from_gvk_with_plural(&gvk, "podgroups")
    }

    fn dynamic(v: &Value) -> DynamicObject {
        serde_json::from_value(v.clone()).unwrap()
    }

    fn conditions(v: &Value) -> Vec<(String, String, String)> {
        v["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let s = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
                (s("type"), s("status"), s("message"))
            })
            .collect()
    }

    #[tokio::test]
    async fn the_recorder_writes_the_condition_under_the_version_it_read() {
        let first = served(100, vec![condition("False", "Unschedulable", "no room", 2)]);
        let object = Arc::new(Mutex::new(first.clone()));
        let (client, requests) = fake::client(stand_in(object.clone()));
        let cluster = fake::cluster(client);
        cluster.pod_groups.serve(resource());
        // The watcher saw it at 100; then someone else marked it for disruption (101),
        // which the watch has not brought yet.
        cluster.pod_groups.observe(&dynamic(&first));
        {
            let mut o = object.lock().unwrap();
            o["metadata"]["resourceVersion"] = "101".into();
            o["status"]["conditions"]
                .as_array_mut()
                .unwrap()
                .insert(0, json!({"type": "DisruptionTarget", "status": "True", "lastTransitionTime": BEFORE, "reason": "PreemptionByScheduler", "message": "preempted"}));
        }
        let recorder = KubeRecorder::start(cluster.clone(), &tokio::runtime::Handle::current());
        recorder.pod_group_scheduled(
            "ml",
            "trainer",
            &outcome(false, "Unschedulable", "still no room"),
        );
        assert_eq!(recorder.flush(std::time::Duration::from_secs(10)).await, 0);

        // Refused at 100, read again, written at 101: the other writer's condition
        // is kept.
        let sent: Vec<fake::Request> = requests.lock().unwrap().drain(..).collect();
        let calls: Vec<(&str, &str)> = sent
            .iter()
            .map(|r| (r.method.as_str(), r.path.as_str()))
            .collect();
        let status = "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups/trainer/status";
        let object_path = "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups/trainer";
        assert_eq!(
            calls,
            [("PATCH", status), ("GET", object_path), ("PATCH", status)]
        );
        assert_eq!(sent[0].content_type, "application/merge-patch+json");
        assert_eq!(sent[0].body["metadata"]["resourceVersion"], "100");
        assert_eq!(sent[2].body["metadata"]["resourceVersion"], "101");
        let now = object.lock().unwrap().clone();
        assert_eq!(
            conditions(&now),
            [
                ("DisruptionTarget".into(), "True".into(), "preempted".into()),
                (
                    POD_GROUP_CONDITION.into(),
                    "False".into(),
                    "still no room".into()
                ),
            ]
        );
        assert_eq!(now["status"]["conditions"][1]["lastTransitionTime"], BEFORE);

        // Scheduled: written on the version the last write returned, at once.
        recorder.pod_group_scheduled("ml", "trainer", &outcome(true, "Scheduled", ""));
        assert_eq!(recorder.flush(std::time::Duration::from_secs(10)).await, 0);
        let sent: Vec<fake::Request> = requests.lock().unwrap().drain(..).collect();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0].body["metadata"]["resourceVersion"], "102");
        let now = object.lock().unwrap().clone();
        assert_eq!(
            conditions(&now)[1],
            (POD_GROUP_CONDITION.into(), "True".into(), String::new())
        );

        // A later failure (a member past minCount) and a repeat write nothing.
        recorder.pod_group_scheduled(
            "ml",
            "trainer",
            &outcome(false, "Unschedulable", "extra member"),
        );
        recorder.pod_group_scheduled("ml", "trainer", &outcome(true, "Scheduled", ""));
        assert_eq!(recorder.flush(std::time::Duration::from_secs(10)).await, 0);
        assert!(requests.lock().unwrap().is_empty());

        // A PodGroup the watcher no longer knows (deleted): nothing is sent.
        cluster.pod_groups.forget("ml/trainer");
        recorder.pod_group_scheduled("ml", "trainer", &outcome(true, "Scheduled", "x"));
        assert_eq!(recorder.flush(std::time::Duration::from_secs(10)).await, 0);
        assert!(requests.lock().unwrap().is_empty());
    }
}
