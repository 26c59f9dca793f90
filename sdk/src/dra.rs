//! Dynamic resource allocation (`resource.k8s.io/v1`): the kinds the DynamicResources
//! plugin reads, as plain Rust.
//!
//! A pod names ResourceClaims (`spec.resourceClaims`); a claim asks for devices of
//! DeviceClasses; drivers publish the devices they have in ResourceSlices, grouped in
//! pools; DeviceTaintRules taint devices from the outside. The scheduler allocates a
//! claim's devices from the slices and writes the result into the claim's status.
//!
//! Optional fields are read as upstream's defaults apply them: absent lists are empty,
//! an absent allocation mode is `ExactCount` with a count of one.

use crate::affinity::NodeSelectorTerm;
use crate::quantity::Quantity;
use crate::types::{Labels, TolerationOperator};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod host;
mod wit;

/// The prefix of the implicit extended resource every DeviceClass backs:
/// `deviceclass.resource.kubernetes.io/<class name>`.
pub const IMPLICIT_EXTENDED_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The annotation (set to `"true"`) of the claim the scheduler makes for a pod's
/// extended resources backed by DRA.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";

/// The prefix of the name the claim for a pod's extended resources has until PreBind
/// creates it: `<extended-resources>/<pod UID>` (not a valid object name, so no claim
/// in the cluster has it).
pub const EXTENDED_RESOURCE_CLAIM_IN_MEMORY: &str = "<extended-resources>";

/// The name of the claim for the extended resources of the pod of this UID until
/// PreBind creates it (see [`EXTENDED_RESOURCE_CLAIM_IN_MEMORY`]).
pub fn in_memory_extended_claim_name(pod_uid: &str) -> String {
    format!("{EXTENDED_RESOURCE_CLAIM_IN_MEMORY}/{pod_uid}")
}

/// Whether `name` is the name of a claim for extended resources not created yet.
pub fn is_in_memory_extended_claim_name(name: &str) -> bool {
    name.starts_with(EXTENDED_RESOURCE_CLAIM_IN_MEMORY)
}

/// Which DeviceClass backs each extended resource (upstream's
/// `DeviceClassResolver`), by resource name: every class backs its implicit
/// `deviceclass.resource.kubernetes.io/<class>`, and the resource its
/// `extendedResourceName` names. When several classes name the same resource,
/// upstream prefers the newest (by creation time) and then the lowest name; the
/// records Berth's plugins see carry no creation time, so the lowest name wins.
pub fn extended_resource_classes(classes: &[DeviceClass]) -> BTreeMap<String, String> {
    let mut backed = BTreeMap::new();
    for c in classes {
        backed.insert(
            format!("{IMPLICIT_EXTENDED_RESOURCE_PREFIX}{}", c.name),
            c.name.clone(),
        );
    }
    for c in classes {
        if let Some(resource) = &c.extended_resource_name {
            backed
                .entry(resource.clone())
                .and_modify(|winner: &mut String| {
                    if c.name < *winner {
                        *winner = c.name.clone();
                    }
                })
                .or_insert_with(|| c.name.clone());
        }
    }
    backed
}

/// The device results of `claims`' allocations, each with its claim's
/// `namespace/name` (what [`host::allocated_device_results`] answers).
pub fn device_results_of<'a>(
    claims: impl IntoIterator<Item = &'a ResourceClaim>,
) -> Vec<(String, DeviceRequestAllocationResult)> {
    claims
        .into_iter()
        .filter_map(|c| Some((c.key(), c.status.allocation.as_ref()?)))
        .flat_map(|(key, a)| a.devices.iter().map(move |r| (key.clone(), r.clone())))
        .collect()
}

impl ResourceClaim {
    /// Whether this is the claim the scheduler made (or will make) for the
    /// extended resources of the pod of this UID: annotated as such, the pod its
    /// controlling owner (upstream's `findExtendedResourceClaim`).
    pub fn is_extended_resource_claim_of(&self, pod_uid: &str) -> bool {
        self.annotations
            .get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)
            .is_some_and(|v| v == "true")
            && self.is_for_pod(pod_uid)
    }
}

/// The largest number of consumers a claim's `status.reservedFor` may list
/// (`ResourceClaimReservedForMaxSize`).
pub const RESERVED_FOR_MAX_SIZE: usize = 256;

