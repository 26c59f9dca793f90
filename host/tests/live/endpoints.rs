//! The endpoints as kube-scheduler's, against a real kube-apiserver with RBAC on
//! (tests/e2e/apiserver.sh start --rbac): `berth run` as deploy/'s ServiceAccount
//! authenticates bearer tokens with TokenReviews and authorizes each path with a
//! SubjectAccessReview, through what deploy/ grants it; the health paths answer
//! anyone; a client that never finishes its headers is cut off.

use crate::apiserver::*;
use crate::common::{self, workspace};
use k8s_openapi::api::rbac::v1 as rbac;
use kube::api::{Api, PostParams};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

/// An HTTPS client that trusts only the certificate Berth was given.
fn connector(cert: &rcgen::CertifiedKey<rcgen::KeyPair>) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn tls_connect(
    connector: &tokio_rustls::TlsConnector,
    port: u16,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect to port {port}: {e}"))?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake: {e}"))
}

/// GET `path` over HTTPS, with `token` as a bearer token: the status and the body.
async fn get(
    connector: &tokio_rustls::TlsConnector,
    port: u16,
    path: &str,
    token: Option<&str>,
) -> Result<(u16, String), String> {
    let mut s = tls_connect(connector, port).await?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    // rustls reports a peer that closes without close_notify as an error; what was
    // read still counts.
    let _ = s.read_to_end(&mut out).await;
    parse_http_answer(&String::from_utf8_lossy(&out))
}

