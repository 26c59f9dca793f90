//! The crate `berth plugin new` writes: a plugin with one extension point, its table
//! of cases, a unit test that runs the table natively and an integration test that
//! runs it through the compiled component.

use super::Point;
use std::path::{Path, PathBuf};

/// Why `berth plugin new` could not write the crate.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// The name is not one a plugin or a crate can have.
    #[error(
        "plugin name {0:?}: use letters, digits, '-' or '_', starting with a letter (e.g. AvoidSpot or avoid-spot)"
    )]
    BadName(String),
    /// The directory to write in already holds something.
    #[error("{}: the directory exists and is not empty; pick another --dir", .0.display())]
    NotEmpty(PathBuf),
    /// A directory of the crate could not be created.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("{}: cannot create the directory: {error}", .dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// A file of the crate could not be written.
    #[error("{}: cannot write: {error}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

/// What was written.
#[derive(Debug)]
pub struct Made {
    /// The plugin's name, as profiles name it.
    pub plugin: String,
    /// The crate's name.
    pub crate_name: String,
    /// The crate's directory.
    pub dir: PathBuf,
}

/// `AvoidSpot` or `avoid-spot` or `avoid_spot` -> (`AvoidSpot`, `avoid-spot`).
pub fn names(name: &str) -> Result<(String, String), NewError> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(NewError::BadName(name.to_owned()));
    }
    let mut words: Vec<String> = Vec::new();
    for part in name.split(['-', '_']).filter(|p| !p.is_empty()) {
        let mut word = String::new();
        let chars: Vec<char> = part.chars().collect();
        for (i, c) in chars.iter().enumerate() {
            // A capital starts a word, unless it continues an acronym (`GPUGuard`).
            let boundary = i > 0
                && c.is_ascii_uppercase()
                && (chars[i - 1].is_ascii_lowercase()
                    || chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()));
            if boundary && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            word.push(*c);
        }
        words.push(word);
    }
    let plugin = words
        .iter()
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect();
    let crate_name = words
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("-");
    Ok((plugin, crate_name))
}

/// Writes the crate. Refuses a directory that exists and is not empty.
pub fn write(
    name: &str,
    dir: Option<&Path>,
    point: Point,
    sdk: Option<PathBuf>,
) -> Result<Made, NewError> {
    let (plugin, crate_name) = names(name)?;
    let dir = dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(&crate_name));
    if let Ok(mut entries) = std::fs::read_dir(&dir)
        && entries.next().is_some()
    {
        return Err(NewError::NotEmpty(dir));
    }
    let sdk_dep = match &sdk {
        Some(p) => format!(
            "# By version, once berth-sdk is on your registry: berth-sdk = \"{v}\"\nberth-sdk = {{ path = {path:?} }}",
            v = env!("CARGO_PKG_VERSION"),
            path = p.display().to_string()
        ),
        None => format!(
            "# Or by path to a Berth checkout: berth-sdk = {{ path = \"../berth/sdk\" }}\nberth-sdk = \"{}\"",
            env!("CARGO_PKG_VERSION")
        ),
    };
    let files = [
        ("Cargo.toml", cargo_toml(&crate_name, &sdk_dep)),
        ("src/lib.rs", lib_rs(&plugin, point)),
        ("src/cases.rs", cases_rs(point)),
        ("tests/component.rs", component_rs(&plugin, &crate_name)),
        (".gitignore", "/target\n".to_owned()),
    ];
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| NewError::CreateDir {
                dir: parent.to_path_buf(),
                error,
            })?;
        }
        std::fs::write(&path, text).map_err(|error| NewError::Write { path, error })?;
    }
    Ok(Made {
        plugin,
        crate_name,
        dir,
    })
}

fn cargo_toml(crate_name: &str, sdk_dep: &str) -> String {
    format!(
        r#"[package]
name = "{crate_name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
# cdylib: the WebAssembly component (cargo build --target wasm32-wasip2 --release);
# rlib: the same code in native tests.
crate-type = ["cdylib", "rlib"]

[dependencies]
{sdk_dep}

# A crate of its own, even when created inside another workspace.
[workspace]
"#
    )
}

