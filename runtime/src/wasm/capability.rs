//! What a plugin may ask of the host, by extension point and by cycle. The host
//! knows which plugin, which extension point and which pod a call comes from (the
//! store and the call under way say so; the guest is never asked), and the
//! `berth:scheduler/host` functions that act on the cluster check it:
//!
//! - `bind-pod`: at Bind, the cycle's pod, to the node the cycle reserved;
//! - `allow-waiting-pod`, `reject-waiting-pod`: the plugin's own waits (the plugin it
//!   names is itself), from any extension point, as a Permit plugin of a gang lets
//!   the gang's other pods go;
//! - the storage writes (`assume-volume-bound`, `assume-claim-provisioned`,
//!   `restore-volume`, `restore-claim`): at Reserve, Unreserve and PreBind, for the
//!   claims of the cycle's pod; `bind-volume` and `select-node-for-claim`: at PreBind,
//!   for those claims, on the reserved node;
//! - the ResourceClaim writes of the `dra` interface, for the cycle's pod's
//!   ResourceClaims (those `spec.resourceClaims` names, directly or through
//!   `status.resourceClaimStatuses`, and `status.extendedResourceClaimStatus`'s):
//!   `assume-resource-claim` at Reserve and PreBind (PreBind re-assumes an allocation
//!   it writes again to a claim that changed since Reserve read it, so that other
//!   cycles keep off its devices meanwhile), `restore-resource-claim` at Reserve and
//!   Unreserve (upstream's Reserve and Unreserve of DynamicResources),
//!   `write-resource-claim-status` at PreBind, and at PostFilter only to deallocate
//!   a claim no other consumer has reserved (upstream's PostFilter of DynamicResources).
//!
//! Anything else is refused: the host function answers an error to the guest, the
//! refusal is logged and counted (`berth_plugin_refused_calls_total`), and the call
//! under way fails with an Error naming the plugin, the host call and the extension
//! point, whatever the guest answers. Reading (the listers, the waiting pods, the
//! simulations of PostFilter) is open to every point. Victims of preemption are
//! checked where they are evicted, in the framework's PostFilter.

use berth_sdk::dra::{ResourceClaim, ResourceClaimStatus};
use berth_sdk::{ClaimSource, ExtensionPoint, Pod};

/// A host call that acts on the cluster or another plugin's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostCall {
    /// `bind-pod`.
    BindPod,
    /// `allow-waiting-pod`.
    AllowWaitingPod,
    /// `reject-waiting-pod`.
    RejectWaitingPod,
    /// `assume-volume-bound`.
    AssumeVolumeBound,
    /// `assume-claim-provisioned`.
    AssumeClaimProvisioned,
    /// `restore-volume`.
    RestoreVolume,
    /// `restore-claim`.
    RestoreClaim,
    /// `bind-volume`.
    BindVolume,
    /// `select-node-for-claim`.
    SelectNodeForClaim,
    /// `dra.assume-resource-claim`.
    AssumeResourceClaim,
    /// `dra.restore-resource-claim`.
    RestoreResourceClaim,
    /// `dra.write-resource-claim-status`.
    WriteResourceClaimStatus,
    /// `dra.create-extended-resource-claim`.
    CreateExtendedResourceClaim,
    /// `dra.delete-extended-resource-claim`.
    DeleteExtendedResourceClaim,
    /// `dra.write-extended-resource-claim-status`.
    WriteExtendedResourceClaimStatus,
}

/// Every host call that is checked, in the WIT's order.
pub const CHECKED: [HostCall; 15] = [
    HostCall::BindPod,
    HostCall::AllowWaitingPod,
    HostCall::RejectWaitingPod,
    HostCall::AssumeVolumeBound,
    HostCall::AssumeClaimProvisioned,
    HostCall::RestoreVolume,
    HostCall::RestoreClaim,
    HostCall::BindVolume,
    HostCall::SelectNodeForClaim,
    HostCall::AssumeResourceClaim,
    HostCall::RestoreResourceClaim,
    HostCall::WriteResourceClaimStatus,
    HostCall::CreateExtendedResourceClaim,
    HostCall::DeleteExtendedResourceClaim,
    HostCall::WriteExtendedResourceClaimStatus,
];

