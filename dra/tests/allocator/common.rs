//! Builders named after those of upstream's allocator test table
//! (`structured/internal/allocatortesting`), so that each row reads like its
//! upstream counterpart, and the runner that checks a row's outcome.

#![allow(dead_code)]

use berth_dra::{AllocError, AllocatedState, Allocator, Features};
use berth_sdk::Node;
use berth_sdk::affinity::{NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm};
use berth_sdk::dra::*;
use berth_sdk::quantity::Quantity;
use berth_sdk::types::{Labels, TolerationOperator};
use std::collections::BTreeMap;

pub const REGION1: &str = "region-1";
pub const REGION2: &str = "region-2";
pub const NODE1: &str = "node-1";
pub const NODE2: &str = "node-2";
pub const CLASS_A: &str = "class-a";
pub const CLASS_B: &str = "class-b";
pub const DRIVER_A: &str = "driver-a";
pub const DRIVER_B: &str = "driver-b";
pub const POOL1: &str = "pool-1";
pub const POOL2: &str = "pool-2";
pub const POOL3: &str = "pool-3";
pub const POOL4: &str = "pool-4";
pub const REQ0: &str = "req-0";
pub const REQ1: &str = "req-1";
pub const REQ2: &str = "req-2";
pub const REQ3: &str = "req-3";
pub const SUB_REQ0: &str = "subReq-0";
pub const SUB_REQ1: &str = "subReq-1";
pub const REQ0_SUB_REQ0: &str = "req-0/subReq-0";
pub const REQ0_SUB_REQ1: &str = "req-0/subReq-1";
pub const REQ1_SUB_REQ0: &str = "req-1/subReq-0";
pub const REQ1_SUB_REQ1: &str = "req-1/subReq-1";
pub const REQ2_SUB_REQ0: &str = "req-2/subReq-0";
pub const REQ2_SUB_REQ1: &str = "req-2/subReq-1";
pub const CLAIM0: &str = "claim-0";
pub const CLAIM1: &str = "claim-1";
pub const SLICE1: &str = "slice-1";
pub const SLICE2: &str = "slice-2";
pub const SLICE3: &str = "slice-3";
pub const SLICE4: &str = "slice-4";
pub const DEVICE0: &str = "device-0";
pub const DEVICE1: &str = "device-1";
pub const DEVICE2: &str = "device-2";
pub const DEVICE3: &str = "device-3";
pub const DEVICE4: &str = "device-4";
pub const COUNTER_SET1: &str = "counter-set-1";
pub const COUNTER_SET2: &str = "counter-set-2";
pub const CAPACITY0: &str = "capacity-0";
pub const CAPACITY1: &str = "capacity-1";
pub const REGION_KEY: &str = "region";
pub const PLANET_KEY: &str = "planet";
pub const PLANET_EARTH: &str = "earth";
pub const FIELD_NAME_KEY: &str = "metadata.name";

pub fn q(s: &str) -> Quantity {
    Quantity::from(s)
}

pub fn node(name: &str, region: &str) -> Node {
    Node {
        name: name.into(),
        labels: Labels::from([
            (REGION_KEY.to_owned(), region.to_owned()),
            (PLANET_KEY.to_owned(), PLANET_EARTH.to_owned()),
        ]),
        ..Node::default()
    }
}

pub fn selector(expression: &str) -> DeviceSelector {
    DeviceSelector {
        expression: expression.to_owned(),
    }
}

