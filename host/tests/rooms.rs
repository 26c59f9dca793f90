//! The host's rooms import each other in one direction only: no module of the
//! host's crates reaches, through any chain of references, back to itself.
//!
//! This test reads the sources of the host's four crates ([`CRATES`]), finds each
//! module's references to other modules of the host (`crate::a::b`, `use
//! crate::{a, b::c}`, `super::x`, `self::x`, paths that start with a child module's
//! name, and `berth_cluster::..`, `berth_runtime::..`, `berth_scheduler::..`), and
//! builds the graph at the granularity of ARCHITECTURE.md's rooms: the top-level
//! modules (the cluster crate's are `cluster::..`, as `berth` re-exports them), and
//! the submodules of `framework` and `cluster` named in [`ROOMS`]. Cargo keeps the
//! crates' own arrows; this test keeps the rooms inside them in order, and each
//! crate's rooms in the rows between those of the crates above and below it. It fails naming every edge that
//! lies on a cycle, each with a shortest cycle through it and the lines that make
//! its references. A plain scan of the source, no dependencies: it understands
//! comments, strings and `use` trees, which is all that module references need.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Submodules that are rooms of their own; every other submodule belongs to its
/// top-level module.
const ROOMS: &[&str] = &[
    "framework::registry",
    "framework::preemption",
    "framework::explain",
    "framework::shadow",
    "cluster::kube",
    "cluster::memory",
    "cluster::manifest",
    "cluster::storage",
    "cluster::affinity",
    "cluster::quantity",
];

/// The host's crates, from the top: the directory of each (under the workspace) and
/// its name in paths. Each may depend only on those after it.
const CRATES: &[(&str, &str)] = &[
    ("host", "berth"),
    ("scheduler", "berth_scheduler"),
    ("runtime", "berth_runtime"),
    ("cluster", "berth_cluster"),
];

/// The host-wide path of a module given by its path inside crate `krate`: the
/// cluster crate's modules are `cluster::..` (its root is `cluster`), except its
/// `yaml`, a room of its own, as `berth` re-exports them.
fn place(krate: &str, raw: &[String]) -> Vec<String> {
    if krate == "berth_cluster" && raw.first().is_none_or(|f| f != "yaml") {
        std::iter::once("cluster".to_owned())
            .chain(raw.iter().cloned())
            .collect()
    } else {
        raw.to_vec()
    }
}

/// Which room may use which: each row may use the rows below it (and its own row, as
/// long as no cycle forms), never a row above. ARCHITECTURE.md draws the same.
const LAYERS: &[&[&str]] = &[
    // Commands and endpoints.
    &[
        "run",
        "simulate",
        "bench",
        "apibench",
        "server",
        "watch",
        "plugin_cli",
        "config_cli",
        "features",
    ],
    // The live loop: a thread that drives a Scheduler.
    &["live"],
    // The page: a model of a Scheduler (nodes, pending pods explained), rendered.
    &["page"],
    // The scheduler: loop, binding, preemption's cluster side, storage, swap.
    &["scheduler"],
    // Building a version of the profiles (a reload, or the first one).
    &["reload"],
    // Running a plugin on a built-in case (`berth plugin test`, the trial call).
    &["testing"],
    &["framework", "framework::explain", "framework::shadow"],
    &["framework::registry", "framework::preemption"],
    &["config"],
    // The scheduling queue: the lowest room of berth-scheduler.
    &["queue"],
    // berth-runtime: native twins, the sandbox, the plugin boundary, the leaves.
    &["native"],
    &["wasm"],
    // The plugin boundary: the extension-point table, PluginCalls, CyclePod, CycleState.
    &["plugin"],
    // State the loop keeps, and modules pulled from registries: leaves.
    &["cache", "metrics", "clock", "oci"],
    // berth-cluster.
    &["cluster::kube", "cluster::memory"],
    &["cluster"],
    &[
        "cluster::manifest",
        "cluster::storage",
        "cluster::affinity",
        "cluster::quantity",
    ],
    // Reading and writing YAML (manifests, configuration): a leaf.
    &["yaml"],
];

/// The row of a room in [`LAYERS`].
fn layer(room: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&room))
}

/// A reference from one module to another: where it is written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Site {
    file: String,
    line: usize,
    path: String,
}

#[derive(Clone, Default)]
struct Graph {
    /// room -> room -> the sites that make the edge.
    edges: BTreeMap<String, BTreeMap<String, Vec<Site>>>,
}

impl Graph {
    fn successors(&self, room: &str) -> impl Iterator<Item = &String> {
        self.edges.get(room).into_iter().flat_map(|m| m.keys())
    }
}

