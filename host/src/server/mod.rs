//! The endpoints `berth run` serves on one port, as kube-scheduler serves them on its
//! secure port: `/healthz` and `/livez` (the process is alive and, when it leads, still
//! renews its Lease), `/readyz` (the cluster state has been listed once, and the
//! process is not shutting down), `/metrics` (the Prometheus text format) and
//! `/plugins` (JSON: per profile, the plugins loaded now, their modules and versions)
//! and `/shadows` (JSON: each shadow run's comparisons and latest disagreements), and,
//! when it has one, the page (`/`, HTML) and its model (`/page.json`; see
//! [`crate::page`]).
//!
//! HTTPS by default, with the certificate and key given, or else a self-signed one made
//! at start (kubelet probes and Prometheus with `insecure_skip_verify` accept it, as
//! they accept kube-scheduler's), and every request authenticated and authorized
//! through the API server as kube-scheduler's are ([`auth`]); plain HTTP, open to
//! anyone, when asked for (`--serve-http`, for local development, as kube-scheduler's
//! former insecure port).
//!
//! A client has [`DEFAULT_HEADER_READ_TIMEOUT`] to finish its TLS handshake and then
//! each request's headers, and at most [`DEFAULT_MAX_CONNECTIONS`] connections are
//! served at once (more wait in the listen backlog until one ends).

pub mod auth;

use crate::cluster::kube::LeaderStatus;
use crate::metrics::Metrics;
use auth::{AccessOptions, AuthError, Delegation, Refusal};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// kube-scheduler's secure port.
pub const DEFAULT_SECURE_PORT: u16 = 10259;

/// How long a client may take over its TLS handshake, and over each request's headers
/// (a client that sends them slowly, or never ends them, holds a connection only this
/// long).
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// How long past the lease duration a leader may go without renewing before
/// `/healthz` fails (upstream's leader-election health check allows 20 s).
pub const LEADER_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// How long the scheduling loop may go without a round before `/livez` fails: it goes
/// round at least once a second, and one scheduling cycle (a preemption's dry run on
/// thousands of nodes included) takes far less.
pub const LOOP_STALL: Duration = Duration::from_secs(60);

/// Why the endpoints could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
    /// A certificate or key file could not be read or used.
    #[error("{file}: {message}")]
    Tls {
        /// The file (or "self-signed certificate").
        file: String,
        /// What was wrong.
        message: String,
    },
    /// Delegated authentication or authorization could not be set up.
    #[error(transparent)]
    Auth(#[from] AuthError),
}

/// Where and how the endpoints are served.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address (`--bind-address`, `--secure-port`).
    pub addr: SocketAddr,
    /// HTTPS or plain HTTP.
    pub tls: Tls,
    /// Who may read what.
    pub access: AccessOptions,
    /// How long a TLS handshake, and each request's headers, may take.
    pub header_read_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

