//! Plugin modules in OCI registries: pulled for `oci:` module sources, pushed by
//! `berth plugin push`, in the layout of the wasm OCI artifact convention (what
//! wasm-pkg-tools and Spin push): an OCI image manifest whose config has the media
//! type `application/vnd.wasm.config.v0+json` and whose one layer, of media type
//! `application/wasm`, is the component.
//!
//! What a pull checks: the manifest's bytes against the digest the reference pins
//! (or the registry reports), and the layer's bytes against the layer digest the
//! manifest names. Pulled manifests and layers are kept by digest in a [`Store`]
//! under the runtime's cache directory, with the digest each tag last resolved to:
//! a pinned module already there is loaded without asking the registry, and a tag
//! whose registry cannot be reached loads what it last resolved to (with a warning).
//! A registry that answers and refuses (wrong credentials, no such tag or digest)
//! is an error, not a reason to fall back.
//!
//! A leaf room: it imports nothing else of the crate. The client library is async;
//! [`block_on`] runs its futures on a runtime of their own, so that the synchronous
//! module loading can call it from any thread.

mod credentials;
mod reference;
mod store;

pub use credentials::{Credentials, Login};
pub use reference::{OciRef, SCHEME, SHAPE, check_digest};
pub use store::{Store, digest_of};

use oci_client::errors::{OciDistributionError, OciErrorCode};
use std::time::Duration;
use store::Blob;

/// The media type of a wasm artifact's config.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the component layer.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The media type of the manifest.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// How registries are reached: with which credentials, and which over plain HTTP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// The docker config file the credentials come from (none: anonymous).
    pub docker_config: Option<std::path::PathBuf>,
    /// Registries (`HOST:PORT`) reached over plain HTTP; every other over HTTPS.
    pub plain_http: Vec<String>,
}

/// Why a module could not be pulled or pushed. Each message starts with the
/// reference it concerns.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The registry could not be reached, and no copy of the module is kept.
    #[error("{reference}: cannot reach registry {registry}: {reason}")]
    Unreachable {
        /// The reference.
        reference: String,
        /// The registry.
        registry: String,
        /// What the connection said.
        reason: String,
    },
    /// The registry wants credentials and refused those given (or none were given).
    #[error("{reference}: registry {registry} refused access: {detail}")]
    Refused {
        /// The reference.
        reference: String,
        /// The registry.
        registry: String,
        /// Which credentials were tried, and what the registry said.
        detail: String,
    },
    /// The registry has no such tag, digest or repository.
    #[error("{reference}: {detail}")]
    NotFound {
        /// The reference.
        reference: String,
        /// What is missing.
        detail: String,
    },
    /// Bytes whose digest is not the expected one.
    #[error("{reference}: digest mismatch: {what} should be {expected} but its bytes are {actual}")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// The manifest or the layer.
        what: String,
        /// The digest it should have.
        expected: String,
        /// The digest of what was served.
        actual: String,
    },
    /// The manifest is not a wasm artifact's.
    #[error("{reference}: not a wasm OCI artifact: {detail}")]
    Layout {
        /// The reference.
        reference: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The credentials file could not be read.
    #[error("{0}")]
    Credentials(String),
    /// Anything else the registry or the client said.
    #[error("{reference}: {detail}")]
    Registry {
        /// The reference.
        reference: String,
        /// What went wrong.
        detail: String,
    },
    /// The module file to push could not be read.
    #[error("{path}: cannot read: {error}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        error: std::io::Error,
    },
}

/// A module pulled (or found in the store).
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The component's bytes, checked against `layer_digest`.
    pub bytes: Vec<u8>,
    /// The manifest's digest.
    pub manifest_digest: String,
    /// The layer's digest (the sha256 of `bytes`).
    pub layer_digest: String,
    /// Whether it came from the store because the registry could not be reached.
    pub offline: bool,
}

/// What a tag resolves to now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The manifest's digest.
    pub manifest_digest: String,
    /// Its layer's digest: the sha256 of the component.
    pub layer_digest: String,
}

/// What a push made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The manifest's digest: what `@sha256:` pins.
    pub digest: String,
    /// The layer's digest (the sha256 of the module).
    pub layer_digest: String,
    /// The module's size in bytes.
    pub size: usize,
}

