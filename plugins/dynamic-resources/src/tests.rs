//! Each extension point on the cases of upstream's `dynamicresources_test.go` that
//! Berth can express, named after them, against a host that keeps its claims in
//! memory.

use super::*;
use berth_sdk::dra::{
    AllocatedDeviceStatus, AllocationMode, ConsumerReference, ControllerReference, Device,
    DeviceCondition, DeviceSelector, DeviceSubRequest, DeviceTaintRule, ResourceClaimStatus,
    ResourcePool, ResourceSlice, SliceNodes,
};
use berth_sdk::preemption::{NodeSimulation, PodDisruptionBudget};
use berth_sdk::types::{ClaimSource, PodResourceClaim, PodResourceClaimStatus};
use berth_sdk::{Code, HostApi, Labels, LogLevel, MemoryState, Node};
use std::collections::BTreeMap;

const NS: &str = "default";
const POD: &str = "my-pod";
const POD_UID: &str = "1234";
const CLAIM: &str = "my-pod-my-resource";
const CLASS: &str = "my-resource-class";
const DRIVER: &str = "some-driver";
const WORKER: &str = "worker";

/// The cluster as the host shows it: claims with what cycles assumed of them.
#[derive(Default)]
struct World {
    device_generation: u64,
    claim_generation: u64,
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
    rules: Vec<DeviceTaintRule>,
    /// The cluster's claims by (namespace, name).
    claims: BTreeMap<(String, String), ResourceClaim>,
    /// What cycles assumed.
    assumed: BTreeMap<(String, String), ResourceClaim>,
    /// Every status write, in order.
    written: Vec<ResourceClaim>,
    /// The next status write fails with this.
    write_error: Option<String>,
    /// Applied one per `wait_claim_change`, as a driver's status updates.
    updates: Vec<ResourceClaim>,
    /// Milliseconds every wait reports.
    wait_ms: u64,
}

#[derive(Default)]
struct FakeHost(Mutex<World>);

impl FakeHost {
    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn key(c: &ResourceClaim) -> (String, String) {
    (c.namespace.clone(), c.name.clone())
}

impl HostApi for FakeHost {
    fn log(&self, _: LogLevel, _: &str) {}
    fn bind_pod(&self, _: &Pod, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn namespace_labels(&self, _: &str) -> Option<Labels> {
        None
    }
    fn device_generation(&self) -> u64 {
        self.world().device_generation
    }
    fn claim_generation(&self) -> u64 {
        self.world().claim_generation
    }
    fn device_classes(&self) -> Vec<DeviceClass> {
        self.world().classes.clone()
    }
    fn device_class(&self, name: &str) -> Option<DeviceClass> {
        self.world()
            .classes
            .iter()
            .find(|c| c.name == name)
            .cloned()
    }
    fn resource_slices(&self) -> Vec<ResourceSlice> {
        self.world().slices.clone()
    }
    fn device_taint_rules(&self) -> Vec<DeviceTaintRule> {
        self.world().rules.clone()
    }
    fn resource_claim(&self, namespace: &str, name: &str) -> Option<ResourceClaim> {
        let w = self.world();
        let k = (namespace.to_owned(), name.to_owned());
        w.assumed.get(&k).or(w.claims.get(&k)).cloned()
    }
    fn allocated_resource_claims(&self) -> Vec<ResourceClaim> {
        let w = self.world();
        w.claims
            .keys()
            .filter_map(|k| w.assumed.get(k).or(w.claims.get(k)))
            .filter(|c| c.status.allocation.is_some())
            .cloned()
            .collect()
    }
    /// As the host: anything assumed and not written yet is in flight.
    fn claim_allocation_pending(&self, namespace: &str, name: &str) -> bool {
        self.world()
            .assumed
            .contains_key(&(namespace.to_owned(), name.to_owned()))
    }
    fn assume_resource_claim(&self, claim: &ResourceClaim) -> Result<(), String> {
        let mut w = self.world();
        let k = key(claim);
        match w.claims.get(&k) {
            None => return Err("not found".into()),
            Some(c) if c.resource_version != claim.resource_version => {
                return Err("the claim changed".into());
            }
            Some(_) => {}
        }
        w.assumed.insert(k, claim.clone());
        w.claim_generation += 1;
        Ok(())
    }
    fn restore_resource_claim(&self, namespace: &str, name: &str) {
        let mut w = self.world();
        if w.assumed
            .remove(&(namespace.to_owned(), name.to_owned()))
            .is_some()
        {
            w.claim_generation += 1;
        }
    }
    fn write_resource_claim_status(&self, claim: &ResourceClaim) -> Result<ResourceClaim, String> {
        let mut w = self.world();
        if let Some(e) = w.write_error.take() {
            return Err(e);
        }
        let k = key(claim);
        let Some(current) = w.claims.get(&k) else {
            return Err("not found".into());
        };
        if current.resource_version != claim.resource_version {
            return Err("the object has been modified".into());
        }
        let mut next = current.clone();
        next.status = claim.status.clone();
        next.resource_version = format!("{}", next.resource_version.parse::<u64>().unwrap() + 1);
        w.claims.insert(k.clone(), next.clone());
        w.assumed.remove(&k);
        w.written.push(next.clone());
        w.claim_generation += 1;
        Ok(next)
    }
    fn wait_claim_change(&self, after: u64, timeout_ms: u64) -> (u64, u64) {
        let mut w = self.world();
        assert!(after <= w.claim_generation);
        if w.updates.is_empty() {
            return (w.claim_generation, timeout_ms);
        }
        let update = w.updates.remove(0);
        let k = key(&update);
        w.claims.insert(k, update);
        w.claim_generation += 1;
        (w.claim_generation, w.wait_ms.min(timeout_ms))
    }
}

/// Tests share the process-wide native host: one at a time.
static HOST_LOCK: Mutex<()> = Mutex::new(());

/// Installs a host with these objects and runs `f` with it.
fn with_host(world: World, f: impl FnOnce(&FakeHost)) {
    let _guard = HOST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let host = Arc::new(FakeHost(Mutex::new(world)));
    berth_sdk::set_native_host(host.clone());
    f(&host);
}

fn class() -> DeviceClass {
    DeviceClass {
        name: CLASS.into(),
        uid: "class-uid".into(),
        selectors: vec![DeviceSelector {
            expression: format!("device.driver == \"{DRIVER}\""),
        }],
        config: vec![],
        extended_resource_name: None,
    }
}

fn device(name: &str) -> Device {
    Device {
        name: name.into(),
        ..Device::default()
    }
}

fn slice(node: &str, devices: Vec<Device>) -> ResourceSlice {
    ResourceSlice {
        name: format!("{node}-slice"),
        driver: DRIVER.into(),
        pool: ResourcePool {
            name: node.into(),
            generation: 1,
            resource_slice_count: 1,
        },
        nodes: SliceNodes::NodeName(node.into()),
        devices,
        shared_counters: vec![],
    }
}

fn request(name: &str, class: &str) -> DeviceSubRequest {
    DeviceSubRequest {
        name: name.into(),
        device_class_name: class.into(),
        selectors: vec![],
        allocation_mode: AllocationMode::ExactCount(1),
        admin_access: false,
        tolerations: vec![],
        capacity: Default::default(),
    }
}

/// An unallocated claim asking for one device of the class (upstream's
/// `pendingClaim`), owned by the pod.
fn pending_claim() -> ResourceClaim {
    claim_named(CLAIM)
}

fn claim_named(name: &str) -> ResourceClaim {
    ResourceClaim {
        namespace: NS.into(),
        name: name.into(),
        uid: format!("{name}-uid"),
        resource_version: "1".into(),
        controller: Some(ControllerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: POD.into(),
            uid: POD_UID.into(),
        }),
        spec: berth_sdk::dra::DeviceClaim {
            requests: vec![DeviceRequest::Exactly(request("req-1", CLASS))],
            ..Default::default()
        },
        ..ResourceClaim::default()
    }
}

fn allocation(node: &str, device: &str) -> AllocationResult {
    AllocationResult {
        devices: vec![berth_sdk::dra::DeviceRequestAllocationResult {
            request: "req-1".into(),
            driver: DRIVER.into(),
            pool: node.into(),
            device: device.into(),
            admin_access: None,
            tolerations: vec![],
            binding_conditions: vec![],
            binding_failure_conditions: vec![],
            share_id: None,
            consumed_capacity: BTreeMap::new(),
        }],
        node_selector: Some(vec![NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![berth_sdk::affinity::NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: berth_sdk::affinity::NodeSelectorOperator::In,
                values: vec![node.into()],
            }],
        }]),
        ..AllocationResult::default()
    }
}

