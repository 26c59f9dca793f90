//! `oci://REGISTRY/REPOSITORY:TAG[@sha256:DIGEST]`: where a module sits in a registry.

/// The scheme a module reference starts with.
pub const SCHEME: &str = "oci://";

/// The shape of a reference, for messages.
pub const SHAPE: &str = "oci://REGISTRY/REPOSITORY:TAG[@sha256:DIGEST]";

/// A module's place in a registry. The registry is always named (no Docker Hub
/// default), and a tag, a digest or both are given; with a digest, the digest is what
/// is pulled (the tag only documents it), as container runtimes do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OciRef {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl OciRef {
    /// Parses `text`; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some(rest) = text.strip_prefix(SCHEME) else {
            return Err(format!(
                "{text:?} does not start with {SCHEME} (expected {SHAPE})"
            ));
        };
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (rest, None),
        };
        if let Some(d) = digest {
            check_digest(d).map_err(|why| format!("{text:?}: {why}"))?;
        }
        let Some((registry, path)) = name.split_once('/') else {
            return Err(format!("{text:?} names no repository (expected {SHAPE})"));
        };
        if registry.is_empty()
            || !registry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        {
            return Err(format!(
                "{text:?}: {registry:?} is not a registry host (HOST or HOST:PORT)"
            ));
        }
        // A tag follows the last `:` of the last path segment.
        let last = path.rsplit('/').next().unwrap_or(path);
        let (repository, tag) = match last.rsplit_once(':') {
            Some((_, tag)) => (&path[..path.len() - tag.len() - 1], Some(tag)),
            None => (path, None),
        };
        if repository.is_empty() || !repository.split('/').all(valid_path_component) {
            return Err(format!(
                "{text:?}: {repository:?} is not a repository name (lowercase letters, digits and \
                 . _ - between them, segments separated by /)"
            ));
        }
        if let Some(t) = tag
            && !valid_tag(t)
        {
            return Err(format!(
                "{text:?}: {t:?} is not a tag (letters, digits, _ . -, at most 128, not starting with . or -)"
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!(
                "{text:?} names neither a tag (:TAG) nor a digest (@sha256:DIGEST)"
            ));
        }
        Ok(OciRef {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
        })
    }

    /// The registry, `HOST` or `HOST:PORT`.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository in the registry.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, when one is given.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The pinned manifest digest (`sha256:...`), when one is given.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// Whether what it names can change: a tag without a digest.
    pub fn moves(&self) -> bool {
        self.digest.is_none()
    }

    /// The same repository and tag pinned to `digest`.
    pub fn pinned(&self, digest: &str) -> OciRef {
        OciRef {
            digest: Some(digest.to_owned()),
            ..self.clone()
        }
    }

    /// The same repository at its tag only (the digest dropped), when it has a tag.
    pub fn at_tag(&self) -> Option<OciRef> {
        self.tag.as_ref().map(|_| OciRef {
            digest: None,
            ..self.clone()
        })
    }

    /// What the client library addresses.
    pub(super) fn client_ref(&self) -> oci_client::Reference {
        match (&self.tag, &self.digest) {
            (Some(t), Some(d)) => oci_client::Reference::with_tag_and_digest(
                self.registry.clone(),
                self.repository.clone(),
                t.clone(),
                d.clone(),
            ),
            (None, Some(d)) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                d.clone(),
            ),
            (Some(t), None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                t.clone(),
            ),
            (None, None) => unreachable!("a reference has a tag or a digest"),
        }
    }
}

impl std::fmt::Display for OciRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for OciRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        OciRef::parse(s)
    }
}

/// Checks a `sha256:` digest: the algorithm and 64 lowercase hex digits.
pub fn check_digest(d: &str) -> Result<(), String> {
    let Some(hex) = d.strip_prefix("sha256:") else {
        return Err(format!("digest {d:?} is not sha256:<64 hex digits>"));
    };
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!(
            "digest {d:?} is not sha256:<64 lowercase hex digits>"
        ));
    }
    Ok(())
}

/// A path component of a repository name, as the distribution spec has it:
/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn valid_path_component(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator: `.`, `_`, `__` or a run of `-`, between alphanumerics.
        let start = i;
        match b[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if i < b.len() && b[i] == b'_' {
                    i += 1;
                }
            }
            b'-' => {
                while i < b.len() && b[i] == b'-' {
                    i += 1;
                }
            }
            _ => return false,
        }
        if i == start || i >= b.len() || !alnum(b[i]) {
            return false;
        }
    }
    true
}

/// A tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn valid_tag(t: &str) -> bool {
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_parse_into_their_parts_and_print_back() {
        let r = OciRef::parse("oci://127.0.0.1:5000/plugins/avoid-spot:1.0").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "plugins/avoid-spot");
        assert_eq!(r.tag(), Some("1.0"));
        assert_eq!(r.digest(), None);
        assert!(r.moves());
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/plugins/avoid-spot:1.0");

        let text = format!("oci://ghcr.io/acme/node-cost:v2@{D}");
        let r = OciRef::parse(&text).unwrap();
        assert_eq!(
            (r.registry(), r.repository(), r.tag(), r.digest()),
            ("ghcr.io", "acme/node-cost", Some("v2"), Some(D))
        );
        assert!(!r.moves());
        assert_eq!(r.to_string(), text);
        assert_eq!(
            r.at_tag().unwrap().to_string(),
            "oci://ghcr.io/acme/node-cost:v2"
        );

        let r = OciRef::parse(&format!("oci://localhost:5000/x@{D}")).unwrap();
        assert_eq!((r.tag(), r.digest()), (None, Some(D)));
        assert_eq!(r.at_tag(), None);
        assert_eq!(
            OciRef::parse("oci://r.io/a/b:t")
                .unwrap()
                .pinned(D)
                .to_string(),
            format!("oci://r.io/a/b:t@{D}")
        );
    }

    #[test]
    fn bad_references_say_what_is_wrong() {
        let err = |t: &str| OciRef::parse(t).unwrap_err();
        assert!(err("127.0.0.1:5000/x:1").contains("does not start with oci://"));
        assert!(err("oci://ghcr.io").contains("names no repository"));
        assert!(err("oci://ghcr.io/acme/x").contains("names neither a tag"));
        assert!(err("oci://ghcr.io/Acme/x:1").contains("is not a repository name"));
        assert!(err("oci://ghcr.io/acme//x:1").contains("is not a repository name"));
        assert!(err("oci://ghcr.io/acme/x:-1").contains("is not a tag"));
        assert!(err("oci://ghcr.io/acme/x:1@sha256:abc").contains("64 lowercase hex"));
        assert!(err("oci://ghcr.io/acme/x:1@md5:abc").contains("is not sha256:"));
        assert!(err("oci://gh cr.io/acme/x:1").contains("is not a registry host"));
    }

    #[test]
    fn repository_components_follow_the_distribution_grammar() {
        for ok in ["a", "a0", "a.b", "a_b", "a__b", "a--b", "a-b-c"] {
            assert!(valid_path_component(ok), "{ok}");
        }
        for bad in ["", "A", "a.", ".a", "a___b", "a..b", "a-", "a/b"] {
            assert!(!valid_path_component(bad), "{bad}");
        }
    }
}
