//! The dynamic resource allocation objects' bookkeeping: each DeviceClass,
//! ResourceClaim, ResourceClaimTemplate, ResourceSlice and DeviceTaintRule change
//! updates the view the DynamicResources plugin reads.

use super::Scheduler;
use crate::cluster::dra::{Dra, DraChange};

impl Scheduler {
    /// The cluster's dynamic resource allocation objects, as plugins read them.
    pub fn dra(&self) -> &Dra {
        &self.dra
    }

    /// A `resource.k8s.io` object appeared, changed or is gone.
    pub fn apply_dra(&mut self, change: DraChange) {
        self.dra.apply(change);
    }
}
