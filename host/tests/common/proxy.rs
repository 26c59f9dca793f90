//! A fault-injecting proxy in front of the real API server: it terminates TLS with the
//! API server's own certificate (the test CA signed it for 127.0.0.1), forwards to the
//! API server over TLS, and on command delays traffic, drops every connection,
//! refuses new ones, or answers new connections' first request with an HTTP error
//! (429, 500) as an overloaded or failing API server would, or browns out: requests
//! other than watches hang, then fail.
#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// What the proxy does to traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Pass everything through.
    None,
    /// Hold every chunk of data this long, both ways.
    Delay(Duration),
    /// Close new connections at once.
    Refuse,
    /// Answer the first request of each new connection with this HTTP status.
    Status(u16),
    /// Hold each request whose first bytes start with this (a method and a path
    /// prefix, say `DELETE /api/v1/namespaces/ns/pods/`) this long before passing it
    /// on: a slow API server for one kind of call.
    Hold(&'static str, Duration),
    /// A brown-out: every request but a watch, on open connections too, hangs until
    /// the fault changes, then goes on (an API server whose storage stalls while its
    /// watch cache keeps streaming).
    HangRequests,
    /// A brown-out: every request but a watch, on open connections too, is answered
    /// with this HTTP status and its connection closed.
    FailRequests(u16),
}

/// The proxy; it stops when dropped.
pub struct FaultProxy {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    fault: Arc<Mutex<Fault>>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl FaultProxy {
    /// Starts a proxy to the API server on `upstream_port`, with the certificates the
    /// start script wrote to `dir`.
    pub async fn start(dir: &Path, upstream_port: u16) -> Self {
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(dir.join("server.crt"))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
        let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(dir.join("ca.crt")).unwrap() {
            roots.add(ca.unwrap()).unwrap();
        }
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let fault = Arc::new(Mutex::new(Fault::None));
        let connections: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (f, conns) = (fault.clone(), connections.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let fault = *f.lock().unwrap();
                if fault == Fault::Refuse {
                    drop(socket);
                    continue;
                }
                let (acceptor, connector) = (acceptor.clone(), connector.clone());
                let now = f.clone();
                let task = tokio::spawn(async move {
                    let _ = serve(socket, acceptor, connector, upstream_port, fault, now).await;
                });
                let mut c = conns.lock().unwrap();
                c.retain(|h| !h.is_finished());
                c.push(task.abort_handle());
            }
        })
        .abort_handle();
        FaultProxy {
            port,
            fault,
            connections,
            accept,
        }
    }

    /// Changes what the proxy does to new connections (and, for a delay, to new
    /// connections only).
    pub fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
    }

    /// Closes every open connection (watches included): the clients reconnect.
    pub fn drop_connections(&self) {
        for h in self.connections.lock().unwrap().drain(..) {
            h.abort();
        }
    }

    /// A kubeconfig that goes through the proxy, with the API server's CA and the
    /// admin token.
    pub fn write_kubeconfig(&self, dir: &Path) -> std::path::PathBuf {
        let path = dir.join("kubeconfig-proxy");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    token: berth-admin-token\ncontexts:\n- name: proxy\n  context: {{cluster: proxy, user: admin}}\ncurrent-context: proxy\n",
                self.port,
                dir.join("ca.crt").display()
            ),
        )
        .unwrap();
        path
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.drop_connections();
    }
}

