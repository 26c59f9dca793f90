//! A real kube-apiserver and etcd for the end-to-end tests, started and stopped with
//! `tests/e2e/apiserver.sh`, and a `berth run` process against it.
#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use crate::common::{component_cache, workspace};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1 as rbac;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::{self, Scope};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One API server at a time: the tests share two cores, and each starts its own.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Serializes the tests that start an API server.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

fn script() -> PathBuf {
    workspace().join("tests/e2e/apiserver.sh")
}

fn run_script(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(script())
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run tests/e2e/apiserver.sh");
    assert!(
        out.status.success(),
        "tests/e2e/apiserver.sh {args:?} failed ({}): see its messages above",
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// etcd and kube-apiserver on loopback, stopped on drop.
pub struct ApiServer {
    /// Its directory: certificates, tokens, logs, kubeconfigs.
    pub dir: tempfile::TempDir,
}

impl ApiServer {
    /// Starts both (building them first if the cache has none).
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts both with extra arguments to the script's `start` (`--rbac`).
    pub fn start_with(extra: &[&str]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("berth-e2e-")
            .tempdir()
            .expect("temp dir");
        let d = dir.path().to_str().unwrap().to_owned();
        let mut args = vec!["start", d.as_str()];
        args.extend_from_slice(extra);
        run_script(&args);
        ApiServer { dir }
    }

    /// The admin kubeconfig (token auth, the server's CA).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// The API server's port.
    pub fn port(&self) -> u16 {
        let env = std::fs::read_to_string(self.dir.path().join("env")).unwrap();
        env.lines()
            .find_map(|l| l.strip_prefix("APISERVER_PORT="))
            .and_then(|p| p.parse().ok())
            .expect("APISERVER_PORT in env")
    }

    /// Kills the API server (SIGKILL); etcd keeps running.
    pub fn kill(&self) {
        run_script(&["kill-apiserver", self.dir.path().to_str().unwrap()]);
    }

    /// Starts the API server again on the same port and etcd.
    pub fn restart(&self) {
        run_script(&["start-apiserver", self.dir.path().to_str().unwrap()]);
    }

    /// Starts kube-controller-manager against this API server (with the admin
    /// kubeconfig), running only the PersistentVolume binder, the ResourceClaim and
    /// ephemeral volume controllers and the garbage collector, and waits until they
    /// have synced. Stopped with the rest on drop; its log is
    /// DIR/controller-manager.log.
    pub fn start_controller_manager(&self) {
        run_script(&[
            "start-controller-manager",
            self.dir.path().to_str().unwrap(),
        ]);
    }

    /// A client with the admin kubeconfig.
    pub async fn client(&self) -> kube::Client {
        client_for(&self.kubeconfig()).await
    }
}

/// A client for a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig");
    kube::Client::try_from(config).expect("client")
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let d = self.dir.path().to_str().unwrap().to_owned();
        let _ = Command::new("bash")
            .arg(script())
            .args(["stop", &d])
            .status();
    }
}

/// A `berth run` process, killed on drop; its log is kept in a file.
pub struct Berth {
    child: Child,
    /// Its stderr.
    pub log: PathBuf,
}

impl Berth {
    /// Starts `berth run` with these arguments (and `BERTH_LOG=info`); the endpoints
    /// are not served unless `args` name a `--secure-port`.
    pub fn start(args: &[&str], log: PathBuf) -> Self {
        let file = std::fs::File::create(&log).expect("log file");
        let mut args = args.to_vec();
        if !args.iter().any(|a| a.starts_with("--secure-port")) {
            args.push("--secure-port=0");
        }
        let child = Command::new(env!("CARGO_BIN_EXE_berth"))
            .arg("run")
            .args(args)
            .env("BERTH_CACHE_DIR", component_cache())
            .env("BERTH_LOG", "info,berth=debug,kube=warn")
            .current_dir(workspace())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start berth run");
        Berth { child, log }
    }

