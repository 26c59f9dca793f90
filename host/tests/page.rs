//! The page `berth simulate --serve` serves, as a browser shows it: the test starts
//! the command, reads the page's model from `/page.json`, loads `/` in headless
//! Chromium (Debian's `chromium` package; `tests/e2e/chromium.sh install` installs it,
//! `BERTH_CHROMIUM` names another), and checks that the DOM Chromium built shows every
//! node, its free room and its pods, each pending pod's node × plugin table, and the
//! timeline exactly as the JSON says; then it takes a screenshot and checks that it is
//! a PNG of the window's size, not blank, whose colours agree with the JSON (the
//! table's green and red cells are there exactly when the JSON has such verdicts).
//!
//! Without Chromium the test fails, saying how to install it.

use crate::common;

use common::{component_cache, workspace};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running `berth simulate --serve`, killed when dropped.
struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    base: String,
    /// The report it printed (`--output json`).
    report: Value,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(files: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(["simulate", "--output", "json", "--serve", "127.0.0.1:0"])
        .args(files)
        .env("BERTH_CACHE_DIR", component_cache())
        .current_dir(workspace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start berth simulate --serve");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let base = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let status = child.wait().unwrap();
            panic!("berth simulate --serve ended ({status}) before serving:\n{seen}");
        }
        seen.push_str(&line);
        if let Some(rest) = line.split("serving the page on ").nth(1) {
            let url = rest.split_whitespace().next().unwrap();
            break url.trim_end_matches('/').to_owned();
        }
    };
    // Keep reading what it logs, so that a full pipe never blocks it.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let mut report = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut report)
        .unwrap();
    let report = serde_json::from_str(&report).expect("the report is printed as JSON");
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    Served {
        child,
        base,
        report,
    }
}

/// GET over plain HTTP/1.1: the status, the content type and the body.
fn get(base: &str, path: &str) -> (u16, String, String) {
    let host = base.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    (status, content_type, body.to_owned())
}