/// Upstream's `allocatedClaim`: allocated on the worker, reserved for nobody.
fn allocated_claim() -> ResourceClaim {
    let mut c = pending_claim();
    c.status.allocation = Some(allocation(WORKER, "instance-1"));
    c
}

fn pod_with_claim_name() -> Pod {
    Pod {
        namespace: NS.into(),
        name: POD.into(),
        uid: POD_UID.into(),
        resource_claims: vec![PodResourceClaim {
            name: "my-resource".into(),
            source: ClaimSource::ClaimName(CLAIM.into()),
        }],
        ..Pod::default()
    }
}

fn pod_with_claim_template() -> Pod {
    Pod {
        resource_claims: vec![PodResourceClaim {
            name: "my-resource".into(),
            source: ClaimSource::TemplateName("my-template".into()),
        }],
        ..pod_with_claim_name()
    }
}

fn pod_with_claim_template_in_status() -> Pod {
    Pod {
        resource_claim_statuses: vec![PodResourceClaimStatus {
            name: "my-resource".into(),
            resource_claim_name: Some(CLAIM.into()),
        }],
        ..pod_with_claim_template()
    }
}

fn node(name: &str) -> NodeInfo {
    NodeInfo::new(Node {
        name: name.into(),
        labels: [("kubernetes.io/hostname".to_owned(), name.to_owned())]
            .into_iter()
            .collect(),
        ..Node::default()
    })
}

fn world(
    claims: Vec<ResourceClaim>,
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
) -> World {
    World {
        device_generation: 1,
        claim_generation: 1,
        classes,
        slices,
        claims: claims.into_iter().map(|c| (key(&c), c)).collect(),
        ..World::default()
    }
}

fn plugin() -> DynamicResources {
    DynamicResources::new(berth_sdk::serde_json::Value::Null).unwrap()
}

struct NoDryRun;

impl DryRun for NoDryRun {
    fn pod_disruption_budgets(&self) -> Vec<PodDisruptionBudget> {
        Vec::new()
    }
    fn simulate(&self, _: &str) -> Result<Box<dyn NodeSimulation + '_>, Status> {
        Err(Status::error("no what-if in these tests"))
    }
}

/// PreFilter, then Filter on every node: the statuses.
fn filter_all(
    p: &DynamicResources,
    state: &CycleState,
    pod: &Pod,
    nodes: &[NodeInfo],
) -> (Status, Vec<Status>) {
    let refs: Vec<&NodeInfo> = nodes.iter().collect();
    let pre = p.pre_filter(state, pod, &refs);
    let statuses = nodes.iter().map(|n| p.filter(state, pod, n)).collect();
    (pre.status, statuses)
}

