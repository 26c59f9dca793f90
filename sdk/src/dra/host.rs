//! What the host offers DynamicResources (the WIT `dra` interface): the
//! resource.k8s.io kinds as the scheduler sees them, the assume layer for claims and
//! the claim status write. Natively, with no host installed, the listers are empty
//! and the writes fail.
//!
//! Claims read as the scheduler sees them: an allocation a cycle assumed at Reserve
//! shows until the cluster's copy catches up or the cycle restores it, so that other
//! cycles do not give the same devices twice.

use super::{DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice};

/// Calls `$host` (the WIT import in the sandbox, the installed host natively) or
/// answers `$none` natively when no host is installed.
macro_rules! ask {
    ($guest:expr, |$h:ident| $native:expr, $none:expr) => {{
        #[cfg(target_arch = "wasm32")]
        return $guest;
        #[cfg(not(target_arch = "wasm32"))]
        match crate::native_host() {
            Some($h) => $native,
            None => $none,
        }
    }};
}

/// Grows whenever a DeviceClass, ResourceSlice or DeviceTaintRule changes in the
/// host's view: what a plugin built from them may be kept until it moves.
pub fn device_generation() -> u64 {
    ask!(
        crate::guest::dra::device_generation(),
        |h| h.device_generation(),
        0
    )
}

/// Grows whenever a ResourceClaim changes in the host's view (an assumption or its
/// restoration too).
pub fn claim_generation() -> u64 {
    ask!(
        crate::guest::dra::claim_generation(),
        |h| h.claim_generation(),
        0
    )
}

/// Every DeviceClass.
pub fn device_classes() -> Vec<DeviceClass> {
    ask!(
        crate::guest::dra::device_classes(),
        |h| h.device_classes(),
        Vec::new()
    )
}

/// A DeviceClass by name.
pub fn device_class(name: &str) -> Option<DeviceClass> {
    ask!(
        crate::guest::dra::device_class(name),
        |h| h.device_class(name),
        None
    )
}

/// Every ResourceSlice.
pub fn resource_slices() -> Vec<ResourceSlice> {
    ask!(
        crate::guest::dra::resource_slices(),
        |h| h.resource_slices(),
        Vec::new()
    )
}

/// Every DeviceTaintRule.
pub fn device_taint_rules() -> Vec<DeviceTaintRule> {
    ask!(
        crate::guest::dra::device_taint_rules(),
        |h| h.device_taint_rules(),
        Vec::new()
    )
}

/// A ResourceClaim by namespace and name, with what a cycle assumed of it.
pub fn resource_claim(namespace: &str, name: &str) -> Option<ResourceClaim> {
    ask!(
        crate::guest::dra::resource_claim(namespace, name),
        |h| h.resource_claim(namespace, name),
        None
    )
}

/// Every claim with an allocation, assumed ones included: the devices already given.
pub fn allocated_resource_claims() -> Vec<ResourceClaim> {
    ask!(
        crate::guest::dra::allocated_resource_claims(),
        |h| h.allocated_resource_claims(),
        Vec::new()
    )
}

/// The device results of every allocated claim (assumed ones included), each with
/// its claim's `namespace/name`: what [`allocated_resource_claims`] gives an allocator,
/// at a fraction of the cost across the sandbox boundary.
pub fn allocated_device_results() -> Vec<(String, super::DeviceRequestAllocationResult)> {
    ask!(
        crate::guest::dra::allocated_device_results(),
        |h| h.allocated_device_results(),
        Vec::new()
    )
}

/// Whether the claim carries an allocation a cycle assumed that the cluster has not
/// shown yet (upstream's in-flight allocation).
pub fn claim_allocation_pending(namespace: &str, name: &str) -> bool {
    ask!(
        crate::guest::dra::claim_allocation_pending(namespace, name),
        |h| h.claim_allocation_pending(namespace, name),
        false
    )
}

/// Reserve: assumes `claim` as given (its status: allocation and `reservedFor`), from
/// the resourceVersion it was read at. Only a claim of the cycle's pod; an error when
/// the claim changed since or is unknown.
pub fn assume_resource_claim(claim: &ResourceClaim) -> Result<(), String> {
    ask!(
        crate::guest::dra::assume_resource_claim(claim),
        |h| h.assume_resource_claim(claim),
        Err(crate::NO_DRA.into())
    )
}

/// Drops what was assumed of a claim of the cycle's pod.
pub fn restore_resource_claim(namespace: &str, name: &str) {
    ask!(
        crate::guest::dra::restore_resource_claim(namespace, name),
        |h| h.restore_resource_claim(namespace, name),
        ()
    )
}

/// Binding cycle only: writes the claim's status (allocation, `reservedFor`) through
/// the cluster from the resourceVersion it names (a claim changed since is refused,
/// never overwritten), and answers the claim as written.
pub fn write_resource_claim_status(claim: &ResourceClaim) -> Result<ResourceClaim, String> {
    ask!(
        crate::guest::dra::write_resource_claim_status(claim),
        |h| h.write_resource_claim_status(claim),
        Err(crate::NO_DRA.into())
    )
}

/// Binding cycle only: waits until the claim generation passes `after` or
/// `timeout_ms` pass; answers the generation then and the milliseconds waited. The
/// wait does not count against the plugin's call deadline.
pub fn wait_claim_change(after: u64, timeout_ms: u64) -> (u64, u64) {
    ask!(
        crate::guest::dra::wait_claim_change(after, timeout_ms),
        |h| h.wait_claim_change(after, timeout_ms),
        (0, timeout_ms)
    )
}

/// The claim made for the extended resources of the pod of this UID (annotated
/// `resource.kubernetes.io/extended-resource-claim`, the pod its controlling owner)
/// in an earlier attempt, as the host sees it.
pub fn extended_resource_claim(namespace: &str, pod_uid: &str) -> Option<ResourceClaim> {
    ask!(
        crate::guest::dra::extended_resource_claim(namespace, pod_uid),
        |h| h.extended_resource_claim(namespace, pod_uid),
        None
    )
}

/// PreBind only: creates the claim for the cycle's pod's extended resources from
/// `claim` (its namespace, its controller: the pod, and its requests); the cluster
/// names it `<pod name>-extended-resources-<suffix>`. Answers it as created.
pub fn create_extended_resource_claim(claim: &ResourceClaim) -> Result<ResourceClaim, String> {
    ask!(
        crate::guest::dra::create_extended_resource_claim(claim),
        |h| h.create_extended_resource_claim(claim),
        Err(crate::NO_DRA.into())
    )
}

/// PostFilter and Unreserve only: deletes the claim made for the cycle's pod's
/// extended resources.
pub fn delete_extended_resource_claim(namespace: &str, name: &str) -> Result<(), String> {
    ask!(
        crate::guest::dra::delete_extended_resource_claim(namespace, name),
        |h| h.delete_extended_resource_claim(namespace, name),
        Err(crate::NO_DRA.into())
    )
}

/// PreBind only: records the claim made for the pod's extended resources in its
/// `status.extendedResourceClaimStatus`.
pub fn write_extended_resource_claim_status(
    pod: &crate::Pod,
    status: &crate::PodExtendedResourceClaimStatus,
) -> Result<(), String> {
    ask!(
        crate::guest::dra::write_extended_resource_claim_status(pod, status),
        |h| h.write_extended_resource_claim_status(pod, status),
        Err(crate::NO_DRA.into())
    )
}
