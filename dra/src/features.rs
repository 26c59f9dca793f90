//! The feature gates the allocator follows.

/// Upstream's DRA feature gates, as the allocator reads them.
///
/// [`Features::default`] is what kube-scheduler 1.37 enables by default (every one of
/// them); [`Features::none`] is the core of DRA alone, which upstream's allocator tests
/// start from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// `DRAAdminAccess`: requests may ask for admin access.
    pub admin_access: bool,
    /// `DRAPrioritizedList`: requests may list alternatives (`firstAvailable`).
    pub prioritized_list: bool,
    /// `DRAPartitionableDevices`: shared counters, `consumesCounters`, per-device
    /// node selection.
    pub partitionable_devices: bool,
    /// `DRADeviceTaints` (and `DRADeviceTaintRules`): taints keep devices from being
    /// allocated unless tolerated.
    pub device_taints: bool,
    /// `DRAConsumableCapacity`: devices with `allowMultipleAllocations` are shared by
    /// capacity.
    pub consumable_capacity: bool,
    /// `DRADeviceBindingConditions` with `DRAResourceClaimDeviceStatus`: devices with
    /// binding conditions may be allocated, and the conditions go into the result.
    pub device_binding_conditions: bool,
}

impl Default for Features {
    /// kube-scheduler 1.37's defaults: all on.
    fn default() -> Self {
        Features {
            admin_access: true,
            prioritized_list: true,
            partitionable_devices: true,
            device_taints: true,
            consumable_capacity: true,
            device_binding_conditions: true,
        }
    }
}

impl Features {
    /// Every gate off.
    pub fn none() -> Features {
        Features {
            admin_access: false,
            prioritized_list: false,
            partitionable_devices: false,
            device_taints: false,
            consumable_capacity: false,
            device_binding_conditions: false,
        }
    }
}