// ------------------------------------------------------------------ PreEnqueue

#[test]
fn empty() {
    with_host(World::default(), |_| {
        let p = plugin();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pod = Pod {
            namespace: NS.into(),
            name: "foo".into(),
            ..Pod::default()
        };
        assert!(p.pre_enqueue(&pod).is_success());
        assert_eq!(p.pre_filter(&state, &pod, &[]).status, Status::skip());
        let post = p.post_filter(&state, &pod, &[], &NoDryRun);
        assert_eq!(
            post.status,
            Status::unschedulable("no new claims to deallocate")
        );
    });
}

#[test]
fn missing_claim() {
    with_host(
        world(vec![allocated_claim()], vec![class()], vec![]),
        |_| {
            let s = plugin().pre_enqueue(&pod_with_claim_template());
            assert_eq!(
                s,
                Status::unresolvable("pod \"default/my-pod\": ResourceClaim not created yet")
            );
        },
    );
}

#[test]
fn deleted_claim() {
    let mut c = allocated_claim();
    c.terminating = true;
    with_host(world(vec![c], vec![class()], vec![]), |_| {
        let s = plugin().pre_enqueue(&pod_with_claim_template_in_status());
        assert_eq!(
            s,
            Status::unresolvable("resourceclaim \"my-pod-my-resource\" is being deleted")
        );
    });
}

#[test]
fn wrong_claim() {
    let mut c = allocated_claim();
    c.controller.as_mut().unwrap().uid += "123";
    with_host(world(vec![c], vec![class()], vec![]), |_| {
        let s = plugin().pre_enqueue(&pod_with_claim_template_in_status());
        assert_eq!(
            s,
            Status::unresolvable(
                "ResourceClaim default/my-pod-my-resource was not created for pod default/my-pod (pod is not owner)"
            )
        );
        // A claim named directly may belong to anyone.
        assert!(plugin().pre_enqueue(&pod_with_claim_name()).is_success());
    });
}

#[test]
fn no_claim_object_is_named_as_the_claim_tracker_does() {
    with_host(world(vec![], vec![class()], vec![]), |_| {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pod = pod_with_claim_name();
        let want =
            Status::unresolvable("could not find ResourceClaim \"default/my-pod-my-resource\"");
        assert_eq!(plugin().pre_enqueue(&pod), want);
        assert_eq!(plugin().pre_filter(&state, &pod, &[]).status, want);
    });
}

#[test]
fn a_template_claim_intentionally_not_made_is_left_out() {
    let pod = Pod {
        resource_claim_statuses: vec![PodResourceClaimStatus {
            name: "my-resource".into(),
            resource_claim_name: None,
        }],
        ..pod_with_claim_template()
    };
    with_host(world(vec![], vec![class()], vec![]), |_| {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        assert!(plugin().pre_enqueue(&pod).is_success());
        assert_eq!(
            plugin().pre_filter(&state, &pod, &[]).status,
            Status::skip()
        );
    });
}

// -------------------------------------------------- allocated claims (reserve only)

/// An allocated claim is only reserved: Reserve assumes the pod into
/// `reservedFor`, PreBind writes it.
fn reserve_allocated_claim(pod: Pod) {
    with_host(
        world(vec![allocated_claim()], vec![class()], vec![]),
        |host| {
            let p = plugin();
            let store = MemoryState::default();
            let state = CycleState::new(&store);
            let (pre, filters) = filter_all(&p, &state, &pod, &[node(WORKER), node("other")]);
            assert!(pre.is_success(), "{pre:?}");
            assert!(filters[0].is_success(), "{:?}", filters[0]);
            assert_eq!(filters[1], Status::unresolvable(ERR_NOT_AVAILABLE));
            assert!(p.reserve(&state, &pod, WORKER).is_success());
            let assumed = host
                .world()
                .assumed
                .get(&(NS.into(), CLAIM.into()))
                .cloned();
            let assumed = assumed.expect("the claim is assumed");
            assert_eq!(
                assumed.status.reserved_for,
                [ConsumerReference::pod(POD, POD_UID)]
            );
            assert_eq!(
                assumed.status.allocation,
                allocated_claim().status.allocation
            );
            assert!(p.pre_bind(&state, &pod, WORKER).is_success());
            let w = host.world();
            assert_eq!(w.written.len(), 1);
            assert_eq!(
                w.written[0].status.reserved_for,
                [ConsumerReference::pod(POD, POD_UID)]
            );
            assert!(w.assumed.is_empty());
        },
    );
}

#[test]
fn claim_reference() {
    reserve_allocated_claim(pod_with_claim_name());
}

#[test]
fn claim_template() {
    reserve_allocated_claim(pod_with_claim_template_in_status());
}

#[test]
fn reserved_okay_writes_nothing() {
    let mut c = allocated_claim();
    c.status.reserved_for = vec![ConsumerReference::pod(POD, POD_UID)];
    with_host(world(vec![c], vec![class()], vec![]), |host| {
        let p = plugin();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pod = pod_with_claim_name();
        let (pre, filters) = filter_all(&p, &state, &pod, &[node(WORKER)]);
        assert!(pre.is_success() && filters[0].is_success());
        assert!(p.reserve(&state, &pod, WORKER).is_success());
        assert!(host.world().assumed.is_empty());
        assert!(p.pre_bind(&state, &pod, WORKER).is_success());
        assert!(host.world().written.is_empty());
    });
}