/// A CEL selector on devices (`selectors[].cel.expression`): the expression sees the
/// device as `device` (its `driver`, `attributes`, `capacity`,
/// `allowMultipleAllocations`) and must yield a bool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSelector {
    /// The CEL expression.
    pub expression: String,
}

/// Opaque configuration for a driver (`opaque`): the scheduler only passes it on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpaqueDeviceConfiguration {
    /// The driver the configuration is for.
    pub driver: String,
    /// `parameters`, as JSON text.
    pub parameters: String,
}

/// An entry of a claim's or a class's `config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceConfiguration {
    /// The requests it applies to (empty: all of them; always empty for a class).
    pub requests: Vec<String>,
    /// The driver's opaque configuration; `None` when the entry has another kind
    /// (none other exists in `resource.k8s.io/v1`).
    pub opaque: Option<OpaqueDeviceConfiguration>,
}

/// A DeviceClass: the selectors and configuration a request of the class gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceClass {
    /// The name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.selectors`: every one must select a device of the class.
    pub selectors: Vec<DeviceSelector>,
    /// `spec.config`.
    pub config: Vec<DeviceConfiguration>,
    /// `spec.extendedResourceName`: the extended resource a pod may ask for in its
    /// containers' requests to get devices of this class.
    pub extended_resource_name: Option<String>,
}

/// The effect of a device taint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceTaintEffect {
    /// No new pod is scheduled onto the device unless it tolerates the taint.
    NoSchedule,
    /// As `NoSchedule`, and pods using the device are evicted.
    NoExecute,
    /// The taint is informational only.
    None,
}

/// A taint on a device (`taints[]`, or a DeviceTaintRule's `taint`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceTaint {
    /// The key.
    pub key: String,
    /// The value (empty when none).
    pub value: String,
    /// The effect.
    pub effect: DeviceTaintEffect,
    /// `timeAdded`, in milliseconds since the Unix epoch.
    pub time_added_ms: Option<i64>,
}

/// A toleration of device taints, in a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceToleration {
    /// Empty with `Exists` tolerates every key.
    pub key: String,
    /// `Equal` (the default) or `Exists`.
    pub operator: TolerationOperator,
    /// Compared with `Equal`.
    pub value: String,
    /// `None` tolerates every effect.
    pub effect: Option<DeviceTaintEffect>,
    /// For `NoExecute`: how long the pod keeps the device after the taint appears.
    pub toleration_seconds: Option<i64>,
}

impl DeviceToleration {
    /// Whether this toleration tolerates the taint (upstream's `ToleratesTaint` for
    /// devices): the effect matches when the toleration names none, the key when it
    /// is empty with `Exists`, and with `Equal` the value must be equal.
    pub fn tolerates(&self, taint: &DeviceTaint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

/// How many devices a request wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AllocationMode {
    /// Exactly this many (`ExactCount` with `count`, one when absent).
    ExactCount(i64),
    /// Every matching device of the pool(s) the allocation picks (`All`).
    All,
}

impl Default for AllocationMode {
    fn default() -> Self {
        AllocationMode::ExactCount(1)
    }
}

/// `capacity.requests`: how much of each consumable capacity a request takes from a
/// device that can be shared (`allowMultipleAllocations`).
pub type CapacityRequests = BTreeMap<String, Quantity>;

/// A request for devices of one class (`exactly`, or an entry of `firstAvailable`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSubRequest {
    /// The name: the request's for `exactly`, the subrequest's own for
    /// `firstAvailable` (results name it `<request>/<subrequest>`).
    pub name: String,
    /// `deviceClassName`.
    pub device_class_name: String,
    /// `selectors`: every one must select the device.
    pub selectors: Vec<DeviceSelector>,
    /// `allocationMode` and `count`.
    pub allocation_mode: AllocationMode,
    /// `adminAccess` (only on `exactly`).
    pub admin_access: bool,
    /// `tolerations`.
    pub tolerations: Vec<DeviceToleration>,
    /// `capacity.requests`.
    pub capacity: CapacityRequests,
}