pub fn class(name: &str, driver: &str) -> DeviceClass {
    DeviceClass {
        name: name.into(),
        uid: String::new(),
        selectors: vec![selector(&format!(r#"device.driver == "{driver}""#))],
        config: vec![],
        extended_resource_name: None,
    }
}

pub fn class_with_allow_multiple_allocations(name: &str, driver: &str, multi: bool) -> DeviceClass {
    DeviceClass {
        selectors: vec![selector(&format!(
            r#"device.driver == "{driver}" && device.allowMultipleAllocations == {multi}"#
        ))],
        ..class(name, driver)
    }
}

pub fn device_configuration(driver: &str, attribute: &str) -> OpaqueDeviceConfiguration {
    OpaqueDeviceConfiguration {
        driver: driver.into(),
        parameters: format!(r#"{{"{attribute}":"{attribute}Value"}}"#),
    }
}

pub fn class_with_config(name: &str, driver: &str, attribute: &str) -> DeviceClass {
    DeviceClass {
        config: vec![DeviceConfiguration {
            requests: vec![],
            opaque: Some(device_configuration(driver, attribute)),
        }],
        ..class(name, driver)
    }
}

pub fn sub_request(name: &str, class: &str, count: i64) -> DeviceSubRequest {
    DeviceSubRequest {
        name: name.into(),
        device_class_name: class.into(),
        selectors: vec![],
        allocation_mode: AllocationMode::ExactCount(count),
        admin_access: false,
        tolerations: vec![],
        capacity: BTreeMap::new(),
    }
}

pub fn request(name: &str, class: &str, count: i64) -> DeviceRequest {
    DeviceRequest::Exactly(sub_request(name, class, count))
}

pub fn request_with(name: &str, class: &str, count: i64, selectors: &[&str]) -> DeviceRequest {
    DeviceRequest::Exactly(DeviceSubRequest {
        selectors: selectors.iter().map(|s| selector(s)).collect(),
        ..sub_request(name, class, count)
    })
}

pub fn all_request(name: &str, class: &str) -> DeviceRequest {
    DeviceRequest::Exactly(DeviceSubRequest {
        allocation_mode: AllocationMode::All,
        ..sub_request(name, class, 0)
    })
}

pub fn admin(r: DeviceRequest) -> DeviceRequest {
    match r {
        DeviceRequest::Exactly(s) => DeviceRequest::Exactly(DeviceSubRequest {
            admin_access: true,
            ..s
        }),
        other => other,
    }
}

pub fn with_capacity_request(r: DeviceRequest, quantity: Option<&str>) -> DeviceRequest {
    match r {
        DeviceRequest::Exactly(s) => DeviceRequest::Exactly(sub_with_capacity_request(s, quantity)),
        other => other,
    }
}

pub fn sub_with_capacity_request(s: DeviceSubRequest, quantity: Option<&str>) -> DeviceSubRequest {
    DeviceSubRequest {
        capacity: quantity
            .map(|v| BTreeMap::from([(CAPACITY0.to_owned(), q(v))]))
            .unwrap_or_default(),
        ..s
    }
}

pub fn sub_with_selectors(s: DeviceSubRequest, selectors: &[&str]) -> DeviceSubRequest {
    DeviceSubRequest {
        selectors: selectors.iter().map(|e| selector(e)).collect(),
        ..s
    }
}

pub fn sub_with_tolerations(
    s: DeviceSubRequest,
    tolerations: &[DeviceToleration],
) -> DeviceSubRequest {
    DeviceSubRequest {
        tolerations: tolerations.to_vec(),
        ..s
    }
}

pub fn sub_all(s: DeviceSubRequest) -> DeviceSubRequest {
    DeviceSubRequest {
        allocation_mode: AllocationMode::All,
        ..s
    }
}

pub fn prioritized(name: &str, subrequests: Vec<DeviceSubRequest>) -> DeviceRequest {
    DeviceRequest::FirstAvailable {
        name: name.into(),
        subrequests,
    }
}

pub fn claim(name: &str) -> ResourceClaim {
    ResourceClaim {
        name: name.into(),
        uid: format!("uid-{name}"),
        ..ResourceClaim::default()
    }
}

pub fn claim_with_requests(
    name: &str,
    constraints: Vec<DeviceConstraint>,
    requests: Vec<DeviceRequest>,
) -> ResourceClaim {
    let mut c = claim(name);
    c.spec.requests = requests;
    c.spec.constraints = constraints;
    c
}

pub fn claim_with_request(name: &str, req: &str, class: &str) -> ResourceClaim {
    claim_with_requests(name, vec![], vec![request(req, class, 1)])
}

pub fn claim_with_device_config(
    name: &str,
    req: &str,
    class: &str,
    driver: &str,
    attribute: &str,
) -> ResourceClaim {
    let mut c = claim_with_request(name, req, class);
    c.spec.config = vec![DeviceConfiguration {
        requests: vec![],
        opaque: Some(device_configuration(driver, attribute)),
    }];
    c
}

pub fn with_tolerations(mut c: ResourceClaim, tolerations: &[DeviceToleration]) -> ResourceClaim {
    for r in &mut c.spec.requests {
        if let DeviceRequest::Exactly(s) = r {
            s.tolerations.extend_from_slice(tolerations);
        }
    }
    c
}

pub fn claim_config(requests: &[&str], config: OpaqueDeviceConfiguration) -> DeviceConfiguration {
    DeviceConfiguration {
        requests: requests.iter().map(|r| (*r).to_owned()).collect(),
        opaque: Some(config),
    }
}

pub fn match_attribute(name: &str, requests: &[&str]) -> DeviceConstraint {
    DeviceConstraint {
        requests: requests.iter().map(|r| (*r).to_owned()).collect(),
        match_attribute: Some(name.to_owned()),
        distinct_attribute: None,
    }
}

pub fn distinct_attribute(name: &str, requests: &[&str]) -> DeviceConstraint {
    DeviceConstraint {
        requests: requests.iter().map(|r| (*r).to_owned()).collect(),
        match_attribute: None,
        distinct_attribute: Some(name.to_owned()),
    }
}

pub fn device(name: &str) -> Device {
    Device {
        name: name.into(),
        ..Device::default()
    }
}

/// Capacities without request policies.
pub fn capacities(values: &[(&str, &str)]) -> BTreeMap<String, DeviceCapacity> {
    values
        .iter()
        .map(|(k, v)| {
            (
                (*k).to_owned(),
                DeviceCapacity {
                    value: q(v),
                    request_policy: None,
                },
            )
        })
        .collect()
}

pub fn with_capacity(d: Device, values: &[(&str, &str)]) -> Device {
    Device {
        capacity: capacities(values),
        ..d
    }
}

pub fn with_attributes(d: Device, attributes: &[(&str, DeviceAttribute)]) -> Device {
    Device {
        attributes: attributes
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
        ..d
    }
}

pub fn with_taints(mut d: Device, taints: &[DeviceTaint]) -> Device {
    d.taints.extend_from_slice(taints);
    d
}

pub fn counters(values: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    values
        .iter()
        .map(|(k, v)| ((*k).to_owned(), q(v)))
        .collect()
}

pub fn consumption(set: &str, values: &[(&str, &str)]) -> DeviceCounterConsumption {
    DeviceCounterConsumption {
        counter_set: set.into(),
        counters: counters(values),
    }
}

pub fn with_counter_consumption(mut d: Device, c: Vec<DeviceCounterConsumption>) -> Device {
    d.consumes_counters.extend(c);
    d
}

/// Capacity mirrored from the counters a device consumes (upstream's `fromCounters`).
pub fn with_counter_consumption_as_capacity(
    mut d: Device,
    c: Vec<DeviceCounterConsumption>,
) -> Device {
    d.consumes_counters.extend(c);
    d.capacity = d
        .consumes_counters
        .iter()
        .flat_map(|c| c.counters.iter())
        .map(|(k, v)| {
            (
                k.clone(),
                DeviceCapacity {
                    value: v.clone(),
                    request_policy: None,
                },
            )
        })
        .collect();
    d
}

pub enum Nodes<'a> {
    Name(&'a str),
    All,
    PerDevice,
    Selector(Vec<NodeSelectorTerm>),
}

impl Nodes<'_> {
    fn slice_nodes(&self) -> SliceNodes {
        match self {
            Nodes::Name(n) => SliceNodes::NodeName((*n).to_owned()),
            Nodes::All => SliceNodes::AllNodes,
            Nodes::PerDevice => SliceNodes::PerDevice,
            Nodes::Selector(t) => SliceNodes::NodeSelector(t.clone()),
        }
    }
}

pub fn with_node_selection(mut d: Device, nodes: Nodes<'_>) -> Device {
    match nodes {
        Nodes::Name(n) => d.node_name = Some(n.to_owned()),
        Nodes::All => d.all_nodes = true,
        Nodes::Selector(t) => d.node_selector = Some(t),
        Nodes::PerDevice => panic!("per-device node selection is for slices"),
    }
    d
}

pub fn with_binding_conditions(mut d: Device, conditions: &[&str], failures: &[&str]) -> Device {
    d.binding_conditions = conditions.iter().map(|c| (*c).to_owned()).collect();
    d.binding_failure_conditions = failures.iter().map(|c| (*c).to_owned()).collect();
    d
}

pub fn with_binds_to_node(mut d: Device) -> Device {
    d.binds_to_node = true;
    d
}

pub fn with_allow_multiple_allocations(mut d: Device) -> Device {
    d.allow_multiple_allocations = true;
    d
}

/// Capacities with upstream's default range policy: default 2, min 2, step 2, max 4.
pub fn with_capacity_request_policy_range(mut d: Device, values: &[(&str, &str)]) -> Device {
    for (k, v) in values {
        d.capacity.insert(
            (*k).to_owned(),
            DeviceCapacity {
                value: q(v),
                request_policy: Some(CapacityRequestPolicy {
                    default: Some(q("2")),
                    valid_values: vec![],
                    valid_range: Some(CapacityRange {
                        min: q("2"),
                        max: Some(q("4")),
                        step: Some(q("2")),
                    }),
                }),
            },
        );
    }
    d
}

/// Capacities with a default that is also the smallest valid value.
pub fn with_capacity_request_policy_valid_values(
    mut d: Device,
    default: &str,
    values: &[(&str, &str)],
    additional: &[&str],
) -> Device {
    for (k, v) in values {
        let mut valid = vec![q(default)];
        valid.extend(additional.iter().map(|a| q(a)));
        d.capacity.insert(
            (*k).to_owned(),
            DeviceCapacity {
                value: q(v),
                request_policy: Some(CapacityRequestPolicy {
                    default: Some(q(default)),
                    valid_values: valid,
                    valid_range: None,
                }),
            },
        );
    }
    d
}

pub enum PoolSpec<'a> {
    /// Generation 1, one slice.
    Name(&'a str),
    /// Generation 1, this many slices.
    Count(&'a str, i64),
}

pub fn resource_pool(name: &str, count: i64) -> PoolSpec<'_> {
    PoolSpec::Count(name, count)
}

impl From<&'static str> for PoolSpec<'static> {
    fn from(s: &'static str) -> Self {
        PoolSpec::Name(s)
    }
}

pub fn slice(name: &str, nodes: Nodes<'_>, pool: PoolSpec<'_>, driver: &str) -> ResourceSlice {
    let (pool_name, count) = match pool {
        PoolSpec::Name(n) => (n, 1),
        PoolSpec::Count(n, c) => (n, c),
    };
    ResourceSlice {
        name: name.into(),
        driver: driver.into(),
        pool: ResourcePool {
            name: pool_name.into(),
            generation: 1,
            resource_slice_count: count,
        },
        nodes: nodes.slice_nodes(),
        devices: vec![],
        shared_counters: vec![],
    }
}

pub fn slice_with_devices(
    name: &str,
    nodes: Nodes<'_>,
    pool: PoolSpec<'_>,
    driver: &str,
    devices: Vec<Device>,
) -> ResourceSlice {
    ResourceSlice {
        devices,
        ..slice(name, nodes, pool, driver)
    }
}

pub fn slice_with_one_device(
    name: &str,
    nodes: Nodes<'_>,
    pool: PoolSpec<'_>,
    driver: &str,
) -> ResourceSlice {
    slice_with_devices(name, nodes, pool, driver, vec![device(DEVICE1)])
}

pub fn slice_with_no_devices(
    name: &str,
    nodes: Nodes<'_>,
    pool: PoolSpec<'_>,
    driver: &str,
) -> ResourceSlice {
    slice(name, nodes, pool, driver)
}

pub fn slice_with_multiple_devices(
    name: &str,
    nodes: Nodes<'_>,
    pool: PoolSpec<'_>,
    driver: &str,
    count: usize,
) -> ResourceSlice {
    slice_with_devices(
        name,
        nodes,
        pool,
        driver,
        (0..count).map(|i| device(&format!("device-{i}"))).collect(),
    )
}

pub fn counter_set(name: &str, values: &[(&str, &str)]) -> CounterSet {
    CounterSet {
        name: name.into(),
        counters: counters(values),
    }
}

pub fn slice_with_counter_sets(
    name: &str,
    nodes: Nodes<'_>,
    pool: PoolSpec<'_>,
    driver: &str,
    sets: Vec<CounterSet>,
) -> ResourceSlice {
    ResourceSlice {
        shared_counters: sets,
        ..slice(name, nodes, pool, driver)
    }
}

pub fn result(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
    admin_access: bool,
) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request: request.into(),
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
        admin_access: admin_access.then_some(true),
        tolerations: vec![],
        binding_conditions: vec![],
        binding_failure_conditions: vec![],
        share_id: None,
        consumed_capacity: BTreeMap::new(),
    }
}

pub fn result_tolerating(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
    tolerations: &[DeviceToleration],
) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        tolerations: tolerations.to_vec(),
        ..result(request, driver, pool, device, false)
    }
}