#[test]
fn in_use_by_others_when_reserved_for_is_full() {
    let mut c = allocated_claim();
    c.status.reserved_for = (0..RESERVED_FOR_MAX)
        .map(|i| ConsumerReference::pod(&format!("p{i}"), &format!("uid-{i}")))
        .collect();
    with_host(world(vec![c.clone()], vec![class()], vec![]), |_| {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let s = plugin()
            .pre_filter(&state, &pod_with_claim_name(), &[])
            .status;
        assert_eq!(s, Status::unresolvable(ERR_IN_USE));
    });
    // One place left: the pod fits.
    c.status.reserved_for.pop();
    with_host(world(vec![c], vec![class()], vec![]), |_| {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let s = plugin()
            .pre_filter(&state, &pod_with_claim_name(), &[])
            .status;
        assert!(s.is_success(), "{s:?}");
    });
}

#[test]
fn a_shared_claim_another_cycle_is_reserving_waits() {
    with_host(
        world(vec![allocated_claim()], vec![class()], vec![]),
        |_| {
            let p = plugin();
            let first = pod_with_claim_name();
            let second = Pod {
                name: "second".into(),
                uid: "second-uid".into(),
                ..pod_with_claim_name()
            };
            let store = MemoryState::default();
            let state = CycleState::new(&store);
            filter_all(&p, &state, &first, &[node(WORKER)]);
            assert!(p.reserve(&state, &first, WORKER).is_success());
            let store2 = MemoryState::default();
            let state2 = CycleState::new(&store2);
            assert_eq!(
                p.pre_filter(&state2, &second, &[]).status,
                Status::unresolvable(
                    "resource claim default/my-pod-my-resource is in the process of being allocated"
                )
            );
            // Once the first pod's binding cycle wrote it, the second may share it.
            assert!(p.pre_bind(&state, &first, WORKER).is_success());
            let store3 = MemoryState::default();
            let state3 = CycleState::new(&store3);
            let (pre, filters) = filter_all(&p, &state3, &second, &[node(WORKER)]);
            assert!(
                pre.is_success() && filters[0].is_success(),
                "{pre:?} {filters:?}"
            );
            assert!(p.reserve(&state3, &second, WORKER).is_success());
            assert!(p.pre_bind(&state3, &second, WORKER).is_success());
            let reserved: Vec<String> = dra::resource_claim(NS, CLAIM)
                .unwrap()
                .status
                .reserved_for
                .into_iter()
                .map(|r| r.name)
                .collect();
            assert_eq!(reserved, [POD, "second"]);
        },
    );
}

const RESERVED_FOR_MAX: usize = berth_sdk::dra::RESERVED_FOR_MAX_SIZE;

// ----------------------------------------------------------- allocation on nodes

#[test]
fn no_resources() {
    with_host(world(vec![pending_claim()], vec![class()], vec![]), |_| {
        let p = plugin();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pod = pod_with_claim_name();
        let (pre, filters) = filter_all(&p, &state, &pod, &[node(WORKER)]);
        assert!(pre.is_success(), "{pre:?}");
        assert_eq!(filters[0], Status::unresolvable(ERR_CANNOT_ALLOCATE));
        let post = p.post_filter(&state, &pod, &[], &NoDryRun);
        assert_eq!(post.status, Status::unschedulable("still not schedulable"));
    });
}

#[test]
fn with_resources() {
    let slices = vec![slice(WORKER, vec![device("instance-1")])];
    with_host(
        world(vec![pending_claim()], vec![class()], slices),
        |host| {
            let p = plugin();
            let store = MemoryState::default();
            let state = CycleState::new(&store);
            let pod = pod_with_claim_name();
            let (pre, filters) = filter_all(&p, &state, &pod, &[node(WORKER), node("other")]);
            assert!(pre.is_success(), "{pre:?}");
            assert!(filters[0].is_success(), "{:?}", filters[0]);
            assert_eq!(filters[1], Status::unresolvable(ERR_CANNOT_ALLOCATE));

            assert!(p.reserve(&state, &pod, WORKER).is_success());
            let assumed = host.world().assumed[&(NS.into(), CLAIM.into())].clone();
            let allocation = assumed.status.allocation.clone().expect("allocated");
            assert_eq!(allocation.devices[0].device, "instance-1");
            assert_eq!(allocation.devices[0].request, "req-1");
            assert_eq!(
                assumed.status.reserved_for,
                [ConsumerReference::pod(POD, POD_UID)]
            );
            // Another pod sharing the claim now waits for the allocation to land.
            assert!(dra::claim_allocation_pending(NS, CLAIM));
            let other = Pod {
                uid: "other-uid".into(),
                name: "other".into(),
                ..pod_with_claim_name()
            };
            let store2 = MemoryState::default();
            let state2 = CycleState::new(&store2);
            assert_eq!(
                p.pre_filter(&state2, &other, &[]).status,
                Status::unresolvable(
                    "resource claim default/my-pod-my-resource is in the process of being allocated"
                )
            );

            assert!(p.pre_bind(&state, &pod, WORKER).is_success());
            let w = host.world();
            assert_eq!(w.written.len(), 1);
            assert_eq!(w.written[0].status.allocation, Some(allocation));
            assert_eq!(w.written[0].resource_version, "2");
            assert!(w.assumed.is_empty());
        },
    );
}

#[test]
fn exhausted_resources() {
    // The only device went to another claim.
    let mut other = claim_named("other-claim");
    other.status.allocation = Some(allocation(WORKER, "instance-1"));
    let slices = vec![slice(WORKER, vec![device("instance-1")])];
    with_host(
        world(vec![pending_claim(), other], vec![class()], slices),
        |_| {
            let p = plugin();
            let store = MemoryState::default();
            let state = CycleState::new(&store);
            let (pre, filters) = filter_all(&p, &state, &pod_with_claim_name(), &[node(WORKER)]);
            assert!(pre.is_success());
            assert_eq!(filters[0], Status::unresolvable(ERR_CANNOT_ALLOCATE));
        },
    );
}

