//! Test a plugin with one table of cases, natively and as a component.
//!
//! A [`Case`] is a pod, the nodes of a small cluster, the plugin's args and what the
//! plugin should answer. [`run`] plays the case through a plugin type natively, the
//! way the scheduling framework calls it in one scheduling cycle: PreFilter once,
//! Filter on every node it left, PreScore and Score on the nodes that passed, then
//! NormalizeScore. It answers an [`Outcome`], which [`Case::check`] compares with
//! what the case expects. The Berth host runs the same cases through the compiled
//! component (`berth plugin test MODULE.wasm --cases FILE`, or
//! `berth::testing::ComponentHarness` in a Rust test), so one table checks both.
//!
//! ```
//! use berth_sdk::testing::{self, Case, node, pod};
//! use berth_sdk::{Code, CycleState, Filter, NodeInfo, Plugin, Pod, Status};
//!
//! struct NoGpu;
//! impl Plugin for NoGpu {
//!     const NAME: &'static str = "NoGpu";
//!     fn new(_args: serde_json::Value) -> Result<Self, String> {
//!         Ok(NoGpu)
//!     }
//! }
//! impl Filter for NoGpu {
//!     fn filter(&self, _: &CycleState, _: &Pod, node: &NodeInfo) -> Status {
//!         if node.node.labels.contains_key("gpu") {
//!             Status::unresolvable("node has a GPU")
//!         } else {
//!             Status::success()
//!         }
//!     }
//! }
//! berth_sdk::plugin_vtable!(NoGpu: filter);
//!
//! let cases = vec![
//!     Case::new("a GPU node is refused")
//!         .pod(pod("web").cpu(500))
//!         .node(node("plain").cpu(4000))
//!         .node(node("big").cpu(4000).label("gpu", "a100"))
//!         .feasible(["plain"])
//!         .rejects("big", Code::UnschedulableAndUnresolvable, "node has a GPU"),
//! ];
//! testing::check_all::<NoGpu>(&cases);
//! ```

use crate::plugin::{CycleState, MemoryState, Registered, VTable};
use crate::types::{
    CPU, Code, Container, HostPort, MEMORY, Node, NodeInfo, Pod, Status, Taint, TaintEffect,
    Toleration, TolerationOperator,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One gibibyte, for memory quantities.
pub const GI: i64 = 1 << 30;
/// One mebibyte, for memory quantities.
pub const MI: i64 = 1 << 20;

/// Starts a node named `name` with room for 110 pods and nothing else; chain the
/// builder's methods and use it where a [`NodeInfo`] is expected (`.build()`, or
/// [`Case::node`]).
pub fn node(name: &str) -> NodeBuilder {
    let mut info = NodeInfo::new(Node {
        name: name.to_owned(),
        ..Node::default()
    });
    info.node.allocatable.allowed_pod_number = 110;
    NodeBuilder(info)
}

/// Starts a pending pod `default/name` (uid `default-name`, scheduler
/// `default-scheduler`) with one container `c` that requests nothing.
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder(Pod {
        uid: format!("default-{name}"),
        namespace: "default".to_owned(),
        name: name.to_owned(),
        scheduler_name: "default-scheduler".to_owned(),
        containers: vec![Container {
            name: "c".to_owned(),
            image: "registry.k8s.io/pause:3.10".to_owned(),
            ..Container::default()
        }],
        ..Pod::default()
    })
}

/// Builds a [`NodeInfo`]: labels, taints, allocatable resources and the pods on it.
#[derive(Clone, Debug)]
pub struct NodeBuilder(NodeInfo);

