//! The configuration reference: the fields its tables document, held against the
//! fields the configuration accepts.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::path::Path;

/// The field paths documented by the tables of `file` whose first column is headed
/// `field`: the code span that begins each row (`` `berth.oci.pollInterval` ``).
pub fn reference_fields(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("read the configuration reference");
    let mut fields = Vec::new();
    let mut in_field_table = false;
    let mut cell = 0usize;
    let mut first_cell = String::new();
    let mut in_head = false;
    for event in Parser::new_ext(&text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Table(_)) => in_field_table = false,
            Event::Start(Tag::TableHead) => {
                in_head = true;
                cell = 0;
                first_cell.clear();
            }
            Event::Start(Tag::TableRow) => {
                cell = 0;
                first_cell.clear();
            }
            Event::Start(Tag::TableCell) => cell += 1,
            Event::Text(t) | Event::Code(t) if cell == 1 && in_head => first_cell.push_str(&t),
            Event::Code(t) if cell == 1 && in_field_table && first_cell.is_empty() => {
                first_cell.push_str(&t);
                fields.push(t.to_string());
            }
            Event::End(TagEnd::TableHead) => {
                in_head = false;
                in_field_table = first_cell.trim() == "field";
            }
            _ => {}
        }
    }
    fields
}

/// Whether the documented path `doc` names the accepted path `field`: segment by
/// segment, a segment `<name>` standing for any one segment.
fn names(doc: &str, field: &str) -> bool {
    let d: Vec<&str> = doc.split('.').collect();
    let f: Vec<&str> = field.split('.').collect();
    d.len() == f.len()
        && d.iter()
            .zip(&f)
            .all(|(d, f)| d == f || (d.starts_with('<') && d.ends_with('>')))
}

/// What differs between the documented paths and the accepted ones: a field the
/// reference leaves out, a documented path the configuration does not accept, a
/// path documented twice.
pub fn compare_fields(documented: &[String], accepted: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for field in accepted {
        if !documented.iter().any(|d| names(d, field)) {
            problems.push(format!("`{field}` is accepted but not in the reference"));
        }
    }
    for (i, doc) in documented.iter().enumerate() {
        if !accepted.iter().any(|f| names(doc, f)) {
            problems.push(format!("`{doc}` is in the reference but not accepted"));
        }
        if documented[..i].contains(doc) {
            problems.push(format!("`{doc}` is in the reference twice"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_headed_field_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.md");
        std::fs::write(
            &file,
            "| field | what |\n| --- | --- |\n| `a.b` | x `c` |\n| `a.<p>.c` | y |\n\n| gate | x |\n| --- | --- |\n| `G` | z |\n",
        )
        .unwrap();
        assert_eq!(reference_fields(&file), ["a.b", "a.<p>.c"]);
    }

    #[test]
    fn fields_are_compared_both_ways() {
        let accepted: Vec<String> = ["a", "a.b", "p", "p.x", "p.x.e", "p.y", "p.y.e"]
            .map(String::from)
            .into();
        let doc: Vec<String> = ["a", "a.b", "p", "p.x", "p.y", "p.<point>.e"]
            .map(String::from)
            .into();
        assert!(compare_fields(&doc, &accepted).is_empty());
        let doc: Vec<String> = ["a", "a.b", "a.b", "p", "p.x", "p.<point>.e", "q"]
            .map(String::from)
            .into();
        let problems = compare_fields(&doc, &accepted);
        assert_eq!(
            problems,
            [
                "`p.y` is accepted but not in the reference",
                "`a.b` is in the reference twice",
                "`q` is in the reference but not accepted"
            ]
        );
    }
}