/// A share of a device, with what it consumes (the share ID is checked for its form
/// and then ignored, as upstream replaces it with a fixed one).
pub fn result_with_consumed_capacity(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
    consumed: &[(&str, &str)],
) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        share_id: Some(FIXED_SHARE_ID.to_owned()),
        consumed_capacity: counters(consumed),
        ..result(request, driver, pool, device, false)
    }
}

pub fn result_with_binding_conditions(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
    conditions: &[&str],
    failures: &[&str],
) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        binding_conditions: conditions.iter().map(|c| (*c).to_owned()).collect(),
        binding_failure_conditions: failures.iter().map(|c| (*c).to_owned()).collect(),
        ..result(request, driver, pool, device, false)
    }
}

pub fn multiple_results(
    request: &str,
    driver: &str,
    pool: &str,
    count: usize,
    start: usize,
) -> Vec<DeviceRequestAllocationResult> {
    (start..start + count)
        .map(|i| result(request, driver, pool, &format!("device-{i}"), false))
        .collect()
}

pub const FIXED_SHARE_ID: &str = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";

pub fn node_label_selector(key: &str, values: &[&str]) -> Vec<NodeSelectorTerm> {
    vec![NodeSelectorTerm {
        match_expressions: vec![NodeSelectorRequirement {
            key: key.into(),
            operator: NodeSelectorOperator::In,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }],
        match_fields: vec![],
    }]
}