impl NodeBuilder {
    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0.node.labels.insert(key.to_owned(), value.to_owned());
        self
    }
    /// Adds a taint.
    pub fn taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Self {
        self.0.node.taints.push(Taint {
            key: key.to_owned(),
            value: value.to_owned(),
            effect,
        });
        self
    }
    /// Cordons the node (`spec.unschedulable`).
    pub fn unschedulable(mut self) -> Self {
        self.0.node.unschedulable = true;
        self
    }
    /// Allocatable CPU, in millicores.
    pub fn cpu(mut self, millicores: i64) -> Self {
        self.0.node.allocatable.milli_cpu = millicores;
        self
    }
    /// Allocatable memory, in bytes (see [`GI`], [`MI`]).
    pub fn memory(mut self, bytes: i64) -> Self {
        self.0.node.allocatable.memory = bytes;
        self
    }
    /// How many pods the node takes (default 110).
    pub fn max_pods(mut self, pods: i64) -> Self {
        self.0.node.allocatable.allowed_pod_number = pods;
        self
    }
    /// Allocatable quantity of any other resource (extended resources, hugepages,
    /// `ephemeral-storage`).
    pub fn allocatable(mut self, resource: &str, quantity: i64) -> Self {
        self.0.node.allocatable.set(resource, quantity);
        self
    }
    /// Lists an image on the node (`status.images`); `num_nodes` is counted when a
    /// case runs.
    pub fn image(mut self, name: &str, size_bytes: i64) -> Self {
        self.0.node.images.push(crate::types::ImageState {
            names: vec![name.to_owned()],
            size_bytes,
            num_nodes: 0,
        });
        self
    }
    /// Counts a pod on the node, as the scheduler's cache does: its requests, host
    /// ports and the pod itself. Its `node_name` is set to this node.
    pub fn pod(mut self, pod: impl Into<Pod>) -> Self {
        let mut pod = pod.into();
        pod.node_name = self.0.node.name.clone();
        self.0.add_pod(&pod);
        self
    }
    /// The node info.
    pub fn build(self) -> NodeInfo {
        self.0
    }
}

impl From<NodeBuilder> for NodeInfo {
    fn from(b: NodeBuilder) -> NodeInfo {
        b.0
    }
}

/// Builds a [`Pod`]: namespace, labels, requests, tolerations, selectors.
#[derive(Clone, Debug)]
pub struct PodBuilder(Pod);

impl PodBuilder {
    /// Moves the pod to a namespace (its uid follows).
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.0.namespace = namespace.to_owned();
        self.0.uid = format!("{namespace}-{}", self.0.name);
        self
    }
    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0.labels.insert(key.to_owned(), value.to_owned());
        self
    }
    /// The pod's priority.
    pub fn priority(mut self, priority: i32) -> Self {
        self.0.priority = priority;
        self
    }
    /// The first container requests this much CPU, in millicores.
    pub fn cpu(self, millicores: i64) -> Self {
        self.request(CPU, millicores)
    }
    /// The first container requests this much memory, in bytes.
    pub fn memory(self, bytes: i64) -> Self {
        self.request(MEMORY, bytes)
    }
    /// The first container requests a quantity of any resource.
    pub fn request(mut self, resource: &str, quantity: i64) -> Self {
        self.0.containers[0]
            .requests
            .insert(resource.to_owned(), quantity);
        self
    }
    /// The first container asks for a host port (TCP, every address).
    pub fn host_port(mut self, port: i32) -> Self {
        self.0.containers[0].ports.push(HostPort {
            host_ip: String::new(),
            protocol: "TCP".to_owned(),
            port,
        });
        self
    }
    /// The first container's image.
    pub fn image(mut self, image: &str) -> Self {
        self.0.containers[0].image = image.to_owned();
        self
    }
    /// Adds `spec.nodeSelector` entry.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.0
            .node_selector
            .insert(key.to_owned(), value.to_owned());
        self
    }
    /// Tolerates the taint `key=value:effect` (an empty value tolerates any value).
    pub fn toleration(mut self, key: &str, value: &str, effect: Option<TaintEffect>) -> Self {
        self.0.tolerations.push(Toleration {
            key: key.to_owned(),
            operator: if value.is_empty() {
                TolerationOperator::Exists
            } else {
                TolerationOperator::Equal
            },
            value: value.to_owned(),
            effect,
            toleration_seconds: None,
        });
        self
    }
    /// The pod.
    pub fn build(self) -> Pod {
        self.0
    }
}

impl From<PodBuilder> for Pod {
    fn from(b: PodBuilder) -> Pod {
        b.0
    }
}

