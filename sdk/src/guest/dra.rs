//! The WIT `dra` interface on the guest side: its calls, and the resource.k8s.io
//! records of the WIT package as the SDK's [`crate::dra`] types and back (a claim
//! travels both ways: the host lists it, the plugin assumes and writes it).

use super::w;
use super::wit::berth::scheduler::dra as host;

crate::dra_wit_conversions!();

pub(crate) fn device_generation() -> u64 {
    host::device_generation()
}

pub(crate) fn claim_generation() -> u64 {
    host::claim_generation()
}

pub(crate) fn device_classes() -> Vec<sdk::DeviceClass> {
    host::device_classes()
        .into_iter()
        .map(class_from_wit)
        .collect()
}

pub(crate) fn device_class(name: &str) -> Option<sdk::DeviceClass> {
    host::get_device_class(name).map(class_from_wit)
}

pub(crate) fn resource_slices() -> Vec<sdk::ResourceSlice> {
    host::resource_slices()
        .into_iter()
        .map(slice_from_wit)
        .collect()
}

pub(crate) fn device_taint_rules() -> Vec<sdk::DeviceTaintRule> {
    host::device_taint_rules()
        .into_iter()
        .map(|r| sdk::DeviceTaintRule {
            name: r.name,
            selector: sdk::DeviceTaintSelector {
                driver: r.selector.driver,
                pool: r.selector.pool,
                device: r.selector.device,
            },
            taint: taint_from_wit(r.taint),
        })
        .collect()
}

pub(crate) fn resource_claim(namespace: &str, name: &str) -> Option<sdk::ResourceClaim> {
    host::get_resource_claim(namespace, name).map(claim_from_wit)
}

pub(crate) fn allocated_resource_claims() -> Vec<sdk::ResourceClaim> {
    host::allocated_resource_claims()
        .into_iter()
        .map(claim_from_wit)
        .collect()
}

pub(crate) fn allocated_device_results() -> Vec<(String, sdk::DeviceRequestAllocationResult)> {
    host::allocated_device_results()
        .into_iter()
        .map(|(claim, r)| (claim, result_from_wit(r)))
        .collect()
}

pub(crate) fn claim_allocation_pending(namespace: &str, name: &str) -> bool {
    host::claim_allocation_pending(namespace, name)
}

pub(crate) fn assume_resource_claim(claim: &sdk::ResourceClaim) -> Result<(), String> {
    host::assume_resource_claim(&claim_to_wit(claim))
}

pub(crate) fn restore_resource_claim(namespace: &str, name: &str) {
    host::restore_resource_claim(namespace, name)
}

pub(crate) fn write_resource_claim_status(
    claim: &sdk::ResourceClaim,
) -> Result<sdk::ResourceClaim, String> {
    host::write_resource_claim_status(&claim_to_wit(claim)).map(claim_from_wit)
}

pub(crate) fn wait_claim_change(after: u64, timeout_ms: u64) -> (u64, u64) {
    host::wait_claim_change(after, timeout_ms)
}

pub(crate) fn extended_resource_claim(
    namespace: &str,
    pod_uid: &str,
) -> Option<sdk::ResourceClaim> {
    host::extended_resource_claim(namespace, pod_uid).map(claim_from_wit)
}

pub(crate) fn create_extended_resource_claim(
    claim: &sdk::ResourceClaim,
) -> Result<sdk::ResourceClaim, String> {
    host::create_extended_resource_claim(&claim_to_wit(claim)).map(claim_from_wit)
}

pub(crate) fn delete_extended_resource_claim(namespace: &str, name: &str) -> Result<(), String> {
    host::delete_extended_resource_claim(namespace, name)
}

pub(crate) fn write_extended_resource_claim_status(
    pod: &crate::Pod,
    status: &crate::PodExtendedResourceClaimStatus,
) -> Result<(), String> {
    let status = w::PodExtendedResourceClaimStatus {
        resource_claim_name: status.resource_claim_name.clone(),
        request_mappings: status
            .request_mappings
            .iter()
            .map(|m| w::ContainerExtendedResourceRequest {
                container_name: m.container_name.clone(),
                resource_name: m.resource_name.clone(),
                request_name: m.request_name.clone(),
            })
            .collect(),
    };
    host::write_extended_resource_claim_status(&pod.namespace, &pod.name, &pod.uid, &status)
}