/// A module of the host: the file that holds it, its crate, and its path inside the
/// crate.
struct Module {
    file: PathBuf,
    krate: &'static str,
    raw: Vec<String>,
}

/// Every module of the host's crates, by host-wide path ([`place`]).
fn host_modules(workspace: &Path) -> BTreeMap<Vec<String>, Module> {
    let mut out = BTreeMap::new();
    for (dir, krate) in CRATES {
        for (raw, file) in modules(&workspace.join(dir).join("src")) {
            out.insert(place(krate, &raw), Module { file, krate, raw });
        }
    }
    out
}

/// Every module of one crate, as paths of names (`[]` is the crate root), with the
/// file that holds it.
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<Vec<String>, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(name);
                walk(&path, &p, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let module = match name.as_str() {
                    "mod" | "lib" => prefix.to_vec(),
                    // The binary is a user of the library, not one of its rooms.
                    "main" if prefix.is_empty() => continue,
                    _ => {
                        let mut p = prefix.to_vec();
                        p.push(name);
                        p
                    }
                };
                out.insert(module, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &[], &mut out);
    out
}

/// The room a module belongs to.
fn room(module: &[String]) -> Option<String> {
    let first = module.first()?;
    if let Some(second) = module.get(1) {
        let sub = format!("{first}::{second}");
        if ROOMS.contains(&sub.as_str()) {
            return Some(sub);
        }
    }
    Some(first.clone())
}

/// The source with comments, strings and character literals blanked out (newlines
/// kept, so that lines still count).
fn strip(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &b[i..j.min(b.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                for _ in i..=j.min(b.len() - 1) {
                    out.push(' ');
                }
                i = j + 1;
            } else if b.get(i + 2) == Some(&'\'') {
                out.push_str("   ");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Colons,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other(char),
}

fn tokens(text: &str) -> Vec<(Tok, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // `r#type` is the identifier `type`.
            let word = word.strip_prefix("r#").map(str::to_owned).unwrap_or(word);
            out.push((Tok::Ident(word), line));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((Tok::Colons, line));
            i += 2;
        } else {
            out.push((
                match c {
                    '{' => Tok::Open,
                    '}' => Tok::Close,
                    ',' => Tok::Comma,
                    ';' => Tok::Semi,
                    '*' => Tok::Star,
                    other => Tok::Other(other),
                },
                line,
            ));
            i += 1;
        }
    }
    out
}

/// Reads one `use` tree from `toks[*i..]`, pushing each full path (as segments) it
/// names with its line.
fn use_tree(
    toks: &[(Tok, usize)],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, usize)>,
) {
    let mut path = prefix.to_vec();
    let mut line = toks.get(*i).map_or(0, |t| t.1);
    loop {
        match toks.get(*i).map(|t| &t.0) {
            Some(Tok::Colons) => *i += 1,
            Some(Tok::Ident(w)) if w == "as" => {
                *i += 2;
            }
            Some(Tok::Ident(w)) => {
                line = toks[*i].1;
                path.push(w.clone());
                *i += 1;
            }
            Some(Tok::Open) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.0) {
                        Some(Tok::Close) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Comma) => *i += 1,
                        None => return,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
            }
            Some(Tok::Star) => {
                *i += 1;
                out.push((path, line));
                return;
            }
            _ => {
                out.push((path, line));
                return;
            }
        }
    }
}

/// The module a path in `module` (of crate `krate`) names, if it is one of the
/// host's (the longest prefix that is a module), by host-wide path.
fn resolve(
    krate: &str,
    module: &[String],
    path: &[String],
    known: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    if let Some((_, other)) = CRATES.iter().find(|(_, k)| k == first) {
        return resolve(other, &[], &path[1..], known);
    }
    let (mut base, rest): (Vec<String>, &[String]) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (module.to_vec(), &path[1..]),
        "super" => {
            let mut base = module.to_vec();
            let mut n = 0;
            while path.get(n).is_some_and(|s| s == "super") {
                base.pop();
                n += 1;
            }
            (base, &path[n..])
        }
        first => {
            let mut child = module.to_vec();
            child.push(first.to_owned());
            if !known.contains(&place(krate, &child)) {
                return None;
            }
            (module.to_vec(), path)
        }
    };
    let mut best = None;
    for seg in rest {
        base.push(seg.clone());
        let at = place(krate, &base);
        if known.contains(&at) {
            best = Some(at);
        } else {
            break;
        }
    }
    best
}

