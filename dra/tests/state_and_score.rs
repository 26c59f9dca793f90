//! The allocated state built from allocated claims (as upstream's scheduler tracks
//! it), share IDs and consumed capacity in results, and the prioritized-list score.

use berth_dra::{AllocatedState, Allocator, Features, prioritized_list_score};
use berth_sdk::Node;
use berth_sdk::dra::*;
use berth_sdk::quantity::Quantity;
use std::collections::BTreeMap;

fn id(device: &str) -> DeviceId {
    DeviceId {
        driver: "driver-a".into(),
        pool: "pool-1".into(),
        device: device.into(),
    }
}

fn result(request: &str, device: &str) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request: request.into(),
        driver: "driver-a".into(),
        pool: "pool-1".into(),
        device: device.into(),
        admin_access: None,
        tolerations: vec![],
        binding_conditions: vec![],
        binding_failure_conditions: vec![],
        share_id: None,
        consumed_capacity: BTreeMap::new(),
    }
}

fn allocated(name: &str, devices: Vec<DeviceRequestAllocationResult>) -> ResourceClaim {
    ResourceClaim {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        status: ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices,
                ..AllocationResult::default()
            }),
            ..ResourceClaimStatus::default()
        },
        ..ResourceClaim::default()
    }
}

fn share(device: &str, share: &str, consumed: &[(&str, &str)]) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        share_id: Some(share.into()),
        consumed_capacity: consumed
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity::from(*v)))
            .collect(),
        ..result("req", device)
    }
}

#[test]
fn allocated_state_from_claims() {
    let admin = DeviceRequestAllocationResult {
        admin_access: Some(true),
        ..result("req", "device-3")
    };
    let claims = [
        allocated("exclusive", vec![result("req", "device-1")]),
        allocated("admin", vec![admin]),
        allocated(
            "shares-a",
            vec![share("device-2", "s1", &[("memory", "1Gi")])],
        ),
        allocated(
            "shares-b",
            vec![share("device-2", "s2", &[("memory", "512Mi")])],
        ),
        allocated("share-without-capacity", vec![share("device-4", "s3", &[])]),
        ResourceClaim::default(),
    ];
    let state = AllocatedState::from_claims(&claims, &Features::default()).unwrap();
    assert_eq!(state.devices.iter().collect::<Vec<_>>(), [&id("device-1")]);
    assert_eq!(state.shares.len(), 3);
    assert!(state.shares.contains(&(id("device-2"), "s2".to_owned())));
    assert_eq!(
        state.consumed_capacity[&id("device-2")]["memory"],
        1536 * 1024 * 1024 * 1_000_000_000i128
    );
    assert!(!state.consumed_capacity.contains_key(&id("device-4")));
    // Admin access takes nothing; a share or consumed capacity makes a device allocated.
    assert!(!state.is_allocated(&id("device-3")));
    assert!(state.is_allocated(&id("device-1")));
    assert!(state.is_allocated(&id("device-2")));
    assert!(state.is_allocated(&id("device-4")));

    // Without consumable capacity, a share is an exclusive allocation.
    let state = AllocatedState::from_claims(&claims, &Features::none()).unwrap();
    assert_eq!(state.devices.len(), 3);
    assert!(state.shares.is_empty());
    assert!(state.consumed_capacity.is_empty());
}

