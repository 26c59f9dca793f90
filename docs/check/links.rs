//! Relative links and their anchors: in the built book (HTML), and in Markdown files
//! read on the forge.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// Every relative link of the built book at `out` (`href` and `src` of its HTML
/// files) that names no file of the book, or an anchor its page does not have.
pub fn html_links(out: &Path) -> Vec<String> {
    let mut pages = BTreeMap::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the built book") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "html") {
                let html = std::fs::read_to_string(&path).expect("read a page");
                pages.insert(path, html);
            }
        }
    }
    let mut problems = Vec::new();
    for (page, html) in &pages {
        let name = page.strip_prefix(out).unwrap_or(page).display().to_string();
        for link in attributes(html, "href")
            .into_iter()
            .chain(attributes(html, "src"))
        {
            // A link from the site's root (mdBook's 404 page has one) depends on where
            // the book is served: not the book's to check.
            if external(&link) || link.starts_with('/') {
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                normalize(&page.parent().expect("a page's directory").join(file))
            };
            if !target.starts_with(out) || !target.exists() {
                problems.push(format!("{name}: link {link:?}: no such file in the book"));
                continue;
            }
            if anchor.is_empty() || target.is_dir() {
                continue;
            }
            let ids = match pages.get(&target) {
                Some(html) => attributes(html, "id"),
                None => continue,
            };
            if !ids.iter().any(|id| id == anchor) {
                problems.push(format!(
                    "{name}: link {link:?}: the page has no anchor #{anchor}"
                ));
            }
        }
    }
    problems
}

/// Whether a link leaves the book (or is no link to check).
fn external(link: &str) -> bool {
    link.is_empty()
        || link.starts_with("//")
        || link.contains("://")
        || link.starts_with("mailto:")
        || link.starts_with("javascript:")
        || link.starts_with("data:")
        || link.starts_with('{')
}

/// The values of every `name="..."` attribute in `html`, unescaped.
fn attributes(html: &str, name: &str) -> Vec<String> {
    let needle = format!(" {name}=\"");
    let mut values = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&needle) {
        rest = &rest[at + needle.len()..];
        let end = rest.find('"').unwrap_or(rest.len());
        values.push(
            rest[..end]
                .replace("&amp;", "&")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&lt;", "<")
                .replace("&gt;", ">"),
        );
        rest = &rest[end..];
    }
    values
}

/// `path` with its `.` and `..` resolved, without asking the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every relative link of the Markdown file `file` (within the repository `repo`)
/// that names no file, or an anchor its target does not have. Anchors are the
/// forge's: each heading's [`slug`], numbered `-1`, `-2`, ... when repeated.
pub fn markdown_links(repo: &Path, file: &Path) -> Vec<String> {
    let name = file
        .strip_prefix(repo)
        .unwrap_or(file)
        .display()
        .to_string();
    let text = std::fs::read_to_string(file).expect("read a Markdown file");
    let mut problems = Vec::new();
    for link in markdown_link_targets(&text) {
        if external(&link) {
            continue;
        }
        let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
        let target = if path.is_empty() {
            file.to_path_buf()
        } else {
            normalize(&file.parent().expect("a file's directory").join(path))
        };
        if !target.starts_with(repo) || !target.exists() {
            problems.push(format!(
                "{name}: link {link:?}: no such file in the repository"
            ));
            continue;
        }
        if anchor.is_empty() {
            continue;
        }
        if target.extension().is_none_or(|e| e != "md") {
            problems.push(format!(
                "{name}: link {link:?}: an anchor into a file that is not Markdown"
            ));
            continue;
        }
        let target_text = std::fs::read_to_string(&target).expect("read a link's target");
        if !heading_anchors(&target_text).contains(anchor) {
            problems.push(format!(
                "{name}: link {link:?}: no heading has the anchor #{anchor}"
            ));
        }
    }
    problems
}

fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_HEADING_ATTRIBUTES
}

/// The destinations of the links and images of a Markdown text.
fn markdown_link_targets(text: &str) -> Vec<String> {
    Parser::new_ext(text, options())
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .collect()
}

/// The anchors the forge gives the headings of a Markdown text.
fn heading_anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut counts = BTreeMap::<String, usize>::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, options()) {
        match event {
            Event::Start(Tag::Heading { level, .. }) if level <= HeadingLevel::H6 => {
                heading = Some(String::new())
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let base = slug(&h);
                    let n = counts.entry(base.clone()).or_default();
                    anchors.insert(if *n == 0 {
                        base.clone()
                    } else {
                        format!("{base}-{n}")
                    });
                    *n += 1;
                }
            }
            _ => {}
        }
    }
    anchors
}

/// The forge's anchor of a heading: lower case, letters, digits, `-` and `_` kept,
/// each space a `-`, everything else dropped.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_the_forges() {
        assert_eq!(slug("`berth run`"), "berth-run");
        assert_eq!(slug("Signing pods (SignPod)"), "signing-pods-signpod");
        assert_eq!(slug("Set-up, in two commands"), "set-up-in-two-commands");
    }

    #[test]
    fn repeated_headings_are_numbered() {
        let anchors = heading_anchors("# A\n## Where\n## Where\n");
        assert!(
            anchors.contains("where") && anchors.contains("where-1"),
            "{anchors:?}"
        );
    }

    #[test]
    fn attributes_are_read_and_unescaped() {
        let html = r#"<a href="a.html#x">a</a> <img src="b.png"> <h2 id="x&amp;y">"#;
        assert_eq!(attributes(html, "href"), ["a.html#x"]);
        assert_eq!(attributes(html, "src"), ["b.png"]);
        assert_eq!(attributes(html, "id"), ["x&y"]);
    }
}
