//! `berth simulate`: schedule the pending pods of manifest files on the embedded
//! cluster and report where each one landed, or why it did not.

use crate::cluster::manifest::{self, Object};
use crate::cluster::memory::MemoryCluster;
use crate::config::Configuration;
use crate::framework::FrameworkOptions;
use crate::scheduler::{PodOutcome, Scheduler};
use crate::wasm::Runtime;
use anyhow::Context;
use berth_sdk::Pod;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What to simulate.
#[derive(Clone, Debug, Default)]
pub struct SimulateOptions {
    /// Manifest files (YAML or JSON; multi-document; `v1 List`).
    pub files: Vec<PathBuf>,
    /// A `BerthConfiguration` file; the default profile when absent.
    pub config: Option<PathBuf>,
    /// Framework options (parallelism, seed, ...).
    pub framework: FrameworkOptions,
}

/// One pod's line of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PodReport {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node, or null.
    pub node: Option<String>,
    /// The event message.
    pub message: String,
}

/// Totals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Pods bound.
    pub scheduled: usize,
    /// Pods left pending.
    pub unschedulable: usize,
    /// Wall time of the scheduling (not of loading).
    pub seconds: f64,
}

/// The report, as `--output json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// One entry per pending pod of Berth's profiles, in input order.
    pub pods: Vec<PodReport>,
    /// Totals.
    pub summary: Summary,
    /// Attempts per pod (same order as `pods`); not part of the JSON.
    #[serde(skip)]
    pub attempts: Vec<u32>,
}

impl Report {
    /// Pods per second of scheduling time.
    pub fn pods_per_second(&self) -> f64 {
        if self.summary.seconds > 0.0 {
            self.pods.len() as f64 / self.summary.seconds
        } else {
            0.0
        }
    }

    /// The human-readable report: one line per pod, then the summary.
    pub fn to_text(&self) -> String {
        let width = self
            .pods
            .iter()
            .map(|p| p.namespace.len() + p.name.len() + 1)
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for p in &self.pods {
            let key = format!("{}/{}", p.namespace, p.name);
            match &p.node {
                Some(n) => out.push_str(&format!("{key:<width$}  {n}\n")),
                None => out.push_str(&format!("{key:<width$}  <pending>  {}\n", p.message)),
            }
        }
        out.push_str(&format!(
            "{} scheduled, {} unschedulable, {} pods in {:.3} s ({:.0} pods/s)\n",
            self.summary.scheduled,
            self.summary.unschedulable,
            self.pods.len(),
            self.summary.seconds,
            self.pods_per_second()
        ));
        out
    }
}

/// A scheduler loaded with the cluster of some manifest files.
pub struct Loaded {
    /// The scheduler: nodes and bound pods in its cache, pending pods in its queue.
    pub scheduler: Scheduler,
    /// The pending pods its profiles serve, in input order.
    pub pending: Vec<Pod>,
}

/// Reads the configuration and every file (all of them before anything happens: a bad
/// file changes nothing), builds the scheduler and adds the cluster to it.
pub fn load(runtime: &Arc<Runtime>, opts: &SimulateOptions) -> anyhow::Result<Loaded> {
    let (config, config_name) = match &opts.config {
        Some(p) => (Configuration::load(p)?, p.display().to_string()),
        None => (
            Configuration::default(),
            "<default configuration>".to_owned(),
        ),
    };
    // Read every file before scheduling anything: a bad file schedules nothing.
    let mut docs = Vec::new();
    for f in &opts.files {
        docs.extend(manifest::load_file(f)?);
    }
    let cluster = Arc::new(MemoryCluster::new());
    let mut scheduler = Scheduler::new(runtime, &config, &config_name, &opts.framework, cluster)?;

    let mut pending: Vec<Pod> = Vec::new();
    for doc in &docs {
        if let Object::Node(n) = &doc.object {
            scheduler.add_or_update_node(n.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    for doc in docs {
        if let Object::Pod(p) = doc.object {
            let loc = &doc.source;
            if !seen.insert(p.uid.clone()) {
                anyhow::bail!(
                    "{}: document {} (line {}): pod {} appears twice (same UID)",
                    loc.file,
                    loc.document,
                    loc.line,
                    p.key()
                );
            }
            let ours = p.node_name.is_empty() && scheduler.serves(&p.scheduler_name);
            let key = p.key();
            if ours {
                pending.push(p.clone());
            }
            scheduler.add_pod(p).with_context(|| {
                format!(
                    "{}: document {} (line {}): pod {key}",
                    loc.file, loc.document, loc.line
                )
            })?;
        }
    }
    Ok(Loaded { scheduler, pending })
}

/// Loads the files, builds the scheduler and schedules every pending pod.
pub fn simulate(runtime: &Arc<Runtime>, opts: &SimulateOptions) -> anyhow::Result<Report> {
    let Loaded {
        mut scheduler,
        pending,
    } = load(runtime, opts)?;
    let start = Instant::now();
    scheduler.run_until_idle();
    let seconds = start.elapsed().as_secs_f64();

    let mut pods = Vec::new();
    let mut attempts = Vec::new();
    for pod in &pending {
        let o: &PodOutcome = scheduler
            .outcome(&pod.uid)
            .expect("every pending pod has an outcome");
        pods.push(PodReport {
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            node: o.node.clone(),
            message: o.message.clone(),
        });
        attempts.push(o.attempts);
    }
    let scheduled = pods.iter().filter(|p| p.node.is_some()).count();
    Ok(Report {
        summary: Summary {
            scheduled,
            unschedulable: pods.len() - scheduled,
            seconds,
        },
        pods,
        attempts,
    })
}

/// `berth explain`: how the profile sees one pod of the files on every node.
pub fn explain(
    runtime: &Arc<Runtime>,
    opts: &SimulateOptions,
    pod: &str,
) -> anyhow::Result<crate::framework::Explanation> {
    let Loaded {
        mut scheduler,
        pending,
    } = load(runtime, opts)?;
    let Some(target) = pending.iter().find(|p| p.key() == pod) else {
        anyhow::bail!(
            "no pending pod {pod} in the files (give it as NAMESPACE/NAME; pods with spec.nodeName are already placed)"
        );
    };
    scheduler.explain(target, &crate::framework::ExplainOptions::default())
}
