//! `berth bench`: workloads shaped like kube-scheduler's scheduler_perf
//! (`test/integration/scheduler_perf/config/performance-config.yaml`) run on the
//! embedded cluster with a real clock.
//!
//! Each run builds a fresh scheduler, adds the nodes, adds and schedules the initial
//! pods, then adds every measured pod and times only their scheduling: the time of
//! each attempt (pop, snapshot, PreFilter to Permit, hand-off to the binding cycle)
//! and the wall time until every binding is done. Pods per second are the measured
//! pods bound per second of that wall time.

use crate::clock::RealClock;
use crate::cluster::manifest::{self, ManifestError, Object};
use crate::cluster::memory::MemoryCluster;
use crate::config::Configuration;
use crate::scheduler::{PodError, Scheduler, SchedulerError, SchedulerOptions};
use crate::wasm::Runtime;
use berth_sdk::{Labels, Node, Pod, Resources};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod churn;
pub use churn::{ChurnOptions, ChurnResult, ChurnSample, churn_to_text, rss_mib, run_churn};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// No workload has the name asked for.
    #[error(
        "no workload {name:?}; the workloads are {}",
        WORKLOADS.map(|w| w.name).join(", ")
    )]
    NoWorkload {
        /// The name asked for.
        name: String,
    },
    /// A workload's pod template is not a valid manifest.
    #[error(transparent)]
    Template(#[from] ManifestError),
    /// A workload's pod template is a valid manifest of something else.
    #[error("bench template is not a pod")]
    TemplateNotPod,
    /// The scheduler could not be built.
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// The scheduler refused a pod of the workload.
    #[error(transparent)]
    Pod(#[from] PodError),
}

/// One size of a workload: nodes, pods scheduled before measuring, measured pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Nodes.
    pub nodes: usize,
    /// Pods created (and scheduled) before measuring.
    pub init_pods: usize,
    /// Pods whose scheduling is measured.
    pub measure_pods: usize,
}

/// How the nodes of a workload are labelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Zones {
    /// No zone label.
    None,
    /// Every node in `zone1`.
    One,
    /// Round-robin over `moon-1`, `moon-2`, `moon-3`.
    Moons,
}

/// A scheduler_perf-shaped workload.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// The name, as upstream's.
    pub name: &'static str,
    /// The sizes upstream runs it at (500 and 5000 nodes).
    pub sizes: [Size; 2],
    zones: Zones,
    init_template: &'static str,
    measure_template: &'static str,
    init_namespace: &'static str,
    measure_namespace: &'static str,
}

const fn size(nodes: usize, init_pods: usize, measure_pods: usize) -> Size {
    Size {
        nodes,
        init_pods,
        measure_pods,
    }
}

// Pod templates, as scheduler_perf's: a pause container asking 100m CPU and 500Mi.
const POD_DEFAULT: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

const POD_LARGE_CPU: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      requests: {cpu: "9", memory: 500Mi}
"#;

const POD_NODE_AFFINITY: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: topology.kubernetes.io/zone, operator: In, values: [zone1, zone2]}
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

// The affinity terms name both namespaces of the workload, so that the measured pods
// see the initial ones.
const POD_ANTI_AFFINITY: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
  labels: {color: green}
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {color: green}}
        topologyKey: kubernetes.io/hostname
        namespaces: [sched-0, sched-1]
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

const POD_AFFINITY: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
  labels: {color: blue}
spec:
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {color: blue}}
        topologyKey: topology.kubernetes.io/zone
        namespaces: [sched-0, sched-1]
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

const POD_SPREAD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
  labels: {color: blue}
spec:
  topologySpreadConstraints:
  - maxSkew: 5
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {matchLabels: {color: blue}}
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

const POD_LOW_PRIORITY: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
spec:
  priority: 1
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 900m, memory: 500Mi}
      requests: {cpu: 900m, memory: 500Mi}
"#;

const POD_HIGH_PRIORITY: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
spec:
  priority: 10
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 3000m, memory: 500Mi}
      requests: {cpu: 3000m, memory: 500Mi}
