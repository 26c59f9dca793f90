//! Binding through the `pods/binding` subresource.
//!
//! Binding-cycle threads call [`Binder::bind`] synchronously (it is reached from a
//! plugin's `bind-pod` host call); the request itself runs on the tokio runtime and the
//! calling binding thread waits for it. Each binding cycle has its own thread, so the
//! scheduling loop never waits for the API server.

use super::{KubeCluster, error_message};
use crate::{Binder, PodState, WriteError};
use berth_sdk::{ANNOTATION_BOUND_BY_CONTROLLER, ANNOTATION_SELECTED_NODE, ClaimRef, Pod};
use k8s_openapi::api::core::v1 as k8s;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::runtime::Handle;

/// How long one bind request may take before the binding cycle fails (and the pod is
/// retried after a check of where it is).
const BIND_TIMEOUT: Duration = Duration::from_secs(30);

/// A failed request of the write `what` as a [`WriteError`]: 409 Conflict, 404 Not
/// Found, another answer of the API server refused, no answer (a transport failure)
/// unanswered.
fn api_error(what: &str, e: &kube::Error) -> WriteError {
    let message = format!("{what}: {}", error_message(e));
    match e {
        kube::Error::Api(s) if s.code == 409 => WriteError::Conflict(message),
        kube::Error::Api(s) if s.code == 404 => WriteError::NotFound(message),
        kube::Error::Api(_) => WriteError::Refused(message),
        // The request or its answer was lost on the way.
        _ => WriteError::Unanswered(message),
    }
}

/// The write `what` timed out: it may have happened.
fn no_answer(what: &str) -> WriteError {
    WriteError::Unanswered(format!("{what}: no answer within {BIND_TIMEOUT:?}"))
}

/// A write this replica no longer makes: it lost the Lease.
fn fenced(doing: &str) -> WriteError {
    WriteError::Refused(format!(
        "not {doing}: this replica no longer holds the lease"
    ))
}

/// The claim the API server answered a write `what` with, as Berth reads it.
fn answered_claim(
    what: &str,
    claim: &k8s_openapi::api::resource::v1::ResourceClaim,
) -> Result<berth_sdk::dra::ResourceClaim, WriteError> {
    crate::manifest::dra::resource_claim(claim).map_err(|e| {
        WriteError::Refused(format!(
            "{what}: the API server answered a claim Berth cannot read: {e}"
        ))
    })
}

/// Binds pods on a real cluster.
#[derive(Debug, Clone)]
pub struct KubeBinder {
    cluster: KubeCluster,
    handle: Handle,
    fenced: Arc<AtomicBool>,
}

impl KubeBinder {
    /// A binder that runs its requests on `handle`'s runtime.
    pub fn new(cluster: KubeCluster, handle: Handle) -> Self {
        KubeBinder {
            cluster,
            handle,
            fenced: Arc::default(),
        }
    }

    /// Refuses every bind from now on (this replica lost its Lease: another may be
    /// scheduling the same pods). Requests already sent are not recalled.
    pub fn fence(&self) {
        self.fenced.store(true, Ordering::SeqCst);
    }

