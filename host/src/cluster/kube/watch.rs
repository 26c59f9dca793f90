//! Watchers: one kube-runtime watcher per kind the scheduler reads, turning what the
//! API server says into [`Change`]s for the scheduling loop.
//!
//! A watch that breaks (a dropped connection, an API server restart, 410 Gone) is
//! restarted with backoff and relists. A relist says nothing of objects deleted while
//! the watch was down, so each watcher remembers the objects it reported and, when a
//! relist ends, reports as deleted those it no longer lists. When every watcher has
//! listed once, the loop is told [`Change::Synced`] and starts scheduling.

use super::KubeCluster;
use crate::cluster::Change;
use crate::cluster::manifest::{
    FieldError, budget_from_k8s, claim_from_k8s, csi_driver_from_k8s, csi_node_from_k8s,
    node_from_k8s, pod_from_k8s, selector_from_k8s, storage_class_from_k8s, volume_from_k8s,
};
use berth_sdk::Labels;
use futures::StreamExt;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1 as storage;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// Starts the watchers on `handle`'s runtime; they run until aborted. Each change
/// goes to `tx` as a `T` (the scheduling loop's input), so that this backend needs
/// nothing of the loop above it.
pub fn start_watchers<T: From<Change> + Send + 'static>(
    cluster: &KubeCluster,
    handle: &Handle,
    tx: Sender<T>,
) -> Vec<JoinHandle<()>> {
    start(cluster, handle, tx, Mode::Watch)
}

/// How the tasks of [`start`] read their kinds.
#[derive(Clone)]
pub(super) enum Mode {
    /// Watch until aborted: the scheduler's sources.
    Watch,
    /// List once and end, a failed list reported on the channel as a sentence: a
    /// snapshot of the cluster, as the scheduler would see it at start.
    ListOnce(Sender<String>),
}

/// One task per kind the scheduler reads, each reading it as `mode` says; the last
/// to have listed sends [`Change::Synced`].
pub(super) fn start<T: From<Change> + Send + 'static>(
    cluster: &KubeCluster,
    handle: &Handle,
    tx: Sender<T>,
    mode: Mode,
) -> Vec<JoinHandle<()>> {
    let mut s = Spawner {
        client: cluster.client.clone(),
        handle,
        mode,
        tx,
        // One for the spawning itself, so that no watcher that lists quickly can say
        // "synced" before the others are even started.
        pending: Arc::new(AtomicUsize::new(1)),
        tasks: Vec::new(),
    };
    // Terminal pods hold nothing on their node, as upstream's informer filter.
    let pods = watcher::Config::default().fields("status.phase!=Succeeded,status.phase!=Failed");
    s.spawn::<k8s::Pod>("pods", pods, convert_pod, Change::PodDeleted);
    s.spawn::<k8s::Node>(
        "nodes",
        watcher::Config::default(),
        |n| node_from_k8s(n).map(|n| Some((n.name.clone(), Change::Node(n)))),
        Change::NodeDeleted,
    );
    s.spawn::<k8s::Namespace>(
        "namespaces",
        watcher::Config::default(),
        |ns| {
            let name = ns.metadata.name.clone().unwrap_or_default();
            let labels: Labels = ns.metadata.labels.clone().unwrap_or_default();
            Ok(Some((name.clone(), Change::Namespace(name, labels))))
        },
        Change::NamespaceDeleted,
    );
    s.budgets();
    s.storage();
    s.selectors::<k8s::Service>("services", "Service");
    s.selectors::<k8s::ReplicationController>("replicationcontrollers", "ReplicationController");
    s.selectors::<apps::ReplicaSet>("replicasets", "ReplicaSet");
    s.selectors::<apps::StatefulSet>("statefulsets", "StatefulSet");
    if s.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        let _ = s.tx.send(Change::Synced.into());
    }
    s.tasks
}

struct Spawner<'a, T> {
    client: kube::Client,
    handle: &'a Handle,
    mode: Mode,
    tx: Sender<T>,
    pending: Arc<AtomicUsize>,
    tasks: Vec<JoinHandle<()>>,
}

impl<T: From<Change> + Send + 'static> Spawner<'_, T> {
    fn spawn<K>(
        &mut self,
        kind: &'static str,
        config: watcher::Config,
        convert: impl Fn(&K) -> Result<Option<(String, Change)>, FieldError> + Send + 'static,
        deleted: impl Fn(String) -> Change + Send + 'static,
    ) where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + Debug
            + Send
            + 'static,
    {
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.tasks.push(self.handle.spawn(watch::<K, T>(
            self.mode.clone(),
            Api::all(self.client.clone()),
            config,
            kind,
            convert,
            deleted,
            self.tx.clone(),
            self.pending.clone(),
        )));
    }