fn graph(workspace: &Path) -> Graph {
    let mods = host_modules(workspace);
    let mut known: BTreeSet<Vec<String>> = mods.keys().cloned().collect();
    let root = workspace;
    let mut g = Graph::default();
    // Inline modules (`mod tests { .. }`) are found as each file is read; they belong
    // to their file's room, so knowing them only keeps `super::` right.
    for (module, m) in &mods {
        let Module { file, krate, raw } = m;
        let text = std::fs::read_to_string(file).unwrap();
        let toks = tokens(&strip(&text));
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let Some(from) = room(module) else { continue };
        // The inline modules we are in: (name, brace depth inside it).
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0usize;
        let mut refs: Vec<(Vec<String>, Vec<String>, usize)> = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            let here: Vec<String> = raw
                .iter()
                .cloned()
                .chain(inline.iter().map(|(n, _)| n.clone()))
                .collect();
            match &toks[i].0 {
                Tok::Open => {
                    depth += 1;
                    i += 1;
                }
                Tok::Close => {
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                    depth = depth.saturating_sub(1);
                    i += 1;
                }
                Tok::Ident(w) if w == "mod" => {
                    if let (Some((Tok::Ident(name), _)), Some((Tok::Open, _))) =
                        (toks.get(i + 1), toks.get(i + 2))
                    {
                        let mut m = here.clone();
                        m.push(name.clone());
                        known.insert(place(krate, &m));
                        depth += 1;
                        inline.push((name.clone(), depth));
                        i += 3;
                    } else {
                        // `mod x;` declares a child; that is not a use of it.
                        i += 2;
                    }
                }
                Tok::Ident(w) if w == "use" => {
                    i += 1;
                    let mut paths = Vec::new();
                    use_tree(&toks, &mut i, &[], &mut paths);
                    for (p, line) in paths {
                        refs.push((here.clone(), p, line));
                    }
                }
                Tok::Ident(w) if matches!(toks.get(i + 1), Some((Tok::Colons, _))) => {
                    // `pub(in crate::x)` names a visibility, not a use.
                    let is_vis = i >= 2
                        && toks[i - 1].0 == Tok::Ident("in".into())
                        && toks[i - 2].0 == Tok::Other('(');
                    let line = toks[i].1;
                    let mut p = vec![w.clone()];
                    i += 1;
                    while let (Some((Tok::Colons, _)), Some((Tok::Ident(s), _))) =
                        (toks.get(i), toks.get(i + 1))
                    {
                        p.push(s.clone());
                        i += 2;
                    }
                    if !is_vis {
                        refs.push((here.clone(), p, line));
                    }
                }
                _ => i += 1,
            }
        }
        for (here, p, line) in refs {
            let Some(target) = resolve(krate, &here, &p, &known) else {
                continue;
            };
            let Some(to) = room(&target) else { continue };
            if to == from {
                continue;
            }
            g.edges
                .entry(from.clone())
                .or_default()
                .entry(to)
                .or_default()
                .push(Site {
                    file: shown.clone(),
                    line,
                    path: p.join("::"),
                });
        }
    }
    g
}

/// The rooms that lie on a cycle together (Tarjan's strongly connected components
/// of more than one room).
fn tangles(g: &Graph) -> Vec<BTreeSet<String>> {
    struct Tarjan<'a> {
        g: &'a Graph,
        rooms: Vec<&'a String>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<BTreeSet<String>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            let succ: Vec<usize> = self
                .g
                .successors(self.rooms[v])
                .map(|w| self.rooms.iter().position(|r| *r == w).unwrap())
                .collect();
            for w in succ {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(i) if self.on_stack[w] => self.low[v] = self.low[v].min(i),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut comp = BTreeSet::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack[w] = false;
                    comp.insert(self.rooms[w].clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.out.push(comp);
                }
            }
        }
    }
    let rooms: BTreeSet<&String> = g
        .edges
        .iter()
        .flat_map(|(a, m)| std::iter::once(a).chain(m.keys()))
        .collect();
    let n = rooms.len();
    let mut t = Tarjan {
        g,
        rooms: rooms.into_iter().collect(),
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    t.out
}

/// A shortest way from `from` to `to` (both included).
fn shortest(g: &Graph, from: &str, to: &str) -> Option<Vec<String>> {
    let mut prev: BTreeMap<String, String> = BTreeMap::new();
    let mut seen = BTreeSet::from([from.to_owned()]);
    let mut todo = VecDeque::from([from.to_owned()]);
    while let Some(r) = todo.pop_front() {
        if r == to {
            let mut path = vec![r.clone()];
            let mut at = r;
            while let Some(p) = prev.get(&at) {
                path.push(p.clone());
                at = p.clone();
            }
            path.reverse();
            return Some(path);
        }
        for s in g.successors(&r) {
            if seen.insert(s.clone()) {
                prev.insert(s.clone(), r.clone());
                todo.push_back(s.clone());
            }
        }
    }
    None
}