    /// Starts `berth run --kubeconfig KUBECONFIG EXTRA...` with its log in `dir`, and waits until it schedules.
    pub fn run_in(dir: &Path, kubeconfig: &Path, extra: &[&str]) -> Self {
        let mut args = vec!["--kubeconfig", kubeconfig.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut berth = Berth::start(&args, dir.join("berth.log"));
        berth.wait_running();
        berth
    }

    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for it to say scheduling has started.
    pub fn wait_running(&mut self) {
        self.wait_log("scheduling starts", Duration::from_secs(120));
    }

    /// Waits until its log contains `text` (it must stay alive meanwhile).
    pub fn wait_log(&mut self, text: &str, limit: Duration) {
        let start = Instant::now();
        loop {
            if self.log_text().contains(text) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("berth run exited with {status}:\n{}", self.log_text());
            }
            assert!(
                start.elapsed() < limit,
                "berth run did not log {text:?} within {limit:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM (a graceful shutdown).
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                start.elapsed() < limit,
                "berth run did not exit within {limit:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGKILL and waits.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Berth {
    fn drop(&mut self) {
        self.kill();
    }
}

/// kube-scheduler 1.37.2 (built by `tests/e2e/apiserver.sh build`) against an API
/// server, with its admin kubeconfig and no leader election; killed on drop.
pub struct KubeScheduler {
    child: Child,
    /// Its stderr.
    pub log: PathBuf,
}

impl KubeScheduler {
    /// Starts it with `--feature-gates=GATES`; `name` names its log in the server's
    /// directory.
    pub fn start(server: &ApiServer, gates: &str, name: &str) -> Self {
        let bin = PathBuf::from(run_script(&["build"]).trim());
        let dir = server.dir.path();
        let config = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &config,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
                 clientConnection: {{kubeconfig: {}}}\nleaderElection: {{leaderElect: false}}\n",
                server.kubeconfig().display()
            ),
        )
        .unwrap();
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(bin.join("kube-scheduler"))
            .arg(format!("--config={}", config.display()))
            .arg("--secure-port=0")
            .arg(format!("--feature-gates={gates}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start kube-scheduler");
        KubeScheduler { child, log }
    }

    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for KubeScheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 100 ms until it answers `Some`, or fails after `secs` seconds with
/// `what` and the last answer's description.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let start = Instant::now();
    loop {
        match f().await {
            Ok(t) => return t,
            Err(last) => {
                if start.elapsed() > Duration::from_secs(secs) {
                    panic!("timed out after {secs} s waiting for {what}: {last}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A node with this much CPU, memory and pod capacity, and labels.
pub fn node(name: &str, cpu: &str, memory: &str, pods: u32) -> k8s::Node {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": pods.to_string()},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods.to_string()},
        },
    }))
    .unwrap()
}

/// A pod requesting this much CPU, for `scheduler`.
pub fn pod(name: &str, cpu: &str, scheduler: &str) -> k8s::Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{
                "name": "c",
                "image": "registry.example/app:1",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
            }],
        },
    }))
    .unwrap()
}

/// Creates nodes. The API server keeps a node's status on create, so its capacity
/// holds without a kubelet.
pub async fn create_nodes(client: &kube::Client, nodes: &[k8s::Node]) {
    let api: Api<k8s::Node> = Api::all(client.clone());
    for n in nodes {
        api.create(&PostParams::default(), n)
            .await
            .expect("create node");
    }
}

/// Creates node-a and node-b, each with 4 CPUs, 8Gi and room for 110 pods.
pub async fn create_nodes_a_and_b(client: &kube::Client) {
    create_nodes(
        client,
        &[
            node("node-a", "4", "8Gi", 110),
            node("node-b", "4", "8Gi", 110),
        ],
    )
    .await;
}

/// Creates pods in `namespace`.
pub async fn create_pods(client: &kube::Client, namespace: &str, pods: &[k8s::Pod]) {
    let api: Api<k8s::Pod> = Api::namespaced(client.clone(), namespace);
    for p in pods {
        api.create(&PostParams::default(), p)
            .await
            .expect("create pod");
    }
}

