//! A steady state, as upstream's `createPods` with `steadyState: true`: a number of
//! pods are created; each one seen bound is deleted, and the claims made for it with
//! it, and another is created in its place, until the duration is over; then the last
//! ones are scheduled. The cluster stays at the same level of use throughout, so what
//! is measured is scheduling into a cluster that neither fills nor empties.

use super::{BenchError, PodTemplate, dra, make_pod};
use crate::clock::Clock;
use crate::scheduler::Scheduler;
use berth_sdk::Pod;
use std::time::{Duration, Instant};

/// When a steady state stops making pods.
#[derive(Clone, Copy, Debug)]
pub(super) enum Until {
    /// Once this long has passed (upstream's `duration`).
    Elapsed(Duration),
    /// Once this many pods were made, in lockstep (each round of pending pods
    /// scheduled and bound before the bound ones are replaced): what two runs of one
    /// seed can compare.
    Made(usize),
}

/// What a steady state did.
pub(super) struct Steady {
    /// Pods made.
    pub made: usize,
    /// Pods seen bound (and deleted).
    pub bound: usize,
    /// The time of each scheduling attempt made one at a time.
    pub latencies: Vec<Duration>,
}

/// The pods of one steady state: where they come from and how many are pending at once.
pub(super) struct Pods<'a> {
    /// Each pod is a copy of this one.
    pub template: &'a PodTemplate,
    /// Their namespace.
    pub namespace: &'a str,
    /// Their names' prefix (`<prefix>-<i>`).
    pub prefix: &'a str,
    /// How many are pending at once (upstream's `count`).
    pub pending: usize,
    /// How progress lines name the run.
    pub label: &'a str,
}

/// Runs a steady state on `s` until `until`; `seen` is told of each pod seen bound,
/// with its node, before it is deleted; `progress` receives a line now and then.
pub(super) fn run(
    s: &mut Scheduler,
    clock: &dyn Clock,
    pods: &Pods<'_>,
    until: Until,
    seen: &mut dyn FnMut(&Scheduler, &Pod, &str),
    progress: &mut dyn FnMut(&str),
) -> Result<Steady, BenchError> {
    // Counted runs go in lockstep: every pending pod is scheduled and bound before
    // the bound ones are replaced, so that two runs of one seed see the same order.
    let lockstep = matches!(until, Until::Made(_));
    let start = Instant::now();
    let mut last_report = start;
    let mut outstanding: Vec<Pod> = Vec::with_capacity(pods.pending);
    let mut out = Steady {
        made: 0,
        bound: 0,
        latencies: Vec::new(),
    };
    loop {
        while outstanding.len() < pods.pending
            && match until {
                Until::Elapsed(d) => start.elapsed() < d,
                Until::Made(n) => out.made < n,
            }
        {
            let mut p = make_pod(pods.template, pods.namespace, pods.prefix, out.made)?;
            out.made += 1;
            dra::make_claims(s, &mut p)?;
            s.add_pod(p.clone())?;
            outstanding.push(p);
        }
        if outstanding.is_empty() {
            break;
        }
        let t = Instant::now();
        let attempted = if lockstep {
            s.run_until_idle() > 0
        } else if s.schedule_one() {
            out.latencies.push(t.elapsed());
            s.poll(clock.now());
            true
        } else {
            // Nothing to pop: wait for the binding cycles under way, or for a backoff.
            s.run_until_idle() > 0
        };
        let waiting = outstanding.len();
        let mut still = Vec::with_capacity(waiting);
        for p in outstanding.drain(..) {
            let Some(node) = s.outcome(&p.uid).and_then(|o| o.node.clone()) else {
                still.push(p);
                continue;
            };
            seen(s, &p, &node);
            s.delete_pod(&p.uid);
            s.release_claims_of(&p.uid);
            out.bound += 1;
        }
        outstanding = still;
        if !attempted && outstanding.len() == waiting {
            // Idle and nothing bound: the pods pending fit nowhere, and nothing that
            // could change that will happen.
            break;
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = Instant::now();
            progress(&format!(
                "{}: {} pods bound, {:.1} s",
                pods.label,
                out.bound,
                start.elapsed().as_secs_f64()
            ));
        }
    }
    Ok(out)
}