fn lib_rs(plugin: &str, point: Point) -> String {
    let (head, body, exports) = match point {
        Point::Filter => (filter_head(plugin), filter_body(plugin), "filter, sign_pod"),
        Point::Score => (
            score_head(plugin),
            score_body(plugin),
            "score, normalize_score, sign_pod",
        ),
    };
    format!(
        r#"{head}
/// The plugin, configured from its args.
pub struct {plugin} {{
    label: String,
}}

impl Plugin for {plugin} {{
    const NAME: &'static str = "{plugin}";

    fn new(args: Value) -> Result<Self, String> {{
        let label = match args.get("label") {{
            None => DEFAULT_LABEL.to_owned(),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(other) => return Err(format!("label: want a non-empty string, got {{other}}")),
        }};
        Ok({plugin} {{ label }})
    }}
}}

{body}/// SignPod: what of the pod this plugin's Filter and Score read, so that the
/// scheduler may place a pod signed like the last one from that cycle's ranking
/// (opportunistic batching). This plugin reads only the node: every pod signs alike.
/// Sign what it reads of the pod if you make it read some (`berth_sdk::sign`).
impl Sign for {plugin} {{
    fn sign_pod(&self, _pod: &Pod) -> Result<Vec<SignFragment>, Status> {{
        Ok(Vec::new())
    }}
}}

berth_sdk::export_plugin!({plugin}: {exports});

#[cfg(test)]
mod cases;

#[cfg(test)]
mod tests {{
    #[test]
    fn cases_pass_natively() {{
        berth_sdk::testing::check_all::<super::{plugin}>(&super::cases::cases());
    }}
}}
"#
    )
}

/// The Filter template's crate docs, imports and default label.
fn filter_head(plugin: &str) -> String {
    format!(
        r#"//! {plugin}: a Berth Filter plugin. Nodes that carry the label named by the `label`
//! arg (default `example.com/drain`) do not take new pods.
//!
//! Enable it in a KubeSchedulerConfiguration:
//!
//! ```yaml
//! profiles:
//! - plugins:
//!     filter:
//!       enabled: [{{name: {plugin}}}]
//!   pluginConfig:
//!   - name: {plugin}
//!     args: {{label: example.com/drain}}
//! berth:
//!   modules:
//!   - name: {plugin}
//!     path: target/wasm32-wasip2/release/<crate>.wasm
//! ```

use berth_sdk::serde_json::Value;
use berth_sdk::{{CycleState, Filter, NodeInfo, Plugin, Pod, Sign, SignFragment, Status}};

/// The label this plugin looks for unless the args name another.
pub const DEFAULT_LABEL: &str = "example.com/drain";
"#
    )
}

/// The Filter template's extension points.
fn filter_body(plugin: &str) -> String {
    format!(
        r#"impl Filter for {plugin} {{
    fn filter(&self, _state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {{
        if node.node.labels.contains_key(&self.label) {{
            // Preempting pods on the node would not help: UnschedulableAndUnresolvable.
            Status::unresolvable(format!("node(s) had label {{}}", self.label))
        }} else {{
            Status::success()
        }}
    }}
}}

"#
    )
}

/// The Score template's crate docs, imports and default label.
fn score_head(plugin: &str) -> String {
    format!(
        r#"//! {plugin}: a Berth Score plugin. Nodes score the number in the label named by
//! the `label` arg (default `example.com/preference`), rescaled so that the highest
//! gets 100; nodes without it score 0.
//!
//! Enable it in a KubeSchedulerConfiguration:
//!
//! ```yaml
//! profiles:
//! - plugins:
//!     score:
//!       enabled: [{{name: {plugin}, weight: 2}}]
//! berth:
//!   modules:
//!   - name: {plugin}
//!     path: target/wasm32-wasip2/release/<crate>.wasm
//! ```

use berth_sdk::helpers::default_normalize_score;
use berth_sdk::serde_json::Value;
use berth_sdk::{{
    CycleState, MAX_NODE_SCORE, NodeInfo, NormalizeScore, Plugin, Pod, Score, Sign, SignFragment,
    Status,
}};

/// The label this plugin reads unless the args name another.
pub const DEFAULT_LABEL: &str = "example.com/preference";
"#
    )
}