fn chromium() -> PathBuf {
    let path = std::env::var_os("BERTH_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "{} is missing: this test loads the page in headless Chromium; install it with \
         `bash tests/e2e/chromium.sh install` (as root, Debian's `chromium` package) or set \
         BERTH_CHROMIUM to a Chromium binary",
        path.display()
    );
    path
}

/// Runs headless Chromium with its own profile directory; its standard output.
fn headless(args: &[String], profile: &Path) -> Vec<u8> {
    let out = Command::new(chromium())
        .args([
            "--headless",
            // As root (CI), Chromium refuses to start with its sandbox.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

// ---- A small HTML parser for the DOM Chromium serializes (`--dump-dom`). ----

#[derive(Debug)]
enum Dom {
    Text(String),
    El(Element),
}

#[derive(Debug, Default)]
struct Element {
    name: String,
    attrs: BTreeMap<String, String>,
    children: Vec<Dom>,
}

impl Element {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.get(name).map(String::as_str)
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.children {
            match c {
                Dom::Text(t) => out.push_str(t),
                Dom::El(e) => out.push_str(&e.text()),
            }
        }
        out
    }

    /// Every element under this one (not itself) for which `pred` holds, in
    /// document order.
    fn all(&self, pred: &dyn Fn(&Element) -> bool) -> Vec<&Element> {
        let mut out = Vec::new();
        for c in &self.children {
            if let Dom::El(e) = c {
                if pred(e) {
                    out.push(e);
                }
                out.extend(e.all(pred));
            }
        }
        out
    }

    /// The only element under this one with these attribute values.
    fn one(&self, attrs: &[(&str, &str)]) -> &Element {
        let found = self.all(&|e| attrs.iter().all(|(k, v)| e.attr(k) == Some(*v)));
        assert_eq!(found.len(), 1, "elements with {attrs:?}: {}", found.len());
        found[0]
    }

    fn with(&self, attr: &str) -> Vec<&Element> {
        self.all(&|e| e.attrs.contains_key(attr))
    }
}

fn decode(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';') else { break };
        let entity = &rest[1..end];
        let c = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some('\u{a0}'),
            e if e.starts_with("#x") => u32::from_str_radix(&e[2..], 16)
                .ok()
                .and_then(char::from_u32),
            e if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

fn parse(html: &str) -> Element {
    let mut stack = vec![Element {
        name: "#document".into(),
        ..Element::default()
    }];
    let mut rest = html;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("<!--") {
            rest = &r[r.find("-->").expect("comment ends") + 3..];
        } else if rest.starts_with("<!") {
            rest = &rest[rest.find('>').unwrap() + 1..];
        } else if let Some(r) = rest.strip_prefix("</") {
            let end = r.find('>').unwrap();
            let name = r[..end].trim().to_ascii_lowercase();
            rest = &r[end + 1..];
            // Close up to the matching element.
            if stack.iter().skip(1).any(|e| e.name == name) {
                loop {
                    let e = stack.pop().unwrap();
                    let done = e.name == name;
                    stack.last_mut().unwrap().children.push(Dom::El(e));
                    if done {
                        break;
                    }
                }
            }
        } else if rest.starts_with('<') {
            let (el, self_closing, after) = open_tag(&rest[1..]);
            rest = after;
            if el.name == "style" || el.name == "script" {
                let close = format!("</{}>", el.name);
                let end = rest.find(&close).expect("raw text ends");
                let mut el = el;
                el.children.push(Dom::Text(rest[..end].to_owned()));
                rest = &rest[end + close.len()..];
                stack.last_mut().unwrap().children.push(Dom::El(el));
            } else if self_closing || VOID.contains(&el.name.as_str()) {
                stack.last_mut().unwrap().children.push(Dom::El(el));
            } else {
                stack.push(el);
            }
        } else {
            let end = rest.find('<').unwrap_or(rest.len());
            stack
                .last_mut()
                .unwrap()
                .children
                .push(Dom::Text(decode(&rest[..end])));
            rest = &rest[end..];
        }
    }
    while stack.len() > 1 {
        let e = stack.pop().unwrap();
        stack.last_mut().unwrap().children.push(Dom::El(e));
    }
    stack.pop().unwrap()
}

/// Reads a start tag after its `<`: the element, whether it ends with `/>`, and what
/// follows the tag.
fn open_tag(s: &str) -> (Element, bool, &str) {
    let name_end = s
        .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
        .unwrap();
    let mut el = Element {
        name: s[..name_end].to_ascii_lowercase(),
        ..Element::default()
    };
    let mut rest = &s[name_end..];
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("/>") {
            return (el, true, r);
        }
        if let Some(r) = rest.strip_prefix('>') {
            return (el, false, r);
        }
        if let Some(r) = rest.strip_prefix('/') {
            rest = r;
            continue;
        }
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == '>' || c == '/')
            .unwrap();
        let name = rest[..end].to_ascii_lowercase();
        rest = &rest[end..];
        let value = if let Some(r) = rest.strip_prefix('=') {
            let quote = r.chars().next().unwrap();
            if quote == '"' || quote == '\'' {
                let close = r[1..].find(quote).unwrap() + 1;
                let v = decode(&r[1..close]);
                rest = &r[close + 1..];
                v
            } else {
                let close = r.find(|c: char| c.is_whitespace() || c == '>').unwrap();
                let v = decode(&r[..close]);
                rest = &r[close..];
                v
            }
        } else {
            String::new()
        };
        el.attrs.insert(name, value);
    }
}

#[test]
fn the_dom_parser_reads_what_chromium_serializes() {
    let dom = parse(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>a > b {}</style></head>\
         <body><p data-x=\"a &amp; &quot;b&quot;\">one <b>two</b><br>&lt;three&gt;</p></body></html>",
    );
    let p = dom.one(&[("data-x", "a & \"b\"")]);
    assert_eq!(p.text(), "one two<three>");
    assert_eq!(dom.all(&|e| e.name == "style")[0].text(), "a > b {}");
}

