//! The page as one HTML document: inline CSS, no script, no external URL. Every text
//! that comes from the cluster (names, labels, messages) is escaped. The elements a
//! reader (or a test) checks against the JSON carry `data-` attributes naming what
//! they show.

use super::{NodeView, Page, PendingView, Step, quantity};
use crate::framework::Explanation;
use std::fmt::Write as _;

const STYLE: &str = r#"
:root { --ok: #1a7f37; --ok-bg: #dafbe1; --bad: #b42318; --bad-bg: #fee4e2;
  --skip: #57606a; --skip-bg: #eaeef2; --line: #d0d7de; --ink: #1f2328; --muted: #59636e;
  --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--ink); background: #f3f5f8; }
header { background: #14213d; color: #fff; padding: 14px 24px; display: flex;
  align-items: baseline; gap: 24px; flex-wrap: wrap; }
header h1 { margin: 0; font-size: 20px; }
header .summary { color: #c9d4e8; }
header nav a { color: #ffd166; margin-right: 14px; text-decoration: none; }
main { padding: 8px 24px 32px; }
h2 { font-size: 17px; margin: 22px 0 10px; }
.nodes { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr));
  gap: 14px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 14px; }
.card h3 { margin: 0 0 6px; font-size: 15px; }
.badge { display: inline-block; font-size: 11px; padding: 1px 7px; border-radius: 10px;
  background: var(--skip-bg); color: var(--skip); margin-left: 6px; font-weight: 600; }