/// The storage writes' extension points.
const STORAGE_WRITES: &[&str] = &["Reserve", "Unreserve", "PreBind"];

impl HostCall {
    /// The WIT name.
    pub fn as_str(self) -> &'static str {
        match self {
            HostCall::BindPod => "bind-pod",
            HostCall::AllowWaitingPod => "allow-waiting-pod",
            HostCall::RejectWaitingPod => "reject-waiting-pod",
            HostCall::AssumeVolumeBound => "assume-volume-bound",
            HostCall::AssumeClaimProvisioned => "assume-claim-provisioned",
            HostCall::RestoreVolume => "restore-volume",
            HostCall::RestoreClaim => "restore-claim",
            HostCall::BindVolume => "bind-volume",
            HostCall::SelectNodeForClaim => "select-node-for-claim",
            HostCall::AssumeResourceClaim => "assume-resource-claim",
            HostCall::RestoreResourceClaim => "restore-resource-claim",
            HostCall::WriteResourceClaimStatus => "write-resource-claim-status",
            HostCall::CreateExtendedResourceClaim => "create-extended-resource-claim",
            HostCall::DeleteExtendedResourceClaim => "delete-extended-resource-claim",
            HostCall::WriteExtendedResourceClaimStatus => "write-extended-resource-claim-status",
        }
    }

    /// The extension points it may be called from; `None`: any.
    pub fn points(self) -> Option<&'static [&'static str]> {
        match self {
            HostCall::BindPod => Some(&["Bind"]),
            HostCall::AllowWaitingPod | HostCall::RejectWaitingPod => None,
            HostCall::AssumeVolumeBound
            | HostCall::AssumeClaimProvisioned
            | HostCall::RestoreVolume
            | HostCall::RestoreClaim => Some(STORAGE_WRITES),
            HostCall::BindVolume | HostCall::SelectNodeForClaim => Some(&["PreBind"]),
            // PreBind: DynamicResources' retry of a write that met a changed claim.
            HostCall::AssumeResourceClaim => Some(&["Reserve", "PreBind"]),
            HostCall::RestoreResourceClaim => Some(&["Reserve", "Unreserve"]),
            // PostFilter: upstream's DynamicResources deallocates a claim there.
            HostCall::WriteResourceClaimStatus => Some(&["PostFilter", "PreBind"]),
            HostCall::CreateExtendedResourceClaim | HostCall::WriteExtendedResourceClaimStatus => {
                Some(&["PreBind"])
            }
            // PostFilter: upstream deletes a claim an earlier attempt made; Unreserve:
            // one this attempt's PreBind made.
            HostCall::DeleteExtendedResourceClaim => Some(&["PostFilter", "Unreserve"]),
        }
    }

    /// What it may act on, for `config validate` and the README.
    pub fn scope(self) -> &'static str {
        match self {
            HostCall::BindPod => "the cycle's pod, to the reserved node",
            HostCall::AllowWaitingPod | HostCall::RejectWaitingPod => "the plugin's own waits",
            HostCall::AssumeVolumeBound
            | HostCall::AssumeClaimProvisioned
            | HostCall::RestoreVolume
            | HostCall::RestoreClaim
            | HostCall::BindVolume => "the cycle's pod's claims",
            HostCall::SelectNodeForClaim => "the cycle's pod's claims, on the reserved node",
            HostCall::AssumeResourceClaim | HostCall::RestoreResourceClaim => {
                "the cycle's pod's ResourceClaims"
            }
            HostCall::WriteResourceClaimStatus => {
                "the cycle's pod's ResourceClaims; at PostFilter only to deallocate one no other consumer has reserved"
            }
            HostCall::CreateExtendedResourceClaim | HostCall::DeleteExtendedResourceClaim => {
                "the claim for the cycle's pod's extended resources"
            }
            HostCall::WriteExtendedResourceClaimStatus => "the cycle's pod's status",
        }
    }
}

