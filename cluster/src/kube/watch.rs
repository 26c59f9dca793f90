//! Watchers: one kube-runtime watcher per kind the scheduler reads, turning what the
//! API server says into [`Change`]s for the scheduling loop.
//!
//! A watch that breaks (a dropped connection, an API server restart, 410 Gone) is
//! restarted with backoff and relists. A relist says nothing of objects deleted while
//! the watch was down, so each watcher remembers the objects it reported and, when a
//! relist ends, reports as deleted those it no longer lists. When every watcher has
//! listed once, the loop is told [`Change::Synced`] and starts scheduling.
//!
//! A kind the scheduler may not list (403 on its list) counts as listed, and empty:
//! it is said once, marked in the cluster's [`ListAccess`] and told to the loop
//! ([`Change::KindForbidden`]), whose pods that need it wait; the list is retried
//! with the watcher's backoff, and once it succeeds the loop is told
//! [`Change::KindAllowed`].

use super::KubeCluster;
use super::pod_group_status::PodGroupStatuses;
use crate::Change;
use crate::access::{self, ListAccess};
use crate::dra::DraChange;
use crate::manifest::dra;
use crate::manifest::pod_group::pod_group_from_json;
use crate::manifest::scheduling_workload::workload_from_json;
use crate::manifest::{
    FieldError, budget_from_k8s, claim_from_k8s, csi_driver_from_k8s, csi_node_from_k8s,
    csi_storage_capacity_from_k8s, node_from_k8s, pod_from_k8s, selector_from_k8s,
    storage_class_from_k8s, volume_from_k8s,
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
/// nothing of the loop above it. PodGroups and Workloads are watched only with
/// `generic_workload` (the `GenericWorkload` gate), as kube-scheduler starts their
/// informer only then.
pub fn start_watchers<T: From<Change> + Send + 'static>(
    cluster: &KubeCluster,
    handle: &Handle,
    tx: Sender<T>,
    generic_workload: bool,
) -> Vec<JoinHandle<()>> {
    start(cluster, handle, tx, Mode::Watch, generic_workload)
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
/// to have listed sends [`Change::Synced`]. PodGroups and Workloads only with
/// `pod_groups`.
pub(super) fn start<T: From<Change> + Send + 'static>(
    cluster: &KubeCluster,
    handle: &Handle,
    tx: Sender<T>,
    mode: Mode,
    pod_groups: bool,
) -> Vec<JoinHandle<()>> {
    let mut s = Spawner {
        client: cluster.client.clone(),
        pod_groups: cluster.pod_groups.clone(),
        access: cluster.access.clone(),
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
    if pod_groups {
        s.pod_groups();
        s.workloads();
    }
    s.storage();
    s.dra();
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
    /// Kept up to date by the PodGroup watcher, for the recorder.
    pod_groups: Arc<PodGroupStatuses>,
    /// The kinds the watchers may not list.
    access: Arc<ListAccess>,
    handle: &'a Handle,
    mode: Mode,
    tx: Sender<T>,
    pending: Arc<AtomicUsize>,
    tasks: Vec<JoinHandle<()>>,
}

/// A `namespace/name` key split in two (a key without `/` names a cluster-scoped
/// object: no namespace).
fn split_key(key: &str) -> (String, String) {
    let (namespace, name) = key.split_once('/').unwrap_or(("", key));
    (namespace.to_owned(), name.to_owned())
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
        let access = KindAccess {
            name: access::qualified(kind, &K::group(&())),
            access: self.access.clone(),
        };
        self.tasks.push(self.handle.spawn(watch::<K, T>(
            self.mode.clone(),
            Api::all(self.client.clone()),
            config,
            kind,
            convert,
            deleted,
            self.tx.clone(),
            self.pending.clone(),
            access,
        )));
    }

    /// A kind an API server may not serve, watched (or listed, as `mode` says) as
    /// `DynamicObject`s in the first of its versions that discovery lists it in
    /// (`on_served` is told which). A server that serves it in none is said once,
    /// and the kind counts as listed: the scheduler does not wait for a list that
    /// never comes, and looks for the kind again only when it restarts.
    fn spawn_if_served(
        &mut self,
        kind: OptionalKind,
        on_served: impl FnOnce(&ApiResource) + Send + 'static,
        convert: impl Fn(&DynamicObject) -> Result<Option<(String, Change)>, FieldError>
        + Send
        + 'static,
        deleted: impl Fn(String) -> Change + Send + 'static,
    ) {
        let OptionalKind {
            group,
            versions,
            plural,
            unserved,
        } = kind;
        self.pending.fetch_add(1, Ordering::AcqRel);
        let client = self.client.clone();
        let tx = self.tx.clone();
        let pending = self.pending.clone();
        let mode = self.mode.clone();
        let list_access = self.access.clone();
        self.tasks.push(self.handle.spawn(async move {
            let Some(resource) = served(&client, group, versions, plural).await else {
                tracing::warn!("{unserved}");
                if pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let _ = tx.send(Change::Synced.into());
                }
                return;
            };
            tracing::debug!(version = %resource.api_version, "{plural}: served");
            on_served(&resource);
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            let access = KindAccess {
                name: access::qualified(plural, &resource.group),
                access: list_access,
            };
            watch(
                mode,
                api,
                watcher::Config::default(),
                plural,
                convert,
                deleted,
                tx,
                pending,
                access,
            )
            .await;
        }));
    }

    /// PodDisruptionBudgets, from the version the API server serves: `policy/v1`
    /// (Kubernetes 1.21 and later) or `policy/v1beta1` (the same fields preemption
    /// reads). A server that serves neither has no budgets: preemption sees none.
    fn budgets(&mut self) {
        let convert = |o: &DynamicObject| -> Result<Option<(String, Change)>, FieldError> {
            let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = typed(o)?;
            let b = budget_from_k8s(&pdb)?;
            Ok(Some((
                format!("{}/{}", b.namespace, b.name),
                Change::Budget(b),
            )))
        };
        let deleted = |key: String| {
            let (namespace, name) = split_key(&key);
            Change::BudgetDeleted { namespace, name }
        };
        self.spawn_if_served(
            OptionalKind {
                group: "policy",
                versions: &["v1", "v1beta1"],
                plural: "poddisruptionbudgets",
                unserved: "this API server serves no PodDisruptionBudgets (policy/v1 or \
                           policy/v1beta1): preemption will see none",
            },
            |_| {},
            convert,
            deleted,
        );
    }

    /// PodGroups (`scheduling.k8s.io`, workload-aware scheduling), from the version
    /// the API server serves: `v1beta1` (Kubernetes 1.37) or `v1alpha3`. Each one
    /// seen is also kept in the cluster's [`PodGroupStatuses`], which the recorder
    /// writes their condition from. A server that serves neither (every release
    /// before workload-aware scheduling, or one with its API off): pods naming a pod
    /// group then wait for it.
    fn pod_groups(&mut self) {
        let statuses = self.pod_groups.clone();
        let seen = statuses.clone();
        let convert = move |o: &DynamicObject| -> Result<Option<(String, Change)>, FieldError> {
            let value = serde_json::to_value(o).map_err(|e| FieldError::new("", e.to_string()))?;
            let g = pod_group_from_json(value)?;
            seen.observe(o);
            Ok(Some((
                format!("{}/{}", g.namespace, g.name),
                Change::PodGroup(g),
            )))
        };
        let served_in = statuses.clone();
        let deleted = move |key: String| {
            statuses.forget(&key);
            let (namespace, name) = split_key(&key);
            Change::PodGroupDeleted { namespace, name }
        };
        self.spawn_if_served(
            OptionalKind {
                group: "scheduling.k8s.io",
                versions: &["v1beta1", "v1alpha3"],
                plural: "podgroups",
                unserved: "the API server serves no PodGroups (scheduling.k8s.io/v1beta1 or \
                           v1alpha3): pods naming a pod group wait at PreEnqueue until it \
                           appears, and Berth looks for PodGroups again only when it restarts",
            },
            move |resource| served_in.serve(resource.clone()),
            convert,
            deleted,
        );
    }

    /// Workloads (`scheduling.k8s.io`, the templates PodGroups are made from), from
    /// the version the API server serves: `v1beta1` or `v1alpha3`. Scheduling does
    /// not need them (a PodGroup carries its template's policy); `explain` names a
    /// group's Workload and says whether it is known. A server that serves neither
    /// is said once.
    fn workloads(&mut self) {
        let convert = |o: &DynamicObject| -> Result<Option<(String, Change)>, FieldError> {
            let value = serde_json::to_value(o).map_err(|e| FieldError::new("", e.to_string()))?;
            let w = workload_from_json(value)?;
            Ok(Some((
                format!("{}/{}", w.namespace, w.name),
                Change::SchedulingWorkload(w),
            )))
        };
        let deleted = |key: String| {
            let (namespace, name) = split_key(&key);
            Change::SchedulingWorkloadDeleted { namespace, name }
        };
        self.spawn_if_served(
            OptionalKind {
                group: "scheduling.k8s.io",
                versions: &["v1beta1", "v1alpha3"],
                plural: "workloads",
                unserved: "the API server serves no Workloads (scheduling.k8s.io/v1beta1 or \
                           v1alpha3): pod groups are scheduled without them, and Berth looks \
                           for Workloads again only when it restarts",
            },
            |_| {},
            convert,
            deleted,
        );
    }

    /// The storage kinds the volume plugins read: PersistentVolumeClaims and
    /// PersistentVolumes (`v1`), StorageClasses, CSINodes and CSIDrivers
    /// (`storage.k8s.io/v1`, served since Kubernetes 1.18 for all three), and
    /// CSIStorageCapacities where they are served.
    fn storage(&mut self) {
        self.spawn::<k8s::PersistentVolumeClaim>(
            "persistentvolumeclaims",
            watcher::Config::default(),
            |c| {
                let c = claim_from_k8s(c)?;
                Ok(Some((c.key(), Change::Claim(c))))
            },
            |key| {
                let (namespace, name) = split_key(&key);
                Change::ClaimDeleted { namespace, name }
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
        self.storage_capacities();
    }

    /// CSIStorageCapacities (`storage.k8s.io/v1`, served since Kubernetes 1.24; 1.21
    /// to 1.23 serve only `v1beta1`, which kube-scheduler 1.37 no longer reads). A
    /// server without them is said once: VolumeBinding then finds no capacity for a
    /// driver that publishes it, as kube-scheduler does with an empty lister.
    fn storage_capacities(&mut self) {
        self.spawn_if_served(
            OptionalKind {
                group: "storage.k8s.io",
                versions: &["v1"],
                plural: "csistoragecapacities",
                unserved: "the API server serves no CSIStorageCapacities (storage.k8s.io/v1): \
                           a CSI driver that publishes its capacity is found to have none \
                           on any node, and Berth looks for them again only when it restarts",
            },
            |_| {},
            |o| {
                let c: storage::CSIStorageCapacity = typed(o)?;
                let c = csi_storage_capacity_from_k8s(&c)?;
                Ok(Some((
                    format!("{}/{}", c.namespace, c.name),
                    Change::CsiStorageCapacity(c),
                )))
            },
            |key| {
                let (namespace, name) = split_key(&key);
                Change::CsiStorageCapacityDeleted { namespace, name }
            },
        );
    }

    /// The dynamic resource allocation kinds (`resource.k8s.io/v1`, served since
    /// Kubernetes 1.34): DeviceClasses, ResourceClaims, ResourceClaimTemplates,
    /// ResourceSlices and DeviceTaintRules. A server that does not serve one (every
    /// release before 1.34, or one with the API off) is said once per kind.
    fn dra(&mut self) {
        self.dra_kind(
            "deviceclasses",
            "the API server serves no DeviceClasses (resource.k8s.io/v1): requests for \
             devices cannot be allocated, and Berth looks for them again only when it restarts",
            |o| {
                let c = dra::device_class(&typed(o)?)?;
                Ok(Some((c.name.clone(), DraChange::Class(c))))
            },
            DraChange::ClassDeleted,
        );
        self.dra_kind(
            "resourceclaims",
            "the API server serves no ResourceClaims (resource.k8s.io/v1): pods with \
             ResourceClaims wait for them, and Berth looks for them again only when it restarts",
            |o| {
                let c = dra::resource_claim(&typed(o)?)?;
                Ok(Some((c.key(), DraChange::Claim(c))))
            },
            |key| {
                let (namespace, name) = split_key(&key);
                DraChange::ClaimDeleted { namespace, name }
            },
        );
        self.dra_kind(
            "resourceclaimtemplates",
            "the API server serves no ResourceClaimTemplates (resource.k8s.io/v1): Berth \
             looks for them again only when it restarts",
            |o| {
                let t = dra::claim_template(&typed(o)?)?;
                Ok(Some((
                    format!("{}/{}", t.namespace, t.name),
                    DraChange::Template(t),
                )))
            },
            |key| {
                let (namespace, name) = split_key(&key);
                DraChange::TemplateDeleted { namespace, name }
            },
        );
        self.dra_kind(
            "resourceslices",
            "the API server serves no ResourceSlices (resource.k8s.io/v1): no device can \
             be allocated, and Berth looks for them again only when it restarts",
            |o| {
                let s = dra::resource_slice(&typed(o)?)?;
                Ok(Some((s.name.clone(), DraChange::Slice(s))))
            },
            DraChange::SliceDeleted,
        );
        self.dra_kind(
            "devicetaintrules",
            "the API server serves no DeviceTaintRules (resource.k8s.io/v1): devices are \
             tainted only by their slices, and Berth looks for the rules again only when it \
             restarts",
            |o| {
                let r = dra::device_taint_rule(&typed(o)?)?;
                Ok(Some((r.name.clone(), DraChange::TaintRule(r))))
            },
            DraChange::TaintRuleDeleted,
        );
    }

    /// One kind of [`Spawner::dra`].
    fn dra_kind(
        &mut self,
        plural: &'static str,
        unserved: &'static str,
        convert: impl Fn(&DynamicObject) -> Result<Option<(String, DraChange)>, FieldError>
        + Send
        + 'static,
        deleted: impl Fn(String) -> DraChange + Send + 'static,
    ) {
        self.spawn_if_served(
            OptionalKind {
                group: dra::API_GROUP,
                versions: &["v1"],
                plural,
                unserved,
            },
            |_| {},
            move |o| Ok(convert(o)?.map(|(key, c)| (key, Change::Dra(c)))),
            move |key| Change::Dra(deleted(key)),
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
            let (namespace, name) = split_key(&key);
            Change::SelectorDeleted {
                kind: kind.to_owned(),
                namespace,
                name,
            }
        };
        self.spawn::<K>(resource, watcher::Config::default(), convert, deleted);
    }
}

/// A kind served as a `DynamicObject`, read as its typed form.
fn typed<K: serde::de::DeserializeOwned>(o: &DynamicObject) -> Result<K, FieldError> {
    serde_json::to_value(o)
        .and_then(serde_json::from_value)
        .map_err(|e| FieldError::new("", e.to_string()))
}

/// A kind an API server may not serve ([`Spawner::spawn_if_served`]).
struct OptionalKind {
    /// Its API group.
    group: &'static str,
    /// The versions of `group` it may be served in, newest first.
    versions: &'static [&'static str],
    /// Its resource name.
    plural: &'static str,
    /// What is said (once) when none of `versions` serves it.
    unserved: &'static str,
}

