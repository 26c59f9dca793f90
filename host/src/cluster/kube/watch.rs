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
use crate::cluster::manifest::{node_from_k8s, pod_from_k8s, selector_from_k8s};
use crate::live::Input;
use berth_sdk::Labels;
use futures::StreamExt;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as k8s;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// What one object of a kind becomes: its key (for deletions) and its change, or
/// nothing (an object the scheduler ignores), or why it cannot be read.
type Convert<K> = fn(&K) -> Result<Option<(String, Change)>, String>;
/// The change for a deleted object, by key.
type Deleted = fn(String) -> Change;

/// Starts the watchers on `handle`'s runtime; they run until aborted.
pub fn start_watchers(
    cluster: &KubeCluster,
    handle: &Handle,
    tx: Sender<Input>,
) -> Vec<JoinHandle<()>> {
    let c = &cluster.client;
    let pending = Arc::new(AtomicUsize::new(7));
    let mut tasks = Vec::new();
    // Terminal pods hold nothing on their node, as upstream's informer filter.
    let pods = watcher::Config::default().fields("status.phase!=Succeeded,status.phase!=Failed");
    tasks.push(handle.spawn(watch::<k8s::Pod>(
        Api::all(c.clone()),
        pods,
        "pods",
        convert_pod,
        Change::PodDeleted,
        tx.clone(),
        pending.clone(),
    )));
    tasks.push(handle.spawn(watch::<k8s::Node>(
        Api::all(c.clone()),
        watcher::Config::default(),
        "nodes",
        |n| node_from_k8s(n).map(|n| Some((n.name.clone(), Change::Node(n)))),
        Change::NodeDeleted,
        tx.clone(),
        pending.clone(),
    )));
    tasks.push(handle.spawn(watch::<k8s::Namespace>(
        Api::all(c.clone()),
        watcher::Config::default(),
        "namespaces",
        |ns| {
            let name = ns.metadata.name.clone().unwrap_or_default();
            let labels: Labels = ns.metadata.labels.clone().unwrap_or_default();
            Ok(Some((name.clone(), Change::Namespace(name, labels))))
        },
        Change::NamespaceDeleted,
        tx.clone(),
        pending.clone(),
    )));
    tasks.push(handle.spawn(watch::<k8s::Service>(
        Api::all(c.clone()),
        watcher::Config::default(),
        "services",
        |o| selector("Service", o),
        |k| selector_deleted("Service", k),
        tx.clone(),
        pending.clone(),
    )));
    tasks.push(handle.spawn(watch::<k8s::ReplicationController>(
        Api::all(c.clone()),
        watcher::Config::default(),
        "replicationcontrollers",
        |o| selector("ReplicationController", o),
        |k| selector_deleted("ReplicationController", k),
        tx.clone(),
        pending.clone(),
    )));
    tasks.push(handle.spawn(watch::<apps::ReplicaSet>(
        Api::all(c.clone()),
        watcher::Config::default(),
        "replicasets",
        |o| selector("ReplicaSet", o),
        |k| selector_deleted("ReplicaSet", k),
        tx.clone(),
        pending.clone(),
    )));
    tasks.push(handle.spawn(watch::<apps::StatefulSet>(
        Api::all(c.clone()),
        watcher::Config::default(),
        "statefulsets",
        |o| selector("StatefulSet", o),
        |k| selector_deleted("StatefulSet", k),
        tx,
        pending,
    )));
    tasks
}

fn convert_pod(p: &k8s::Pod) -> Result<Option<(String, Change)>, String> {
    let pod = pod_from_k8s(p)?;
    let uid = pod.uid.clone();
    if pod.node_name.is_empty() && p.metadata.deletion_timestamp.is_some() {
        // Being deleted before it was placed: nothing to schedule (as upstream skips
        // such pods).
        return Ok(Some((uid.clone(), Change::PodDeleted(uid))));
    }
    Ok(Some((uid, Change::Pod(pod))))
}

fn selector<T: serde::Serialize>(kind: &str, o: &T) -> Result<Option<(String, Change)>, String> {
    let s = selector_from_k8s(kind, o)?;
    Ok(Some((
        format!("{}/{}", s.namespace, s.name),
        Change::Selector(s),
    )))
}

fn selector_deleted(kind: &str, key: String) -> Change {
    let (namespace, name) = key.split_once('/').unwrap_or(("", &key));
    Change::SelectorDeleted {
        kind: kind.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

fn object_name<K: kube::Resource>(o: &K) -> String {
    let m = o.meta();
    match &m.namespace {
        Some(ns) => format!("{ns}/{}", m.name.as_deref().unwrap_or("")),
        None => m.name.clone().unwrap_or_default(),
    }
}

async fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    kind: &'static str,
    convert: Convert<K>,
    deleted: Deleted,
    tx: Sender<Input>,
    pending: Arc<AtomicUsize>,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    let mut known: HashSet<String> = HashSet::new();
    let mut relisting: Option<HashSet<String>> = None;
    let mut synced = false;
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let send = |c: Change| tx.send(Input::Change(c)).is_ok();
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