/// The checked calls open to a plugin enabled at `points` beyond the ones open to
/// every plugin (its own waits), each with the points of those it may make it from:
/// what `berth config validate` prints.
pub fn granted(points: &[ExtensionPoint]) -> Vec<(HostCall, Vec<&'static str>)> {
    CHECKED
        .iter()
        .filter_map(|&call| {
            let allowed = call.points()?;
            let at: Vec<&'static str> = allowed
                .iter()
                .copied()
                .filter(|label| points.iter().any(|p| covers(*p, label)))
                .collect();
            (!at.is_empty()).then_some((call, at))
        })
        .collect()
}

/// Whether enabling a plugin at `point` makes it run at the call `label` (Reserve
/// brings Unreserve).
fn covers(point: ExtensionPoint, label: &str) -> bool {
    point.as_str().eq_ignore_ascii_case(label)
        || (point == ExtensionPoint::Reserve && label == "Unreserve")
}

/// Whether any checked call needs the cycle's pod at `point`: the host keeps the pod
/// and the node for the calls of those points only.
pub fn needs_pod(point: &str) -> bool {
    CHECKED
        .iter()
        .filter_map(|c| c.points())
        .any(|points| points.contains(&point))
}

/// The pod of the call under way, as the checks need it.
#[derive(Clone, Debug, Default)]
pub struct ScopedPod {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The claims its volumes use (in its namespace).
    pub claims: Vec<String>,
    /// Its ResourceClaims (in its namespace): see [`resource_claim_names`].
    pub resource_claims: Vec<String>,
}

/// The names of the ResourceClaims a pod uses, as far as they are known: each entry
/// of `spec.resourceClaims` naming a claim, the claim made for each one naming a
/// template (`status.resourceClaimStatuses`; none before it is made), and the claim
/// made for its extended resources (`status.extendedResourceClaimStatus`).
pub fn resource_claim_names(pod: &Pod) -> Vec<String> {
    let made = |entry: &str| {
        pod.resource_claim_status(entry)
            .and_then(|s| s.resource_claim_name.clone())
    };
    pod.resource_claims
        .iter()
        .filter_map(|c| match &c.source {
            ClaimSource::ClaimName(name) => Some(name.clone()),
            ClaimSource::TemplateName(_) => made(&c.name),
        })
        .chain(
            pod.extended_resource_claim_status
                .as_ref()
                .map(|s| s.resource_claim_name.clone()),
        )
        .collect()
}

impl ScopedPod {
    /// The parts of `pod` the checks read.
    pub fn of(pod: &Pod) -> Self {
        ScopedPod {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            claims: pod.claim_names().collect(),
            resource_claims: resource_claim_names(pod),
        }
    }
}

/// Who is calling: the plugin, the extension point of the call under way, and at the
/// points that need them ([`needs_pod`]) the cycle's pod and the node of the call.
#[derive(Clone, Debug, Default)]
pub struct CallScope {
    /// The extension point ("Configure" while the instance is configured).
    pub point: &'static str,
    /// The cycle's pod.
    pub pod: Option<ScopedPod>,
    /// The node the call is about (the reserved node from Reserve on).
    pub node: Option<String>,
}

impl CallScope {
    /// `Ok` when `call` may be made now at all; else why not.
    pub fn at_point(&self, call: HostCall) -> Result<(), String> {
        match call.points() {
            Some(points) if !points.contains(&self.point) => Err(format!(
                "{} is allowed only at {}",
                call.as_str(),
                points.join(", ")
            )),
            _ => Ok(()),
        }
    }

    /// `Ok` when `call` may act on the pod `uid` bound to `node`.
    pub fn bind(&self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), String> {
        self.at_point(HostCall::BindPod)?;
        let pod = self.pod()?;
        if pod.uid != uid {
            return Err(format!(
                "bind-pod may bind only the cycle's pod {}/{} (uid {}), not uid {uid}",
                pod.namespace, pod.name, pod.uid
            ));
        }
        if (pod.namespace.as_str(), pod.name.as_str()) != (namespace, name) {
            return Err(format!(
                "uid {uid} is the cycle's pod {}/{}, not {namespace}/{name}",
                pod.namespace, pod.name
            ));
        }
        self.on_node(HostCall::BindPod, node)
    }

