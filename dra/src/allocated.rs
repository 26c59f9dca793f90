//! What is in use already: devices allocated exclusively, shares of devices that
//! allow multiple allocations, and the capacity those shares consume.

use crate::Features;
use berth_sdk::dra::{DeviceId, DeviceRequestAllocationResult, ResourceClaim};
use berth_sdk::quantity::QuantityError;
use std::collections::{BTreeMap, BTreeSet};

/// Consumed capacity of one device, by capacity name, in nano-units.
pub type ConsumedCapacity = BTreeMap<String, i128>;

/// The devices allocated to claims (upstream's `AllocatedState`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocatedState {
    /// Devices allocated exclusively (not with admin access, not as a share).
    pub devices: BTreeSet<DeviceId>,
    /// Shares of devices that allow multiple allocations: the device and the share.
    pub shares: BTreeSet<(DeviceId, String)>,
    /// What the shares of each device consume, summed.
    pub consumed_capacity: BTreeMap<DeviceId, ConsumedCapacity>,
}

/// A quantity in an allocation result that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocatedStateError {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The device.
    pub device: DeviceId,
    /// The capacity name in `consumedCapacity`.
    pub capacity: String,
    /// What is wrong with it.
    pub error: QuantityError,
}

impl std::fmt::Display for AllocatedStateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "claim {}: status.allocation.devices.results of device {}: consumedCapacity {}: {}",
            self.claim, self.device, self.capacity, self.error
        )
    }
}

impl std::error::Error for AllocatedStateError {}

impl AllocatedState {
    /// What the allocated claims among these use, as upstream's scheduler tracks it:
    /// a result with admin access takes nothing; with consumable capacity on, a
    /// result with a share ID takes a share and its consumed capacity; any other
    /// result takes the device exclusively.
    pub fn from_claims<'a>(
        claims: impl IntoIterator<Item = &'a ResourceClaim>,
        features: &Features,
    ) -> Result<AllocatedState, Box<AllocatedStateError>> {
        AllocatedState::from_results(&berth_sdk::dra::device_results_of(claims), features)
    }

    /// The same from the device results of the allocated claims, each with its
    /// claim's `namespace/name` (what the host's `allocated-device-results` answers).
    pub fn from_results(
        results: &[(String, DeviceRequestAllocationResult)],
        features: &Features,
    ) -> Result<AllocatedState, Box<AllocatedStateError>> {
        let mut state = AllocatedState::default();
        for (claim, result) in results {
            if result.admin_access == Some(true) {
                continue;
            }
            let id = result.device_id();
            if features.consumable_capacity
                && let Some(share) = &result.share_id
            {
                state.shares.insert((id.clone(), share.clone()));
                let consumed = state.consumed_capacity.entry(id.clone()).or_default();
                for (name, q) in &result.consumed_capacity {
                    let amount = q.amount().map_err(|error| {
                        Box::new(AllocatedStateError {
                            claim: claim.clone(),
                            device: id.clone(),
                            capacity: name.clone(),
                            error,
                        })
                    })?;
                    *consumed.entry(name.clone()).or_default() += amount.nanos;
                }
                continue;
            }
            state.devices.insert(id);
        }
        // A share that records no consumed capacity consumes none.
        state.consumed_capacity.retain(|_, c| !c.is_empty());
        Ok(state)
    }

    /// Whether the device is allocated in any way (upstream's `IsDeviceAllocated`):
    /// exclusively, as a share, or with consumed capacity. Allocated devices consume
    /// their counters.
    pub fn is_allocated(&self, id: &DeviceId) -> bool {
        self.devices.contains(id)
            || self.consumed_capacity.contains_key(id)
            || self.shares.iter().any(|(d, _)| d == id)
    }
}