async fn serve(
    socket: TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    connector: tokio_rustls::TlsConnector,
    upstream_port: u16,
    fault: Fault,
    now: Arc<Mutex<Fault>>,
) -> std::io::Result<()> {
    let mut downstream = acceptor.accept(socket).await?;
    if let Fault::Status(code) = fault {
        // Read the request head, answer with the error, close.
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
            let n = downstream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            head.extend_from_slice(&buf[..n]);
        }
        return answer_error(&mut downstream, code).await;
    }
    let tcp = TcpStream::connect(("127.0.0.1", upstream_port)).await?;
    let name = ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
    let upstream = connector.connect(name, tcp).await?;
    let (delay, hold) = match fault {
        Fault::Delay(d) => (d, None),
        Fault::Hold(prefix, d) => (Duration::ZERO, Some((prefix.as_bytes(), d))),
        _ => (Duration::ZERO, None),
    };
    let (dr, dw) = tokio::io::split(downstream);
    let (ur, uw) = tokio::io::split(upstream);
    let dw = Arc::new(tokio::sync::Mutex::new(dw));
    let requests = Requests {
        delay,
        hold,
        now,
        downstream: dw.clone(),
    };
    let _ = tokio::join!(requests.pump(dr, uw), pump_responses(ur, dw, delay));
    Ok(())
}

/// Answers a request with an API server's error `code` (a `Status` body), and closes.
async fn answer_error(
    downstream: &mut (impl tokio::io::AsyncWrite + Unpin),
    code: u16,
) -> std::io::Result<()> {
    let reason = if code == 429 {
        "TooManyRequests"
    } else {
        "InternalError"
    };
    let body = format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"injected by the test proxy","reason":"{reason}","code":{code}}}"#
    );
    let text = if code == 429 {
        "Too Many Requests"
    } else {
        "Internal Server Error"
    };
    let response = format!(
        "HTTP/1.1 {code} {text}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    downstream.write_all(response.as_bytes()).await?;
    downstream.shutdown().await
}

/// The client-to-server direction of a connection.
struct Requests<W> {
    delay: Duration,
    hold: Option<(&'static [u8], Duration)>,
    /// The proxy's fault now, for a brown-out, which reaches open connections.
    now: Arc<Mutex<Fault>>,
    downstream: Arc<tokio::sync::Mutex<W>>,
}

impl<W: tokio::io::AsyncWrite + Unpin> Requests<W> {
    /// Copies requests upstream, holding each chunk `delay` and each request that
    /// starts with `hold`'s prefix `hold`'s time; a request (not a watch) that starts
    /// during a brown-out hangs while it lasts, or is answered with its error.
    async fn pump(
        self,
        mut from: impl tokio::io::AsyncRead + Unpin,
        mut to: impl tokio::io::AsyncWrite + Unpin,
    ) -> std::io::Result<()> {
        const METHODS: [&[u8]; 5] = [b"GET ", b"POST ", b"PUT ", b"PATCH ", b"DELETE "];
        let mut buf = vec![0u8; 16384];
        loop {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                return to.shutdown().await;
            }
            let chunk = &buf[..n];
            let request_line = chunk.split(|b| *b == b'\n').next().unwrap_or_default();
            let is_request = METHODS.iter().any(|m| chunk.starts_with(m));
            let is_watch = request_line.windows(6).any(|w| w == b"watch=");
            if is_request && !is_watch {
                loop {
                    let fault = *self.now.lock().unwrap();
                    match fault {
                        Fault::HangRequests => tokio::time::sleep(Duration::from_millis(50)).await,
                        Fault::FailRequests(code) => {
                            let mut w = self.downstream.lock().await;
                            return answer_error(&mut *w, code).await;
                        }
                        _ => break,
                    }
                }
            }
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            if let Some((prefix, d)) = self.hold
                && chunk.starts_with(prefix)
            {
                tokio::time::sleep(d).await;
            }
            to.write_all(chunk).await?;
        }
    }
}

/// Copies the server's answers to the client, holding each chunk `delay`.
async fn pump_responses<W: tokio::io::AsyncWrite + Unpin>(
    mut from: impl tokio::io::AsyncRead + Unpin,
    to: Arc<tokio::sync::Mutex<W>>,
    delay: Duration,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 16384];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.lock().await.shutdown().await;
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        to.lock().await.write_all(&buf[..n]).await?;
    }
}