/// The Score template's extension points.
fn score_body(plugin: &str) -> String {
    format!(
        r#"impl Score for {plugin} {{
    fn score(&self, _state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {{
        Ok(node
            .node
            .labels
            .get(&self.label)
            .and_then(|v| v.parse::<i64>().ok())
            .map_or(0, |n| n.max(0)))
    }}
}}

impl NormalizeScore for {plugin} {{
    fn normalize_score(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {{
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }}
}}

"#
    )
}

fn cases_rs(point: Point) -> String {
    let body = match point {
        Point::Filter => {
            r#"        Case::new("a node with the label takes no pods")
            .pod(pod("web").cpu(500))
            .node(node("plain").cpu(4000))
            .node(
                node("draining")
                    .cpu(4000)
                    .label("example.com/drain", "true"),
            )
            .feasible(["plain"])
            .rejects(
                "draining",
                Code::UnschedulableAndUnresolvable,
                "node(s) had label example.com/drain",
            ),
        Case::new("the args name the label")
            .args(json!({"label": "example.com/retiring"}))
            .node(node("a").label("example.com/drain", "true"))
            .node(node("b").label("example.com/retiring", "2026-06-01"))
            .feasible(["a"]),"#
        }
        Point::Score => {
            r#"        Case::new("the highest preference wins")
            .pod(pod("web").cpu(500))
            .node(node("low").label("example.com/preference", "1"))
            .node(node("high").label("example.com/preference", "4"))
            .node(node("none"))
            .scores([("high", 100), ("low", 25), ("none", 0)]),
        Case::new("the args name the label")
            .args(json!({"label": "example.com/rank"}))
            .node(node("a").label("example.com/rank", "2"))
            .node(node("b").label("example.com/preference", "9"))
            .scores([("a", 100), ("b", 0)]),"#
        }
    };
    format!(
        r#"//! The plugin's table of cases: `cargo test` runs it natively (src/lib.rs) and
//! through the compiled component (tests/component.rs).

#[allow(unused_imports)]
use berth_sdk::Code;
use berth_sdk::serde_json::json;
use berth_sdk::testing::{{Case, node, pod}};

/// Every case: a pod, the nodes, the args, and what the plugin should answer.
pub fn cases() -> Vec<Case> {{
    vec![
{body}
    ]
}}
"#
    )
}

fn component_rs(plugin: &str, crate_name: &str) -> String {
    let krate = crate_name.replace('-', "_");
    format!(
        r#"//! The table of src/cases.rs through the compiled component: builds this crate for
//! wasm32-wasip2, plays every case with `berth plugin test`, and checks that the
//! component answers exactly what the native code answers. Needs the `berth`
//! command ($BERTH, or on PATH); without it, it says so and checks natively only.

#[path = "../src/cases.rs"]
mod cases;

#[test]
fn native_and_component_agree() {{
    berth_sdk::check_component!({krate}::{plugin}, cases::cases());
}}
"#
    )
}

/// `berth plugin new --lang go`: a Go module for the Go SDK, built with `berth
/// plugin build`. Its go.mod requires the SDK's module, which `berth plugin build`
/// provides (the SDK comes with the binary; the module proxy does not serve it).
pub fn write_go(name: &str, dir: Option<&Path>, point: Point) -> Result<Made, NewError> {
    let (plugin, crate_name) = names(name)?;
    let dir = dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(&crate_name));
    if let Ok(mut entries) = std::fs::read_dir(&dir)
        && entries.next().is_some()
    {
        return Err(NewError::NotEmpty(dir));
    }
    let go_mod = format!(
        "module example.com/{crate_name}\n\ngo 1.26\n\n// Provided by `berth plugin build`, which carries the SDK.\nrequire {} v0.0.0\n",
        berth_go_bindgen::SDK_MODULE
    );
    let main = match point {
        Point::Filter => GO_FILTER,
        Point::Score => GO_SCORE,
    }
    .replace("PLUGIN", &plugin)
    .replace("SDK_MODULE", berth_go_bindgen::SDK_MODULE);
    let files = [
        ("go.mod", go_mod),
        ("main.go", main),
        (".gitignore", "*.wasm\n".to_owned()),
    ];
    for (rel, text) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(&dir).map_err(|error| NewError::CreateDir {
            dir: dir.clone(),
            error,
        })?;
        std::fs::write(&path, text).map_err(|error| NewError::Write { path, error })?;
    }
    Ok(Made {
        plugin,
        crate_name,
        dir,
    })
}