    /// `Ok` when `call` may act on the claim `namespace/name`.
    pub fn claim(&self, call: HostCall, namespace: &str, name: &str) -> Result<(), String> {
        self.at_point(call)?;
        let pod = self.pod()?;
        if pod.namespace != namespace || !pod.claims.iter().any(|c| c == name) {
            return Err(format!(
                "{} may act only on the claims of the cycle's pod {}/{}, not {namespace}/{name}",
                call.as_str(),
                pod.namespace,
                pod.name
            ));
        }
        Ok(())
    }

    /// `Ok` when `call` may act on the ResourceClaim `namespace/name`: one the pod
    /// names (see [`resource_claim_names`]), or the claim for its extended resources
    /// before PreBind creates it (`<extended-resources>/<pod UID>`).
    pub fn resource_claim(
        &self,
        call: HostCall,
        namespace: &str,
        name: &str,
    ) -> Result<(), String> {
        self.at_point(call)?;
        let pod = self.pod()?;
        let in_memory = berth_sdk::dra::in_memory_extended_claim_name(&pod.uid);
        if pod.namespace != namespace
            || !(pod.resource_claims.iter().any(|c| c == name) || name == in_memory)
        {
            return Err(format!(
                "{} may act only on the ResourceClaims of the cycle's pod {}/{}, not {namespace}/{name}",
                call.as_str(),
                pod.namespace,
                pod.name
            ));
        }
        Ok(())
    }

    /// `Ok` when `write-resource-claim-status` may write `written` over `current`,
    /// the cluster's copy: a ResourceClaim of the cycle's pod, at PreBind with any
    /// status; at PostFilter only a deallocation (no allocation, `reservedFor` or
    /// device status left) of a claim no other consumer has reserved, as upstream's
    /// DynamicResources deallocates there so that the next attempt may allocate it
    /// anew.
    pub fn resource_claim_write(
        &self,
        written: &ResourceClaim,
        current: Option<&ResourceClaim>,
    ) -> Result<(), String> {
        let call = HostCall::WriteResourceClaimStatus;
        let made_for_pod = self.pod.as_ref().zip(current).is_some_and(|(pod, c)| {
            c.namespace == pod.namespace && c.is_extended_resource_claim_of(&pod.uid)
        });
        if made_for_pod {
            self.at_point(call)?;
        } else {
            self.resource_claim(call, &written.namespace, &written.name)?;
        }
        if self.point != "PostFilter" {
            return Ok(());
        }
        if written.status != ResourceClaimStatus::default() {
            return Err(format!(
                "at PostFilter {} may only deallocate resourceclaim {}: its status must have no allocation, reservedFor or devices",
                call.as_str(),
                written.key()
            ));
        }
        let pod = self.pod()?;
        if let Some(other) = current
            .into_iter()
            .flat_map(|c| &c.status.reserved_for)
            .find(|r| !r.is_pod(&pod.uid))
        {
            return Err(format!(
                "{} may not deallocate resourceclaim {} at PostFilter: it is reserved for {} {:?}",
                call.as_str(),
                written.key(),
                other.resource,
                other.name
            ));
        }
        Ok(())
    }

    /// `Ok` when `create-extended-resource-claim` may create `claim`: at PreBind, a
    /// claim of the cycle's pod's namespace whose controller is that pod.
    pub fn extended_claim_create(&self, claim: &ResourceClaim) -> Result<(), String> {
        let call = HostCall::CreateExtendedResourceClaim;
        self.at_point(call)?;
        let pod = self.pod()?;
        if claim.namespace != pod.namespace || !claim.is_for_pod(&pod.uid) {
            return Err(format!(
                "{} may create only a claim controlled by the cycle's pod {}/{} in its namespace",
                call.as_str(),
                pod.namespace,
                pod.name
            ));
        }
        Ok(())
    }

    /// `Ok` when `delete-extended-resource-claim` may delete `current` (the claim as
    /// the host sees it; `None`: unknown): the claim made for the cycle's pod's
    /// extended resources (annotated as such, the pod its controller).
    pub fn extended_claim_delete(
        &self,
        namespace: &str,
        name: &str,
        current: Option<&ResourceClaim>,
    ) -> Result<(), String> {
        let call = HostCall::DeleteExtendedResourceClaim;
        self.at_point(call)?;
        let pod = self.pod()?;
        match current {
            Some(c)
                if c.namespace == pod.namespace && c.is_extended_resource_claim_of(&pod.uid) =>
            {
                Ok(())
            }
            _ => Err(format!(
                "{} may delete only the claim made for the extended resources of the cycle's pod {}/{}, not {namespace}/{name}",
                call.as_str(),
                pod.namespace,
                pod.name
            )),
        }
    }

