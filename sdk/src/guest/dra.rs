//! The WIT `dra` interface on the guest side: its calls, and the resource.k8s.io
//! records of the WIT package as the SDK's [`crate::dra`] types and back (a claim
//! travels both ways: the host lists it, the plugin assumes and writes it).

use super::wit::berth::scheduler::dra as host;
use super::{node_term_from_wit, w};
use crate::affinity as a;
use crate::dra as sdk;
use crate::quantity::Quantity;
use crate::types::TolerationOperator;

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

fn quantities(list: Vec<(String, String)>) -> std::collections::BTreeMap<String, Quantity> {
    list.into_iter().map(|(k, v)| (k, Quantity(v))).collect()
}

fn selectors(list: Vec<w::DeviceSelector>) -> Vec<sdk::DeviceSelector> {
    list.into_iter()
        .map(|s| sdk::DeviceSelector {
            expression: s.expression,
        })
        .collect()
}

fn opaque_from_wit(o: w::OpaqueDeviceConfiguration) -> sdk::OpaqueDeviceConfiguration {
    sdk::OpaqueDeviceConfiguration {
        driver: o.driver,
        parameters: o.parameters,
    }
}

fn opaque_to_wit(o: &sdk::OpaqueDeviceConfiguration) -> w::OpaqueDeviceConfiguration {
    w::OpaqueDeviceConfiguration {
        driver: o.driver.clone(),
        parameters: o.parameters.clone(),
    }
}

fn config_from_wit(c: w::DeviceConfiguration) -> sdk::DeviceConfiguration {
    sdk::DeviceConfiguration {
        requests: c.requests,
        opaque: c.opaque.map(opaque_from_wit),
    }
}

fn config_to_wit(c: &sdk::DeviceConfiguration) -> w::DeviceConfiguration {
    w::DeviceConfiguration {
        requests: c.requests.clone(),
        opaque: c.opaque.as_ref().map(opaque_to_wit),
    }
}

pub(super) fn class_from_wit(c: w::DeviceClass) -> sdk::DeviceClass {
    sdk::DeviceClass {
        name: c.name,
        uid: c.uid,
        selectors: selectors(c.selectors),
        config: c.config.into_iter().map(config_from_wit).collect(),
        extended_resource_name: c.extended_resource_name,
    }
}

fn effect_from_wit(e: w::DeviceTaintEffect) -> sdk::DeviceTaintEffect {
    match e {
        w::DeviceTaintEffect::NoSchedule => sdk::DeviceTaintEffect::NoSchedule,
        w::DeviceTaintEffect::NoExecute => sdk::DeviceTaintEffect::NoExecute,
        w::DeviceTaintEffect::None => sdk::DeviceTaintEffect::None,
    }
}

fn effect_to_wit(e: sdk::DeviceTaintEffect) -> w::DeviceTaintEffect {
    match e {
        sdk::DeviceTaintEffect::NoSchedule => w::DeviceTaintEffect::NoSchedule,
        sdk::DeviceTaintEffect::NoExecute => w::DeviceTaintEffect::NoExecute,
        sdk::DeviceTaintEffect::None => w::DeviceTaintEffect::None,
    }
}

fn taint_from_wit(t: w::DeviceTaint) -> sdk::DeviceTaint {
    sdk::DeviceTaint {
        key: t.key,
        value: t.value,
        effect: effect_from_wit(t.effect),
        time_added_ms: t.time_added_ms,
    }
}

fn toleration_from_wit(t: w::DeviceToleration) -> sdk::DeviceToleration {
    sdk::DeviceToleration {
        key: t.key,
        operator: match t.operator {
            w::TolerationOperator::Equal => TolerationOperator::Equal,
            w::TolerationOperator::Exists => TolerationOperator::Exists,
        },
        value: t.value,
        effect: t.effect.map(effect_from_wit),
        toleration_seconds: t.toleration_seconds,
    }
}

fn toleration_to_wit(t: &sdk::DeviceToleration) -> w::DeviceToleration {
    w::DeviceToleration {
        key: t.key.clone(),
        operator: match t.operator {
            TolerationOperator::Equal => w::TolerationOperator::Equal,
            TolerationOperator::Exists => w::TolerationOperator::Exists,
        },
        value: t.value.clone(),
        effect: t.effect.map(effect_to_wit),
        toleration_seconds: t.toleration_seconds,
    }
}

fn capacity_requests_from_wit(list: Vec<w::CapacityRequest>) -> sdk::CapacityRequests {
    quantities(list.into_iter().map(|c| (c.name, c.quantity)).collect())
}

