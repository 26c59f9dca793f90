//! The pod's ResourceClaims: which claim each entry of `spec.resourceClaims` names,
//! and whether the pod may use it (upstream's `resourceclaim.Name`, `IsForPod` and the
//! plugin's `foreachPodResourceClaim`).

use berth_sdk::Pod;
use berth_sdk::dra::{ConsumerReference, RESERVED_FOR_MAX_SIZE, ResourceClaim};
use berth_sdk::types::ClaimSource;

/// The name of the claim an entry of `spec.resourceClaims` uses, and whether the
/// claim must be owned by the pod (it was made from a template); `Ok(None)` when the
/// entry needs no claim (the template's claim was intentionally not made).
pub fn claim_name<'p>(
    pod: &'p Pod,
    entry: &'p berth_sdk::types::PodResourceClaim,
) -> Result<Option<(&'p str, bool)>, String> {
    match &entry.source {
        ClaimSource::ClaimName(name) => Ok(Some((name, false))),
        ClaimSource::TemplateName(_) => pod
            .resource_claim_status(&entry.name)
            .map(|s| s.resource_claim_name.as_deref().map(|n| (n, true)))
            .ok_or_else(|| {
                format!(
                    "pod \"{}/{}\": ResourceClaim not created yet",
                    pod.namespace, pod.name
                )
            }),
    }
}

/// The pod's claims, in the order of `spec.resourceClaims` (entries that need no
/// claim left out), or why the pod cannot be scheduled now: a claim not made yet,
/// missing, being deleted, or made from a template for another pod.
pub fn pod_claims(pod: &Pod) -> Result<Vec<ResourceClaim>, String> {
    let mut claims = Vec::with_capacity(pod.resource_claims.len());
    for entry in &pod.resource_claims {
        let Some((name, must_own)) = claim_name(pod, entry)? else {
            continue;
        };
        let Some(claim) = berth_sdk::dra::host::resource_claim(&pod.namespace, name) else {
            // As upstream's claim tracker (an assume cache) says it.
            return Err(format!(
                "could not find ResourceClaim \"{}/{name}\"",
                pod.namespace
            ));
        };
        if claim.terminating {
            return Err(format!("resourceclaim \"{}\" is being deleted", claim.name));
        }
        if must_own && !claim.is_for_pod(&pod.uid) {
            return Err(format!(
                "ResourceClaim {}/{} was not created for pod {}/{} (pod is not owner)",
                claim.namespace, claim.name, pod.namespace, pod.name
            ));
        }
        claims.push(claim);
    }
    Ok(claims)
}

/// Whether one more consumer fits into the claim's `reservedFor` (upstream's
/// `CanBeReserved`).
pub fn can_be_reserved(claim: &ResourceClaim) -> bool {
    claim.status.reserved_for.len() < RESERVED_FOR_MAX_SIZE
}

/// The entry of `reservedFor` naming the pod.
pub fn consumer(pod: &Pod) -> ConsumerReference {
    ConsumerReference::pod(&pod.name, &pod.uid)
}

/// Whether the claim's devices are ready for binding (upstream's
/// `isClaimReadyForBinding`): every binding condition of every allocated device is
/// true in `status.devices`; an error names the first binding failure condition that
/// is true. An unallocated claim is not ready.
pub fn ready_for_binding(claim: &ResourceClaim) -> Result<bool, String> {
    let Some(allocation) = &claim.status.allocation else {
        return Ok(false);
    };
    for result in &allocation.devices {
        if result.binding_conditions.is_empty() {
            continue;
        }
        let Some(status) = claim.status.devices.iter().find(|d| {
            d.device == result.device && d.driver == result.driver && d.pool == result.pool
        }) else {
            return Ok(false);
        };
        let is_true = |t: &str| status.conditions.iter().any(|c| c.type_ == t && c.status);
        if let Some(failed) = result
            .binding_failure_conditions
            .iter()
            .find(|c| is_true(c))
        {
            return Err(format!(
                "claim {} binding failed: condition {failed} of device {} is true",
                claim.name,
                result.device_id()
            ));
        }
        if !result.binding_conditions.iter().all(|c| is_true(c)) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether any device of an allocated claim has binding conditions.
pub fn has_binding_conditions(claim: &ResourceClaim) -> bool {
    claim
        .status
        .allocation
        .as_ref()
        .is_some_and(|a| a.devices.iter().any(|d| !d.binding_conditions.is_empty()))
}