#[test]
fn missing_class() {
    with_host(world(vec![pending_claim()], vec![], vec![]), |_| {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let s = plugin()
            .pre_filter(&state, &pod_with_claim_name(), &[])
            .status;
        assert_eq!(
            s,
            Status::unresolvable("request req-1: device class my-resource-class does not exist")
        );
    });
}

#[test]
fn missing_class_of_a_subrequest_names_both() {
    let mut c = pending_claim();
    c.spec.requests = vec![DeviceRequest::FirstAvailable {
        name: "req-1".into(),
        subrequests: vec![request("a", CLASS), request("b", "nope")],
    }];
    with_host(world(vec![c], vec![class()], vec![]), |_| {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let s = plugin()
            .pre_filter(&state, &pod_with_claim_name(), &[])
            .status;
        assert_eq!(
            s,
            Status::unresolvable("request req-1/b: device class nope does not exist")
        );
    });
}

#[test]
fn class_parameters_cel_runtime_error() {
    let mut broken = class();
    broken.selectors = vec![DeviceSelector {
        expression: "device.attributes[\"no-such-domain\"].noSuchAttr".into(),
    }];
    let slices = vec![slice(WORKER, vec![device("instance-1")])];
    with_host(world(vec![pending_claim()], vec![broken], slices), |_| {
        let p = plugin();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let (pre, filters) = filter_all(&p, &state, &pod_with_claim_name(), &[node(WORKER)]);
        assert!(pre.is_success());
        assert_eq!(filters[0].code, Code::Error);
        // The message names the expression, quoted.
        let expression = "device.attributes[\"no-such-domain\"].noSuchAttr";
        assert!(
            filters[0].message().contains(&format!("{expression:?}")),
            "{:?}",
            filters[0]
        );
    });
}

/// PostFilter after the pod with claim name found no node: its claim is allocated
/// for WORKER and the only node is another one.
fn post_filter_elsewhere() -> PostFilterResult {
    let p = plugin();
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    let pod = pod_with_claim_name();
    let (pre, filters) = filter_all(&p, &state, &pod, &[node("other")]);
    assert!(pre.is_success());
    assert_eq!(filters[0], Status::unresolvable(ERR_NOT_AVAILABLE));
    p.post_filter(&state, &pod, &[], &NoDryRun)
}

#[test]
fn an_allocated_claim_elsewhere_is_not_available_and_post_filter_deallocates_it() {
    // Upstream's "deallocate" cases: allocated for a node the pod cannot use, and
    // reserved for nobody or for the pod alone.
    let mut own = allocated_claim();
    own.status.reserved_for = vec![ConsumerReference::pod(POD, POD_UID)];
    own.status.devices = vec![AllocatedDeviceStatus {
        driver: DRIVER.into(),
        pool: WORKER.into(),
        device: "instance-1".into(),
        share_id: None,
        conditions: Vec::new(),
    }];
    for claim in [allocated_claim(), own] {
        with_host(world(vec![claim], vec![class()], vec![]), |host| {
            let post = post_filter_elsewhere();
            assert_eq!(
                post.status,
                Status::unschedulable("deallocation of ResourceClaim completed")
            );
            assert_eq!(post.nominated_node_name, None);
            let w = host.world();
            assert_eq!(w.written.len(), 1);
            let written = &w.written[0];
            assert_eq!(written.name, CLAIM);
            assert_eq!(written.status, ResourceClaimStatus::default());
        });
    }
    // Reserved for another pod: nothing to deallocate.
    let mut c = allocated_claim();
    c.status.reserved_for = vec![ConsumerReference::pod("x", "x-uid")];
    with_host(world(vec![c], vec![class()], vec![]), |host| {
        let post = post_filter_elsewhere();
        assert_eq!(post.status, Status::unschedulable("still not schedulable"));
        assert!(host.world().written.is_empty());
    });
    // The cluster refuses the write (the claim changed since PreFilter): an Error,
    // as upstream's, so the pod backs off and PreFilter reads the claim anew.
    with_host(
        world(vec![allocated_claim()], vec![class()], vec![]),
        |host| {
            host.world().write_error = Some("the object has been modified".into());
            let post = post_filter_elsewhere();
            assert_eq!(post.status.code, Code::Error);
            assert!(
                post.status.message().contains(
                    "deallocate resourceclaim default/my-pod-my-resource: the object has been modified"
                ),
                "{:?}",
                post.status
            );
        },
    );
}

#[test]
fn canceled_unreserve_restores_the_assumed_claims() {
    let slices = vec![slice(WORKER, vec![device("instance-1")])];
    with_host(
        world(vec![pending_claim()], vec![class()], slices),
        |host| {
            let p = plugin();
            let store = MemoryState::default();
            let state = CycleState::new(&store);
            let pod = pod_with_claim_name();
            filter_all(&p, &state, &pod, &[node(WORKER)]);
            assert!(p.reserve(&state, &pod, WORKER).is_success());
            assert_eq!(host.world().assumed.len(), 1);
            p.unreserve(&state, &pod, WORKER);
            assert!(host.world().assumed.is_empty());
            // Idempotent.
            p.unreserve(&state, &pod, WORKER);
            assert!(host.world().assumed.is_empty());
            assert!(!dra::claim_allocation_pending(NS, CLAIM));
        },
    );
}

