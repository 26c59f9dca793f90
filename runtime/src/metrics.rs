//! Metrics kept in the host, with kube-scheduler's names, labels and buckets where the
//! meaning is the same, plus Berth's own about the sandbox. They live in a
//! [`prometheus::Registry`] and are rendered in the Prometheus text format by that
//! library; `berth run` serves them on `/metrics`.
//!
//! A [`Metrics`] is a cheap handle: clones share the same counters, so the scheduling
//! loop, the binding threads and the HTTP server all see one set.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder, exponential_buckets,
};
use std::sync::Arc;
use std::time::Duration;

/// The result of a scheduling attempt, as upstream's `result` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttemptResult {
    /// The pod was assigned a node.
    Scheduled,
    /// No node fits.
    Unschedulable,
    /// A plugin or the host failed.
    Error,
}

impl AttemptResult {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptResult::Scheduled => "scheduled",
            AttemptResult::Unschedulable => "unschedulable",
            AttemptResult::Error => "error",
        }
    }
}

/// Attempts at or beyond this count share one `attempts` label value ("15+"), as
/// upstream's SLI histogram keeps its label set bounded.
const MAX_ATTEMPTS_LABEL: u32 = 15;

/// The scheduler's metrics (a shared handle).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

struct Inner {
    registry: Registry,
    schedule_attempts: IntCounterVec,
    attempt_duration: HistogramVec,
    pending_pods: IntGaugeVec,
    unschedulable_pods: IntGaugeVec,
    /// The `(plugin, profile)` series of `unschedulable_pods` set so far: one that no
    /// pod counts for any more goes to 0, as upstream's gauge does.
    unschedulable_series: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
    incoming_pods: IntCounterVec,
    extension_point_duration: HistogramVec,
    plugin_execution_duration: HistogramVec,
    sli_duration: HistogramVec,
    plugin_traps: IntCounterVec,
    plugin_refused_calls: IntCounterVec,
    plugin_call_duration: HistogramVec,
    preemption_attempts: IntCounterVec,
    preemption_victims: HistogramVec,
    preemption_carried_out: IntCounterVec,
    plugin_failures_ignored: IntCounterVec,
    plugin_output_lines: IntCounterVec,
    records_dropped: IntCounterVec,
    plugin_reloads: IntCounterVec,
    shadow_cycles: IntCounterVec,
    shadow_disagreements: IntCounterVec,
    batch_attempts: IntCounterVec,
    batch_flushes: IntCounterVec,
    kinds_forbidden: IntGaugeVec,
}

fn buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    exponential_buckets(start, factor, count).expect("constant, valid bucket parameters")
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry.register(Box::new(c.clone())).expect("unique name");
    c
}

fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> HistogramVec {
    let h =
        HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels).expect("valid");
    registry.register(Box::new(h.clone())).expect("unique name");
    h
}

fn gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry.register(Box::new(g.clone())).expect("unique name");
    g
}