impl ServeOptions {
    /// `addr` with `tls` and `access`, and the default limits.
    pub fn new(addr: SocketAddr, tls: Tls, access: AccessOptions) -> Self {
        ServeOptions {
            addr,
            tls,
            access,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Where the certificate comes from.
#[derive(Clone, Debug, Default)]
pub enum Tls {
    /// A self-signed certificate made at start.
    #[default]
    SelfSigned,
    /// PEM files: the certificate chain and its private key.
    Files {
        /// `--tls-cert-file`.
        cert: PathBuf,
        /// `--tls-private-key-file`.
        key: PathBuf,
    },
    /// Plain HTTP.
    None,
}

/// What the endpoints report on.
#[derive(Debug)]
pub struct Health {
    /// The metrics to render.
    pub metrics: Metrics,
    /// Set once every cluster source has listed its objects.
    pub synced: Arc<AtomicBool>,
    /// Set when shutdown begins.
    pub shutting_down: AtomicBool,
    /// The leader election, when on, and its lease duration.
    pub leader: Option<(Arc<LeaderStatus>, Duration)>,
    /// The plugins each profile runs now, for `/plugins` (none: not served).
    pub plugins: Option<crate::reload::PluginsView>,
    /// The shadow runs of the current version, for `/shadows` (none: not served).
    pub shadows: Option<crate::reload::ShadowsView>,
    /// The scheduling loop's heartbeat (none: no loop to watch).
    pub heartbeat: Option<crate::live::Heartbeat>,
    /// The scheduling loop's input, for `/debug/explain/NAMESPACE/NAME` and, without
    /// a `page`, the page the loop renders (none: neither served).
    pub loop_input: Option<std::sync::mpsc::Sender<crate::live::Input>>,
    /// The page, for `/` (HTML) and `/page.json` (none: not served).
    pub page: Option<crate::page::PageView>,
    /// The kinds the scheduler may not list, named in `/readyz?verbose` (none: no API
    /// server to be refused by).
    pub access: Option<Arc<crate::cluster::access::ListAccess>>,
}

/// A result of one check, upstream-style (`[+]name ok` / `[-]name failed: why`); a
/// passing check may say more (`[+]name ok: note`).
struct Check {
    name: &'static str,
    failure: Option<String>,
    note: Option<String>,
}

impl Health {
    /// The endpoints of a process with no scheduling loop, API server or reloads
    /// (`simulate --serve`, tests): synced, not shutting down, nothing else served
    /// but `metrics`.
    pub fn standalone(metrics: Metrics) -> Self {
        Health {
            metrics,
            synced: Arc::new(AtomicBool::new(true)),
            shutting_down: AtomicBool::new(false),
            leader: None,
            plugins: None,
            shadows: None,
            heartbeat: None,
            loop_input: None,
            page: None,
            access: None,
        }
    }

    fn live_checks(&self) -> Vec<Check> {
        let mut checks = vec![Check {
            name: "ping",
            failure: None,
            note: None,
        }];
        if let Some((status, lease)) = &self.leader {
            let failure = match status.since_last_renewal() {
                Some(since) if status.is_leading() && since > *lease + LEADER_HEALTH_TOLERANCE => {
                    Some(format!("the lease was last renewed {since:?} ago"))
                }
                _ => None,
            };
            checks.push(Check {
                name: "leaderElection",
                failure,
                note: None,
            });
        }
        if let Some(beat) = &self.heartbeat {
            let age = beat.age();
            checks.push(Check {
                name: "scheduler-loop",
                failure: (age > LOOP_STALL)
                    .then(|| format!("the scheduling loop last went round {}s ago", age.as_secs())),
                note: None,
            });
        }
        checks
    }

    fn ready_checks(&self) -> Vec<Check> {
        let mut checks = self.live_checks();
        checks.push(Check {
            name: "sched-handler-sync",
            failure: (!self.synced.load(Ordering::Relaxed))
                .then(|| "the cluster state has not been listed yet".into()),
            note: None,
        });
        if let Some(access) = &self.access {
            // Not a failure: the scheduler schedules every pod that does not need a
            // forbidden kind, and a cluster may deny a kind on purpose (no DRA, no
            // volumes). It is said here, in the log, the metric and the pods' status.
            let forbidden = access.forbidden();
            let note = (!forbidden.is_empty()).then(|| {
                let kinds: Vec<String> = forbidden
                    .iter()
                    .map(|(kind, why)| format!("{kind} ({why})"))
                    .collect();
                format!(
                    "may not list {}; pods whose scheduling needs them wait",
                    kinds.join(", ")
                )
            });
            checks.push(Check {
                name: "list-access",
                failure: None,
                note,
            });
        }
        checks.push(Check {
            name: "shutdown",
            failure: self
                .shutting_down
                .load(Ordering::Relaxed)
                .then(|| "shutting down".into()),
            note: None,
        });
        checks
    }
}

/// A bound listener: bind first (so a taken port is an error at start), then serve.
pub struct Server {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    health: Arc<Health>,
    delegation: Option<Arc<Delegation>>,
    header_read_timeout: Duration,
    connections: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("delegation", &self.delegation)
            .field("header_read_timeout", &self.header_read_timeout)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Binds the address, prepares TLS and the clients of delegation.
    pub async fn bind(options: &ServeOptions, health: Arc<Health>) -> Result<Self, ServeError> {
        let acceptor = match &options.tls {
            Tls::None => None,
            t => Some(acceptor(t)?),
        };
        let delegation = match &options.access {
            AccessOptions::Open => None,
            AccessOptions::Delegated(d) => Some(Arc::new(Delegation::new(d).await?)),
        };
        let addr = options.addr;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| ServeError::Bind { addr, error })?;
        Ok(Server {
            listener,
            tls: acceptor,
            health,
            delegation,
            header_read_timeout: options.header_read_timeout,
            connections: Arc::new(tokio::sync::Semaphore::new(options.max_connections.max(1))),
        })
    }

    /// Whether requests are authenticated and authorized through the API server.
    pub fn is_delegated(&self) -> bool {
        self.delegation.is_some()
    }

    /// The address actually bound (port 0 picks one).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Whether it speaks HTTPS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serves until the task is dropped or aborted.
    pub async fn serve(self) {
        loop {
            // A connection is accepted only when one of the slots is free.
            let Ok(permit) = self.connections.clone().acquire_owned().await else {
                return;
            };
            let (stream, peer) = match self.listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let served = Served {
                health: self.health.clone(),
                delegation: self.delegation.clone(),
                header_read_timeout: self.header_read_timeout,
            };
            match &self.tls {
                None => {
                    tokio::spawn(async move {
                        served.connection(stream).await;
                        drop(permit);
                    });
                }
                Some(acceptor) => {
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let handshake = acceptor.accept(stream);
                        match tokio::time::timeout(served.header_read_timeout, handshake).await {
                            Ok(Ok(s)) => served.connection(s).await,
                            Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                            Err(_) => tracing::debug!(
                                %peer,
                                "TLS handshake not done within {:?}",
                                served.header_read_timeout
                            ),
                        }
                        drop(permit);
                    });
                }
            }
        }
    }
}