fn capacity_requests_to_wit(
    map: &std::collections::BTreeMap<String, Quantity>,
) -> Vec<w::CapacityRequest> {
    map.iter()
        .map(|(name, q)| w::CapacityRequest {
            name: name.clone(),
            quantity: q.0.clone(),
        })
        .collect()
}

fn sub_request_from_wit(r: w::DeviceSubRequest) -> sdk::DeviceSubRequest {
    sdk::DeviceSubRequest {
        name: r.name,
        device_class_name: r.device_class_name,
        selectors: selectors(r.selectors),
        allocation_mode: match r.allocation_mode {
            w::AllocationMode::ExactCount(n) => sdk::AllocationMode::ExactCount(n),
            w::AllocationMode::All => sdk::AllocationMode::All,
        },
        admin_access: r.admin_access,
        tolerations: r.tolerations.into_iter().map(toleration_from_wit).collect(),
        capacity: capacity_requests_from_wit(r.capacity),
    }
}

fn sub_request_to_wit(r: &sdk::DeviceSubRequest) -> w::DeviceSubRequest {
    w::DeviceSubRequest {
        name: r.name.clone(),
        device_class_name: r.device_class_name.clone(),
        selectors: r
            .selectors
            .iter()
            .map(|s| w::DeviceSelector {
                expression: s.expression.clone(),
            })
            .collect(),
        allocation_mode: match r.allocation_mode {
            sdk::AllocationMode::ExactCount(n) => w::AllocationMode::ExactCount(n),
            sdk::AllocationMode::All => w::AllocationMode::All,
        },
        admin_access: r.admin_access,
        tolerations: r.tolerations.iter().map(toleration_to_wit).collect(),
        capacity: capacity_requests_to_wit(&r.capacity),
    }
}

fn claim_spec_from_wit(c: w::DeviceClaim) -> sdk::DeviceClaim {
    sdk::DeviceClaim {
        requests: c
            .requests
            .into_iter()
            .map(|r| match r {
                w::DeviceRequest::Exactly(r) => {
                    sdk::DeviceRequest::Exactly(sub_request_from_wit(r))
                }
                w::DeviceRequest::FirstAvailable((name, subs)) => {
                    sdk::DeviceRequest::FirstAvailable {
                        name,
                        subrequests: subs.into_iter().map(sub_request_from_wit).collect(),
                    }
                }
            })
            .collect(),
        constraints: c
            .constraints
            .into_iter()
            .map(|c| sdk::DeviceConstraint {
                requests: c.requests,
                match_attribute: c.match_attribute,
                distinct_attribute: c.distinct_attribute,
            })
            .collect(),
        config: c.config.into_iter().map(config_from_wit).collect(),
    }
}

fn claim_spec_to_wit(c: &sdk::DeviceClaim) -> w::DeviceClaim {
    w::DeviceClaim {
        requests: c
            .requests
            .iter()
            .map(|r| match r {
                sdk::DeviceRequest::Exactly(r) => w::DeviceRequest::Exactly(sub_request_to_wit(r)),
                sdk::DeviceRequest::FirstAvailable { name, subrequests } => {
                    w::DeviceRequest::FirstAvailable((
                        name.clone(),
                        subrequests.iter().map(sub_request_to_wit).collect(),
                    ))
                }
            })
            .collect(),
        constraints: c
            .constraints
            .iter()
            .map(|c| w::DeviceConstraint {
                requests: c.requests.clone(),
                match_attribute: c.match_attribute.clone(),
                distinct_attribute: c.distinct_attribute.clone(),
            })
            .collect(),
        config: c.config.iter().map(config_to_wit).collect(),
    }
}

fn source_from_wit(s: w::AllocationConfigSource) -> sdk::AllocationConfigSource {
    match s {
        w::AllocationConfigSource::FromClass => sdk::AllocationConfigSource::FromClass,
        w::AllocationConfigSource::FromClaim => sdk::AllocationConfigSource::FromClaim,
    }
}

fn source_to_wit(s: sdk::AllocationConfigSource) -> w::AllocationConfigSource {
    match s {
        sdk::AllocationConfigSource::FromClass => w::AllocationConfigSource::FromClass,
        sdk::AllocationConfigSource::FromClaim => w::AllocationConfigSource::FromClaim,
    }
}