/// Waits until `namespace` holds a FailedScheduling event regarding the pod `name`;
/// those events then.
pub async fn failed_scheduling_events(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Vec<Event> {
    eventually(30, &format!("{name}'s FailedScheduling event"), || async {
        let failed: Vec<Event> = Api::<Event>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            })
            .collect();
        if failed.is_empty() {
            Err("none yet".to_owned())
        } else {
            Ok(failed)
        }
    })
    .await
}

/// Every pod of `namespace`.
pub async fn list_pods(client: &kube::Client, namespace: &str) -> Result<Vec<k8s::Pod>, String> {
    let api: Api<k8s::Pod> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| e.to_string())
}

/// The node a pod is bound to.
pub fn node_of(p: &k8s::Pod) -> Option<String> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
}

/// The name of a pod.
pub fn name_of(p: &k8s::Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// Creates `count` nodes `n00`, `n01`, ... with room for exactly 10 pods each (and
/// CPU and memory to spare), so that a pod lost or counted twice shows.
pub async fn create_ten_pod_nodes(client: &kube::Client, count: usize) {
    let nodes: Vec<k8s::Node> = (0..count)
        .map(|i| node(&format!("n{i:02}"), "64", "256Gi", 10))
        .collect();
    create_nodes(client, &nodes).await;
}

/// Asserts that the pods (pod -> node) fill `nodes` nodes with exactly 10 each.
pub fn assert_ten_per_node(bound: &std::collections::BTreeMap<String, String>, nodes: usize) {
    let mut per_node: std::collections::BTreeMap<&str, usize> = Default::default();
    for n in bound.values() {
        *per_node.entry(n).or_default() += 1;
    }
    assert_eq!(per_node.len(), nodes, "{per_node:?}");
    assert!(per_node.values().all(|&c| c == 10), "{per_node:?}");
}

pub use crate::common::free_port;

/// The pod's `PodScheduled` condition, if it has one.
pub fn pod_scheduled(p: &k8s::Pod) -> Option<k8s::PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .cloned()
}

/// An HTTP/1.1 answer read to its end: its status and its body.
pub fn parse_http_answer(out: &str) -> Result<(u16, String), String> {
    let status = out
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {out:?}"))?;
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// GET `path` over plain HTTP on a loopback port: the status and the body (an error
/// while nothing listens yet).
pub async fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect to port {port}: {e}"))?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out)
        .await
        .map_err(|e| e.to_string())?;
    parse_http_answer(&out)
}

/// The objects of deploy/'s RBAC files (its ServiceAccount, roles and bindings),
/// created with the admin client.
pub async fn apply_deploy_rbac(client: &kube::Client) {
    let dir = workspace().join("deploy");
    for file in ["00-serviceaccount.yaml", "10-rbac.yaml"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for v in berth::yaml::documents(&text).unwrap() {
            let pp = PostParams::default();
            let c = client.clone();
            let r = match v["kind"].as_str().unwrap() {
                "ServiceAccount" => Api::<k8s::ServiceAccount>::namespaced(c, "kube-system")
                    .create(&pp, &serde_json::from_value(v).unwrap())
                    .await
                    .map(drop),
                "ClusterRole" => Api::<rbac::ClusterRole>::all(c)
                    .create(&pp, &serde_json::from_value(v).unwrap())
                    .await
                    .map(drop),
                "ClusterRoleBinding" => Api::<rbac::ClusterRoleBinding>::all(c)
                    .create(&pp, &serde_json::from_value(v).unwrap())
                    .await
                    .map(drop),
                "Role" => Api::<rbac::Role>::namespaced(c, "kube-system")
                    .create(&pp, &serde_json::from_value(v).unwrap())
                    .await
                    .map(drop),
                "RoleBinding" => Api::<rbac::RoleBinding>::namespaced(c, "kube-system")
                    .create(&pp, &serde_json::from_value(v).unwrap())
                    .await
                    .map(drop),
                other => panic!("{file}: unexpected kind {other}"),
            };
            r.unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
}

/// The API for `obj`'s kind, found by discovery: in its namespace (`default` when it
/// names none) when the kind is namespaced.
pub async fn api_for(client: &kube::Client, obj: &DynamicObject) -> Api<DynamicObject> {
    let types = obj.types.clone().expect("apiVersion and kind");
    let gvk = kube::api::GroupVersionKind::try_from(&types).unwrap();
    let (resource, caps) = discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("{gvk:?}: {e}"));
    match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            obj.metadata.namespace.as_deref().unwrap_or("default"),
            &resource,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    }
}