/// What one connection is served with.
#[derive(Clone)]
struct Served {
    health: Arc<Health>,
    delegation: Option<Arc<Delegation>>,
    header_read_timeout: Duration,
}

impl Served {
    async fn connection<S>(self, stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let header_read_timeout = self.header_read_timeout;
        let service = hyper::service::service_fn(move |req| {
            let served = self.clone();
            async move { Ok::<_, std::convert::Infallible>(served.answer(req).await) }
        });
        if let Err(e) = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(header_read_timeout)
            .serve_connection(TokioIo::new(stream), service)
            .await
        {
            tracing::debug!("serving a connection: {e}");
        }
    }

    async fn answer(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if let Some(d) = &self.delegation {
            let authorization = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .map(|v| v.as_bytes());
            if let Err(refusal) = d
                .check(req.method().as_str(), req.uri().path(), authorization)
                .await
            {
                return refused(refusal);
            }
        }
        if let Some(loop_input) = &self.health.loop_input {
            if let Some(key) = req.uri().path().strip_prefix(EXPLAIN_PATH) {
                return explain(&req, key, loop_input).await;
            }
            if self.health.page.is_none() && matches!(req.uri().path(), "/" | "/page.json") {
                return live_page(&req, loop_input).await;
            }
        }
        respond(&req, &self.health)
    }
}

/// The prefix of the running scheduler's explanations: `/debug/explain/NAMESPACE/NAME`.
pub const EXPLAIN_PATH: &str = "/debug/explain/";

/// How long an explanation may wait for the scheduling loop (it answers between two
/// cycles).
const EXPLAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// `/debug/explain/NAMESPACE/NAME[?output=text]`: the loop explains the waiting pod
/// on its own cache; JSON unless `output=text`.
async fn explain(
    req: &Request<Incoming>,
    key: &str,
    loop_input: &std::sync::mpsc::Sender<crate::live::Input>,
) -> Response<Full<Bytes>> {
    let plain = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, plain, "only GET\n".into());
    }
    let as_text = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "output=text"));
    let parts: Vec<&str> = key.split('/').collect();
    if parts.len() != 2 || parts.iter().any(|p| p.is_empty()) {
        return text(
            StatusCode::BAD_REQUEST,
            plain,
            format!("{EXPLAIN_PATH}NAMESPACE/NAME: {key:?} is not NAMESPACE/NAME\n"),
        );
    }
    let answer = match ask_loop(loop_input, |reply| {
        crate::live::Input::Explain(key.to_owned(), reply)
    })
    .await
    {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    match answer {
        Ok(e) if as_text => text(StatusCode::OK, plain, e.to_text()),
        Ok(e) => text(
            StatusCode::OK,
            "application/json",
            serde_json::to_string_pretty(&e).unwrap_or_default() + "\n",
        ),
        Err(why) => text(StatusCode::NOT_FOUND, plain, why + "\n"),
    }
}

