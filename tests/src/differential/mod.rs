//! Differential conformance: generated clusters, explained by Berth (in wasm and
//! natively) and by upstream kube-scheduler 1.37.2's own plugins (the Go oracle in
//! `tests/oracle/`), compared plugin by plugin and node by node; a divergence is
//! shrunk to a small cluster file that `berth explain` and the oracle both run.

pub mod compare;
pub mod generate;

use berth::simulate::{SimulateOptions, explain, simulate};
use berth::wasm::Runtime;
use compare::{CycleOutcome, Divergence, Explained};
use generate::Case;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;

/// The oracle's program: `BERTH_ORACLE_BIN`, else built (once, cached) by
/// `tests/oracle/build.sh`.
pub fn oracle_bin() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("BERTH_ORACLE_BIN") {
        return Ok(PathBuf::from(p));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("oracle/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}); the oracle needs Go 1.26 and the Go module proxy",
            script.display(),
            out.status
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// The oracle, started once and fed one case per line (`berth-oracle serve`).
pub struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Oracle {
    /// Starts `bin serve`.
    pub fn start(bin: &Path) -> Result<Oracle, String> {
        let mut child = Command::new(bin)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Oracle {
            child,
            stdin,
            stdout,
        })
    }

    /// The oracle's explanation of `pod` in the cluster file `file`.
    pub fn explain(&mut self, file: &Path, pod: &str) -> Result<Value, String> {
        let req = json!({"files": [file], "pod": pod});
        writeln!(self.stdin, "{req}").map_err(|e| format!("oracle: {e}"))?;
        self.stdin.flush().map_err(|e| format!("oracle: {e}"))?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| format!("oracle: {e}"))?;
        if line.is_empty() {
            return Err("oracle: exited".into());
        }
        let v: Value = serde_json::from_str(&line).map_err(|e| format!("oracle: {e}: {line}"))?;
        match v.get("error").and_then(Value::as_str) {
            Some(e) => Err(format!("oracle: {e}")),
            None => Ok(v),
        }
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs cases through Berth and the oracle.
pub struct Differential {
    runtime: Arc<Runtime>,
    oracle: Oracle,
    dir: tempfile::TempDir,
    /// Also explain with the native twins, which must answer as the wasm plugins do.
    pub native: bool,
    /// Keep every case's file in this directory (else they are removed once run).
    pub keep: Option<PathBuf>,
    /// Print each divergence the book's differences page explains (to standard
    /// error), with its case.
    pub show_explained: bool,
    /// What the oracle made of the cases so far.
    pub shapes: Shapes,
}

/// What the cases were, as the oracle saw them: so that a clean run says what it
/// covered.
#[derive(Clone, Debug, Default)]
pub struct Shapes {
    /// The pod fits some node.
    pub fits: u64,
    /// It fits none, and preemption nominates a node.
    pub preempts: u64,
    /// It fits none, and preemption cannot help.
    pub fits_nowhere: u64,
    /// Filter verdicts compared (plugin × node).
    pub filter_verdicts: u64,
    /// Normalized scores compared (plugin × feasible node).
    pub scores: u64,
}

impl std::fmt::Display for Shapes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} fit somewhere, {} preempt, {} fit nowhere; {} filter verdicts and {} scores compared",
            self.fits, self.preempts, self.fits_nowhere, self.filter_verdicts, self.scores
        )
    }
}

/// What one case came to.
#[derive(Debug)]
pub enum Verdict {
    /// Berth and the oracle agree, but where the book's differences page explains
    /// they do not.
    Agree(Vec<&'static Explained>),
    /// They do not.
    Diverge(Vec<Divergence>),
    /// One side could not run the case (a generator bug, or an input one side
    /// refuses): reported, never counted as agreement.
    Error(String),
}

impl Differential {
    /// Starts the oracle `bin`.
    pub fn new(runtime: Arc<Runtime>, bin: &Path) -> Result<Self, String> {
        Ok(Differential {
            runtime,
            oracle: Oracle::start(bin)?,
            dir: tempfile::tempdir().map_err(|e| e.to_string())?,
            native: true,
            show_explained: false,
            keep: None,
            shapes: Shapes::default(),
        })
    }