fn node_term_to_wit(t: &a::NodeSelectorTerm) -> w::NodeSelectorTerm {
    let req = |r: &a::NodeSelectorRequirement| w::NodeSelectorRequirement {
        key: r.key.clone(),
        operator: match r.operator {
            a::NodeSelectorOperator::In => w::NodeSelectorOperator::In,
            a::NodeSelectorOperator::NotIn => w::NodeSelectorOperator::NotIn,
            a::NodeSelectorOperator::Exists => w::NodeSelectorOperator::Exists,
            a::NodeSelectorOperator::DoesNotExist => w::NodeSelectorOperator::DoesNotExist,
            a::NodeSelectorOperator::Gt => w::NodeSelectorOperator::Gt,
            a::NodeSelectorOperator::Lt => w::NodeSelectorOperator::Lt,
        },
        values: r.values.clone(),
    };
    w::NodeSelectorTerm {
        match_expressions: t.match_expressions.iter().map(req).collect(),
        match_fields: t.match_fields.iter().map(req).collect(),
    }
}

fn terms_from_wit(terms: Vec<w::NodeSelectorTerm>) -> Vec<a::NodeSelectorTerm> {
    terms.into_iter().map(node_term_from_wit).collect()
}

fn allocation_from_wit(r: w::AllocationResult) -> sdk::AllocationResult {
    sdk::AllocationResult {
        devices: r
            .devices
            .into_iter()
            .map(|d| sdk::DeviceRequestAllocationResult {
                request: d.request,
                driver: d.driver,
                pool: d.pool,
                device: d.device,
                admin_access: d.admin_access,
                tolerations: d.tolerations.into_iter().map(toleration_from_wit).collect(),
                binding_conditions: d.binding_conditions,
                binding_failure_conditions: d.binding_failure_conditions,
                share_id: d.share_id,
                consumed_capacity: capacity_requests_from_wit(d.consumed_capacity),
            })
            .collect(),
        config: r
            .config
            .into_iter()
            .map(|c| sdk::DeviceAllocationConfiguration {
                source: source_from_wit(c.source),
                requests: c.requests,
                opaque: c.opaque.map(opaque_from_wit),
            })
            .collect(),
        node_selector: r.node_selector.map(terms_from_wit),
        allocation_timestamp_ms: r.allocation_timestamp_ms,
    }
}

fn allocation_to_wit(r: &sdk::AllocationResult) -> w::AllocationResult {
    w::AllocationResult {
        devices: r
            .devices
            .iter()
            .map(|d| w::DeviceRequestAllocationResult {
                request: d.request.clone(),
                driver: d.driver.clone(),
                pool: d.pool.clone(),
                device: d.device.clone(),
                admin_access: d.admin_access,
                tolerations: d.tolerations.iter().map(toleration_to_wit).collect(),
                binding_conditions: d.binding_conditions.clone(),
                binding_failure_conditions: d.binding_failure_conditions.clone(),
                share_id: d.share_id.clone(),
                consumed_capacity: capacity_requests_to_wit(&d.consumed_capacity),
            })
            .collect(),
        config: r
            .config
            .iter()
            .map(|c| w::DeviceAllocationConfiguration {
                source: source_to_wit(c.source),
                requests: c.requests.clone(),
                opaque: c.opaque.as_ref().map(opaque_to_wit),
            })
            .collect(),
        node_selector: r
            .node_selector
            .as_ref()
            .map(|terms| terms.iter().map(node_term_to_wit).collect()),
        allocation_timestamp_ms: r.allocation_timestamp_ms,
    }
}

pub(super) fn claim_from_wit(c: w::ResourceClaim) -> sdk::ResourceClaim {
    sdk::ResourceClaim {
        namespace: c.namespace,
        name: c.name,
        uid: c.uid,
        resource_version: c.resource_version,
        annotations: c.annotations.into_iter().collect(),
        controller: c.controller.map(|o| sdk::ControllerReference {
            api_version: o.api_version,
            kind: o.kind,
            name: o.name,
            uid: o.uid,
        }),
        terminating: c.terminating,
        spec: claim_spec_from_wit(c.spec),
        status: sdk::ResourceClaimStatus {
            allocation: c.status.allocation.map(allocation_from_wit),
            reserved_for: c
                .status
                .reserved_for
                .into_iter()
                .map(|r| sdk::ConsumerReference {
                    api_group: r.api_group,
                    resource: r.resource,
                    name: r.name,
                    uid: r.uid,
                })
                .collect(),
            devices: c
                .status
                .devices
                .into_iter()
                .map(|d| sdk::AllocatedDeviceStatus {
                    driver: d.driver,
                    pool: d.pool,
                    device: d.device,
                    share_id: d.share_id,
                    conditions: d
                        .conditions
                        .into_iter()
                        .map(|c| sdk::DeviceCondition {
                            type_: c.type_,
                            status: c.status,
                        })
                        .collect(),
                })
                .collect(),
        },
    }
}