.badge.cordoned { background: var(--bad-bg); color: var(--bad); }
.chips { margin: 2px 0 6px; }
.chip { display: inline-block; font: 11px/1.6 ui-monospace, monospace; padding: 0 6px;
  border-radius: 4px; background: #eef2f7; color: var(--muted); margin: 0 4px 3px 0; }
.chip.taint { background: #fff1d6; color: #8a5300; }
table { border-collapse: collapse; }
table.rooms { width: 100%; margin: 6px 0; }
table.rooms th, table.rooms td { text-align: right; padding: 2px 6px;
  border-bottom: 1px solid #eef0f3; font-variant-numeric: tabular-nums; }
table.rooms th:first-child { text-align: left; font-weight: 600; }
table.rooms thead th { color: var(--muted); font-weight: 500; font-size: 12px; }
.bar { height: 4px; background: #e6eaef; border-radius: 2px; margin-top: 2px; }
.bar span { display: block; height: 4px; border-radius: 2px; background: var(--accent); }
.bar span.full { background: var(--bad); }
td.neg { color: var(--bad); font-weight: 600; }
ul.pods { list-style: none; padding: 0; margin: 4px 0 0; }
ul.pods li { display: flex; justify-content: space-between; gap: 8px; padding: 3px 6px;
  border-radius: 4px; background: #f6f8fa; margin-bottom: 3px; }
ul.pods li.assumed { background: #fff8c5; }
.req { color: var(--muted); font-variant-numeric: tabular-nums; white-space: nowrap; }
.none { color: var(--muted); font-style: italic; }
.pending { margin-bottom: 16px; }
.pending .meta { color: var(--muted); margin: 0 0 4px; }
.message { margin: 4px 0 8px; padding: 6px 10px; background: var(--bad-bg);
  border-left: 3px solid var(--bad); border-radius: 4px; }
.scroll { overflow-x: auto; }
table.explain th, table.explain td { border: 1px solid var(--line); padding: 4px 8px;
  vertical-align: top; }
table.explain thead th { background: #f6f8fa; font-weight: 600; font-size: 12px; }
table.explain thead th.group { text-align: center; color: var(--muted); }
table.explain tbody th { text-align: left; white-space: nowrap; }
td.ok { background: var(--ok-bg); color: var(--ok); text-align: center; }
td.fail { background: var(--bad-bg); color: var(--bad); }
td.skip { background: var(--skip-bg); color: var(--skip); text-align: center; }
td.score, td.total { text-align: right; font-variant-numeric: tabular-nums; }
td.total { font-weight: 700; }
td.empty { color: #aab2bd; text-align: center; }
.why { font-size: 12px; color: var(--ink); }
.small { font-size: 12px; color: var(--muted); }
ol.timeline { padding-left: 28px; }
ol.timeline > li { background: #fff; border: 1px solid var(--line); border-radius: 6px;
  padding: 6px 10px; margin-bottom: 6px; }
.action { display: inline-block; min-width: 52px; font-weight: 700; color: var(--accent); }
ol.timeline ul { margin: 4px 0 0; padding-left: 18px; }
.bound { color: var(--ok); }
.evicted { color: #8a5300; }
.left { color: var(--bad); }
"#;

/// Escapes text for an HTML text node or a double-quoted attribute value.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The whole document.
pub(super) fn render(page: &Page) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let placed: usize = page.nodes.iter().map(|n| n.pods.len()).sum();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>{STYLE}</style></head>\n<body>\n\
         <header><h1 id=\"title\">{title}</h1>\
         <span class=\"summary\">{nodes} node(s) · {placed} pod(s) on nodes · {pending} pending</span>\
         <nav><a href=\"#nodes\">Nodes</a><a href=\"#pending\">Pending</a>",
        title = esc(&page.title),
        nodes = page.nodes.len(),
        pending = page.pending.len(),
    );
    if !page.timeline.is_empty() {
        out.push_str("<a href=\"#timeline\">Timeline</a>");
    }
    out.push_str("<a href=\"page.json\">JSON</a></nav></header>\n<main>\n");

    out.push_str("<section id=\"nodes\"><h2>Nodes</h2>\n");
    if page.nodes.is_empty() {
        out.push_str("<p class=\"none\">No nodes.</p>\n");
    } else {
        out.push_str("<div class=\"nodes\">\n");
        for n in &page.nodes {
            node(&mut out, n);
        }
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");

    out.push_str("<section id=\"pending\"><h2>Pending pods</h2>\n");
    if page.pending.is_empty() {
        out.push_str("<p class=\"none\">No pod is pending.</p>\n");
    }
    for p in &page.pending {
        pending(&mut out, p);
    }
    out.push_str("</section>\n");

    if !page.timeline.is_empty() {
        out.push_str("<section id=\"timeline\"><h2>Timeline</h2>\n<ol class=\"timeline\">\n");
        for (i, s) in page.timeline.iter().enumerate() {
            step(&mut out, i, s);
        }
        out.push_str("</ol></section>\n");
    }
    out.push_str("</main>\n</body></html>\n");
    out
}

fn node(out: &mut String, n: &NodeView) {
    let name = esc(&n.name);
    let _ = write!(
        out,
        "<article class=\"card node\" data-node=\"{name}\"><h3><span data-field=\"name\">{name}</span>"
    );
    if n.unschedulable {
        out.push_str("<span class=\"badge cordoned\" data-field=\"unschedulable\">cordoned</span>");
    }
    out.push_str("</h3>\n");
    if !n.taints.is_empty() || !n.labels.is_empty() {
        out.push_str("<div class=\"chips\">");
        for t in &n.taints {
            let t = esc(t);
            let _ = write!(
                out,
                "<span class=\"chip taint\" data-taint=\"{t}\">{t}</span>"
            );
        }
        for (k, v) in &n.labels {
            let label = esc(&format!("{k}={v}"));
            let _ = write!(
                out,
                "<span class=\"chip\" data-label=\"{label}\">{label}</span>"
            );
        }
        out.push_str("</div>\n");
    }
    out.push_str(
        "<table class=\"rooms\"><thead><tr><th>resource</th><th>allocatable</th>\
         <th>requested</th><th>free</th></tr></thead><tbody>\n",
    );
    for r in &n.resources {
        let res = esc(&r.resource);
        let used = if r.allocatable > 0 {
            (r.requested.max(0) as f64 / r.allocatable as f64 * 100.0).min(100.0)
        } else if r.requested > 0 {
            100.0
        } else {
            0.0
        };
        let full = if r.free < 0 || (r.allocatable > 0 && r.free == 0) {
            " class=\"full\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<tr data-resource=\"{res}\"><th>{res}<div class=\"bar\"><span{full} style=\"width:{used:.0}%\"></span></div></th>"
        );
        for (what, q) in [
            ("allocatable", r.allocatable),
            ("requested", r.requested),
            ("free", r.free),
        ] {
            let class = if what == "free" && q < 0 {
                " class=\"neg\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "<td{class} data-q=\"{what}\" data-value=\"{q}\">{}</td>",
                esc(&quantity(&r.resource, q))
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    if n.pods.is_empty() {
        out.push_str("<p class=\"none\">No pods.</p>");
    } else {
        out.push_str("<ul class=\"pods\">");
        for p in &n.pods {
            let key = esc(&p.pod);
            let assumed = if p.assumed { " assumed" } else { "" };
            let _ = write!(
                out,
                "<li class=\"pod{assumed}\" data-pod=\"{key}\" data-on=\"{name}\"><span>{key}</span>\
                 <span class=\"req\">{} cpu · {} mem{}</span></li>",
                quantity(berth_sdk::CPU, p.cpu),
                quantity(berth_sdk::MEMORY, p.memory),
                if p.assumed { " · assumed" } else { "" },
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("</article>\n");
}

fn pending(out: &mut String, p: &PendingView) {
    let key = esc(&p.pod);
    let _ = writeln!(
        out,
        "<article class=\"card pending\" data-pending=\"{key}\"><h3>{key}</h3>\
         <p class=\"meta\"><span data-field=\"queue\">{}</span> queue · \
         <span data-field=\"attempts\">{}</span> attempt(s)</p>",
        esc(&p.queue),
        p.attempts
    );
    if !p.message.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"message\" data-field=\"message\">{}</p>",
            esc(&p.message)
        );
    }
    match (&p.explanation, &p.unexplained) {
        (Some(e), _) => explanation(out, e),
        (None, Some(why)) => {
            let _ = writeln!(
                out,
                "<p class=\"none\" data-field=\"unexplained\">{}</p>",
                esc(why)
            );
        }
        (None, None) => {}
    }
    out.push_str("</article>\n");
}

/// The plugins of one kind of column, in the order they first appear.
fn columns<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

fn reasons(out: &mut String, reasons: &[String]) {
    for r in reasons {
        let _ = write!(out, "<div class=\"why\">{}</div>", esc(r));
    }
}

fn explanation(out: &mut String, e: &Explanation) {
    if !e.prefilter.is_empty() {
        out.push_str("<div class=\"small\">PreFilter: ");
        for (i, p) in e.prefilter.iter().enumerate() {
            let _ = write!(
                out,
                "{}<span data-prefilter=\"{}\">{}: {}{}</span>",
                if i > 0 { " · " } else { "" },
                esc(&p.plugin),
                esc(&p.plugin),
                esc(&p.code),
                if p.reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", esc(&p.reasons.join(", ")))
                }
            );
        }
        out.push_str("</div>\n");
    }
    let filters = columns(
        e.nodes
            .iter()
            .flat_map(|n| n.filters.iter().map(|f| f.plugin.as_str())),
    );
    let scores = columns(
        e.nodes
            .iter()
            .flat_map(|n| n.scores.iter().map(|s| s.plugin.as_str())),
    );
    out.push_str("<div class=\"scroll\"><table class=\"explain\"><thead><tr>");
    out.push_str("<th rowspan=\"2\">node</th><th rowspan=\"2\">feasible</th>");
    if !filters.is_empty() {
        let _ = write!(
            out,
            "<th class=\"group\" colspan=\"{}\">Filter</th>",
            filters.len()
        );
    }
    if !scores.is_empty() {
        let _ = write!(
            out,
            "<th class=\"group\" colspan=\"{}\">Score (weighted; raw/normalized)</th>",
            scores.len()
        );
    }
    out.push_str("<th rowspan=\"2\">total</th></tr>\n<tr>");
    for p in filters.iter().chain(&scores) {
        let _ = write!(out, "<th>{}</th>", esc(p));
    }
    out.push_str("</tr></thead><tbody>\n");
    for n in &e.nodes {
        let node = esc(&n.node);
        let _ = write!(
            out,
            "<tr data-row=\"{node}\"><th>{node}</th><td class=\"{}\" data-node=\"{node}\" \
             data-point=\"feasible\">{}</td>",
            if n.feasible { "ok" } else { "fail" },
            if n.feasible { "yes" } else { "no" }
        );
        for p in &filters {
            match n.filters.iter().find(|f| f.plugin == *p) {
                None => out.push_str("<td class=\"empty\">–</td>"),
                Some(f) => {
                    let (class, shown) = match f.code.as_str() {
                        "Success" => ("ok", "✓"),
                        "Skip" => ("skip", "skip"),
                        other => ("fail", other),
                    };
                    let _ = write!(
                        out,
                        "<td class=\"{class}\" data-node=\"{node}\" data-plugin=\"{}\" \
                         data-point=\"filter\" data-code=\"{}\">{}",
                        esc(p),
                        esc(&f.code),
                        esc(shown)
                    );
                    reasons(out, &f.reasons);
                    out.push_str("</td>");
                }
            }
        }
        for p in &scores {
            match n.scores.iter().find(|s| s.plugin == *p) {
                None => out.push_str("<td class=\"empty\">–</td>"),
                Some(s) => {
                    let _ = write!(
                        out,
                        "<td class=\"score\" data-node=\"{node}\" data-plugin=\"{}\" \
                         data-point=\"score\" data-raw=\"{}\" data-normalized=\"{}\">{}\
                         <div class=\"small\">{}/{}</div></td>",
                        esc(p),
                        s.raw,
                        s.normalized,
                        s.weighted,
                        s.raw,
                        s.normalized
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "<td class=\"total\" data-node=\"{node}\" data-point=\"total\">{}</td></tr>",
            if n.feasible {
                n.total.to_string()
            } else {
                "–".to_owned()
            }
        );
    }
    out.push_str("</tbody></table></div>\n");
    if let Some(pf) = &e.post_filter {
        let _ = write!(
            out,
            "<p class=\"small\" data-field=\"postfilter\">PostFilter {}: {}{}",
            esc(&pf.plugin),
            esc(&pf.status.code),
            if pf.status.reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", esc(&pf.status.reasons.join(", ")))
            }
        );
        if let Some(n) = &pf.nominated_node {
            let _ = write!(out, "; would nominate <b>{}</b>", esc(n));
        }
        for c in &pf.candidates {
            let _ = write!(
                out,
                "<br>candidate {}: evict {} ({} PDB violation(s))",
                esc(&c.node),
                esc(&c.victims.join(", ")),
                c.pdb_violations
            );
        }
        out.push_str("</p>\n");
    }
}

fn step(out: &mut String, i: usize, s: &Step) {
    let _ = write!(
        out,
        "<li data-step=\"{i}\"><span class=\"action\">{}</span> {} <b>{}</b> \
         <span class=\"small\">{}</span>",
        esc(&s.action),
        esc(&s.kind),
        esc(&s.object),
        esc(&s.document)
    );
    if !s.bound.is_empty() || !s.evicted.is_empty() || !s.pending.is_empty() {
        out.push_str("<ul>");
        for e in &s.evicted {
            let _ = write!(
                out,
                "<li class=\"evicted\" data-evicted=\"{}\" data-node=\"{}\">{} evicted from {} \
                 for {}</li>",
                esc(&e.pod),
                esc(&e.node),
                esc(&e.pod),
                esc(&e.node),
                esc(&e.preemptor)
            );
        }
        for b in &s.bound {
            let (attr, note) = if b.batched {
                (" data-batched=\"true\"", " (from a batch)")
            } else {
                ("", "")
            };
            let _ = write!(
                out,
                "<li class=\"bound\" data-bound=\"{}\" data-node=\"{}\"{attr}>{} bound to {}{note}</li>",
                esc(&b.pod),
                esc(&b.node),
                esc(&b.pod),
                esc(&b.node)
            );
        }
        for p in &s.pending {
            let _ = write!(
                out,
                "<li class=\"left\" data-left=\"{}\">{} left pending: {}</li>",
                esc(&p.pod),
                esc(&p.pod),
                esc(&p.message)
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("</li>\n");
}

#[cfg(test)]
mod tests {
    use super::super::{NodeView, PodView, Room};
    use super::*;

    #[test]
    fn text_from_manifests_is_escaped_in_text_and_attributes() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        let evil = "<script>alert(1)</script>\"x";
        let page = Page {
            title: evil.into(),
            nodes: vec![NodeView {
                name: evil.into(),
                unschedulable: true,
                labels: [(evil.to_owned(), evil.to_owned())].into(),
                taints: vec![evil.into()],
                resources: vec![Room {
                    resource: evil.into(),
                    allocatable: 1,
                    requested: 0,
                    free: 1,
                }],
                pods: vec![PodView {
                    pod: evil.into(),
                    cpu: 0,
                    memory: 0,
                    priority: 0,
                    assumed: false,
                }],
            }],
            pending: vec![PendingView {
                pod: evil.into(),
                queue: "unschedulable".into(),
                attempts: 1,
                message: evil.into(),
                gated_by: None,
                explanation: None,
                unexplained: Some(evil.into()),
            }],
            timeline: vec![Step {
                document: evil.into(),
                action: "add".into(),
                kind: "Pod".into(),
                object: evil.into(),
                bound: vec![],
                evicted: vec![],
                pending: vec![super::super::Pending {
                    pod: evil.into(),
                    message: evil.into(),
                }],
            }],
        };
        let html = render(&page);
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("\"x"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;x"));
        assert!(!html.contains("http://") && !html.contains("https://"));
    }
}