/// What a plugin answered for one case, in one scheduling cycle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// PreFilter's status; `None` when the plugin has no PreFilter.
    pub pre_filter: Option<Status>,
    /// The nodes PreFilter narrowed the cycle to, if it did.
    pub pre_filter_nodes: Option<Vec<String>>,
    /// Filter's answer for every node it was called on, by node name.
    pub filter: BTreeMap<String, Status>,
    /// The nodes that passed, in the case's order.
    pub feasible: Vec<String>,
    /// PreScore's status; `None` when the plugin has no PreScore or nothing was scored.
    pub pre_score: Option<Status>,
    /// Score's raw scores by node; empty when the plugin does not score (or skipped).
    pub raw_scores: BTreeMap<String, i64>,
    /// The scores after NormalizeScore (the raw ones when the plugin has none).
    pub scores: BTreeMap<String, i64>,
    /// A Score or NormalizeScore that failed, with its status.
    pub score_error: Option<Status>,
}

/// One row of a table: the input of a scheduling cycle and what should come of it.
/// Only what a case says it expects is checked.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Shown when the case fails.
    pub name: String,
    /// The plugin's args (`null`: none), as the profile's `pluginConfig` gives them.
    pub args: serde_json::Value,
    /// The pod being scheduled.
    pub pod: Pod,
    /// The cluster's nodes, in the order the cycle visits them.
    pub nodes: Vec<NodeInfo>,
    /// Expected: the nodes that pass PreFilter and Filter, in node order.
    pub want_feasible: Option<Vec<String>>,
    /// Expected: a node's Filter code and (when not empty) its reasons.
    pub want_rejected: Vec<(String, Code, Vec<String>)>,
    /// Expected: PreFilter's code.
    pub want_pre_filter: Option<Code>,
    /// Expected: the final (normalized) score of these nodes.
    pub want_scores: BTreeMap<String, i64>,
}

impl Case {
    /// A case with no nodes and an empty pod.
    pub fn new(name: &str) -> Self {
        Case {
            name: name.to_owned(),
            pod: pod("p").build(),
            ..Case::default()
        }
    }
    /// The plugin's args, e.g. `serde_json::json!({"label": "x"})`.
    pub fn args(mut self, args: serde_json::Value) -> Self {
        self.args = args;
        self
    }
    /// The pod being scheduled.
    pub fn pod(mut self, pod: impl Into<Pod>) -> Self {
        self.pod = pod.into();
        self
    }
    /// Adds a node.
    pub fn node(mut self, node: impl Into<NodeInfo>) -> Self {
        self.nodes.push(node.into());
        self
    }
    /// Expects exactly these nodes to pass, in node order.
    pub fn feasible<S: AsRef<str>>(mut self, nodes: impl IntoIterator<Item = S>) -> Self {
        self.want_feasible = Some(nodes.into_iter().map(|s| s.as_ref().to_owned()).collect());
        self
    }
    /// Expects Filter to answer `code` for `node`, with `reason` among its reasons
    /// (an empty `reason` checks the code only).
    pub fn rejects(mut self, node: &str, code: Code, reason: &str) -> Self {
        let reasons = if reason.is_empty() {
            Vec::new()
        } else {
            vec![reason.to_owned()]
        };
        self.want_rejected.push((node.to_owned(), code, reasons));
        self
    }
    /// Expects PreFilter to answer `code`.
    pub fn pre_filter_code(mut self, code: Code) -> Self {
        self.want_pre_filter = Some(code);
        self
    }
    /// Expects these final scores.
    pub fn scores<S: AsRef<str>>(mut self, scores: impl IntoIterator<Item = (S, i64)>) -> Self {
        self.want_scores
            .extend(scores.into_iter().map(|(n, s)| (n.as_ref().to_owned(), s)));
        self
    }

