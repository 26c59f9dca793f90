//! The dynamic resource allocation kinds (`resource.k8s.io/v1` DeviceClass,
//! ResourceClaim, ResourceClaimTemplate, ResourceSlice, DeviceTaintRule), converted
//! into the SDK's types with the defaults and the checks of the API server that
//! scheduling depends on. Fields of alpha features 1.37 leaves off (derived
//! attributes, list-typed attributes, node-allocatable resources, partition types,
//! skipped node operations) are refused with the field named: Berth does not place a
//! pod as if they were absent.

use super::{FieldError, join, namespace_of, non_empty, required_name};
use crate::affinity::node_terms;
use berth_sdk::dra::*;
use berth_sdk::quantity::Quantity;
use berth_sdk::{Labels, TolerationOperator};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// The API group of the kinds this module reads.
pub const API_GROUP: &str = "resource.k8s.io";
/// The apiVersion of the kinds this module reads.
pub const API_VERSION: &str = "resource.k8s.io/v1";

/// The kinds of [`API_VERSION`] Berth reads.
pub const KINDS: [&str; 5] = [
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "DeviceTaintRule",
];

/// The kinds of [`KINDS`] that have no namespace.
pub const CLUSTER_SCOPED: [&str; 3] = ["DeviceClass", "ResourceSlice", "DeviceTaintRule"];

type Result<T> = std::result::Result<T, FieldError>;

/// A field of an alpha feature Berth does not model.
fn alpha(path: String, feature: &str) -> FieldError {
    FieldError::new(
        path,
        format!(
            "the alpha feature {feature} is not modelled by Berth (it is off by default in kube-scheduler 1.37); remove the field"
        ),
    )
}

/// A quantity the allocator can compute with: it must parse, exactly.
fn quantity(q: &K8sQuantity, path: &str) -> Result<Quantity> {
    let q = Quantity(q.0.trim().to_owned());
    match q.amount() {
        Ok(_) => Ok(q),
        Err(e) => Err(FieldError::new(path, e.to_string())),
    }
}

fn quantities(
    map: &BTreeMap<String, K8sQuantity>,
    path: &str,
) -> Result<BTreeMap<String, Quantity>> {
    map.iter()
        .map(|(k, v)| Ok((k.clone(), quantity(v, &format!("{path}[{k}]"))?)))
        .collect()
}

/// The `counters` of a counter set or of a device's consumption, at `path`.
fn counters(
    map: &BTreeMap<String, k8s::Counter>,
    path: &str,
) -> Result<BTreeMap<String, Quantity>> {
    map.iter()
        .map(|(k, v)| {
            Ok((
                k.clone(),
                quantity(&v.value, &format!("{path}.counters[{k}].value"))?,
            ))
        })
        .collect()
}

fn node_selector(
    s: &core::NodeSelector,
    path: &str,
) -> Result<Vec<berth_sdk::affinity::NodeSelectorTerm>> {
    Ok(node_terms(
        &s.node_selector_terms,
        &join(path, "nodeSelectorTerms"),
    )?)
}

fn selectors(list: &Option<Vec<k8s::DeviceSelector>>, path: &str) -> Result<Vec<DeviceSelector>> {
    list.iter()
        .flatten()
        .enumerate()
        .map(|(i, s)| match &s.cel {
            Some(cel) if !cel.expression.trim().is_empty() => Ok(DeviceSelector {
                expression: cel.expression.clone(),
            }),
            Some(_) => Err(FieldError::new(
                format!("{path}[{i}].cel.expression"),
                "required value",
            )),
            None => Err(FieldError::new(
                format!("{path}[{i}].cel"),
                "required value",
            )),
        })
        .collect()
}

fn opaque(
    o: &Option<k8s::OpaqueDeviceConfiguration>,
    path: &str,
) -> Result<Option<OpaqueDeviceConfiguration>> {
    let Some(o) = o else {
        return Ok(None);
    };
    if o.driver.is_empty() {
        return Err(FieldError::new(
            join(path, "opaque.driver"),
            "required value",
        ));
    }
    let parameters = serde_json::to_string(&o.parameters.0)
        .map_err(|e| FieldError::new(join(path, "opaque.parameters"), e.to_string()))?;
    Ok(Some(OpaqueDeviceConfiguration {
        driver: o.driver.clone(),
        parameters,
    }))
}

fn taint_effect(effect: &str, path: &str) -> Result<DeviceTaintEffect> {
    match effect {
        "NoSchedule" => Ok(DeviceTaintEffect::NoSchedule),
        "NoExecute" => Ok(DeviceTaintEffect::NoExecute),
        "None" => Ok(DeviceTaintEffect::None),
        other => Err(FieldError::unsupported(
            path,
            other,
            &["NoExecute", "NoSchedule", "None"],
        )),
    }
}

fn taint(t: &k8s::DeviceTaint, path: &str) -> Result<DeviceTaint> {
    if t.key.is_empty() {
        return Err(FieldError::new(join(path, "key"), "required value"));
    }
    Ok(DeviceTaint {
        key: t.key.clone(),
        value: t.value.clone().unwrap_or_default(),
        effect: taint_effect(&t.effect, &join(path, "effect"))?,
        time_added_ms: t.time_added.as_ref().map(|t| t.0.as_millisecond()),
    })
}

fn tolerations(
    list: &Option<Vec<k8s::DeviceToleration>>,
    path: &str,
) -> Result<Vec<DeviceToleration>> {
    list.iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            let path = format!("{path}[{i}]");
            let operator = match t.operator.as_deref() {
                None | Some("") | Some("Equal") => TolerationOperator::Equal,
                Some("Exists") => TolerationOperator::Exists,
                Some(other) => {
                    return Err(FieldError::unsupported(
                        join(&path, "operator"),
                        other,
                        &["Equal", "Exists"],
                    ));
                }
            };
            let value = t.value.clone().unwrap_or_default();
            if operator == TolerationOperator::Exists && !value.is_empty() {
                return Err(FieldError::new(
                    join(&path, "value"),
                    "must be empty when `operator` is 'Exists'",
                ));
            }
            let effect = match t.effect.as_deref() {
                None | Some("") => None,
                Some(e) => Some(taint_effect(e, &join(&path, "effect"))?),
            };
            Ok(DeviceToleration {
                key: t.key.clone().unwrap_or_default(),
                operator,
                value,
                effect,
                toleration_seconds: t.toleration_seconds,
            })
        })
        .collect()
}

