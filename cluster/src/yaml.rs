//! YAML as Berth reads and writes it: manifests, configuration files and the
//! configuration `berth config default` prints.
//!
//! The parser is serde-saphyr, the one kube-client brings. It is set up to read as
//! Berth always has (YAML 1.2's core schema, as serde_yaml 0.9 read it):
//!
//! - only `true`/`false` (also `True`, `TRUE`, ...) are booleans: `yes`, `on`, `y`
//!   stay strings;
//! - a plain number with redundant leading zeros (`08`, `0755`) or with underscores
//!   (`1_000`) stays a string, as a quoted scalar always does; `0x10`, `0o17`, `1e3`
//!   are numbers;
//! - a mapping's key may appear once: a second one is an error naming the key;
//! - `.inf` and `.nan` (and decimals too large for a float) are refused where the
//!   type is not known beforehand (manifests, plugin args): a JSON value, which these
//!   become, cannot hold them, and the API server's JSON refuses them too;
//! - tags other than YAML's own (`!!str`, `!!int`, ...) are refused, and `!!binary`
//!   text is kept as written;
//! - anchors, aliases and `<<` merge keys are expanded (aliases within the limits
//!   against alias bombs);
//! - no limit on a document's size or number of nodes, nesting up to 128 levels.
//!
//! Errors say where (line and column, from 1), at which field (a path like
//! `spec.containers[0].image`) and what was wrong, in serde's words where serde
//! has them (`invalid type: string "abc", expected u64`).

use std::borrow::Cow;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Serialize, Serializer};
use serde_saphyr::{
    DefaultMessageFormatter, DuplicateKeyPolicy, ExternalMessageSource, Location, MessageFormatter,
    NonFiniteFloatPolicy, Options, SingleQuoted,
};

/// The deepest nesting of sequences and mappings read (serde_yaml's limit).
const MAX_DEPTH: usize = 128;

/// The parser's options: Berth's reading of YAML (see the module's documentation).
pub fn options() -> Options {
    let mut budget = serde_saphyr::Budget::default();
    // A manifest of a large cluster is one document (a List) of many nodes: its size
    // is no attack on a command reading the user's own files.
    budget.max_events = usize::MAX;
    budget.max_nodes = usize::MAX;
    budget.max_total_scalar_bytes = usize::MAX;
    budget.max_total_comment_bytes = usize::MAX;
    budget.max_depth = MAX_DEPTH;
    // One anchor used for a hundred pods' resources is no alias bomb; the expansion
    // limits (`alias_limits`) still stop one.
    budget.enforce_alias_anchor_ratio = false;
    serde_saphyr::options! {
        budget: Some(budget),
        emit_comments: false,
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        duplicate_keys: DuplicateKeyPolicy::Error,
        non_finite_float_policy: NonFiniteFloatPolicy::Reject,
        reject_unsupported_tags: true,
        ignore_binary_tag_for_string: true,
        // Errors are worded here (see `Error`), without the parser's snippets.
        with_snippet: false,
    }
}

