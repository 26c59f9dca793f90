//! `berth bench --churn N`: N pod lifecycles on the embedded cluster at full speed,
//! each created, scheduled, bound, seen bound (as a watch would report it) and
//! deleted, with the process's resident memory sampled as they go. A scheduler that
//! runs for months must keep memory for what is live (pending, in a cycle, or bound
//! on a node), never for every pod it has seen: the samples show whether it does.
//!
//! The scheduler runs as `berth run` configures it: bindings are confirmed by the
//! cluster's report, bound pods' outcomes are not kept, binding cycles run on the
//! binding threads; but, as every embedded run, on a paced virtual clock with its
//! binding results taken in at fixed points, so two runs make the same placements. Pods come in batches; a batch is deleted once `live_batches`
//! newer batches are bound, so the nodes always hold pods and every deletion is a
//! bound pod's.

use super::{BenchError, Mode, POD_DEFAULT, Zones, cores, make_node, make_pod, template};
use crate::clock::VirtualClock;
use crate::cluster::{Binder, WriteError};
use crate::config::Configuration;
use crate::scheduler::{Bookkeeping, DEFAULT_PARALLEL_BINDINGS, Scheduler, SchedulerOptions};
use crate::wasm::Runtime;
use berth_sdk::{Labels, Pod};
use serde::Serialize;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The namespace of the churned pods.
const NAMESPACE: &str = "churn";

/// What a churn run does.
#[derive(Clone, Debug)]
pub struct ChurnOptions {
    /// Pods created, bound and deleted in all.
    pub lifecycles: usize,
    /// Nodes (scheduler_perf's default node: 4 CPUs, 32Gi, 110 pods).
    pub nodes: usize,
    /// Pods created at a time.
    pub batch: usize,
    /// Bound batches kept on the nodes before the oldest is deleted.
    pub live_batches: usize,
    /// Resident memory is sampled after every this many lifecycles.
    pub sample_every: usize,
    /// Lifecycles before the sample that growth is measured from.
    pub warmup: usize,
    /// Run the plugins natively instead of as wasm.
    pub native: bool,
    /// How the scheduler runs (parallelism); the run sets what `berth run` sets.
    pub scheduler: SchedulerOptions,
}

impl Default for ChurnOptions {
    fn default() -> Self {
        ChurnOptions {
            lifecycles: 1_000_000,
            nodes: 100,
            batch: 1000,
            live_batches: 2,
            sample_every: 100_000,
            warmup: 100_000,
            native: false,
            scheduler: SchedulerOptions::default(),
        }
    }
}

/// The process's memory and the scheduler's per-pod bookkeeping after some
/// lifecycles.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChurnSample {
    /// Pods deleted so far.
    pub lifecycles: usize,
    /// Seconds since the churn began.
    pub seconds: f64,
    /// Resident memory of the process (VmRSS), in MiB.
    pub rss_mib: f64,
    /// What the scheduler keeps for pods at that moment.
    pub bookkeeping: Bookkeeping,
}

/// A churn run's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChurnResult {
    /// Pods created, bound and deleted.
    pub lifecycles: usize,
    /// Nodes.
    pub nodes: usize,
    /// Pods created at a time.
    pub batch: usize,
    /// `wasm` or `native`.
    pub mode: Mode,
    /// Wall time of the churn, in seconds.
    pub seconds: f64,
    /// Lifecycles per second.
    pub pods_per_second: f64,
    /// Binds the cluster accepted.
    pub binds: usize,
    /// Binds of a pod the cluster had already bound (refused as the API server's 409).
    pub double_binds: usize,
    /// Pods deleted without having been bound.
    pub never_bound: usize,
    /// A sample after every `sample_every` lifecycles (and one at the end).
    pub samples: Vec<ChurnSample>,
    /// Lifecycles of the sample growth is measured from (the first at or after the
    /// warm-up).
    pub baseline_lifecycles: usize,
    /// Resident memory at the last sample minus at the baseline, in MiB.
    pub rss_growth_mib: f64,
    /// That growth per 100,000 lifecycles after the baseline, in MiB.
    pub rss_growth_per_100k_mib: f64,
    /// What the scheduler keeps once every pod is deleted.
    pub end: Bookkeeping,
    /// The machine's cores.
    pub cores: usize,
}