/// `allocationMode` and `count` of a request.
fn allocation_mode(
    mode: &Option<String>,
    count: Option<i64>,
    path: &str,
) -> Result<AllocationMode> {
    match mode.as_deref() {
        None | Some("") | Some("ExactCount") => match count {
            None => Ok(AllocationMode::ExactCount(1)),
            Some(n) if n > 0 => Ok(AllocationMode::ExactCount(n)),
            Some(_) => Err(FieldError::new(
                join(path, "count"),
                "must be greater than zero",
            )),
        },
        Some("All") => match count {
            None | Some(0) => Ok(AllocationMode::All),
            Some(_) => Err(FieldError::new(
                join(path, "count"),
                "must not be specified when allocationMode is 'All'",
            )),
        },
        Some(other) => Err(FieldError::unsupported(
            join(path, "allocationMode"),
            other,
            &["All", "ExactCount"],
        )),
    }
}

fn capacity_requests(
    c: &Option<k8s::CapacityRequirements>,
    path: &str,
) -> Result<CapacityRequests> {
    match c.as_ref().and_then(|c| c.requests.as_ref()) {
        None => Ok(BTreeMap::new()),
        Some(map) => quantities(map, &join(path, "capacity.requests")),
    }
}

fn class_name(name: &str, path: &str) -> Result<String> {
    if name.is_empty() {
        return Err(FieldError::new(
            join(path, "deviceClassName"),
            "required value",
        ));
    }
    Ok(name.to_owned())
}

fn exact_request(name: &str, r: &k8s::ExactDeviceRequest, path: &str) -> Result<DeviceSubRequest> {
    if r.derived_attributes.as_ref().is_some_and(|d| !d.is_empty()) {
        return Err(alpha(
            join(path, "derivedAttributes"),
            "DRADerivedAttributes",
        ));
    }
    Ok(DeviceSubRequest {
        name: name.to_owned(),
        device_class_name: class_name(&r.device_class_name, path)?,
        selectors: selectors(&r.selectors, &join(path, "selectors"))?,
        allocation_mode: allocation_mode(&r.allocation_mode, r.count, path)?,
        admin_access: r.admin_access.unwrap_or(false),
        tolerations: tolerations(&r.tolerations, &join(path, "tolerations"))?,
        capacity: capacity_requests(&r.capacity, path)?,
    })
}

fn sub_request(r: &k8s::DeviceSubRequest, path: &str) -> Result<DeviceSubRequest> {
    if r.name.is_empty() {
        return Err(FieldError::new(join(path, "name"), "required value"));
    }
    if r.derived_attributes.as_ref().is_some_and(|d| !d.is_empty()) {
        return Err(alpha(
            join(path, "derivedAttributes"),
            "DRADerivedAttributes",
        ));
    }
    Ok(DeviceSubRequest {
        name: r.name.clone(),
        device_class_name: class_name(&r.device_class_name, path)?,
        selectors: selectors(&r.selectors, &join(path, "selectors"))?,
        allocation_mode: allocation_mode(&r.allocation_mode, r.count, path)?,
        admin_access: false,
        tolerations: tolerations(&r.tolerations, &join(path, "tolerations"))?,
        capacity: capacity_requests(&r.capacity, path)?,
    })
}

fn request(r: &k8s::DeviceRequest, path: &str) -> Result<DeviceRequest> {
    if r.name.is_empty() {
        return Err(FieldError::new(join(path, "name"), "required value"));
    }
    let first = r.first_available.as_ref().filter(|f| !f.is_empty());
    match (&r.exactly, first) {
        (Some(e), None) => Ok(DeviceRequest::Exactly(exact_request(
            &r.name,
            e,
            &join(path, "exactly"),
        )?)),
        (None, Some(list)) => {
            let mut subrequests = Vec::with_capacity(list.len());
            for (i, s) in list.iter().enumerate() {
                let sub = sub_request(s, &format!("{}[{i}]", join(path, "firstAvailable")))?;
                if subrequests
                    .iter()
                    .any(|o: &DeviceSubRequest| o.name == sub.name)
                {
                    return Err(FieldError::new(
                        format!("{}[{i}].name", join(path, "firstAvailable")),
                        format!("Duplicate value: {:?}", sub.name),
                    ));
                }
                subrequests.push(sub);
            }
            Ok(DeviceRequest::FirstAvailable {
                name: r.name.clone(),
                subrequests,
            })
        }
        (Some(_), Some(_)) => Err(FieldError::new(
            path,
            "exactly one of `exactly` or `firstAvailable` is required, not both",
        )),
        (None, None) => Err(FieldError::new(
            path,
            "exactly one of `exactly` or `firstAvailable` is required",
        )),
    }
}

fn claim_config(
    list: &Option<Vec<k8s::DeviceClaimConfiguration>>,
    path: &str,
) -> Result<Vec<DeviceConfiguration>> {
    list.iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let path = format!("{path}[{i}]");
            Ok(DeviceConfiguration {
                requests: c.requests.clone().unwrap_or_default(),
                opaque: opaque(&c.opaque, &path)?,
            })
        })
        .collect()
}

