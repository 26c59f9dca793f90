//! Conversions of the `resource.k8s.io/v1` kinds (`berth_sdk::dra`) and of
//! CSIStorageCapacity between the SDK and the WIT: to the WIT for everything the
//! host lists, and back for ResourceClaims, which a guest hands to
//! `assume-resource-claim` and `write-resource-claim-status`. Quantities travel as
//! their text, maps as lists of pairs (in the maps' order).

use super::bindings::berth::scheduler::types as w;
use super::convert;
use berth_sdk::affinity::{NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm};
use berth_sdk::dra as d;
use berth_sdk::quantity::Quantity;
use std::collections::BTreeMap;

fn selectors_to_wit(s: &[d::DeviceSelector]) -> Vec<w::DeviceSelector> {
    s.iter()
        .map(|s| w::DeviceSelector {
            expression: s.expression.clone(),
        })
        .collect()
}

fn selectors_from_wit(s: Vec<w::DeviceSelector>) -> Vec<d::DeviceSelector> {
    s.into_iter()
        .map(|s| d::DeviceSelector {
            expression: s.expression,
        })
        .collect()
}

fn opaque_to_wit(o: &d::OpaqueDeviceConfiguration) -> w::OpaqueDeviceConfiguration {
    w::OpaqueDeviceConfiguration {
        driver: o.driver.clone(),
        parameters: o.parameters.clone(),
    }
}

fn opaque_from_wit(o: w::OpaqueDeviceConfiguration) -> d::OpaqueDeviceConfiguration {
    d::OpaqueDeviceConfiguration {
        driver: o.driver,
        parameters: o.parameters,
    }
}

fn config_to_wit(c: &[d::DeviceConfiguration]) -> Vec<w::DeviceConfiguration> {
    c.iter()
        .map(|c| w::DeviceConfiguration {
            requests: c.requests.clone(),
            opaque: c.opaque.as_ref().map(opaque_to_wit),
        })
        .collect()
}

fn config_from_wit(c: Vec<w::DeviceConfiguration>) -> Vec<d::DeviceConfiguration> {
    c.into_iter()
        .map(|c| d::DeviceConfiguration {
            requests: c.requests,
            opaque: c.opaque.map(opaque_from_wit),
        })
        .collect()
}

/// A DeviceClass.
pub(crate) fn device_class_to_wit(c: &d::DeviceClass) -> w::DeviceClass {
    w::DeviceClass {
        name: c.name.clone(),
        uid: c.uid.clone(),
        selectors: selectors_to_wit(&c.selectors),
        config: config_to_wit(&c.config),
        extended_resource_name: c.extended_resource_name.clone(),
    }
}

fn effect_to_wit(e: d::DeviceTaintEffect) -> w::DeviceTaintEffect {
    match e {
        d::DeviceTaintEffect::NoSchedule => w::DeviceTaintEffect::NoSchedule,
        d::DeviceTaintEffect::NoExecute => w::DeviceTaintEffect::NoExecute,
        d::DeviceTaintEffect::None => w::DeviceTaintEffect::None,
    }
}

fn effect_from_wit(e: w::DeviceTaintEffect) -> d::DeviceTaintEffect {
    match e {
        w::DeviceTaintEffect::NoSchedule => d::DeviceTaintEffect::NoSchedule,
        w::DeviceTaintEffect::NoExecute => d::DeviceTaintEffect::NoExecute,
        w::DeviceTaintEffect::None => d::DeviceTaintEffect::None,
    }
}

fn taint_to_wit(t: &d::DeviceTaint) -> w::DeviceTaint {
    w::DeviceTaint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: effect_to_wit(t.effect),
        time_added_ms: t.time_added_ms,
    }
}

fn tolerations_to_wit(t: &[d::DeviceToleration]) -> Vec<w::DeviceToleration> {
    t.iter()
        .map(|t| w::DeviceToleration {
            key: t.key.clone(),
            operator: match t.operator {
                berth_sdk::TolerationOperator::Equal => w::TolerationOperator::Equal,
                berth_sdk::TolerationOperator::Exists => w::TolerationOperator::Exists,
            },
            value: t.value.clone(),
            effect: t.effect.map(effect_to_wit),
            toleration_seconds: t.toleration_seconds,
        })
        .collect()
}

