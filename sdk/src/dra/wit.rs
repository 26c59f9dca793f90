//! The resource.k8s.io records of the WIT package as the SDK's [`crate::dra`] types
//! and back, written once for both bindings that carry them: the guest's
//! (wit-bindgen) and the host's (wasmtime), whose generated types have the same
//! names and shapes. Each side expands [`dra_wit_conversions!`] in a module where
//! `w` names its bindings' `types` interface.

/// Expands to the conversions between the WIT package's resource.k8s.io records
/// (`w::...`, which the caller's module names) and [`crate::dra`]'s types, and the
/// node selector terms both use.
#[doc(hidden)]
#[macro_export]
macro_rules! dra_wit_conversions {
    () => {
        #[allow(unused_imports)]
        use $crate::affinity as a;
        #[allow(unused_imports)]
        use $crate::dra as sdk;
        #[allow(unused_imports)]
        use $crate::quantity::Quantity;
        #[allow(unused_imports)]
        use $crate::types::TolerationOperator;

        pub(crate) fn quantities(
            list: Vec<(String, String)>,
        ) -> ::std::collections::BTreeMap<String, Quantity> {
            list.into_iter().map(|(k, v)| (k, Quantity(v))).collect()
        }

        pub(crate) fn selectors(list: Vec<w::DeviceSelector>) -> Vec<sdk::DeviceSelector> {
            list.into_iter()
                .map(|s| sdk::DeviceSelector {
                    expression: s.expression,
                })
                .collect()
        }

        pub(crate) fn opaque_from_wit(
            o: w::OpaqueDeviceConfiguration,
        ) -> sdk::OpaqueDeviceConfiguration {
            sdk::OpaqueDeviceConfiguration {
                driver: o.driver,
                parameters: o.parameters,
            }
        }

        pub(crate) fn opaque_to_wit(
            o: &sdk::OpaqueDeviceConfiguration,
        ) -> w::OpaqueDeviceConfiguration {
            w::OpaqueDeviceConfiguration {
                driver: o.driver.clone(),
                parameters: o.parameters.clone(),
            }
        }

        pub(crate) fn config_from_wit(c: w::DeviceConfiguration) -> sdk::DeviceConfiguration {
            sdk::DeviceConfiguration {
                requests: c.requests,
                opaque: c.opaque.map(opaque_from_wit),
            }
        }

        pub(crate) fn config_to_wit(c: &sdk::DeviceConfiguration) -> w::DeviceConfiguration {
            w::DeviceConfiguration {
                requests: c.requests.clone(),
                opaque: c.opaque.as_ref().map(opaque_to_wit),
            }
        }

        pub(crate) fn class_from_wit(c: w::DeviceClass) -> sdk::DeviceClass {
            sdk::DeviceClass {
                name: c.name,
                uid: c.uid,
                selectors: selectors(c.selectors),
                config: c.config.into_iter().map(config_from_wit).collect(),
                extended_resource_name: c.extended_resource_name,
            }
        }

        pub(crate) fn effect_from_wit(e: w::DeviceTaintEffect) -> sdk::DeviceTaintEffect {
            match e {
                w::DeviceTaintEffect::NoSchedule => sdk::DeviceTaintEffect::NoSchedule,
                w::DeviceTaintEffect::NoExecute => sdk::DeviceTaintEffect::NoExecute,
                w::DeviceTaintEffect::None => sdk::DeviceTaintEffect::None,
            }
        }

        pub(crate) fn effect_to_wit(e: sdk::DeviceTaintEffect) -> w::DeviceTaintEffect {
            match e {
                sdk::DeviceTaintEffect::NoSchedule => w::DeviceTaintEffect::NoSchedule,
                sdk::DeviceTaintEffect::NoExecute => w::DeviceTaintEffect::NoExecute,
                sdk::DeviceTaintEffect::None => w::DeviceTaintEffect::None,
            }
        }

        pub(crate) fn taint_from_wit(t: w::DeviceTaint) -> sdk::DeviceTaint {
            sdk::DeviceTaint {
                key: t.key,
                value: t.value,
                effect: effect_from_wit(t.effect),
                time_added_ms: t.time_added_ms,
            }
        }

        pub(crate) fn toleration_from_wit(t: w::DeviceToleration) -> sdk::DeviceToleration {
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

        pub(crate) fn toleration_to_wit(t: &sdk::DeviceToleration) -> w::DeviceToleration {
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

        pub(crate) fn capacity_requests_from_wit(
            list: Vec<w::CapacityRequest>,
        ) -> sdk::CapacityRequests {
            quantities(list.into_iter().map(|c| (c.name, c.quantity)).collect())
        }

        pub(crate) fn capacity_requests_to_wit(
            map: &::std::collections::BTreeMap<String, Quantity>,
        ) -> Vec<w::CapacityRequest> {
            map.iter()
                .map(|(name, q)| w::CapacityRequest {
                    name: name.clone(),
                    quantity: q.0.clone(),
                })
                .collect()
        }

        pub(crate) fn sub_request_from_wit(r: w::DeviceSubRequest) -> sdk::DeviceSubRequest {
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

        pub(crate) fn sub_request_to_wit(r: &sdk::DeviceSubRequest) -> w::DeviceSubRequest {
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

        pub(crate) fn claim_spec_from_wit(c: w::DeviceClaim) -> sdk::DeviceClaim {
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

        pub(crate) fn claim_spec_to_wit(c: &sdk::DeviceClaim) -> w::DeviceClaim {
            w::DeviceClaim {
                requests: c
                    .requests
                    .iter()
                    .map(|r| match r {
                        sdk::DeviceRequest::Exactly(r) => {
                            w::DeviceRequest::Exactly(sub_request_to_wit(r))
                        }
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

        pub(crate) fn source_from_wit(s: w::AllocationConfigSource) -> sdk::AllocationConfigSource {
            match s {
                w::AllocationConfigSource::FromClass => sdk::AllocationConfigSource::FromClass,
                w::AllocationConfigSource::FromClaim => sdk::AllocationConfigSource::FromClaim,
            }
        }

        pub(crate) fn source_to_wit(s: sdk::AllocationConfigSource) -> w::AllocationConfigSource {
            match s {
                sdk::AllocationConfigSource::FromClass => w::AllocationConfigSource::FromClass,
                sdk::AllocationConfigSource::FromClaim => w::AllocationConfigSource::FromClaim,
            }
        }

        pub(crate) fn node_term_to_wit(t: &a::NodeSelectorTerm) -> w::NodeSelectorTerm {
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

        pub(crate) fn terms_from_wit(terms: Vec<w::NodeSelectorTerm>) -> Vec<a::NodeSelectorTerm> {
            terms.into_iter().map(node_term_from_wit).collect()
        }

        pub(crate) fn result_from_wit(
            d: w::DeviceRequestAllocationResult,
        ) -> sdk::DeviceRequestAllocationResult {
            sdk::DeviceRequestAllocationResult {
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
            }
        }

        pub(crate) fn result_to_wit(
            d: &sdk::DeviceRequestAllocationResult,
        ) -> w::DeviceRequestAllocationResult {
            w::DeviceRequestAllocationResult {
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
            }
        }

        pub(crate) fn allocation_from_wit(r: w::AllocationResult) -> sdk::AllocationResult {
            sdk::AllocationResult {
                devices: r.devices.into_iter().map(result_from_wit).collect(),
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

        pub(crate) fn allocation_to_wit(r: &sdk::AllocationResult) -> w::AllocationResult {
            w::AllocationResult {
                devices: r.devices.iter().map(result_to_wit).collect(),
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

        pub(crate) fn claim_from_wit(c: w::ResourceClaim) -> sdk::ResourceClaim {
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

        pub(crate) fn claim_to_wit(c: &sdk::ResourceClaim) -> w::ResourceClaim {
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

        pub(crate) fn counters(
            list: Vec<w::Counter>,
        ) -> ::std::collections::BTreeMap<String, Quantity> {
            quantities(list.into_iter().map(|c| (c.name, c.value)).collect())
        }

        pub(crate) fn device_from_wit(d: w::Device) -> sdk::Device {
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

        pub(crate) fn slice_from_wit(s: w::ResourceSlice) -> sdk::ResourceSlice {
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

        pub(crate) fn node_term_from_wit(t: w::NodeSelectorTerm) -> a::NodeSelectorTerm {
            let req = |r: w::NodeSelectorRequirement| a::NodeSelectorRequirement {
                key: r.key,
                operator: match r.operator {
                    w::NodeSelectorOperator::In => a::NodeSelectorOperator::In,
                    w::NodeSelectorOperator::NotIn => a::NodeSelectorOperator::NotIn,
                    w::NodeSelectorOperator::Exists => a::NodeSelectorOperator::Exists,
                    w::NodeSelectorOperator::DoesNotExist => a::NodeSelectorOperator::DoesNotExist,
                    w::NodeSelectorOperator::Gt => a::NodeSelectorOperator::Gt,
                    w::NodeSelectorOperator::Lt => a::NodeSelectorOperator::Lt,
                },
                values: r.values,
            };
            a::NodeSelectorTerm {
                match_expressions: t.match_expressions.into_iter().map(req).collect(),
                match_fields: t.match_fields.into_iter().map(req).collect(),
            }
        }

        fn terms_to_wit(terms: &[a::NodeSelectorTerm]) -> Vec<w::NodeSelectorTerm> {
            terms.iter().map(node_term_to_wit).collect()
        }

        fn selectors_to_wit(list: &[sdk::DeviceSelector]) -> Vec<w::DeviceSelector> {
            list.iter()
                .map(|s| w::DeviceSelector {
                    expression: s.expression.clone(),
                })
                .collect()
        }

        pub(crate) fn class_to_wit(c: &sdk::DeviceClass) -> w::DeviceClass {
            w::DeviceClass {
                name: c.name.clone(),
                uid: c.uid.clone(),
                selectors: selectors_to_wit(&c.selectors),
                config: c.config.iter().map(config_to_wit).collect(),
                extended_resource_name: c.extended_resource_name.clone(),
            }
        }

        fn taint_to_wit(t: &sdk::DeviceTaint) -> w::DeviceTaint {
            w::DeviceTaint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: effect_to_wit(t.effect),
                time_added_ms: t.time_added_ms,
            }
        }

        pub(crate) fn taint_rule_to_wit(r: &sdk::DeviceTaintRule) -> w::DeviceTaintRule {
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

        pub(crate) fn taint_rule_from_wit(r: w::DeviceTaintRule) -> sdk::DeviceTaintRule {
            sdk::DeviceTaintRule {
                name: r.name,
                selector: sdk::DeviceTaintSelector {
                    driver: r.selector.driver,
                    pool: r.selector.pool,
                    device: r.selector.device,
                },
                taint: taint_from_wit(r.taint),
            }
        }

        fn counters_to_wit(
            map: &::std::collections::BTreeMap<String, Quantity>,
        ) -> Vec<w::Counter> {
            map.iter()
                .map(|(name, q)| w::Counter {
                    name: name.clone(),
                    value: q.0.clone(),
                })
                .collect()
        }

        fn device_to_wit(d: &sdk::Device) -> w::Device {
            w::Device {
                name: d.name.clone(),
                attributes: d
                    .attributes
                    .iter()
                    .map(|(k, v)| {
                        let v = match v {
                            sdk::DeviceAttribute::Int(i) => w::DeviceAttribute::Int(*i),
                            sdk::DeviceAttribute::Bool(b) => w::DeviceAttribute::Bool(*b),
                            sdk::DeviceAttribute::String(s) => {
                                w::DeviceAttribute::String(s.clone())
                            }
                            sdk::DeviceAttribute::Version(s) => {
                                w::DeviceAttribute::Version(s.clone())
                            }
                        };
                        (k.clone(), v)
                    })
                    .collect(),
                capacity: d
                    .capacity
                    .iter()
                    .map(|(name, c)| w::DeviceCapacity {
                        name: name.clone(),
                        value: c.value.0.clone(),
                        request_policy: c.request_policy.as_ref().map(|p| {
                            w::CapacityRequestPolicy {
                                default: p.default.as_ref().map(|q| q.0.clone()),
                                valid_values: p.valid_values.iter().map(|q| q.0.clone()).collect(),
                                valid_range: p.valid_range.as_ref().map(|r| w::CapacityRange {
                                    min: r.min.0.clone(),
                                    max: r.max.as_ref().map(|q| q.0.clone()),
                                    step: r.step.as_ref().map(|q| q.0.clone()),
                                }),
                            }
                        }),
                    })
                    .collect(),
                consumes_counters: d
                    .consumes_counters
                    .iter()
                    .map(|c| w::DeviceCounterConsumption {
                        counter_set: c.counter_set.clone(),
                        counters: counters_to_wit(&c.counters),
                    })
                    .collect(),
                node_name: d.node_name.clone(),
                node_selector: d.node_selector.as_deref().map(terms_to_wit),
                all_nodes: d.all_nodes,
                taints: d.taints.iter().map(taint_to_wit).collect(),
                binds_to_node: d.binds_to_node,
                binding_conditions: d.binding_conditions.clone(),
                binding_failure_conditions: d.binding_failure_conditions.clone(),
                allow_multiple_allocations: d.allow_multiple_allocations,
            }
        }

        pub(crate) fn slice_to_wit(s: &sdk::ResourceSlice) -> w::ResourceSlice {
            w::ResourceSlice {
                name: s.name.clone(),
                driver: s.driver.clone(),
                pool: w::ResourcePool {
                    name: s.pool.name.clone(),
                    generation: s.pool.generation,
                    resource_slice_count: s.pool.resource_slice_count,
                },
                nodes: match &s.nodes {
                    sdk::SliceNodes::NodeName(n) => w::SliceNodes::NodeName(n.clone()),
                    sdk::SliceNodes::NodeSelector(terms) => {
                        w::SliceNodes::NodeSelector(terms_to_wit(terms))
                    }
                    sdk::SliceNodes::AllNodes => w::SliceNodes::AllNodes,
                    sdk::SliceNodes::PerDevice => w::SliceNodes::PerDevice,
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

        pub(crate) fn storage_capacity_to_wit(
            c: &$crate::volumes::CsiStorageCapacity,
            selector_to_wit: impl Fn(&$crate::affinity::LabelSelector) -> w::LabelSelector,
        ) -> w::CsiStorageCapacity {
            w::CsiStorageCapacity {
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                storage_class_name: c.storage_class_name.clone(),
                node_topology: c.node_topology.as_ref().map(selector_to_wit),
                capacity: c.capacity,
                maximum_volume_size: c.maximum_volume_size,
            }
        }
    };
}