"#;

/// The workloads, with upstream's node and pod counts.
pub const WORKLOADS: [Workload; 7] = [
    Workload {
        name: "SchedulingBasic",
        sizes: [size(500, 500, 1000), size(5000, 1000, 1000)],
        zones: Zones::None,
        init_template: POD_DEFAULT,
        measure_template: POD_DEFAULT,
        init_namespace: "default",
        measure_namespace: "default",
    },
    Workload {
        name: "SchedulingNodeAffinity",
        sizes: [size(500, 500, 1000), size(5000, 5000, 1000)],
        zones: Zones::One,
        init_template: POD_NODE_AFFINITY,
        measure_template: POD_NODE_AFFINITY,
        init_namespace: "default",
        measure_namespace: "default",
    },
    Workload {
        name: "TopologySpreading",
        sizes: [size(500, 1000, 1000), size(5000, 5000, 2000)],
        zones: Zones::Moons,
        init_template: POD_DEFAULT,
        measure_template: POD_SPREAD,
        init_namespace: "default",
        measure_namespace: "default",
    },
    Workload {
        name: "SchedulingPodAntiAffinity",
        sizes: [size(500, 100, 400), size(5000, 1000, 1000)],
        zones: Zones::None,
        init_template: POD_ANTI_AFFINITY,
        measure_template: POD_ANTI_AFFINITY,
        init_namespace: "sched-0",
        measure_namespace: "sched-1",
    },
    Workload {
        name: "SchedulingPodAffinity",
        sizes: [size(500, 500, 1000), size(5000, 5000, 1000)],
        zones: Zones::One,
        init_template: POD_AFFINITY,
        measure_template: POD_AFFINITY,
        init_namespace: "sched-0",
        measure_namespace: "sched-1",
    },
    Workload {
        // Nodes full of low-priority pods; each measured pod must evict three.
        name: "PreemptionBasic",
        sizes: [size(500, 2000, 500), size(5000, 20000, 5000)],
        zones: Zones::None,
        init_template: POD_LOW_PRIORITY,
        measure_template: POD_HIGH_PRIORITY,
        init_namespace: "default",
        measure_namespace: "default",
    },
    Workload {
        name: "Unschedulable",
        sizes: [size(500, 200, 1000), size(5000, 200, 5000)],
        zones: Zones::None,
        init_template: POD_LARGE_CPU,
        measure_template: POD_DEFAULT,
        init_namespace: "default",
        measure_namespace: "default",
    },
];

/// How much smaller than upstream's 500-node size `--quick` runs a workload.
pub const QUICK_DIVISOR: usize = 5;

/// Finds a workload by name (case-insensitive).
pub fn workload(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name.eq_ignore_ascii_case(name))
}

/// Whether plugins run as wasm components or natively compiled into the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every plugin a sandboxed WebAssembly component.
    Wasm,
    /// The same plugin crates compiled into the host.
    Native,
}

impl Mode {
    /// `wasm` or `native`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Wasm => "wasm",
            Mode::Native => "native",
        }
    }
}

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct BenchOptions {
    /// Workload names; empty runs them all.
    pub workloads: Vec<String>,
    /// Run only the size with this many nodes (another count runs the nearest
    /// size's pods on this many nodes).
    pub nodes: Option<usize>,
    /// Override the initial pod count.
    pub init_pods: Option<usize>,
    /// Override the measured pod count.
    pub measure_pods: Option<usize>,
    /// Small counts, for a smoke run.
    pub quick: bool,
    /// Run the plugins natively instead of as wasm.
    pub native: bool,
    /// Run each workload both as wasm and natively, and report the ratio.
    pub compare_native: bool,
    /// How the scheduler runs (parallelism, seed).
    pub scheduler: SchedulerOptions,
}