fn sites(g: &Graph, from: &str, to: &str) -> String {
    let mut s = String::new();
    let all = &g.edges[from][to];
    for site in all.iter().take(4) {
        let _ = write!(s, "\n        {}:{}  {}", site.file, site.line, site.path);
    }
    if all.len() > 4 {
        let _ = write!(s, "\n        ... and {} more", all.len() - 4);
    }
    s
}

/// Every edge on a cycle, each with a shortest cycle through it and the lines that
/// make it, grouped by the rooms that lie on a cycle together.
fn cycles_report(g: &Graph) -> String {
    let mut report = String::new();
    for tangle in tangles(g) {
        let _ = writeln!(
            report,
            "rooms on a cycle together: {}",
            tangle.iter().cloned().collect::<Vec<_>>().join(", ")
        );
        for from in &tangle {
            for to in g.successors(from).filter(|t| tangle.contains(*t)) {
                let back = shortest(g, to, from).expect("same component");
                let _ = writeln!(
                    report,
                    "  {from} -> {}{}",
                    back.join(" -> "),
                    sites(g, from, to)
                );
            }
        }
    }
    report
}

#[test]
fn the_host_rooms_use_only_rooms_below_them_and_no_cycle_forms() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let g = graph(workspace);
    // Each crate's rooms sit in the rows between the crates above and below it.
    let mods = host_modules(workspace);
    let rank = |krate: &str| CRATES.iter().position(|(_, k)| *k == krate).unwrap();
    let mut rooms_of: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (path, m) in &mods {
        if let Some(r) = room(path) {
            rooms_of.entry(r).or_default().insert(rank(m.krate));
        }
    }
    let mut misplaced = Vec::new();
    let mut deepest = 0;
    for row in LAYERS {
        for r in *row {
            let Some(ranks) = rooms_of.get(*r) else {
                misplaced.push(format!("{r}: no module of the host is this room"));
                continue;
            };
            if ranks.len() > 1 {
                misplaced.push(format!("{r}: its modules lie in more than one crate"));
            }
            let k = *ranks.iter().next().unwrap();
            if k < deepest {
                misplaced.push(format!(
                    "{r} ({}) sits below a room of {}",
                    CRATES[k].1, CRATES[deepest].1
                ));
            }
            deepest = deepest.max(k);
        }
    }
    assert!(
        misplaced.is_empty(),
        "LAYERS does not follow the crates (CRATES):\n  {}",
        misplaced.join("\n  ")
    );
    // A sanity check that the scan found references at all.
    assert!(
        g.edges
            .get("scheduler")
            .is_some_and(|m| m.contains_key("queue")),
        "the scan found no reference from scheduler to queue; it reads the sources wrong"
    );
    if std::env::var_os("ROOMS_GRAPH").is_some() {
        // Every edge, for a reader redrawing ARCHITECTURE.md's diagram.
        for (from, tos) in &g.edges {
            for to in tos.keys() {
                println!("{from} -> {to}{}", sites(&g, from, to));
            }
        }
    }
    // Every room has its row; an edge that goes up is reported with its lines.
    let mut unplaced = BTreeSet::new();
    let mut upward = Vec::new();
    for (from, tos) in &g.edges {
        for to in tos.keys() {
            match (layer(from), layer(to)) {
                (Some(a), Some(b)) if a > b => upward.push((from.clone(), to.clone())),
                (Some(_), Some(_)) => {}
                (a, b) => {
                    if a.is_none() {
                        unplaced.insert(from.clone());
                    }
                    if b.is_none() {
                        unplaced.insert(to.clone());
                    }
                }
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "rooms without a row in LAYERS (place them there and in ARCHITECTURE.md): {}",
        unplaced.into_iter().collect::<Vec<_>>().join(", ")
    );
    let up: String = upward
        .iter()
        .map(|(a, b)| format!("  {a} -> {b}{}\n", sites(&g, a, b)))
        .collect();
    assert!(
        up.is_empty(),
        "rooms use rooms above them in LAYERS (ARCHITECTURE.md, \"Which room may use \
         which\"):\n{up}"
    );
    let left = cycles_report(&g);
    assert!(
        left.is_empty(),
        "imports close a cycle among the host's rooms (each edge on one, with a shortest \
         cycle through it and the lines that make it):\n{left}"
    );
}