fn tolerations_from_wit(t: Vec<w::DeviceToleration>) -> Vec<d::DeviceToleration> {
    t.into_iter()
        .map(|t| d::DeviceToleration {
            key: t.key,
            operator: match t.operator {
                w::TolerationOperator::Equal => berth_sdk::TolerationOperator::Equal,
                w::TolerationOperator::Exists => berth_sdk::TolerationOperator::Exists,
            },
            value: t.value,
            effect: t.effect.map(effect_from_wit),
            toleration_seconds: t.toleration_seconds,
        })
        .collect()
}

/// A map of quantities, as the WIT's `capacity-request` list.
fn capacity_to_wit(c: &BTreeMap<String, Quantity>) -> Vec<w::CapacityRequest> {
    c.iter()
        .map(|(name, q)| w::CapacityRequest {
            name: name.clone(),
            quantity: q.0.clone(),
        })
        .collect()
}

fn capacity_from_wit(c: Vec<w::CapacityRequest>) -> BTreeMap<String, Quantity> {
    c.into_iter()
        .map(|c| (c.name, Quantity(c.quantity)))
        .collect()
}

fn counters_to_wit(c: &BTreeMap<String, Quantity>) -> Vec<w::Counter> {
    c.iter()
        .map(|(name, q)| w::Counter {
            name: name.clone(),
            value: q.0.clone(),
        })
        .collect()
}

fn sub_request_to_wit(r: &d::DeviceSubRequest) -> w::DeviceSubRequest {
    w::DeviceSubRequest {
        name: r.name.clone(),
        device_class_name: r.device_class_name.clone(),
        selectors: selectors_to_wit(&r.selectors),
        allocation_mode: match r.allocation_mode {
            d::AllocationMode::ExactCount(n) => w::AllocationMode::ExactCount(n),
            d::AllocationMode::All => w::AllocationMode::All,
        },
        admin_access: r.admin_access,
        tolerations: tolerations_to_wit(&r.tolerations),
        capacity: capacity_to_wit(&r.capacity),
    }
}

fn sub_request_from_wit(r: w::DeviceSubRequest) -> d::DeviceSubRequest {
    d::DeviceSubRequest {
        name: r.name,
        device_class_name: r.device_class_name,
        selectors: selectors_from_wit(r.selectors),
        allocation_mode: match r.allocation_mode {
            w::AllocationMode::ExactCount(n) => d::AllocationMode::ExactCount(n),
            w::AllocationMode::All => d::AllocationMode::All,
        },
        admin_access: r.admin_access,
        tolerations: tolerations_from_wit(r.tolerations),
        capacity: capacity_from_wit(r.capacity),
    }
}

fn request_to_wit(r: &d::DeviceRequest) -> w::DeviceRequest {
    match r {
        d::DeviceRequest::Exactly(r) => w::DeviceRequest::Exactly(sub_request_to_wit(r)),
        d::DeviceRequest::FirstAvailable { name, subrequests } => {
            w::DeviceRequest::FirstAvailable((
                name.clone(),
                subrequests.iter().map(sub_request_to_wit).collect(),
            ))
        }
    }
}

fn request_from_wit(r: w::DeviceRequest) -> d::DeviceRequest {
    match r {
        w::DeviceRequest::Exactly(r) => d::DeviceRequest::Exactly(sub_request_from_wit(r)),
        w::DeviceRequest::FirstAvailable((name, subrequests)) => d::DeviceRequest::FirstAvailable {
            name,
            subrequests: subrequests.into_iter().map(sub_request_from_wit).collect(),
        },
    }
}

fn device_claim_to_wit(c: &d::DeviceClaim) -> w::DeviceClaim {
    w::DeviceClaim {
        requests: c.requests.iter().map(request_to_wit).collect(),
        constraints: c
            .constraints
            .iter()
            .map(|c| w::DeviceConstraint {
                requests: c.requests.clone(),
                match_attribute: c.match_attribute.clone(),
                distinct_attribute: c.distinct_attribute.clone(),
            })
            .collect(),
        config: config_to_wit(&c.config),
    }
}