/// Asks the scheduling loop a question (the input `ask` makes of the reply's
/// sender) and waits for its answer at most [`EXPLAIN_TIMEOUT`]; a loop that has
/// stopped or does not answer is a 503.
async fn ask_loop<T>(
    loop_input: &std::sync::mpsc::Sender<crate::live::Input>,
    ask: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> crate::live::Input,
) -> Result<T, Response<Full<Bytes>>> {
    let unavailable = |why: String| {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            why,
        )
    };
    let stopped = || unavailable("the scheduling loop has stopped\n".into());
    let (reply, answer) = tokio::sync::oneshot::channel();
    if loop_input.send(ask(reply)).is_err() {
        return Err(stopped());
    }
    match tokio::time::timeout(EXPLAIN_TIMEOUT, answer).await {
        Ok(Ok(a)) => Ok(a),
        Ok(Err(_)) => Err(stopped()),
        Err(_) => Err(unavailable(format!(
            "the scheduling loop did not answer within {} s\n",
            EXPLAIN_TIMEOUT.as_secs()
        ))),
    }
}

/// `/` and `/page.json` of a running scheduler: the loop renders the page from its
/// own state between two cycles (at most every [`crate::live::PAGE_MAX_AGE`]).
async fn live_page(
    req: &Request<Incoming>,
    loop_input: &std::sync::mpsc::Sender<crate::live::Input>,
) -> Response<Full<Bytes>> {
    let plain = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, plain, "only GET\n".into());
    }
    match ask_loop(loop_input, crate::live::Input::Page).await {
        Ok(page) if req.uri().path() == "/" => {
            text(StatusCode::OK, "text/html; charset=utf-8", page.html)
        }
        Ok(page) => text(StatusCode::OK, "application/json", page.json),
        Err(refusal) => refusal,
    }
}

/// A refusal as the API server words it: a `Status` object.
fn refused(refusal: Refusal) -> Response<Full<Bytes>> {
    let (code, reason, message) = match refusal {
        Refusal::Unauthorized => (
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized".to_owned(),
        ),
        Refusal::Forbidden { message } => (StatusCode::FORBIDDEN, "Forbidden", message),
        Refusal::Failed { message } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!("Internal error occurred: {message}"),
        ),
    };
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code.as_u16(),
    });
    text(code, "application/json", body.to_string() + "\n")
}

fn text(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("x-content-type-options", "nosniff")
        .body(Full::new(Bytes::from(body)))
        .expect("static headers are valid")
}

fn report(kind: &str, checks: &[Check], verbose: bool) -> Response<Full<Bytes>> {
    let failed = checks.iter().any(|c| c.failure.is_some());
    let plain = "text/plain; charset=utf-8";
    if !failed && !verbose {
        return text(StatusCode::OK, plain, "ok".into());
    }
    let mut body = String::new();
    for c in checks {
        match &c.failure {
            None => match &c.note {
                None => body.push_str(&format!("[+]{} ok\n", c.name)),
                Some(note) => body.push_str(&format!("[+]{} ok: {note}\n", c.name)),
            },
            Some(why) => body.push_str(&format!("[-]{} failed: {why}\n", c.name)),
        }
    }
    if failed {
        body.push_str(&format!("{kind} check failed\n"));
        text(StatusCode::INTERNAL_SERVER_ERROR, plain, body)
    } else {
        body.push_str(&format!("{kind} check passed\n"));
        text(StatusCode::OK, plain, body)
    }
}

fn respond(req: &Request<Incoming>, health: &Health) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "only GET\n".into(),
        );
    }
    let verbose = req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    });
    match req.uri().path() {
        "/healthz" => report("healthz", &health.live_checks(), verbose),
        "/livez" => report("livez", &health.live_checks(), verbose),
        "/readyz" => report("readyz", &health.ready_checks(), verbose),
        "/metrics" => text(
            StatusCode::OK,
            Metrics::content_type(),
            health.metrics.render(),
        ),
        "/plugins" if health.plugins.is_some() => {
            let view = health.plugins.as_ref().expect("checked");
            let body = {
                let v = view.read().unwrap_or_else(|e| e.into_inner());
                serde_json::to_string_pretty(&*v).unwrap_or_default() + "\n"
            };
            text(StatusCode::OK, "application/json", body)
        }
        "/" | "/page.json" if health.page.is_some() => {
            let view = health.page.as_ref().expect("checked");
            let page = view.read().unwrap_or_else(|e| e.into_inner());
            if req.uri().path() == "/" {
                text(
                    StatusCode::OK,
                    "text/html; charset=utf-8",
                    page.html.clone(),
                )
            } else {
                text(StatusCode::OK, "application/json", page.json.clone())
            }
        }
        "/shadows" if health.shadows.is_some() => {
            let view = health.shadows.as_ref().expect("checked");
            let body = serde_json::to_string_pretty(&crate::reload::render_shadows(view))
                .unwrap_or_default()
                + "\n";
            text(StatusCode::OK, "application/json", body)
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "404 page not found\n".into(),
        ),
    }
}

