//! Who may read the endpoints: authentication and authorization delegated to the API
//! server, as kube-scheduler's secure port does it (k8s.io/apiserver's delegating
//! authenticator and authorizer with kube-scheduler's options).
//!
//! - **Authentication**: a bearer token is checked with a `TokenReview`; a token the
//!   API server rejects (or cannot check) answers 401. A request without a bearer
//!   token is anonymous: user `system:anonymous`, group `system:unauthenticated`.
//! - **Authorization**: a path in `--authorization-always-allow-paths` (default
//!   `/healthz`, `/readyz`, `/livez`; a trailing `*` matches a prefix) is allowed to
//!   anyone, as is the group `system:masters`; anything else is asked of the API server
//!   with a `SubjectAccessReview` of the non-resource path and the request's verb (the
//!   method in lower case: `get`). Denied answers 403; a review that fails answers 500.
//! - **Answers are cached** for 10 s (kube-scheduler's `CacheTTL`, `AllowCacheTTL` and
//!   `DenyCacheTTL`), so a scraper every few seconds costs the API server one review
//!   of each kind per 10 s; failures to ask are not cached.
//! - **Where the reviews go**: `--authentication-kubeconfig` and
//!   `--authorization-kubeconfig`, else the in-cluster service account (kube-scheduler's
//!   default); when neither is given and Berth does not run in a pod, tokens are not
//!   checked (every request is anonymous) and only the always-allowed paths and
//!   `system:masters` pass, with a warning at start, as kube-scheduler does.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// kube-scheduler's `--authorization-always-allow-paths`.
pub const DEFAULT_ALWAYS_ALLOW_PATHS: &[&str] = &["/healthz", "/readyz", "/livez"];

/// How long a review's answer is reused (kube-scheduler's defaults, allowed and denied
/// alike).
pub const REVIEW_CACHE_TTL: Duration = Duration::from_secs(10);

/// How long one review may take (k8s.io/apiserver's `TokenRequestTimeout`).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// Answers kept per cache; when full, expired ones are dropped, then all.
const CACHE_ENTRIES: usize = 4096;

/// The group every request that passed authentication is in.
const AUTHENTICATED: &str = "system:authenticated";
/// The group allowed everything without asking (kube-scheduler's `AlwaysAllowGroups`).
const PRIVILEGED: &str = "system:masters";

/// What `berth run` says about delegation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegationOptions {
    /// `--authentication-kubeconfig` (none: the in-cluster service account).
    pub authentication_kubeconfig: Option<PathBuf>,
    /// `--authorization-kubeconfig` (none: the in-cluster service account).
    pub authorization_kubeconfig: Option<PathBuf>,
    /// `--authorization-always-allow-paths`.
    pub always_allow_paths: Vec<String>,
}

impl Default for DelegationOptions {
    fn default() -> Self {
        DelegationOptions {
            authentication_kubeconfig: None,
            authorization_kubeconfig: None,
            always_allow_paths: DEFAULT_ALWAYS_ALLOW_PATHS
                .iter()
                .map(|p| (*p).to_owned())
                .collect(),
        }
    }
}

/// Who may read the endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessOptions {
    /// Anyone may read everything: `--serve-http`, for local development only.
    Open,
    /// Authentication and authorization delegated to the API server.
    Delegated(DelegationOptions),
}

/// Why delegation could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A kubeconfig given for delegation could not be read or used.
    #[error("{flag} {}: {message}", .file.display())]
    Kubeconfig {
        /// The flag that named it.
        flag: &'static str,
        /// The file.
        file: PathBuf,
        /// What was wrong.
        message: String,
    },
}

/// A request's user, as the API server described it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The user's uid, if any.
    pub uid: Option<String>,
    /// The groups.
    pub groups: Vec<String>,
    /// Extra attributes (scopes and the like).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    fn anonymous() -> Self {
        User {
            name: "system:anonymous".into(),
            uid: None,
            groups: vec!["system:unauthenticated".into()],
            extra: BTreeMap::new(),
        }
    }
}

/// Why a request is not served.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 401: the token was rejected or could not be checked.
    Unauthorized,
    /// 403: the user may not do this.
    Forbidden {
        /// Upstream's message: `forbidden: User "u" cannot get path "/metrics"`.
        message: String,
    },
    /// 500: the API server could not be asked.
    Failed {
        /// Why.
        message: String,
    },
}

struct Cache<K, V> {
    entries: HashMap<K, (Instant, V)>,
}

impl<K: std::hash::Hash + Eq, V: Clone> Cache<K, V> {
    fn new() -> Self {
        Cache {
            entries: HashMap::new(),
        }
    }

    fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.entries
            .get(key)
            .filter(|(expires, _)| *expires > now)
            .map(|(_, v)| v.clone())
    }

    fn put(&mut self, key: K, value: V, now: Instant) {
        if self.entries.len() >= CACHE_ENTRIES {
            self.entries.retain(|_, (expires, _)| *expires > now);
            if self.entries.len() >= CACHE_ENTRIES {
                self.entries.clear();
            }
        }
        self.entries.insert(key, (now + REVIEW_CACHE_TTL, value));
    }
}