#[test]
fn reserve_fails_when_the_claim_changed_and_assumes_nothing() {
    let slices = vec![slice(WORKER, vec![device("instance-1")])];
    let claims = vec![pending_claim(), {
        let mut c = claim_named("second");
        c.spec.requests.clear();
        c
    }];
    let pod = Pod {
        resource_claims: vec![
            PodResourceClaim {
                name: "my-resource".into(),
                source: ClaimSource::ClaimName(CLAIM.into()),
            },
            PodResourceClaim {
                name: "second".into(),
                source: ClaimSource::ClaimName("second".into()),
            },
        ],
        ..pod_with_claim_name()
    };
    with_host(world(claims, vec![class()], slices), |host| {
        let p = plugin();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let (pre, filters) = filter_all(&p, &state, &pod, &[node(WORKER)]);
        assert!(
            pre.is_success() && filters[0].is_success(),
            "{pre:?} {filters:?}"
        );
        host.world()
            .claims
            .get_mut(&(NS.to_owned(), "second".to_owned()))
            .unwrap()
            .resource_version = "7".into();
        let s = p.reserve(&state, &pod, WORKER);
        assert_eq!(s.code, Code::Error);
        assert!(s.message().contains("default/second"), "{s:?}");
        assert!(
            host.world().assumed.is_empty(),
            "the first claim is restored"
        );
    });
}

#[test]
fn bind_failure() {
    let slices = vec![slice(WORKER, vec![device("instance-1")])];
    with_host(
        world(vec![pending_claim()], vec![class()], slices),
        |host| {
            let p = plugin();
            let store = MemoryState::default();
            let state = CycleState::new(&store);
            let pod = pod_with_claim_name();
            filter_all(&p, &state, &pod, &[node(WORKER)]);
            assert!(p.reserve(&state, &pod, WORKER).is_success());
            host.world().write_error = Some("injected".into());
            let s = p.pre_bind(&state, &pod, WORKER);
            assert_eq!(
                s,
                Status::error(
                    "add allocation and reservation to claim default/my-pod-my-resource: injected"
                )
            );
            p.unreserve(&state, &pod, WORKER);
            assert!(host.world().assumed.is_empty());
        },
    );
}

/// Reserve, then the cluster's copy of the claim changes (the host then drops what
/// was assumed of it) with `change`; PreBind's status and the host.
fn bind_after_a_change(change: impl FnOnce(&mut ResourceClaim)) -> (Status, Vec<ResourceClaim>) {
    let slices = vec![slice(
        WORKER,
        vec![device("instance-1"), device("instance-2")],
    )];
    let mut out = (Status::success(), Vec::new());
    with_host(
        world(vec![pending_claim()], vec![class()], slices),
        |host| {
            let p = plugin();
            let store = MemoryState::default();
            let state = CycleState::new(&store);
            let pod = pod_with_claim_name();
            filter_all(&p, &state, &pod, &[node(WORKER)]);
            assert!(p.reserve(&state, &pod, WORKER).is_success());
            {
                let mut w = host.world();
                let k = (NS.to_owned(), CLAIM.to_owned());
                w.assumed.remove(&k);
                let c = w.claims.get_mut(&k).unwrap();
                c.resource_version = "5".into();
                change(c);
            }
            out = (
                p.pre_bind(&state, &pod, WORKER),
                host.world().written.clone(),
            );
        },
    );
    out
}

#[test]
fn a_claim_changed_before_pre_bind_is_written_again() {
    let (status, written) = bind_after_a_change(|c| {
        c.annotations.insert("touched".into(), "yes".into());
    });
    assert!(status.is_success(), "{status:?}");
    assert_eq!(written.len(), 1);
    let w = &written[0];
    assert_eq!(w.resource_version, "6");
    assert_eq!(
        w.annotations.get("touched").map(String::as_str),
        Some("yes")
    );
    assert_eq!(
        w.status.allocation.as_ref().unwrap().devices[0].device,
        "instance-1"
    );
    assert_eq!(
        w.status.reserved_for,
        [ConsumerReference::pod(POD, POD_UID)]
    );
}

#[test]
fn a_claim_allocated_elsewhere_meanwhile_fails_pre_bind() {
    let (status, written) = bind_after_a_change(|c| {
        c.status.allocation = Some(allocation(WORKER, "instance-2"));
    });
    assert_eq!(
        status,
        Status::error("claim default/my-pod-my-resource got allocated elsewhere in the meantime")
    );
    assert!(written.is_empty());
}

#[test]
fn a_second_instance_filters_with_its_own_allocator() {
    let slices = vec![slice(WORKER, vec![device("instance-1")])];
    with_host(world(vec![pending_claim()], vec![class()], slices), |_| {
        let a = plugin();
        let b = plugin();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pod = pod_with_claim_name();
        let refs = [node(WORKER)];
        assert!(a.pre_filter(&state, &pod, &[&refs[0]]).status.is_success());
        assert!(b.kept().allocator.is_none());
        assert!(b.filter(&state, &pod, &refs[0]).is_success());
        assert!(b.kept().allocator.is_some());
        // Nothing moved: the same allocator serves the next cycle.
        let before = Arc::clone(&a.kept().allocator.as_ref().unwrap().1);
        let store2 = MemoryState::default();
        let state2 = CycleState::new(&store2);
        assert!(a.pre_filter(&state2, &pod, &[]).status.is_success());
        assert!(Arc::ptr_eq(
            &before,
            &a.kept().allocator.as_ref().unwrap().1
        ));
    });
}

// ---------------------------------------------------------------------- Score

