//! A stand-in API server for the kube backend's unit tests: a `kube::Client` whose
//! requests are answered by a function, each request kept for the test to read. A
//! watch is answered with a stream the test feeds event by event.

use super::KubeCluster;
use super::ratelimit::RateLimiter;
use futures::StreamExt;
use futures::channel::mpsc;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::{Bytes, Frame};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

/// A request as the stand-in saw it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    /// The body, parsed as JSON (`Null` when empty).
    pub body: Value,
}

impl Request {
    /// A watch (rather than a list or a get).
    pub fn is_watch(&self) -> bool {
        self.query.split('&').any(|p| p == "watch=true")
    }
}

/// An answer: a status code and a JSON body, or a watch's events as they come.
pub enum Answer {
    Json(u16, Value),
    Events(mpsc::UnboundedReceiver<Value>),
}

/// The status a 404 carries.
pub fn not_found() -> Answer {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// A `Status` answer.
pub fn status(code: u16, reason: &str, message: &str) -> Answer {
    Answer::Json(
        code,
        serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }),
    )
}

/// A client whose requests `answer` answers, and the requests it made.
pub fn client(
    answer: impl Fn(&Request) -> Answer + Send + Sync + 'static,
) -> (kube::Client, Arc<Mutex<Vec<Request>>>) {
    let answer = Arc::new(answer);
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    let log = seen.clone();
    let service = tower::service_fn(move |req: hyper::Request<kube::client::Body>| {
        let (answer, log) = (answer.clone(), log.clone());
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let request = Request {
                method: parts.method.to_string(),
                path: parts.uri.path().to_owned(),
                query: parts.uri.query().unwrap_or_default().to_owned(),
                content_type: parts
                    .headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            log.lock().unwrap().push(request.clone());
            let (code, body): (u16, UnsyncBoxBody<Bytes, Infallible>) = match answer(&request) {
                Answer::Json(code, v) => (
                    code,
                    http_body_util::Full::new(Bytes::from(v.to_string())).boxed_unsync(),
                ),
                Answer::Events(rx) => (
                    200,
                    http_body_util::StreamBody::new(
                        rx.map(|v| Ok::<_, Infallible>(Frame::data(Bytes::from(format!("{v}\n"))))),
                    )
                    .boxed_unsync(),
                ),
            };
            let response = hyper::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(body)
                .expect("a response");
            Ok::<_, Infallible>(response)
        }
    });
    (kube::Client::new(service, "default"), seen)
}

/// A cluster on `client`, without rate limits.
pub fn cluster(client: kube::Client) -> KubeCluster {
    KubeCluster {
        client,
        server: "https://fake".into(),
        bind_limiter: Arc::new(RateLimiter::new(0.0, 0)),
        event_limiter: Arc::new(RateLimiter::new(0.0, 0)),
        preemption_limiter: Arc::new(RateLimiter::new(0.0, 0)),
        pod_groups: Arc::default(),
        access: Arc::default(),
    }
}