fn device_claim_from_wit(c: w::DeviceClaim) -> d::DeviceClaim {
    d::DeviceClaim {
        requests: c.requests.into_iter().map(request_from_wit).collect(),
        constraints: c
            .constraints
            .into_iter()
            .map(|c| d::DeviceConstraint {
                requests: c.requests,
                match_attribute: c.match_attribute,
                distinct_attribute: c.distinct_attribute,
            })
            .collect(),
        config: config_from_wit(c.config),
    }
}

fn node_terms_to_wit(terms: &[NodeSelectorTerm]) -> Vec<w::NodeSelectorTerm> {
    terms.iter().map(convert::node_term_to_wit).collect()
}

/// The host keeps no other conversion of node selector terms from the WIT: only
/// a claim's allocation brings them back.
fn node_term_from_wit(t: w::NodeSelectorTerm) -> NodeSelectorTerm {
    let req = |r: w::NodeSelectorRequirement| NodeSelectorRequirement {
        key: r.key,
        operator: match r.operator {
            w::NodeSelectorOperator::In => NodeSelectorOperator::In,
            w::NodeSelectorOperator::NotIn => NodeSelectorOperator::NotIn,
            w::NodeSelectorOperator::Exists => NodeSelectorOperator::Exists,
            w::NodeSelectorOperator::DoesNotExist => NodeSelectorOperator::DoesNotExist,
            w::NodeSelectorOperator::Gt => NodeSelectorOperator::Gt,
            w::NodeSelectorOperator::Lt => NodeSelectorOperator::Lt,
        },
        values: r.values,
    };
    NodeSelectorTerm {
        match_expressions: t.match_expressions.into_iter().map(req).collect(),
        match_fields: t.match_fields.into_iter().map(req).collect(),
    }
}

fn allocation_to_wit(a: &d::AllocationResult) -> w::AllocationResult {
    w::AllocationResult {
        devices: a
            .devices
            .iter()
            .map(|r| w::DeviceRequestAllocationResult {
                request: r.request.clone(),
                driver: r.driver.clone(),
                pool: r.pool.clone(),
                device: r.device.clone(),
                admin_access: r.admin_access,
                tolerations: tolerations_to_wit(&r.tolerations),
                binding_conditions: r.binding_conditions.clone(),
                binding_failure_conditions: r.binding_failure_conditions.clone(),
                share_id: r.share_id.clone(),
                consumed_capacity: capacity_to_wit(&r.consumed_capacity),
            })
            .collect(),
        config: a
            .config
            .iter()
            .map(|c| w::DeviceAllocationConfiguration {
                source: match c.source {
                    d::AllocationConfigSource::FromClass => w::AllocationConfigSource::FromClass,
                    d::AllocationConfigSource::FromClaim => w::AllocationConfigSource::FromClaim,
                },
                requests: c.requests.clone(),
                opaque: c.opaque.as_ref().map(opaque_to_wit),
            })
            .collect(),
        node_selector: a.node_selector.as_deref().map(node_terms_to_wit),
        allocation_timestamp_ms: a.allocation_timestamp_ms,
    }
}

fn allocation_from_wit(a: w::AllocationResult) -> d::AllocationResult {
    d::AllocationResult {
        devices: a
            .devices
            .into_iter()
            .map(|r| d::DeviceRequestAllocationResult {
                request: r.request,
                driver: r.driver,
                pool: r.pool,
                device: r.device,
                admin_access: r.admin_access,
                tolerations: tolerations_from_wit(r.tolerations),
                binding_conditions: r.binding_conditions,
                binding_failure_conditions: r.binding_failure_conditions,
                share_id: r.share_id,
                consumed_capacity: capacity_from_wit(r.consumed_capacity),
            })
            .collect(),
        config: a
            .config
            .into_iter()
            .map(|c| d::DeviceAllocationConfiguration {
                source: match c.source {
                    w::AllocationConfigSource::FromClass => d::AllocationConfigSource::FromClass,
                    w::AllocationConfigSource::FromClaim => d::AllocationConfigSource::FromClaim,
                },
                requests: c.requests,
                opaque: c.opaque.map(opaque_from_wit),
            })
            .collect(),
        node_selector: a
            .node_selector
            .map(|terms| terms.into_iter().map(node_term_from_wit).collect()),
        allocation_timestamp_ms: a.allocation_timestamp_ms,
    }
}