/// A request of a claim (`spec.devices.requests[]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceRequest {
    /// `exactly`: one request; its `name` is the request's.
    Exactly(DeviceSubRequest),
    /// `firstAvailable`: the first of these that can be satisfied, in order.
    FirstAvailable {
        /// The request's name.
        name: String,
        /// The subrequests, in order of preference.
        subrequests: Vec<DeviceSubRequest>,
    },
}

impl DeviceRequest {
    /// The request's name.
    pub fn name(&self) -> &str {
        match self {
            DeviceRequest::Exactly(r) => &r.name,
            DeviceRequest::FirstAvailable { name, .. } => name,
        }
    }
}

/// A constraint across requests of a claim (`spec.devices.constraints[]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceConstraint {
    /// The requests it applies to (empty: all of them); a `firstAvailable` request
    /// by its name applies to whichever subrequest is picked.
    pub requests: Vec<String>,
    /// `matchAttribute`: every device must have this attribute, with one value.
    pub match_attribute: Option<String>,
    /// `distinctAttribute`: every device must have this attribute, each its own value.
    pub distinct_attribute: Option<String>,
}

/// What a claim asks for (`spec.devices`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceClaim {
    /// `requests`.
    pub requests: Vec<DeviceRequest>,
    /// `constraints`.
    pub constraints: Vec<DeviceConstraint>,
    /// `config`.
    pub config: Vec<DeviceConfiguration>,
}

/// Where an allocated configuration comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AllocationConfigSource {
    /// The DeviceClass (`FromClass`).
    FromClass,
    /// The claim (`FromClaim`).
    FromClaim,
}

/// An entry of `status.allocation.devices.config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAllocationConfiguration {
    /// `source`.
    pub source: AllocationConfigSource,
    /// The requests it applies to (empty: all of them).
    pub requests: Vec<String>,
    /// The driver's opaque configuration.
    pub opaque: Option<OpaqueDeviceConfiguration>,
}

/// One allocated device (`status.allocation.devices.results[]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRequestAllocationResult {
    /// The request (`<request>` or `<request>/<subrequest>`).
    pub request: String,
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device's name in the pool.
    pub device: String,
    /// `adminAccess`: the device was allocated for administration, not exclusively.
    pub admin_access: Option<bool>,
    /// The tolerations of the request that let the device be allocated.
    pub tolerations: Vec<DeviceToleration>,
    /// The device's `bindingConditions`: PreBind waits until all are true.
    pub binding_conditions: Vec<String>,
    /// The device's `bindingFailureConditions`: any true one fails the binding.
    pub binding_failure_conditions: Vec<String>,
    /// `shareID`: which share of a device with `allowMultipleAllocations`.
    pub share_id: Option<String>,
    /// `consumedCapacity`: what the share takes of the device's capacity.
    pub consumed_capacity: BTreeMap<String, Quantity>,
}

impl DeviceRequestAllocationResult {
    /// The device's identity across the cluster: driver, pool and name.
    pub fn device_id(&self) -> DeviceId {
        DeviceId {
            driver: self.driver.clone(),
            pool: self.pool.clone(),
            device: self.device.clone(),
        }
    }
}

/// `status.allocation`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationResult {
    /// `devices.results`.
    pub devices: Vec<DeviceRequestAllocationResult>,
    /// `devices.config`.
    pub config: Vec<DeviceAllocationConfiguration>,
    /// `nodeSelector`: the nodes the devices are reachable from (`None`: every node).
    pub node_selector: Option<Vec<NodeSelectorTerm>>,
    /// `allocationTimestamp`, in milliseconds since the Unix epoch.
    pub allocation_timestamp_ms: Option<i64>,
}

/// An entry of `status.reservedFor`: who uses the claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerReference {
    /// `apiGroup` (empty for the core group: pods).
    pub api_group: String,
    /// `resource` (`pods` for a pod).
    pub resource: String,
    /// The name.
    pub name: String,
    /// The UID.
    pub uid: String,
}

impl ConsumerReference {
    /// The reference to a pod.
    pub fn pod(name: &str, uid: &str) -> ConsumerReference {
        ConsumerReference {
            api_group: String::new(),
            resource: "pods".to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
        }
    }

    /// Whether this refers to the pod of this UID.
    pub fn is_pod(&self, uid: &str) -> bool {
        self.api_group.is_empty() && self.resource == "pods" && self.uid == uid
    }
}