#[test]
fn prioritized_list_scores_the_preferred_alternative_higher() {
    let mut big = class();
    big.name = "big".into();
    big.selectors = vec![DeviceSelector {
        expression: "device.attributes[\"some-driver\"].size == 2".into(),
    }];
    let mut small = class();
    small.name = "small".into();
    let sized = |name: &str, size: i64| Device {
        attributes: [(
            "size".to_owned(),
            berth_sdk::dra::DeviceAttribute::Int(size),
        )]
        .into_iter()
        .collect(),
        ..device(name)
    };
    let slices = vec![
        slice("a", vec![sized("big-0", 2)]),
        slice("b", vec![sized("small-0", 1)]),
    ];
    let mut c = pending_claim();
    c.spec.requests = vec![DeviceRequest::FirstAvailable {
        name: "req-1".into(),
        subrequests: vec![request("big", "big"), request("small", "small")],
    }];
    with_host(world(vec![c], vec![big, small], slices), |_| {
        let p = plugin();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pod = pod_with_claim_name();
        let nodes = [node("a"), node("b")];
        let (pre, filters) = filter_all(&p, &state, &pod, &nodes);
        assert!(pre.is_success(), "{pre:?}");
        assert!(filters.iter().all(Status::is_success), "{filters:?}");
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        assert!(p.pre_score(&state, &pod, &refs, &refs).is_success());
        let mut scores: Vec<i64> = nodes
            .iter()
            .map(|n| p.score(&state, &pod, n).unwrap())
            .collect();
        assert_eq!(scores, [8, 7]);
        assert!(p.normalize_score(&state, &pod, &mut scores).is_success());
        assert_eq!(scores, [100, 87]);
    });
}

#[test]
fn without_alternatives_score_is_skipped() {
    let slices = vec![slice(WORKER, vec![device("instance-1")])];
    with_host(world(vec![pending_claim()], vec![class()], slices), |_| {
        let p = plugin();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pod = pod_with_claim_name();
        filter_all(&p, &state, &pod, &[node(WORKER)]);
        assert_eq!(p.pre_score(&state, &pod, &[], &[]), Status::skip());
    });
}

// ------------------------------------------------------- binding conditions

fn with_binding_conditions() -> (World, ResourceClaim) {
    let mut d = device("instance-1");
    d.binding_conditions = vec!["attached".into()];
    d.binding_failure_conditions = vec!["failed".into()];
    let slices = vec![slice(WORKER, vec![d])];
    (
        world(vec![pending_claim()], vec![class()], slices),
        pending_claim(),
    )
}

/// A device status with one condition true.
fn device_status(condition: &str) -> AllocatedDeviceStatus {
    AllocatedDeviceStatus {
        driver: DRIVER.into(),
        pool: WORKER.into(),
        device: "instance-1".into(),
        share_id: None,
        conditions: vec![DeviceCondition {
            type_: condition.into(),
            status: true,
        }],
    }
}

/// Schedules a pod whose device has binding conditions; the driver sets `condition`
/// (if any) once PreBind has written the claim. PreBind's status.
fn bind_with_conditions(condition: Option<&str>) -> Status {
    let (w, _) = with_binding_conditions();
    let mut out = Status::success();
    with_host(w, |host| {
        let p =
            DynamicResources::new(berth_sdk::serde_json::json!({"bindingTimeout": "60s"})).unwrap();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pod = pod_with_claim_name();
        filter_all(&p, &state, &pod, &[node(WORKER)]);
        assert!(p.reserve(&state, &pod, WORKER).is_success());
        if let Some(c) = condition {
            let mut w = host.world();
            let mut update = w.assumed[&(NS.into(), CLAIM.into())].clone();
            update.resource_version = "3".into();
            update.status.devices = vec![device_status(c)];
            w.updates.push(update);
            w.wait_ms = 1000;
        }
        out = p.pre_bind(&state, &pod, WORKER);
        let allocation = host.world().written[0].status.allocation.clone().unwrap();
        assert_eq!(allocation.devices[0].binding_conditions, ["attached"]);
    });
    out
}

#[test]
fn binding_conditions_met() {
    assert_eq!(bind_with_conditions(Some("attached")), Status::success());
}

#[test]
fn binding_failure_condition() {
    let s = bind_with_conditions(Some("failed"));
    assert_eq!(s.code, Code::Error);
    assert!(s.message().contains("binding failed"), "{s:?}");
}

#[test]
fn binding_timeout() {
    assert_eq!(
        bind_with_conditions(None),
        Status::error("device binding timeout")
    );
}

#[test]
fn a_failed_binding_makes_an_allocated_claim_unavailable() {
    let mut c = allocated_claim();
    let a = c.status.allocation.as_mut().unwrap();
    a.devices[0].binding_conditions = vec!["attached".into()];
    a.devices[0].binding_failure_conditions = vec!["failed".into()];
    c.status.devices = vec![device_status("failed")];
    with_host(world(vec![c], vec![class()], vec![]), |_| {
        let p = plugin();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let (_, filters) = filter_all(&p, &state, &pod_with_claim_name(), &[node(WORKER)]);
        assert_eq!(filters[0], Status::unresolvable(ERR_NOT_AVAILABLE));
    });
}

// ------------------------------------------------------------ queueing hints

fn hint(
    p: &DynamicResources,
    event: ClusterEvent,
    pod: &Pod,
    old: Option<Object>,
    new: Object,
) -> QueueingHint {
    p.queueing_hint(&event, pod, old.as_ref(), Some(&new))
        .unwrap()
}