fn claim_status_to_wit(s: &d::ResourceClaimStatus) -> w::ResourceClaimStatus {
    w::ResourceClaimStatus {
        allocation: s.allocation.as_ref().map(allocation_to_wit),
        reserved_for: s
            .reserved_for
            .iter()
            .map(|r| w::ConsumerReference {
                api_group: r.api_group.clone(),
                resource: r.resource.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
            })
            .collect(),
        devices: s
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
    }
}

fn claim_status_from_wit(s: w::ResourceClaimStatus) -> d::ResourceClaimStatus {
    d::ResourceClaimStatus {
        allocation: s.allocation.map(allocation_from_wit),
        reserved_for: s
            .reserved_for
            .into_iter()
            .map(|r| d::ConsumerReference {
                api_group: r.api_group,
                resource: r.resource,
                name: r.name,
                uid: r.uid,
            })
            .collect(),
        devices: s
            .devices
            .into_iter()
            .map(|d| d::AllocatedDeviceStatus {
                driver: d.driver,
                pool: d.pool,
                device: d.device,
                share_id: d.share_id,
                conditions: d
                    .conditions
                    .into_iter()
                    .map(|c| d::DeviceCondition {
                        type_: c.type_,
                        status: c.status,
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// A ResourceClaim.
pub(crate) fn resource_claim_to_wit(c: &d::ResourceClaim) -> w::ResourceClaim {
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
        spec: device_claim_to_wit(&c.spec),
        status: claim_status_to_wit(&c.status),
    }
}

/// A ResourceClaim a guest hands over (to assume it, or write its status).
pub(crate) fn resource_claim_from_wit(c: w::ResourceClaim) -> d::ResourceClaim {
    d::ResourceClaim {
        namespace: c.namespace,
        name: c.name,
        uid: c.uid,
        resource_version: c.resource_version,
        annotations: c.annotations.into_iter().collect(),
        controller: c.controller.map(|o| d::ControllerReference {
            api_version: o.api_version,
            kind: o.kind,
            name: o.name,
            uid: o.uid,
        }),
        terminating: c.terminating,
        spec: device_claim_from_wit(c.spec),
        status: claim_status_from_wit(c.status),
    }
}

fn attribute_to_wit(a: &d::DeviceAttribute) -> w::DeviceAttribute {
    match a {
        d::DeviceAttribute::Int(i) => w::DeviceAttribute::Int(*i),
        d::DeviceAttribute::Bool(b) => w::DeviceAttribute::Bool(*b),
        d::DeviceAttribute::String(s) => w::DeviceAttribute::String(s.clone()),
        d::DeviceAttribute::Version(v) => w::DeviceAttribute::Version(v.clone()),
    }
}

fn device_capacity_to_wit(name: &str, c: &d::DeviceCapacity) -> w::DeviceCapacity {
    w::DeviceCapacity {
        name: name.to_owned(),
        value: c.value.0.clone(),
        request_policy: c.request_policy.as_ref().map(|p| w::CapacityRequestPolicy {
            default: p.default.as_ref().map(|q| q.0.clone()),
            valid_values: p.valid_values.iter().map(|q| q.0.clone()).collect(),
            valid_range: p.valid_range.as_ref().map(|r| w::CapacityRange {
                min: r.min.0.clone(),
                max: r.max.as_ref().map(|q| q.0.clone()),
                step: r.step.as_ref().map(|q| q.0.clone()),
            }),
        }),
    }
}

fn device_to_wit(dev: &d::Device) -> w::Device {
    w::Device {
        name: dev.name.clone(),
        attributes: dev
            .attributes
            .iter()
            .map(|(k, a)| (k.clone(), attribute_to_wit(a)))
            .collect(),
        capacity: dev
            .capacity
            .iter()
            .map(|(k, c)| device_capacity_to_wit(k, c))
            .collect(),
        consumes_counters: dev
            .consumes_counters
            .iter()
            .map(|c| w::DeviceCounterConsumption {
                counter_set: c.counter_set.clone(),
                counters: counters_to_wit(&c.counters),
            })
            .collect(),
        node_name: dev.node_name.clone(),
        node_selector: dev.node_selector.as_deref().map(node_terms_to_wit),
        all_nodes: dev.all_nodes,
        taints: dev.taints.iter().map(taint_to_wit).collect(),
        binds_to_node: dev.binds_to_node,
        binding_conditions: dev.binding_conditions.clone(),
        binding_failure_conditions: dev.binding_failure_conditions.clone(),
        allow_multiple_allocations: dev.allow_multiple_allocations,
    }
}

/// A ResourceSlice.
pub(crate) fn resource_slice_to_wit(s: &d::ResourceSlice) -> w::ResourceSlice {
    w::ResourceSlice {
        name: s.name.clone(),
        driver: s.driver.clone(),
        pool: w::ResourcePool {
            name: s.pool.name.clone(),
            generation: s.pool.generation,
            resource_slice_count: s.pool.resource_slice_count,
        },
        nodes: match &s.nodes {
            d::SliceNodes::NodeName(n) => w::SliceNodes::NodeName(n.clone()),
            d::SliceNodes::NodeSelector(terms) => {
                w::SliceNodes::NodeSelector(node_terms_to_wit(terms))
            }
            d::SliceNodes::AllNodes => w::SliceNodes::AllNodes,
            d::SliceNodes::PerDevice => w::SliceNodes::PerDevice,
        },
        devices: s.devices.iter().map(device_to_wit).collect(),
        shared_counters: s
            .shared_counters
            .iter()
            .map(|c| w::CounterSet {
                name: c.name.clone(),
                counters: counters_to_wit(&c.counters),
            })
            .collect(),
    }
}

/// A DeviceTaintRule.
pub(crate) fn device_taint_rule_to_wit(r: &d::DeviceTaintRule) -> w::DeviceTaintRule {
    w::DeviceTaintRule {
        name: r.name.clone(),
        selector: w::DeviceTaintSelector {
            driver: r.selector.driver.clone(),
            pool: r.selector.pool.clone(),
            device: r.selector.device.clone(),
        },
        taint: taint_to_wit(&r.taint),
    }
}

/// A CSIStorageCapacity.
pub(crate) fn csi_storage_capacity_to_wit(
    c: &berth_sdk::CsiStorageCapacity,
) -> w::CsiStorageCapacity {
    w::CsiStorageCapacity {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
        storage_class_name: c.storage_class_name.clone(),
        node_topology: c.node_topology.as_ref().map(convert::selector_to_wit),
        capacity: c.capacity,
        maximum_volume_size: c.maximum_volume_size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(key: &str, operator: NodeSelectorOperator, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement {
                key: key.into(),
                operator,
                values: values.iter().map(|v| (*v).to_owned()).collect(),
            }],
            match_fields: vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: NodeSelectorOperator::In,
                values: vec!["n1".into()],
            }],
        }
    }

    fn sub_request(name: &str, mode: d::AllocationMode) -> d::DeviceSubRequest {
        d::DeviceSubRequest {
            name: name.into(),
            device_class_name: "gpu.example.com".into(),
            selectors: vec![d::DeviceSelector {
                expression: "device.attributes[\"gpu.example.com\"].model == \"a100\"".into(),
            }],
            allocation_mode: mode,
            admin_access: true,
            tolerations: vec![
                d::DeviceToleration {
                    key: "maintenance".into(),
                    operator: berth_sdk::TolerationOperator::Equal,
                    value: "soon".into(),
                    effect: Some(d::DeviceTaintEffect::NoExecute),
                    toleration_seconds: Some(300),
                },
                d::DeviceToleration {
                    key: String::new(),
                    operator: berth_sdk::TolerationOperator::Exists,
                    value: String::new(),
                    effect: None,
                    toleration_seconds: None,
                },
            ],
            capacity: BTreeMap::from([
                ("memory".to_owned(), Quantity("40Gi".into())),
                ("cores".to_owned(), Quantity("1500m".into())),
            ]),
        }
    }

    /// A claim with every field set, each kind of every enum and variant somewhere.
    fn full_claim() -> d::ResourceClaim {
        let opaque = d::OpaqueDeviceConfiguration {
            driver: "gpu.example.com".into(),
            parameters: r#"{"sharing":"timeSlicing"}"#.into(),
        };
        d::ResourceClaim {
            namespace: "ml".into(),
            name: "trainer-gpu-x7k2q".into(),
            uid: "c-uid".into(),
            resource_version: "42".into(),
            annotations: BTreeMap::from([("team".to_owned(), "vision".to_owned())]),
            controller: Some(d::ControllerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: "trainer".into(),
                uid: "p-uid".into(),
            }),
            terminating: true,
            spec: d::DeviceClaim {
                requests: vec![
                    d::DeviceRequest::Exactly(sub_request("gpu", d::AllocationMode::ExactCount(2))),
                    d::DeviceRequest::FirstAvailable {
                        name: "nic".into(),
                        subrequests: vec![
                            sub_request("fast", d::AllocationMode::All),
                            sub_request("slow", d::AllocationMode::ExactCount(1)),
                        ],
                    },
                ],
                constraints: vec![d::DeviceConstraint {
                    requests: vec!["gpu".into(), "nic".into()],
                    match_attribute: Some("gpu.example.com/numa".into()),
                    distinct_attribute: Some("gpu.example.com/index".into()),
                }],
                config: vec![d::DeviceConfiguration {
                    requests: vec!["gpu".into()],
                    opaque: Some(opaque.clone()),
                }],
            },
            status: d::ResourceClaimStatus {
                allocation: Some(d::AllocationResult {
                    devices: vec![d::DeviceRequestAllocationResult {
                        request: "nic/fast".into(),
                        driver: "nic.example.com".into(),
                        pool: "n1".into(),
                        device: "eth0".into(),
                        admin_access: Some(false),
                        tolerations: sub_request("t", d::AllocationMode::All).tolerations,
                        binding_conditions: vec!["Attached".into()],
                        binding_failure_conditions: vec!["AttachFailed".into()],
                        share_id: Some("share-1".into()),
                        consumed_capacity: BTreeMap::from([(
                            "bandwidth".to_owned(),
                            Quantity("10G".into()),
                        )]),
                    }],
                    config: vec![
                        d::DeviceAllocationConfiguration {
                            source: d::AllocationConfigSource::FromClass,
                            requests: Vec::new(),
                            opaque: Some(opaque.clone()),
                        },
                        d::DeviceAllocationConfiguration {
                            source: d::AllocationConfigSource::FromClaim,
                            requests: vec!["gpu".into()],
                            opaque: None,
                        },
                    ],
                    node_selector: Some(vec![
                        term("zone", NodeSelectorOperator::In, &["a", "b"]),
                        term("gpu", NodeSelectorOperator::Exists, &[]),
                        term("old", NodeSelectorOperator::DoesNotExist, &[]),
                        term("zone", NodeSelectorOperator::NotIn, &["c"]),
                        term("cores", NodeSelectorOperator::Gt, &["8"]),
                        term("cores", NodeSelectorOperator::Lt, &["64"]),
                    ]),
                    allocation_timestamp_ms: Some(1_700_000_000_123),
                }),
                reserved_for: vec![d::ConsumerReference::pod("trainer", "p-uid")],
                devices: vec![d::AllocatedDeviceStatus {
                    driver: "nic.example.com".into(),
                    pool: "n1".into(),
                    device: "eth0".into(),
                    share_id: Some("share-1".into()),
                    conditions: vec![
                        d::DeviceCondition {
                            type_: "Attached".into(),
                            status: true,
                        },
                        d::DeviceCondition {
                            type_: "AttachFailed".into(),
                            status: false,
                        },
                    ],
                }],
            },
        }
    }

    #[test]
    fn a_claim_with_every_field_set_comes_back_as_it_went() {
        let claim = full_claim();
        let back = resource_claim_from_wit(resource_claim_to_wit(&claim));
        assert_eq!(back, claim);
        // Quantities keep their text, not only their value.
        let d::DeviceRequest::Exactly(gpu) = &back.spec.requests[0] else {
            panic!(
                "the first request is `exactly`: {:?}",
                back.spec.requests[0]
            );
        };
        assert_eq!(gpu.capacity["cores"].0, "1500m");
        // An unallocated claim with nothing optional set comes back too.
        let bare = d::ResourceClaim {
            namespace: "ml".into(),
            name: "bare".into(),
            ..d::ResourceClaim::default()
        };
        assert_eq!(resource_claim_from_wit(resource_claim_to_wit(&bare)), bare);
    }

    #[test]
    fn maps_travel_as_lists_in_their_order() {
        let w = resource_claim_to_wit(&full_claim());
        let w::DeviceRequest::Exactly(gpu) = &w.spec.requests[0] else {
            panic!("the first request is `exactly`");
        };
        let names: Vec<&str> = gpu.capacity.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["cores", "memory"]);
        assert_eq!(w.annotations, [("team".to_owned(), "vision".to_owned())]);
        let w::DeviceRequest::FirstAvailable((name, subs)) = &w.spec.requests[1] else {
            panic!("the second request is `firstAvailable`");
        };
        assert_eq!(name, "nic");
        assert!(matches!(subs[0].allocation_mode, w::AllocationMode::All));
    }

    #[test]
    fn a_slice_its_devices_and_a_taint_rule_reach_the_wit_whole() {
        let device = d::Device {
            name: "gpu-0".into(),
            attributes: BTreeMap::from([
                (
                    "model".to_owned(),
                    d::DeviceAttribute::String("a100".into()),
                ),
                ("index".to_owned(), d::DeviceAttribute::Int(0)),
                ("healthy".to_owned(), d::DeviceAttribute::Bool(true)),
                (
                    "driverVersion".to_owned(),
                    d::DeviceAttribute::Version("1.2.3".into()),
                ),
            ]),
            capacity: BTreeMap::from([(
                "memory".to_owned(),
                d::DeviceCapacity {
                    value: Quantity("80Gi".into()),
                    request_policy: Some(d::CapacityRequestPolicy {
                        default: Some(Quantity("1Gi".into())),
                        valid_values: vec![Quantity("1Gi".into()), Quantity("2Gi".into())],
                        valid_range: Some(d::CapacityRange {
                            min: Quantity("1Gi".into()),
                            max: Some(Quantity("80Gi".into())),
                            step: Some(Quantity("1Gi".into())),
                        }),
                    }),
                },
            )]),
            consumes_counters: vec![d::DeviceCounterConsumption {
                counter_set: "gpu-0-set".into(),
                counters: BTreeMap::from([("memory".to_owned(), Quantity("80Gi".into()))]),
            }],
            node_name: None,
            node_selector: Some(vec![term("zone", NodeSelectorOperator::In, &["a"])]),
            all_nodes: false,
            taints: vec![d::DeviceTaint {
                key: "maintenance".into(),
                value: "soon".into(),
                effect: d::DeviceTaintEffect::None,
                time_added_ms: Some(5),
            }],
            binds_to_node: true,
            binding_conditions: vec!["Ready".into()],
            binding_failure_conditions: vec!["Failed".into()],
            allow_multiple_allocations: true,
        };
        let slice = d::ResourceSlice {
            name: "n1-gpu".into(),
            driver: "gpu.example.com".into(),
            pool: d::ResourcePool {
                name: "n1".into(),
                generation: 3,
                resource_slice_count: 2,
            },
            nodes: d::SliceNodes::PerDevice,
            devices: vec![device],
            shared_counters: vec![d::CounterSet {
                name: "gpu-0-set".into(),
                counters: BTreeMap::from([("memory".to_owned(), Quantity("80Gi".into()))]),
            }],
        };
        let w = resource_slice_to_wit(&slice);
        assert_eq!(
            (
                w.pool.name.as_str(),
                w.pool.generation,
                w.pool.resource_slice_count
            ),
            ("n1", 3, 2)
        );
        assert!(matches!(w.nodes, w::SliceNodes::PerDevice));
        let dev = &w.devices[0];
        let attributes: Vec<&str> = dev.attributes.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(attributes, ["driverVersion", "healthy", "index", "model"]);
        assert!(matches!(&dev.attributes[0].1, w::DeviceAttribute::Version(v) if v == "1.2.3"));
        let policy = dev.capacity[0].request_policy.as_ref().unwrap();
        assert_eq!(
            (
                dev.capacity[0].name.as_str(),
                dev.capacity[0].value.as_str(),
                policy.default.as_deref(),
                policy.valid_values.clone(),
                policy.valid_range.as_ref().unwrap().step.as_deref()
            ),
            (
                "memory",
                "80Gi",
                Some("1Gi"),
                vec!["1Gi".to_owned(), "2Gi".to_owned()],
                Some("1Gi")
            )
        );
        assert_eq!(dev.consumes_counters[0].counters[0].value, "80Gi");
        assert_eq!(
            dev.node_selector.as_ref().unwrap()[0].match_expressions[0].key,
            "zone"
        );
        assert!(matches!(dev.taints[0].effect, w::DeviceTaintEffect::None));
        assert!(dev.binds_to_node && dev.allow_multiple_allocations && !dev.all_nodes);
        assert_eq!(w.shared_counters[0].counters[0].name, "memory");
        for (nodes, wanted) in [
            (d::SliceNodes::NodeName("n1".into()), "node-name"),
            (d::SliceNodes::AllNodes, "all-nodes"),
            (
                d::SliceNodes::NodeSelector(vec![term("zone", NodeSelectorOperator::In, &["a"])]),
                "node-selector",
            ),
        ] {
            let got = match resource_slice_to_wit(&d::ResourceSlice {
                nodes,
                ..d::ResourceSlice::default()
            })
            .nodes
            {
                w::SliceNodes::NodeName(n) if n == "n1" => "node-name",
                w::SliceNodes::AllNodes => "all-nodes",
                w::SliceNodes::NodeSelector(t) if t.len() == 1 => "node-selector",
                _ => "wrong",
            };
            assert_eq!(got, wanted);
        }

        let rule = d::DeviceTaintRule {
            name: "drain-n1".into(),
            selector: d::DeviceTaintSelector {
                driver: Some("gpu.example.com".into()),
                pool: Some("n1".into()),
                device: None,
            },
            taint: d::DeviceTaint {
                key: "drain".into(),
                value: String::new(),
                effect: d::DeviceTaintEffect::NoSchedule,
                time_added_ms: None,
            },
        };
        let w = device_taint_rule_to_wit(&rule);
        assert_eq!(w.selector.pool.as_deref(), Some("n1"));
        assert!(w.selector.device.is_none());
        assert!(matches!(w.taint.effect, w::DeviceTaintEffect::NoSchedule));
    }

    #[test]
    fn a_class_and_a_storage_capacity_reach_the_wit_whole() {
        let class = d::DeviceClass {
            name: "gpu.example.com".into(),
            uid: "u".into(),
            selectors: vec![d::DeviceSelector {
                expression: "device.driver == \"gpu.example.com\"".into(),
            }],
            config: vec![d::DeviceConfiguration {
                requests: Vec::new(),
                opaque: Some(d::OpaqueDeviceConfiguration {
                    driver: "gpu.example.com".into(),
                    parameters: "{}".into(),
                }),
            }],
            extended_resource_name: Some("example.com/gpu".into()),
        };
        let w = device_class_to_wit(&class);
        assert_eq!(w.selectors[0].expression, class.selectors[0].expression);
        assert_eq!(w.config[0].opaque.as_ref().unwrap().parameters, "{}");
        assert_eq!(w.extended_resource_name.as_deref(), Some("example.com/gpu"));

        let capacity = berth_sdk::CsiStorageCapacity {
            namespace: "kube-system".into(),
            name: "csisc-1".into(),
            storage_class_name: "fast".into(),
            node_topology: Some(berth_sdk::affinity::LabelSelector {
                match_labels: BTreeMap::from([(
                    "topology.kubernetes.io/zone".to_owned(),
                    "a".to_owned(),
                )]),
                match_expressions: Vec::new(),
            }),
            capacity: Some(100 << 30),
            maximum_volume_size: None,
        };
        let w = csi_storage_capacity_to_wit(&capacity);
        assert_eq!(
            (
                w.namespace.as_str(),
                w.name.as_str(),
                w.storage_class_name.as_str()
            ),
            ("kube-system", "csisc-1", "fast")
        );
        assert_eq!(w.capacity, Some(100 << 30));
        assert_eq!(w.maximum_volume_size, None);
        assert_eq!(
            w.node_topology.unwrap().match_labels,
            [("topology.kubernetes.io/zone".to_owned(), "a".to_owned())]
        );
    }
}
