//! Kubernetes name validation in the words of apimachinery's `validation` package,
//! and the `field.Error` wording plugins use to report bad args.

/// The longest label value and name part of a qualified name.
pub const MAX_NAME_LENGTH: usize = 63;
/// The longest DNS-1123 subdomain.
pub const MAX_DNS1123_SUBDOMAIN_LENGTH: usize = 253;

const NAME_PART_FMT: &str = "name part must consist of alphanumeric characters, '-', '_' \
     or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or \
     'my.name',  or '123-abc', regex used for validation is \
     '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

const PREFIX_FMT: &str = "prefix part a lowercase RFC 1123 subdomain must consist of lower \
     case alphanumeric characters, '-' or '.', and must start and end with an \
     alphanumeric character (e.g. 'example.com', regex used for validation is \
     '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Whether `name` matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` (not empty).
pub fn is_qualified_name_part(name: &str) -> bool {
    let b = name.as_bytes();
    let edge = |c: Option<&u8>| c.is_some_and(u8::is_ascii_alphanumeric);
    edge(b.first())
        && edge(b.last())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// apimachinery's `IsDNS1123Label`: at most 63 lower case alphanumerics or `-`,
/// starting and ending alphanumeric.
pub fn is_dns1123_label(value: &str) -> bool {
    let b = value.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= MAX_NAME_LENGTH
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// apimachinery's `IsDNS1123Subdomain`: at most 253 characters of dot-separated
/// labels of lower case alphanumerics or `-`, each starting and ending alphanumeric.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= MAX_DNS1123_SUBDOMAIN_LENGTH
        && value.split('.').all(|label| {
            let b = label.as_bytes();
            let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            !b.is_empty()
                && alnum(&b[0])
                && alnum(&b[b.len() - 1])
                && b.iter().all(|c| alnum(c) || *c == b'-')
        })
}

/// The two wordings of [`qualified_name_errors`]; they differ only on invalid input.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wording {
    /// apimachinery's, to the letter.
    Upstream,
    /// [`qualified_name_errors_short`]'s.
    Short,
}

fn qualified_name(value: &str, wording: Wording) -> Vec<String> {
    let (prefix, name) = match value.split_once('/') {
        None => (None, value),
        Some((_, rest)) if rest.contains('/') => {
            let msg = match wording {
                Wording::Upstream => {
                    "a qualified name must consist of alphanumeric characters, '-', '_' or \
                     '.', and must start and end with an alphanumeric character (e.g. \
                     'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
                     '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS \
                     subdomain prefix and '/' (e.g. 'example.com/MyName')"
                }
                Wording::Short => {
                    "a qualified name must consist of alphanumeric characters, '-', '_' or \
                     '.', and must start and end with an alphanumeric character, with an \
                     optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                }
            };
            return vec![msg.to_owned()];
        }
        Some((prefix, name)) => (Some(prefix), name),
    };
    let mut errs = Vec::new();
    match prefix {
        Some("") => errs.push("prefix part must be non-empty".to_owned()),
        Some(p) if !is_dns1123_subdomain(p) => errs.push(PREFIX_FMT.to_owned()),
        _ => {}
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > MAX_NAME_LENGTH {
        errs.push(format!(
            "name part must be no more than {MAX_NAME_LENGTH} characters"
        ));
    }
    // Upstream's empty name also fails the pattern; the short wording says it once.
    let pattern_checked = wording == Wording::Upstream || !name.is_empty();
    if pattern_checked && !is_qualified_name_part(name) {
        errs.push(NAME_PART_FMT.to_owned());
    }
    errs
}

/// What is wrong with a qualified name (`[prefix/]name`: label keys, resource
/// names), in the words of apimachinery's `IsQualifiedName`; empty when valid.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    qualified_name(value, Wording::Upstream)
}

/// [`qualified_name_errors`] in the shorter wording some plugins report: a name
/// with several `/` gets a message without the name part's pattern, and an empty
/// name part is only said to be empty. Empty exactly when the name is valid.
pub fn qualified_name_errors_short(value: &str) -> Vec<String> {
    qualified_name(value, Wording::Short)
}

/// apimachinery's `IsQualifiedName` as a yes or no.
pub fn is_qualified_name(value: &str) -> bool {
    qualified_name(value, Wording::Short).is_empty()
}

/// What is wrong with a label value, in the words of apimachinery's
/// `IsValidLabelValue`; empty when valid (the empty value is valid).
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > MAX_NAME_LENGTH {
        errs.push(format!("must be no more than {MAX_NAME_LENGTH} characters"));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(
            "a valid label must be an empty string or consist of alphanumeric characters, \
             '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
             'MyValue',  or 'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                .to_owned(),
        );
    }
    errs
}

/// Whether a resource is a native one (unprefixed or in the `kubernetes.io/`
/// domain), as upstream's `IsNativeResource`.
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Whether a resource is an extended resource (`example.com/foo`), as upstream's
/// `IsExtendedResourceName`.
pub fn is_extended_resource_name(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with("requests.")
        // Quota names it as `requests.<name>`, which must be a qualified name.
        && is_qualified_name(&format!("requests.{name}"))
}

/// Whether a resource may be an extended resource backed by DRA, as upstream's
/// `IsDRAExtendedResourceName`: an extended resource, or a DeviceClass's implicit
/// one (`deviceclass.resource.kubernetes.io/<class>`).
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || name.starts_with(crate::dra::IMPLICIT_EXTENDED_RESOURCE_PREFIX)
}