    /// Compares an outcome with what this case expects; the error lists every
    /// difference.
    pub fn check(&self, got: &Outcome) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Some(want) = self.want_pre_filter {
            let code = got.pre_filter.as_ref().map(|s| s.code);
            if code != Some(want) {
                problems.push(format!("PreFilter: want {want:?}, got {code:?}"));
            }
        }
        if let Some(want) = &self.want_feasible
            && *want != got.feasible
        {
            problems.push(format!("feasible: want {want:?}, got {:?}", got.feasible));
        }
        for (node, code, reasons) in &self.want_rejected {
            match got.filter.get(node) {
                None => problems.push(format!("Filter on {node}: want {code:?}, not called")),
                Some(s) if s.code != *code => problems.push(format!(
                    "Filter on {node}: want {code:?}, got {:?} {:?}",
                    s.code, s.reasons
                )),
                Some(s) => {
                    for r in reasons {
                        if !s.reasons.contains(r) {
                            problems.push(format!(
                                "Filter on {node}: want reason {r:?}, got {:?}",
                                s.reasons
                            ));
                        }
                    }
                }
            }
        }
        for (node, want) in &self.want_scores {
            match got.scores.get(node) {
                Some(s) if s == want => {}
                other => problems.push(format!("score of {node}: want {want}, got {other:?}")),
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "case {:?}:\n  {}",
                self.name,
                problems.join("\n  ")
            ))
        }
    }
}

/// Plays one case through plugin type `T` natively, as the framework would in one
/// scheduling cycle. An error is the plugin refusing its args.
pub fn run<T: Registered>(case: &Case) -> Result<Outcome, String> {
    let args = if case.args.is_null() {
        serde_json::Value::Object(Default::default())
    } else {
        case.args.clone()
    };
    let plugin = T::new(args)?;
    Ok(play(
        &plugin,
        &T::vtable(),
        &case.pod,
        &with_image_counts(&case.nodes),
    ))
}

/// The nodes with `ImageState::num_nodes` counted over them, as the host's cache
/// counts it: the nodes that list any of the image's names.
fn with_image_counts(nodes: &[NodeInfo]) -> Vec<NodeInfo> {
    let mut out = nodes.to_vec();
    for info in &mut out {
        for img in &mut info.node.images {
            img.num_nodes = nodes
                .iter()
                .filter(|n| {
                    n.node
                        .images
                        .iter()
                        .any(|i| i.names.iter().any(|x| img.names.contains(x)))
                })
                .count() as u32;
        }
    }
    out
}

fn play<T>(plugin: &T, v: &VTable<T>, pod: &Pod, nodes: &[NodeInfo]) -> Outcome {
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let all: Vec<&NodeInfo> = nodes.iter().collect();
    let mut out = Outcome::default();
    let mut skip_filter = false;
    if let Some(pre_filter) = v.pre_filter {
        let r = pre_filter(plugin, &state, pod, &all);
        skip_filter = r.status.code == Code::Skip;
        let rejected = !matches!(r.status.code, Code::Success | Code::Skip);
        out.pre_filter = Some(r.status);
        out.pre_filter_nodes = r.node_names;
        if rejected {
            return out;
        }
    }
    let candidates: Vec<&NodeInfo> = all
        .iter()
        .copied()
        .filter(|n| {
            out.pre_filter_nodes
                .as_ref()
                .is_none_or(|names| names.iter().any(|x| x == n.name()))
        })
        .collect();
    let mut feasible = Vec::new();
    for n in candidates {
        match v.filter {
            Some(filter) if !skip_filter => {
                let s = filter(plugin, &state, pod, n);
                let ok = s.is_success();
                out.filter.insert(n.name().to_owned(), s);
                if ok {
                    feasible.push(n);
                }
            }
            _ => feasible.push(n),
        }
    }
    out.feasible = feasible.iter().map(|n| n.name().to_owned()).collect();
    let Some(score) = v.score else {
        return out;
    };
    if feasible.is_empty() {
        return out;
    }
    if let Some(pre_score) = v.pre_score {
        let s = pre_score(plugin, &state, pod, &feasible, &all);
        let stop = !s.is_success();
        out.pre_score = Some(s);
        if stop {
            return out;
        }
    }
    let mut raw = Vec::with_capacity(feasible.len());
    for n in &feasible {
        match score(plugin, &state, pod, n) {
            Ok(s) => raw.push(s),
            Err(status) => {
                out.score_error = Some(status);
                return out;
            }
        }
    }
    let names = feasible.iter().map(|n| n.name().to_owned());
    out.raw_scores = names.clone().zip(raw.iter().copied()).collect();
    let mut scores = raw;
    if let Some(normalize) = v.normalize_score {
        let s = normalize(plugin, &state, pod, &mut scores);
        if !s.is_success() {
            out.score_error = Some(s);
            return out;
        }
    }
    out.scores = names.zip(scores).collect();
    out
}