/// A condition a driver writes on an allocated device (`status.devices[].conditions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCondition {
    /// `type`.
    pub type_: String,
    /// `status == "True"`.
    pub status: bool,
}

/// An entry of `status.devices`: what a driver reports of an allocated device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedDeviceStatus {
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device.
    pub device: String,
    /// `shareID`.
    pub share_id: Option<String>,
    /// `conditions`.
    pub conditions: Vec<DeviceCondition>,
}

/// `status` of a ResourceClaim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceClaimStatus {
    /// `allocation`: `None` while unallocated.
    pub allocation: Option<AllocationResult>,
    /// `reservedFor`.
    pub reserved_for: Vec<ConsumerReference>,
    /// `devices`.
    pub devices: Vec<AllocatedDeviceStatus>,
}

/// The controlling owner of an object (`metadata.ownerReferences[]` with
/// `controller: true`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerReference {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `name`.
    pub name: String,
    /// `uid`.
    pub uid: String,
}

/// A ResourceClaim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceClaim {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`: a status write names it, and fails when the claim
    /// changed since.
    pub resource_version: String,
    /// `metadata.annotations`.
    pub annotations: Labels,
    /// The controlling owner (a pod, for a claim made from a template).
    pub controller: Option<ControllerReference>,
    /// The claim has a deletion timestamp.
    pub terminating: bool,
    /// `spec.devices`.
    pub spec: DeviceClaim,
    /// `status`.
    pub status: ResourceClaimStatus,
}

impl ResourceClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the claim is reserved for the pod of this UID.
    pub fn is_reserved_for(&self, pod_uid: &str) -> bool {
        self.status.reserved_for.iter().any(|r| r.is_pod(pod_uid))
    }

    /// Whether the claim was made for the pod of this UID (its controlling owner is
    /// the pod), as upstream's `resourceclaim.IsForPod`.
    pub fn is_for_pod(&self, pod_uid: &str) -> bool {
        self.controller.as_ref().is_some_and(|c| c.uid == pod_uid)
    }
}

/// A ResourceClaimTemplate: the claim made for each pod that names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceClaimTemplate {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// `spec.metadata.labels`: copied to every claim made from it.
    pub claim_labels: Labels,
    /// `spec.metadata.annotations`: copied to every claim made from it.
    pub claim_annotations: Labels,
    /// `spec.spec.devices`.
    pub spec: DeviceClaim,
}

/// A device attribute's value (`attributes[*]`: exactly one of its fields).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DeviceAttribute {
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `string`.
    String(String),
    /// `version`: a semantic version (`1.2.3`).
    Version(String),
}

/// The bounds a share of a device's capacity must keep (`requestPolicy.validRange`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityRange {
    /// `min`.
    pub min: Quantity,
    /// `max`.
    pub max: Option<Quantity>,
    /// `step`: a share is `min` plus a multiple of it.
    pub step: Option<Quantity>,
}

/// How a shared device's capacity may be asked for (`requestPolicy`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityRequestPolicy {
    /// `default`: what a request that names none takes.
    pub default: Option<Quantity>,
    /// `validValues`, ascending.
    pub valid_values: Vec<Quantity>,
    /// `validRange`.
    pub valid_range: Option<CapacityRange>,
}

/// A device's capacity of one kind (`capacity[*]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCapacity {
    /// `value`.
    pub value: Quantity,
    /// `requestPolicy`.
    pub request_policy: Option<CapacityRequestPolicy>,
}

/// What a device takes from a counter set of its slice (`consumesCounters[]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCounterConsumption {
    /// `counterSet`: the name of a set in the pool's `sharedCounters`.
    pub counter_set: String,
    /// `counters`: by name, how much of each.
    pub counters: BTreeMap<String, Quantity>,
}