/// The resource `plural` of `group` as the API server serves it, in the first of
/// `versions` (newest first) whose discovery lists it; `None` when none does. A
/// discovery call that fails (the server is down) is retried: the watchers wait for
/// the server anyway.
async fn served(
    client: &kube::Client,
    group: &str,
    versions: &[&str],
    plural: &str,
) -> Option<ApiResource> {
    let mut delay = std::time::Duration::from_millis(200);
    'retry: loop {
        for version in versions {
            match client
                .list_api_group_resources(&format!("{group}/{version}"))
                .await
            {
                Ok(list) => {
                    if let Some(r) = list.resources.iter().find(|r| r.name == plural) {
                        let gvk = GroupVersionKind::gvk(group, version, &r.kind);
                        return Some(ApiResource::from_gvk_with_plural(&gvk, &r.name));
                    }
                }
                // The group version is not served.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!("discovery of {group}/{version} failed, retrying: {e}");
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

/// A kind's name in messages ([`access::qualified`]) and where its access is kept.
struct KindAccess {
    name: String,
    access: Arc<ListAccess>,
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
    // Where a 403 on the list is marked.
    access: KindAccess,
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
                if access.access.allow(&access.name) {
                    tracing::info!(
                        kind = %access.name,
                        "listed {}: the scheduler may list it now, and the pods that waited for it are tried again",
                        access.name
                    );
                    if !send(Change::KindAllowed(access.name.clone())) {
                        return;
                    }
                }
                if !synced {
                    synced = true;
                    tracing::debug!("{kind}: listed");
                    if pending.fetch_sub(1, Ordering::AcqRel) == 1 && !send(Change::Synced) {
                        return;
                    }
                }
            }
            Err(watcher::Error::InitialListFailed(kube::Error::Api(status)))
                if status.code == 403 =>
            {
                let why = if status.message.is_empty() {
                    format!("{} ({})", status.reason, status.code)
                } else {
                    status.message.clone()
                };
                if access.access.forbid(&access.name, &why) {
                    tracing::warn!(
                        kind = %access.name,
                        "the scheduler may not list {}: pods whose scheduling needs it wait, \
                         the rest are scheduled; retrying with backoff until it may: {why}",
                        access.name
                    );
                    if !send(Change::KindForbidden {
                        kind: access.name.clone(),
                        message: why,
                    }) {
                        return;
                    }
                } else {
                    tracing::debug!(kind = %access.name, "still forbidden, retrying: {why}");
                }
                // Listed, as far as waiting goes: empty; but never pods or nodes,
                // without which the scheduler is not ready.
                if !synced && !access::ESSENTIAL.contains(&access.name.as_str()) {
                    synced = true;
                    if pending.fetch_sub(1, Ordering::AcqRel) == 1 && !send(Change::Synced) {
                        return;
                    }
                }
            }
            Err(e) => tracing::warn!("{kind} watch failed, retrying: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{self, Answer};
    use super::*;
    use crate::pod_groups::{PodGroupObject, PodGroupPolicy};
    use futures::channel::mpsc;
    use serde_json::{Value, json};
    use std::sync::Mutex;
    use std::sync::mpsc::Receiver;

    const GROUP_VERSION: &str = "/apis/scheduling.k8s.io/v1beta1";
    const PODGROUPS: &str = "/apis/scheduling.k8s.io/v1beta1/podgroups";

    /// A PodGroup as a 1.37 API server serves it (a list's items carry no apiVersion
    /// and kind; a watch event's object does).
    fn pod_group(name: &str, rv: u64, policy: Value, with_type: bool) -> Value {
        let mut o = json!({
            "metadata": {
                "name": name,
                "namespace": "ml",
                "uid": format!("{name}-0f6f3c2e-3d0c-4a4e-9a57"),
                "resourceVersion": rv.to_string(),
                "generation": 1,
                "creationTimestamp": "2026-11-20T08:14:03Z",
                "managedFields": [{
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "time": "2026-11-20T08:14:03Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:schedulingPolicy": {}}},
                }],
            },
            "spec": {"schedulingPolicy": policy, "disruptionMode": {"single": {}}},
            "status": {
                "conditions": [{
                    "type": "PodGroupInitiallyScheduled",
                    "status": "False",
                    "observedGeneration": 1,
                    "lastTransitionTime": "2026-11-20T08:14:05Z",
                    "reason": "Unschedulable",
                    "message": "waiting",
                }],
            },
        });
        if with_type {
            o["apiVersion"] = "scheduling.k8s.io/v1beta1".into();
            o["kind"] = "PodGroup".into();
        }
        o
    }

    fn gang(min_count: i64) -> Value {
        json!({"gang": {"minCount": min_count}})
    }

    fn discovery(resources: &[(&str, &str)]) -> Answer {
        let resources: Vec<Value> = resources
            .iter()
            .map(|(name, kind)| {
                json!({
                    "name": name,
                    "singularName": "",
                    "namespaced": true,
                    "kind": kind,
                    "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                })
            })
            .collect();
        Answer::Json(
            200,
            json!({
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": "scheduling.k8s.io/v1beta1",
                "resources": resources,
            }),
        )
    }

    /// An API server that serves PodGroups in `v1beta1`: `list` answers the list, the
    /// first watch streams what the test sends on the returned sender, later
    /// watches stay open and quiet.
    fn serving(
        list: Value,
    ) -> (
        impl Fn(&fake::Request) -> Answer + Send + Sync + 'static,
        mpsc::UnboundedSender<Value>,
    ) {
        serving_at(
            PODGROUPS,
            &[("podgroups", "PodGroup"), ("podgroups/status", "PodGroup")],
            list,
        )
    }

    /// An API server whose `scheduling.k8s.io/v1beta1` discovery lists `resources`,
    /// and which serves the list at `path` as [`serving`] does.
    fn serving_at(
        path: &'static str,
        resources: &'static [(&'static str, &'static str)],
        list: Value,
    ) -> (
        impl Fn(&fake::Request) -> Answer + Send + Sync + 'static,
        mpsc::UnboundedSender<Value>,
    ) {
        let (events, rx) = mpsc::unbounded();
        let first = Mutex::new(Some(rx));
        let quiet = Mutex::new(Vec::new());
        let answer = move |r: &fake::Request| {
            if r.path == GROUP_VERSION {
                discovery(resources)
            } else if r.path == path && r.is_watch() {
                match first.lock().unwrap().take() {
                    Some(rx) => Answer::Events(rx),
                    None => {
                        let (tx, rx) = mpsc::unbounded();
                        quiet.lock().unwrap().push(tx);
                        Answer::Events(rx)
                    }
                }
            } else if r.path == path {
                Answer::Json(200, list.clone())
            } else {
                fake::not_found()
            }
        };
        (answer, events)
    }

    fn list(items: Vec<Value>) -> Value {
        json!({
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroupList",
            "metadata": {"resourceVersion": "500"},
            "items": items,
        })
    }

    fn spawner(cluster: &KubeCluster, mode: Mode) -> (Spawner<'static, Change>, Receiver<Change>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let handle: &'static Handle = Box::leak(Box::new(Handle::current()));
        (
            Spawner {
                client: cluster.client.clone(),
                pod_groups: cluster.pod_groups.clone(),
                access: cluster.access.clone(),
                handle,
                mode,
                tx,
                pending: Arc::new(AtomicUsize::new(0)),
                tasks: Vec::new(),
            },
            rx,
        )
    }

    async fn next(rx: &Receiver<Change>) -> Change {
        for _ in 0..2000 {
            if let Ok(c) = rx.try_recv() {
                return c;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("no change came");
    }

    fn group(name: &str, policy: PodGroupPolicy) -> PodGroupObject {
        PodGroupObject {
            namespace: "ml".into(),
            name: name.into(),
            policy,
            topology_keys: Vec::new(),
            ..Default::default()
        }
    }

    fn summary(c: &Change) -> String {
        match c {
            Change::PodGroup(g) => format!("{g:?}"),
            Change::PodGroupDeleted { namespace, name } => format!("deleted {namespace}/{name}"),
            Change::SchedulingWorkload(w) => {
                let templates: Vec<String> = w
                    .templates
                    .iter()
                    .map(|t| format!("{} {:?}", t.name, t.policy))
                    .collect();
                format!(
                    "workload {}/{}: {}",
                    w.namespace,
                    w.name,
                    templates.join(", ")
                )
            }
            Change::SchedulingWorkloadDeleted { namespace, name } => {
                format!("workload deleted {namespace}/{name}")
            }
            Change::Synced => "synced".into(),
            other => format!("unexpected {other:?}"),
        }
    }

    /// The log lines written while `f` runs (on this thread: the test's runtime has
    /// one).
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Log {
        fn start(&self) -> tracing::subscriber::DefaultGuard {
            let writer = self.clone();
            tracing::subscriber::set_default(
                tracing_subscriber::fmt()
                    .with_writer(move || writer.clone())
                    .with_ansi(false)
                    .finish(),
            )
        }

        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    #[tokio::test]
    async fn pod_groups_are_listed_then_watched_and_a_bad_one_is_named() {
        let log = Log::default();
        let _log = log.start();
        let (answer, events) = serving(list(vec![
            pod_group("trainer", 401, gang(4), false),
            pod_group("web", 402, json!({"basic": {}}), false),
            pod_group("broken", 403, gang(0), false),
        ]));
        let (client, requests) = fake::client(answer);
        let cluster = fake::cluster(client);
        let (mut s, rx) = spawner(&cluster, Mode::Watch);
        s.pod_groups();

        // The list: each PodGroup, the bad one left out, then synced.
        let mut changes = Vec::new();
        for _ in 0..3 {
            changes.push(summary(&next(&rx).await));
        }
        assert_eq!(
            changes,
            [
                format!(
                    "{:?}",
                    group("trainer", PodGroupPolicy::Gang { min_count: 4 })
                ),
                format!("{:?}", group("web", PodGroupPolicy::Basic)),
                "synced".to_owned(),
            ]
        );
        assert!(
            log.text().contains(
                "podgroups: ignoring ml/broken: spec.schedulingPolicy.gang.minCount: invalid value 0: must be greater than or equal to 1"
            ),
            "{}",
            log.text()
        );

        // The watch: a change, a new one, a bookmark, a deletion.
        let mut trainer = pod_group("trainer", 501, gang(5), true);
        trainer["metadata"]["generation"] = 2.into();
        events
            .unbounded_send(json!({"type": "MODIFIED", "object": trainer}))
            .unwrap();
        events
            .unbounded_send(
                json!({"type": "ADDED", "object": pod_group("late", 502, gang(2), true)}),
            )
            .unwrap();
        events
            .unbounded_send(json!({
                "type": "BOOKMARK",
                "object": {
                    "kind": "PodGroup",
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "metadata": {"resourceVersion": "503", "creationTimestamp": null},
                    "spec": {"schedulingPolicy": {}},
                    "status": {},
                },
            }))
            .unwrap();
        events
            .unbounded_send(json!({"type": "DELETED", "object": pod_group("web", 504, json!({"basic": {}}), true)}))
            .unwrap();
        let mut changes = Vec::new();
        for _ in 0..3 {
            changes.push(summary(&next(&rx).await));
        }
        assert_eq!(
            changes,
            [
                format!(
                    "{:?}",
                    group("trainer", PodGroupPolicy::Gang { min_count: 5 })
                ),
                format!("{:?}", group("late", PodGroupPolicy::Gang { min_count: 2 })),
                "deleted ml/web".to_owned(),
            ]
        );

        // What the recorder decides its writes on: each PodGroup as last seen.
        let statuses = &cluster.pod_groups;
        let trainer = statuses.get("ml/trainer").unwrap();
        assert_eq!(
            (trainer.resource_version.as_deref(), trainer.generation),
            (Some("501"), Some(2))
        );
        assert_eq!(trainer.conditions[0]["reason"], "Unschedulable");
        assert!(statuses.get("ml/web").is_none());
        assert!(statuses.get("ml/broken").is_none());
        assert_eq!(
            statuses.resource.get().map(|r| r.api_version.as_str()),
            Some("scheduling.k8s.io/v1beta1")
        );
        let requests = requests.lock().unwrap();
        assert!(requests.iter().all(|r| r.method == "GET"), "{requests:?}");
        for t in s.tasks {
            t.abort();
        }
    }

    /// A kind `spawn` watches, on a server whose `scheduling.k8s.io/v1beta1` serves
    /// only `served` and which has no v1alpha3: in both modes it counts as synced at
    /// once, `warning` is logged once each, and only discovery is asked. The
    /// cluster.
    async fn told_once_not_served(
        log: &Log,
        served: &'static [(&'static str, &'static str)],
        spawn: impl Fn(&mut Spawner<'static, Change>),
        warning: &str,
    ) -> KubeCluster {
        let (client, requests) = fake::client(move |r| match r.path.as_str() {
            GROUP_VERSION => discovery(served),
            _ => fake::not_found(),
        });
        let cluster = fake::cluster(client);
        for mode in [Mode::Watch, Mode::ListOnce(std::sync::mpsc::channel().0)] {
            let (mut s, rx) = spawner(&cluster, mode);
            spawn(&mut s);
            assert_eq!(summary(&next(&rx).await), "synced");
            for t in s.tasks {
                t.await.unwrap();
            }
        }
        assert_eq!(log.text().matches(warning).count(), 2, "{}", log.text());
        let paths: Vec<String> = requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.path.clone())
            .collect();
        assert_eq!(
            paths,
            [GROUP_VERSION, "/apis/scheduling.k8s.io/v1alpha3"].repeat(2),
            "discovery only, nothing listed"
        );
        cluster
    }

    #[tokio::test]
    async fn a_server_without_pod_groups_is_told_of_once_and_counts_as_listed() {
        let log = Log::default();
        let _log = log.start();
        // Kubernetes 1.20: scheduling.k8s.io/v1beta1 holds PriorityClasses only, and
        // v1alpha3 is not served.
        let cluster = told_once_not_served(
            &log,
            &[("priorityclasses", "PriorityClass")],
            |s| s.pod_groups(),
            "the API server serves no PodGroups (scheduling.k8s.io/v1beta1 or v1alpha3): pods naming a pod group wait at PreEnqueue until it appears, and Berth looks for PodGroups again only when it restarts",
        )
        .await;
        assert!(cluster.pod_groups.resource.get().is_none());
    }

    #[tokio::test]
    async fn a_snapshot_lists_pod_groups_once_from_the_older_version_too() {
        // Only v1alpha3 is served.
        let items = list(vec![pod_group("trainer", 401, gang(3), false)]);
        let (client, requests) = fake::client(move |r| match r.path.as_str() {
            "/apis/scheduling.k8s.io/v1alpha3" => discovery(&[("podgroups", "PodGroup")]),
            "/apis/scheduling.k8s.io/v1alpha3/podgroups" => Answer::Json(200, items.clone()),
            _ => fake::not_found(),
        });
        let cluster = fake::cluster(client);
        let (failures, failed) = std::sync::mpsc::channel();
        let (mut s, rx) = spawner(&cluster, Mode::ListOnce(failures));
        s.pod_groups();
        assert_eq!(
            summary(&next(&rx).await),
            format!(
                "{:?}",
                group("trainer", PodGroupPolicy::Gang { min_count: 3 })
            )
        );
        assert_eq!(summary(&next(&rx).await), "synced");
        for t in s.tasks {
            t.await.unwrap();
        }
        assert!(failed.try_recv().is_err());
        let sent = requests.lock().unwrap().clone();
        assert!(!sent.iter().any(fake::Request::is_watch), "{sent:?}");

        // A list the server refuses is a sentence for the snapshot.
        let (client, _) = fake::client(|r| match r.path.as_str() {
            GROUP_VERSION => discovery(&[("podgroups", "PodGroup")]),
            PODGROUPS => fake::status(
                403,
                "Forbidden",
                "podgroups.scheduling.k8s.io is forbidden: User \"alice\" cannot list resource \"podgroups\" in API group \"scheduling.k8s.io\" at the cluster scope",
            ),
            _ => fake::not_found(),
        });
        let cluster = fake::cluster(client);
        let (failures, failed) = std::sync::mpsc::channel();
        let (mut s, rx) = spawner(&cluster, Mode::ListOnce(failures));
        s.pod_groups();
        assert_eq!(summary(&next(&rx).await), "synced");
        let sentence = failed.try_recv().unwrap();
        assert!(
            sentence.starts_with("cannot list podgroups: podgroups.scheduling.k8s.io is forbidden"),
            "{sentence}"
        );
    }

    const WORKLOADS: &str = "/apis/scheduling.k8s.io/v1beta1/workloads";

    /// The Workload `ml/<name>` as a list's item (no apiVersion and kind) or a watch
    /// event's object.
    fn workload(name: &str, rv: u64, with_type: bool) -> Value {
        let mut o = crate::manifest::scheduling_workload::fixtures::served_workload(name, rv);
        if !with_type {
            let m = o.as_object_mut().unwrap();
            m.remove("apiVersion");
            m.remove("kind");
        }
        o
    }

    fn workload_list(items: Vec<Value>) -> Value {
        json!({
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "WorkloadList",
            "metadata": {"resourceVersion": "700"},
            "items": items,
        })
    }

    #[tokio::test]
    async fn workloads_are_listed_then_watched_and_a_bad_one_is_named() {
        let log = Log::default();
        let _log = log.start();
        let mut broken = workload("broken", 603, false);
        broken["spec"]["podGroupTemplates"][1]["name"] = "workers".into();
        let (answer, events) = serving_at(
            WORKLOADS,
            &[("workloads", "Workload"), ("podgroups", "PodGroup")],
            workload_list(vec![workload("train", 601, false), broken]),
        );
        let (client, requests) = fake::client(answer);
        let cluster = fake::cluster(client);
        let (mut s, rx) = spawner(&cluster, Mode::Watch);
        s.workloads();

        let both = "workers Gang { min_count: 4 }, driver Basic";
        let mut changes = Vec::new();
        for _ in 0..2 {
            changes.push(summary(&next(&rx).await));
        }
        assert_eq!(
            changes,
            [format!("workload ml/train: {both}"), "synced".to_owned()]
        );
        assert!(
            log.text().contains(
                "workloads: ignoring ml/broken: spec.podGroupTemplates[1]: duplicate value: name \"workers\""
            ),
            "{}",
            log.text()
        );

        // The watch: a new one, a changed one, a deletion.
        events
            .unbounded_send(json!({"type": "ADDED", "object": workload("eval", 702, true)}))
            .unwrap();
        let mut changed = workload("train", 703, true);
        changed["spec"]["podGroupTemplates"]
            .as_array_mut()
            .unwrap()
            .truncate(1);
        events
            .unbounded_send(json!({"type": "MODIFIED", "object": changed}))
            .unwrap();
        events
            .unbounded_send(json!({"type": "DELETED", "object": workload("eval", 704, true)}))
            .unwrap();
        let mut changes = Vec::new();
        for _ in 0..3 {
            changes.push(summary(&next(&rx).await));
        }
        assert_eq!(
            changes,
            [
                format!("workload ml/eval: {both}"),
                "workload ml/train: workers Gang { min_count: 4 }".to_owned(),
                "workload deleted ml/eval".to_owned(),
            ]
        );
        let requests = requests.lock().unwrap();
        assert!(requests.iter().all(|r| r.method == "GET"), "{requests:?}");
        for t in s.tasks {
            t.abort();
        }
    }

    #[tokio::test]
    async fn a_server_without_workloads_is_told_of_once_and_a_snapshot_lists_the_older_version() {
        let log = Log::default();
        let _log = log.start();
        // PodGroups served, Workloads not (a server with only part of the API on).
        told_once_not_served(
            &log,
            &[("podgroups", "PodGroup")],
            |s| s.workloads(),
            "the API server serves no Workloads (scheduling.k8s.io/v1beta1 or v1alpha3): pod groups are scheduled without them, and Berth looks for Workloads again only when it restarts",
        )
        .await;

        // Only v1alpha3 serves them: listed once from there, never watched.
        let mut item = workload("train", 601, false);
        item["spec"]["podGroupTemplates"][0]["schedulingPolicy"] = json!({"gang": {"minCount": 2}});
        let items = workload_list(vec![item]);
        let (client, requests) = fake::client(move |r| match r.path.as_str() {
            "/apis/scheduling.k8s.io/v1alpha3" => discovery(&[("workloads", "Workload")]),
            "/apis/scheduling.k8s.io/v1alpha3/workloads" => Answer::Json(200, items.clone()),
            _ => fake::not_found(),
        });
        let cluster = fake::cluster(client);
        let (failures, failed) = std::sync::mpsc::channel();
        let (mut s, rx) = spawner(&cluster, Mode::ListOnce(failures));
        s.workloads();
        assert_eq!(
            summary(&next(&rx).await),
            "workload ml/train: workers Gang { min_count: 2 }, driver Basic"
        );
        assert_eq!(summary(&next(&rx).await), "synced");
        for t in s.tasks {
            t.await.unwrap();
        }
        assert!(failed.try_recv().is_err());
        let sent = requests.lock().unwrap().clone();
        assert!(!sent.iter().any(fake::Request::is_watch), "{sent:?}");
    }

    const DRA: &str = "/apis/resource.k8s.io/v1";

    /// The `resource.k8s.io/v1` discovery of a 1.34+ API server.
    fn dra_discovery() -> Answer {
        let resources: Vec<Value> = [
            ("deviceclasses", "DeviceClass", false),
            ("resourceclaims", "ResourceClaim", true),
            ("resourceclaims/status", "ResourceClaim", true),
            ("resourceclaimtemplates", "ResourceClaimTemplate", true),
            ("resourceslices", "ResourceSlice", false),
            ("devicetaintrules", "DeviceTaintRule", false),
        ]
        .iter()
        .map(|(name, kind, namespaced)| {
            json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
                   "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
        })
        .collect();
        Answer::Json(
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "resource.k8s.io/v1", "resources": resources}),
        )
    }

    /// A ResourceClaim as a 1.34+ API server serves it (list items carry no
    /// apiVersion and kind), allocated and reserved for a pod when `allocated`.
    fn resource_claim(name: &str, rv: u64, allocated: bool, with_type: bool) -> Value {
        let mut o = json!({
            "metadata": {
                "name": name, "namespace": "ml", "uid": format!("{name}-3c1e"),
                "resourceVersion": rv.to_string(), "creationTimestamp": "2026-11-20T08:14:03Z",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "trainer-0",
                    "uid": "9a8b", "controller": true, "blockOwnerDeletion": true}],
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            },
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}},
        });
        if allocated {
            o["status"] = json!({
                "allocation": {
                    "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]},
                    "allocationTimestamp": "2026-11-20T08:14:04Z",
                },
                "reservedFor": [{"resource": "pods", "name": "trainer-0", "uid": "9a8b"}],
            });
        }
        if with_type {
            o["apiVersion"] = "resource.k8s.io/v1".into();
            o["kind"] = "ResourceClaim".into();
        }
        o
    }

    fn dra_list(kind: &str, items: Vec<Value>) -> Value {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": format!("{kind}List"),
               "metadata": {"resourceVersion": "700"}, "items": items})
    }

    fn dra_summary(c: &Change) -> String {
        match c {
            Change::Dra(DraChange::Class(c)) => format!("class {} {:?}", c.name, c.selectors),
            Change::Dra(DraChange::Claim(c)) => format!(
                "claim {} rv {} allocated {}",
                c.key(),
                c.resource_version,
                c.status.allocation.is_some()
            ),
            Change::Dra(DraChange::ClaimDeleted { namespace, name }) => {
                format!("claim deleted {namespace}/{name}")
            }
            Change::Dra(DraChange::Template(t)) => format!("template {}/{}", t.namespace, t.name),
            Change::Dra(DraChange::Slice(s)) => {
                format!("slice {} {:?} {} devices", s.name, s.nodes, s.devices.len())
            }
            Change::Dra(DraChange::TaintRule(r)) => format!("taint rule {}", r.name),
            other => summary(other),
        }
    }

    #[tokio::test]
    async fn dra_kinds_are_listed_then_watched_and_a_bad_one_is_named() {
        let log = Log::default();
        let _log = log.start();
        let lists: Vec<(&str, Value)> = vec![
            (
                "deviceclasses",
                dra_list(
                    "DeviceClass",
                    vec![json!({
                        "metadata": {"name": "gpu.example.com", "uid": "c1", "resourceVersion": "10", "generation": 1},
                        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
                    })],
                ),
            ),
            (
                "resourceclaims",
                dra_list(
                    "ResourceClaim",
                    vec![
                        resource_claim("trainer-0-gpu-x7k2q", 401, true, false),
                        json!({"metadata": {"name": "broken", "namespace": "ml", "resourceVersion": "402"},
                       "spec": {"devices": {"requests": [{"name": "gpu"}]}}}),
                    ],
                ),
            ),
            (
                "resourceclaimtemplates",
                dra_list(
                    "ResourceClaimTemplate",
                    vec![json!({
                        "metadata": {"name": "one-gpu", "namespace": "ml", "resourceVersion": "11"},
                        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
                    })],
                ),
            ),
            (
                "resourceslices",
                dra_list(
                    "ResourceSlice",
                    vec![json!({
                        "metadata": {"name": "node-1-gpu.example.com-8xk2p", "resourceVersion": "12",
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "n1", "controller": true}]},
                        "spec": {"driver": "gpu.example.com", "nodeName": "node-1",
                            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                            "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "A100"}}, "capacity": {"memory": {"value": "80Gi"}}}]},
                    })],
                ),
            ),
            (
                "devicetaintrules",
                dra_list(
                    "DeviceTaintRule",
                    vec![json!({
                        "metadata": {"name": "drain", "resourceVersion": "13"},
                        "spec": {"deviceSelector": {"driver": "gpu.example.com"}, "taint": {"key": "drain", "effect": "NoSchedule"}},
                        "status": {"conditions": []},
                    })],
                ),
            ),
        ];
        let (events, claim_watch) = mpsc::unbounded();
        let claim_watch = Mutex::new(Some(claim_watch));
        let quiet = Mutex::new(Vec::new());
        let answer = move |r: &fake::Request| {
            if r.path == DRA {
                return dra_discovery();
            }
            let Some(plural) = r.path.strip_prefix("/apis/resource.k8s.io/v1/") else {
                return fake::not_found();
            };
            if r.is_watch() {
                if plural == "resourceclaims"
                    && let Some(rx) = claim_watch.lock().unwrap().take()
                {
                    return Answer::Events(rx);
                }
                let (tx, rx) = mpsc::unbounded();
                quiet.lock().unwrap().push(tx);
                return Answer::Events(rx);
            }
            match lists.iter().find(|(p, _)| *p == plural) {
                Some((_, list)) => Answer::Json(200, list.clone()),
                None => fake::not_found(),
            }
        };
        let (client, requests) = fake::client(answer);
        let cluster = fake::cluster(client);
        let (mut s, rx) = spawner(&cluster, Mode::Watch);
        s.dra();

        let mut changes = Vec::new();
        for _ in 0..6 {
            changes.push(dra_summary(&next(&rx).await));
        }
        changes.sort();
        assert_eq!(
            changes,
            [
                "claim ml/trainer-0-gpu-x7k2q rv 401 allocated true",
                "class gpu.example.com [DeviceSelector { expression: \"device.driver == 'gpu.example.com'\" }]",
                "slice node-1-gpu.example.com-8xk2p NodeName(\"node-1\") 1 devices",
                "synced",
                "taint rule drain",
                "template ml/one-gpu",
            ]
        );
        assert!(
            log.text().contains(
                "resourceclaims: ignoring ml/broken: spec.devices.requests[0]: exactly one of `exactly` or `firstAvailable` is required"
            ),
            "{}",
            log.text()
        );

        // The watch: the claim's status written by a binding cycle, a new claim, a
        // deletion.
        events
            .unbounded_send(json!({"type": "MODIFIED", "object": resource_claim("trainer-0-gpu-x7k2q", 501, false, true)}))
            .unwrap();
        events
            .unbounded_send(
                json!({"type": "ADDED", "object": resource_claim("late", 502, false, true)}),
            )
            .unwrap();
        events
            .unbounded_send(
                json!({"type": "DELETED", "object": resource_claim("late", 503, false, true)}),
            )
            .unwrap();
        let mut changes = Vec::new();
        for _ in 0..3 {
            changes.push(dra_summary(&next(&rx).await));
        }
        assert_eq!(
            changes,
            [
                "claim ml/trainer-0-gpu-x7k2q rv 501 allocated false",
                "claim ml/late rv 502 allocated false",
                "claim deleted ml/late",
            ]
        );
        assert!(requests.lock().unwrap().iter().all(|r| r.method == "GET"));
        for t in s.tasks {
            t.abort();
        }
    }

    /// What a 1.37 API server answers an account without `list` on DeviceClasses.
    const FORBIDDEN_CLASSES: &str = "deviceclasses.resource.k8s.io is forbidden: User \"system:serviceaccount:kube-system:berth\" cannot list resource \"deviceclasses\" in API group \"resource.k8s.io\" at the cluster scope";

    #[tokio::test]
    async fn a_kind_the_account_may_not_list_counts_as_listed_and_is_retried_until_allowed() {
        let log = Log::default();
        let _log = log.start();
        let allowed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let grant = allowed.clone();
        let quiet = Mutex::new(Vec::new());
        let answer = move |r: &fake::Request| {
            if r.path == DRA {
                return dra_discovery();
            }
            let Some(plural) = r.path.strip_prefix("/apis/resource.k8s.io/v1/") else {
                return fake::not_found();
            };
            if plural == "deviceclasses" && !allowed.load(Ordering::SeqCst) {
                return fake::status(403, "Forbidden", FORBIDDEN_CLASSES);
            }
            if r.is_watch() {
                let (tx, rx) = mpsc::unbounded();
                quiet.lock().unwrap().push(tx);
                return Answer::Events(rx);
            }
            let items = match plural {
                "deviceclasses" => vec![json!({
                    "metadata": {"name": "gpu.example.com", "uid": "c1", "resourceVersion": "10"},
                    "spec": {"selectors": [{"cel": {"expression": "true"}}]},
                })],
                _ => Vec::new(),
            };
            Answer::Json(200, dra_list("Any", items))
        };
        let (client, _requests) = fake::client(answer);
        let cluster = fake::cluster(client);
        let (mut s, rx) = spawner(&cluster, Mode::Watch);
        s.dra();

        // Forbidden: told to the loop, marked, and counted as listed, so that the
        // four others' lists complete the sync.
        let mut changes = vec![
            summary_of_access(&next(&rx).await),
            summary_of_access(&next(&rx).await),
        ];
        changes.sort();
        assert_eq!(
            changes,
            [
                format!("forbidden deviceclasses.resource.k8s.io: {FORBIDDEN_CLASSES}"),
                "synced".to_owned(),
            ]
        );
        assert_eq!(
            cluster.access.forbidden().into_iter().collect::<Vec<_>>(),
            [(
                "deviceclasses.resource.k8s.io".to_owned(),
                FORBIDDEN_CLASSES.to_owned()
            )]
        );
        // Retried with backoff, said once.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert!(rx.try_recv().is_err(), "nothing more while still forbidden");
        assert_eq!(
            log.text()
                .matches("the scheduler may not list deviceclasses.resource.k8s.io")
                .count(),
            1,
            "{}",
            log.text()
        );
        assert!(log.text().contains(FORBIDDEN_CLASSES), "{}", log.text());

        // Granted: the next retry lists the classes, then says the kind is allowed.
        grant.store(true, Ordering::SeqCst);
        let mut changes = Vec::new();
        for _ in 0..2 {
            changes.push(summary_of_access(&next(&rx).await));
        }
        assert_eq!(
            changes,
            [
                "class gpu.example.com [DeviceSelector { expression: \"true\" }]",
                "allowed deviceclasses.resource.k8s.io",
            ]
        );
        assert!(cluster.access.forbidden().is_empty());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(rx.try_recv().is_err(), "synced once, allowed once");
        for t in s.tasks {
            t.abort();
        }
    }

    fn summary_of_access(c: &Change) -> String {
        match c {
            Change::KindForbidden { kind, message } => format!("forbidden {kind}: {message}"),
            Change::KindAllowed(kind) => format!("allowed {kind}"),
            other => dra_summary(other),
        }
    }

    #[tokio::test]
    async fn a_server_without_dra_is_told_of_once_per_kind_and_counts_as_listed() {
        let log = Log::default();
        let _log = log.start();
        // Kubernetes 1.20: no resource.k8s.io at all.
        let (client, requests) = fake::client(|_| fake::not_found());
        let cluster = fake::cluster(client);
        let (mut s, rx) = spawner(&cluster, Mode::Watch);
        s.dra();
        // The last of the five to find its kind unserved says the view is complete.
        assert_eq!(summary(&next(&rx).await), "synced");
        for t in s.tasks {
            t.await.unwrap();
        }
        assert!(rx.try_recv().is_err(), "synced once");
        for kind in [
            "DeviceClasses",
            "ResourceClaims",
            "ResourceClaimTemplates",
            "ResourceSlices",
            "DeviceTaintRules",
        ] {
            let said = format!("the API server serves no {kind} (resource.k8s.io/v1)");
            assert_eq!(log.text().matches(&said).count(), 1, "{}", log.text());
        }
        let requests = requests.lock().unwrap();
        assert!(
            requests.iter().all(|r| r.path == DRA),
            "discovery only: {requests:?}"
        );
    }
    const STORAGE: &str = "/apis/storage.k8s.io/v1";

    /// The `storage.k8s.io/v1` discovery of an API server; `capacities` whether it
    /// lists CSIStorageCapacities (1.24 and later) or not (1.20).
    fn storage_discovery(capacities: bool) -> Answer {
        let mut kinds = vec![
            ("csidrivers", "CSIDriver", false),
            ("csinodes", "CSINode", false),
            ("storageclasses", "StorageClass", false),
            ("volumeattachments", "VolumeAttachment", false),
            ("volumeattachments/status", "VolumeAttachment", false),
        ];
        if capacities {
            kinds.push(("csistoragecapacities", "CSIStorageCapacity", true));
        }
        let resources: Vec<Value> = kinds
            .iter()
            .map(|(name, kind, namespaced)| {
                json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
                       "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]})
            })
            .collect();
        Answer::Json(
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "storage.k8s.io/v1", "resources": resources}),
        )
    }

    /// A CSIStorageCapacity as external-provisioner publishes it and a 1.24+ API
    /// server serves it (list items carry no apiVersion and kind).
    fn capacity(name: &str, rv: u64, node: &str, capacity: &str, with_type: bool) -> Value {
        let mut o = json!({
            "metadata": {
                "name": name,
                "generateName": "csisc-",
                "namespace": "kube-system",
                "uid": format!("{name}-4c1e-4a7b-9d2f"),
                "resourceVersion": rv.to_string(),
                "creationTimestamp": "2026-11-20T08:14:03Z",
                "labels": {
                    "csi.storage.k8s.io/drivername": "hostpath.csi.k8s.io",
                    "csi.storage.k8s.io/managed-by": "external-provisioner",
                },
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                    "name": "csi-hostpathplugin", "uid": "5e0a", "controller": true}],
            },
            "nodeTopology": {"matchLabels": {"topology.hostpath.csi/node": node}},
            "storageClassName": "csi-hostpath-fast",
            "capacity": capacity,
            "maximumVolumeSize": "10Gi",
        });
        if with_type {
            o["apiVersion"] = "storage.k8s.io/v1".into();
            o["kind"] = "CSIStorageCapacity".into();
        }
        o
    }

    fn capacity_summary(c: &Change) -> String {
        match c {
            Change::CsiStorageCapacity(c) => format!(
                "capacity {}/{} {} {:?} {:?} {:?}",
                c.namespace,
                c.name,
                c.storage_class_name,
                c.node_topology.as_ref().map(|t| &t.match_labels),
                c.capacity,
                c.maximum_volume_size
            ),
            Change::CsiStorageCapacityDeleted { namespace, name } => {
                format!("capacity deleted {namespace}/{name}")
            }
            other => summary(other),
        }
    }

    #[tokio::test]
    async fn storage_capacities_are_listed_then_watched_and_a_bad_one_is_named() {
        let log = Log::default();
        let _log = log.start();
        let broken = capacity("csisc-broken", 12, "node-3", "1x", false);
        let list = json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacityList",
            "metadata": {"resourceVersion": "600"},
            "items": [capacity("csisc-7xk2p", 11, "node-1", "98Gi", false), broken],
        });
        let path = "/apis/storage.k8s.io/v1/csistoragecapacities";
        let (events, watch_rx) = mpsc::unbounded();
        let watch_rx = Mutex::new(Some(watch_rx));
        let quiet = Mutex::new(Vec::new());
        let answer = move |r: &fake::Request| {
            if r.path == STORAGE {
                storage_discovery(true)
            } else if r.path == path && r.is_watch() {
                match watch_rx.lock().unwrap().take() {
                    Some(rx) => Answer::Events(rx),
                    None => {
                        let (tx, rx) = mpsc::unbounded();
                        quiet.lock().unwrap().push(tx);
                        Answer::Events(rx)
                    }
                }
            } else if r.path == path {
                Answer::Json(200, list.clone())
            } else {
                fake::not_found()
            }
        };
        let (client, requests) = fake::client(answer);
        let cluster = fake::cluster(client);
        let (mut s, rx) = spawner(&cluster, Mode::Watch);
        s.storage_capacities();

        let listed = [
            capacity_summary(&next(&rx).await),
            capacity_summary(&next(&rx).await),
        ];
        assert_eq!(
            listed,
            [
                "capacity kube-system/csisc-7xk2p csi-hostpath-fast Some({\"topology.hostpath.csi/node\": \"node-1\"}) Some(105226698752) Some(10737418240)",
                "synced",
            ]
        );
        assert!(
            log.text()
                .contains("csistoragecapacities: ignoring kube-system/csisc-broken: capacity:"),
            "{}",
            log.text()
        );

        // The watch: the provisioner updates a capacity, publishes one and retires it.
        for event in [
            json!({"type": "MODIFIED", "object": capacity("csisc-7xk2p", 21, "node-1", "2Gi", true)}),
            json!({"type": "ADDED", "object": capacity("csisc-9m4tq", 22, "node-2", "50Gi", true)}),
            json!({"type": "DELETED", "object": capacity("csisc-9m4tq", 23, "node-2", "50Gi", true)}),
        ] {
            events.unbounded_send(event).unwrap();
        }
        let mut changes = Vec::new();
        for _ in 0..3 {
            changes.push(capacity_summary(&next(&rx).await));
        }
        assert_eq!(
            changes,
            [
                "capacity kube-system/csisc-7xk2p csi-hostpath-fast Some({\"topology.hostpath.csi/node\": \"node-1\"}) Some(2147483648) Some(10737418240)",
                "capacity kube-system/csisc-9m4tq csi-hostpath-fast Some({\"topology.hostpath.csi/node\": \"node-2\"}) Some(53687091200) Some(10737418240)",
                "capacity deleted kube-system/csisc-9m4tq",
            ]
        );
        assert!(requests.lock().unwrap().iter().all(|r| r.method == "GET"));
        for t in s.tasks {
            t.abort();
        }
    }

    #[tokio::test]
    async fn a_server_without_v1_storage_capacities_is_told_of_once_and_counts_as_listed() {
        let log = Log::default();
        let _log = log.start();
        // Kubernetes 1.20: storage.k8s.io/v1 without CSIStorageCapacity (v1beta1 has it).
        let (client, requests) = fake::client(|r: &fake::Request| {
            if r.path == STORAGE {
                storage_discovery(false)
            } else {
                fake::not_found()
            }
        });
        let cluster = fake::cluster(client);
        let (mut s, rx) = spawner(&cluster, Mode::Watch);
        s.storage_capacities();
        assert_eq!(summary(&next(&rx).await), "synced");
        for t in s.tasks {
            t.await.unwrap();
        }
        assert!(rx.try_recv().is_err(), "synced once");
        let said = "the API server serves no CSIStorageCapacities (storage.k8s.io/v1)";
        assert_eq!(log.text().matches(said).count(), 1, "{}", log.text());
        let requests = requests.lock().unwrap();
        assert!(
            requests.iter().all(|r| r.path == STORAGE),
            "discovery only: {requests:?}"
        );
    }
}
