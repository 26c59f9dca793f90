//! Runs the SDK's test cases ([`berth_sdk::testing::Case`]) through a compiled plugin
//! component, as the scheduler runs it: the same table a plugin author checks
//! natively with `berth_sdk::testing::run`, played against the `.wasm` file.
//!
//! ```no_run
//! use berth_scheduler::testing::ComponentHarness;
//! use berth_sdk::testing::{Case, node, pod};
//!
//! let cases = vec![
//!     Case::new("plain nodes pass")
//!         .pod(pod("web"))
//!         .node(node("a"))
//!         .feasible(["a"]),
//! ];
//! let harness = ComponentHarness::load("target/wasm32-wasip2/release/my_plugin.wasm").unwrap();
//! harness.check_all(&cases).unwrap();
//! ```

use crate::framework::cycle_state::CycleState;
use crate::framework::{CyclePod, PluginCalls};
use berth_runtime::cache::{Cache, CacheError};
use berth_runtime::wasm::module::HostServices;
use berth_runtime::wasm::{CallError, LoadError, Module, Runtime, RuntimeError, RuntimeOptions};
use berth_sdk::testing::{Case, GI, MI, Outcome, node, pod};
use berth_sdk::{Code, ExtensionPoint, NodeInfo};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a component could not be loaded, or a case could not be played through it.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The WebAssembly runtime could not be started.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The component could not be loaded, or an instance of it made (args refused).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The case's args could not be written as JSON.
    #[error(transparent)]
    Args(#[from] serde_json::Error),
    /// A pod of the case's nodes could not be put on its node.
    #[error("node {node}: {error}")]
    Pod {
        /// The node it was put on.
        node: String,
        /// Why the cache refused it.
        error: CacheError,
    },
    /// A node of the case is missing from the snapshot the plugin sees.
    #[error("node {0} is not in the snapshot")]
    NotInSnapshot(String),
    /// A call into the plugin trapped or answered badly.
    #[error(transparent)]
    Call(#[from] CallError),
    /// NormalizeScore answered a list of the wrong length.
    #[error("plugin {plugin} answered {scores} normalized scores for {nodes} nodes")]
    NormalizedScores {
        /// The plugin's name.
        plugin: String,
        /// How many scores it answered.
        scores: usize,
        /// How many nodes were scored.
        nodes: usize,
    },
}

/// Some cases of [`ComponentHarness::check_all`] failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "{module}: {} of {total} cases failed:\n{}",
    .failures.len(),
    .failures.join("\n")
)]
pub struct CasesFailed {
    /// Where the module came from.
    pub module: String,
    /// How many cases were played.
    pub total: usize,
    /// Why each failing case failed, one entry per case.
    pub failures: Vec<String>,
}

/// A plugin component loaded as the scheduler loads it, ready to play cases.
pub struct ComponentHarness {
    module: Arc<Module>,
}

impl std::fmt::Debug for ComponentHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentHarness")
            .field("module", &self.module)
            .finish()
    }
}