    /// One request under `limiter` and [`BIND_TIMEOUT`]: its answer, the API
    /// server's refusal, or `None` when no answer came in time.
    fn timed<T>(
        &self,
        limiter: &super::ratelimit::RateLimiter,
        request: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Option<Result<T, kube::Error>> {
        self.block_on(async {
            limiter.acquire().await;
            tokio::time::timeout(BIND_TIMEOUT, request).await.ok()
        })
    }

    /// [`KubeBinder::timed`], a refusal or no answer as the write error of `what`.
    fn write<T>(
        &self,
        limiter: &super::ratelimit::RateLimiter,
        what: &str,
        request: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, WriteError> {
        match self.timed(limiter, request) {
            Some(Ok(answer)) => Ok(answer),
            Some(Err(e)) => Err(api_error(what, &e)),
            None => Err(no_answer(what)),
        }
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        match Handle::try_current() {
            // Called on a runtime thread (not the case for binding threads): do not
            // block the runtime's own worker.
            Ok(_) => tokio::task::block_in_place(|| self.handle.block_on(f)),
            Err(_) => self.handle.block_on(f),
        }
    }
}

impl KubeBinder {
    /// Before a claim's first allocation is written, its delete-protection finalizer
    /// goes on in a normal update, as upstream's DynamicResources adds it: an allocated
    /// claim is then not deleted while its devices are in use. Reads the claim (it must
    /// still be at `claim.resource_version`, else a conflict, as the status write
    /// would be) and answers the version the status write is to name.
    fn protect_claim(
        &self,
        api: &Api<k8s_openapi::api::resource::v1::ResourceClaim>,
        claim: &berth_sdk::dra::ResourceClaim,
        what: &str,
    ) -> Result<String, WriteError> {
        let limiter = &self.cluster.bind_limiter;
        let current = self.write(limiter, what, api.get(&claim.name))?;
        let now = current
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        if now != claim.resource_version {
            return Err(WriteError::Conflict(format!(
                "{what}: the claim changed since version {} (now {now})",
                claim.resource_version
            )));
        }
        let mut finalizers = current.metadata.finalizers.clone().unwrap_or_default();
        let allocated = current
            .status
            .as_ref()
            .is_some_and(|s| s.allocation.is_some());
        if allocated || finalizers.iter().any(|f| f == CLAIM_FINALIZER) {
            return Ok(now);
        }
        finalizers.push(CLAIM_FINALIZER.to_owned());
        // A merge patch naming the version read: applied to that version only.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": now, "finalizers": finalizers},
        });
        let what = format!("{what}: adding its finalizer {CLAIM_FINALIZER}");
        let updated = self.write(
            limiter,
            &what,
            api.patch(&claim.name, &PatchParams::default(), &Patch::Merge(&patch)),
        )?;
        Ok(updated.metadata.resource_version.unwrap_or_default())
    }
}

/// The finalizer that keeps an allocated ResourceClaim until it is deallocated
/// (`resourceapi.Finalizer`).
pub const CLAIM_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