#[test]
fn allocated_state_names_a_bad_quantity() {
    let claims = [allocated(
        "bad",
        vec![share("device-2", "s1", &[("memory", "1x")])],
    )];
    let err = AllocatedState::from_claims(&claims, &Features::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "claim default/bad: status.allocation.devices.results of device driver-a/pool-1/device-2: consumedCapacity memory: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
}

fn class() -> DeviceClass {
    DeviceClass {
        name: "class-a".into(),
        uid: String::new(),
        selectors: vec![DeviceSelector {
            expression: r#"device.driver == "driver-a""#.into(),
        }],
        config: vec![],
        extended_resource_name: None,
    }
}

fn sub(name: &str, count: i64) -> DeviceSubRequest {
    DeviceSubRequest {
        name: name.into(),
        device_class_name: "class-a".into(),
        selectors: vec![],
        allocation_mode: AllocationMode::ExactCount(count),
        admin_access: false,
        tolerations: vec![],
        capacity: BTreeMap::new(),
    }
}

fn claim(name: &str, requests: Vec<DeviceRequest>) -> ResourceClaim {
    ResourceClaim {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        spec: DeviceClaim {
            requests,
            ..DeviceClaim::default()
        },
        ..ResourceClaim::default()
    }
}

fn slice(devices: Vec<Device>) -> ResourceSlice {
    ResourceSlice {
        name: "slice-1".into(),
        driver: "driver-a".into(),
        pool: ResourcePool {
            name: "pool-1".into(),
            generation: 1,
            resource_slice_count: 1,
        },
        nodes: SliceNodes::NodeName("node-1".into()),
        devices,
        shared_counters: vec![],
    }
}

fn node() -> Node {
    Node {
        name: "node-1".into(),
        ..Node::default()
    }
}

#[test]
fn shares_get_distinct_uuids_and_canonical_consumed_capacity() {
    let gpu = Device {
        name: "gpu".into(),
        allow_multiple_allocations: true,
        capacity: BTreeMap::from([(
            "memory".to_owned(),
            DeviceCapacity {
                value: Quantity::from("4Gi"),
                request_policy: None,
            },
        )]),
        ..Device::default()
    };
    let asking = |name: &str, q: &str| {
        let mut r = sub("req", 1);
        r.capacity = BTreeMap::from([("memory".to_owned(), Quantity::from(q))]);
        claim(name, vec![DeviceRequest::Exactly(r)])
    };
    let claims = [
        asking("a", "1024Mi"),
        asking("b", "1Gi"),
        asking("c", "2048Mi"),
    ];
    let allocator = Allocator::new(
        Features::default(),
        vec![class()],
        vec![slice(vec![gpu])],
        AllocatedState::default(),
        &[],
    );
    let refs: Vec<&ResourceClaim> = claims.iter().collect();
    let results = allocator.allocate(&node(), &refs).unwrap().unwrap();
    let shares: Vec<&String> = results
        .iter()
        .map(|r| r.devices[0].share_id.as_ref().unwrap())
        .collect();
    assert_ne!(shares[0], shares[1]);
    assert_ne!(shares[1], shares[2]);
    for s in &shares {
        assert_eq!(s.len(), 36, "{s}");
        assert_eq!(&s[14..15], "8", "version 8 UUID: {s}");
    }
    // Quantities in results are written as Kubernetes writes them.
    assert_eq!(
        results[0].devices[0].consumed_capacity["memory"].as_str(),
        "1Gi"
    );
    assert_eq!(
        results[2].devices[0].consumed_capacity["memory"].as_str(),
        "2Gi"
    );

    // What the allocated claims consume is what the next allocation sees.
    let mut done = claims.to_vec();
    for (c, r) in done.iter_mut().zip(&results) {
        c.status.allocation = Some(r.clone());
    }
    let state = AllocatedState::from_claims(&done, &Features::default()).unwrap();
    let allocator = Allocator::new(
        Features::default(),
        vec![class()],
        vec![slice(vec![Device {
            name: "gpu".into(),
            allow_multiple_allocations: true,
            capacity: BTreeMap::from([(
                "memory".to_owned(),
                DeviceCapacity {
                    value: Quantity::from("4Gi"),
                    request_policy: None,
                },
            )]),
            ..Device::default()
        }])],
        state,
        &[],
    );
    let more = asking("d", "1");
    assert_eq!(allocator.allocate(&node(), &[&more]).unwrap(), None);
}

#[test]
fn prioritized_list_score_prefers_earlier_subrequests() {
    let first_available = |name: &str| DeviceRequest::FirstAvailable {
        name: name.into(),
        subrequests: vec![sub("big", 2), sub("small", 1)],
    };
    let c = claim(
        "c",
        vec![
            first_available("r0"),
            first_available("r1"),
            DeviceRequest::Exactly(sub("plain", 1)),
        ],
    );
    let picked = AllocationResult {
        devices: vec![
            result("r0/big", "d0"),
            result("r0/big", "d1"),
            result("r1/small", "d2"),
            result("plain", "d3"),
        ],
        ..AllocationResult::default()
    };
    // r0 got its first alternative (8 - 0), r1 its second (8 - 1).
    assert_eq!(
        prioritized_list_score(&[&c], std::slice::from_ref(&picked)),
        15
    );

    // The allocator's own results score the same way.
    let allocator = Allocator::new(
        Features::default(),
        vec![class()],
        vec![slice(
            ["d0", "d1", "d2"]
                .iter()
                .map(|n| Device {
                    name: (*n).into(),
                    ..Device::default()
                })
                .collect(),
        )],
        AllocatedState::default(),
        &[],
    );
    let c = claim("c", vec![first_available("r0"), first_available("r1")]);
    let results = allocator.allocate(&node(), &[&c]).unwrap().unwrap();
    assert_eq!(prioritized_list_score(&[&c], &results), 15);
    let c = claim("c", vec![first_available("r0")]);
    let results = allocator.allocate(&node(), &[&c]).unwrap().unwrap();
    assert_eq!(prioritized_list_score(&[&c], &results), 8);
    // No firstAvailable request, no score.
    let c = claim("c", vec![DeviceRequest::Exactly(sub("plain", 1))]);
    let results = allocator.allocate(&node(), &[&c]).unwrap().unwrap();
    assert_eq!(prioritized_list_score(&[&c], &results), 0);
}