#[test]
fn is_schedulable_after_claim_change() {
    let claim_event = ClusterEvent::new(EventResource::ResourceClaim, ActionType::UPDATE);
    with_host(world(vec![pending_claim()], vec![class()], vec![]), |_| {
        let p = plugin();
        let pod = pod_with_claim_name();
        let obj = |c: ResourceClaim| Object::ResourceClaim(c);
        // "queue-on-add": the pod's claim appears.
        assert_eq!(
            hint(&p, claim_event, &pod, None, obj(pending_claim())),
            QueueingHint::Queue
        );
        // "skip-unrelated-claim".
        let other = claim_named("other");
        assert_eq!(
            hint(&p, claim_event, &pod, None, obj(other.clone())),
            QueueingHint::QueueSkip
        );
        // "queue-on-deallocation", of any claim.
        let mut allocated = other.clone();
        allocated.status.allocation = Some(allocation(WORKER, "x"));
        assert_eq!(
            hint(&p, claim_event, &pod, Some(obj(allocated)), obj(other)),
            QueueingHint::Queue
        );
        // "skip-finalizer-only": the status did not change.
        let mut annotated = pending_claim();
        annotated.annotations.insert("a".into(), "b".into());
        assert_eq!(
            hint(
                &p,
                claim_event,
                &pod,
                Some(obj(pending_claim())),
                obj(annotated)
            ),
            QueueingHint::QueueSkip
        );
        // "queue-on-status-change".
        let mut reserved = pending_claim();
        reserved.status.reserved_for = vec![ConsumerReference::pod("x", "y")];
        assert_eq!(
            hint(
                &p,
                claim_event,
                &pod,
                Some(obj(pending_claim())),
                obj(reserved)
            ),
            QueueingHint::Queue
        );
        // "backoff-wrong-new-object".
        assert!(
            p.queueing_hint(&claim_event, &pod, None, Some(&Object::Pod(Pod::default())))
                .is_err()
        );
        // The pod still waits for a claim of its own: skip.
        assert_eq!(
            hint(
                &p,
                claim_event,
                &pod_with_claim_template(),
                None,
                obj(pending_claim())
            ),
            QueueingHint::QueueSkip
        );
    });
}

#[test]
fn is_schedulable_after_pod_change() {
    let event = ClusterEvent::new(
        EventResource::UnscheduledPod,
        ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
    );
    with_host(world(vec![pending_claim()], vec![class()], vec![]), |_| {
        let p = plugin();
        let waiting = pod_with_claim_template();
        // The pod's status now names its claim.
        assert_eq!(
            hint(
                &p,
                event,
                &waiting,
                Some(Object::Pod(waiting.clone())),
                Object::Pod(pod_with_claim_template_in_status())
            ),
            QueueingHint::Queue
        );
        // Still without it.
        assert_eq!(
            hint(&p, event, &waiting, None, Object::Pod(waiting.clone())),
            QueueingHint::QueueSkip
        );
        // Another pod.
        let other = Pod {
            uid: "other".into(),
            ..pod_with_claim_template_in_status()
        };
        assert_eq!(
            hint(&p, event, &waiting, None, Object::Pod(other)),
            QueueingHint::QueueSkip
        );
    });
}

#[test]
fn events_are_upstreams() {
    let events = DynamicResources::events().unwrap();
    let find = |r: EventResource| events.iter().find(|e| e.event.resource == r).unwrap();
    let node = find(EventResource::Node);
    assert!(!node.has_hint);
    assert_eq!(
        node.event.actions,
        ActionType::ADD | ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_ALLOCATABLE
    );
    assert!(find(EventResource::ResourceClaim).has_hint);
    let pod = find(EventResource::UnscheduledPod);
    assert!(pod.has_hint);
    assert_eq!(
        pod.event.actions,
        ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM
    );
    assert!(!find(EventResource::DeviceClass).has_hint);
    assert!(!find(EventResource::ResourceSlice).has_hint);
    assert_eq!(
        plugin().only_for_pods_with(),
        [berth_sdk::PodFeature::ResourceClaims]
    );
}

// ------------------------------------------------------------------ SignPod

#[test]
fn pods_with_claims_are_not_signable() {
    let p = plugin();
    let mut extended = Pod {
        namespace: NS.into(),
        name: POD.into(),
        ..Pod::default()
    };
    extended.extended_resource_claim_status = Some(berth_sdk::PodExtendedResourceClaimStatus {
        resource_claim_name: "my-pod-extended-resources".into(),
        request_mappings: vec![],
    });
    for pod in [
        pod_with_claim_name(),
        pod_with_claim_template(),
        pod_with_claim_template_in_status(),
        extended,
    ] {
        assert_eq!(p.sign_pod(&pod).unwrap_err().code, Code::Unschedulable);
    }
}

#[test]
fn pods_without_claims_sign_with_nothing() {
    let p = plugin();
    let a = Pod {
        namespace: NS.into(),
        name: "a".into(),
        ..Pod::default()
    };
    let mut b = Pod {
        namespace: "other".into(),
        name: "b".into(),
        labels: [("app".to_owned(), "x".to_owned())].into(),
        ..Pod::default()
    };
    // An extended resource no claim was made for is NodeResourcesFit's to check.
    b.containers.push(berth_sdk::Container {
        requests: [("example.com/gpu".to_owned(), 1)].into(),
        ..berth_sdk::Container::default()
    });
    assert_eq!(p.sign_pod(&a).unwrap(), vec![]);
    assert_eq!(p.sign_pod(&a).unwrap(), p.sign_pod(&b).unwrap());
    // And the plugin has nothing to do for either.
    let store = MemoryState::default();
    let state = CycleState::new(&store);
    assert_eq!(p.pre_filter(&state, &a, &[]).status, Status::skip());
    assert_eq!(p.pre_filter(&state, &b, &[]).status, Status::skip());
}