impl Binder for KubeBinder {
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), WriteError> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(fenced("binding"));
        }
        let api: Api<k8s::Pod> = Api::namespaced(self.cluster.client.clone(), &pod.namespace);
        let binding = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Binding",
            // The UID makes the API server refuse to bind a pod of the same name that
            // replaced the one we scheduled.
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let what = format!("binding {} to {node}", pod.key());
        self.write(
            &self.cluster.bind_limiter,
            &what,
            api.create_subresource::<_, serde_json::Value>(
                "binding",
                &pod.name,
                &PostParams::default(),
                &binding,
            ),
        )
        .map(drop)
    }

    fn nominate(&self, pod: &Pod, node: &str) -> Result<(), WriteError> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(fenced("nominating"));
        }
        let api: Api<k8s::Pod> = Api::namespaced(self.cluster.client.clone(), &pod.namespace);
        // A merge patch with null removes the field.
        let value = if node.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::Value::from(node)
        };
        let patch = serde_json::json!({"status": {"nominatedNodeName": value}});
        let r = self.timed(
            &self.cluster.preemption_limiter,
            api.patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(&patch)),
        );
        match r {
            Some(Ok(_)) => Ok(()),
            Some(Err(kube::Error::Api(s))) if s.code == 404 => Ok(()),
            Some(Err(e)) => Err(api_error(&format!("nominating {}", pod.key()), &e)),
            None => Err(no_answer(&format!("nominating {}", pod.key()))),
        }
    }

    fn evict(&self, victim: &Pod, _preemptor: &Pod, message: &str) -> Result<(), WriteError> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(fenced("evicting"));
        }
        let condition = format!(
            "evicting {}: adding the DisruptionTarget condition",
            victim.key()
        );
        let deleting = format!("evicting {}: deleting", victim.key());
        let api: Api<k8s::Pod> = Api::namespaced(self.cluster.client.clone(), &victim.namespace);
        // Conditions merge by type in a strategic merge patch.
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let patch = serde_json::json!({"status": {"conditions": [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": message,
            "lastTransitionTime": now,
        }]}});
        let delete = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(victim.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let limiter = self.cluster.preemption_limiter.clone();
        let r = self.block_on(async {
            limiter.acquire().await;
            let patched = tokio::time::timeout(
                BIND_TIMEOUT,
                api.patch_status(
                    &victim.name,
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                ),
            )
            .await;
            match patched {
                Ok(Ok(_)) => {}
                Ok(Err(kube::Error::Api(s))) if s.code == 404 => return Ok(None),
                Ok(Err(e)) => return Err(api_error(&condition, &e)),
                Err(_) => return Err(no_answer(&condition)),
            }
            limiter.acquire().await;
            match tokio::time::timeout(BIND_TIMEOUT, api.delete(&victim.name, &delete)).await {
                Ok(Ok(_)) => Ok(Some(())),
                // Gone, or replaced by a pod of the same name (the UID precondition).
                Ok(Err(kube::Error::Api(s))) if s.code == 404 || s.code == 409 => Ok(None),
                Ok(Err(e)) => Err(api_error(&deleting, &e)),
                Err(_) => Err(no_answer(&deleting)),
            }
        });
        r.map(|_| ())
    }

    fn lookup(&self, pod: &Pod) -> PodState {
        let api: Api<k8s::Pod> = Api::namespaced(self.cluster.client.clone(), &pod.namespace);
        match self.timed(&self.cluster.bind_limiter, api.get_opt(&pod.name)) {
            Some(Ok(None)) => PodState::Gone,
            Some(Ok(Some(p))) => {
                if p.metadata.uid.as_deref() != Some(pod.uid.as_str())
                    || p.metadata.deletion_timestamp.is_some()
                {
                    return PodState::Gone;
                }
                match p.spec.and_then(|s| s.node_name).filter(|n| !n.is_empty()) {
                    Some(n) => PodState::BoundTo(n),
                    None => PodState::Pending,
                }
            }
            Some(Err(e)) => {
                tracing::debug!(pod = %pod.key(), "looking up the pod after a failed bind: {}", error_message(&e));
                PodState::Unknown
            }
            None => PodState::Unknown,
        }
    }

    fn bind_volume(&self, volume: &str, claim: &ClaimRef) -> Result<(), WriteError> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(fenced("binding"));
        }
        let api: Api<k8s::PersistentVolume> = Api::all(self.cluster.client.clone());
        let limiter = self.cluster.bind_limiter.clone();
        let what = format!(
            "binding persistentvolume {volume} to claim {}/{}",
            claim.namespace, claim.name
        );
        let r = self.block_on(async {
            limiter.acquire().await;
            tokio::time::timeout(BIND_TIMEOUT, async {
                let Some(mut pv) = api.get_opt(volume).await? else {
                    return Ok(Err(WriteError::NotFound(format!(
                        "{what}: the volume is gone"
                    ))));
                };
                let spec = pv.spec.get_or_insert_with(Default::default);
                if let Some(taken) = &spec.claim_ref {
                    let ours = taken.namespace.as_deref() == Some(claim.namespace.as_str())
                        && taken.name.as_deref() == Some(claim.name.as_str())
                        && taken
                            .uid
                            .as_deref()
                            .is_none_or(|u| u.is_empty() || u == claim.uid);
                    if !ours {
                        return Ok(Err(WriteError::Conflict(format!(
                            "{what}: the volume is already bound to claim {}/{}",
                            taken.namespace.as_deref().unwrap_or_default(),
                            taken.name.as_deref().unwrap_or_default()
                        ))));
                    }
                }
                spec.claim_ref = Some(k8s::ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("PersistentVolumeClaim".into()),
                    namespace: Some(claim.namespace.clone()),
                    name: Some(claim.name.clone()),
                    uid: Some(claim.uid.clone()).filter(|u| !u.is_empty()),
                    ..Default::default()
                });
                pv.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(ANNOTATION_BOUND_BY_CONTROLLER.into(), "yes".into());
                // The resourceVersion read above makes the API server refuse the update
                // (409) if anyone changed the volume since.
                api.replace(volume, &PostParams::default(), &pv)
                    .await
                    .map(|_| Ok(()))
            })
            .await
        });
        match r {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(why))) => Err(why),
            Ok(Err(e)) => Err(api_error(&what, &e)),
            Err(_) => Err(no_answer(&what)),
        }
    }

    /// A merge patch of the claim's status that names the claim's `resourceVersion`
    /// (and UID): the API server applies it to that version only, and answers 409
    /// Conflict when the claim changed since, as upstream's `UpdateStatus` would.
    fn write_claim_status(
        &self,
        claim: &berth_sdk::dra::ResourceClaim,
    ) -> Result<berth_sdk::dra::ResourceClaim, WriteError> {
        use crate::manifest::dra;
        let what = format!("writing the status of resourceclaim {}", claim.key());
        if self.fenced.load(Ordering::SeqCst) {
            return Err(fenced("allocating devices"));
        }
        let api: Api<k8s_openapi::api::resource::v1::ResourceClaim> =
            Api::namespaced(self.cluster.client.clone(), &claim.namespace);
        let mut version = claim.resource_version.clone();
        if claim.status.allocation.is_some() {
            version = self.protect_claim(&api, claim, &what)?;
        }
        let mut metadata = serde_json::json!({"resourceVersion": version});
        if !claim.uid.is_empty() {
            metadata["uid"] = claim.uid.clone().into();
        }
        let allocation = claim
            .status
            .allocation
            .as_ref()
            .map_or(serde_json::Value::Null, dra::allocation_json);
        let patch = serde_json::json!({
            "metadata": metadata,
            "status": {
                "allocation": allocation,
                "reservedFor": dra::reserved_for_json(&claim.status.reserved_for),
            },
        });
        let written = self.write(
            &self.cluster.bind_limiter,
            &what,
            api.patch_status(&claim.name, &PatchParams::default(), &Patch::Merge(&patch)),
        )?;
        answered_claim(&what, &written)
    }

    /// A create with `generateName: <pod>-extended-resources-`, the annotation, the
    /// pod as controlling owner and the requests (upstream's
    /// `createExtendedResourceClaimInAPI`).
    fn create_extended_resource_claim(
        &self,
        claim: &berth_sdk::dra::ResourceClaim,
    ) -> Result<berth_sdk::dra::ResourceClaim, WriteError> {
        use crate::manifest::dra;
        let owner = claim.controller.as_ref().map_or("", |c| c.name.as_str());
        let what = format!(
            "creating a claim for the extended resources of pod {}/{owner}",
            claim.namespace
        );
        if self.fenced.load(Ordering::SeqCst) {
            return Err(fenced("allocating devices"));
        }
        let body = dra::extended_resource_claim_json(claim)
            .map_err(|e| WriteError::Refused(format!("{what}: {e}")))?;
        let body: k8s_openapi::api::resource::v1::ResourceClaim = serde_json::from_value(body)
            .map_err(|e| WriteError::Refused(format!("{what}: {e}")))?;
        let api: Api<k8s_openapi::api::resource::v1::ResourceClaim> =
            Api::namespaced(self.cluster.client.clone(), &claim.namespace);
        let created = self.write(
            &self.cluster.bind_limiter,
            &what,
            api.create(&PostParams::default(), &body),
        )?;
        answered_claim(&what, &created)
    }

    /// Drops the delete-protection finalizer (a merge patch naming the version read,
    /// so a claim changed since is a conflict, not overwritten), then deletes the
    /// claim; a claim already gone is no error (upstream's `deleteClaim`).
    fn delete_extended_resource_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), WriteError> {
        let what = format!("deleting resourceclaim {namespace}/{name}");
        if self.fenced.load(Ordering::SeqCst) {
            return Err(fenced("deleting claims"));
        }
        let api: Api<k8s_openapi::api::resource::v1::ResourceClaim> =
            Api::namespaced(self.cluster.client.clone(), namespace);
        let limiter = &self.cluster.bind_limiter;
        let current = match self.write(limiter, &what, api.get(name)) {
            Ok(c) => c,
            Err(WriteError::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let finalizers = current.metadata.finalizers.clone().unwrap_or_default();
        if finalizers.iter().any(|f| f == CLAIM_FINALIZER) {
            let kept: Vec<&String> = finalizers
                .iter()
                .filter(|f| *f != CLAIM_FINALIZER)
                .collect();
            let patch = serde_json::json!({
                "metadata": {
                    "resourceVersion": current.metadata.resource_version,
                    "finalizers": kept,
                },
            });
            let step = format!("{what}: dropping its finalizer {CLAIM_FINALIZER}");
            match self.write(
                limiter,
                &step,
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
            ) {
                Ok(_) => {}
                Err(WriteError::NotFound(_)) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        match self.write(limiter, &what, api.delete(name, &DeleteParams::default())) {
            Ok(_) | Err(WriteError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A merge patch of the pod's status naming its UID (a pod replaced by another of
    /// the same name is refused), as upstream's `PatchPodStatus` of
    /// `extendedResourceClaimStatus`.
    fn write_extended_resource_claim_status(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        status: &berth_sdk::PodExtendedResourceClaimStatus,
    ) -> Result<(), WriteError> {
        let what = format!("writing the extended resource claim status of pod {namespace}/{name}");
        if self.fenced.load(Ordering::SeqCst) {
            return Err(fenced("allocating devices"));
        }
        let mappings: Vec<serde_json::Value> = status
            .request_mappings
            .iter()
            .map(|m| {
                serde_json::json!({
                    "containerName": m.container_name,
                    "resourceName": m.resource_name,
                    "requestName": m.request_name,
                })
            })
            .collect();
        let patch = serde_json::json!({
            "metadata": {"uid": uid},
            "status": {
                "extendedResourceClaimStatus": {
                    "resourceClaimName": status.resource_claim_name,
                    "requestMappings": mappings,
                },
            },
        });
        let api: Api<k8s::Pod> = Api::namespaced(self.cluster.client.clone(), namespace);
        self.write(
            &self.cluster.bind_limiter,
            &what,
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .map(|_| ())
    }

    fn select_node_for_claim(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<(), WriteError> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(fenced("binding"));
        }
        let api: Api<k8s::PersistentVolumeClaim> =
            Api::namespaced(self.cluster.client.clone(), namespace);
        let patch = serde_json::json!({
            "metadata": {"annotations": {ANNOTATION_SELECTED_NODE: node}},
        });
        let what = format!("selecting node {node} for claim {namespace}/{name}");
        self.write(
            &self.cluster.bind_limiter,
            &what,
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{self, Answer};
    use super::*;
    use berth_sdk::dra::{
        AllocationResult, ConsumerReference, DeviceRequestAllocationResult, ResourceClaim,
    };
    use serde_json::json;

    fn claim(rv: &str) -> ResourceClaim {
        let mut c = ResourceClaim {
            namespace: "ml".into(),
            name: "trainer-0-gpu-x7k2q".into(),
            uid: "3c1e".into(),
            resource_version: rv.into(),
            ..ResourceClaim::default()
        };
        c.status.allocation = Some(AllocationResult {
            devices: vec![DeviceRequestAllocationResult {
                request: "gpu".into(),
                driver: "gpu.example.com".into(),
                pool: "node-1".into(),
                device: "gpu-0".into(),
                admin_access: None,
                tolerations: Vec::new(),
                binding_conditions: Vec::new(),
                binding_failure_conditions: Vec::new(),
                share_id: None,
                consumed_capacity: Default::default(),
            }],
            ..AllocationResult::default()
        });
        c.status.reserved_for = vec![ConsumerReference::pod("trainer-0", "9a8b")];
        c
    }

    const CLAIM_PATH: &str =
        "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/trainer-0-gpu-x7k2q";

    /// The claim as an API server holds it: its version, finalizers and status.
    struct Held {
        version: u64,
        finalizers: Vec<String>,
        status: serde_json::Value,
    }

    impl Held {
        fn object(&self) -> serde_json::Value {
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": "trainer-0-gpu-x7k2q", "namespace": "ml", "uid": "3c1e",
                    "resourceVersion": self.version.to_string(),
                    "finalizers": self.finalizers,
                },
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
                "status": self.status,
            })
        }
    }

    /// An API server holding the claim at resourceVersion 42, unallocated: reads answer
    /// it; a patch (of the object or of its status) naming the version held is
    /// applied and bumps it, any other is a conflict.
    fn server() -> impl Fn(&fake::Request) -> Answer + Send + Sync + 'static {
        let held = std::sync::Mutex::new(Held {
            version: 42,
            finalizers: vec!["example.com/audit".into()],
            status: json!({}),
        });
        move |req: &fake::Request| {
            let mut held = held.lock().unwrap();
            let status = match (req.method.as_str(), req.path.strip_prefix(CLAIM_PATH)) {
                ("GET", Some("")) => return Answer::Json(200, held.object()),
                ("PATCH", Some("")) => false,
                ("PATCH", Some("/status")) => true,
                _ => panic!("unexpected {} {}", req.method, req.path),
            };
            assert_eq!(req.content_type, "application/merge-patch+json");
            if req.body["metadata"]["resourceVersion"].as_str() != Some(&held.version.to_string()) {
                return fake::status(
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"trainer-0-gpu-x7k2q\": the object has been modified; please apply your changes to the latest version and try again",
                );
            }
            if status {
                held.status = req.body["status"].clone();
            } else {
                held.finalizers =
                    serde_json::from_value(req.body["metadata"]["finalizers"].clone()).unwrap();
            }
            held.version += 1;
            Answer::Json(200, held.object())
        }
    }

    #[test]
    fn a_claim_s_allocation_is_protected_and_written_from_its_version_only() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (client, requests) = {
            let _in = rt.enter();
            fake::client(server())
        };
        let binder = KubeBinder::new(fake::cluster(client), rt.handle().clone());

        // A stale version: the API server's answer is a conflict, and nothing is
        // written.
        let err = binder.write_claim_status(&claim("41")).unwrap_err();
        assert!(matches!(err, WriteError::Conflict(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            "writing the status of resourceclaim ml/trainer-0-gpu-x7k2q: the claim changed since version 41 (now 42)"
        );
        assert_eq!(requests.lock().unwrap().len(), 1);

        // The first allocation: the finalizer joins the claim's own in a normal
        // update of the version read, then the status names the version that made.
        let written = binder.write_claim_status(&claim("42")).unwrap();
        assert_eq!(written.resource_version, "44");
        assert_eq!(written.status.allocation, claim("42").status.allocation);
        assert!(written.is_reserved_for("9a8b"));
        {
            let reqs = requests.lock().unwrap();
            let methods: Vec<(&str, &str)> = reqs[1..]
                .iter()
                .map(|r| (r.method.as_str(), r.path.as_str()))
                .collect();
            let status_path = format!("{CLAIM_PATH}/status");
            assert_eq!(
                methods,
                [
                    ("GET", CLAIM_PATH),
                    ("PATCH", CLAIM_PATH),
                    ("PATCH", status_path.as_str())
                ]
            );
            assert_eq!(
                reqs[2].body,
                json!({"metadata": {"resourceVersion": "42", "finalizers": ["example.com/audit", CLAIM_FINALIZER]}})
            );
            let body = &reqs[3].body;
            assert_eq!(
                body["metadata"],
                json!({"resourceVersion": "43", "uid": "3c1e"})
            );
            assert_eq!(
                body["status"]["allocation"]["devices"]["results"][0]["device"],
                "gpu-0"
            );
            assert_eq!(
                body["status"]["reservedFor"],
                json!([{"resource": "pods", "name": "trainer-0", "uid": "9a8b"}])
            );
        }

        // A second pod reserving the allocated (shared) claim: no second finalizer
        // update, only the status.
        let mut shared = written.clone();
        shared
            .status
            .reserved_for
            .push(ConsumerReference::pod("trainer-1", "7c6d"));
        let again = binder.write_claim_status(&shared).unwrap();
        assert_eq!(again.resource_version, "45");
        assert!(again.is_reserved_for("7c6d") && again.is_reserved_for("9a8b"));
        {
            let reqs = requests.lock().unwrap();
            assert_eq!(reqs.len(), 6);
            assert_eq!(
                (reqs[4].method.as_str(), reqs[5].path.ends_with("/status")),
                ("GET", true)
            );
        }

        binder.fence();
        assert!(matches!(
            binder.write_claim_status(&claim("45")),
            Err(WriteError::Refused(_))
        ));
        assert_eq!(requests.lock().unwrap().len(), 6);
    }

    /// An API server for the claim made for a pod's extended resources: a create names
    /// it from `generateName`; a read answers it with the delete-protection finalizer
    /// until a patch drops it (from the version held); a delete removes it; reads and
    /// deletes of a claim it does not hold are 404; the pod's status patch is taken.
    fn extended_server() -> impl Fn(&fake::Request) -> Answer + Send + Sync + 'static {
        const CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims";
        let held: std::sync::Mutex<Option<(serde_json::Value, u64)>> = Default::default();
        move |req: &fake::Request| {
            let mut held = held.lock().unwrap();
            match (req.method.as_str(), req.path.as_str()) {
                ("POST", CLAIMS) => {
                    let mut o = req.body.clone();
                    let name = format!("{}bcdfg", o["metadata"]["generateName"].as_str().unwrap());
                    o["metadata"]["name"] = name.into();
                    o["metadata"]["uid"] = "5e6f".into();
                    o["metadata"]["resourceVersion"] = "1".into();
                    o["metadata"]["finalizers"] = json!([CLAIM_FINALIZER]);
                    *held = Some((o.clone(), 1));
                    Answer::Json(201, o)
                }
                ("GET" | "PATCH" | "DELETE", path) if path.starts_with(CLAIMS) => {
                    let Some((o, version)) = held.as_mut() else {
                        return fake::not_found();
                    };
                    match req.method.as_str() {
                        "GET" => Answer::Json(200, o.clone()),
                        "PATCH" => {
                            assert_eq!(
                                req.body["metadata"]["resourceVersion"].as_str(),
                                Some(version.to_string().as_str())
                            );
                            o["metadata"]["finalizers"] =
                                req.body["metadata"]["finalizers"].clone();
                            *version += 1;
                            o["metadata"]["resourceVersion"] = version.to_string().into();
                            Answer::Json(200, o.clone())
                        }
                        _ => {
                            assert_eq!(o["metadata"]["finalizers"], json!([]));
                            let gone = o.clone();
                            *held = None;
                            Answer::Json(200, gone)
                        }
                    }
                }
                ("PATCH", "/api/v1/namespaces/ml/pods/trainer-0/status") => Answer::Json(
                    200,
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "9a8b"}}),
                ),
                _ => panic!("unexpected {} {}", req.method, req.path),
            }
        }
    }

    #[test]
    fn a_pod_s_extended_resource_claim_is_created_recorded_and_deleted_as_upstream() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (client, requests) = {
            let _in = rt.enter();
            fake::client(extended_server())
        };
        let binder = KubeBinder::new(fake::cluster(client), rt.handle().clone());
        let claim = ResourceClaim {
            namespace: "ml".into(),
            name: berth_sdk::dra::in_memory_extended_claim_name("9a8b"),
            controller: Some(berth_sdk::dra::ControllerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: "trainer-0".into(),
                uid: "9a8b".into(),
            }),
            spec: berth_sdk::dra::DeviceClaim {
                requests: vec![berth_sdk::dra::DeviceRequest::Exactly(
                    berth_sdk::dra::DeviceSubRequest {
                        name: "container-0-request-1".into(),
                        device_class_name: "gpu.example.com".into(),
                        selectors: Vec::new(),
                        allocation_mode: berth_sdk::dra::AllocationMode::ExactCount(2),
                        admin_access: false,
                        tolerations: Vec::new(),
                        capacity: Default::default(),
                    },
                )],
                ..Default::default()
            },
            ..ResourceClaim::default()
        };
        let created = binder.create_extended_resource_claim(&claim).unwrap();
        assert_eq!(created.name, "trainer-0-extended-resources-bcdfg");
        assert!(created.is_extended_resource_claim_of("9a8b"));
        assert_eq!(created.spec, claim.spec);
        {
            let reqs = requests.lock().unwrap();
            let body = &reqs[0].body;
            assert_eq!(
                body["metadata"]["generateName"],
                "trainer-0-extended-resources-"
            );
            assert_eq!(
                body["metadata"]["annotations"],
                json!({"resource.kubernetes.io/extended-resource-claim": "true"})
            );
            assert_eq!(
                body["metadata"]["ownerReferences"],
                json!([{"apiVersion": "v1", "kind": "Pod", "name": "trainer-0", "uid": "9a8b", "controller": true, "blockOwnerDeletion": true}])
            );
            assert_eq!(
                body["spec"]["devices"]["requests"],
                json!([{"name": "container-0-request-1", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2}}])
            );
        }

        let status = berth_sdk::PodExtendedResourceClaimStatus {
            resource_claim_name: created.name.clone(),
            request_mappings: vec![berth_sdk::ContainerExtendedResourceRequest {
                container_name: "trainer".into(),
                resource_name: "example.com/gpu".into(),
                request_name: "container-0-request-1".into(),
            }],
        };
        binder
            .write_extended_resource_claim_status("ml", "trainer-0", "9a8b", &status)
            .unwrap();
        {
            let reqs = requests.lock().unwrap();
            let patch = reqs.last().unwrap();
            assert_eq!(patch.content_type, "application/merge-patch+json");
            assert_eq!(
                patch.body,
                json!({"metadata": {"uid": "9a8b"}, "status": {"extendedResourceClaimStatus": {
                    "resourceClaimName": "trainer-0-extended-resources-bcdfg",
                    "requestMappings": [{"containerName": "trainer", "resourceName": "example.com/gpu", "requestName": "container-0-request-1"}],
                }}})
            );
        }

        // Deleted after its finalizer is dropped from the version read; deleting it
        // again finds it gone, which is no error.
        binder
            .delete_extended_resource_claim("ml", &created.name)
            .unwrap();
        binder
            .delete_extended_resource_claim("ml", &created.name)
            .unwrap();
        let methods: Vec<String> = requests.lock().unwrap()[2..]
            .iter()
            .map(|r| r.method.clone())
            .collect();
        assert_eq!(methods, ["GET", "PATCH", "DELETE", "GET"]);
    }
}
