//! Scoring nodes by which alternatives of `firstAvailable` requests they got
//! (upstream's DynamicResources Score with prioritized lists).

use crate::allocator::FIRST_AVAILABLE_MAX_SIZE;
use berth_sdk::dra::{AllocationResult, DeviceRequest, ResourceClaim};
use std::collections::BTreeSet;

/// The score of a node from the allocation results the allocator found there for
/// these claims (one result per claim, in order): for every `firstAvailable`
/// request, `8 - i` where `i` is the index of the subrequest that got devices, so a
/// node that satisfies earlier (preferred) alternatives scores higher. Claims
/// without a result (already allocated) count nothing.
pub fn prioritized_list_score(claims: &[&ResourceClaim], results: &[AllocationResult]) -> i64 {
    let mut score = 0;
    for (claim, result) in claims.iter().zip(results) {
        let picked: BTreeSet<&str> = result
            .devices
            .iter()
            .map(|d| d.request.as_str())
            .filter(|r| r.contains('/'))
            .collect();
        for request in &claim.spec.requests {
            let DeviceRequest::FirstAvailable { name, subrequests } = request else {
                continue;
            };
            for (i, sub) in subrequests.iter().enumerate() {
                if picked.contains(format!("{name}/{}", sub.name).as_str()) {
                    score += FIRST_AVAILABLE_MAX_SIZE - i as i64;
                }
            }
        }
    }
    score
}