/// Whether a resource is kept among a node's scalar resources, as upstream's
/// `IsScalarResourceName`: extended, hugepages, prefixed native and attachable
/// volume resources; the resources the scheduler tracks beyond cpu, memory,
/// ephemeral storage and pods.
pub fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || name.starts_with("hugepages-")
        || name.contains("kubernetes.io/")
        || name.starts_with("attachable-volumes-")
}

/// A `field.Invalid` error: `{field}: Invalid value: {value:?}: {detail}` (strings
/// quoted, numbers not).
pub fn invalid(field: &str, value: impl std::fmt::Debug, detail: &str) -> String {
    format!("{field}: Invalid value: {value:?}: {detail}")
}

/// A `field.NotSupported` error: `{field}: Unsupported value: "v": supported values:
/// "a", "b"`.
pub fn unsupported(field: &str, value: &str, supported: &[&str]) -> String {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    format!(
        "{field}: Unsupported value: {value:?}: supported values: {}",
        supported.join(", ")
    )
}

/// A list of strings as Go's `%#v` prints a `[]string` (`[]string{"a", "b"}`), as
/// upstream's `field.Invalid` errors show one.
pub fn go_string_slice(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// Upstream's aggregate error: `None` for no errors, one message alone, several
/// joined in brackets.
pub fn aggregate(mut errs: Vec<String>) -> Option<String> {
    match errs.len() {
        0 => None,
        1 => Some(errs.remove(0)),
        _ => Some(format!("[{}]", errs.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in [
            "cpu",
            "example.com/gpu",
            "a",
            "A_b.c-9",
            "sub.kubernetes.io/x",
            "zone",
            "topology.kubernetes.io/zone",
            "kubernetes.io/metadata.name",
        ] {
            assert!(qualified_name_errors(ok).is_empty(), "{ok}");
            assert!(qualified_name_errors_short(ok).is_empty(), "{ok}");
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in [
            "",
            "/x",
            "a/",
            "a/b/c",
            "-a",
            "a-",
            "a b",
            "Ex.com/x",
            &"x".repeat(64),
        ] {
            assert!(!qualified_name_errors(bad).is_empty(), "{bad:?}");
            assert!(!qualified_name_errors_short(bad).is_empty(), "{bad:?}");
            assert!(!is_qualified_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn qualified_name_wordings() {
        assert_eq!(
            qualified_name_errors(""),
            ["name part must be non-empty", NAME_PART_FMT]
        );
        assert_eq!(
            qualified_name_errors_short(""),
            ["name part must be non-empty"]
        );
        assert!(qualified_name_errors("a/b/c")[0].contains("regex used for validation"));
        assert!(!qualified_name_errors_short("a/b/c")[0].contains("regex"));
        assert_eq!(qualified_name_errors("Example.com/x"), [PREFIX_FMT]);
        assert_eq!(
            qualified_name_errors(&"x".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "A_b.c-9", "a.b-c_d", &"x".repeat(63)] {
            assert!(label_value_errors(ok).is_empty(), "{ok:?}");
        }
        for bad in ["-a", "a/b", &"v".repeat(64)] {
            assert!(!label_value_errors(bad).is_empty(), "{bad:?}");
        }
        assert_eq!(label_value_errors(&"x".repeat(64)).len(), 1);
        assert_eq!(label_value_errors("-a").len(), 1);
        assert_eq!(label_value_errors(&"-".repeat(64)).len(), 2);
    }

    #[test]
    fn dns1123() {
        assert!(is_dns1123_subdomain("example.com"));
        assert!(!is_dns1123_subdomain("Example.com"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
        assert!(is_dns1123_label("a-1"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(!is_dns1123_label("-a"));
    }

    #[test]
    fn resource_names() {
        assert!(is_extended_resource_name("example.com/gpu"));
        assert!(!is_extended_resource_name("cpu"));
        assert!(!is_extended_resource_name("kubernetes.io/foo"));
        assert!(!is_extended_resource_name("requests.example.com/x"));
        assert!(!is_extended_resource_name("example.com/-bad"));
        for scalar in [
            "example.com/gpu",
            "hugepages-2Mi",
            "kubernetes.io/foo",
            "attachable-volumes-aws-ebs",
        ] {
            assert!(is_scalar_resource_name(scalar), "{scalar}");
        }
        for plain in ["cpu", "memory", "pods", "ephemeral-storage"] {
            assert!(!is_scalar_resource_name(plain), "{plain}");
        }
    }

    #[test]
    fn field_errors() {
        assert_eq!(invalid("a.b", "x", "bad"), "a.b: Invalid value: \"x\": bad");
        assert_eq!(invalid("n", -1, "bad"), "n: Invalid value: -1: bad");
        assert_eq!(
            unsupported("t", "Foo", &["A", "B"]),
            "t: Unsupported value: \"Foo\": supported values: \"A\", \"B\""
        );
        assert_eq!(
            go_string_slice(&["a".into(), "b\"".into()]),
            "[]string{\"a\", \"b\\\"\"}"
        );
        assert_eq!(go_string_slice(&[]), "[]string{}");
        assert_eq!(aggregate(vec![]), None);
        assert_eq!(aggregate(vec!["a".into()]).as_deref(), Some("a"));
        assert_eq!(
            aggregate(vec!["a".into(), "b".into()]).as_deref(),
            Some("[a, b]")
        );
    }
}