impl ComponentHarness {
    /// Loads a component file with a runtime of its own (default limits, no cache).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, HarnessError> {
        let runtime = Runtime::new(RuntimeOptions::default())?;
        Self::load_with(&runtime, path.as_ref())
    }

    /// Loads a component file with the given runtime.
    pub fn load_with(runtime: &Arc<Runtime>, path: &Path) -> Result<Self, HarnessError> {
        let module = runtime.load_file(path)?;
        Ok(ComponentHarness { module })
    }

    /// A harness for a module already loaded.
    pub fn from_module(module: Arc<Module>) -> Self {
        ComponentHarness { module }
    }

    /// The loaded module.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// Plays one case: a fresh instance configured with the case's args, its replica
    /// synced with the case's nodes, then one scheduling cycle as
    /// [`berth_sdk::testing::run`] plays it natively.
    pub fn run(&self, case: &Case) -> Result<Outcome, HarnessError> {
        let args = if case.args.is_null() {
            "{}".to_owned()
        } else {
            serde_json::to_string(&case.args)?
        };
        let mut inst = self.module.instantiate(&args, HostServices::default())?;

        let mut cache = Cache::new();
        for info in &case.nodes {
            cache.add_or_update_node(info.node.clone());
            for p in &info.pods {
                let mut p = p.clone();
                p.node_name = info.node.name.clone();
                cache.add_pod(&p).map_err(|error| HarnessError::Pod {
                    node: info.node.name.clone(),
                    error,
                })?;
            }
        }
        let mut snapshot = Default::default();
        cache.update_snapshot(&mut snapshot);
        inst.sync(&snapshot)?;
        let slot_of = |info: &NodeInfo| {
            snapshot
                .slot_of(&info.node.name)
                .ok_or_else(|| HarnessError::NotInSnapshot(info.node.name.clone()))
        };

        let has = |p: ExtensionPoint| self.module.extension_points().contains(&p);
        let state = CycleState::new();
        let pod = CyclePod::new(case.pod.clone());
        let mut out = Outcome::default();
        let mut skip_filter = false;
        if has(ExtensionPoint::PreFilter) {
            let r = inst.pre_filter(&state, &pod)?;
            skip_filter = r.status.code == Code::Skip;
            let rejected = !matches!(r.status.code, Code::Success | Code::Skip);
            out.pre_filter = Some(r.status);
            out.pre_filter_nodes = r.node_names;
            if rejected {
                return Ok(out);
            }
        }
        let candidates: Vec<&NodeInfo> = case
            .nodes
            .iter()
            .filter(|n| {
                out.pre_filter_nodes
                    .as_ref()
                    .is_none_or(|names| names.contains(&n.node.name))
            })
            .collect();
        let mut feasible: Vec<&NodeInfo> = candidates.clone();
        if has(ExtensionPoint::Filter) && !skip_filter {
            let slots = candidates
                .iter()
                .map(|n| slot_of(n))
                .collect::<Result<Vec<u32>, _>>()?;
            let failed = inst.filter(&state, &pod, &slots)?;
            for n in &candidates {
                let slot = slot_of(n)?;
                let status = failed
                    .iter()
                    .find(|(s, _)| *s == slot)
                    .map(|(_, st)| st.clone())
                    .unwrap_or_else(berth_sdk::Status::success);
                out.filter.insert(n.node.name.clone(), status);
            }
            feasible.retain(|n| out.filter[&n.node.name].is_success());
        }
        out.feasible = feasible.iter().map(|n| n.node.name.clone()).collect();
        if !has(ExtensionPoint::Score) || feasible.is_empty() {
            return Ok(out);
        }
        let slots = feasible
            .iter()
            .map(|n| slot_of(n))
            .collect::<Result<Vec<u32>, _>>()?;
        if has(ExtensionPoint::PreScore) {
            let s = inst.pre_score(&state, &pod, &slots)?;
            let stop = !s.is_success();
            out.pre_score = Some(s);
            if stop {
                return Ok(out);
            }
        }
        let raw = match inst.score(&state, &pod, &slots)? {
            Ok(raw) => raw,
            Err(status) => {
                out.score_error = Some(status);
                return Ok(out);
            }
        };
        let names: Vec<String> = feasible.iter().map(|n| n.node.name.clone()).collect();
        out.raw_scores = names.iter().cloned().zip(raw.iter().copied()).collect();
        let scores = if has(ExtensionPoint::NormalizeScore) {
            match inst.normalize_score(&state, &pod, &raw)? {
                Ok(s) => s,
                Err(status) => {
                    out.score_error = Some(status);
                    return Ok(out);
                }
            }
        } else {
            raw
        };
        if scores.len() != names.len() {
            return Err(HarnessError::NormalizedScores {
                plugin: self.module.name().to_owned(),
                scores: scores.len(),
                nodes: names.len(),
            });
        }
        out.scores = names.into_iter().zip(scores).collect();
        Ok(out)
    }

    /// Plays every case and checks it; the error lists every failing case.
    pub fn check_all(&self, cases: &[Case]) -> Result<(), CasesFailed> {
        let mut failures = Vec::new();
        for case in cases {
            match self.run(case) {
                Ok(got) => {
                    if let Err(e) = case.check(&got) {
                        failures.push(e);
                    }
                }
                Err(e) => failures.push(format!("case {:?}: {e:#}", case.name)),
            }
        }
        if !failures.is_empty() {
            return Err(CasesFailed {
                module: self.module.source().to_string(),
                total: cases.len(),
                failures,
            });
        }
        Ok(())
    }
}