/// Runs every case natively through `T` and panics with every failure (case name
/// and differences) when any case fails.
pub fn check_all<T: Registered>(cases: &[Case]) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| match run::<T>(case) {
            Ok(got) => case.check(&got).err(),
            Err(e) => Some(format!(
                "case {:?}: the plugin refused its args: {e}",
                case.name
            )),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Runs the cases natively through `T` and through the crate's compiled component,
/// and panics unless every case passes both ways with the same outcome. Call it
/// through [`check_component!`](crate::check_component) from an integration test.
///
/// The component is built with `cargo build --target wasm32-wasip2 --release` into
/// a target directory of its own under `target_tmpdir`, and played by the `berth`
/// command (`berth plugin test`), found as `$BERTH` or on `PATH`. Without it the
/// component half is skipped with a message on standard error.
#[cfg(not(target_arch = "wasm32"))]
pub fn check_component<T: Registered>(
    manifest_dir: &str,
    crate_name: &str,
    target_tmpdir: &str,
    cases: &[Case],
) {
    check_all::<T>(cases);
    let Some(berth) = find_berth() else {
        eprintln!(
            "skipped: the component half of {crate_name}'s cases needs the `berth` command; set BERTH=/path/to/berth or put berth on PATH"
        );
        return;
    };
    let dir = std::path::Path::new(target_tmpdir).join("berth-component");
    let wasm = build_component(std::path::Path::new(manifest_dir), crate_name, &dir)
        .unwrap_or_else(|e| panic!("{e}"));
    let got = component_outcomes(&berth, &wasm, cases, &dir).unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    for (case, got) in cases.iter().zip(got) {
        let native = run::<T>(case).expect("checked by check_all");
        match got {
            Some(got) if got == native => {}
            Some(got) => failures.push(format!(
                "case {:?}: the component answered differently:\n  native:    {native:?}\n  component: {got:?}",
                case.name
            )),
            None => failures.push(format!("case {:?}: the component run failed", case.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs the cases natively through a plugin type, then through its crate's
/// compiled component, and checks they agree; see [`testing::check_component`].
///
/// ```no_run
/// # struct MyPlugin;
/// # fn cases() -> Vec<berth_sdk::testing::Case> { Vec::new() }
/// // tests/component.rs
/// #[test]
/// fn native_and_component_agree() {
///     berth_sdk::check_component!(MyPlugin, cases());
/// }
/// ```
///
/// [`testing::check_component`]: crate::testing::check_component
#[macro_export]
macro_rules! check_component {
    ($t:ty, $cases:expr) => {
        $crate::testing::check_component::<$t>(
            env!("CARGO_MANIFEST_DIR"),
            env!("CARGO_PKG_NAME"),
            env!("CARGO_TARGET_TMPDIR"),
            &$cases,
        )
    };
}

/// The `berth` command: `$BERTH`, else `berth` on `PATH`.
#[cfg(not(target_arch = "wasm32"))]
pub fn find_berth() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("BERTH") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("berth"))
        .find(|p| p.is_file())
}

/// Builds the crate in `manifest_dir` into a component (release, `wasm32-wasip2`)
/// with `target_dir` as its target directory; answers the `.wasm` file.
#[cfg(not(target_arch = "wasm32"))]
pub fn build_component(
    manifest_dir: &std::path::Path,
    crate_name: &str,
    target_dir: &std::path::Path,
) -> Result<std::path::PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--target",
        "wasm32-wasip2",
        "--manifest-path",
    ])
    .arg(manifest_dir.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(target_dir);
    // Flags meant for the native test build must not reach the wasm build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run cargo to build {crate_name}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building {crate_name} for wasm32-wasip2 failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let wasm = target_dir
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", crate_name.replace('-', "_")));
    if wasm.is_file() {
        Ok(wasm)
    } else {
        Err(format!(
            "cargo built {crate_name} but {} is missing (is the crate-type cdylib?)",
            wasm.display()
        ))
    }
}

/// Plays the cases through a component with `berth plugin test`, answering each
/// case's outcome (`None` where the run failed). `work_dir` receives the cases file.
#[cfg(not(target_arch = "wasm32"))]
pub fn component_outcomes(
    berth: &std::path::Path,
    wasm: &std::path::Path,
    cases: &[Case],
    work_dir: &std::path::Path,
) -> Result<Vec<Option<Outcome>>, String> {
    std::fs::create_dir_all(work_dir).map_err(|e| format!("{}: {e}", work_dir.display()))?;
    let file = work_dir.join("cases.json");
    let json = serde_json::to_string(cases).map_err(|e| e.to_string())?;
    std::fs::write(&file, json).map_err(|e| format!("{}: {e}", file.display()))?;
    let out = std::process::Command::new(berth)
        .args(["plugin", "test", "--output", "json", "--cases"])
        .arg(&file)
        .arg(wasm)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", berth.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results: Vec<serde_json::Value> = serde_json::from_str(&stdout).map_err(|e| {
        format!(
            "berth plugin test answered no JSON ({e}):\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let mut outcomes = Vec::new();
    let mut failures = Vec::new();
    for r in results {
        if let Some(f) = r.get("failure").and_then(|f| f.as_str()) {
            failures.push(f.to_owned());
        }
        outcomes.push(
            r.get("outcome")
                .cloned()
                .and_then(|o| serde_json::from_value(o).ok()),
        );
    }
    if !failures.is_empty() {
        return Err(format!(
            "through the component ({}):\n{}",
            wasm.display(),
            failures.join("\n")
        ));
    }
    Ok(outcomes)
}

/// Checks a volume plugin's SignPod: it signs a pod by its volumes and nothing else,
/// with the shared signer ([`crate::sign::volumes`], tested there), and cannot sign a
/// pod with a generic ephemeral volume.
pub fn check_signs_by_volumes(sign: impl Fn(&Pod) -> Result<Vec<crate::SignFragment>, Status>) {
    use crate::volumes::{Volume, VolumeSource};
    let claim = |name: &str| VolumeSource::PersistentVolumeClaim {
        claim_name: name.into(),
        read_only: false,
    };
    let with = |source: VolumeSource| Pod {
        namespace: "a".into(),
        name: "p".into(),
        volumes: vec![Volume {
            name: "data".into(),
            source,
        }],
        ..Pod::default()
    };
    for p in [with(claim("c1")), with(claim("c2")), Pod::default()] {
        let want = crate::sign::volumes(&p).expect("signable");
        assert_eq!(sign(&p), Ok(vec![want]), "{p:?}");
    }
    let ephemeral = with(VolumeSource::Ephemeral);
    assert_eq!(
        sign(&ephemeral).map_err(|s| s.code),
        Err(crate::Code::Unschedulable)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Filter, NormalizeScore, Plugin, PreFilter, PreFilterResult, Score};

    /// Needs `want` label on nodes; scores by the number in label `n`.
    struct Demo {
        want: String,
    }
    impl Plugin for Demo {
        const NAME: &'static str = "Demo";
        fn new(args: serde_json::Value) -> Result<Self, String> {
            match args.get("want") {
                Some(serde_json::Value::String(s)) => Ok(Demo { want: s.clone() }),
                None => Ok(Demo { want: "yes".into() }),
                Some(other) => Err(format!("want: expected a string, got {other}")),
            }
        }
    }
    impl PreFilter for Demo {
        fn pre_filter(&self, state: &CycleState, pod: &Pod, _: &[&NodeInfo]) -> PreFilterResult {
            if pod.labels.contains_key("skip") {
                return Status::skip().into();
            }
            state.write("Demo/want", &self.want);
            Status::success().into()
        }
    }
    impl Filter for Demo {
        fn filter(&self, state: &CycleState, _: &Pod, node: &NodeInfo) -> Status {
            let want: String = state.read("Demo/want").unwrap_or_default();
            if node.node.labels.get("want") == Some(&want) {
                Status::success()
            } else {
                Status::unschedulable("no")
            }
        }
    }
    impl Score for Demo {
        fn score(&self, _: &CycleState, _: &Pod, node: &NodeInfo) -> Result<i64, Status> {
            Ok(node
                .node
                .labels
                .get("n")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0))
        }
    }
    impl NormalizeScore for Demo {
        fn normalize_score(&self, _: &CycleState, _: &Pod, scores: &mut [i64]) -> Status {
            crate::helpers::default_normalize_score(100, false, scores);
            Status::success()
        }
    }
    crate::plugin_vtable!(Demo: pre_filter, filter, score, normalize_score);

    #[test]
    fn a_cycle_filters_scores_and_normalizes() {
        let case = Case::new("c")
            .node(node("a").label("want", "yes").label("n", "2"))
            .node(node("b").label("want", "no"))
            .node(node("c").label("want", "yes").label("n", "4"));
        let got = run::<Demo>(&case).unwrap();
        assert_eq!(got.feasible, ["a", "c"]);
        assert_eq!(got.filter["b"], Status::unschedulable("no"));
        assert_eq!(
            got.raw_scores,
            BTreeMap::from([("a".into(), 2), ("c".into(), 4)])
        );
        assert_eq!(
            got.scores,
            BTreeMap::from([("a".into(), 50), ("c".into(), 100)])
        );
        let ok = case.clone().feasible(["a", "c"]).scores([("c", 100)]);
        ok.check(&got).unwrap();
        let bad = case
            .feasible(["a"])
            .rejects("b", Code::UnschedulableAndUnresolvable, "")
            .scores([("a", 100)]);
        let e = bad.check(&got).unwrap_err();
        assert!(
            e.contains("feasible: want [\"a\"], got [\"a\", \"c\"]"),
            "{e}"
        );
        assert!(
            e.contains("Filter on b: want UnschedulableAndUnresolvable"),
            "{e}"
        );
        assert!(e.contains("score of a: want 100, got Some(50)"), "{e}");
    }

    #[test]
    fn args_reach_the_plugin_and_a_refusal_is_an_error() {
        let case = Case::new("args")
            .args(serde_json::json!({"want": "no"}))
            .node(node("a").label("want", "yes"))
            .node(node("b").label("want", "no"));
        assert_eq!(run::<Demo>(&case).unwrap().feasible, ["b"]);
        let bad = case.args(serde_json::json!({"want": 3}));
        assert_eq!(
            run::<Demo>(&bad).unwrap_err(),
            "want: expected a string, got 3"
        );
    }

    #[test]
    fn pre_filter_skip_means_no_filter_calls() {
        let case = Case::new("skip")
            .pod(pod("p").label("skip", ""))
            .node(node("a"))
            .pre_filter_code(Code::Skip)
            .feasible(["a"]);
        let got = run::<Demo>(&case).unwrap();
        assert!(got.filter.is_empty());
        case.check(&got).unwrap();
    }

    #[test]
    fn builders_count_pods_on_nodes() {
        let n = node("n")
            .cpu(4000)
            .memory(8 * GI)
            .pod(pod("a").cpu(500).memory(256 * MI).host_port(80))
            .build();
        assert_eq!(n.pod_count, 1);
        assert_eq!(n.requested.milli_cpu, 500);
        assert_eq!(n.requested.memory, 256 * MI);
        assert_eq!(n.pods[0].node_name, "n");
        assert_eq!(n.used_ports.len(), 1);
        let p = pod("x").namespace("team").toleration("k", "", None).build();
        assert_eq!(p.key(), "team/x");
        assert_eq!(p.tolerations[0].operator, TolerationOperator::Exists);
    }

    #[test]
    fn cases_round_trip_through_json() {
        let case = Case::new("json")
            .pod(pod("p").cpu(100))
            .node(node("a").label("want", "yes"))
            .feasible(["a"])
            .rejects("b", Code::Unschedulable, "no")
            .scores([("a", 0)]);
        let text = serde_json::to_string(&case).unwrap();
        let back: Case = serde_json::from_str(&text).unwrap();
        assert_eq!(back, case);
    }
}
