//! Metrics kept in the host, named as kube-scheduler's, rendered in the Prometheus
//! text format (served over HTTP later).

use crate::queue::{IncomingCounts, QueueName};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

/// Upper bounds of the attempt-duration histogram, in seconds (upstream's buckets:
/// exponential from 1 ms).
pub const DURATION_BUCKETS: [f64; 15] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192, 16.384,
];

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

/// Counters and histograms of the scheduling loop.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    attempts: BTreeMap<AttemptResult, u64>,
    /// Per result: bucket counts, sum, count.
    durations: BTreeMap<AttemptResult, (Vec<u64>, f64, u64)>,
}

impl Metrics {
    /// Records one attempt.
    pub fn observe_attempt(&mut self, result: AttemptResult, took: Duration) {
        *self.attempts.entry(result).or_default() += 1;
        let (buckets, sum, count) = self
            .durations
            .entry(result)
            .or_insert_with(|| (vec![0; DURATION_BUCKETS.len()], 0.0, 0));
        let secs = took.as_secs_f64();
        for (i, b) in DURATION_BUCKETS.iter().enumerate() {
            if secs <= *b {
                buckets[i] += 1;
            }
        }
        *sum += secs;
        *count += 1;
    }

    /// Attempts by result.
    pub fn attempts(&self, result: AttemptResult) -> u64 {
        self.attempts.get(&result).copied().unwrap_or(0)
    }

    /// The Prometheus text exposition, with the queue's gauges and counters.
    pub fn render(&self, pending: &HashMap<QueueName, usize>, incoming: &IncomingCounts) -> String {
        let mut out = String::new();
        out.push_str("# HELP scheduler_pending_pods Number of pending pods, by the queue type.\n");
        out.push_str("# TYPE scheduler_pending_pods gauge\n");
        let mut queues: Vec<_> = pending.iter().collect();
        queues.sort();
        for (q, n) in queues {
            let _ = writeln!(
                out,
                "scheduler_pending_pods{{queue=\"{}\"}} {n}",
                q.as_str()
            );
        }
        out.push_str("# HELP scheduler_schedule_attempts_total Number of attempts to schedule pods, by the result.\n");
        out.push_str("# TYPE scheduler_schedule_attempts_total counter\n");
        for (r, n) in &self.attempts {
            let _ = writeln!(
                out,
                "scheduler_schedule_attempts_total{{result=\"{}\"}} {n}",
                r.as_str()
            );
        }
        out.push_str("# HELP scheduler_scheduling_attempt_duration_seconds Scheduling attempt latency in seconds.\n");
        out.push_str("# TYPE scheduler_scheduling_attempt_duration_seconds histogram\n");
        for (r, (buckets, sum, count)) in &self.durations {
            for (i, b) in DURATION_BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "scheduler_scheduling_attempt_duration_seconds_bucket{{result=\"{}\",le=\"{b}\"}} {}",
                    r.as_str(),
                    buckets[i]
                );
            }
            let _ = writeln!(
                out,
                "scheduler_scheduling_attempt_duration_seconds_bucket{{result=\"{}\",le=\"+Inf\"}} {count}",
                r.as_str()
            );
            let _ = writeln!(
                out,
                "scheduler_scheduling_attempt_duration_seconds_sum{{result=\"{}\"}} {sum}",
                r.as_str()
            );
            let _ = writeln!(
                out,
                "scheduler_scheduling_attempt_duration_seconds_count{{result=\"{}\"}} {count}",
                r.as_str()
            );
        }
        out.push_str("# HELP scheduler_queue_incoming_pods_total Number of pods added to scheduling queues by event and queue type.\n");
        out.push_str("# TYPE scheduler_queue_incoming_pods_total counter\n");
        let mut inc: Vec<_> = incoming.iter().collect();
        inc.sort();
        for ((event, queue), n) in inc {
            let _ = writeln!(
                out,
                "scheduler_queue_incoming_pods_total{{event=\"{event}\",queue=\"{}\"}} {n}",
                queue.as_str()
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histogram() {
        let mut m = Metrics::default();
        m.observe_attempt(AttemptResult::Scheduled, Duration::from_millis(3));
        m.observe_attempt(AttemptResult::Scheduled, Duration::from_millis(30));
        m.observe_attempt(AttemptResult::Unschedulable, Duration::from_millis(1));
        assert_eq!(m.attempts(AttemptResult::Scheduled), 2);
        let pending = HashMap::from([(QueueName::Active, 3)]);
        let incoming = IncomingCounts::from([(("PodAdd".to_owned(), QueueName::Active), 4)]);
        let text = m.render(&pending, &incoming);
        assert!(
            text.contains("scheduler_pending_pods{queue=\"active\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("scheduler_schedule_attempts_total{result=\"scheduled\"} 2\n"));
        assert!(text.contains("scheduler_scheduling_attempt_duration_seconds_bucket{result=\"scheduled\",le=\"0.004\"} 1\n"));
        assert!(text.contains("scheduler_scheduling_attempt_duration_seconds_bucket{result=\"scheduled\",le=\"0.032\"} 2\n"));
        assert!(text.contains(
            "scheduler_queue_incoming_pods_total{event=\"PodAdd\",queue=\"active\"} 4\n"
        ));
    }
}