/// main.go of a Go Filter plugin: as the Rust template's, nodes labelled
/// `example.com/drain` (or the `label` arg) take no new pods.
const GO_FILTER: &str = r#"// PLUGIN: a Berth Filter plugin in Go. Nodes that carry the label named by the
// `label` arg (default `example.com/drain`) do not take new pods.
package main

import (
	"encoding/json"

	berth "SDK_MODULE"
)

type Plugin struct {
	label string
}

func (*Plugin) Name() string { return "PLUGIN" }

// Configure reads the args from the profile's pluginConfig.
func (p *Plugin) Configure(args json.RawMessage) error {
	var a struct {
		Label string `json:"label"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return err
	}
	p.label = "example.com/drain"
	if a.Label != "" {
		p.label = a.Label
	}
	return nil
}

func (p *Plugin) Filter(_ *berth.CycleState, _ *berth.Pod, node *berth.NodeInfo) *berth.Status {
	for _, l := range node.Node.Labels {
		if l.F0 == p.label {
			return berth.NewStatus(berth.UnschedulableAndUnresolvable, "node is labelled "+p.label)
		}
	}
	return nil
}

func init() { berth.Register(&Plugin{}) }

// main is not called: the module is a reactor whose exports the scheduler calls.
func main() {}
"#;

/// main.go of a Go Score plugin: nodes with more room for pods score higher.
const GO_SCORE: &str = r#"// PLUGIN: a Berth Score plugin in Go. Nodes with more room for pods (by their
// pod capacity) score higher.
package main

import berth "SDK_MODULE"

type Plugin struct{}

func (*Plugin) Name() string { return "PLUGIN" }

func (*Plugin) Score(_ *berth.CycleState, _ *berth.Pod, node *berth.NodeInfo) (int64, *berth.Status) {
	capacity := node.Node.Allocatable.AllowedPodNumber
	if capacity <= 0 {
		return 0, nil
	}
	free := max(capacity-int64(node.PodCount), 0)
	return free * berth.MaxNodeScore / capacity, nil
}

// ScoreExtensions: the scores are in [0, 100] already.
func (*Plugin) ScoreExtensions() berth.ScoreExtensions { return nil }

func init() { berth.Register(&Plugin{}) }

// main is not called: the module is a reactor whose exports the scheduler calls.
func main() {}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_either_spelling() {
        let n = |s: &str| names(s).unwrap();
        assert_eq!(n("AvoidSpot"), ("AvoidSpot".into(), "avoid-spot".into()));
        assert_eq!(n("avoid-spot"), ("AvoidSpot".into(), "avoid-spot".into()));
        assert_eq!(n("avoid_spot"), ("AvoidSpot".into(), "avoid-spot".into()));
        assert_eq!(n("GPUGuard"), ("GPUGuard".into(), "gpu-guard".into()));
        assert_eq!(n("cost2"), ("Cost2".into(), "cost2".into()));
        let e = names("9lives").unwrap_err().to_string();
        assert!(e.starts_with("plugin name \"9lives\": use letters"), "{e}");
        assert!(names("a b").is_err());
    }

    #[test]
    fn a_go_module_has_the_plugins_name_and_requires_the_sdk() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("m");
        let made = write_go("avoid-drain", Some(&dir), Point::Score).unwrap();
        assert_eq!(made.plugin, "AvoidDrain");
        let go_mod = std::fs::read_to_string(dir.join("go.mod")).unwrap();
        assert!(
            go_mod.contains("module example.com/avoid-drain"),
            "{go_mod}"
        );
        assert!(go_mod.contains(berth_go_bindgen::SDK_MODULE), "{go_mod}");
        let main = std::fs::read_to_string(dir.join("main.go")).unwrap();
        assert!(main.contains("return \"AvoidDrain\""), "{main}");
        assert!(main.contains("func (*Plugin) Score("), "{main}");
        assert!(matches!(
            write_go("avoid-drain", Some(&dir), Point::Filter),
            Err(NewError::NotEmpty(_))
        ));
    }
}
