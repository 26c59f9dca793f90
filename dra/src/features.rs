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
    /// The features as the scheduler's gates set them, each asked of `gate` by its
    /// kube-scheduler name, as upstream's `AllocatorFeatures` maps them: device
    /// binding conditions need `DRADeviceBindingConditions` and
    /// `DRAResourceClaimDeviceStatus`. A gate `gate` does not know (`None`: no host,
    /// or a host that does not say) keeps its [`Features::default`] value.
    pub fn from_gates(gate: impl Fn(&str) -> Option<bool>) -> Features {
        let d = Features::default();
        let on = |name: &str, default: bool| gate(name).unwrap_or(default);
        Features {
            admin_access: on("DRAAdminAccess", d.admin_access),
            prioritized_list: on("DRAPrioritizedList", d.prioritized_list),
            partitionable_devices: on("DRAPartitionableDevices", d.partitionable_devices),
            device_taints: on("DRADeviceTaints", d.device_taints),
            consumable_capacity: on("DRAConsumableCapacity", d.consumable_capacity),
            device_binding_conditions: on(
                "DRADeviceBindingConditions",
                d.device_binding_conditions,
            ) && on(
                "DRAResourceClaimDeviceStatus",
                d.device_binding_conditions,
            ),
        }
    }

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

#[cfg(test)]
mod tests {
    use super::Features;

    #[test]
    fn gates_map_as_upstream_s_allocator_features() {
        // No answers: kube-scheduler's defaults.
        assert_eq!(Features::from_gates(|_| None), Features::default());
        let off = |names: &'static [&'static str]| {
            Features::from_gates(move |n| names.contains(&n).then_some(false))
        };
        let f = off(&["DRAPartitionableDevices"]);
        assert_eq!(
            f,
            Features {
                partitionable_devices: false,
                ..Features::default()
            }
        );
        let f = off(&["DRAConsumableCapacity"]);
        assert_eq!(
            f,
            Features {
                consumable_capacity: false,
                ..Features::default()
            }
        );
        // Binding conditions need both gates.
        assert!(!off(&["DRAResourceClaimDeviceStatus"]).device_binding_conditions);
        assert!(!off(&["DRADeviceBindingConditions"]).device_binding_conditions);
        // Every gate answered off is every feature off.
        assert_eq!(Features::from_gates(|_| Some(false)), Features::none());
    }
}