/// A device of a slice.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// The name, unique in the pool.
    pub name: String,
    /// `attributes`, by qualified name (`domain/name`, or a bare name meaning the
    /// driver's domain).
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// `capacity`, by qualified name.
    pub capacity: BTreeMap<String, DeviceCapacity>,
    /// `consumesCounters`.
    pub consumes_counters: Vec<DeviceCounterConsumption>,
    /// With `perDeviceNodeSelection`: the one node the device is reachable from.
    pub node_name: Option<String>,
    /// With `perDeviceNodeSelection`: the nodes the device is reachable from.
    pub node_selector: Option<Vec<NodeSelectorTerm>>,
    /// With `perDeviceNodeSelection`: reachable from every node.
    pub all_nodes: bool,
    /// `taints`.
    pub taints: Vec<DeviceTaint>,
    /// `bindsToNode`: the allocation is for the chosen node only.
    pub binds_to_node: bool,
    /// `bindingConditions`.
    pub binding_conditions: Vec<String>,
    /// `bindingFailureConditions`.
    pub binding_failure_conditions: Vec<String>,
    /// `allowMultipleAllocations`: several claims may each take a share.
    pub allow_multiple_allocations: bool,
}

/// A pool of a driver (`spec.pool`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourcePool {
    /// The name, unique for the driver.
    pub name: String,
    /// `generation`: only the slices of the pool's highest generation count.
    pub generation: i64,
    /// `resourceSliceCount`: how many slices the generation has; a pool with fewer
    /// published is incomplete.
    pub resource_slice_count: i64,
}

/// Which nodes a slice's devices are reachable from (exactly one of the four fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SliceNodes {
    /// `nodeName`.
    NodeName(String),
    /// `nodeSelector`.
    NodeSelector(Vec<NodeSelectorTerm>),
    /// `allNodes`.
    #[default]
    AllNodes,
    /// `perDeviceNodeSelection`: each device says.
    PerDevice,
}

/// A named set of counters devices of the pool consume (`sharedCounters[]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterSet {
    /// The name.
    pub name: String,
    /// `counters`: by name, how much there is.
    pub counters: BTreeMap<String, Quantity>,
}

/// A ResourceSlice.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSlice {
    /// The name.
    pub name: String,
    /// `spec.driver`.
    pub driver: String,
    /// `spec.pool`.
    pub pool: ResourcePool,
    /// Where the devices are reachable from.
    pub nodes: SliceNodes,
    /// `spec.devices`.
    pub devices: Vec<Device>,
    /// `spec.sharedCounters`.
    pub shared_counters: Vec<CounterSet>,
}

/// Which devices a DeviceTaintRule taints (`spec.deviceSelector`): all the fields given
/// must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceTaintSelector {
    /// `driver`.
    pub driver: Option<String>,
    /// `pool`.
    pub pool: Option<String>,
    /// `device`.
    pub device: Option<String>,
}

impl DeviceTaintSelector {
    /// Whether the device of this driver and pool is selected.
    pub fn selects(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.driver.as_deref().is_none_or(|d| d == driver)
            && self.pool.as_deref().is_none_or(|p| p == pool)
            && self.device.as_deref().is_none_or(|d| d == device)
    }
}

/// A DeviceTaintRule: a taint put on the devices it selects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceTaintRule {
    /// The name.
    pub name: String,
    /// `spec.deviceSelector`.
    pub selector: DeviceTaintSelector,
    /// `spec.taint`.
    pub taint: DeviceTaint,
}

/// A device's identity across the cluster.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceId {
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device's name in the pool.
    pub device: String,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, resource: Option<&str>) -> DeviceClass {
        DeviceClass {
            name: name.into(),
            uid: String::new(),
            selectors: Vec::new(),
            config: Vec::new(),
            extended_resource_name: resource.map(str::to_owned),
        }
    }

    #[test]
    fn each_class_backs_its_implicit_resource_and_the_one_it_names() {
        let backed = extended_resource_classes(&[
            class("b-gpu", Some("example.com/gpu")),
            class("a-gpu", Some("example.com/gpu")),
            class("fpga", None),
        ]);
        let get = |r: &str| backed.get(r).map(String::as_str);
        // Two classes name the same resource: the lowest name backs it.
        assert_eq!(get("example.com/gpu"), Some("a-gpu"));
        assert_eq!(
            get("deviceclass.resource.kubernetes.io/b-gpu"),
            Some("b-gpu")
        );
        assert_eq!(get("deviceclass.resource.kubernetes.io/fpga"), Some("fpga"));
        assert_eq!(backed.len(), 4);
    }
}