/// What [`push`] writes in the artifact's config besides the layer's digest: the
/// component's interfaces (the convention's `component` field) and who made it.
#[derive(Clone, Debug, Default)]
pub struct PushInfo {
    /// The interfaces it imports.
    pub imports: Vec<String>,
    /// The interfaces it exports.
    pub exports: Vec<String>,
    /// Annotations of the manifest (`org.opencontainers.image.*`).
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// Runs `fut` to completion on a runtime of its own, on a thread of its own: callable
/// from synchronous code on any thread, inside a tokio runtime or not.
pub fn block_on<F>(fut: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread tokio runtime starts")
                .block_on(fut)
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// A client of one registry, with the credentials for it.
struct Session {
    client: oci_client::Client,
    auth: oci_client::secrets::RegistryAuth,
    user: Option<String>,
    file: Option<String>,
    reference: String,
    registry: String,
}

/// The descriptor of a blob in a manifest.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

/// An OCI image manifest, the fields read and written here.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    schema_version: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

impl Session {
    fn open(r: &OciRef, access: &Access) -> Result<Self, OciError> {
        // The host's TLS is rustls with ring; the client library brings no provider
        // of its own. Installing it again (another thread did) is harmless.
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let credentials = match &access.docker_config {
            Some(file) => Credentials::load(file).map_err(OciError::Credentials)?,
            None => Credentials::default(),
        };
        let config = oci_client::client::ClientConfig {
            protocol: oci_client::client::ClientProtocol::HttpsExcept(access.plain_http.clone()),
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            user_agent: concat!("berth/", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        };
        let client = oci_client::Client::try_from(config).map_err(|e| OciError::Registry {
            reference: r.to_string(),
            detail: format!("cannot make a registry client: {e}"),
        })?;
        Ok(Session {
            client,
            auth: credentials.auth_for(r.registry()),
            user: credentials.login(r.registry()).map(|l| l.username.clone()),
            file: credentials.file.as_ref().map(|f| f.display().to_string()),
            reference: r.to_string(),
            registry: r.registry().to_owned(),
        })
    }

    /// What a failure of the client library means here.
    fn error(&self, e: OciDistributionError, what: &str) -> OciError {
        let reference = self.reference.clone();
        let registry = self.registry.clone();
        let refused = || {
            let detail = match (&self.user, &self.file) {
                (Some(u), Some(f)) => format!(
                    "{what}: the registry refused user {u:?} (credentials from {f}): wrong password, or no permission"
                ),
                (_, Some(f)) => format!(
                    "{what}: the registry wants credentials and {f} has none for {registry}"
                ),
                _ => format!(
                    "{what}: the registry wants credentials and none are configured (berth.oci.dockerConfig, or --docker-config)"
                ),
            };
            OciError::Refused {
                reference: reference.clone(),
                registry: registry.clone(),
                detail,
            }
        };
        match e {
            OciDistributionError::RequestError(re) if re.is_connect() || re.is_timeout() => {
                OciError::Unreachable {
                    reference,
                    registry,
                    reason: chain(&re),
                }
            }
            OciDistributionError::ServerError { code, .. } if code >= 500 => {
                OciError::Unreachable {
                    reference,
                    registry,
                    reason: format!("{what}: the registry answered {code}"),
                }
            }
            OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_) => refused(),
            OciDistributionError::ServerError {
                code: 401 | 403, ..
            } => refused(),
            OciDistributionError::RegistryError { envelope, .. } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                if codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
                {
                    return refused();
                }
                let message = envelope
                    .errors
                    .iter()
                    .map(|e| format!("{:?}: {}", e.code, e.message))
                    .collect::<Vec<_>>()
                    .join("; ");
                if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NotFound
                    )
                }) {
                    OciError::NotFound {
                        reference,
                        detail: format!("{what}: the registry has none ({message})"),
                    }
                } else {
                    OciError::Registry {
                        reference,
                        detail: format!("{what}: {message}"),
                    }
                }
            }
            OciDistributionError::ServerError { code: 404, .. } => OciError::NotFound {
                reference,
                detail: format!("{what}: the registry has none (404)"),
            },
            OciDistributionError::RequestError(re) => OciError::Registry {
                reference,
                detail: format!("{what}: {}", chain(&re)),
            },
            other => OciError::Registry {
                reference,
                detail: format!("{what}: {other}"),
            },
        }
    }

    /// The manifest `r` names (by its digest when pinned, else by its tag), checked
    /// against its digest, and that digest.
    async fn manifest(&self, r: &OciRef) -> Result<(Vec<u8>, String), OciError> {
        let what = match r.digest() {
            Some(d) => format!("manifest {d}"),
            None => format!("tag {}", r.tag().unwrap_or_default()),
        };
        let (body, reported) = self
            .client
            .pull_manifest_raw(&r.client_ref(), &self.auth, &[OCI_MANIFEST_MEDIA_TYPE])
            .await
            .map_err(|e| self.error(e, &format!("fetching {what}")))?;
        let actual = digest_of(&body);
        let expected = r.digest().map(str::to_owned).unwrap_or(reported);
        if actual != expected {
            return Err(OciError::DigestMismatch {
                reference: self.reference.clone(),
                what: "the manifest".into(),
                expected,
                actual,
            });
        }
        Ok((body.to_vec(), actual))
    }

    async fn layer(&self, r: &OciRef, layer: &Descriptor) -> Result<Vec<u8>, OciError> {
        let mut out: Vec<u8> = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
        let desc = oci_client::manifest::OciDescriptor {
            media_type: layer.media_type.clone(),
            digest: layer.digest.clone(),
            size: layer.size,
            ..Default::default()
        };
        self.client
            .pull_blob(&r.client_ref(), &desc, &mut out)
            .await
            .map_err(|e| match e {
                OciDistributionError::DigestError(_) => OciError::DigestMismatch {
                    reference: self.reference.clone(),
                    what: format!("the layer {}", layer.digest),
                    expected: layer.digest.clone(),
                    actual: "different".into(),
                },
                e => self.error(e, &format!("fetching the layer {}", layer.digest)),
            })?;
        let actual = digest_of(&out);
        if actual != layer.digest {
            return Err(OciError::DigestMismatch {
                reference: self.reference.clone(),
                what: format!("the layer {}", layer.digest),
                expected: layer.digest.clone(),
                actual,
            });
        }
        Ok(out)
    }
}