/// The authorization question, as the cache's key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Question {
    user: User,
    verb: String,
    path: String,
}

/// Delegated authentication and authorization.
pub struct Delegation {
    authn: Option<kube::Client>,
    authz: Option<kube::Client>,
    always_allow_paths: Vec<String>,
    /// By the token's SHA-256 (tokens are not kept): the user, or `None` if rejected.
    tokens: Mutex<Cache<[u8; 32], Option<User>>>,
    /// Allowed (`Ok`) or the reason denied (`Err`).
    decisions: Mutex<Cache<Question, Result<(), String>>>,
    /// Reviews sent to the API server, for tests and the log.
    reviews: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Delegation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegation")
            .field("authn", &self.authn.is_some())
            .field("authz", &self.authz.is_some())
            .field("always_allow_paths", &self.always_allow_paths)
            .finish_non_exhaustive()
    }
}

async fn client_for(
    flag: &'static str,
    file: Option<&Path>,
) -> Result<Option<kube::Client>, AuthError> {
    let config = match file {
        Some(file) => {
            let err = |message: String| AuthError::Kubeconfig {
                flag,
                file: file.to_owned(),
                message,
            };
            let kc = kube::config::Kubeconfig::read_from(file).map_err(|e| err(e.to_string()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| err(e.to_string()))?
        }
        None => match kube::Config::incluster() {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!("no in-cluster configuration for {flag}: {e}");
                return Ok(None);
            }
        },
    };
    kube::Client::try_from(config)
        .map(Some)
        .map_err(|e| AuthError::Kubeconfig {
            flag,
            file: file
                .map(Path::to_owned)
                .unwrap_or_else(|| "<in-cluster>".into()),
            message: e.to_string(),
        })
}

impl Delegation {
    /// Connects (lazily: nothing is asked yet) to the API server(s) named.
    pub async fn new(options: &DelegationOptions) -> Result<Self, AuthError> {
        let authn = client_for(
            "--authentication-kubeconfig",
            options.authentication_kubeconfig.as_deref(),
        )
        .await?;
        let authz = client_for(
            "--authorization-kubeconfig",
            options.authorization_kubeconfig.as_deref(),
        )
        .await?;
        if authn.is_none() {
            tracing::warn!(
                "no --authentication-kubeconfig and not in a cluster: bearer tokens are not \
                 checked, every request to the endpoints is anonymous"
            );
        }
        if authz.is_none() {
            tracing::warn!(
                "no --authorization-kubeconfig and not in a cluster: only {} (and the group \
                 {PRIVILEGED}) are served, everything else is forbidden",
                options.always_allow_paths.join(", ")
            );
        }
        Ok(Self::with_clients(
            authn,
            authz,
            options.always_allow_paths.clone(),
        ))
    }

    fn with_clients(
        authn: Option<kube::Client>,
        authz: Option<kube::Client>,
        always_allow_paths: Vec<String>,
    ) -> Self {
        Delegation {
            authn,
            authz,
            always_allow_paths,
            tokens: Mutex::new(Cache::new()),
            decisions: Mutex::new(Cache::new()),
            reviews: Default::default(),
        }
    }