pub fn local_node_selector(node: &str) -> Option<Vec<NodeSelectorTerm>> {
    Some(vec![NodeSelectorTerm {
        match_expressions: vec![],
        match_fields: vec![NodeSelectorRequirement {
            key: FIELD_NAME_KEY.into(),
            operator: NodeSelectorOperator::In,
            values: vec![node.to_owned()],
        }],
    }])
}

pub fn allocation(
    selector: Option<Vec<NodeSelectorTerm>>,
    devices: Vec<DeviceRequestAllocationResult>,
) -> AllocationResult {
    AllocationResult {
        devices,
        config: vec![],
        node_selector: selector,
        allocation_timestamp_ms: None,
    }
}

pub fn allocation_with_config(
    selector: Option<Vec<NodeSelectorTerm>>,
    driver: &str,
    source: AllocationConfigSource,
    attribute: &str,
    devices: Vec<DeviceRequestAllocationResult>,
) -> AllocationResult {
    AllocationResult {
        config: vec![DeviceAllocationConfiguration {
            source,
            requests: vec![],
            opaque: Some(device_configuration(driver, attribute)),
        }],
        ..allocation(selector, devices)
    }
}

pub fn allocation_with_configs(
    selector: Option<Vec<NodeSelectorTerm>>,
    devices: Vec<DeviceRequestAllocationResult>,
    configs: Vec<DeviceAllocationConfiguration>,
) -> AllocationResult {
    AllocationResult {
        config: configs,
        ..allocation(selector, devices)
    }
}