    fn options(&self, file: &Path, native: bool) -> SimulateOptions {
        let mut o = SimulateOptions {
            files: vec![file.to_owned()],
            config: None,
            cluster: None,
            scheduler: Default::default(),
        };
        o.scheduler.framework.native = native;
        o
    }

    /// Berth's explanation, as JSON.
    pub fn berth_explain(&self, file: &Path, pod: &str, native: bool) -> Result<Value, String> {
        let e = explain(&self.runtime, &self.options(file, native), pod)
            .map_err(|e| format!("berth explain: {e}"))?;
        serde_json::to_value(&e).map_err(|e| e.to_string())
    }

    /// What Berth's cycle did with the pod.
    pub fn berth_cycle(&self, file: &Path, pod: &str) -> Result<CycleOutcome, String> {
        let report = simulate(&self.runtime, &self.options(file, false))
            .map_err(|e| format!("berth simulate: {e}"))?;
        let p = report
            .pods
            .iter()
            .find(|p| format!("{}/{}", p.namespace, p.name) == pod)
            .ok_or_else(|| format!("berth simulate: no report of {pod}"))?;
        Ok(CycleOutcome {
            node: p.node.clone(),
            message: p.message.clone(),
        })
    }

    /// Writes `case` to a file in this run's directory.
    pub fn write(&self, case: &Case) -> PathBuf {
        let dir = match &self.keep {
            Some(d) => d.as_path(),
            None => self.dir.path(),
        };
        let path = dir.join(format!("case-{}.yaml", case.seed));
        std::fs::write(&path, case.to_file_text()).expect("write case");
        path
    }

    /// Runs one case.
    pub fn check(&mut self, case: &Case) -> Verdict {
        let file = self.write(case);
        let pod = case
            .docs
            .iter()
            .find(|d| d["kind"] == "Pod" && generate::key_of(d) == case.pod)
            .cloned()
            .unwrap_or_default();
        let verdict = self.check_file(&file, &case.pod, &pod);
        if self.keep.is_none() {
            let _ = std::fs::remove_file(&file);
        }
        verdict
    }