    /// `Ok` when `write-extended-resource-claim-status` may write the status of the
    /// pod `namespace/name` (uid `uid`): at PreBind, the cycle's pod.
    pub fn pod_status(&self, namespace: &str, name: &str, uid: &str) -> Result<(), String> {
        let call = HostCall::WriteExtendedResourceClaimStatus;
        self.at_point(call)?;
        let pod = self.pod()?;
        if (pod.namespace.as_str(), pod.name.as_str(), pod.uid.as_str()) != (namespace, name, uid) {
            return Err(format!(
                "{} may write only the status of the cycle's pod {}/{} (uid {}), not {namespace}/{name} (uid {uid})",
                call.as_str(),
                pod.namespace,
                pod.name,
                pod.uid
            ));
        }
        Ok(())
    }

    /// `Ok` when `call` may act on the claim `namespace/name` for `node`.
    pub fn claim_on_node(
        &self,
        call: HostCall,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<(), String> {
        self.claim(call, namespace, name)?;
        self.on_node(call, node)
    }

    /// `Ok` when `node` is the node of the call under way.
    pub fn on_node(&self, call: HostCall, node: &str) -> Result<(), String> {
        match &self.node {
            Some(n) if n == node => Ok(()),
            Some(n) => Err(format!(
                "{} may name only the reserved node {n}, not {node}",
                call.as_str()
            )),
            None => Err(format!("{} has no node at {}", call.as_str(), self.point)),
        }
    }

    fn pod(&self) -> Result<&ScopedPod, String> {
        self.pod
            .as_ref()
            .ok_or_else(|| format!("no pod is being scheduled at {}", self.point))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(point: &'static str) -> CallScope {
        CallScope {
            point,
            pod: Some(ScopedPod {
                uid: "u1".into(),
                namespace: "ns".into(),
                name: "p".into(),
                claims: vec!["data".into()],
                resource_claims: vec!["gpu".into()],
            }),
            node: Some("n1".into()),
        }
    }

    #[test]
    fn bind_only_the_cycle_s_pod_to_its_node_at_bind() {
        assert_eq!(scope("Bind").bind("ns", "p", "u1", "n1"), Ok(()));
        assert_eq!(
            scope("PreBind").bind("ns", "p", "u1", "n1"),
            Err("bind-pod is allowed only at Bind".into())
        );
        assert_eq!(
            scope("Bind").bind("ns", "p", "u2", "n1"),
            Err("bind-pod may bind only the cycle's pod ns/p (uid u1), not uid u2".into())
        );
        assert_eq!(
            scope("Bind").bind("ns", "p", "u1", "n2"),
            Err("bind-pod may name only the reserved node n1, not n2".into())
        );
    }

    #[test]
    fn storage_writes_only_for_the_pod_s_claims_at_their_points() {
        for point in ["Reserve", "Unreserve", "PreBind"] {
            assert_eq!(
                scope(point).claim(HostCall::AssumeClaimProvisioned, "ns", "data"),
                Ok(())
            );
        }
        assert_eq!(
            scope("Filter").claim(HostCall::RestoreClaim, "ns", "data"),
            Err("restore-claim is allowed only at Reserve, Unreserve, PreBind".into())
        );
        assert_eq!(
            scope("Reserve").claim(HostCall::RestoreClaim, "ns", "other"),
            Err(
                "restore-claim may act only on the claims of the cycle's pod ns/p, not ns/other"
                    .into()
            )
        );
        assert_eq!(
            scope("Reserve").claim(HostCall::BindVolume, "ns", "data"),
            Err("bind-volume is allowed only at PreBind".into())
        );
        assert!(needs_pod("Reserve") && needs_pod("Bind") && !needs_pod("Filter"));
    }

    #[test]
    fn granted_follows_the_points_a_plugin_is_enabled_at() {
        assert_eq!(
            granted(&[ExtensionPoint::Bind]),
            [(HostCall::BindPod, vec!["Bind"])]
        );
        let reserve = granted(&[ExtensionPoint::Filter, ExtensionPoint::Reserve]);
        assert_eq!(reserve.len(), 7, "{reserve:?}");
        assert!(
            reserve
                .iter()
                .filter(|(c, _)| !matches!(
                    c,
                    HostCall::AssumeResourceClaim | HostCall::DeleteExtendedResourceClaim
                ))
                .all(|(_, at)| at == &["Reserve", "Unreserve"])
        );
        assert!(reserve.contains(&(HostCall::AssumeResourceClaim, vec!["Reserve"])));
        assert!(reserve.contains(&(HostCall::DeleteExtendedResourceClaim, vec!["Unreserve"])));
        assert_eq!(
            granted(&[ExtensionPoint::PreBind])
                .into_iter()
                .map(|(c, _)| c)
                .collect::<Vec<_>>(),
            [
                HostCall::AssumeVolumeBound,
                HostCall::AssumeClaimProvisioned,
                HostCall::RestoreVolume,
                HostCall::RestoreClaim,
                HostCall::BindVolume,
                HostCall::SelectNodeForClaim,
                HostCall::AssumeResourceClaim,
                HostCall::WriteResourceClaimStatus,
                HostCall::CreateExtendedResourceClaim,
                HostCall::WriteExtendedResourceClaimStatus,
            ]
        );
        assert!(granted(&[ExtensionPoint::Filter, ExtensionPoint::Permit]).is_empty());
    }

    #[test]
    fn resource_claim_writes_only_for_the_pod_s_resource_claims_at_their_points() {
        let call = HostCall::AssumeResourceClaim;
        assert_eq!(scope("Reserve").resource_claim(call, "ns", "gpu"), Ok(()));
        assert_eq!(
            scope("Unreserve").resource_claim(call, "ns", "gpu"),
            Err("assume-resource-claim is allowed only at Reserve, PreBind".into())
        );
        let restore = HostCall::RestoreResourceClaim;
        for point in ["Reserve", "Unreserve"] {
            assert_eq!(scope(point).resource_claim(restore, "ns", "gpu"), Ok(()));
        }
        assert_eq!(
            scope("PreBind").resource_claim(restore, "ns", "gpu"),
            Err("restore-resource-claim is allowed only at Reserve, Unreserve".into())
        );
        let write = HostCall::WriteResourceClaimStatus;
        assert_eq!(scope("PreBind").resource_claim(write, "ns", "gpu"), Ok(()));
        assert_eq!(
            scope("PreBind").resource_claim(write, "ns", "data"),
            Err("write-resource-claim-status may act only on the ResourceClaims of the cycle's pod ns/p, not ns/data".into())
        );
        assert_eq!(
            scope("PreBind").resource_claim(write, "other", "gpu"),
            Err("write-resource-claim-status may act only on the ResourceClaims of the cycle's pod ns/p, not other/gpu".into())
        );
        assert_eq!(
            CallScope {
                point: "PreBind",
                ..CallScope::default()
            }
            .resource_claim(write, "ns", "gpu"),
            Err("no pod is being scheduled at PreBind".into())
        );
    }

    #[test]
    fn the_claim_for_the_pod_s_extended_resources_is_made_and_deleted_only_for_it() {
        use berth_sdk::dra::{
            ControllerReference, EXTENDED_RESOURCE_CLAIM_ANNOTATION, in_memory_extended_claim_name,
        };
        let owned_by = |uid: &str, annotated: bool| {
            let mut c = ResourceClaim {
                namespace: "ns".into(),
                name: "p-extended-resources-bcdfg".into(),
                controller: Some(ControllerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: "p".into(),
                    uid: uid.into(),
                }),
                ..ResourceClaim::default()
            };
            if annotated {
                c.annotations
                    .insert(EXTENDED_RESOURCE_CLAIM_ANNOTATION.into(), "true".into());
            }
            c
        };
        let ours = owned_by("u1", true);
        // Created at PreBind only, and only controlled by the cycle's pod.
        assert!(scope("PreBind").extended_claim_create(&ours).is_ok());
        let e = scope("Reserve").extended_claim_create(&ours).unwrap_err();
        assert!(e.contains("only at PreBind"), "{e}");
        let e = scope("PreBind")
            .extended_claim_create(&owned_by("u2", true))
            .unwrap_err();
        assert!(e.contains("controlled by the cycle's pod ns/p"), "{e}");
        // Deleted at PostFilter and Unreserve, only the pod's own annotated claim.
        for point in ["PostFilter", "Unreserve"] {
            assert!(
                scope(point)
                    .extended_claim_delete("ns", &ours.name, Some(&ours))
                    .is_ok()
            );
        }
        assert!(
            scope("PreBind")
                .extended_claim_delete("ns", &ours.name, Some(&ours))
                .is_err()
        );
        for other in [owned_by("u2", true), owned_by("u1", false)] {
            let e = scope("Unreserve")
                .extended_claim_delete("ns", &other.name, Some(&other))
                .unwrap_err();
            assert!(
                e.contains("may delete only the claim made for the extended resources"),
                "{e}"
            );
        }
        assert!(
            scope("Unreserve")
                .extended_claim_delete("ns", "gone", None)
                .is_err()
        );
        // Its status written at PreBind, then reserved for the pod, like its own.
        let mut written = ours.clone();
        written.status.reserved_for = vec![berth_sdk::dra::ConsumerReference::pod("p", "u1")];
        assert!(
            scope("PreBind")
                .resource_claim_write(&written, Some(&ours))
                .is_ok()
        );
        assert!(
            scope("PreBind")
                .resource_claim_write(&written, Some(&owned_by("u2", true)))
                .is_err()
        );
        // Before it is made, Reserve assumes it by its in-memory name.
        let in_memory = in_memory_extended_claim_name("u1");
        assert!(
            scope("Reserve")
                .resource_claim(HostCall::AssumeResourceClaim, "ns", &in_memory)
                .is_ok()
        );
        assert!(
            scope("Reserve")
                .resource_claim(
                    HostCall::AssumeResourceClaim,
                    "ns",
                    &in_memory_extended_claim_name("u2")
                )
                .is_err()
        );
        // The pod's status: its own, at PreBind.
        assert!(scope("PreBind").pod_status("ns", "p", "u1").is_ok());
        assert!(scope("PreBind").pod_status("ns", "q", "u9").is_err());
        assert!(scope("Reserve").pod_status("ns", "p", "u1").is_err());
    }

    #[test]
    fn a_pod_s_resource_claims_are_named_directly_made_from_templates_or_for_extended_resources() {
        use berth_sdk::{PodExtendedResourceClaimStatus, PodResourceClaim, PodResourceClaimStatus};
        let mut pod = Pod {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u1".into(),
            resource_claims: vec![
                PodResourceClaim {
                    name: "shared".into(),
                    source: ClaimSource::ClaimName("team-gpu".into()),
                },
                PodResourceClaim {
                    name: "own".into(),
                    source: ClaimSource::TemplateName("one-gpu".into()),
                },
                PodResourceClaim {
                    name: "none".into(),
                    source: ClaimSource::TemplateName("maybe".into()),
                },
            ],
            ..Pod::default()
        };
        // Before the resourceclaim controller made its claims: only the named one.
        assert_eq!(resource_claim_names(&pod), ["team-gpu"]);
        pod.resource_claim_statuses = vec![
            PodResourceClaimStatus {
                name: "own".into(),
                resource_claim_name: Some("p-own-x7k2q".into()),
            },
            PodResourceClaimStatus {
                name: "none".into(),
                resource_claim_name: None,
            },
        ];
        pod.extended_resource_claim_status = Some(PodExtendedResourceClaimStatus {
            resource_claim_name: "p-extended-resources-abcde".into(),
            request_mappings: Vec::new(),
        });
        assert_eq!(
            resource_claim_names(&pod),
            ["team-gpu", "p-own-x7k2q", "p-extended-resources-abcde"]
        );
        // The template's name is not a claim's.
        let scoped = ScopedPod::of(&pod);
        assert!(!scoped.resource_claims.iter().any(|c| c == "one-gpu"));
    }
}