pub fn config(
    source: AllocationConfigSource,
    requests: &[&str],
    driver: &str,
    attribute: &str,
) -> DeviceAllocationConfiguration {
    DeviceAllocationConfiguration {
        source,
        requests: requests.iter().map(|r| (*r).to_owned()).collect(),
        opaque: Some(device_configuration(driver, attribute)),
    }
}

pub fn id(driver: &str, pool: &str, device: &str) -> DeviceId {
    DeviceId {
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
    }
}

pub fn taint(key: &str, value: &str, effect: DeviceTaintEffect) -> DeviceTaint {
    DeviceTaint {
        key: key.into(),
        value: value.into(),
        effect,
        time_added_ms: None,
    }
}

pub fn toleration(
    key: &str,
    operator: TolerationOperator,
    value: &str,
    effect: Option<DeviceTaintEffect>,
) -> DeviceToleration {
    DeviceToleration {
        key: key.into(),
        operator,
        value: value.into(),
        effect,
        toleration_seconds: None,
    }
}

/// One row of the table.
pub struct Case {
    pub features: Features,
    pub claims: Vec<ResourceClaim>,
    pub allocated: Vec<DeviceId>,
    pub allocated_state: AllocatedState,
    pub classes: Vec<DeviceClass>,
    pub slices: Vec<ResourceSlice>,
    pub taint_rules: Vec<DeviceTaintRule>,
    pub node: Node,
}