/// One workload at one size in one mode.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchResult {
    /// The workload's name.
    pub workload: String,
    /// Nodes.
    pub nodes: usize,
    /// Pods scheduled before measuring.
    pub init_pods: usize,
    /// Measured pods.
    pub measured_pods: usize,
    /// `wasm` or `native`.
    pub mode: Mode,
    /// Measured pods bound per second.
    pub pods_per_second: f64,
    /// Median attempt latency, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile attempt latency, in milliseconds.
    pub p99_ms: f64,
    /// Peak resident memory of the process during the run (VmHWM), in MiB.
    pub peak_rss_mib: f64,
    /// Measured pods that were bound.
    pub scheduled: usize,
    /// Wall time of the measured part, in seconds.
    pub seconds: f64,
    /// The machine's cores.
    pub cores: usize,
    /// With a native comparison, on the wasm result: wasm time over native time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wasm_over_native: Option<f64>,
}

/// The cores of this machine.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Peak resident memory of the process so far (VmHWM), in MiB; 0 when unknown.
pub fn peak_rss_mib() -> f64 {
    proc_status_mib(None, "VmHWM:")
}

/// A memory figure (the field with its colon) of a process's `/proc/<pid>/status`,
/// this process's without a pid, in MiB; 0 when unknown.
pub(crate) fn proc_status_mib(pid: Option<u32>, field: &str) -> f64 {
    let path = pid.map_or_else(
        || "/proc/self/status".to_owned(),
        |p| format!("/proc/{p}/status"),
    );
    let Ok(status) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Resets the peak resident memory to the current one (Linux: `clear_refs` 5), so
/// each run reports its own peak.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn template(text: &str) -> Result<Pod, BenchError> {
    let docs = manifest::load_str("<bench template>", text)?;
    match docs.into_iter().next().map(|d| d.object) {
        Some(Object::Pod(p)) => Ok(p),
        _ => Err(BenchError::TemplateNotPod),
    }
}

fn make_node(i: usize, zones: Zones) -> Node {
    let name = format!("node-{i}");
    let mut labels = Labels::new();
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    match zones {
        Zones::None => {}
        Zones::One => {
            labels.insert("topology.kubernetes.io/zone".into(), "zone1".into());
        }
        Zones::Moons => {
            labels.insert(
                "topology.kubernetes.io/zone".into(),
                format!("moon-{}", i % 3 + 1),
            );
        }
    }
    // scheduler_perf's default node: 4 CPUs, 32Gi, 110 pods.
    Node {
        name,
        labels,
        allocatable: Resources {
            milli_cpu: 4000,
            memory: 32 << 30,
            allowed_pod_number: 110,
            ..Resources::default()
        },
        ..Node::default()
    }
}

fn make_pod(template: &Pod, namespace: &str, prefix: &str, i: usize) -> Pod {
    let mut p = template.clone();
    p.namespace = namespace.to_owned();
    p.name = format!("{prefix}-{i}");
    p.uid = format!("{namespace}-{prefix}-{i}");
    p
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let k = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[k].as_secs_f64() * 1000.0
}

/// The sizes a run picks for a workload.
pub fn sizes_for(w: &Workload, opts: &BenchOptions) -> Vec<Size> {
    let mut sizes: Vec<Size> = if opts.quick {
        let s = w.sizes[0];
        vec![size(
            s.nodes / QUICK_DIVISOR,
            s.init_pods / QUICK_DIVISOR,
            s.measure_pods / QUICK_DIVISOR,
        )]
    } else {
        match opts.nodes {
            Some(n) => {
                let nearest = *w
                    .sizes
                    .iter()
                    .min_by_key(|s| s.nodes.abs_diff(n))
                    .expect("two sizes");
                vec![Size {
                    nodes: n,
                    ..nearest
                }]
            }
            None => w.sizes.to_vec(),
        }
    };
    for s in &mut sizes {
        if opts.quick
            && let Some(n) = opts.nodes
        {
            s.nodes = n;
        }
        if let Some(p) = opts.init_pods {
            s.init_pods = p;
        }
        if let Some(p) = opts.measure_pods {
            s.measure_pods = p;
        }
    }
    sizes
}

