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

/// Starts the watchers on `handle`'s runtime; they run until aborted.
pub fn start_watchers(
    cluster: &KubeCluster,
    handle: &Handle,
    tx: Sender<Input>,
) -> Vec<JoinHandle<()>> {
    let mut s = Spawner {
        client: cluster.client.clone(),
        handle,
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
    s.spawn::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(
        "poddisruptionbudgets",
        watcher::Config::default(),
        |pdb| {
            let b = crate::cluster::manifest::budget_from_k8s(pdb)
                .map_err(|(path, message)| format!("{path}: {message}"))?;
            Ok(Some((
                format!("{}/{}", b.namespace, b.name),
                Change::Budget(b),
            )))
        },
        |key| {
            let (namespace, name) = key.split_once('/').unwrap_or(("", &key));
            Change::BudgetDeleted {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            }
        },
    );
    s.selectors::<k8s::Service>("services", "Service");
    s.selectors::<k8s::ReplicationController>("replicationcontrollers", "ReplicationController");
    s.selectors::<apps::ReplicaSet>("replicasets", "ReplicaSet");
    s.selectors::<apps::StatefulSet>("statefulsets", "StatefulSet");
    if s.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        let _ = s.tx.send(Input::Change(Change::Synced));
    }
    s.tasks
}

struct Spawner<'a> {
    client: kube::Client,
    handle: &'a Handle,
    tx: Sender<Input>,
    pending: Arc<AtomicUsize>,
    tasks: Vec<JoinHandle<()>>,
}

impl Spawner<'_> {
    fn spawn<K>(
        &mut self,
        kind: &'static str,
        config: watcher::Config,
        convert: impl Fn(&K) -> Result<Option<(String, Change)>, String> + Send + 'static,
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
        self.tasks.push(self.handle.spawn(watch::<K>(
            Api::all(self.client.clone()),
            config,
            kind,
            convert,
            deleted,
            self.tx.clone(),
            self.pending.clone(),
        )));
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
        let convert = move |o: &K| -> Result<Option<(String, Change)>, String> {
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
    // What one object becomes: its key (for deletions) and its change, or nothing (an
    // object the scheduler ignores), or why it cannot be read.
    convert: impl Fn(&K) -> Result<Option<(String, Change)>, String>,
    // The change for a deleted object, by key.
    deleted: impl Fn(String) -> Change,
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