/// Why YAML could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The line, from 1 (0 when unknown).
    pub line: usize,
    /// The column, from 1 (0 when unknown).
    pub column: usize,
    /// The field being read, like `spec.containers[0].ports` (empty at the top of the
    /// document and for syntax errors).
    pub path: String,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for Error {
    /// `path: message at line L column C`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)?;
        if self.line > 0 {
            write!(f, " at line {} column {}", self.line, self.column)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The error of reading `text`, at `path` as serde_path_to_error wrote it.
    fn new(text: &str, error: &serde_saphyr::Error, path: Option<&str>) -> Self {
        let mut inner = error.without_snippet();
        while let serde_saphyr::Error::AliasError { error, .. } = inner {
            inner = error.without_snippet();
        }
        let (line, column) = error
            .location()
            .map_or((0, 0), |l| (to_usize(l.line()), to_usize(l.column())));
        let syntax = matches!(
            inner,
            serde_saphyr::Error::ExternalMessage { source, .. }
                if matches!(**source, ExternalMessageSource::Parser(_))
        );
        let path = if syntax {
            String::new()
        } else {
            field_path(path.unwrap_or_default())
        };
        Error {
            line,
            column,
            path,
            message: Messages { text }.format_message(inner).into_owned(),
        }
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// A serde_path_to_error path without its root mark (`.`) and without the unknown
/// segments (`?`) it ends with when the error came while reading a key.
fn field_path(path: &str) -> String {
    let mut path = path;
    loop {
        if let Some(rest) = path.strip_suffix(".?") {
            path = rest;
        } else if path == "?" || path == "." {
            return String::new();
        } else {
            return path.to_owned();
        }
    }
}

/// Reads one YAML document (or JSON, which is YAML) as a `T`: typed, or a
/// `serde_json::Value` for a document whose type is not known beforehand. Empty text
/// (or only comments) is null.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let mut path = None;
    serde_saphyr::with_deserializer_from_str_with_options(text, options(), |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = Some(e.path().to_string());
            e.into_inner()
        })
    })
    .map_err(|e| Error::new(text, &e, path.as_deref()))
}

/// Reads the documents of a multi-document stream (`---` between documents) as
/// values; an empty document is null.
pub fn documents(text: &str) -> Result<Vec<serde_json::Value>, Error> {
    serde_saphyr::from_multiple_with_options(text, options())
        .map_err(|e| Error::new(text, &e, None))
}

/// Writes a value as YAML: block style, keys in the value's order, a string quoted
/// only where it would otherwise read as something else, and then in single quotes
/// unless it needs escapes (`kubeconfig: ''`), as Berth has always printed it.
pub fn to_string(value: &serde_json::Value) -> Result<String, serde_saphyr::SerializeError> {
    let options = serde_saphyr::ser_options! {
        // Long strings stay on their line rather than folding (`>`).
        folded_wrap_chars: usize::MAX,
    };
    serde_saphyr::to_string_with_options(&Printed(value), options)
}

/// A value as `to_string` writes it.
struct Printed<'a>(&'a serde_json::Value);

impl Serialize for Printed<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            serde_json::Value::Array(items) => serializer.collect_seq(items.iter().map(Printed)),
            serde_json::Value::Object(map) => {
                serializer.collect_map(map.iter().map(|(k, v)| (k, Printed(v))))
            }
            serde_json::Value::String(s) if single_quoted(s) => {
                SingleQuoted(s.as_str()).serialize(serializer)
            }
            other => other.serialize(serializer),
        }
    }
}

/// Whether a string is written in single quotes: the serializer would quote it (it
/// double-quotes), and it has nothing that only double quotes can escape.
fn single_quoted(s: &str) -> bool {
    let escapes = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}');
    if s.chars().any(escapes) {
        return false;
    }
    serde_saphyr::to_string(&s).is_ok_and(|plain| plain.starts_with('"'))
}

/// The parser's messages, in serde's words where serde has them and without the
/// advice to the parser's API that some carry.
struct Messages<'a> {
    /// The text read, to quote the value an error is about.
    text: &'a str,
}

impl Messages<'_> {
    /// The scalar at `location`, as written.
    fn scalar_at(&self, location: &Location) -> Option<&str> {
        let span = location.span();
        let start = usize::try_from(span.byte_offset()?).ok()?;
        let len = usize::try_from(span.byte_len()?).ok()?;
        self.text
            .get(start..start.checked_add(len)?)
            .filter(|s| !s.is_empty())
    }

    /// `invalid type: string "abc", expected u64`, naming what was found at
    /// `location` as serde does (a block sequence or mapping, which starts with no
    /// mark of its own, goes unnamed).
    fn invalid(&self, location: &Location, expected: &str) -> String {
        let Some(written) = self.scalar_at(location) else {
            return format!("invalid type, expected {expected}");
        };
        let found = match written {
            // The mark that opens a flow collection.
            "[" => "sequence".to_owned(),
            "{" => "map".to_owned(),
            scalar => match from_str::<serde_json::Value>(scalar) {
                Ok(serde_json::Value::String(s)) => format!("string {s:?}"),
                Ok(serde_json::Value::Bool(b)) => format!("boolean `{b}`"),
                Ok(serde_json::Value::Null) => "null".to_owned(),
                Ok(serde_json::Value::Number(n)) if n.is_f64() => format!("floating point `{n}`"),
                // An integer out of an integer type's range.
                Ok(serde_json::Value::Number(n)) if integer_type(expected) => {
                    return format!("invalid value: integer `{n}`, expected {expected}");
                }
                Ok(serde_json::Value::Number(n)) => format!("integer `{n}`"),
                _ => format!("`{scalar}`"),
            },
        };
        format!("invalid type: {found}, expected {expected}")
    }
}