/// The errors of a reqwest error and its sources, as one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// The component layer of a manifest: exactly one layer of media type
/// `application/wasm`.
fn wasm_layer(reference: &str, manifest: &[u8]) -> Result<Descriptor, OciError> {
    let layout = |detail: String| OciError::Layout {
        reference: reference.to_owned(),
        detail,
    };
    let m: Manifest = serde_json::from_slice(manifest)
        .map_err(|e| layout(format!("the manifest is not an OCI image manifest: {e}")))?;
    if m.schema_version != 2 {
        return Err(layout(format!(
            "manifest schemaVersion {} (expected 2)",
            m.schema_version
        )));
    }
    let wasm: Vec<&Descriptor> = m
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER_MEDIA_TYPE)
        .collect();
    match wasm.as_slice() {
        [one] => Ok((*one).clone()),
        _ => Err(layout(format!(
            "expected one layer of media type {WASM_LAYER_MEDIA_TYPE}, found {} layer(s): [{}]",
            m.layers.len(),
            m.layers
                .iter()
                .map(|l| l.media_type.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The module `r` names, from `store` when it is there and pinned, else from the
/// registry (kept in `store`); a tag whose registry cannot be reached is served
/// from `store` as it last resolved. See the module documentation.
pub fn pull(r: &OciRef, access: &Access, store: Option<&Store>) -> Result<Pulled, OciError> {
    // A pinned module already kept: no need to ask.
    if let (Some(d), Some(s)) = (r.digest(), store)
        && let Some(p) = from_store(r, d, s)
    {
        return Ok(p);
    }
    let session = Session::open(r, access)?;
    let fetched = block_on(async {
        let (manifest, digest) = session.manifest(r).await?;
        let layer = wasm_layer(&session.reference, &manifest)?;
        let bytes = match store.map(|s| s.blob(&layer.digest)) {
            Some(Blob::Found(b)) => b,
            _ => session.layer(r, &layer).await?,
        };
        Ok::<_, OciError>((manifest, digest, layer, bytes))
    });
    let (manifest, digest, layer, bytes) = match fetched {
        Ok(f) => f,
        Err(OciError::Unreachable {
            reference,
            registry,
            reason,
        }) => {
            // The last module the tag resolved to, if one is kept.
            let kept = store.and_then(|s| {
                let d = r.digest().map(str::to_owned).or_else(|| s.tag(r))?;
                from_store(r, &d, s)
            });
            return match kept {
                Some(mut p) => {
                    tracing::warn!(
                        module = %r,
                        manifest = %p.manifest_digest,
                        "registry {registry} cannot be reached ({reason}); loading the module it last served, kept in {}",
                        store.map(|s| s.dir().display().to_string()).unwrap_or_default()
                    );
                    p.offline = true;
                    Ok(p)
                }
                None => Err(OciError::Unreachable {
                    reference,
                    registry,
                    reason: format!("{reason}; and no copy of it is kept"),
                }),
            };
        }
        Err(OciError::NotFound { reference, detail }) if r.digest().is_some() => {
            // Say where the tag is, so that a stale pin is told from a typo.
            let hint = r
                .at_tag()
                .and_then(|t| resolve(&t, access).ok())
                .map(|now| {
                    format!(
                        "; tag {} is at {}",
                        r.tag().unwrap_or_default(),
                        now.manifest_digest
                    )
                })
                .unwrap_or_default();
            return Err(OciError::NotFound {
                reference,
                detail: format!("{detail}{hint}"),
            });
        }
        Err(e) => return Err(e),
    };
    if let Some(s) = store {
        let kept = s
            .put_blob(&layer.digest, &bytes)
            .and_then(|()| s.put_blob(&digest, &manifest))
            .and_then(|()| {
                if r.digest().is_none() {
                    s.put_tag(r, &digest)
                } else {
                    Ok(())
                }
            });
        if let Err(e) = kept {
            tracing::warn!(module = %r, dir = %s.dir().display(), "cannot keep the pulled module: {e}");
        }
    }
    tracing::info!(module = %r, manifest = %digest, layer = %layer.digest, "pulled a plugin module");
    Ok(Pulled {
        bytes,
        manifest_digest: digest,
        layer_digest: layer.digest,
        offline: false,
    })
}

/// A module kept in the store under manifest digest `d`, both blobs checked.
fn from_store(r: &OciRef, d: &str, s: &Store) -> Option<Pulled> {
    let Blob::Found(manifest) = s.blob(d) else {
        return None;
    };
    let layer = wasm_layer(&r.to_string(), &manifest).ok()?;
    match s.blob(&layer.digest) {
        Blob::Found(bytes) => Some(Pulled {
            bytes,
            manifest_digest: d.to_owned(),
            layer_digest: layer.digest,
            offline: false,
        }),
        Blob::Corrupt => {
            tracing::warn!(module = %r, layer = %layer.digest, "a kept layer's bytes do not match its digest; removed, to be fetched again");
            None
        }
        Blob::Missing => None,
    }
}

/// What `r`'s tag (or pinned digest) names in the registry now: its manifest and
/// component layer digests. The registry is asked for the manifest only.
pub fn resolve(r: &OciRef, access: &Access) -> Result<Resolved, OciError> {
    let session = Session::open(r, access)?;
    block_on(async {
        let (manifest, digest) = session.manifest(r).await?;
        let layer = wasm_layer(&session.reference, &manifest)?;
        Ok(Resolved {
            manifest_digest: digest,
            layer_digest: layer.digest,
        })
    })
}

/// Pushes a component to `r`'s tag as a wasm OCI artifact; returns the manifest's
/// digest. `r` must name a tag and no digest.
pub fn push(
    bytes: &[u8],
    r: &OciRef,
    access: &Access,
    info: &PushInfo,
) -> Result<Pushed, OciError> {
    if r.digest().is_some() || r.tag().is_none() {
        return Err(OciError::Registry {
            reference: r.to_string(),
            detail: "a push names a tag and no digest (the digest is what the push makes)".into(),
        });
    }
    let layer_digest = digest_of(bytes);
    let created = k8s_openapi::jiff::Timestamp::now().to_string();
    let config = serde_json::json!({
        "created": created,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {
            "imports": info.imports,
            "exports": info.exports,
            "target": null,
        },
    });
    let config_bytes = serde_json::to_vec(&config).expect("JSON of JSON values");
    let config_digest = digest_of(&config_bytes);
    let mut annotations = info.annotations.clone();
    annotations
        .entry("org.opencontainers.image.created".into())
        .or_insert(created);
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST_MEDIA_TYPE.into()),
        config: Some(Descriptor {
            media_type: WASM_CONFIG_MEDIA_TYPE.into(),
            digest: config_digest.clone(),
            size: config_bytes.len() as i64,
            annotations: None,
        }),
        layers: vec![Descriptor {
            media_type: WASM_LAYER_MEDIA_TYPE.into(),
            digest: layer_digest.clone(),
            size: bytes.len() as i64,
            annotations: None,
        }],
        annotations: Some(annotations),
    };
    let manifest_bytes = serde_json::to_vec(&manifest).expect("JSON of a manifest");
    let digest = digest_of(&manifest_bytes);
    let session = Session::open(r, access)?;
    let target = r.client_ref();
    block_on(async {
        session
            .client
            .store_auth_if_needed(target.resolve_registry(), &session.auth)
            .await;
        session
            .client
            .push_blob(&target, bytes.to_vec(), &layer_digest)
            .await
            .map_err(|e| session.error(e, "pushing the layer"))?;
        session
            .client
            .push_blob(&target, config_bytes, &config_digest)
            .await
            .map_err(|e| session.error(e, "pushing the config"))?;
        session
            .client
            .push_manifest_raw(
                &target,
                manifest_bytes,
                OCI_MANIFEST_MEDIA_TYPE.parse().expect("a header value"),
            )
            .await
            .map_err(|e| session.error(e, "pushing the manifest"))?;
        Ok::<_, OciError>(())
    })?;
    Ok(Pushed {
        digest,
        layer_digest,
        size: bytes.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(layers: &[&str]) -> Vec<u8> {
        let layers: Vec<serde_json::Value> = layers
            .iter()
            .map(|t| serde_json::json!({"mediaType": t, "digest": digest_of(t.as_bytes()), "size": 1}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": digest_of(b"{}"), "size": 2},
            "layers": layers,
        }))
        .unwrap()
    }

    #[test]
    fn the_component_is_the_one_application_wasm_layer() {
        let l = wasm_layer("r", &manifest(&["application/wasm"])).unwrap();
        assert_eq!(l.digest, digest_of(b"application/wasm"));
        // Other layers beside it (a signature, docs) are left alone.
        assert!(wasm_layer("r", &manifest(&["text/plain", "application/wasm"])).is_ok());
        let e = wasm_layer(
            "r",
            &manifest(&["application/vnd.oci.image.layer.v1.tar+gzip"]),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "r: not a wasm OCI artifact: expected one layer of media type application/wasm, found 1 layer(s): [application/vnd.oci.image.layer.v1.tar+gzip]"
        );
        let e = wasm_layer("r", &manifest(&["application/wasm", "application/wasm"])).unwrap_err();
        assert!(e.to_string().contains("found 2 layer(s)"), "{e}");
        let e = wasm_layer("r", b"{\"manifests\": []}").unwrap_err();
        assert!(e.to_string().contains("not an OCI image manifest"), "{e}");
    }

    #[test]
    fn a_pinned_module_kept_in_the_store_loads_without_a_registry() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::new(root.path().join("oci"));
        let m = manifest(&["application/wasm"]);
        let d = digest_of(&m);
        store.put_blob(&d, &m).unwrap();
        store
            .put_blob(&digest_of(b"application/wasm"), b"application/wasm")
            .unwrap();
        // Port 9 on loopback: nothing listens; the store answers first.
        let r = OciRef::parse(&format!("oci://127.0.0.1:9/p/x:1@{d}")).unwrap();
        let access = Access {
            plain_http: vec!["127.0.0.1:9".into()],
            ..Access::default()
        };
        let p = pull(&r, &access, Some(&store)).unwrap();
        assert_eq!(p.bytes, b"application/wasm");
        assert_eq!(p.manifest_digest, d);
        assert!(!p.offline);
        // Without the store, the registry is asked, and cannot be reached.
        let e = pull(&r, &access, None).unwrap_err();
        assert!(matches!(e, OciError::Unreachable { .. }), "{e}");
        assert!(
            e.to_string().contains("cannot reach registry 127.0.0.1:9"),
            "{e}"
        );
        assert!(e.to_string().contains("no copy of it is kept"), "{e}");
    }
}