    /// PodDisruptionBudgets, from the version the API server serves: `policy/v1`
    /// (Kubernetes 1.21 and later) or `policy/v1beta1` (the same fields preemption
    /// reads). A server that serves neither has no budgets: preemption sees none,
    /// and the scheduler says so once instead of waiting for a list that never comes.
    fn budgets(&mut self) {
        self.pending.fetch_add(1, Ordering::AcqRel);
        let client = self.client.clone();
        let tx = self.tx.clone();
        let pending = self.pending.clone();
        let mode = self.mode.clone();
        self.tasks.push(self.handle.spawn(async move {
            let Some(resource) = served_budgets(&client).await else {
                tracing::warn!(
                    "this API server serves no PodDisruptionBudgets (policy/v1 or \
                     policy/v1beta1): preemption will see none"
                );
                if pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let _ = tx.send(Change::Synced.into());
                }
                return;
            };
            tracing::debug!(version = %resource.api_version, "poddisruptionbudgets: served");
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            let convert = |o: &DynamicObject| -> Result<Option<(String, Change)>, FieldError> {
                let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
                    serde_json::to_value(o)
                        .and_then(serde_json::from_value)
                        .map_err(|e| FieldError::new("", e.to_string()))?;
                let b = budget_from_k8s(&pdb)?;
                Ok(Some((
                    format!("{}/{}", b.namespace, b.name),
                    Change::Budget(b),
                )))
            };
            let deleted = |key: String| {
                let (namespace, name) = key.split_once('/').unwrap_or(("", &key));
                Change::BudgetDeleted {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                }
            };
            watch(
                mode,
                api,
                watcher::Config::default(),
                "poddisruptionbudgets",
                convert,
                deleted,
                tx,
                pending,
            )
            .await;
        }));
    }

    /// The storage kinds the volume plugins read: PersistentVolumeClaims and
    /// PersistentVolumes (`v1`), StorageClasses, CSINodes and CSIDrivers
    /// (`storage.k8s.io/v1`, served since Kubernetes 1.18 for all three).
    fn storage(&mut self) {
        self.spawn::<k8s::PersistentVolumeClaim>(
            "persistentvolumeclaims",
            watcher::Config::default(),
            |c| {
                let c = claim_from_k8s(c)?;
                Ok(Some((c.key(), Change::Claim(c))))
            },
            |key| {
                let (namespace, name) = key.split_once('/').unwrap_or(("", &key));
                Change::ClaimDeleted {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                }
            },
        );
        self.spawn::<k8s::PersistentVolume>(
            "persistentvolumes",
            watcher::Config::default(),
            |v| {
                let v = volume_from_k8s(v)?;
                Ok(Some((v.name.clone(), Change::Volume(v))))
            },
            Change::VolumeDeleted,
        );
        self.spawn::<storage::StorageClass>(
            "storageclasses",
            watcher::Config::default(),
            |c| {
                let c = storage_class_from_k8s(c)?;
                Ok(Some((c.name.clone(), Change::StorageClass(c))))
            },
            Change::StorageClassDeleted,
        );
        self.spawn::<storage::CSINode>(
            "csinodes",
            watcher::Config::default(),
            |n| {
                let n = csi_node_from_k8s(n)?;
                Ok(Some((n.name.clone(), Change::CsiNode(n))))
            },
            Change::CsiNodeDeleted,
        );
        self.spawn::<storage::CSIDriver>(
            "csidrivers",
            watcher::Config::default(),
            |d| {
                let d = csi_driver_from_k8s(d)?;
                Ok(Some((d.name.clone(), Change::CsiDriver(d))))
            },
            Change::CsiDriverDeleted,
        );
    }

    /// A kind whose only interest is its pod selector; `kind` is its `kind`.
    fn selectors<K>(&mut self, resource: &'static str, kind: &'static str)
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + Debug
            + Send
            + 'static,
    {
        let convert = move |o: &K| -> Result<Option<(String, Change)>, FieldError> {
            let s = selector_from_k8s(kind, o)?;
            Ok(Some((
                format!("{}/{}", s.namespace, s.name),
                Change::Selector(s),
            )))
        };
        let deleted = move |key: String| {
            let (namespace, name) = key.split_once('/').unwrap_or(("", &key));
            Change::SelectorDeleted {
                kind: kind.to_owned(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            }
        };
        self.spawn::<K>(resource, watcher::Config::default(), convert, deleted);
    }
}

/// The PodDisruptionBudget resource the API server serves, newest version first. A
/// discovery call that fails (the server is down) is retried: the watchers wait for
/// the server anyway.
async fn served_budgets(client: &kube::Client) -> Option<ApiResource> {
    let mut delay = std::time::Duration::from_millis(200);
    'retry: loop {
        for version in ["v1", "v1beta1"] {
            match client
                .list_api_group_resources(&format!("policy/{version}"))
                .await
            {
                Ok(list) => {
                    if let Some(r) = list
                        .resources
                        .iter()
                        .find(|r| r.name == "poddisruptionbudgets")
                    {
                        let gvk = GroupVersionKind::gvk("policy", version, &r.kind);
                        return Some(ApiResource::from_gvk_with_plural(&gvk, &r.name));
                    }
                }
                // The group version is not served.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!("discovery of policy/{version} failed, retrying: {e}");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_secs(10));
                    continue 'retry;
                }
            }
        }
        return None;
    }
}