impl MessageFormatter for Messages<'_> {
    fn format_message<'e>(&self, err: &'e serde_saphyr::Error) -> Cow<'e, str> {
        use serde_saphyr::Error as E;
        match err {
            E::DuplicateMappingKey { key: Some(key), .. } => {
                format!("duplicate entry with key {key:?}").into()
            }
            E::DuplicateMappingKey { key: None, .. } => "duplicate entry in a mapping".into(),
            E::InvalidScalar { ty, location } => {
                let expected = match *ty {
                    "floating point" => "a number",
                    "boolean" => "a boolean",
                    other => other,
                };
                self.invalid(location, expected).into()
            }
            E::InvalidBooleanStrict { location } => self.invalid(location, "a boolean").into(),
            E::NullIntoString { .. } => "invalid type: null, expected a string".into(),
            E::Unexpected { expected, location } => {
                let expected = match *expected {
                    "string scalar" => "a string",
                    "sequence start" => "a sequence",
                    "mapping start" => "a mapping",
                    other => other,
                };
                self.invalid(location, expected).into()
            }
            E::NonFiniteFloat { value, .. } => {
                format!("{value} is not a finite number (quote it to make it a string)").into()
            }
            // serde's own words (the parser words these two its own way).
            E::SerdeUnknownField {
                field, expected, ..
            } => match one_of(expected) {
                Some(expected) => format!("unknown field `{field}`, expected {expected}"),
                None => format!("unknown field `{field}`, there are no fields"),
            }
            .into(),
            E::SerdeUnknownVariant {
                variant, expected, ..
            } => match one_of(expected) {
                Some(expected) => format!("unknown variant `{variant}`, expected {expected}"),
                None => format!("unknown variant `{variant}`, there are no variants"),
            }
            .into(),
            E::MultipleDocuments { .. } => "more than one YAML document, where one is read".into(),
            _ => DefaultMessageFormatter.format_message(err),
        }
    }
}

/// Whether a type the parser names is an integer type (`u8`, `i64`, ...).
fn integer_type(name: &str) -> bool {
    name.strip_prefix(['u', 'i'])
        .is_some_and(|bits| !bits.is_empty() && bits.bytes().all(|b| b.is_ascii_digit()))
}