/// The gauges: pending pods per queue, unschedulable pods per plugin and profile,
/// and the kinds the scheduler may not list.
fn gauges(r: &Registry) -> (IntGaugeVec, IntGaugeVec, IntGaugeVec) {
    (
        gauge(
            r,
            "scheduler_pending_pods",
            "Pods waiting to be scheduled, per queue: active (activeQ), backoff (backoffQ), unschedulable (tried and failed), gated (held back by a PreEnqueue plugin, never tried).",
            &["queue"],
        ),
        gauge(
            r,
            "scheduler_unschedulable_pods",
            "Pending pods per plugin that rejected their last attempt or gates them (a pod counts once for each such plugin), and profile; a pod leaves the count when its next attempt starts or it is deleted.",
            &["plugin", "profile"],
        ),
        gauge(
            r,
            "berth_list_forbidden",
            "1 while the API server forbids the scheduler to list the kind (403; pods whose scheduling needs it wait), 0 once it may list it again; per kind (resource.group).",
            &["kind"],
        ),
    )
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set, in its own registry.
    pub fn new() -> Self {
        let r = Registry::new();
        let (pending_pods, unschedulable_pods, kinds_forbidden) = gauges(&r);
        Metrics {
            inner: Arc::new(Inner {
                schedule_attempts: counter(
                    &r,
                    "scheduler_schedule_attempts_total",
                    "Scheduling attempts per result (scheduled; unschedulable: no node fits; error: a plugin or the scheduler failed) and profile.",
                    &["result", "profile"],
                ),
                attempt_duration: histogram(
                    &r,
                    "scheduler_scheduling_attempt_duration_seconds",
                    "Seconds one scheduling cycle took, per result and profile.",
                    &["result", "profile"],
                    buckets(0.001, 2.0, 15),
                ),
                pending_pods,
                unschedulable_pods,
                unschedulable_series: Default::default(),
                incoming_pods: counter(
                    &r,
                    "scheduler_queue_incoming_pods_total",
                    "Pods moved into a queue, per queue and the event that moved them.",
                    &["queue", "event"],
                ),
                extension_point_duration: histogram(
                    &r,
                    "scheduler_framework_extension_point_duration_seconds",
                    "Seconds the plugins of one extension point took together, per extension point, status and profile.",
                    &["extension_point", "status", "profile"],
                    buckets(0.0001, 2.0, 12),
                ),
                plugin_execution_duration: histogram(
                    &r,
                    "scheduler_plugin_execution_duration_seconds",
                    "Seconds one plugin took at one extension point, per status; measured in a sample of the scheduling cycles.",
                    &["plugin", "extension_point", "status"],
                    buckets(0.00001, 1.5, 20),
                ),
                sli_duration: histogram(
                    &r,
                    "scheduler_pod_scheduling_sli_duration_seconds",
                    "Seconds from a pod's first scheduling attempt to its successful binding, per number of attempts it needed.",
                    &["attempts"],
                    buckets(0.01, 2.0, 20),
                ),
                plugin_traps: counter(
                    &r,
                    "berth_plugin_traps_total",
                    "Number of calls into a plugin's WebAssembly instance that trapped (a panic, a deadline, a memory fault); the instance is rebuilt after each.",
                    &["plugin"],
                ),
                plugin_refused_calls: counter(
                    &r,
                    "berth_plugin_refused_calls_total",
                    "Number of host calls refused to a plugin: a call outside what its extension point and cycle allow (binding another pod, approving another plugin's wait, writing storage from Filter).",
                    &["plugin", "call", "extension_point"],
                ),
                plugin_call_duration: histogram(
                    &r,
                    "berth_plugin_call_duration_seconds",
                    "Time spent inside a plugin's WebAssembly instance per call, without the host's work around it.",
                    &["plugin", "extension_point"],
                    buckets(0.00001, 1.5, 20),
                ),
                preemption_attempts: counter(
                    &r,
                    "scheduler_preemption_attempts_total",
                    "Preemption attempts: PostFilter runs of a profile with a PostFilter plugin.",
                    &[],
                ),
                preemption_victims: histogram(
                    &r,
                    "scheduler_preemption_victims",
                    "Number of pods a preemption evicted.",
                    &[],
                    buckets(1.0, 2.0, 7),
                ),
                preemption_carried_out: counter(
                    &r,
                    "scheduler_preemption_goroutines_execution_total",
                    "Preemptions carried out apart from the scheduling loop (nominations written, victims evicted), by result: error when an eviction failed. Upstream's name; Berth runs them on its preemption threads.",
                    &["result"],
                ),
                plugin_failures_ignored: counter(
                    &r,
                    "berth_plugin_failures_ignored_total",
                    "Failures of a plugin whose failurePolicy is FailOpen that were ignored: its scores were dropped for that scheduling cycle and the pod was scheduled on the other plugins' scores.",
                    &["plugin"],
                ),
                records_dropped: counter(
                    &r,
                    "berth_event_records_dropped_total",
                    "Events and pod conditions dropped because 1000 were already waiting for the API server (as client-go's event broadcaster drops them).",
                    &[],
                ),
                plugin_output_lines: counter(
                    &r,
                    "berth_plugin_output_lines_total",
                    "Lines a plugin wrote to stdout or stderr or sent through the SDK's log call, per outcome: logged, or suppressed by the per-instance rate limit.",
                    &["plugin", "outcome"],
                ),
                plugin_reloads: counter(
                    &r,
                    "berth_plugin_reloads_total",
                    "Reloads of a plugin's module or configuration while the scheduler runs, per result: success (swapped in) or refused (the old version keeps serving). A configuration refused before any plugin could be told apart counts under plugin=\"\".",
                    &["plugin", "result"],
                ),
                shadow_cycles: counter(
                    &r,
                    "berth_shadow_cycles_total",
                    "Scheduling cycles on which a plugin's shadow candidate was compared with it.",
                    &["plugin"],
                ),
                shadow_disagreements: counter(
                    &r,
                    "berth_shadow_disagreements_total",
                    "Cycles on which a plugin's shadow candidate answered otherwise, per kind: filter (a PreFilter or Filter verdict), score (a normalized score), node (the node that would be picked), error (the candidate failed).",
                    &["plugin", "kind"],
                ),
                batch_attempts: counter(
                    &r,
                    "scheduler_batch_attempts_total",
                    "Scheduling cycles of pods in a batchable profile (opportunistic batching), per result: hint_used (placed on the node a previous cycle ranked next, without filtering or scoring the others), hint_not_used (the hint did not fit; the cycle ran in full), no_hint (no usable batch).",
                    &["profile", "result"],
                ),
                batch_flushes: counter(
                    &r,
                    "scheduler_batch_cache_flushed_total",
                    "Times a profile's batch (a previous cycle's ranked nodes) was thrown away, per reason.",
                    &["profile", "reason"],
                ),
                kinds_forbidden,
                registry: r,
            }),
        }
    }

    /// Records one scheduling attempt of a pod of `profile`.
    pub fn observe_attempt(&self, result: AttemptResult, profile: &str, took: Duration) {
        let labels = [result.as_str(), profile];
        self.inner
            .schedule_attempts
            .with_label_values(&labels)
            .inc();
        self.inner
            .attempt_duration
            .with_label_values(&labels)
            .observe(took.as_secs_f64());
    }

    /// Attempts with this result, over every profile.
    pub fn attempts(&self, result: AttemptResult) -> u64 {
        use prometheus::core::Collector;
        self.inner
            .schedule_attempts
            .collect()
            .iter()
            .flat_map(|f| f.get_metric())
            .filter(|m| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == "result" && l.value() == result.as_str())
            })
            .map(|m| m.get_counter().get_value() as u64)
            .sum()
    }

    /// Sets how many pods wait in each queue.
    pub fn set_pending<'a>(&self, pending: impl IntoIterator<Item = (&'a str, usize)>) {
        for (queue, n) in pending {
            self.inner
                .pending_pods
                .with_label_values(&[queue])
                .set(n as i64);
        }
    }

    /// Sets how many pending pods each plugin keeps out, by `(plugin, profile)`; a
    /// series set before and absent now goes to 0.
    pub fn set_unschedulable(&self, counts: &std::collections::BTreeMap<(String, String), usize>) {
        let mut series = self
            .inner
            .unschedulable_series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (plugin, profile) in series.iter() {
            if !counts.contains_key(&(plugin.clone(), profile.clone())) {
                self.inner
                    .unschedulable_pods
                    .with_label_values(&[plugin.as_str(), profile.as_str()])
                    .set(0);
            }
        }
        for ((plugin, profile), n) in counts {
            self.inner
                .unschedulable_pods
                .with_label_values(&[plugin.as_str(), profile.as_str()])
                .set(*n as i64);
            series.insert((plugin.clone(), profile.clone()));
        }
    }

    /// A pod entered `queue` because of `event`.
    pub fn count_incoming(&self, event: &str, queue: &str) {
        self.inner
            .incoming_pods
            .with_label_values(&[queue, event])
            .inc();
    }

    /// A pod was bound `took` after its first attempt began, in `attempts` attempts.
    pub fn observe_scheduled_pod(&self, attempts: u32, took: Duration) {
        let label = if attempts >= MAX_ATTEMPTS_LABEL {
            format!("{MAX_ATTEMPTS_LABEL}+")
        } else {
            attempts.to_string()
        };
        self.inner
            .sli_duration
            .with_label_values(&[&label])
            .observe(took.as_secs_f64());
    }

    /// All plugins of an extension point ran for a pod of `profile`.
    pub fn observe_extension_point(
        &self,
        extension_point: &str,
        status: &str,
        profile: &str,
        took: Duration,
    ) {
        self.inner
            .extension_point_duration
            .with_label_values(&[extension_point, status, profile])
            .observe(took.as_secs_f64());
    }

    /// One plugin ran at an extension point (sampled by the caller, as upstream).
    pub fn observe_plugin(
        &self,
        plugin: &str,
        extension_point: &str,
        status: &str,
        took: Duration,
    ) {
        self.inner
            .plugin_execution_duration
            .with_label_values(&[plugin, extension_point, status])
            .observe(took.as_secs_f64());
    }

    /// A preemption attempt (PostFilter ran).
    pub fn count_preemption_attempt(&self) {
        self.inner
            .preemption_attempts
            .with_label_values(&[] as &[&str])
            .inc();
    }

    /// Preemption attempts so far.
    pub fn preemption_attempts(&self) -> u64 {
        self.inner
            .preemption_attempts
            .with_label_values(&[] as &[&str])
            .get()
    }

    /// The victims of one preemption.
    pub fn observe_preemption_victims(&self, victims: usize) {
        self.inner
            .preemption_victims
            .with_label_values(&[] as &[&str])
            .observe(victims as f64);
    }

    /// A preemption carried out on the preemption threads ended.
    pub fn count_preemption_carried_out(&self, all_evicted: bool) {
        let result = if all_evicted { "success" } else { "error" };
        self.inner
            .preemption_carried_out
            .with_label_values(&[result])
            .inc();
    }

    /// An event or pod condition dropped: too many waited for the API server.
    pub fn count_record_dropped(&self) {
        self.inner
            .records_dropped
            .with_label_values(&[] as &[&str])
            .inc();
    }

    /// A trapped call into a plugin's instance.
    pub fn count_trap(&self, plugin: &str) {
        self.inner.plugin_traps.with_label_values(&[plugin]).inc();
    }

    /// A host call refused to `plugin` at `point` (see `wasm::capability`).
    pub fn count_refused_call(&self, plugin: &str, call: &str, point: &str) {
        self.inner
            .plugin_refused_calls
            .with_label_values(&[plugin, call, point])
            .inc();
    }

    /// How many `call`s were refused to `plugin` at `point`.
    pub fn refused_calls(&self, plugin: &str, call: &str, point: &str) -> u64 {
        self.inner
            .plugin_refused_calls
            .with_label_values(&[plugin, call, point])
            .get()
    }

    /// A fail-open plugin failed and its scores were dropped for one cycle.
    pub fn count_failure_ignored(&self, plugin: &str) {
        self.inner
            .plugin_failures_ignored
            .with_label_values(&[plugin])
            .inc();
    }

    /// The counters of a plugin's output lines, logged and suppressed (taken once per
    /// instance, so that counting a line is one atomic add).
    pub fn output_line_counters(
        &self,
        plugin: &str,
    ) -> (prometheus::IntCounter, prometheus::IntCounter) {
        let c = &self.inner.plugin_output_lines;
        (
            c.with_label_values(&[plugin, "logged"]),
            c.with_label_values(&[plugin, "suppressed"]),
        )
    }

    /// A reload of `plugin` (empty: the configuration as a whole) ended with `result`,
    /// "success" or "refused".
    pub fn count_reload(&self, plugin: &str, result: &str) {
        self.inner
            .plugin_reloads
            .with_label_values(&[plugin, result])
            .inc();
    }

    /// Reloads of `plugin` with this result so far.
    pub fn reloads(&self, plugin: &str, result: &str) -> u64 {
        self.inner
            .plugin_reloads
            .with_label_values(&[plugin, result])
            .get()
    }

    /// A cycle of a batchable profile ended with `result` (`hint_used`,
    /// `hint_not_used`, `no_hint`).
    pub fn count_batch_attempt(&self, profile: &str, result: &str) {
        self.inner
            .batch_attempts
            .with_label_values(&[profile, result])
            .inc();
    }

    /// Cycles of `profile` that ended with `result` so far.
    pub fn batch_attempts(&self, profile: &str, result: &str) -> u64 {
        self.inner
            .batch_attempts
            .with_label_values(&[profile, result])
            .get()
    }

    /// Whether the scheduler may not list `kind` (see [`berth_cluster::access`]).
    pub fn set_kind_forbidden(&self, kind: &str, forbidden: bool) {
        self.inner
            .kinds_forbidden
            .with_label_values(&[kind])
            .set(i64::from(forbidden));
    }

    /// A profile's batch was thrown away for `reason`.
    pub fn count_batch_flush(&self, profile: &str, reason: &str) {
        self.inner
            .batch_flushes
            .with_label_values(&[profile, reason])
            .inc();
    }

    /// A shadow candidate of `plugin` was compared on one cycle.
    pub fn count_shadow_cycle(&self, plugin: &str) {
        self.inner.shadow_cycles.with_label_values(&[plugin]).inc();
    }

    /// A shadow candidate of `plugin` disagreed on one cycle, in `kind`.
    pub fn count_shadow_disagreement(&self, plugin: &str, kind: &str) {
        self.inner
            .shadow_disagreements
            .with_label_values(&[plugin, kind])
            .inc();
    }

    /// The histogram of the time spent inside a plugin's instance per call at an
    /// extension point (an instance keeps it, so that a call observes without looking
    /// the labels up).
    pub fn plugin_call_histogram(&self, plugin: &str, extension_point: &str) -> Histogram {
        self.inner
            .plugin_call_duration
            .with_label_values(&[plugin, extension_point])
    }

    /// The Prometheus text exposition (format 0.0.4) of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.inner.registry.gather(), &mut out)
            .expect("encoding into memory does not fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }

    /// The content type of [`Metrics::render`]'s text.
    pub fn content_type() -> &'static str {
        "text/plain; version=0.0.4; charset=utf-8"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_histograms_with_upstream_names() {
        let m = Metrics::new();
        m.observe_attempt(
            AttemptResult::Scheduled,
            "default-scheduler",
            Duration::from_millis(3),
        );
        m.observe_attempt(
            AttemptResult::Scheduled,
            "default-scheduler",
            Duration::from_millis(30),
        );
        m.observe_attempt(AttemptResult::Scheduled, "other", Duration::from_millis(1));
        m.observe_attempt(
            AttemptResult::Unschedulable,
            "default-scheduler",
            Duration::from_millis(1),
        );
        assert_eq!(m.attempts(AttemptResult::Scheduled), 3);
        assert_eq!(m.attempts(AttemptResult::Error), 0);
        m.set_pending([("active", 3)]);
        for _ in 0..4 {
            m.count_incoming("PodAdd", "active");
        }
        m.observe_scheduled_pod(2, Duration::from_millis(50));
        m.observe_scheduled_pod(40, Duration::from_secs(1));
        let text = m.render();
        for line in [
            "scheduler_pending_pods{queue=\"active\"} 3\n",
            "scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"} 2\n",
            "scheduler_schedule_attempts_total{profile=\"other\",result=\"scheduled\"} 1\n",
            "scheduler_scheduling_attempt_duration_seconds_bucket{profile=\"default-scheduler\",result=\"scheduled\",le=\"0.004\"} 1\n",
            "scheduler_scheduling_attempt_duration_seconds_bucket{profile=\"default-scheduler\",result=\"scheduled\",le=\"0.032\"} 2\n",
            "scheduler_queue_incoming_pods_total{event=\"PodAdd\",queue=\"active\"} 4\n",
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"2\"} 1\n",
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"15+\"} 1\n",
            "# TYPE scheduler_scheduling_attempt_duration_seconds histogram\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }

    #[test]
    fn clones_share_one_set() {
        let m = Metrics::new();
        let n = m.clone();
        n.count_trap("Fit");
        n.count_failure_ignored("Prefer");
        n.count_failure_ignored("Prefer");
        n.count_reload("Prefer", "success");
        n.count_reload("Prefer", "refused");
        n.count_reload("Prefer", "refused");
        assert_eq!(m.reloads("Prefer", "refused"), 2);
        let text = m.render();
        assert!(
            text.contains("berth_plugin_reloads_total{plugin=\"Prefer\",result=\"refused\"} 2\n")
        );
        assert!(text.contains("berth_plugin_traps_total{plugin=\"Fit\"} 1\n"));
        assert!(text.contains("berth_plugin_failures_ignored_total{plugin=\"Prefer\"} 2\n"));
    }
}