    fn check_file(&mut self, file: &Path, pod: &str, manifest: &Value) -> Verdict {
        let oracle = match self.oracle.explain(file, pod) {
            Ok(v) => v,
            Err(e) => return Verdict::Error(e),
        };
        let wasm = match self.berth_explain(file, pod, false) {
            Ok(v) => v,
            Err(e) => return Verdict::Error(e),
        };
        let nodes = oracle["nodes"].as_array().map_or(&[][..], Vec::as_slice);
        self.shapes.filter_verdicts += nodes
            .iter()
            .map(|n| n["filters"].as_array().map_or(0, Vec::len) as u64)
            .sum::<u64>();
        self.shapes.scores += nodes
            .iter()
            .map(|n| n["scores"].as_array().map_or(0, Vec::len) as u64)
            .sum::<u64>();
        if nodes.iter().any(|n| n["feasible"] == true) {
            self.shapes.fits += 1;
        } else if oracle["post_filter"]["nominated_node"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
        {
            self.shapes.preempts += 1;
        } else {
            self.shapes.fits_nowhere += 1;
        }
        let mut out = compare::explanations(&wasm, &oracle, manifest);
        if self.native {
            match self.berth_explain(file, pod, true) {
                Ok(native) => {
                    for mut d in compare::explanations(&native, &oracle, manifest) {
                        if !out.iter().any(|o| o.what == d.what) {
                            d.what = format!("native {}", d.what);
                            out.push(d);
                        }
                    }
                }
                Err(e) => return Verdict::Error(format!("native: {e}")),
            }
        }
        // A best node moved by a score the book explains is explained with it.
        let scores_explained = match out.iter().find(|d| d.explained.is_none()) {
            None => out.iter().find_map(|d| d.explained),
            Some(_) => None,
        };
        match self.berth_cycle(file, pod) {
            Ok(outcome) => out.extend(compare::cycle(&outcome, &oracle, scores_explained)),
            Err(e) => return Verdict::Error(e),
        }
        let (explained, unexplained): (Vec<Divergence>, Vec<Divergence>) =
            out.into_iter().partition(|d| d.explained.is_some());
        if self.show_explained {
            for d in &explained {
                eprintln!(
                    "{}: explained ({}): {d}",
                    file.display(),
                    d.explained.map_or("", |e| e.id)
                );
            }
        }
        if unexplained.is_empty() {
            let mut ids: Vec<&'static Explained> =
                explained.iter().filter_map(|d| d.explained).collect();
            ids.dedup_by_key(|e| e.id);
            Verdict::Agree(ids)
        } else {
            Verdict::Diverge(unexplained)
        }
    }

    /// Shrinks a diverging case: removes documents, list items and fields one at a
    /// time while the divergence named `what` remains (and both sides still run).
    pub fn shrink(&mut self, case: &Case, what: &str) -> Case {
        let mut best = case.clone();
        let mut progress = true;
        while progress {
            progress = false;
            let mut paths = Vec::new();
            for (i, d) in best.docs.iter().enumerate() {
                paths.push(vec![Step::Index(i)]);
                removable_paths(d, &mut vec![Step::Index(i)], &mut paths);
            }
            for path in paths {
                let Some(candidate) = remove_at(&best, &path) else {
                    continue;
                };
                if self.still_diverges(&candidate, what) {
                    best = candidate;
                    progress = true;
                    break;
                }
            }
        }
        best
    }

    fn still_diverges(&mut self, case: &Case, what: &str) -> bool {
        match self.check(case) {
            Verdict::Diverge(ds) => ds.iter().any(|d| d.what == what),
            _ => false,
        }
    }
}

#[derive(Clone, Debug)]
enum Step {
    Index(usize),
    Key(String),
}

/// Fields whose removal would make a manifest mean nothing.
fn kept(key: &str, depth: usize) -> bool {
    matches!(key, "apiVersion" | "kind") && depth == 1
        || matches!(key, "metadata" | "name" | "namespace" | "uid")
}

fn removable_paths(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                if kept(k, at.len()) {
                    if k == "metadata" {
                        at.push(Step::Key(k.clone()));
                        removable_paths(child, at, out);
                        at.pop();
                    }
                    continue;
                }
                at.push(Step::Key(k.clone()));
                out.push(at.clone());
                removable_paths(child, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                at.push(Step::Index(i));
                out.push(at.clone());
                removable_paths(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn remove_at(case: &Case, path: &[Step]) -> Option<Case> {
    let mut c = case.clone();
    let Some((Step::Index(doc), rest)) = path.split_first() else {
        return None;
    };
    if rest.is_empty() {
        // Never the pod explained.
        let d = &c.docs[*doc];
        if d["kind"] == "Pod" && generate::key_of(d) == c.pod {
            return None;
        }
        c.docs.remove(*doc);
        return Some(c);
    }
    let mut v = &mut c.docs[*doc];
    let (last, parents) = rest.split_last()?;
    for s in parents {
        v = match s {
            Step::Index(i) => v.get_mut(*i)?,
            Step::Key(k) => v.get_mut(k.as_str())?,
        };
    }
    match (last, v) {
        (Step::Index(i), Value::Array(a)) => {
            a.remove(*i);
        }
        (Step::Key(k), Value::Object(m)) => {
            m.remove(k);
        }
        _ => return None,
    }
    c.is_valid().then_some(c)
}

/// Where the shrunk cases of a run go: `BERTH_DIFFERENTIAL_OUT`, else
/// `<target>/tmp/differential`.
pub fn out_dir() -> PathBuf {
    if let Ok(p) = std::env::var("BERTH_DIFFERENTIAL_OUT") {
        return PathBuf::from(p);
    }
    crate::component_cache()
        .parent()
        .expect("a cache under <target>/tmp")
        .join("differential")
}

/// A run's totals.
#[derive(Debug, Default)]
pub struct Summary {
    /// Cases run.
    pub cases: u64,
    /// Cases where both agreed.
    pub agreed: u64,
    /// Cases that agreed but for divergences the book explains, by its name for
    /// them.
    pub explained: std::collections::BTreeMap<&'static str, u64>,
    /// Diverging cases, by the first divergence's `what`: count and the shrunk
    /// file of the first.
    pub divergences: std::collections::BTreeMap<String, (u64, PathBuf, String)>,
    /// Cases one side could not run: count and the first message and file.
    pub errors: Vec<(u64, String, PathBuf)>,
    /// What the cases were (shrinking's reruns included).
    pub shapes: Shapes,
}

impl Summary {
    /// True when every case agreed.
    pub fn clean(&self) -> bool {
        self.divergences.is_empty() && self.errors.is_empty()
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} cases: {} agree, {} diverge, {} errors",
            self.cases,
            self.agreed,
            self.divergences.values().map(|d| d.0).sum::<u64>(),
            self.errors.len()
        )?;
        writeln!(f, "  {}", self.shapes)?;
        for (id, n) in &self.explained {
            writeln!(f, "  {n} agree but for the book's {id:?}")?;
        }
        for (what, (n, file, detail)) in &self.divergences {
            writeln!(
                f,
                "  {n} x {what}\n      {detail}\n      shrunk: {}",
                file.display()
            )?;
        }
        for (seed, e, file) in self.errors.iter().take(10) {
            writeln!(f, "  error (seed {seed}, {}): {e}", file.display())?;
        }
        Ok(())
    }
}

impl Differential {
    /// Runs `count` cases from `seed` on, shrinking the first case of each kind of
    /// divergence into `out`; `progress` is called after each case.
    pub fn run(
        &mut self,
        seed: u64,
        count: u64,
        out: &Path,
        mut progress: impl FnMut(&Summary),
    ) -> Summary {
        std::fs::create_dir_all(out).expect("output directory");
        let mut s = Summary::default();
        for i in 0..count {
            let case = generate::case(seed.wrapping_add(i));
            s.cases += 1;
            match self.check(&case) {
                Verdict::Agree(explained) => {
                    s.agreed += 1;
                    for e in explained {
                        *s.explained.entry(e.id).or_default() += 1;
                    }
                }
                Verdict::Diverge(ds) => {
                    let first = &ds[0];
                    if let Some(e) = s.divergences.get_mut(&first.what) {
                        e.0 += 1;
                    } else {
                        let small = self.shrink(&case, &first.what);
                        let file = out.join(format!("diverge-{}.yaml", small.seed));
                        std::fs::write(&file, small.to_file_text()).expect("write");
                        let detail = match self.check(&small) {
                            Verdict::Diverge(d) => d
                                .iter()
                                .map(ToString::to_string)
                                .collect::<Vec<_>>()
                                .join("\n      "),
                            _ => first.to_string(),
                        };
                        s.divergences.insert(first.what.clone(), (1, file, detail));
                    }
                }
                Verdict::Error(e) => {
                    let file = out.join(format!("error-{}.yaml", case.seed));
                    if s.errors.len() < 10 {
                        std::fs::write(&file, case.to_file_text()).expect("write");
                    }
                    s.errors.push((case.seed, e, file));
                }
            }
            progress(&s);
        }
        s.shapes = self.shapes.clone();
        s
    }
}