pub(super) fn claim_to_wit(c: &sdk::ResourceClaim) -> w::ResourceClaim {
    w::ResourceClaim {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
        uid: c.uid.clone(),
        resource_version: c.resource_version.clone(),
        annotations: c
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        controller: c.controller.as_ref().map(|o| w::ControllerReference {
            api_version: o.api_version.clone(),
            kind: o.kind.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
        }),
        terminating: c.terminating,
        spec: claim_spec_to_wit(&c.spec),
        status: w::ResourceClaimStatus {
            allocation: c.status.allocation.as_ref().map(allocation_to_wit),
            reserved_for: c
                .status
                .reserved_for
                .iter()
                .map(|r| w::ConsumerReference {
                    api_group: r.api_group.clone(),
                    resource: r.resource.clone(),
                    name: r.name.clone(),
                    uid: r.uid.clone(),
                })
                .collect(),
            devices: c
                .status
                .devices
                .iter()
                .map(|d| w::AllocatedDeviceStatus {
                    driver: d.driver.clone(),
                    pool: d.pool.clone(),
                    device: d.device.clone(),
                    share_id: d.share_id.clone(),
                    conditions: d
                        .conditions
                        .iter()
                        .map(|c| w::DeviceCondition {
                            type_: c.type_.clone(),
                            status: c.status,
                        })
                        .collect(),
                })
                .collect(),
        },
    }
}

fn counters(list: Vec<w::Counter>) -> std::collections::BTreeMap<String, Quantity> {
    quantities(list.into_iter().map(|c| (c.name, c.value)).collect())
}

fn device_from_wit(d: w::Device) -> sdk::Device {
    sdk::Device {
        name: d.name,
        attributes: d
            .attributes
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    w::DeviceAttribute::Int(i) => sdk::DeviceAttribute::Int(i),
                    w::DeviceAttribute::Bool(b) => sdk::DeviceAttribute::Bool(b),
                    w::DeviceAttribute::String(s) => sdk::DeviceAttribute::String(s),
                    w::DeviceAttribute::Version(s) => sdk::DeviceAttribute::Version(s),
                };
                (k, v)
            })
            .collect(),
        capacity: d
            .capacity
            .into_iter()
            .map(|c| {
                let policy = c.request_policy.map(|p| sdk::CapacityRequestPolicy {
                    default: p.default.map(Quantity),
                    valid_values: p.valid_values.into_iter().map(Quantity).collect(),
                    valid_range: p.valid_range.map(|r| sdk::CapacityRange {
                        min: Quantity(r.min),
                        max: r.max.map(Quantity),
                        step: r.step.map(Quantity),
                    }),
                });
                (
                    c.name,
                    sdk::DeviceCapacity {
                        value: Quantity(c.value),
                        request_policy: policy,
                    },
                )
            })
            .collect(),
        consumes_counters: d
            .consumes_counters
            .into_iter()
            .map(|c| sdk::DeviceCounterConsumption {
                counter_set: c.counter_set,
                counters: counters(c.counters),
            })
            .collect(),
        node_name: d.node_name,
        node_selector: d.node_selector.map(terms_from_wit),
        all_nodes: d.all_nodes,
        taints: d.taints.into_iter().map(taint_from_wit).collect(),
        binds_to_node: d.binds_to_node,
        binding_conditions: d.binding_conditions,
        binding_failure_conditions: d.binding_failure_conditions,
        allow_multiple_allocations: d.allow_multiple_allocations,
    }
}

pub(super) fn slice_from_wit(s: w::ResourceSlice) -> sdk::ResourceSlice {
    sdk::ResourceSlice {
        name: s.name,
        driver: s.driver,
        pool: sdk::ResourcePool {
            name: s.pool.name,
            generation: s.pool.generation,
            resource_slice_count: s.pool.resource_slice_count,
        },
        nodes: match s.nodes {
            w::SliceNodes::NodeName(n) => sdk::SliceNodes::NodeName(n),
            w::SliceNodes::NodeSelector(terms) => {
                sdk::SliceNodes::NodeSelector(terms_from_wit(terms))
            }
            w::SliceNodes::AllNodes => sdk::SliceNodes::AllNodes,
            w::SliceNodes::PerDevice => sdk::SliceNodes::PerDevice,
        },
        devices: s.devices.into_iter().map(device_from_wit).collect(),
        shared_counters: s
            .shared_counters
            .into_iter()
            .map(|c| sdk::CounterSet {
                name: c.name,
                counters: counters(c.counters),
            })
            .collect(),
    }
}