/// `` `a` ``, `` `a` or `b` ``, `` one of `a`, `b`, `c` ``, as serde lists names; `None`
/// for none.
fn one_of(names: &[&str]) -> Option<String> {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        [a, b] => Some(format!("{a} or {b}")),
        all => Some(format!("one of {}", all.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn value(text: &str) -> serde_json::Value {
        from_str(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn error(text: &str) -> String {
        from_str::<serde_json::Value>(text).unwrap_err().to_string()
    }

    #[test]
    fn scalars_resolve_as_yaml_1_2_core_schema() {
        let text = "\
a: yes
b: on
c: True
d: FALSE
e: 08
f: 0755
g: 1_000
h: 0x10
i: 0o17
j: 1e3
k: '2'
l: 2
m: ~
n:
o: Null
p: 2001-12-14
q: -0x10
r: 0.5
s: !!str 3
t: !!binary aGVsbG8=
";
        assert_eq!(
            value(text),
            json!({
                "a": "yes", "b": "on", "c": true, "d": false, "e": "08", "f": "0755",
                "g": "1_000", "h": 16, "i": 15, "j": 1000.0, "k": "2", "l": 2, "m": null,
                "n": null, "o": null, "p": "2001-12-14", "q": -16, "r": 0.5, "s": "3",
                "t": "aGVsbG8="
            })
        );
        assert_eq!(value(""), json!(null));
        assert_eq!(value("# only a comment\n"), json!(null));
    }

    /// Where serde-saphyr reads otherwise than serde_yaml did, as Go's YAML reader
    /// (kubectl's) does: pinned, so that a change is seen.
    #[test]
    fn readings_that_differ_from_serde_yaml() {
        // Upper-case radix prefixes are numbers (serde_yaml: strings).
        assert_eq!(
            value("a: 0X10\nb: 0B11\nc: 0O17\n"),
            json!({"a": 16, "b": 3, "c": 15})
        );
        // An integer too large for 64 bits is a float (serde_yaml: an error).
        assert_eq!(
            value("a: 123456789012345678901234567890\n"),
            json!({"a": 1.2345678901234568e29})
        );
        // Keys that read as numbers or booleans are their text (serde_yaml: a number
        // or boolean key, which no string field takes); a null key is an error.
        assert_eq!(
            value("{1: a, 0x10: b, true: c}\n"),
            json!({"1": "a", "0x10": "b", "true": "c"})
        );
        assert_eq!(
            error("{~: a}\n"),
            "invalid type: null, expected a string at line 1 column 2"
        );
    }

    #[test]
    fn duplicate_keys_are_refused_where_they_are() {
        assert_eq!(
            error("a: 1\nb: 2\na: 3\n"),
            "duplicate entry with key \"a\" at line 3 column 1"
        );
        assert_eq!(
            error("x:\n  y: [1, {z: 1, z: 2}]\n"),
            "x.y[1]: duplicate entry with key \"z\" at line 2 column 17"
        );
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let text = "\
base: &base {app: web, tier: front}
copy: *base
merged:
  <<: *base
  tier: back
list:
  <<: [{a: 1}, {a: 2, b: 2}]
";
        assert_eq!(
            value(text),
            json!({
                "base": {"app": "web", "tier": "front"},
                "copy": {"app": "web", "tier": "front"},
                "merged": {"app": "web", "tier": "back"},
                "list": {"a": 1, "b": 2},
            })
        );
        // An anchor used many times is no alias bomb.
        let many: String = (0..500).map(|i| format!("p{i}: *r\n")).collect();
        let doc = value(&format!("r: &r {{cpu: 1}}\n{many}"));
        assert_eq!(doc["p499"], json!({"cpu": 1}));
        assert_eq!(
            error("a: *nowhere\n"),
            "alias references unknown anchor at line 1 column 4"
        );
    }

    #[test]
    fn non_finite_numbers_and_foreign_tags_are_refused() {
        assert_eq!(
            error("a:\n  b: .inf\n"),
            "a.b: .inf is not a finite number (quote it to make it a string) at line 2 column 6"
        );
        assert_eq!(value("a: '.inf'\n"), json!({"a": ".inf"}));
        assert_eq!(
            error("a: !secret x\n"),
            "unsupported tag `!secret` at line 1 column 12"
        );
    }

    #[test]
    fn large_documents_are_read() {
        let items: String = (0..60_000)
            .map(|i| format!("- {{name: n{i}, labels: {{a: b, c: d}}}}\n"))
            .collect();
        let doc = value(&items);
        assert_eq!(doc.as_array().unwrap().len(), 60_000);
    }

    #[test]
    fn syntax_errors_have_no_field_path() {
        assert_eq!(
            error("a:\n  b: 1\n c: 2\n"),
            "while parsing a block mapping, did not find expected key at line 3 column 2"
        );
        assert_eq!(
            error("a: [1, 2\n"),
            "unclosed bracket '[' at line 1 column 4"
        );
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "read for their errors")]
    struct Typed {
        count: Option<u8>,
        flag: Option<bool>,
        ratio: Option<f64>,
        name: Option<String>,
        items: Option<Vec<String>>,
    }

    fn typed_error(text: &str) -> String {
        from_str::<Typed>(text).unwrap_err().to_string()
    }

    #[test]
    fn typed_errors_name_the_field_and_the_value() {
        assert_eq!(
            typed_error("count: abc\n"),
            "count: invalid type: string \"abc\", expected u8 at line 1 column 8"
        );
        assert_eq!(
            typed_error("count: 300\n"),
            "count: invalid value: integer `300`, expected u8 at line 1 column 8"
        );
        assert_eq!(
            typed_error("count: 1.5\n"),
            "count: invalid type: floating point `1.5`, expected u8 at line 1 column 8"
        );
        assert_eq!(
            typed_error("flag: yes\n"),
            "flag: invalid type: string \"yes\", expected a boolean at line 1 column 7"
        );
        assert_eq!(
            typed_error("flag: 1\n"),
            "flag: invalid type: integer `1`, expected a boolean at line 1 column 7"
        );
        assert_eq!(
            typed_error("count: -1\n"),
            "count: invalid value: integer `-1`, expected u8 at line 1 column 8"
        );
        assert_eq!(
            typed_error("ratio: x\n"),
            "ratio: invalid type: string \"x\", expected a number at line 1 column 8"
        );
        assert_eq!(
            typed_error("name: [a]\n"),
            "name: invalid type: sequence, expected a string at line 1 column 7"
        );
        assert_eq!(
            typed_error("name: {a: b}\n"),
            "name: invalid type: map, expected a string at line 1 column 7"
        );
        assert_eq!(
            typed_error("name:\n  a: b\n"),
            "name: invalid type, expected a string at line 2 column 3"
        );
        assert_eq!(
            typed_error("items: x\n"),
            "items: invalid type: string \"x\", expected a sequence at line 1 column 8"
        );
        assert_eq!(
            typed_error("colour: red\n"),
            "colour: unknown field `colour`, expected one of `count`, `flag`, `ratio`, `name`, `items` at line 1 column 1"
        );
        assert_eq!(
            typed_error("name: a\nname: b\n"),
            "duplicate entry with key \"name\" at line 2 column 1"
        );
        assert_eq!(
            typed_error("name: a\n---\nname: b\n"),
            "more than one YAML document, where one is read at line 3 column 1"
        );
    }

    #[test]
    fn documents_of_a_stream() {
        let docs = documents("a: 1\n---\n# nothing\n---\nb: 2\n").unwrap();
        let docs: Vec<_> = docs.into_iter().filter(|d| !d.is_null()).collect();
        assert_eq!(docs, [json!({"a": 1}), json!({"b": 2})]);
    }

    #[test]
    fn printed_yaml_quotes_in_single_quotes_where_it_must() {
        let doc = json!({
            "empty": "",
            "plain": "kube-system",
            "number": "1",
            "bool": "true",
            "quote": "it's",
            "colon": "a: b",
            "tab": "a\tb",
            "lines": "one\ntwo\n",
            "long": "word ".repeat(40).trim_end(),
            "list": [{"name": "x", "weight": 2}],
            "float": 50.0,
            "nothing": null,
            "none": {},
        });
        let long = "word ".repeat(40);
        assert_eq!(
            to_string(&doc).unwrap(),
            format!(
                "bool: 'true'\ncolon: 'a: b'\nempty: ''\nfloat: 50.0\nlines: |\n  one\n  two\nlist:\n- name: x\n  weight: 2\nlong: {}\nnone: {{}}\nnothing: null\nnumber: '1'\nplain: kube-system\nquote: it's\ntab: \"a\\tb\"\n",
                long.trim_end()
            )
        );
        let back: serde_json::Value = from_str(&to_string(&doc).unwrap()).unwrap();
        assert_eq!(back, doc);
    }
}