// ---- What the page shows, read back. ----

/// A quantity as the page spells it, in the resource's base unit (the inverse of
/// `berth::page::quantity`, written again here so that the page is checked, not
/// trusted).
fn parse_quantity(resource: &str, text: &str) -> i64 {
    let (sign, t) = match text.strip_prefix('-') {
        Some(t) => (-1, t),
        None => (1, text),
    };
    let n = |s: &str| -> i64 {
        s.parse()
            .unwrap_or_else(|_| panic!("{resource}: {text:?} is not a quantity"))
    };
    let v = if resource == "cpu" {
        match t.strip_suffix('m') {
            Some(m) => n(m),
            None => n(t) * 1000,
        }
    } else {
        let suffixes = [
            ("Ki", 10),
            ("Mi", 20),
            ("Gi", 30),
            ("Ti", 40),
            ("Pi", 50),
            ("Ei", 60),
        ];
        match suffixes.iter().find(|(s, _)| t.ends_with(s)) {
            Some((s, shift)) => n(&t[..t.len() - s.len()]) << shift,
            None => n(t),
        }
    };
    sign * v
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// Every node of the JSON on the page, with its labels, taints, rooms and pods.
fn check_nodes(dom: &Element, page: &Value) {
    let nodes = page["nodes"].as_array().unwrap();
    let cards = dom.all(&|e| e.name == "article" && e.attrs.contains_key("data-node"));
    let names: Vec<&str> = cards.iter().map(|c| c.attr("data-node").unwrap()).collect();
    let want: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, want, "the node cards");
    let mut placed = 0;
    for (n, card) in nodes.iter().zip(&cards) {
        let name = n["name"].as_str().unwrap();
        assert_eq!(card.one(&[("data-field", "name")]).text(), name);
        assert_eq!(
            !card
                .with("data-field")
                .iter()
                .all(|e| e.attr("data-field") != Some("unschedulable")),
            n["unschedulable"].as_bool().unwrap(),
            "{name}: the cordoned badge"
        );
        let taints: Vec<String> = card
            .with("data-taint")
            .iter()
            .map(|e| {
                assert_eq!(e.text(), e.attr("data-taint").unwrap());
                e.text()
            })
            .collect();
        assert_eq!(taints, strs(&n["taints"]), "{name}: taints");
        let labels: BTreeSet<String> = card.with("data-label").iter().map(|e| e.text()).collect();
        let want: BTreeSet<String> = n["labels"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
            .collect();
        assert_eq!(labels, want, "{name}: labels");

        let rows = card.with("data-resource");
        let resources = n["resources"].as_array().unwrap();
        assert_eq!(rows.len(), resources.len(), "{name}: resource rows");
        for (r, row) in resources.iter().zip(&rows) {
            let res = r["resource"].as_str().unwrap();
            assert_eq!(row.attr("data-resource"), Some(res));
            for q in ["allocatable", "requested", "free"] {
                let want = r[q].as_i64().unwrap();
                let cell = row.one(&[("data-q", q)]);
                assert_eq!(cell.attr("data-value"), Some(want.to_string().as_str()));
                assert_eq!(
                    parse_quantity(res, &cell.text()),
                    want,
                    "{name}: {res} {q} shown as {:?}",
                    cell.text()
                );
            }
            assert_eq!(
                r["free"].as_i64().unwrap(),
                r["allocatable"].as_i64().unwrap() - r["requested"].as_i64().unwrap()
            );
        }

        let pods: Vec<(String, String)> = card
            .with("data-pod")
            .iter()
            .map(|e| {
                assert!(e.text().starts_with(e.attr("data-pod").unwrap()));
                (
                    e.attr("data-pod").unwrap().to_owned(),
                    e.attr("data-on").unwrap().to_owned(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = n["pods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["pod"].as_str().unwrap().to_owned(), name.to_owned()))
            .collect();
        assert_eq!(pods, want, "{name}: pods");
        placed += want.len();
    }
    assert_eq!(
        dom.with("data-pod").len(),
        placed,
        "pods shown outside a node"
    );
}

/// How a filter plugin's verdict reads in its cell: a tick, `skip`, or the code; then
/// the reasons.
fn verdict_text(f: &Value) -> String {
    let code = f["code"].as_str().unwrap();
    let shown = match code {
        "Success" => "✓",
        "Skip" => "skip",
        other => other,
    };
    format!("{shown}{}", strs(&f["reasons"]).concat())
}

/// Every pending pod of the JSON on the page, with every cell of its table.
fn check_pending(dom: &Element, page: &Value) {
    let pending = page["pending"].as_array().unwrap();
    let cards = dom.with("data-pending");
    let keys: Vec<&str> = cards
        .iter()
        .map(|c| c.attr("data-pending").unwrap())
        .collect();
    let want: Vec<&str> = pending.iter().map(|p| p["pod"].as_str().unwrap()).collect();
    assert_eq!(keys, want, "the pending pods");
    for (p, card) in pending.iter().zip(&cards) {
        let pod = p["pod"].as_str().unwrap();
        assert_eq!(
            card.one(&[("data-field", "queue")]).text(),
            p["queue"].as_str().unwrap()
        );
        assert_eq!(
            card.one(&[("data-field", "attempts")]).text(),
            p["attempts"].to_string()
        );
        let message = p["message"].as_str().unwrap();
        if !message.is_empty() {
            assert_eq!(card.one(&[("data-field", "message")]).text(), message);
        }
        let Some(e) = p.get("explanation") else {
            assert_eq!(
                card.one(&[("data-field", "unexplained")]).text(),
                p["unexplained"].as_str().unwrap()
            );
            assert!(card.with("data-point").is_empty());
            continue;
        };
        let (mut filters, mut scores) = (0, 0);
        for n in e["nodes"].as_array().unwrap() {
            let node = n["node"].as_str().unwrap();
            let feasible = n["feasible"].as_bool().unwrap();
            let cell = card.one(&[("data-node", node), ("data-point", "feasible")]);
            assert_eq!(
                cell.text(),
                if feasible { "yes" } else { "no" },
                "{pod} on {node}"
            );
            for f in n["filters"].as_array().unwrap() {
                let plugin = f["plugin"].as_str().unwrap();
                let cell = card.one(&[
                    ("data-node", node),
                    ("data-plugin", plugin),
                    ("data-point", "filter"),
                ]);
                assert_eq!(
                    cell.attr("data-code"),
                    f["code"].as_str(),
                    "{pod} {node} {plugin}"
                );
                assert_eq!(cell.text(), verdict_text(f), "{pod} {node} {plugin}");
                filters += 1;
            }
            for s in n["scores"].as_array().unwrap() {
                let plugin = s["plugin"].as_str().unwrap();
                let cell = card.one(&[
                    ("data-node", node),
                    ("data-plugin", plugin),
                    ("data-point", "score"),
                ]);
                assert_eq!(cell.attr("data-raw"), Some(s["raw"].to_string().as_str()));
                assert_eq!(
                    cell.attr("data-normalized"),
                    Some(s["normalized"].to_string().as_str())
                );
                assert_eq!(
                    cell.text(),
                    format!("{}{}/{}", s["weighted"], s["raw"], s["normalized"]),
                    "{pod} {node} {plugin}"
                );
                scores += 1;
            }
            let total = card.one(&[("data-node", node), ("data-point", "total")]);
            let want = if feasible {
                n["total"].to_string()
            } else {
                "–".to_owned()
            };
            assert_eq!(total.text(), want, "{pod} on {node}: total");
        }
        let cells = card.with("data-point");
        let count = |point: &str| {
            cells
                .iter()
                .filter(|c| c.attr("data-point") == Some(point))
                .count()
        };
        assert_eq!(count("filter"), filters, "{pod}: filter cells");
        assert_eq!(count("score"), scores, "{pod}: score cells");
        match e.get("post_filter") {
            Some(pf) => {
                let shown = card.one(&[("data-field", "postfilter")]).text();
                assert!(
                    shown.starts_with(&format!(
                        "PostFilter {}: {}",
                        pf["plugin"].as_str().unwrap(),
                        pf["status"]["code"].as_str().unwrap()
                    )),
                    "{pod}: {shown}"
                );
            }
            None => assert!(
                card.all(&|e| e.attr("data-field") == Some("postfilter"))
                    .is_empty()
            ),
        }
    }
}

/// Every step of the JSON's timeline on the page, with what it bound, evicted and
/// left pending.
fn check_timeline(dom: &Element, page: &Value) {
    let steps = page["timeline"].as_array().unwrap();
    let items = dom.with("data-step");
    assert_eq!(items.len(), steps.len(), "timeline steps");
    for (i, (s, li)) in steps.iter().zip(&items).enumerate() {
        assert_eq!(li.attr("data-step"), Some(i.to_string().as_str()));
        let text = li.text();
        for field in ["action", "kind", "object", "document"] {
            assert!(
                text.contains(s[field].as_str().unwrap()),
                "step {i}: {field} in {text:?}"
            );
        }
        let pairs = |attr: &str, node: bool| -> Vec<(String, String)> {
            li.with(attr)
                .iter()
                .map(|e| {
                    (
                        e.attr(attr).unwrap().to_owned(),
                        if node {
                            e.attr("data-node").unwrap().to_owned()
                        } else {
                            String::new()
                        },
                    )
                })
                .collect()
        };
        let want = |list: &str, node: bool| -> Vec<(String, String)> {
            s[list]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    (
                        x["pod"].as_str().unwrap().to_owned(),
                        if node {
                            x["node"].as_str().unwrap().to_owned()
                        } else {
                            String::new()
                        },
                    )
                })
                .collect()
        };
        assert_eq!(
            pairs("data-bound", true),
            want("bound", true),
            "step {i}: bound"
        );
        // A pod placed from a batch says so, in the JSON and on the page.
        let batched_shown: Vec<&str> = li
            .with("data-bound")
            .iter()
            .filter(|e| e.attr("data-batched") == Some("true"))
            .map(|e| e.attr("data-bound").unwrap())
            .collect();
        let batched_said: Vec<&str> = s["bound"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["batched"] == true)
            .map(|x| x["pod"].as_str().unwrap())
            .collect();
        assert_eq!(batched_shown, batched_said, "step {i}: from a batch");
        assert_eq!(
            pairs("data-evicted", true),
            want("evicted", true),
            "step {i}: evicted"
        );
        assert_eq!(
            pairs("data-left", false),
            want("pending", false),
            "step {i}: left pending"
        );
    }
}

/// The colours of the screenshot, counted.
fn colours(png_bytes: &[u8]) -> (u32, u32, BTreeMap<[u8; 3], usize>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let channels = info.color_type.samples();
    assert!(
        info.bit_depth == png::BitDepth::Eight && channels >= 3,
        "{info:?}"
    );
    let mut counts = BTreeMap::new();
    for px in buf[..info.buffer_size()].chunks(channels) {
        *counts.entry([px[0], px[1], px[2]]).or_insert(0) += 1;
    }
    (info.width, info.height, counts)
}

fn rgb(hex: u32) -> [u8; 3] {
    [(hex >> 16) as u8, (hex >> 8) as u8, hex as u8]
}

/// Loads the page of `files` in headless Chromium and checks it against its JSON;
/// returns the JSON.
fn check_page(files: &[&str], shot: &str) -> Value {
    let served = serve(files);
    let (status, content_type, json) = get(&served.base, "/page.json");
    assert_eq!(
        (status, content_type.as_str()),
        (200, "application/json"),
        "{json}"
    );
    let page: Value = serde_json::from_str(&json).unwrap();
    let (status, content_type, html) = get(&served.base, "/");
    assert_eq!(
        (status, content_type.as_str()),
        (200, "text/html; charset=utf-8")
    );
    assert!(
        !html.contains("http://") && !html.contains("https://") && !html.contains("//cdn"),
        "the page loads nothing from elsewhere"
    );

    // The report's pending pods are the page's.
    let reported: BTreeSet<&str> = served.report["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["node"].is_null())
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let shown: BTreeSet<&str> = page["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pod"].as_str().unwrap().split('/').nth(1).unwrap())
        .collect();
    assert_eq!(shown, reported);

    let profile = tempfile::tempdir().unwrap();
    let url = format!("{}/", served.base);
    let dom = headless(&["--dump-dom".into(), url.clone()], profile.path());
    let dom = parse(&String::from_utf8(dom).unwrap());
    assert_eq!(
        dom.all(&|e| e.name == "title")[0].text(),
        page["title"].as_str().unwrap()
    );
    check_nodes(&dom, &page);
    check_pending(&dom, &page);
    check_timeline(&dom, &page);

    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join(shot);
    let _ = std::fs::remove_file(&png);
    let (width, height) = (1280, 2400);
    headless(
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={width},{height}"),
            url,
        ],
        profile.path(),
    );
    let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
    let (w, h, counts) = colours(&bytes);
    assert_eq!((w, h), (width, height), "{}", png.display());
    assert!(
        counts.len() > 50,
        "{}: {} colours: blank",
        png.display(),
        counts.len()
    );
    // The header's band, and the background.
    assert!(counts.get(&rgb(0x14213d)).copied().unwrap_or(0) > 10_000);
    assert!(counts.get(&rgb(0xf3f5f8)).copied().unwrap_or(0) > 10_000);
    // The table's cells: green where a filter passed or a node is feasible, red where
    // one failed (and the pending pods' messages), exactly when the JSON has them.
    let explained: Vec<&Value> = page["pending"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.get("explanation"))
        .flat_map(|e| e["nodes"].as_array().unwrap())
        .collect();
    let any_green = explained.iter().any(|n| {
        n["feasible"].as_bool().unwrap()
            || n["filters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["code"] == "Success")
    });
    let any_red = !page["pending"].as_array().unwrap().is_empty();
    let green = counts.get(&rgb(0xdafbe1)).copied().unwrap_or(0);
    let red = counts.get(&rgb(0xfee4e2)).copied().unwrap_or(0);
    assert_eq!(
        green > 100,
        any_green,
        "{}: {green} green pixels",
        png.display()
    );
    assert_eq!(red > 100, any_red, "{}: {red} red pixels", png.display());
    page
}

#[test]
fn the_page_shows_in_chromium_what_its_json_says() {
    // The example cluster: a pod that fits nowhere, so a table with failures.
    let page = check_page(&["examples/cluster.yaml"], "page-cluster.png");
    assert_eq!(page["nodes"].as_array().unwrap().len(), 3);
    let pending = page["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["pod"], "default/huge");
    let e = &pending[0]["explanation"];
    assert!(
        e["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["feasible"] == false),
        "{e}"
    );
    assert!(page["timeline"].as_array().unwrap().len() >= 9);
    // web-2 is signed like web-1 and placed from web-1's batch (as the report says).
    let from_batch: Vec<&str> = page["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["bound"].as_array().unwrap())
        .filter(|b| b["batched"] == true)
        .map(|b| b["pod"].as_str().unwrap())
        .collect();
    assert_eq!(from_batch, ["default/web-2"], "{page}");

    // Preemption: the timeline shows the eviction and the preemptor bound after it;
    // nothing is left pending, so the page has no table.
    let page = check_page(&["examples/preemption.yaml"], "page-preemption.png");
    assert!(page["pending"].as_array().unwrap().is_empty());
    let steps = page["timeline"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .any(|s| !s["evicted"].as_array().unwrap().is_empty()),
        "{page}"
    );
}
