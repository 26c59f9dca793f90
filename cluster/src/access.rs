//! Kinds the scheduler may not list: what a 403 on a kind's list means for
//! scheduling. No I/O here: the watchers ([`super::kube`]) say which kinds are
//! forbidden and which are allowed again; this module keeps that list, and says which
//! kinds a pod's scheduling needs and what a pod that needs a forbidden one is told.
//!
//! A kind the account may not list must not stop the scheduler: it counts as listed
//! (empty) for the sync barrier, so that pods that do not need it are scheduled, while
//! pods that do wait, unschedulable, with a message naming the kind, rather than be
//! placed on a view that misses it (a device claim allocated without the slices, a
//! volume bound without the claims). The watcher keeps asking, with backoff, so that
//! a grant made later is picked up and those pods are tried again. Pods and nodes
//! are the exception ([`ESSENTIAL`]): no pod can be scheduled without them, so a 403
//! on either keeps the scheduler unsynced, and not ready, until it may list them.

use berth_sdk::Pod;
use berth_sdk::volumes::VolumeSource;
use std::collections::BTreeMap;
use std::sync::RwLock;

/// The name a pod waiting for a forbidden kind is rejected by, as if by a plugin: the
/// queue keeps it unschedulable until the kind is allowed (no plugin's event moves
/// it), and `scheduler_unschedulable_pods` counts it under this name.
pub const LIST_ACCESS: &str = "ListAccess";

/// Nodes: every pod needs them.
pub const NODES: &str = "nodes";

/// The kinds without which nothing can be scheduled: a 403 on one is said and
/// retried, but never counts as listed.
pub const ESSENTIAL: &[&str] = &["pods", NODES];
/// Namespaces: pod (anti-)affinity terms with a namespace selector read their labels.
pub const NAMESPACES: &str = "namespaces";
/// The kinds a pod with PersistentVolumeClaims (or generic ephemeral volumes) needs:
/// VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits read them.
pub const STORAGE: &[&str] = &[
    "persistentvolumeclaims",
    "persistentvolumes",
    "storageclasses.storage.k8s.io",
    "csinodes.storage.k8s.io",
    "csidrivers.storage.k8s.io",
    "csistoragecapacities.storage.k8s.io",
];
/// The kinds a pod with ResourceClaims needs: DynamicResources allocates from them.
pub const DRA: &[&str] = &[
    "deviceclasses.resource.k8s.io",
    "resourceclaims.resource.k8s.io",
    "resourceclaimtemplates.resource.k8s.io",
    "resourceslices.resource.k8s.io",
    "devicetaintrules.resource.k8s.io",
];

/// A kind's name as messages give it: its plural, then its API group when it has
/// one (`deviceclasses.resource.k8s.io`, `nodes`), as `kubectl` names resources.
pub fn qualified(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    }
}

/// The kinds the scheduler may not list now, each with the API server's words, shared
/// by the watchers (which write it) and the health endpoints (which report it).
#[derive(Debug, Default)]
pub struct ListAccess(RwLock<BTreeMap<String, String>>);

impl ListAccess {
    /// Marks `kind` forbidden, `why` being the API server's message; true when it was
    /// not already.
    pub fn forbid(&self, kind: &str, why: &str) -> bool {
        let mut m = self.0.write().unwrap_or_else(|e| e.into_inner());
        m.insert(kind.to_owned(), why.to_owned()).is_none()
    }

    /// Marks `kind` listed again; true when it was forbidden.
    pub fn allow(&self, kind: &str) -> bool {
        let mut m = self.0.write().unwrap_or_else(|e| e.into_inner());
        m.remove(kind).is_some()
    }

    /// The kinds forbidden now, by name, with the API server's words.
    pub fn forbidden(&self) -> BTreeMap<String, String> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The kinds scheduling `pod` needs a complete view of, beyond the pods themselves.
/// Kinds that only shape scores (the Services, ReplicaSets and the like that default
/// spreading reads) or preemption's choices (PodDisruptionBudgets) are not among
/// them: a pod is placed without them, as on a cluster that has none.
pub fn needed_by(pod: &Pod) -> Vec<&'static str> {
    let mut kinds = vec![NODES];
    let affinity = &pod.affinity;
    let terms = [&affinity.pod_affinity, &affinity.pod_anti_affinity]
        .into_iter()
        .flat_map(|a| a.required.iter().chain(a.preferred.iter().map(|w| &w.term)));
    if terms.into_iter().any(|t| t.namespace_selector.is_some()) {
        kinds.push(NAMESPACES);
    }
    let claims_volumes = pod.volumes.iter().any(|v| {
        matches!(
            v.source,
            VolumeSource::PersistentVolumeClaim { .. } | VolumeSource::Ephemeral
        )
    });
    if claims_volumes {
        kinds.extend_from_slice(STORAGE);
    }
    if !pod.resource_claims.is_empty() {
        kinds.extend_from_slice(DRA);
    }
    kinds
}