/// A claim's `spec` (also a template's `spec.spec`) found at `path`.
fn device_claim(spec: Option<&k8s::ResourceClaimSpec>, path: &str) -> Result<DeviceClaim> {
    let Some(devices) = spec.and_then(|s| s.devices.as_ref()) else {
        return Ok(DeviceClaim::default());
    };
    let path = join(path, "devices");
    let mut requests: Vec<DeviceRequest> = Vec::new();
    for (i, r) in devices.requests.iter().flatten().enumerate() {
        let r = request(r, &format!("{}[{i}]", join(&path, "requests")))?;
        if requests.iter().any(|o| o.name() == r.name()) {
            return Err(FieldError::new(
                format!("{}[{i}].name", join(&path, "requests")),
                format!("Duplicate value: {:?}", r.name()),
            ));
        }
        requests.push(r);
    }
    let names_request = |name: &str| {
        let (req, sub) = match name.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (name, None),
        };
        requests.iter().any(|r| {
            r.name() == req
                && match (r, sub) {
                    (_, None) => true,
                    (DeviceRequest::FirstAvailable { subrequests, .. }, Some(s)) => {
                        subrequests.iter().any(|x| x.name == s)
                    }
                    (DeviceRequest::Exactly(_), Some(_)) => false,
                }
        })
    };
    let mut constraints = Vec::new();
    for (i, c) in devices.constraints.iter().flatten().enumerate() {
        let cpath = format!("{}[{i}]", join(&path, "constraints"));
        let names = c.requests.clone().unwrap_or_default();
        for (j, n) in names.iter().enumerate() {
            if !names_request(n) {
                return Err(FieldError::new(
                    format!("{cpath}.requests[{j}]"),
                    format!(
                        "Invalid value: {n:?}: must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
                    ),
                ));
            }
        }
        let match_attribute = non_empty(&c.match_attribute);
        let distinct_attribute = non_empty(&c.distinct_attribute);
        if match_attribute.is_some() == distinct_attribute.is_some() {
            return Err(FieldError::new(
                cpath,
                "exactly one of `matchAttribute` or `distinctAttribute` is required",
            ));
        }
        constraints.push(DeviceConstraint {
            requests: names,
            match_attribute,
            distinct_attribute,
        });
    }
    Ok(DeviceClaim {
        requests,
        constraints,
        config: claim_config(&devices.config, &join(&path, "config"))?,
    })
}

fn controller(meta: &ObjectMeta) -> Option<ControllerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| ControllerReference {
            api_version: o.api_version.clone(),
            kind: o.kind.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
        })
}