/// Creates an object given as JSON (of a kind k8s-openapi may not know), in
/// `default` when namespaced and it names no namespace. Field validation is strict:
/// a field the API server does not know fails the test instead of being dropped (a
/// test that means to send one would otherwise check nothing).
pub async fn create_object(client: &kube::Client, v: Value) -> DynamicObject {
    let obj: DynamicObject = serde_json::from_value(v).unwrap();
    let api = api_for(client, &obj).await;
    let request = hyper::Request::post(format!("{}?fieldValidation=Strict", api.resource_url()))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&obj).unwrap())
        .unwrap();
    client
        .request::<DynamicObject>(request)
        .await
        .unwrap_or_else(|e| panic!("creating {:?} {:?}: {e}", obj.types, obj.metadata.name))
}

/// The pods of `default` bound so far: name to node.
pub async fn bound_pods(client: &kube::Client) -> std::collections::BTreeMap<String, String> {
    list_pods(client, "default")
        .await
        .unwrap()
        .iter()
        .filter_map(|p| node_of(p).map(|n| (name_of(p), n)))
        .collect()
}

/// Waits until every pod of `default` named in `names` is bound; all bound pods then.
pub async fn wait_bound(
    admin: &kube::Client,
    names: &[&str],
) -> std::collections::BTreeMap<String, String> {
    eventually(60, &format!("{names:?} bound"), || async {
        let b = bound_pods(admin).await;
        if names.iter().all(|n| b.contains_key(*n)) {
            Ok(b)
        } else {
            Err(format!("bound: {b:?}"))
        }
    })
    .await
}

/// Reads an object of `default` as JSON (the resource named by its plural).
pub async fn get_object(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    plural: &str,
    name: &str,
) -> Value {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    serde_json::to_value(
        api.get(name)
            .await
            .unwrap_or_else(|e| panic!("{kind} {name}: {e}")),
    )
    .unwrap()
}

/// A pod in `default` requesting `cpu` (for the default scheduler name), with `extra`
/// merged in ([`merge_json`]).
pub fn pod_json(name: &str, cpu: &str, extra: Value) -> Value {
    let mut p = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{
                "name": "c",
                "image": "registry.example/app:1",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
            }],
        },
    });
    merge_json(&mut p, extra);
    p
}

/// Merges `from` into `into`: objects key by key, anything else replaced.
pub fn merge_json(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge_json(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

/// The driver (and DeviceClass) of the tests' devices.
pub const GPU_CLASS: &str = "gpu.example.com";

/// The DeviceClass every device of [`GPU_CLASS`]'s driver belongs to.
pub fn gpu_class() -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": GPU_CLASS},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{GPU_CLASS}'")}}]},
    })
}

/// The ResourceSlice a driver would publish for `node`'s devices, (name, model) each.
pub fn gpu_slice(node: &str, devices: &[(&str, &str)]) -> Value {
    let devices: Vec<Value> = devices
        .iter()
        .map(|(name, model)| json!({"name": name, "attributes": {"model": {"string": model}}}))
        .collect();
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {
            "driver": GPU_CLASS, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    })
}

/// The ResourceClaimTemplate `one-gpu` of `default`: one device of [`GPU_CLASS`].
pub fn one_gpu_template() -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}},
        ]}}},
    })
}