async fn bind_user_to(client: &kube::Client, user: &str, role: &str) {
    let binding: rbac::ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{user}-{role}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .unwrap();
    Api::<rbac::ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

fn write_cert(dir: &Path, cert: &rcgen::CertifiedKey<rcgen::KeyPair>) -> (String, String) {
    let (c, k) = (dir.join("endpoints.crt"), dir.join("endpoints.key"));
    std::fs::write(&c, cert.cert.pem()).unwrap();
    std::fs::write(&k, cert.signing_key.serialize_pem()).unwrap();
    (
        c.to_str().unwrap().to_owned(),
        k.to_str().unwrap().to_owned(),
    )
}

/// Starts `berth run` as deploy/'s ServiceAccount (for the cluster and the reviews
/// alike), natively, serving HTTPS on `port` with this certificate and key.
fn start_berth_with_reviews(dir: &Path, port: u16, cert_file: &str, key_file: &str) -> Berth {
    // Berth as deploy/'s ServiceAccount, for the cluster and for the reviews alike;
    // natively, since which plugins run does not matter here.
    let sa = dir.join("kubeconfig-sa");
    let sa = sa.to_str().unwrap();
    Berth::start(
        &[
            "--kubeconfig",
            sa,
            "--leader-elect=false",
            "--native",
            &format!("--secure-port={port}"),
            "--bind-address=127.0.0.1",
            "--tls-cert-file",
            cert_file,
            "--tls-private-key-file",
            key_file,
            "--authentication-kubeconfig",
            sa,
            "--authorization-kubeconfig",
            sa,
        ],
        dir.join("berth.log"),
    )
}

/// A client that sends part of its headers and then nothing; what it read once cut
/// off.
fn spawn_slow_client(
    tls: &tokio_rustls::TlsConnector,
    port: u16,
) -> tokio::task::JoinHandle<String> {
    let slow_tls = tls.clone();
    tokio::spawn(async move {
        let mut s = tls_connect(&slow_tls, port).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            .await
            .unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    })
}

/// Asserts the health paths answer anyone, with or without a token.
async fn assert_health_answers_anyone(tls: &tokio_rustls::TlsConnector, port: u16) {
    // The health paths answer anyone, with or without a token.
    for path in ["/healthz", "/livez", "/readyz?verbose"] {
        let (status, body) = get(tls, port, path, None).await.unwrap();
        assert_ne!(status, 401, "{path}: {body}");
        assert_ne!(status, 403, "{path}: {body}");
    }
    assert_eq!(
        get(tls, port, "/healthz", Some("berth-nobody-token"))
            .await
            .unwrap(),
        (200, "ok".to_owned())
    );
}

/// Asserts who may get `/metrics` and `/plugins`: not the anonymous (403), not an
/// unknown token (401), not a known user without the role (403); the monitor may get
/// `/metrics` only; system:masters may get anything.
async fn assert_metrics_and_plugins_access(tls: &tokio_rustls::TlsConnector, port: u16) {
    // No token: anonymous, which RBAC does not let read /metrics (kube-scheduler
    // answers the same 403). A token the API server does not know: 401.
    let (status, body) = get(tls, port, "/metrics", None).await.unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(r#"forbidden: User \"system:anonymous\" cannot get path \"/metrics\""#),
        "{body}"
    );
    let (status, body) = get(tls, port, "/metrics", Some("no-such-token"))
        .await
        .unwrap();
    assert_eq!(status, 401, "{body}");
    assert!(body.contains(r#""reason":"Unauthorized""#), "{body}");
    let (status, _) = get(tls, port, "/healthz", Some("no-such-token"))
        .await
        .unwrap();
    assert_eq!(status, 401, "a rejected token is rejected on every path");

    // Known, but not allowed to get /metrics.
    let (status, body) = get(tls, port, "/metrics", Some("berth-nobody-token"))
        .await
        .unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(r#"User \"berth-e2e-nobody\" cannot get path \"/metrics\""#),
        "{body}"
    );

    // Bound to deploy/'s monitoring role: /metrics, and nothing else it does not name.
    for _ in 0..5 {
        let (status, body) = get(tls, port, "/metrics", Some("berth-monitor-token"))
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("scheduler_pending_pods"), "{body}");
    }
    let (status, body) = get(tls, port, "/plugins", Some("berth-monitor-token"))
        .await
        .unwrap();
    assert_eq!(status, 403, "{body}");
    // system:masters passes without a review, as kube-scheduler's AlwaysAllowGroups.
    let (status, body) = get(tls, port, "/plugins", Some("berth-admin-token"))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
}

/// Creates deploy/'s reader ClusterRole and binds the user `berth-e2e-nobody` to it.
async fn grant_the_reader_role_to_nobody(admin: &kube::Client) {
    let reader = std::fs::read_to_string(workspace().join("deploy/40-reader-rbac.yaml")).unwrap();
    Api::<rbac::ClusterRole>::all(admin.clone())
        .create(
            &PostParams::default(),
            &berth::yaml::from_str(&reader).unwrap(),
        )
        .await
        .unwrap();
    bind_user_to(admin, "berth-e2e-nobody", "berth-reader").await;
}

/// Creates node n1 and the pod `huge` that does not fit it, and asserts
/// `/debug/explain` explains it only to a reader, as `berth explain --kubeconfig`
/// does, in JSON or text, and answers 404 for a pod that is not waiting.
async fn assert_explain_for_readers(
    server: &ApiServer,
    admin: &kube::Client,
    tls: &tokio_rustls::TlsConnector,
    port: u16,
) {
    create_nodes(admin, &[node("n1", "2", "4Gi", 10)]).await;
    create_pods(admin, "default", &[pod("huge", "3", "default-scheduler")]).await;
    let path = "/debug/explain/default/huge";
    let (status, body) = get(tls, port, path, Some("berth-nobody-token"))
        .await
        .unwrap();
    assert_eq!(status, 403, "{body}");
    grant_the_reader_role_to_nobody(admin).await;
    let explained: serde_json::Value = eventually(60, "an explanation of huge", || async {
        let (status, body) = get(tls, port, path, Some("berth-nobody-token")).await?;
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("{status} {body}: {e}"))?;
        // Once the loop has tried it.
        if status == 200 && v["attempts"].as_u64() > Some(0) {
            Ok(v)
        } else {
            Err(format!("{status} {body}"))
        }
    })
    .await;
    assert_eq!(explained["pod"], "default/huge");
    assert!(
        explained["lastAttempt"]
            .as_str()
            .is_some_and(|m| m.contains("Insufficient cpu")),
        "{explained}"
    );
    let cli = common::berth(&[
        "explain",
        "--native",
        "--kubeconfig",
        server.kubeconfig().to_str().unwrap(),
        "--pod",
        "default/huge",
        "--output",
        "json",
    ]);
    assert!(cli.status.success(), "{}", common::stderr(&cli));
    let cli: serde_json::Value = serde_json::from_str(&common::stdout(&cli)).unwrap();
    assert_eq!(explained["explanation"], cli);
    let (status, body) = get(
        tls,
        port,
        "/debug/explain/default/huge?output=text",
        Some("berth-nobody-token"),
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("default/huge: "), "{body}");
    let (status, body) = get(
        tls,
        port,
        "/debug/explain/default/nope",
        Some("berth-admin-token"),
    )
    .await
    .unwrap();
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no pod default/nope is waiting"), "{body}");
}

/// Asserts the page (`/page.json` and `/`) shows n1 and `huge` to a reader and not
/// to the metrics reader, and that a malformed explain path answers 400.
async fn assert_page_for_readers(tls: &tokio_rustls::TlsConnector, port: u16) {
    // The page of the running scheduler: its nodes and pending pods, rendered by the
    // loop from its own state, for the same readers.
    let (status, body) = get(tls, port, "/page.json", Some("berth-nobody-token"))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let page: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(page["nodes"][0]["name"], "n1", "{page}");
    assert_eq!(page["pending"][0]["pod"], "default/huge", "{page}");
    let (status, body) = get(tls, port, "/", Some("berth-nobody-token"))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("default/huge") && body.contains("n1"),
        "{body}"
    );
    let (status, _) = get(tls, port, "/page.json", Some("berth-monitor-token"))
        .await
        .unwrap();
    assert_eq!(status, 403, "the metrics reader may not see the page");
    let (status, body) = get(tls, port, "/debug/explain/huge", Some("berth-admin-token"))
        .await
        .unwrap();
    assert_eq!(status, 400, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_authenticate_and_authorize_through_the_api_server() {
    let _serial = serial().await;
    let server = ApiServer::start_with(&["--rbac"]);
    let admin = server.client().await;
    apply_deploy_rbac(&admin).await;
    bind_user_to(&admin, "berth-e2e-monitor", "berth-metrics-reader").await;

    let dir = server.dir.path();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert_file, key_file) = write_cert(dir, &cert);
    let tls = connector(&cert);
    let port = free_port();
    let berth = start_berth_with_reviews(dir, port, &cert_file, &key_file);
    let (status, body) = eventually(120, "/healthz over HTTPS", || async {
        get(&tls, port, "/healthz", None).await
    })
    .await;
    assert_eq!((status, body.as_str()), (200, "ok"), "{}", berth.log_text());

    // A client that sends part of its headers and then nothing: cut off by the
    // server's header-read timeout, while the rest of the test goes on.
    let slow = spawn_slow_client(&tls, port);

    assert_health_answers_anyone(&tls, port).await;
    assert_metrics_and_plugins_access(&tls, port).await;
    // /debug/explain: the running scheduler explains a waiting pod on its own cache,
    // to whoever may get that path (deploy/'s reader role names it), with the same
    // verdicts `berth explain --kubeconfig` gives on the same cluster.
    assert_explain_for_readers(&server, &admin, &tls, port).await;
    assert_page_for_readers(&tls, port).await;

    // Five scrapes in a row reuse the answer of the API server (for 10 s).
    let log = berth.log_text();
    let reviews = log
        .matches("sent a SubjectAccessReview: berth-e2e-monitor get /metrics")
        .count();
    assert!((1..5).contains(&reviews), "{reviews} reviews:\n{log}");

    let answer = tokio::time::timeout(Duration::from_secs(120), slow)
        .await
        .expect("the slow client was cut off")
        .unwrap();
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer:?}"
    );
}