    /// Reviews sent to the API server so far.
    pub fn reviews_sent(&self) -> u64 {
        self.reviews.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the request (its method, path and `Authorization` header) may be served.
    pub async fn check(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&[u8]>,
    ) -> Result<User, Refusal> {
        let user = self.authenticate(authorization).await?;
        let verb = method.to_ascii_lowercase();
        self.authorize(&user, &verb, path).await?;
        Ok(user)
    }

    async fn authenticate(&self, authorization: Option<&[u8]>) -> Result<User, Refusal> {
        let Some(token) = authorization.and_then(bearer_token) else {
            return Ok(User::anonymous());
        };
        if token.is_empty() {
            return Err(Refusal::Unauthorized);
        }
        let Some(client) = &self.authn else {
            // kube-scheduler without a token reviewer: the token is not looked at.
            return Ok(User::anonymous());
        };
        let key: [u8; 32] = Sha256::digest(token).into();
        if let Some(known) = lock(&self.tokens).get(&key, Instant::now()) {
            return known.ok_or(Refusal::Unauthorized);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: String::from_utf8_lossy(token).into_owned(),
                audiences: None,
            },
            ..Default::default()
        };
        self.reviews
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!("sent a TokenReview");
        let api: Api<TokenReview> = Api::all(client.clone());
        let answer =
            match tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
            {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    tracing::warn!(
                        "a TokenReview failed: {}",
                        crate::cluster::kube::error_message(&e)
                    );
                    return Err(Refusal::Unauthorized);
                }
                Err(_) => {
                    tracing::warn!("a TokenReview took longer than {REVIEW_TIMEOUT:?}");
                    return Err(Refusal::Unauthorized);
                }
            };
        let status = answer.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(u)) => Some(user_of(u)),
            _ => None,
        };
        lock(&self.tokens).put(key, user.clone(), Instant::now());
        user.ok_or(Refusal::Unauthorized)
    }

    async fn authorize(&self, user: &User, verb: &str, path: &str) -> Result<(), Refusal> {
        if self
            .always_allow_paths
            .iter()
            .any(|p| path_matches(p, path))
            || user.groups.iter().any(|g| g == PRIVILEGED)
        {
            return Ok(());
        }
        let forbidden = |reason: &str| {
            let mut message = format!(
                "forbidden: User {:?} cannot {verb} path {path:?}",
                user.name
            );
            if !reason.is_empty() {
                message.push_str(": ");
                message.push_str(reason);
            }
            Refusal::Forbidden { message }
        };
        let Some(client) = &self.authz else {
            return Err(forbidden(""));
        };
        let question = Question {
            user: user.clone(),
            verb: verb.to_owned(),
            path: path.to_owned(),
        };
        if let Some(known) = lock(&self.decisions).get(&question, Instant::now()) {
            return known.map_err(|reason| forbidden(&reason));
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        self.reviews
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!("sent a SubjectAccessReview: {} {verb} {path}", user.name);
        let api: Api<SubjectAccessReview> = Api::all(client.clone());
        let answer =
            match tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
            {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    let message = format!(
                        "a SubjectAccessReview failed: {}",
                        crate::cluster::kube::error_message(&e)
                    );
                    tracing::warn!("{message}");
                    return Err(Refusal::Failed { message });
                }
                Err(_) => {
                    let message =
                        format!("a SubjectAccessReview took longer than {REVIEW_TIMEOUT:?}");
                    tracing::warn!("{message}");
                    return Err(Refusal::Failed { message });
                }
            };
        let status = answer.status.unwrap_or_default();
        let decision = if status.allowed {
            Ok(())
        } else {
            Err(status.reason.unwrap_or_default())
        };
        lock(&self.decisions).put(question, decision.clone(), Instant::now());
        decision.map_err(|reason| forbidden(&reason))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The token of `Bearer TOKEN` (the scheme in any case); `None` for no bearer token.
fn bearer_token(header: &[u8]) -> Option<&[u8]> {
    let header = header.trim_ascii();
    let (scheme, rest) = match header.iter().position(|b| *b == b' ') {
        Some(i) => (&header[..i], &header[i + 1..]),
        None => (header, &[][..]),
    };
    scheme
        .eq_ignore_ascii_case(b"bearer")
        .then(|| rest.trim_ascii())
}

/// An always-allowed path: exact, or a prefix when it ends with `*`.
fn path_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

fn user_of(u: UserInfo) -> User {
    let mut groups = u.groups.unwrap_or_default();
    if !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.into());
    }
    User {
        name: u.username.unwrap_or_default(),
        uid: u.uid.filter(|s| !s.is_empty()),
        groups,
        extra: u.extra.unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_and_allowed_paths_parse_as_upstream() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Bearer"), Some(&b""[..]));
        assert_eq!(bearer_token(b"Basic YWxhZGRpbg=="), None);
        assert!(path_matches("/healthz", "/healthz"));
        assert!(!path_matches("/healthz", "/healthz/ping"));
        assert!(path_matches("/healthz*", "/healthz/ping"));
        assert!(!path_matches("/metrics", "/metricsx"));
    }

    /// Without clients (out of a cluster, no kubeconfigs): health paths for anyone,
    /// the rest forbidden with upstream's message, tokens not looked at.
    #[tokio::test]
    async fn without_an_api_server_only_the_allowed_paths_pass() {
        let d =
            Delegation::with_clients(None, None, DelegationOptions::default().always_allow_paths);
        assert_eq!(
            d.check("GET", "/healthz", None).await.unwrap().name,
            "system:anonymous"
        );
        assert_eq!(
            d.check("GET", "/metrics", Some(b"Bearer abc".as_slice()))
                .await,
            Err(Refusal::Forbidden {
                message: "forbidden: User \"system:anonymous\" cannot get path \"/metrics\"".into()
            })
        );
        assert_eq!(
            d.check("GET", "/metrics", Some(b"Bearer ".as_slice()))
                .await,
            Err(Refusal::Unauthorized)
        );
        assert_eq!(d.reviews_sent(), 0);
    }

    #[test]
    fn cached_answers_expire_and_the_cache_stays_bounded() {
        let mut c: Cache<u32, bool> = Cache::new();
        let t = Instant::now();
        c.put(1, true, t);
        assert_eq!(c.get(&1, t + Duration::from_secs(9)), Some(true));
        assert_eq!(c.get(&1, t + REVIEW_CACHE_TTL), None);
        for i in 0..(CACHE_ENTRIES as u32 * 2) {
            c.put(i, false, t);
        }
        assert!(c.entries.len() <= CACHE_ENTRIES);
    }
}