/// Milliseconds, for reports.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The built-in pod and node of the trial call.
fn trial_case(args: serde_json::Value) -> Case {
    Case::new("trial")
        .args(args)
        .pod(
            pod("berth-check")
                .label("app", "berth-check")
                .cpu(100)
                .memory(128 * MI),
        )
        .node(
            node("berth-check-node")
                .label("kubernetes.io/hostname", "berth-check-node")
                .label("topology.kubernetes.io/zone", "zone-a")
                .cpu(4000)
                .memory(16 * GI)
                .pod(
                    pod("resident")
                        .namespace("kube-system")
                        .cpu(250)
                        .memory(256 * MI),
                ),
        )
}

/// Configures an instance with the args and calls the implemented extension points
/// of one scheduling cycle on the built-in pod and node. `berth plugin check` and the
/// hot swap of a module ([`crate::reload`]) both run it.
pub fn trial(
    module: &Arc<berth_runtime::wasm::Module>,
    args_json: &str,
    lines: &mut Vec<String>,
) -> Result<(), String> {
    let args: serde_json::Value =
        serde_json::from_str(args_json).map_err(|e| format!("--args is not JSON: {e}"))?;
    let case = trial_case(args);
    lines.push(format!(
        "pod {} on node {} (4 CPU, 16 GiB)",
        case.pod.key(),
        case.nodes[0].node.name
    ));
    let points = module.extension_points();
    if points.contains(&ExtensionPoint::PreEnqueue) || points.contains(&ExtensionPoint::QueueSort) {
        let mut inst = module
            .instantiate(args_json, HostServices::default())
            .map_err(|e| e.to_string())?;
        let pod = CyclePod::new(case.pod.clone());
        if points.contains(&ExtensionPoint::PreEnqueue) {
            let t = Instant::now();
            let s = inst.pre_enqueue(&pod).map_err(|e| e.to_string())?;
            lines.push(format!(
                "preEnqueue: {} ({:.2} ms)",
                status(&s),
                ms(t.elapsed())
            ));
        }
        if points.contains(&ExtensionPoint::QueueSort) {
            let t = Instant::now();
            let k = inst.sort_key(&pod).map_err(|e| e.to_string())?;
            lines.push(format!("queueSort: key {k:?} ({:.2} ms)", ms(t.elapsed())));
        }
    }
    let cycle = [
        ExtensionPoint::PreFilter,
        ExtensionPoint::Filter,
        ExtensionPoint::PreScore,
        ExtensionPoint::Score,
        ExtensionPoint::NormalizeScore,
    ];
    if cycle.iter().any(|p| points.contains(p)) {
        let harness = ComponentHarness::from_module(module.clone());
        let t = Instant::now();
        let o = harness.run(&case).map_err(|e| format!("{e:#}"))?;
        let elapsed = ms(t.elapsed());
        if let Some(s) = &o.pre_filter {
            lines.push(format!("preFilter: {}", status(s)));
        }
        for (n, s) in &o.filter {
            lines.push(format!("filter on {n}: {}", status(s)));
        }
        if let Some(s) = &o.pre_score {
            lines.push(format!("preScore: {}", status(s)));
        }
        for (n, raw) in &o.raw_scores {
            match o.scores.get(n) {
                Some(fin) if points.contains(&ExtensionPoint::NormalizeScore) => {
                    lines.push(format!("score on {n}: {raw}, normalized {fin}"))
                }
                _ => lines.push(format!("score on {n}: {raw}")),
            }
        }
        if let Some(s) = &o.score_error {
            lines.push(format!("score failed: {}", status(s)));
        }
        lines.push(format!(
            "one cycle in {elapsed:.2} ms (instantiate, configure, sync, calls)"
        ));
    }
    Ok(())
}

fn status(s: &berth_sdk::Status) -> String {
    if s.reasons.is_empty() {
        s.code.as_str().to_owned()
    } else {
        format!("{} ({})", s.code.as_str(), s.reasons.join(", "))
    }
}