impl Default for Case {
    /// As upstream's rows: no feature gates, node-1 in region-1.
    fn default() -> Self {
        Case {
            features: Features::none(),
            claims: vec![],
            allocated: vec![],
            allocated_state: AllocatedState::default(),
            classes: vec![],
            slices: vec![],
            taint_rules: vec![],
            node: node(NODE1, REGION1),
        }
    }
}

pub fn features(f: impl FnOnce(&mut Features)) -> Features {
    let mut features = Features::none();
    f(&mut features);
    features
}

impl Case {
    pub fn run(&self) -> Result<Option<Vec<AllocationResult>>, AllocError> {
        self.run_counting().0
    }

    /// The outcome and how many search steps it took.
    pub fn run_counting(&self) -> (Result<Option<Vec<AllocationResult>>, AllocError>, i64) {
        let mut state = self.allocated_state.clone();
        state.devices.extend(self.allocated.iter().cloned());
        let allocator = Allocator::new(
            self.features,
            self.classes.clone(),
            self.slices.clone(),
            state,
            &self.taint_rules,
        );
        let claims: Vec<&ResourceClaim> = self.claims.iter().collect();
        let outcome = allocator.allocate(&self.node, &claims);
        (outcome, allocator.search_steps())
    }
}

/// Sorts what upstream compares as sets (device results, node selector terms,
/// requirements and values) and replaces share IDs, after checking they are UUIDs.
fn normalize(results: &mut [AllocationResult]) {
    for r in results {
        for d in &mut r.devices {
            if let Some(share) = &mut d.share_id {
                assert!(is_uuid(share), "share ID {share:?} is not a UUID");
                *share = FIXED_SHARE_ID.to_owned();
            }
        }
        r.devices.sort_by(|a, b| {
            (&a.request, &a.driver, &a.pool, &a.device)
                .cmp(&(&b.request, &b.driver, &b.pool, &b.device))
        });
        if let Some(terms) = &mut r.node_selector {
            for t in terms.iter_mut() {
                for reqs in [&mut t.match_expressions, &mut t.match_fields] {
                    for req in reqs.iter_mut() {
                        req.values.sort();
                    }
                    reqs.sort_by(|a, b| (&a.key, &a.values).cmp(&(&b.key, &b.values)));
                }
            }
        }
    }
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && s.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
}

#[track_caller]
pub fn expect_results(case: Case, expected: Vec<AllocationResult>) {
    expect_results_in_steps(case, expected, None);
}

/// As [`expect_results`], and the search took exactly `steps` steps (upstream's
/// `expectNumAllocateOneInvocations`).
#[track_caller]
pub fn expect_results_in_steps(
    case: Case,
    mut expected: Vec<AllocationResult>,
    steps: Option<i64>,
) {
    let (got, taken) = case.run_counting();
    if let Some(steps) = steps {
        assert_eq!(taken, steps, "search steps");
    }
    let Ok(Some(mut got)) = got else {
        panic!("expected results, got {got:?}");
    };
    normalize(&mut got);
    normalize(&mut expected);
    assert_eq!(got, expected);
}

/// The claims cannot be allocated on the node, without an error.
#[track_caller]
pub fn expect_none(case: Case) {
    let got = case.run();
    assert!(
        matches!(got, Ok(None)),
        "expected no allocation, got {got:?}"
    );
}

/// An error whose text contains `text`.
#[track_caller]
pub fn expect_error(case: Case, text: &str) -> AllocError {
    match case.run() {
        Err(e) => {
            assert!(
                e.to_string().contains(text),
                "error {e:?} does not contain {text:?}"
            );
            e
        }
        other => panic!("expected an error containing {text:?}, got {other:?}"),
    }
}

/// What shares of devices consume already (upstream's `allocatedCapacityDevices`).
pub fn consumed_state(entries: &[(DeviceId, &[(&str, &str)])]) -> AllocatedState {
    let mut state = AllocatedState::default();
    for (id, consumed) in entries {
        let c = state.consumed_capacity.entry(id.clone()).or_default();
        for (name, value) in *consumed {
            c.insert((*name).to_owned(), q(value).amount().unwrap().nanos);
        }
    }
    state
}