/// The embedded cluster's binding side for a churn: it remembers only the pods it
/// holds bound (a deleted pod is forgotten, as the API server forgets it), refuses a
/// second bind of one (409), and reports each bind for the bench to play the watch.
#[derive(Default)]
struct ChurnCluster {
    bound: Mutex<HashSet<String>>,
    reports: Mutex<Vec<(String, String)>>,
    binds: AtomicUsize,
    double_binds: AtomicUsize,
}

impl ChurnCluster {
    fn take_reports(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.reports.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The pod is deleted; whether it was bound.
    fn delete(&self, uid: &str) -> bool {
        self.bound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid)
    }
}

impl Binder for ChurnCluster {
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), WriteError> {
        if !self
            .bound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pod.uid.clone())
        {
            self.double_binds.fetch_add(1, Ordering::Relaxed);
            return Err(WriteError::Conflict(format!(
                "pod {} is already assigned to a node",
                pod.key()
            )));
        }
        self.binds.fetch_add(1, Ordering::Relaxed);
        self.reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((pod.uid.clone(), node.to_owned()));
        Ok(())
    }
}

/// Resident memory of the process now (VmRSS), in MiB; 0 when unknown.
pub fn rss_mib() -> f64 {
    super::proc_status_mib(None, "VmRSS:")
}

