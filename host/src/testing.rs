//! Runs the SDK's test cases ([`berth_sdk::testing::Case`]) through a compiled plugin
//! component, as the scheduler runs it: the same table a plugin author checks
//! natively with `berth_sdk::testing::run`, played against the `.wasm` file.
//!
//! ```no_run
//! use berth::testing::ComponentHarness;
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

use crate::cache::{Cache, CacheError};
use crate::framework::cycle_state::CycleState;
use crate::framework::{CyclePod, PluginCalls};
use crate::wasm::module::HostServices;
use crate::wasm::{CallError, LoadError, Module, Runtime, RuntimeError, RuntimeOptions};
use berth_sdk::testing::{Case, Outcome};
use berth_sdk::{Code, ExtensionPoint, NodeInfo};
use std::path::Path;
use std::sync::Arc;

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
