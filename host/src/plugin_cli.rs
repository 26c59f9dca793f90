//! `berth plugin`: what a plugin author runs. `new` writes a plugin crate (or a Go
//! module), `build` turns a Go plugin directory into a component, `check`
//! loads a module as the scheduler would and says what it is (or exactly why it
//! would be refused), `test` plays the SDK's test cases through a component, `push`
//! checks a module as `check` does and pushes it to an OCI registry.

use crate::framework::PluginCalls;
use crate::testing::{ComponentHarness, HarnessError, ms, trial};
use crate::wasm::abi::{Policy, Support};
use crate::wasm::module::{HostServices, WIT_VERSION};
use crate::wasm::{Runtime, RuntimeError, RuntimeOptions};
use berth_sdk::testing::{Case, MI, Outcome};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

mod template;

pub use template::NewError;

/// Why a `berth plugin` command could not run (a module that is refused is a report,
/// not an error).
#[derive(Debug, thiserror::Error)]
pub enum PluginCliError {
    /// `new`: the crate could not be written.
    #[error(transparent)]
    New(#[from] NewError),
    /// The WebAssembly runtime could not be started.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// `test`: the cases file could not be read.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("{}: cannot read the cases: {error}", .path.display())]
    ReadCases {
        /// The cases file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// `test`: the cases file is not a JSON array of cases.
    #[error(
        "{}: line {} column {}: not an array of cases: {error}",
        .path.display(),
        .error.line(),
        .error.column()
    )]
    ParseCases {
        /// The cases file.
        path: PathBuf,
        /// What the JSON parser said.
        error: serde_json::Error,
    },
    /// `test`: the component could not be loaded.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// The report could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// `push`: the reference is not `oci://REGISTRY/REPOSITORY:TAG`.
    #[error("{0}")]
    Reference(String),
    /// `push`: the module is one the scheduler would refuse (the report says why).
    #[error("{module}: not pushed: the scheduler would refuse it: {why}")]
    Refused {
        /// The module file.
        module: String,
        /// Why.
        why: String,
    },
    /// `push`: the registry refused or could not be reached.
    #[error(transparent)]
    Oci(#[from] crate::oci::OciError),
    /// `build`: the Go plugin could not be built (Go's own messages included).
    #[error("{}: cannot build the plugin: {why}", .dir.display())]
    Build {
        /// The plugin's directory.
        dir: PathBuf,
        /// Why, with the causes.
        why: String,
    },
    /// `build`: the component could not be written.
    #[error("{}: cannot write: {error}", .path.display())]
    WriteModule {
        /// The output file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

/// The one WIT source, read at build time: the plugin world's imports and exports
/// come from it, so this check never drifts from what the host links.
const WIT_SOURCE: &str = include_str!("../../wit/scheduler.wit");

/// `berth plugin` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum PluginCommand {
    /// Write a new plugin crate: Cargo.toml, src/lib.rs with one extension point,
    /// a table of test cases run natively and through the component (with `--lang
    /// go`, a Go module for the Go SDK instead).
    New(NewArgs),
    /// Build a Go plugin (a directory with a go.mod that uses the Go SDK) into a
    /// component with the machine's Go: the SDK and its bindings to the WIT package
    /// come with this binary.
    Build(BuildArgs),
    /// Load a module as the scheduler would and report what it is, or exactly why
    /// it would be refused.
    Check(CheckArgs),
    /// Play test cases (JSON, as `berth_sdk::testing::Case` serializes them)
    /// through a component.
    Test(TestArgs),
    /// Check a module as `check` does, then push it to an OCI registry as a wasm
    /// artifact (one `application/wasm` layer); prints the manifest digest
    /// (`sha256:...`), what `oci://...:TAG@sha256:...` pins.
    Push(PushArgs),
}

/// Arguments of `berth plugin push`.
#[derive(clap::Args, Debug)]
pub struct PushArgs {
    /// The component file.
    pub module: PathBuf,
    /// Where to push it: `oci://REGISTRY/REPOSITORY:TAG`.
    pub reference: String,
    /// A docker config file with the registry's credentials (`auths`); default
    /// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, when it exists.
    #[arg(long)]
    pub docker_config: Option<PathBuf>,
    /// Reach the registry over plain HTTP (a registry on loopback, say).
    #[arg(long)]
    pub plain_http: bool,
    /// The plugin's args for the check's trial call, as JSON (default `{}`).
    #[arg(long, default_value = "{}")]
    pub args: String,
}

/// Arguments of `berth plugin new`.
#[derive(clap::Args, Debug)]
pub struct NewArgs {
    /// The plugin's name, as profiles name it (`AvoidSpot`) or as a crate name
    /// (`avoid-spot`).
    pub name: String,
    /// The directory to create (default: the crate name, in the current directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The extension point the plugin starts with.
    #[arg(long, value_enum, default_value_t = Point::Filter)]
    pub point: Point,
    /// Depend on the SDK at this path (default: the SDK this berth was built from,
    /// when it is still there; otherwise by version).
    #[arg(long)]
    pub sdk_path: Option<PathBuf>,
    /// The plugin's language: a Rust crate, or a Go module built with `berth
    /// plugin build`.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
}

/// The language `berth plugin new` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A crate that uses the Rust SDK.
    Rust,
    /// A Go module that uses the Go SDK.
    Go,
}

/// Arguments of `berth plugin build`.
#[derive(clap::Args, Debug)]
pub struct BuildArgs {
    /// The plugin's directory (a Go module).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The component file to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// The Go command.
    #[arg(long, default_value = "go")]
    pub go: PathBuf,
}

/// The extension point `berth plugin new` implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Point {
    /// Filter (with a PreFilter-free table of cases).
    Filter,
    /// Score and NormalizeScore.
    Score,
}