/// Runs a churn; `progress` receives a line per sample.
pub fn run_churn(
    runtime: &Arc<Runtime>,
    opts: &ChurnOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<ChurnResult, BenchError> {
    let mode = if opts.native {
        Mode::Native
    } else {
        Mode::Wasm
    };
    let batch = opts.batch.max(1);
    let sample_every = opts.sample_every.max(1);
    let mut options = opts.scheduler.clone();
    options.framework.native = opts.native;
    crate::features::complete(&mut options.framework);
    // As `berth run`: the cluster's report confirms a binding, bound pods' outcomes
    // are not kept, binding cycles run on their threads.
    options.confirm_bindings = true;
    options.keep_bound_outcomes = false;
    options.parallel_bindings = DEFAULT_PARALLEL_BINDINGS;
    let cluster = Arc::new(ChurnCluster::default());
    let mut s = Scheduler::new(
        runtime,
        &Configuration::default(),
        "<default configuration>",
        &options,
        cluster.clone(),
        Arc::new(VirtualClock::paced()),
    )?;
    s.add_or_update_namespace(NAMESPACE, Labels::new());
    for i in 0..opts.nodes {
        s.add_or_update_node(make_node(i, Zones::None));
    }
    let pod_template = template(POD_DEFAULT)?;

    // The pods of each batch still in the cluster, oldest first.
    let mut batches: VecDeque<Vec<Pod>> = VecDeque::new();
    let mut created = 0;
    let mut deleted = 0;
    let mut never_bound = 0;
    let mut samples = Vec::new();
    let start = Instant::now();
    let mut delete_oldest = |s: &mut Scheduler, batches: &mut VecDeque<Vec<Pod>>| -> usize {
        let Some(oldest) = batches.pop_front() else {
            return 0;
        };
        let mut unbound = 0;
        for p in &oldest {
            if !cluster.delete(&p.uid) {
                unbound += 1;
            }
            s.delete_pod(&p.uid);
        }
        never_bound += unbound;
        oldest.len()
    };
    while deleted < opts.lifecycles {
        if created < opts.lifecycles {
            let n = batch.min(opts.lifecycles - created);
            let mut pods = Vec::with_capacity(n);
            for i in created..created + n {
                let p = make_pod(&pod_template, NAMESPACE, "pod", i)?;
                s.add_pod(p.clone())?;
                pods.push(p);
            }
            created += n;
            s.run_until_idle();
            // The cluster reports each binding back, as a watch would.
            let mut by_uid: HashMap<&str, &Pod> =
                pods.iter().map(|p| (p.uid.as_str(), p)).collect();
            for (uid, node) in cluster.take_reports() {
                if let Some(p) = by_uid.remove(uid.as_str()) {
                    let mut p = p.clone();
                    p.node_name = node;
                    s.update_pod(p)?;
                }
            }
            batches.push_back(pods);
        }
        if batches.len() > opts.live_batches || created >= opts.lifecycles {
            let before = deleted;
            deleted += delete_oldest(&mut s, &mut batches);
            if deleted / sample_every > before / sample_every || deleted >= opts.lifecycles {
                let sample = ChurnSample {
                    lifecycles: deleted,
                    seconds: start.elapsed().as_secs_f64(),
                    rss_mib: rss_mib(),
                    bookkeeping: s.bookkeeping(),
                };
                progress(&format!(
                    "churn: {} lifecycles, {:.1} s, RSS {:.1} MiB",
                    sample.lifecycles, sample.seconds, sample.rss_mib
                ));
                samples.push(sample);
            }
        }
    }
    // Whatever the deletions started (nothing, if all is well) ends.
    s.run_until_idle();
    let seconds = start.elapsed().as_secs_f64();
    let end = s.bookkeeping();
    drop(s);
    let baseline = samples
        .iter()
        .find(|x| x.lifecycles >= opts.warmup)
        .or(samples.last())
        .cloned();
    let last = samples.last().cloned();
    let (baseline_lifecycles, growth, per_100k) = match (baseline, last) {
        (Some(b), Some(l)) if l.lifecycles > b.lifecycles => {
            let growth = l.rss_mib - b.rss_mib;
            let per = growth * 100_000.0 / (l.lifecycles - b.lifecycles) as f64;
            (b.lifecycles, growth, per)
        }
        (Some(b), _) => (b.lifecycles, 0.0, 0.0),
        _ => (0, 0.0, 0.0),
    };
    Ok(ChurnResult {
        lifecycles: deleted,
        nodes: opts.nodes,
        batch,
        mode,
        seconds,
        pods_per_second: if seconds > 0.0 {
            deleted as f64 / seconds
        } else {
            0.0
        },
        binds: cluster.binds.load(Ordering::Relaxed),
        double_binds: cluster.double_binds.load(Ordering::Relaxed),
        never_bound,
        samples,
        baseline_lifecycles,
        rss_growth_mib: growth,
        rss_growth_per_100k_mib: per_100k,
        end,
        cores: cores(),
    })
}

/// The samples as an aligned table, then the summary.
pub fn churn_to_text(r: &ChurnResult) -> String {
    let header = [
        "lifecycles",
        "seconds",
        "RSS MiB",
        "cached pods",
        "queued",
        "outcomes",
        "kept events",
    ];
    let rows: Vec<[String; 7]> = r
        .samples
        .iter()
        .map(|x| {
            [
                x.lifecycles.to_string(),
                format!("{:.1}", x.seconds),
                format!("{:.1}", x.rss_mib),
                x.bookkeeping.cached_pods.to_string(),
                (x.bookkeeping.queued + x.bookkeeping.in_flight).to_string(),
                x.bookkeeping.outcomes.to_string(),
                x.bookkeeping.queue_events.to_string(),
            ]
        })
        .collect();
    let mut out = super::table(&header, &rows, &[]);
    out.push_str(&format!(
        "{} lifecycles on {} nodes ({}), {:.1} s: {:.0} pods/s; {} binds, {} double, {} never bound\n",
        r.lifecycles,
        r.nodes,
        r.mode.as_str(),
        r.seconds,
        r.pods_per_second,
        r.binds,
        r.double_binds,
        r.never_bound
    ));
    out.push_str(&format!(
        "RSS after {} lifecycles to the end: {:+.1} MiB ({:+.2} MiB per 100,000 pods); left at the end: {}\n",
        r.baseline_lifecycles,
        r.rss_growth_mib,
        r.rss_growth_per_100k_mib,
        r.end
    ));
    out.push_str(&format!("{} cores\n", r.cores));
    out
}