fn acceptor(tls: &Tls) -> Result<TlsAcceptor, ServeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let (certs, key, source) = match tls {
        Tls::Files { cert, key } => {
            let certs = CertificateDer::pem_file_iter(cert)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| ServeError::Tls {
                    file: cert.display().to_string(),
                    message: format!("not a PEM certificate chain: {e}"),
                })?;
            if certs.is_empty() {
                return Err(ServeError::Tls {
                    file: cert.display().to_string(),
                    message: "no certificate in the file".into(),
                });
            }
            let k = PrivateKeyDer::from_pem_file(key).map_err(|e| ServeError::Tls {
                file: key.display().to_string(),
                message: format!("not a PEM private key: {e}"),
            })?;
            (certs, k, cert.display().to_string())
        }
        _ => {
            let mut names = vec!["localhost".to_owned(), crate::cluster::kube::hostname()];
            names.dedup();
            let made = rcgen::generate_simple_self_signed(names).map_err(|e| ServeError::Tls {
                file: "self-signed certificate".into(),
                message: e.to_string(),
            })?;
            let key =
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
            (
                vec![made.cert.der().clone()],
                key,
                "self-signed certificate".into(),
            )
        }
    };
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
    .map_err(|e| ServeError::Tls {
        file: source,
        message: e.to_string(),
    })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(addr: &str, tls: Tls) -> ServeOptions {
        ServeOptions::new(addr.parse().unwrap(), tls, AccessOptions::Open)
    }

    fn health() -> Arc<Health> {
        Arc::new(Health::standalone(Metrics::new()))
    }

    /// Reads until the server closes the connection (or fails it): what it sent.
    async fn read_until_closed(s: &mut tokio::net::TcpStream) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        out
    }

    /// A client that never finishes its headers is cut off; so is one that never
    /// finishes its TLS handshake.
    #[tokio::test]
    async fn slow_clients_are_cut_off() {
        use tokio::io::AsyncWriteExt;
        for tls in [Tls::None, Tls::SelfSigned] {
            let mut options = open("127.0.0.1:0", tls);
            options.header_read_timeout = Duration::from_millis(300);
            let server = Server::bind(&options, health()).await.unwrap();
            let addr = server.local_addr().unwrap();
            let task = tokio::spawn(server.serve());
            let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
            slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .await
                .unwrap();
            // Bounded only so that a regression fails instead of hanging.
            let answer =
                tokio::time::timeout(Duration::from_secs(60), read_until_closed(&mut slow))
                    .await
                    .expect("the server closed the connection");
            assert!(
                !String::from_utf8_lossy(&answer).contains("200 OK"),
                "{answer:?}"
            );
            task.abort();
        }
    }

    /// With one connection allowed, a second client is answered only once the first
    /// one's connection has ended.
    #[tokio::test]
    async fn connections_beyond_the_cap_wait_for_a_free_slot() {
        use tokio::io::AsyncWriteExt;
        let mut options = open("127.0.0.1:0", Tls::None);
        options.max_connections = 1;
        let server = Server::bind(&options, health()).await.unwrap();
        let addr = server.local_addr().unwrap();
        let task = tokio::spawn(server.serve());
        let mut first = tokio::net::TcpStream::connect(addr).await.unwrap();
        first.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        let second = tokio::spawn(get(addr, "/healthz"));
        // However long it is given, the second is not served while the first holds
        // the only slot (the wait only gives a broken cap the chance to show).
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!second.is_finished());
        drop(first);
        assert_eq!(second.await.unwrap().0, 200);
        task.abort();
    }

    /// `/` serves the page's HTML and `/page.json` its model, as the view holds them
    /// now; without a page both are not found.
    #[tokio::test]
    async fn the_page_is_served_from_its_view_when_there_is_one() {
        let server = Server::bind(&open("127.0.0.1:0", Tls::None), health())
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let task = tokio::spawn(server.serve());
        assert_eq!(get(addr, "/").await.0, 404);
        assert_eq!(get(addr, "/page.json").await.0, 404);
        task.abort();

        let view = crate::page::PageView::default();
        let health = Arc::new(Health {
            page: Some(view.clone()),
            ..Arc::into_inner(health()).unwrap()
        });
        let server = Server::bind(&open("127.0.0.1:0", Tls::None), health)
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let task = tokio::spawn(server.serve());
        *view.write().unwrap() = crate::page::Rendered {
            html: "<!DOCTYPE html><p>one</p>".into(),
            json: "{\"one\":1}".into(),
        };
        assert_eq!(
            get(addr, "/").await,
            (200, "<!DOCTYPE html><p>one</p>".into())
        );
        assert_eq!(get(addr, "/page.json").await, (200, "{\"one\":1}".into()));
        view.write().unwrap().html = "<p>two</p>".into();
        assert_eq!(get(addr, "/").await, (200, "<p>two</p>".into()));
        task.abort();
    }

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let status = out[9..12].parse().unwrap();
        let body = out.split_once("\r\n\r\n").unwrap().1.to_owned();
        (status, body)
    }

    /// A loop that stopped going round fails `/livez` (and so `/readyz`), naming how
    /// long ago it last went round; a beating one passes.
    #[tokio::test]
    async fn livez_fails_when_the_scheduling_loop_stalls() {
        let check = |heartbeat| Health {
            heartbeat: Some(heartbeat),
            ..Arc::into_inner(health()).unwrap()
        };
        let fresh = check(crate::live::Heartbeat::default());
        let names: Vec<_> = fresh.live_checks().iter().map(|c| c.name).collect();
        assert_eq!(names, ["ping", "scheduler-loop"]);
        assert!(fresh.live_checks().iter().all(|c| c.failure.is_none()));
        let stalled = Arc::new(check(crate::live::Heartbeat::stalled_for(
            LOOP_STALL + Duration::from_secs(1),
        )));
        let server = Server::bind(&open("127.0.0.1:0", Tls::None), stalled)
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let task = tokio::spawn(server.serve());
        let (status, body) = get(addr, "/livez?verbose").await;
        assert_eq!(status, 500, "{body}");
        assert!(
            body.contains(
                "[-]scheduler-loop failed: the scheduling loop last went round 61s ago\n"
            ),
            "{body}"
        );
        assert_eq!(get(addr, "/readyz").await.0, 500);
        task.abort();
    }

    /// A kind the scheduler may not list is named on `/readyz?verbose`, and does not
    /// fail it: the scheduler schedules the pods that do not need it.
    #[tokio::test]
    async fn readyz_names_the_kinds_the_scheduler_may_not_list() {
        let access = Arc::new(crate::cluster::access::ListAccess::default());
        let health = Arc::new(Health {
            access: Some(access.clone()),
            ..Arc::into_inner(health()).unwrap()
        });
        let server = Server::bind(&open("127.0.0.1:0", Tls::None), health)
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let task = tokio::spawn(server.serve());
        let (_, body) = get(addr, "/readyz?verbose").await;
        assert!(body.contains("[+]list-access ok\n"), "{body}");
        access.forbid("resourceslices.resource.k8s.io", "slices are forbidden");
        access.forbid("deviceclasses.resource.k8s.io", "classes are forbidden");
        assert_eq!(get(addr, "/readyz").await, (200, "ok".into()));
        let (status, body) = get(addr, "/readyz?verbose").await;
        assert_eq!(status, 200);
        assert!(
            body.contains(
                "[+]list-access ok: may not list deviceclasses.resource.k8s.io (classes are \
                 forbidden), resourceslices.resource.k8s.io (slices are forbidden); pods whose \
                 scheduling needs them wait\n"
            ),
            "{body}"
        );
        access.allow("deviceclasses.resource.k8s.io");
        access.allow("resourceslices.resource.k8s.io");
        let (_, body) = get(addr, "/readyz?verbose").await;
        assert!(body.contains("[+]list-access ok\n"), "{body}");
        task.abort();
    }

    #[tokio::test]
    async fn readyz_waits_for_sync_and_shutdown_fails_it() {
        let health = Arc::new(Health {
            metrics: Metrics::new(),
            synced: Arc::new(AtomicBool::new(false)),
            shutting_down: AtomicBool::new(false),
            leader: Some((Arc::new(LeaderStatus::default()), Duration::from_secs(15))),
            plugins: Some(Arc::new(std::sync::RwLock::new(
                serde_json::json!({"generation": 1}),
            ))),
            shadows: Some(Arc::new(std::sync::RwLock::new(vec![Arc::new(
                std::sync::Mutex::new(crate::framework::ShadowStats {
                    plugin: "X".into(),
                    cycles: 3,
                    ..Default::default()
                }),
            )]))),
            heartbeat: None,
            loop_input: None,
            page: None,
            access: None,
        });
        let server = Server::bind(&open("127.0.0.1:0", Tls::None), health.clone())
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let task = tokio::spawn(server.serve());
        assert_eq!(get(addr, "/healthz").await, (200, "ok".into()));
        assert_eq!(get(addr, "/livez").await, (200, "ok".into()));
        let (status, body) = get(addr, "/readyz").await;
        assert_eq!(status, 500);
        assert!(
            body.contains(
                "[-]sched-handler-sync failed: the cluster state has not been listed yet\n"
            ),
            "{body}"
        );
        assert!(body.ends_with("readyz check failed\n"), "{body}");
        health.synced.store(true, Ordering::Relaxed);
        assert_eq!(get(addr, "/readyz").await, (200, "ok".into()));
        let (status, body) = get(addr, "/readyz?verbose").await;
        assert_eq!(status, 200);
        assert!(
            body.contains("[+]leaderElection ok\n[+]sched-handler-sync ok\n"),
            "{body}"
        );
        health.shutting_down.store(true, Ordering::Relaxed);
        assert_eq!(get(addr, "/readyz").await.0, 500);
        assert_eq!(get(addr, "/healthz").await.0, 200);
        health.metrics.count_trap("X");
        let (status, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            body.contains("berth_plugin_traps_total{plugin=\"X\"} 1"),
            "{body}"
        );
        let (status, body) = get(addr, "/plugins").await;
        assert_eq!(status, 200);
        assert!(body.contains("\"generation\": 1"), "{body}");
        let (status, body) = get(addr, "/shadows").await;
        assert_eq!(status, 200);
        assert!(
            body.contains("\"plugin\": \"X\"") && body.contains("\"cycles\": 3"),
            "{body}"
        );
        assert_eq!(get(addr, "/nope").await.0, 404);
        task.abort();
    }

    #[tokio::test]
    async fn serves_https_with_the_given_certificate() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        let health = Arc::new(Health::standalone(Metrics::new()));
        let server = Server::bind(&open("127.0.0.1:0", Tls::Files { cert, key }), health)
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let task = tokio::spawn(server.serve());

        let mut roots = rustls::RootCertStore::empty();
        roots.add(made.cert.der().clone()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        let _ = tls.read_to_end(&mut out).await;
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.ends_with("\r\n\r\nok"), "{out}");
        task.abort();
    }

    #[tokio::test]
    async fn refuses_a_taken_port_and_bad_pem_files_by_name() {
        let health = Arc::new(Health {
            metrics: Metrics::new(),
            synced: Arc::default(),
            shutting_down: AtomicBool::new(false),
            leader: None,
            plugins: None,
            shadows: None,
            heartbeat: None,
            loop_input: None,
            page: None,
            access: None,
        });
        let first = Server::bind(&open("127.0.0.1:0", Tls::SelfSigned), health.clone())
            .await
            .unwrap();
        assert!(first.is_tls());
        let addr = first.local_addr().unwrap();
        let e = Server::bind(
            &ServeOptions::new(addr, Tls::None, AccessOptions::Open),
            health.clone(),
        )
        .await
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("cannot listen on {addr}: ")),
            "{e}"
        );

        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("tls.crt");
        std::fs::write(&cert, "not pem").unwrap();
        let tls = Tls::Files {
            cert: cert.clone(),
            key: dir.path().join("tls.key"),
        };
        let e = Server::bind(&open("127.0.0.1:0", tls), health)
            .await
            .unwrap_err();
        assert!(
            e.to_string().starts_with(&format!("{}: ", cert.display())),
            "{e}"
        );
    }
}