/// Arguments of `berth plugin check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// The component file.
    pub module: PathBuf,
    /// The plugin's args for the trial call, as JSON (default `{}`).
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// Arguments of `berth plugin test`.
#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// The component file.
    pub module: PathBuf,
    /// A JSON file with an array of cases.
    #[arg(long)]
    pub cases: PathBuf,
    /// Output format: text, or the outcome of every case as JSON.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people.
    Text,
    /// For programs.
    Json,
}

/// Runs a `berth plugin` command; the exit code says whether it succeeded.
pub fn run(cmd: PluginCommand) -> Result<std::process::ExitCode, PluginCliError> {
    use std::process::ExitCode;
    match cmd {
        PluginCommand::New(args) if args.lang == Lang::Go => {
            let made = template::write_go(&args.name, args.dir.as_deref(), args.point)?;
            let wasm = format!("{}.wasm", made.crate_name.replace('-', "_"));
            println!(
                "created plugin {} (Go module {}) in {}",
                made.plugin,
                made.crate_name,
                made.dir.display()
            );
            println!("next:");
            println!("  cd {}", made.dir.display());
            println!("  berth plugin build . -o {wasm}");
            println!("  berth plugin check {wasm}");
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Build(args) => {
            let bytes = build_go(&args.dir, &args.go)?;
            std::fs::write(&args.output, &bytes).map_err(|error| PluginCliError::WriteModule {
                path: args.output.clone(),
                error,
            })?;
            println!("built {} ({} bytes)", args.output.display(), bytes.len());
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::New(args) => {
            let sdk = args.sdk_path.clone().or_else(built_sdk_path);
            let made = template::write(&args.name, args.dir.as_deref(), args.point, sdk)?;
            println!(
                "created plugin {} (crate {}) in {}",
                made.plugin,
                made.crate_name,
                made.dir.display()
            );
            println!("next:");
            println!("  cd {}", made.dir.display());
            println!(
                "  BERTH=$(command -v berth) cargo test         # the cases, natively and as a component"
            );
            println!("  cargo build --target wasm32-wasip2 --release");
            println!(
                "  berth plugin check target/wasm32-wasip2/release/{}.wasm",
                made.crate_name.replace('-', "_")
            );
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Check(args) => {
            let runtime = Runtime::new(RuntimeOptions::default())?;
            let report = check(&runtime, &args.module, &args.args);
            match args.output {
                Format::Text => print!("{}", report.to_text()),
                Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
            }
            Ok(if report.refused.is_none() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        PluginCommand::Push(args) => {
            let pushed = push(&args)?;
            println!("{}", pushed.digest);
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Test(args) => {
            let text = std::fs::read_to_string(&args.cases).map_err(|error| {
                PluginCliError::ReadCases {
                    path: args.cases.clone(),
                    error,
                }
            })?;
            let cases: Vec<Case> =
                serde_json::from_str(&text).map_err(|error| PluginCliError::ParseCases {
                    path: args.cases.clone(),
                    error,
                })?;
            let harness = ComponentHarness::load(&args.module)?;
            let results = test_cases(&harness, &cases);
            let failed = results.iter().filter(|r| r.failure.is_some()).count();
            match args.output {
                Format::Json => println!("{}", serde_json::to_string_pretty(&results)?),
                Format::Text => {
                    for r in &results {
                        match &r.failure {
                            None => println!("ok    {}", r.name),
                            Some(f) => println!("FAIL  {}\n  {}", r.name, f.replace('\n', "\n  ")),
                        }
                    }
                    println!("{} passed, {} failed", results.len() - failed, failed);
                }
            }
            Ok(if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// The docker config `berth plugin push` reads when `--docker-config` is not given:
/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, when it exists.
fn default_docker_config() -> Option<PathBuf> {
    let file = match std::env::var_os("DOCKER_CONFIG") {
        Some(d) => PathBuf::from(d).join("config.json"),
        None => PathBuf::from(std::env::var_os("HOME")?)
            .join(".docker")
            .join("config.json"),
    };
    file.is_file().then_some(file)
}

/// `berth plugin push`: checks the module as `berth plugin check` does (a module the
/// scheduler would refuse is not pushed), then pushes it; says what it pushed on
/// stderr.
pub fn push(args: &PushArgs) -> Result<crate::oci::Pushed, PluginCliError> {
    let target = crate::oci::OciRef::parse(&args.reference).map_err(PluginCliError::Reference)?;
    if target.digest().is_some() {
        return Err(PluginCliError::Reference(format!(
            "{target}: a push names a tag, not a digest (the digest is what the push makes)"
        )));
    }
    let runtime = Runtime::new(RuntimeOptions::default())?;
    let report = check(&runtime, &args.module, &args.args);
    if let Some(why) = report.refused {
        return Err(PluginCliError::Refused {
            module: args.module.display().to_string(),
            why,
        });
    }
    let bytes = std::fs::read(&args.module).map_err(|error| crate::oci::OciError::Read {
        path: args.module.display().to_string(),
        error,
    })?;
    let mut annotations = std::collections::BTreeMap::new();
    if let Some(name) = &report.name {
        annotations.insert("org.opencontainers.image.title".to_owned(), name.clone());
    }
    if let Some(version) = &report.version {
        annotations.insert(
            "org.opencontainers.image.version".to_owned(),
            version.clone(),
        );
    }
    let access = crate::oci::Access {
        docker_config: args.docker_config.clone().or_else(default_docker_config),
        plain_http: if args.plain_http {
            vec![target.registry().to_owned()]
        } else {
            Vec::new()
        },
    };
    let info = crate::oci::PushInfo {
        imports: report.imports.clone(),
        exports: report.exports.clone(),
        annotations,
    };
    let pushed = crate::oci::push(&bytes, &target, &access, &info)?;
    eprintln!(
        "pushed plugin {} {}({} bytes, component {}) to {target}
pin it as {}",
        report.name.as_deref().unwrap_or("?"),
        report
            .version
            .as_deref()
            .map(|v| format!("{v} "))
            .unwrap_or_default(),
        pushed.size,
        pushed.layer_digest,
        target.pinned(&pushed.digest),
    );
    Ok(pushed)
}

/// `berth plugin build`: the Go plugin in `dir` as a component of this host's WIT.
pub fn build_go(dir: &Path, go: &Path) -> Result<Vec<u8>, PluginCliError> {
    let opts = berth_go_bindgen::GoBuild {
        go: go.to_path_buf(),
        wit: WIT_SOURCE.to_owned(),
    };
    berth_go_bindgen::build(dir, &opts).map_err(|e| PluginCliError::Build {
        dir: dir.to_path_buf(),
        why: format!("{e:#}"),
    })
}

/// The SDK next to the sources this binary was built from, if it is still there.
fn built_sdk_path() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    p.join("Cargo.toml")
        .exists()
        .then(|| p.canonicalize().ok())
        .flatten()
}

/// What one case of `berth plugin test` gave.
#[derive(Debug, Serialize)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// What the component answered (none when the run itself failed).
    pub outcome: Option<Outcome>,
    /// Why the case failed; none when it passed.
    pub failure: Option<String>,
}

/// Plays every case through the component and checks it.
pub fn test_cases(harness: &ComponentHarness, cases: &[Case]) -> Vec<CaseResult> {
    cases
        .iter()
        .map(|case| match harness.run(case) {
            Ok(outcome) => CaseResult {
                name: case.name.clone(),
                failure: case.check(&outcome).err(),
                outcome: Some(outcome),
            },
            Err(e) => CaseResult {
                name: case.name.clone(),
                outcome: None,
                failure: Some(format!("{e:#}")),
            },
        })
        .collect()
}

/// What `berth plugin check` found.
#[derive(Debug, Default, Serialize)]
pub struct CheckReport {
    /// The file.
    pub module: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// The sha256 of its bytes (what `berth.modules[].sha256` pins).
    pub sha256: String,
    /// What kind of WebAssembly it is: `component`, `core module`, or why it is
    /// neither.
    pub kind: String,
    /// The plugin's name, from its metadata.
    pub name: Option<String>,
    /// The plugin crate's version (the SDK records it in a custom section).
    pub version: Option<String>,
    /// The version of `berth:scheduler` the module's interfaces carry.
    pub wit_version: Option<String>,
    /// Where that version stands with this host: `current`, `supported` (an older
    /// patch of the host's track, or an earlier track it adapts) or `refused`.
    pub wit_status: Option<String>,
    /// What `wit_status` means for this module (none when current).
    pub wit_detail: Option<String>,
    /// The WIT version this host speaks.
    pub host_wit_version: String,
    /// The WIT versions this host loads, e.g. `@0.7.0 to @0.7.2`.
    pub host_wit_range: String,
    /// The toolchains that produced it (the `producers` sections).
    pub producers: Vec<String>,
    /// The extension points it says it implements, as profiles name them.
    pub extension_points: Vec<String>,
    /// Whether its node replica receives the pods of each node.
    pub wants_pods: Option<bool>,
    /// The pod features it needs to take part in a pod's cycles, configured with the
    /// args given (empty: every pod).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub only_for_pods_with: Vec<String>,
    /// The interfaces it imports.
    pub imports: Vec<String>,
    /// The interfaces it exports.
    pub exports: Vec<String>,
    /// Milliseconds to compile, link and read its metadata.
    pub compile_ms: Option<f64>,
    /// The trial calls on a built-in pod and node, one line each.
    pub trial: Vec<String>,
    /// Why the scheduler would refuse it; none when it would load it.
    pub refused: Option<String>,
}

impl CheckReport {
    /// The report for people.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
        let _ = writeln!(s, "module            {}", self.module);
        let _ = writeln!(
            s,
            "size              {} bytes ({:.1} MiB)",
            self.size_bytes,
            self.size_bytes as f64 / MI as f64
        );
        if !self.sha256.is_empty() {
            let _ = writeln!(s, "sha256            {}", self.sha256);
        }
        let _ = writeln!(s, "kind              {}", self.kind);
        let _ = writeln!(s, "plugin            {}", opt(&self.name));
        let _ = writeln!(
            s,
            "version           {}",
            self.version
                .clone()
                .unwrap_or_else(|| "not recorded (no berth:plugin-version section)".into())
        );
        // The host's range is named when it is more than its own version.
        let host = if self.host_wit_range == format!("@{}", self.host_wit_version) {
            format!("this host speaks @{}", self.host_wit_version)
        } else {
            format!(
                "this host speaks @{} and loads {}",
                self.host_wit_version, self.host_wit_range
            )
        };
        let standing = match (&self.wit_status, &self.wit_detail) {
            (Some(status), Some(detail)) => format!("{status}: {detail}; "),
            (Some(status), None) => format!("{status}; "),
            (None, _) => String::new(),
        };
        let _ = writeln!(
            s,
            "WIT               {} ({standing}{host})",
            self.wit_version
                .as_ref()
                .map(|v| format!("berth:scheduler@{v}"))
                .unwrap_or_else(|| "-".into()),
        );
        if !self.producers.is_empty() {
            let _ = writeln!(s, "built with        {}", self.producers.join(", "));
        }
        if !self.extension_points.is_empty() {
            let _ = writeln!(s, "extension points  {}", self.extension_points.join(", "));
        }
        if let Some(w) = self.wants_pods {
            let _ = writeln!(s, "wants pods        {}", if w { "yes" } else { "no" });
        }
        if !self.only_for_pods_with.is_empty() {
            let _ = writeln!(
                s,
                "takes part for    pods with {}",
                self.only_for_pods_with.join(", ")
            );
        }
        let _ = writeln!(s, "imports           {}", list(&self.imports));
        let _ = writeln!(s, "exports           {}", list(&self.exports));
        if let Some(ms) = self.compile_ms {
            let _ = writeln!(
                s,
                "compile           {ms:.1} ms (compile, link, read metadata)"
            );
        }
        for (i, t) in self.trial.iter().enumerate() {
            let label = if i == 0 { "trial" } else { "" };
            let _ = writeln!(s, "{label:<18}{t}");
        }
        match &self.refused {
            None => {
                let _ = writeln!(s, "ok: the scheduler would load this module");
            }
            Some(why) => {
                let _ = writeln!(s, "refused: {why}");
            }
        }
        s
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".into()
    } else {
        items.join("\n                  ")
    }
}

/// The interfaces of the plugin world every module has, as
/// `berth:scheduler/NAME@VERSION`, from the WIT source: (package version, imports,
/// exports). Items added on the track (gated `@since` or `@unstable`: new extension
/// points, unstable types) are optional and not listed.
fn plugin_world() -> (String, Vec<String>, Vec<String>) {
    let mut version = String::new();
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut in_world = false;
    let mut gated = false;
    for line in WIT_SOURCE.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("package berth:scheduler@") {
            version = rest.trim_end_matches(';').to_owned();
        } else if line.starts_with("world scheduler-plugin") {
            in_world = true;
        } else if in_world && line.starts_with('}') {
            in_world = false;
        } else if in_world && line.starts_with('@') {
            gated = true;
        } else if in_world && std::mem::take(&mut gated) {
            // An optional item of the world.
        } else if in_world {
            let named = |rest: &str| {
                format!(
                    "berth:scheduler/{}@{version}",
                    rest.trim_end_matches(';').trim()
                )
            };
            if let Some(rest) = line.strip_prefix("import ") {
                imports.push(named(rest));
            } else if let Some(rest) = line.strip_prefix("export ") {
                exports.push(named(rest));
            }
        }
    }
    (version, imports, exports)
}

/// What the binary says of itself, read without compiling it.
#[derive(Debug, Default)]
struct Anatomy {
    imports: Vec<String>,
    exports: Vec<String>,
    version: Option<String>,
    producers: Producers,
}

/// The tools of the producers sections, each once with its versions: the core
/// module and the component each have a section, and both name `wit-component`.
#[derive(Debug, Default)]
struct Producers(Vec<(String, Vec<String>)>);

impl Producers {
    /// Adds a tool and (when not empty) a version it was not listed with.
    fn add(&mut self, name: &str, version: &str) {
        let version = version.trim();
        let at = match self.0.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                self.0.push((name.to_owned(), Vec::new()));
                self.0.len() - 1
            }
        };
        let versions = &mut self.0[at].1;
        if !version.is_empty() && !versions.iter().any(|v| v == version) {
            versions.push(version.to_owned());
        }
    }

    /// Each tool as the report prints it: `wit-component 0.244.0 and 0.245.1`.
    fn render(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(name, versions)| match versions.as_slice() {
                [] => name.clone(),
                _ => format!("{name} {}", versions.join(" and ")),
            })
            .collect()
    }
}

/// Reads the top-level imports and exports of a component, its producers and the
/// SDK's version section (which sits in a nested core module).
fn anatomy(bytes: &[u8]) -> Result<Anatomy, String> {
    use wasmparser::{Parser, Payload};
    let mut a = Anatomy::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| e.to_string())?;
        match payload {
            Payload::Version { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    let import = import.map_err(|e| e.to_string())?;
                    a.imports.push(import.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    let export = export.map_err(|e| e.to_string())?;
                    a.exports.push(export.name.name.to_owned());
                }
            }
            Payload::CustomSection(c) => {
                if c.name() == berth_sdk::VERSION_SECTION {
                    a.version = Some(String::from_utf8_lossy(c.data()).into_owned());
                } else if c.name() == "producers"
                    && let Ok(reader) = wasmparser::ProducersSectionReader::new(
                        wasmparser::BinaryReader::new(c.data(), c.data_offset()),
                    )
                {
                    for field in reader.into_iter().flatten() {
                        if !matches!(field.name, "language" | "processed-by") {
                            continue;
                        }
                        for v in field.values.into_iter().flatten() {
                            a.producers.add(v.name, v.version);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(a)
}

/// The version of `berth:scheduler` an interface name carries.
fn berth_version(name: &str) -> Option<&str> {
    name.strip_prefix("berth:scheduler/")?
        .split_once('@')
        .map(|(_, v)| v)
}

/// The versions of `berth:scheduler` a component's names carry.
fn berth_versions(a: &Anatomy) -> impl Iterator<Item = &str> {
    a.exports
        .iter()
        .chain(&a.imports)
        .filter_map(|n| berth_version(n))
}

/// An interface name without its version.
fn unversioned(name: &str) -> &str {
    name.split_once('@').map_or(name, |(n, _)| n)
}

/// Why a component that did not load would be refused, in the author's terms.
fn diagnose(a: &Anatomy, policy: &Policy, want_exports: &[String]) -> Option<String> {
    match policy.judge(berth_versions(a)) {
        Some((v, Support::Refused(why))) => {
            return Some(format!(
                "{}: {}",
                policy.refusal(&v, why),
                policy.advice(&v, why)
            ));
        }
        Some((v, Support::Adapted { track })) => {
            return Some(format!(
                "built against berth:scheduler@{v}, of the {track} track, which this host lists as adapted but has no adapter for"
            ));
        }
        Some((_, Support::Current | Support::OlderPatch)) | None => {}
    }
    // Compared without versions: a module of an older patch names them with its own.
    let theirs: Vec<&str> = a.exports.iter().map(|e| unversioned(e)).collect();
    let wit_version = policy.host();
    let missing: Vec<&String> = want_exports
        .iter()
        .filter(|e| !theirs.contains(&unversioned(e)))
        .collect();
    if missing.len() == want_exports.len() {
        let command = a.exports.iter().any(|e| e.starts_with("wasi:cli/run@"));
        return Some(if command {
            "a command component (it exports wasi:cli/run), not a plugin: build a library crate (`crate-type = [\"cdylib\"]`) that calls berth_sdk::export_plugin!".to_owned()
        } else {
            format!(
                "exports none of the berth:scheduler@{wit_version} plugin world's interfaces: it was not built against the plugin world"
            )
        });
    }
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        return Some(format!(
            "missing export{} {} (the plugin world needs all {}; the SDK exports them all)",
            if names.len() == 1 { "" } else { "s" },
            names.join(", "),
            want_exports.len()
        ));
    }
    None
}

/// Checks a module as the scheduler would load it. Never fails: what goes wrong is
/// the report's `refused`.
pub fn check(runtime: &Arc<Runtime>, path: &Path, args_json: &str) -> CheckReport {
    let (wit_version, _, want_exports) = plugin_world();
    debug_assert_eq!(wit_version, WIT_VERSION);
    let policy = Policy::current();
    let mut r = CheckReport {
        module: path.display().to_string(),
        host_wit_version: WIT_VERSION.to_owned(),
        host_wit_range: policy.supported_range(),
        ..CheckReport::default()
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            r.kind = "unreadable".into();
            r.refused = Some(format!(
                "{}: cannot read plugin module: {e}",
                path.display()
            ));
            return r;
        }
    };
    r.size_bytes = bytes.len() as u64;
    {
        use sha2::Digest;
        r.sha256 = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
    }
    // The preamble: magic, then a version and a layer (0 core module, 1 component).
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        r.kind = "not WebAssembly".into();
        r.refused = Some(format!(
            "{}: not a WebAssembly file (it does not start with \\0asm)",
            path.display()
        ));
        return r;
    }
    if bytes[6..8] == [0, 0] {
        r.kind = "core module".into();
        r.refused = Some(format!(
            "{}: a core WebAssembly module, not a component: build the plugin for wasm32-wasip2 (`cargo build --target wasm32-wasip2 --release`), which makes a component; a module for wasm32-unknown-unknown or wasm32-wasip1 needs `wasm-tools component new` first",
            path.display()
        ));
        return r;
    }
    r.kind = "component".into();
    let a = match anatomy(&bytes) {
        Ok(a) => a,
        Err(e) => {
            r.refused = Some(format!(
                "{}: not a valid WebAssembly component: {e}",
                path.display()
            ));
            return r;
        }
    };
    r.imports = a.imports.clone();
    r.exports = a.exports.clone();
    r.version = a.version.clone();
    r.producers = a.producers.render();
    if let Some((v, support)) = policy.judge(berth_versions(&a)) {
        r.wit_version = Some(v);
        r.wit_status = Some(support.status().to_owned());
        r.wit_detail = policy.explain(&support);
    }

    let started = Instant::now();
    let loaded = runtime.load(&path.display().to_string(), &bytes);
    r.compile_ms = Some(ms(started.elapsed()));
    let module = match loaded {
        Ok(m) => m,
        Err(e) => {
            r.refused = Some(match diagnose(&a, &policy, &want_exports) {
                Some(why) => format!("{}: {why} ({e})", path.display()),
                None => e.to_string(),
            });
            return r;
        }
    };
    r.name = Some(module.name().to_owned());
    r.wants_pods = Some(module.wants_pods());
    // Configured with the args given, as the scheduler would; args it refuses are
    // reported by the trial.
    if let Ok(inst) = module.instantiate(args_json, HostServices::default()) {
        r.only_for_pods_with = inst
            .only_for_pods_with()
            .iter()
            .map(|f| f.as_str().to_owned())
            .collect();
    }
    r.extension_points = module
        .extension_points()
        .iter()
        .map(|p| p.as_str().to_owned())
        .collect();
    if let Err(e) = trial(&module, args_json, &mut r.trial) {
        r.refused = Some(e);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_named_twice_is_listed_once_with_its_versions() {
        let mut p = Producers::default();
        p.add("Rust", "");
        p.add("wit-component", "0.244.0");
        p.add("wit-bindgen-rust", "0.45.0");
        p.add("wit-component", "0.245.1");
        p.add("wit-component", "0.244.0");
        p.add("Rust", "");
        // A name that begins another's is a tool of its own.
        p.add("wit", "1.0");
        assert_eq!(
            p.render(),
            [
                "Rust",
                "wit-component 0.244.0 and 0.245.1",
                "wit-bindgen-rust 0.45.0",
                "wit 1.0"
            ]
        );
    }

    #[test]
    fn the_plugin_world_is_read_from_the_wit_source() {
        let (version, imports, exports) = plugin_world();
        assert_eq!(version, WIT_VERSION);
        assert_eq!(
            imports,
            [
                format!("berth:scheduler/host@{WIT_VERSION}"),
                format!("berth:scheduler/dra@{WIT_VERSION}")
            ]
        );
        for e in ["plugin", "replica", "cycle", "filter", "score", "post-bind"] {
            assert!(
                exports.contains(&format!("berth:scheduler/{e}@{WIT_VERSION}")),
                "{e}: {exports:?}"
            );
        }
        // The 0.7.0 exports, all required; the optional ones (PlacementScore's) are not.
        assert_eq!(exports.len(), 17, "{exports:?}");
        assert!(
            !exports.iter().any(|e| e.contains("placement-score")),
            "{exports:?}"
        );
    }

    #[test]
    fn diagnoses_name_the_version_the_missing_exports_or_a_command() {
        let (v, _, want) = plugin_world();
        let policy = Policy::current();
        let old = Anatomy {
            exports: vec!["berth:scheduler/plugin@0.1.0".into()],
            ..Anatomy::default()
        };
        // When it loads more than its own version, the host also says what.
        let loads = match policy.supported_range() {
            range if range == format!("@{v}") => String::new(),
            range => format!(" (it loads {range})"),
        };
        assert_eq!(
            diagnose(&old, &policy, &want).unwrap(),
            format!(
                "built against berth:scheduler@0.1.0, this host speaks @{v}{loads}: rebuild it with a berth-sdk for WIT {v}"
            )
        );
        let mut most = Anatomy {
            exports: want.clone(),
            ..Anatomy::default()
        };
        most.exports.retain(|e| !e.contains("/score@"));
        assert_eq!(
            diagnose(&most, &policy, &want).unwrap(),
            format!(
                "missing export berth:scheduler/score@{v} (the plugin world needs all {}; the SDK exports them all)",
                want.len()
            )
        );
        let command = Anatomy {
            exports: vec!["wasi:cli/run@0.2.6".into()],
            ..Anatomy::default()
        };
        assert!(
            diagnose(&command, &policy, &want)
                .unwrap()
                .starts_with("a command component")
        );
        let fine = Anatomy {
            exports: want.clone(),
            ..Anatomy::default()
        };
        assert_eq!(diagnose(&fine, &policy, &want), None);
    }
}