fn convert_pod(p: &k8s::Pod) -> Result<Option<(String, Change)>, FieldError> {
    let pod = pod_from_k8s(p)?;
    let uid = pod.uid.clone();
    if pod.node_name.is_empty() && p.metadata.deletion_timestamp.is_some() {
        // Being deleted before it was placed: nothing to schedule (as upstream skips
        // such pods).
        return Ok(Some((uid.clone(), Change::PodDeleted(uid))));
    }
    Ok(Some((uid, Change::Pod(pod))))
}

fn object_name<K: kube::Resource>(o: &K) -> String {
    let m = o.meta();
    match &m.namespace {
        Some(ns) => format!("{ns}/{}", m.name.as_deref().unwrap_or("")),
        None => m.name.clone().unwrap_or_default(),
    }
}

/// Lists one kind once, page by page, as the watcher's first list would (same
/// selectors, same conversion: an object the scheduler would ignore is ignored here
/// too, with the same warning). A list that fails is reported on `failures` and ends
/// the task; either way the task counts as listed.
async fn list_once<K, T: From<Change>>(
    api: Api<K>,
    config: watcher::Config,
    kind: &'static str,
    convert: impl Fn(&K) -> Result<Option<(String, Change)>, FieldError>,
    tx: Sender<T>,
    pending: Arc<AtomicUsize>,
    failures: Sender<String>,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    let mut params = ListParams::default().limit(500);
    if let Some(f) = &config.field_selector {
        params = params.fields(f);
    }
    if let Some(l) = &config.label_selector {
        params = params.labels(l);
    }
    loop {
        match api.list(&params).await {
            Ok(list) => {
                for o in &list.items {
                    match convert(o) {
                        Ok(Some((_, change))) => {
                            if tx.send(change.into()).is_err() {
                                return;
                            }
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!("{kind}: ignoring {}: {e}", object_name(o)),
                    }
                }
                match list.metadata.continue_ {
                    Some(token) if !token.is_empty() => params.continue_token = Some(token),
                    _ => break,
                }
            }
            Err(e) => {
                let _ = failures.send(format!("cannot list {kind}: {}", super::error_message(&e)));
                break;
            }
        }
    }
    if pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        let _ = tx.send(Change::Synced.into());
    }
}

/// Reads one kind as `mode` says: watches it (below), or lists it once
/// ([`list_once`]).
#[allow(
    clippy::too_many_arguments,
    reason = "what a kind is read with, each named"
)]
async fn watch<K, T: From<Change>>(
    mode: Mode,
    api: Api<K>,
    config: watcher::Config,
    kind: &'static str,
    // What one object becomes: its key (for deletions) and its change, or nothing (an
    // object the scheduler ignores), or why it cannot be read.
    convert: impl Fn(&K) -> Result<Option<(String, Change)>, FieldError>,
    // The change for a deleted object, by key.
    deleted: impl Fn(String) -> Change,
    tx: Sender<T>,
    pending: Arc<AtomicUsize>,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    if let Mode::ListOnce(failures) = mode {
        return list_once(api, config, kind, convert, tx, pending, failures).await;
    }
    let mut known: HashSet<String> = HashSet::new();
    let mut relisting: Option<HashSet<String>> = None;
    let mut synced = false;
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let send = |c: Change| tx.send(c.into()).is_ok();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relisting = Some(HashSet::new()),
            Ok(Event::InitApply(o) | Event::Apply(o)) => match convert(&o) {
                Ok(Some((key, change))) => {
                    if let Some(seen) = &mut relisting {
                        seen.insert(key.clone());
                    }
                    known.insert(key);
                    if !send(change) {
                        return;
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("{kind}: ignoring {}: {e}", object_name(&o)),
            },
            Ok(Event::Delete(o)) => {
                if let Ok(Some((key, _))) = convert(&o) {
                    known.remove(&key);
                    if !send(deleted(key)) {
                        return;
                    }
                }
            }
            Ok(Event::InitDone) => {
                if let Some(seen) = relisting.take() {
                    // Gone while the watch was down.
                    for key in known.difference(&seen) {
                        if !send(deleted(key.clone())) {
                            return;
                        }
                    }
                    known = seen;
                }
                if !synced {
                    synced = true;
                    tracing::debug!("{kind}: listed");
                    if pending.fetch_sub(1, Ordering::AcqRel) == 1 && !send(Change::Synced) {
                        return;
                    }
                }
            }
            Err(e) => tracing::warn!("{kind} watch failed, retrying: {e}"),
        }
    }
}