/// Why `pod` cannot be scheduled now, when its scheduling needs a kind of
/// `forbidden`: the kinds, and the API server's words about the first. None when it
/// needs none of them.
pub fn waiting_message(pod: &Pod, forbidden: &BTreeMap<String, String>) -> Option<String> {
    if forbidden.is_empty() {
        return None;
    }
    let missing: Vec<&str> = needed_by(pod)
        .into_iter()
        .filter(|k| forbidden.contains_key(*k))
        .collect();
    let first = missing.first()?;
    Some(format!(
        "the scheduler may not list {}, which scheduling this pod needs: {}",
        missing.join(", "),
        forbidden[*first]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::affinity::{LabelSelector, PodAffinityTerm};
    use berth_sdk::volumes::Volume;
    use berth_sdk::{ClaimSource, PodResourceClaim};

    fn forbidden(kinds: &[&str]) -> BTreeMap<String, String> {
        kinds
            .iter()
            .map(|k| (k.to_string(), format!("{k} is forbidden")))
            .collect()
    }

    fn with_claim() -> Pod {
        Pod {
            resource_claims: vec![PodResourceClaim {
                name: "gpu".into(),
                source: ClaimSource::ClaimName("gpu-claim".into()),
            }],
            ..Pod::default()
        }
    }

    fn with_volume(source: VolumeSource) -> Pod {
        Pod {
            volumes: vec![Volume {
                name: "data".into(),
                source,
            }],
            ..Pod::default()
        }
    }

    #[test]
    fn a_plain_pod_needs_only_nodes() {
        assert_eq!(needed_by(&Pod::default()), [NODES]);
        let all: Vec<&str> = STORAGE.iter().chain(DRA).copied().collect();
        assert_eq!(waiting_message(&Pod::default(), &forbidden(&all)), None);
        // An inline CSI volume reads no claim.
        let csi = with_volume(VolumeSource::Csi { driver: "d".into() });
        assert_eq!(needed_by(&csi), [NODES]);
    }

    #[test]
    fn a_pod_with_claims_waits_for_the_dra_kinds() {
        let pod = with_claim();
        assert_eq!(
            waiting_message(&pod, &forbidden(&["resourceslices.resource.k8s.io"])).as_deref(),
            Some(
                "the scheduler may not list resourceslices.resource.k8s.io, which scheduling \
                 this pod needs: resourceslices.resource.k8s.io is forbidden"
            )
        );
        let msg = waiting_message(
            &pod,
            &forbidden(&[
                "resourceslices.resource.k8s.io",
                "deviceclasses.resource.k8s.io",
                "persistentvolumes",
            ]),
        )
        .unwrap();
        assert!(
            msg.starts_with(
                "the scheduler may not list deviceclasses.resource.k8s.io, \
                 resourceslices.resource.k8s.io, which"
            ),
            "{msg}"
        );
        // Storage forbidden: a device pod does not wait for it.
        assert_eq!(waiting_message(&pod, &forbidden(STORAGE)), None);
    }

    #[test]
    fn a_pod_with_volume_claims_waits_for_the_storage_kinds() {
        for source in [
            VolumeSource::PersistentVolumeClaim {
                claim_name: "data".into(),
                read_only: false,
            },
            VolumeSource::Ephemeral,
        ] {
            let pod = with_volume(source);
            assert!(needed_by(&pod).contains(&"persistentvolumeclaims"));
            assert!(
                waiting_message(&pod, &forbidden(&["storageclasses.storage.k8s.io"])).is_some()
            );
            assert_eq!(waiting_message(&pod, &forbidden(DRA)), None);
        }
    }

    #[test]
    fn every_pod_waits_for_nodes_and_namespace_selectors_for_namespaces() {
        assert!(waiting_message(&Pod::default(), &forbidden(&[NODES])).is_some());
        assert_eq!(
            waiting_message(&Pod::default(), &forbidden(&[NAMESPACES])),
            None
        );
        let mut pod = Pod::default();
        pod.affinity
            .pod_anti_affinity
            .required
            .push(PodAffinityTerm {
                namespace_selector: Some(LabelSelector::default()),
                topology_key: "zone".into(),
                ..PodAffinityTerm::default()
            });
        assert!(waiting_message(&pod, &forbidden(&[NAMESPACES])).is_some());
    }

    #[test]
    fn forbid_and_allow_say_when_the_state_changes() {
        let a = ListAccess::default();
        assert!(a.forbid("nodes", "no"));
        assert!(!a.forbid("nodes", "still no"), "told once");
        assert_eq!(a.forbidden()["nodes"], "still no");
        assert!(a.allow("nodes"));
        assert!(!a.allow("nodes"));
        assert!(a.forbidden().is_empty());
    }

    #[test]
    fn qualified_names_as_kubectl_gives_them() {
        assert_eq!(qualified("nodes", ""), "nodes");
        assert_eq!(
            qualified("deviceclasses", "resource.k8s.io"),
            "deviceclasses.resource.k8s.io"
        );
    }
}