fn allocation(a: &k8s::AllocationResult, path: &str) -> Result<AllocationResult> {
    let devices = a.devices.as_ref();
    let results = devices
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            let path = format!("{path}.devices.results[{i}]");
            Ok(DeviceRequestAllocationResult {
                request: r.request.clone(),
                driver: r.driver.clone(),
                pool: r.pool.clone(),
                device: r.device.clone(),
                admin_access: r.admin_access,
                tolerations: tolerations(&r.tolerations, &join(&path, "tolerations"))?,
                binding_conditions: r.binding_conditions.clone().unwrap_or_default(),
                binding_failure_conditions: r
                    .binding_failure_conditions
                    .clone()
                    .unwrap_or_default(),
                share_id: non_empty(&r.share_id),
                consumed_capacity: match &r.consumed_capacity {
                    Some(m) => quantities(m, &join(&path, "consumedCapacity"))?,
                    None => BTreeMap::new(),
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let config = devices
        .and_then(|d| d.config.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let path = format!("{path}.devices.config[{i}]");
            let source = match c.source.as_str() {
                "FromClass" => AllocationConfigSource::FromClass,
                "FromClaim" => AllocationConfigSource::FromClaim,
                other => {
                    return Err(FieldError::unsupported(
                        join(&path, "source"),
                        other,
                        &["FromClaim", "FromClass"],
                    ));
                }
            };
            Ok(DeviceAllocationConfiguration {
                source,
                requests: c.requests.clone().unwrap_or_default(),
                opaque: opaque(&c.opaque, &path)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(AllocationResult {
        devices: results,
        config,
        node_selector: match &a.node_selector {
            Some(s) => Some(node_selector(s, &join(path, "nodeSelector"))?),
            None => None,
        },
        allocation_timestamp_ms: a
            .allocation_timestamp
            .as_ref()
            .map(|t| t.0.as_millisecond()),
    })
}

fn claim_status(s: Option<&k8s::ResourceClaimStatus>) -> Result<ResourceClaimStatus> {
    let Some(s) = s else {
        return Ok(ResourceClaimStatus::default());
    };
    Ok(ResourceClaimStatus {
        allocation: match &s.allocation {
            Some(a) => Some(allocation(a, "status.allocation")?),
            None => None,
        },
        reserved_for: s
            .reserved_for
            .iter()
            .flatten()
            .map(|r| ConsumerReference {
                api_group: r.api_group.clone().unwrap_or_default(),
                resource: r.resource.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
            })
            .collect(),
        devices: s
            .devices
            .iter()
            .flatten()
            .map(|d| AllocatedDeviceStatus {
                driver: d.driver.clone(),
                pool: d.pool.clone(),
                device: d.device.clone(),
                share_id: non_empty(&d.share_id),
                conditions: d
                    .conditions
                    .iter()
                    .flatten()
                    .map(|c| DeviceCondition {
                        type_: c.type_.clone(),
                        status: c.status == "True",
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// Converts a DeviceClass; the error names the bad field.
pub fn device_class(c: &k8s::DeviceClass) -> Result<DeviceClass> {
    let spec = c.spec.as_ref();
    Ok(DeviceClass {
        name: required_name(&c.metadata)?,
        uid: c.metadata.uid.clone().unwrap_or_default(),
        selectors: selectors(&spec.and_then(|s| s.selectors.clone()), "spec.selectors")?,
        config: spec
            .and_then(|s| s.config.as_ref())
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| {
                Ok(DeviceConfiguration {
                    requests: Vec::new(),
                    opaque: opaque(&c.opaque, &format!("spec.config[{i}]"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?,
        extended_resource_name: spec.and_then(|s| non_empty(&s.extended_resource_name)),
    })
}

/// Converts a ResourceClaim; the error names the bad field.
pub fn resource_claim(c: &k8s::ResourceClaim) -> Result<ResourceClaim> {
    Ok(ResourceClaim {
        namespace: namespace_of(&c.metadata),
        name: required_name(&c.metadata)?,
        uid: c.metadata.uid.clone().unwrap_or_default(),
        resource_version: c.metadata.resource_version.clone().unwrap_or_default(),
        annotations: c.metadata.annotations.clone().unwrap_or_default(),
        controller: controller(&c.metadata),
        terminating: c.metadata.deletion_timestamp.is_some(),
        spec: device_claim(c.spec.as_ref(), "spec")?,
        status: claim_status(c.status.as_ref())?,
    })
}

/// Converts a ResourceClaimTemplate; the error names the bad field.
pub fn claim_template(t: &k8s::ResourceClaimTemplate) -> Result<ResourceClaimTemplate> {
    let spec = t.spec.as_ref();
    let meta = spec.and_then(|s| s.metadata.as_ref());
    Ok(ResourceClaimTemplate {
        namespace: namespace_of(&t.metadata),
        name: required_name(&t.metadata)?,
        claim_labels: meta.and_then(|m| m.labels.clone()).unwrap_or_default(),
        claim_annotations: meta.and_then(|m| m.annotations.clone()).unwrap_or_default(),
        spec: device_claim(spec.and_then(|s| s.spec.as_ref()), "spec.spec")?,
    })
}

fn attribute(a: &k8s::DeviceAttribute, path: &str) -> Result<DeviceAttribute> {
    let mut found = Vec::new();
    if let Some(v) = a.int {
        found.push(DeviceAttribute::Int(v));
    }
    if let Some(v) = a.bool {
        found.push(DeviceAttribute::Bool(v));
    }
    if let Some(v) = &a.string {
        found.push(DeviceAttribute::String(v.clone()));
    }
    if let Some(v) = &a.version {
        found.push(DeviceAttribute::Version(v.clone()));
    }
    let lists =
        a.ints.is_some() || a.bools.is_some() || a.strings.is_some() || a.versions.is_some();
    if lists {
        return Err(alpha(path.to_owned(), "DRAListTypeAttributes"));
    }
    match found.len() {
        1 => Ok(found.pop().unwrap_or(DeviceAttribute::Bool(false))),
        0 => Err(FieldError::new(
            path,
            "exactly one value must be specified (int, bool, string or version)",
        )),
        _ => Err(FieldError::new(
            path,
            "exactly one value must be specified, found several",
        )),
    }
}

fn capacity(c: &k8s::DeviceCapacity, path: &str) -> Result<DeviceCapacity> {
    let request_policy = match &c.request_policy {
        None => None,
        Some(p) => Some(CapacityRequestPolicy {
            default: p
                .default
                .as_ref()
                .map(|q| quantity(q, &join(path, "requestPolicy.default")))
                .transpose()?,
            valid_values: p
                .valid_values
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, q)| quantity(q, &format!("{path}.requestPolicy.validValues[{i}]")))
                .collect::<Result<Vec<_>>>()?,
            valid_range: match &p.valid_range {
                None => None,
                Some(r) => {
                    let rp = join(path, "requestPolicy.validRange");
                    Some(CapacityRange {
                        min: quantity(&r.min, &join(&rp, "min"))?,
                        max: r
                            .max
                            .as_ref()
                            .map(|q| quantity(q, &join(&rp, "max")))
                            .transpose()?,
                        step: r
                            .step
                            .as_ref()
                            .map(|q| quantity(q, &join(&rp, "step")))
                            .transpose()?,
                    })
                }
            },
        }),
    };
    Ok(DeviceCapacity {
        value: quantity(&c.value, &join(path, "value"))?,
        request_policy,
    })
}

fn device(d: &k8s::Device, per_device: bool, path: &str) -> Result<Device> {
    if d.name.is_empty() {
        return Err(FieldError::new(join(path, "name"), "required value"));
    }
    if d.node_allocatable_resources
        .as_ref()
        .is_some_and(|m| !m.is_empty())
    {
        return Err(alpha(
            join(path, "nodeAllocatableResources"),
            "DRANodeAllocatableResources",
        ));
    }
    let node_name = non_empty(&d.node_name);
    let all_nodes = d.all_nodes.unwrap_or(false);
    let node_selector = match &d.node_selector {
        Some(s) => Some(node_selector(s, &join(path, "nodeSelector"))?),
        None => None,
    };
    let set = usize::from(node_name.is_some())
        + usize::from(all_nodes)
        + usize::from(node_selector.is_some());
    if per_device && set != 1 {
        return Err(FieldError::new(
            path,
            "exactly one of `nodeName`, `nodeSelector` or `allNodes` is required when `perDeviceNodeSelection` is set",
        ));
    }
    if !per_device && set != 0 {
        return Err(FieldError::new(
            path,
            "`nodeName`, `nodeSelector` and `allNodes` may only be set when `perDeviceNodeSelection` is set",
        ));
    }
    Ok(Device {
        name: d.name.clone(),
        attributes: d
            .attributes
            .iter()
            .flatten()
            .map(|(k, a)| Ok((k.clone(), attribute(a, &format!("{path}.attributes[{k}]"))?)))
            .collect::<Result<_>>()?,
        capacity: d
            .capacity
            .iter()
            .flatten()
            .map(|(k, c)| Ok((k.clone(), capacity(c, &format!("{path}.capacity[{k}]"))?)))
            .collect::<Result<_>>()?,
        consumes_counters: d
            .consumes_counters
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| {
                let cp = format!("{path}.consumesCounters[{i}]");
                if c.compatibility_groups
                    .as_ref()
                    .is_some_and(|g| !g.is_empty())
                {
                    return Err(alpha(
                        join(&cp, "compatibilityGroups"),
                        "DRADeviceCompatibilityGroups",
                    ));
                }
                Ok(DeviceCounterConsumption {
                    counter_set: c.counter_set.clone(),
                    counters: counters(&c.counters, &cp)?,
                })
            })
            .collect::<Result<_>>()?,
        node_name,
        node_selector,
        all_nodes,
        taints: d
            .taints
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| taint(t, &format!("{path}.taints[{i}]")))
            .collect::<Result<_>>()?,
        binds_to_node: d.binds_to_node.unwrap_or(false),
        binding_conditions: d.binding_conditions.clone().unwrap_or_default(),
        binding_failure_conditions: d.binding_failure_conditions.clone().unwrap_or_default(),
        allow_multiple_allocations: d.allow_multiple_allocations.unwrap_or(false),
    })
}

/// Converts a ResourceSlice; the error names the bad field.
pub fn resource_slice(s: &k8s::ResourceSlice) -> Result<ResourceSlice> {
    let spec = &s.spec;
    if spec.driver.is_empty() {
        return Err(FieldError::new("spec.driver", "required value"));
    }
    if spec.pool.name.is_empty() {
        return Err(FieldError::new("spec.pool.name", "required value"));
    }
    if spec.pool.resource_slice_count <= 0 {
        return Err(FieldError::new(
            "spec.pool.resourceSliceCount",
            "must be greater than zero",
        ));
    }
    if spec
        .partition_type_attribute
        .as_ref()
        .is_some_and(|p| !p.is_empty())
    {
        return Err(alpha(
            "spec.partitionTypeAttribute".into(),
            "DRAPartitionableDevicesType",
        ));
    }
    if spec
        .skip_node_operations
        .as_ref()
        .is_some_and(|p| !p.is_empty())
    {
        return Err(alpha(
            "spec.skipNodeOperations".into(),
            "DRAOptionalNodeOperations",
        ));
    }
    let mut choices = Vec::new();
    if let Some(n) = non_empty(&spec.node_name) {
        choices.push(SliceNodes::NodeName(n));
    }
    if let Some(sel) = &spec.node_selector {
        choices.push(SliceNodes::NodeSelector(node_selector(
            sel,
            "spec.nodeSelector",
        )?));
    }
    if spec.all_nodes == Some(true) {
        choices.push(SliceNodes::AllNodes);
    }
    if spec.per_device_node_selection == Some(true) {
        choices.push(SliceNodes::PerDevice);
    }
    let nodes = match choices.len() {
        1 => choices.pop().unwrap_or_default(),
        _ => {
            return Err(FieldError::new(
                "spec",
                "exactly one of `nodeName`, `nodeSelector`, `allNodes` or `perDeviceNodeSelection` is required",
            ));
        }
    };
    let per_device = nodes == SliceNodes::PerDevice;
    let mut devices: Vec<Device> = Vec::new();
    for (i, d) in spec.devices.iter().flatten().enumerate() {
        let d = device(d, per_device, &format!("spec.devices[{i}]"))?;
        if devices.iter().any(|o| o.name == d.name) {
            return Err(FieldError::new(
                format!("spec.devices[{i}].name"),
                format!("Duplicate value: {:?}", d.name),
            ));
        }
        devices.push(d);
    }
    Ok(ResourceSlice {
        name: required_name(&s.metadata)?,
        driver: spec.driver.clone(),
        pool: ResourcePool {
            name: spec.pool.name.clone(),
            generation: spec.pool.generation,
            resource_slice_count: spec.pool.resource_slice_count,
        },
        nodes,
        devices,
        shared_counters: spec
            .shared_counters
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| {
                let cp = format!("spec.sharedCounters[{i}]");
                if c.name.is_empty() {
                    return Err(FieldError::new(join(&cp, "name"), "required value"));
                }
                Ok(CounterSet {
                    name: c.name.clone(),
                    counters: counters(&c.counters, &cp)?,
                })
            })
            .collect::<Result<_>>()?,
    })
}

/// Converts a DeviceTaintRule; the error names the bad field.
pub fn device_taint_rule(r: &k8s::DeviceTaintRule) -> Result<DeviceTaintRule> {
    let sel = r.spec.device_selector.as_ref();
    Ok(DeviceTaintRule {
        name: required_name(&r.metadata)?,
        selector: DeviceTaintSelector {
            driver: sel.and_then(|s| non_empty(&s.driver)),
            pool: sel.and_then(|s| non_empty(&s.pool)),
            device: sel.and_then(|s| non_empty(&s.device)),
        },
        taint: taint(&r.spec.taint, "spec.taint")?,
    })
}

/// The claim the resourceclaim controller makes for `pod` from `template` for the
/// pod's entry `entry` of `spec.resourceClaims`: named `<pod>-<entry>-<suffix>`,
/// owned by the pod, annotated with the entry's name (`resource.kubernetes.io/pod-claim-name`).
pub fn claim_for_pod(
    template: &ResourceClaimTemplate,
    pod: &berth_sdk::Pod,
    entry: &str,
    suffix: &str,
) -> ResourceClaim {
    let mut annotations: Labels = template.claim_annotations.clone();
    annotations.insert(POD_CLAIM_NAME_ANNOTATION.to_owned(), entry.to_owned());
    let name = format!("{}-{}-{suffix}", pod.name, entry);
    ResourceClaim {
        namespace: pod.namespace.clone(),
        uid: super::derived_uid(&pod.namespace, &format!("resourceclaim/{name}")),
        name,
        resource_version: String::new(),
        annotations,
        controller: Some(ControllerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        }),
        terminating: false,
        spec: template.spec.clone(),
        status: ResourceClaimStatus::default(),
    }
}

/// The suffix the API server's `generateName` gives a claim made for a pod: five
/// characters, here derived from the pod's UID and the entry so that the embedded
/// cluster makes the same name each time it replays a pod.
pub fn claim_suffix(pod: &berth_sdk::Pod, entry: &str) -> String {
    use sha2::Digest;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let hash = sha2::Sha256::digest(format!("{}/{entry}", pod.uid).as_bytes());
    hash.iter()
        .take(5)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

/// The annotation kube-controller-manager puts on a claim made from a template: the
/// name of the pod's entry of `spec.resourceClaims` it was made for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

fn toleration_json(t: &DeviceToleration) -> serde_json::Value {
    let mut o = serde_json::json!({
        "operator": match t.operator {
            TolerationOperator::Equal => "Equal",
            TolerationOperator::Exists => "Exists",
        },
    });
    if !t.key.is_empty() {
        o["key"] = t.key.clone().into();
    }
    if !t.value.is_empty() {
        o["value"] = t.value.clone().into();
    }
    if let Some(e) = t.effect {
        o["effect"] = format!("{e:?}").into();
    }
    if let Some(s) = t.toleration_seconds {
        o["tolerationSeconds"] = s.into();
    }
    o
}

fn node_selector_json(terms: &[berth_sdk::affinity::NodeSelectorTerm]) -> serde_json::Value {
    let reqs = |list: &[berth_sdk::affinity::NodeSelectorRequirement]| -> serde_json::Value {
        list.iter()
            .map(|r| {
                serde_json::json!({"key": r.key, "operator": format!("{:?}", r.operator), "values": r.values})
            })
            .collect()
    };
    let terms: Vec<serde_json::Value> = terms
        .iter()
        .map(|t| {
            let mut o = serde_json::json!({});
            if !t.match_expressions.is_empty() {
                o["matchExpressions"] = reqs(&t.match_expressions);
            }
            if !t.match_fields.is_empty() {
                o["matchFields"] = reqs(&t.match_fields);
            }
            o
        })
        .collect();
    serde_json::json!({ "nodeSelectorTerms": terms })
}

/// A claim's `status.allocation` in the API's JSON form, as PreBind writes it.
pub fn allocation_json(a: &AllocationResult) -> serde_json::Value {
    let results: Vec<serde_json::Value> = a
        .devices
        .iter()
        .map(|r| {
            let mut o = serde_json::json!({
                "request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device,
            });
            if let Some(admin) = r.admin_access {
                o["adminAccess"] = admin.into();
            }
            if !r.tolerations.is_empty() {
                o["tolerations"] = r.tolerations.iter().map(toleration_json).collect();
            }
            if !r.binding_conditions.is_empty() {
                o["bindingConditions"] = r.binding_conditions.clone().into();
            }
            if !r.binding_failure_conditions.is_empty() {
                o["bindingFailureConditions"] = r.binding_failure_conditions.clone().into();
            }
            if let Some(id) = &r.share_id {
                o["shareID"] = id.clone().into();
            }
            if !r.consumed_capacity.is_empty() {
                o["consumedCapacity"] = r
                    .consumed_capacity
                    .iter()
                    .map(|(k, q)| (k.clone(), serde_json::Value::from(q.as_str())))
                    .collect::<serde_json::Map<_, _>>()
                    .into();
            }
            o
        })
        .collect();
    let config: Vec<serde_json::Value> = a
        .config
        .iter()
        .map(|c| {
            let mut o = serde_json::json!({"source": format!("{:?}", c.source)});
            if !c.requests.is_empty() {
                o["requests"] = c.requests.clone().into();
            }
            if let Some(op) = &c.opaque {
                o["opaque"] = serde_json::json!({
                    "driver": op.driver,
                    "parameters": serde_json::from_str::<serde_json::Value>(&op.parameters)
                        .unwrap_or(serde_json::Value::Null),
                });
            }
            o
        })
        .collect();
    let mut devices = serde_json::json!({ "results": results });
    if !config.is_empty() {
        devices["config"] = config.into();
    }
    let mut o = serde_json::json!({ "devices": devices });
    if let Some(terms) = &a.node_selector {
        o["nodeSelector"] = node_selector_json(terms);
    }
    if let Some(ms) = a.allocation_timestamp_ms
        && let Ok(t) = k8s_openapi::jiff::Timestamp::from_millisecond(ms)
        && let Ok(v) = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t))
    {
        o["allocationTimestamp"] = v;
    }
    o
}

/// The claim for a pod's extended resources as the API server takes it at create:
/// `generateName` from the pod's name, the annotation, the pod as controlling owner,
/// and its requests (each exactly a count of devices of a class: the only requests
/// such a claim has; any other is refused, naming it).
pub fn extended_resource_claim_json(
    c: &ResourceClaim,
) -> std::result::Result<serde_json::Value, String> {
    let Some(owner) = &c.controller else {
        return Err("the claim names no pod as its controller".into());
    };
    let mut requests = Vec::with_capacity(c.spec.requests.len());
    for r in &c.spec.requests {
        let DeviceRequest::Exactly(e) = r else {
            return Err(format!(
                "request {}: a claim for extended resources asks for exact counts only",
                r.name()
            ));
        };
        let count = match e.allocation_mode {
            AllocationMode::ExactCount(count) => count,
            AllocationMode::All => {
                return Err(format!(
                    "request {}: a claim for extended resources asks for exact counts only",
                    e.name
                ));
            }
        };
        requests.push(serde_json::json!({
            "name": e.name,
            "exactly": {
                "deviceClassName": e.device_class_name,
                "allocationMode": "ExactCount",
                "count": count,
            },
        }));
    }
    Ok(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": format!("{}-extended-resources-", owner.name),
            "namespace": c.namespace,
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner.name,
                "uid": owner.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {"devices": {"requests": requests}},
    }))
}

/// A claim's `status.reservedFor` in the API's JSON form.
pub fn reserved_for_json(list: &[ConsumerReference]) -> serde_json::Value {
    list.iter()
        .map(|r| {
            let mut o = serde_json::json!({"resource": r.resource, "name": r.name, "uid": r.uid});
            if !r.api_group.is_empty() {
                o["apiGroup"] = r.api_group.clone().into();
            }
            o
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Object, load_str};
    use berth_sdk::dra::*;
    use berth_sdk::quantity::Quantity;

    fn load(text: &str) -> Vec<Object> {
        load_str("dra.yaml", text)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|d| d.object)
            .collect()
    }

    fn error(text: &str) -> String {
        load_str("dra.yaml", text).unwrap_err().to_string()
    }

    /// The objects of upstream's DRA examples (a GPU driver's slice, a class, a
    /// template with a prioritized list and a constraint, an allocated claim), as
    /// kubectl prints them.
    const CLUSTER: &str = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com, uid: 5f0c}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
  extendedResourceName: example.com/gpu
  config:
  - opaque: {driver: gpu.example.com, parameters: {sharing: {strategy: TimeSlicing}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpu.example.com-x8k2}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 3, resourceSliceCount: 1}
  sharedCounters:
  - name: gpu-0-counters
    counters: {memory: {value: 80Gi}}
  devices:
  - name: gpu-0
    attributes:
      model: {string: A100}
      driverVersion: {version: 1.2.3}
      index: {int: 0}
      gpu.example.com/mig: {bool: false}
    capacity:
      memory: {value: 80Gi}
      bandwidth:
        value: 10G
        requestPolicy:
          default: 1G
          validRange: {min: 1G, step: 1G}
    consumesCounters:
    - counterSet: gpu-0-counters
      counters: {memory: {value: 80Gi}}
    taints:
    - {key: maintenance, value: planned, effect: NoSchedule}
    bindsToNode: true
    bindingConditions: [attached]
    bindingFailureConditions: [failed]
    allowMultipleAllocations: true
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  metadata:
    labels: {team: ml}
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - {name: big, deviceClassName: gpu.example.com, selectors: [{cel: {expression: "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"}}]}
        - {name: small, deviceClassName: gpu.example.com, count: 2}
      - name: nic
        exactly:
          deviceClassName: nic.example.com
          allocationMode: All
          tolerations: [{key: maintenance, operator: Exists, effect: NoSchedule}]
          capacity: {requests: {bandwidth: 2G}}
      constraints:
      - requests: [gpu, nic]
        matchAttribute: dra.example.com/numa
      config:
      - requests: [gpu/big]
        opaque: {driver: gpu.example.com, parameters: {mode: exclusive}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: shared-nic
  namespace: ml
  uid: 1b2c
  resourceVersion: "42"
  ownerReferences:
  - {apiVersion: v1, kind: Pod, name: trainer-0, uid: 9a8b, controller: true}
spec:
  devices:
    requests:
    - name: nic
      exactly: {deviceClassName: nic.example.com, adminAccess: true}
status:
  allocation:
    devices:
      results:
      - {request: nic, driver: nic.example.com, pool: node-1, device: eth1, adminAccess: true, shareID: 6f2a, consumedCapacity: {bandwidth: 2G}}
      config:
      - {source: FromClass, requests: [nic], opaque: {driver: nic.example.com, parameters: {}}}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
  reservedFor:
  - {resource: pods, name: trainer-0, uid: 9a8b}
  devices:
  - driver: nic.example.com
    pool: node-1
    device: eth1
    conditions:
    - {type: Ready, status: "True", lastTransitionTime: "2026-11-27T00:00:00Z", reason: Up, message: up}
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: drain-node-1}
spec:
  deviceSelector: {driver: gpu.example.com, pool: node-1}
  taint: {key: drain, effect: NoExecute, timeAdded: "2026-11-27T00:00:00Z"}
"#;

    #[test]
    fn the_kinds_are_read_as_upstream_defaults_them() {
        let objects = load(CLUSTER);
        let [
            Object::DeviceClass(class),
            Object::ResourceSlice(slice),
            Object::ResourceClaimTemplate(template),
            Object::ResourceClaim(claim),
            Object::DeviceTaintRule(rule),
        ] = objects.as_slice()
        else {
            panic!("{objects:?}")
        };
        assert_eq!(class.name, "gpu.example.com");
        assert_eq!(
            class.selectors,
            [DeviceSelector {
                expression: "device.driver == 'gpu.example.com'".into()
            }]
        );
        assert_eq!(
            class.extended_resource_name.as_deref(),
            Some("example.com/gpu")
        );
        let opaque = class.config[0].opaque.as_ref().unwrap();
        assert_eq!(
            opaque.parameters,
            r#"{"sharing":{"strategy":"TimeSlicing"}}"#
        );

        assert_eq!(slice.nodes, SliceNodes::NodeName("node-1".into()));
        assert_eq!(slice.pool.generation, 3);
        let gpu = &slice.devices[0];
        assert_eq!(
            gpu.attributes["model"],
            DeviceAttribute::String("A100".into())
        );
        assert_eq!(
            gpu.attributes["driverVersion"],
            DeviceAttribute::Version("1.2.3".into())
        );
        assert_eq!(gpu.attributes["index"], DeviceAttribute::Int(0));
        assert_eq!(
            gpu.attributes["gpu.example.com/mig"],
            DeviceAttribute::Bool(false)
        );
        assert_eq!(gpu.capacity["memory"].value, Quantity::from("80Gi"));
        let policy = gpu.capacity["bandwidth"].request_policy.as_ref().unwrap();
        assert_eq!(policy.default, Some(Quantity::from("1G")));
        assert_eq!(
            policy.valid_range.as_ref().unwrap().step,
            Some(Quantity::from("1G"))
        );
        assert_eq!(gpu.consumes_counters[0].counter_set, "gpu-0-counters");
        assert_eq!(
            slice.shared_counters[0].counters["memory"],
            Quantity::from("80Gi")
        );
        assert_eq!(gpu.taints[0].effect, DeviceTaintEffect::NoSchedule);
        assert!(gpu.binds_to_node && gpu.allow_multiple_allocations);
        assert_eq!(gpu.binding_conditions, ["attached"]);

        assert_eq!(template.namespace, "ml");
        assert_eq!(template.claim_labels["team"], "ml");
        let DeviceRequest::FirstAvailable { name, subrequests } = &template.spec.requests[0] else {
            panic!("{:?}", template.spec.requests[0])
        };
        assert_eq!(name, "gpu");
        assert_eq!(
            subrequests[0].allocation_mode,
            AllocationMode::ExactCount(1)
        );
        assert_eq!(
            subrequests[1].allocation_mode,
            AllocationMode::ExactCount(2)
        );
        let DeviceRequest::Exactly(nic) = &template.spec.requests[1] else {
            panic!("{:?}", template.spec.requests[1])
        };
        assert_eq!(nic.allocation_mode, AllocationMode::All);
        assert_eq!(
            nic.tolerations[0].operator,
            berth_sdk::TolerationOperator::Exists
        );
        assert_eq!(nic.capacity["bandwidth"], Quantity::from("2G"));
        assert_eq!(
            template.spec.constraints[0].match_attribute.as_deref(),
            Some("dra.example.com/numa")
        );
        assert_eq!(template.spec.config[0].requests, ["gpu/big"]);

        assert_eq!(claim.key(), "ml/shared-nic");
        assert_eq!(claim.resource_version, "42");
        assert!(claim.is_for_pod("9a8b") && claim.is_reserved_for("9a8b"));
        assert!(!claim.is_reserved_for("other"));
        let alloc = claim.status.allocation.as_ref().unwrap();
        assert_eq!(alloc.devices[0].share_id.as_deref(), Some("6f2a"));
        assert_eq!(
            alloc.devices[0].consumed_capacity["bandwidth"],
            Quantity::from("2G")
        );
        assert_eq!(alloc.config[0].source, AllocationConfigSource::FromClass);
        assert_eq!(alloc.node_selector.as_ref().unwrap().len(), 1);
        assert!(claim.status.devices[0].conditions[0].status);

        assert!(rule.selector.selects("gpu.example.com", "node-1", "gpu-7"));
        assert!(!rule.selector.selects("nic.example.com", "node-1", "eth1"));
        assert_eq!(rule.taint.effect, DeviceTaintEffect::NoExecute);
        assert!(rule.taint.time_added_ms.is_some());
    }

    #[test]
    fn an_allocation_written_back_reads_the_same() {
        let objects = load(CLUSTER);
        let Object::ResourceClaim(claim) = &objects[3] else {
            panic!("{objects:?}")
        };
        let mut status = claim.status.clone();
        let alloc = status.allocation.as_mut().unwrap();
        alloc.devices[0].tolerations = vec![DeviceToleration {
            key: "maintenance".into(),
            operator: berth_sdk::TolerationOperator::Exists,
            value: String::new(),
            effect: Some(DeviceTaintEffect::NoSchedule),
            toleration_seconds: Some(30),
        }];
        alloc.devices[0].binding_conditions = vec!["attached".into()];
        alloc.allocation_timestamp_ms = Some(1_795_000_000_000);
        let json = serde_json::json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ml"},
            "status": {
                "allocation": super::allocation_json(status.allocation.as_ref().unwrap()),
                "reservedFor": super::reserved_for_json(&status.reserved_for),
            },
        });
        let typed: k8s_openapi::api::resource::v1::ResourceClaim =
            serde_json::from_value(json).unwrap();
        let back = super::resource_claim(&typed).unwrap();
        assert_eq!(back.status.allocation, status.allocation);
        assert_eq!(back.status.reserved_for, status.reserved_for);
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (
                "kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d, pool: {name: p, generation: 1, resourceSliceCount: 1}}",
                "spec: exactly one of `nodeName`, `nodeSelector`, `allNodes` or `perDeviceNodeSelection` is required",
            ),
            (
                "kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d, allNodes: true, pool: {name: p, generation: 1, resourceSliceCount: 1}, devices: [{name: a}, {name: a}]}",
                "spec.devices[1].name: Duplicate value: \"a\"",
            ),
            (
                "kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d, allNodes: true, pool: {name: p, generation: 1, resourceSliceCount: 1}, devices: [{name: a, attributes: {x: {}}}]}",
                "spec.devices[0].attributes[x]: exactly one value must be specified (int, bool, string or version)",
            ),
            (
                "kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d, allNodes: true, pool: {name: p, generation: 1, resourceSliceCount: 1}, devices: [{name: a, capacity: {mem: {value: 1x}}}]}",
                "spec.devices[0].capacity[mem].value: quantities must match",
            ),
            (
                "kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d, allNodes: true, pool: {name: p, generation: 1, resourceSliceCount: 1}, devices: [{name: a, attributes: {x: {ints: [1]}}}]}",
                "spec.devices[0].attributes[x]: the alpha feature DRAListTypeAttributes is not modelled by Berth",
            ),
            (
                "kind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r}]}}",
                "spec.devices.requests[0]: exactly one of `exactly` or `firstAvailable` is required",
            ),
            (
                "kind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: g, count: 0}}]}}",
                "spec.devices.requests[0].exactly.count: must be greater than zero",
            ),
            (
                "kind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: g, allocationMode: Some}}]}}",
                "spec.devices.requests[0].exactly.allocationMode: unsupported value \"Some\": supported values: \"All\", \"ExactCount\"",
            ),
            (
                "kind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: g}}], constraints: [{requests: [q], matchAttribute: a}]}}",
                "spec.devices.constraints[0].requests[0]: Invalid value: \"q\"",
            ),
            (
                "kind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: g, selectors: [{cel: {expression: ''}}]}}]}}",
                "spec.devices.requests[0].exactly.selectors[0].cel.expression: required value",
            ),
            (
                "kind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: g, derivedAttributes: [{name: x, expression: y}]}}]}}",
                "spec.devices.requests[0].exactly.derivedAttributes: the alpha feature DRADerivedAttributes",
            ),
            (
                "kind: DeviceTaintRule\nmetadata: {name: r}\nspec: {taint: {key: k, effect: Sometimes}}",
                "spec.taint.effect: unsupported value \"Sometimes\"",
            ),
        ];
        for (doc, want) in cases {
            let e = error(&format!("apiVersion: resource.k8s.io/v1\n{doc}\n"));
            assert!(
                e.starts_with("dra.yaml") && e.contains(want),
                "{doc}\n{e}\nwant {want}"
            );
        }
    }

    #[test]
    fn cluster_scoped_kinds_are_deleted_by_name_and_claims_by_namespace() {
        let objects = load(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s, annotations: {berth.dev/simulate: delete}}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, annotations: {berth.dev/simulate: delete}}\n",
        );
        let deleted: Vec<_> = objects
            .iter()
            .map(|o| match o {
                Object::Delete {
                    kind,
                    namespace,
                    name,
                } => format!("{kind} {namespace:?} {name}"),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            deleted,
            ["ResourceSlice \"\" s", "ResourceClaim \"default\" c"]
        );
    }
}