/// A scheduler with the workload's nodes, its initial pods placed, and its measured
/// pods added (not yet scheduled); with the uids of the initial and measured pods.
fn prepare(
    runtime: &Arc<Runtime>,
    w: &Workload,
    size: Size,
    mode: Mode,
    options: &SchedulerOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<(Scheduler, Vec<String>, Vec<String>), BenchError> {
    let init_template = template(w.init_template)?;
    let measure_template = template(w.measure_template)?;
    let mut options = options.clone();
    options.framework.native = mode == Mode::Native;
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = Scheduler::new(
        runtime,
        &Configuration::default(),
        "<default configuration>",
        &options,
        cluster,
        Arc::new(RealClock::default()),
    )?;
    let label = format!("{} {} nodes {}", w.name, size.nodes, mode.as_str());
    for ns in ["default", w.init_namespace, w.measure_namespace] {
        s.add_or_update_namespace(ns, Labels::new());
    }
    for i in 0..size.nodes {
        s.add_or_update_node(make_node(i, w.zones));
    }
    progress(&format!(
        "{label}: scheduling {} initial pods",
        size.init_pods
    ));
    let mut initial = Vec::with_capacity(size.init_pods);
    for i in 0..size.init_pods {
        let p = make_pod(&init_template, w.init_namespace, "init", i);
        initial.push(p.uid.clone());
        s.add_pod(p)?;
    }
    s.run_until_idle();

    progress(&format!("{label}: measuring {} pods", size.measure_pods));
    let measured: Vec<String> = (0..size.measure_pods)
        .map(|i| make_pod(&measure_template, w.measure_namespace, "measured", i))
        .map(|p| {
            let uid = p.uid.clone();
            s.add_pod(p).map(|()| uid)
        })
        .collect::<Result<_, PodError>>()?;
    Ok((s, initial, measured))
}

/// Where every pod of a workload lands (uid and node, `None` when left pending),
/// initial pods first: what the wasm and native runs of the same seed must agree on.
pub fn placements(
    runtime: &Arc<Runtime>,
    w: &Workload,
    size: Size,
    mode: Mode,
    options: &SchedulerOptions,
) -> Result<Vec<(String, Option<String>)>, BenchError> {
    let (mut s, initial, measured) = prepare(runtime, w, size, mode, options, &mut |_| {})?;
    s.run_until_idle();
    Ok(initial
        .into_iter()
        .chain(measured)
        .map(|uid| {
            let node = s.outcome(&uid).and_then(|o| o.node.clone());
            (uid, node)
        })
        .collect())
}

/// Runs one workload at one size in one mode. `progress` receives a line now and
/// then.
pub fn run_one(
    runtime: &Arc<Runtime>,
    w: &Workload,
    size: Size,
    mode: Mode,
    options: &SchedulerOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<BenchResult, BenchError> {
    reset_peak_rss();
    let (mut s, _, measured) = prepare(runtime, w, size, mode, options, progress)?;
    let label = format!("{} {} nodes {}", w.name, size.nodes, mode.as_str());
    let mut latencies: Vec<Duration> = Vec::with_capacity(size.measure_pods);
    let start = Instant::now();
    let mut last_report = start;
    loop {
        let t = Instant::now();
        if !s.schedule_one() {
            break;
        }
        latencies.push(t.elapsed());
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = Instant::now();
            progress(&format!(
                "{label}: {} attempts, {:.1} s",
                latencies.len(),
                start.elapsed().as_secs_f64()
            ));
        }
    }
    // Wait for the binding cycles still under way (and retry what can be retried).
    s.run_until_idle();
    let seconds = start.elapsed().as_secs_f64();
    let peak = peak_rss_mib();
    let scheduled = measured
        .iter()
        .filter(|uid| s.outcome(uid).is_some_and(|o| o.node.is_some()))
        .count();
    latencies.sort_unstable();
    drop(s);
    Ok(BenchResult {
        workload: w.name.to_owned(),
        nodes: size.nodes,
        init_pods: size.init_pods,
        measured_pods: size.measure_pods,
        mode,
        pods_per_second: if seconds > 0.0 {
            scheduled as f64 / seconds
        } else {
            0.0
        },
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        peak_rss_mib: peak,
        scheduled,
        seconds,
        cores: cores(),
        wasm_over_native: None,
    })
}

/// Runs the chosen workloads; `progress` receives a line now and then.
pub fn run(
    runtime: &Arc<Runtime>,
    opts: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<BenchResult>, BenchError> {
    let mut chosen: Vec<&Workload> = Vec::new();
    for name in &opts.workloads {
        let w = workload(name).ok_or_else(|| BenchError::NoWorkload { name: name.clone() })?;
        chosen.push(w);
    }
    if chosen.is_empty() {
        chosen = WORKLOADS.iter().collect();
    }
    let modes: Vec<Mode> = if opts.compare_native {
        vec![Mode::Wasm, Mode::Native]
    } else if opts.native {
        vec![Mode::Native]
    } else {
        vec![Mode::Wasm]
    };
    let mut out = Vec::new();
    for w in chosen {
        for size in sizes_for(w, opts) {
            let mut results = Vec::new();
            for &mode in &modes {
                results.push(run_one(runtime, w, size, mode, &opts.scheduler, progress)?);
            }
            if let [wasm, native] = results.as_mut_slice()
                && native.seconds > 0.0
            {
                wasm.wasm_over_native = Some(wasm.seconds / native.seconds);
            }
            out.extend(results);
        }
    }
    Ok(out)
}

/// Aligns rows under a header, two spaces apart: the columns in `left` to the left,
/// the others (numbers) to the right.
fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]], left: &[usize]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            if left.contains(&i) {
                s.push_str(&format!("{c:<w$}", w = widths[i]));
            } else {
                s.push_str(&format!("{c:>w$}", w = widths[i]));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// The results as an aligned table.
pub fn to_text(results: &[BenchResult]) -> String {
    let header = [
        "workload",
        "nodes",
        "init",
        "measured",
        "mode",
        "pods/s",
        "p50 ms",
        "p99 ms",
        "peak RSS MiB",
        "wasm/native",
    ];
    let rows: Vec<[String; 10]> = results
        .iter()
        .map(|r| {
            [
                r.workload.clone(),
                r.nodes.to_string(),
                r.init_pods.to_string(),
                format!("{}/{}", r.scheduled, r.measured_pods),
                r.mode.as_str().to_owned(),
                format!("{:.0}", r.pods_per_second),
                format!("{:.3}", r.p50_ms),
                format!("{:.3}", r.p99_ms),
                format!("{:.0}", r.peak_rss_mib),
                r.wasm_over_native
                    .map_or_else(String::new, |x| format!("{x:.2}")),
            ]
        })
        .collect();
    let mut out = table(&header, &rows, &[0, 4]);
    out.push_str(&format!("{} cores\n", cores()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_and_workloads_are_found() {
        for w in &WORKLOADS {
            template(w.init_template).unwrap();
            template(w.measure_template).unwrap();
            assert_eq!(workload(&w.name.to_lowercase()).unwrap().name, w.name);
        }
        let spread = template(POD_SPREAD).unwrap();
        assert_eq!(spread.topology_spread_constraints.len(), 1);
        let anti = template(POD_ANTI_AFFINITY).unwrap();
        assert_eq!(anti.affinity.pod_anti_affinity.required.len(), 1);
    }

    #[test]
    fn sizes_follow_the_options() {
        let w = workload("SchedulingBasic").unwrap();
        let all = sizes_for(w, &BenchOptions::default());
        assert_eq!(all.len(), 2);
        let one = sizes_for(
            w,
            &BenchOptions {
                nodes: Some(5000),
                ..BenchOptions::default()
            },
        );
        assert_eq!(one, vec![size(5000, 1000, 1000)]);
        let quick = sizes_for(
            w,
            &BenchOptions {
                quick: true,
                ..BenchOptions::default()
            },
        );
        assert_eq!(quick, vec![size(100, 100, 200)]);
    }

    #[test]
    fn percentiles() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&d, 0.5), 50.0);
        assert_eq!(percentile(&d, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
