//! Pools: generations, pools spread over nodes, incomplete and invalid pools,
//! counter sets in other slices of the pool.

use super::common::*;
use berth_sdk::dra::{Device, ResourceSlice};

fn gen_slice(name: &str, node_name: &str, device_name: &str, generation: i64) -> ResourceSlice {
    let mut s = slice_with_devices(
        name,
        Nodes::Name(node_name),
        POOL1.into(),
        DRIVER_A,
        vec![device(device_name)],
    );
    s.pool.generation = generation;
    s.pool.resource_slice_count = 2;
    s
}

fn one_request() -> Vec<berth_sdk::dra::ResourceClaim> {
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)]
}

#[test]
fn allocation_mode_all_with_multi_host_resource_pool() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![all_request(REQ0, CLASS_A)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![device(DEVICE1)],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE2),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![device(DEVICE2)],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn multi_host_resource_pool_with_stale_slice_for_current_node() {
    expect_none(Case {
        claims: one_request(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            gen_slice(SLICE1, NODE1, DEVICE1, 1),
            gen_slice(SLICE2, NODE2, DEVICE2, 2),
        ],
        ..Case::default()
    });
}

#[test]
fn multi_host_resource_pool_complete_update_from_node_1_to_node_2() {
    expect_results(
        Case {
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                gen_slice(SLICE1, NODE1, DEVICE1, 1),
                gen_slice(SLICE1, NODE1, DEVICE2, 1),
                gen_slice(SLICE2, NODE2, DEVICE1, 2),
                gen_slice(SLICE2, NODE2, DEVICE2, 2),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn multi_host_resource_pool_complete_update_from_node_2_to_node_1() {
    expect_results(
        Case {
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                gen_slice(SLICE1, NODE2, DEVICE1, 1),
                gen_slice(SLICE1, NODE2, DEVICE2, 1),
                gen_slice(SLICE2, NODE1, DEVICE1, 2),
                gen_slice(SLICE2, NODE1, DEVICE2, 2),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn multi_host_resource_pool_incomplete_update_from_node_1_to_node_2() {
    expect_results(
        Case {
            claims: one_request(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                gen_slice(SLICE1, NODE1, DEVICE1, 1),
                gen_slice(SLICE1, NODE1, DEVICE2, 1),
                gen_slice(SLICE2, NODE2, DEVICE1, 2),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn multi_host_resource_pool_incomplete_update_from_node_2_to_node_1() {
    expect_none(Case {
        claims: one_request(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            gen_slice(SLICE1, NODE2, DEVICE1, 1),
            gen_slice(SLICE1, NODE2, DEVICE2, 1),
            gen_slice(SLICE2, NODE1, DEVICE1, 2),
        ],
        ..Case::default()
    });
}

fn part() -> berth_dra::Features {
    features(|f| f.partitionable_devices = true)
}

fn invalid(case: Case) {
    let e = expect_error(case, "invalid resource pools were encountered");
    assert!(matches!(e, berth_dra::AllocError::OnNode(_)), "{e:?}");
}

#[test]
fn partitionable_devices_same_counter_set_name_in_different_resource_slices() {
    invalid(Case {
        features: part(),
        claims: one_request(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                vec![device(DEVICE1)],
            ),
            slice_with_counter_sets(
                SLICE2,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[])],
            ),
            slice_with_devices(
                SLICE3,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                vec![device(DEVICE2)],
            ),
            slice_with_counter_sets(
                SLICE4,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[])],
            ),
        ],
        ..Case::default()
    });
}

#[test]
fn partitionable_devices_device_counter_consumption_references_unknown_counter_set() {
    invalid(Case {
        features: part(),
        claims: one_request(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![with_counter_consumption(
                    device(DEVICE1),
                    vec![consumption(COUNTER_SET2, &[])],
                )],
            ),
            slice_with_counter_sets(
                SLICE2,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[])],
            ),
        ],
        ..Case::default()
    });
}

#[test]
fn partitionable_devices_device_counter_consumption_references_unknown_counter_in_counter_set() {
    invalid(Case {
        features: part(),
        claims: one_request(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![with_counter_consumption(
                    device(DEVICE1),
                    vec![consumption(COUNTER_SET1, &[("memory", "8Gi")])],
                )],
            ),
            slice_with_counter_sets(
                SLICE2,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[("other-memory", "8Gi")])],
            ),
        ],
        ..Case::default()
    });
}

#[test]
fn partitionable_devices_device_counter_consumption_references_counter_set_in_other_pool() {
    invalid(Case {
        features: part(),
        claims: one_request(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![with_counter_consumption(
                    device(DEVICE1),
                    vec![consumption(COUNTER_SET1, &[("memory", "8Gi")])],
                )],
            ),
            slice_with_counter_sets(
                SLICE2,
                Nodes::Name(NODE1),
                POOL2.into(),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
            ),
        ],
        ..Case::default()
    });
}

fn from_counters(name: &str, memory: &str) -> Device {
    with_counter_consumption_as_capacity(
        device(name),
        vec![consumption(COUNTER_SET1, &[("memory", memory)])],
    )
}

#[test]
fn partitionable_devices_devices_on_different_nodes_consume_same_counter_set() {
    let mem =
        |q: &str| format!(r#"device.capacity["driver-a"].memory.compareTo(quantity("{q}")) >= 0"#);
    expect_results(
        Case {
            features: features(|f| {
                f.partitionable_devices = true;
                f.prioritized_list = true;
            }),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![prioritized(
                    REQ0,
                    vec![
                        sub_with_selectors(sub_request(SUB_REQ0, CLASS_A, 1), &[&mem("6Gi")]),
                        sub_with_selectors(sub_request(SUB_REQ1, CLASS_A, 1), &[&mem("2Gi")]),
                    ],
                )],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_counter_sets(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 3),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 3),
                    DRIVER_A,
                    vec![from_counters(DEVICE1, "6Gi"), from_counters(DEVICE2, "2Gi")],
                ),
                slice_with_devices(
                    SLICE3,
                    Nodes::Name(NODE2),
                    resource_pool(POOL1, 3),
                    DRIVER_A,
                    vec![with_counter_consumption(
                        device(DEVICE3),
                        vec![consumption(COUNTER_SET1, &[("memory", "6Gi")])],
                    )],
                ),
            ],
            allocated: vec![id(DRIVER_A, POOL1, DEVICE3)],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false)],
        )],
    );
}

#[test]
fn partitionable_devices_devices_consume_counter_set_in_different_nodes() {
    expect_results(
        Case {
            features: part(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_counter_sets(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 3),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 3),
                    DRIVER_A,
                    vec![from_counters(DEVICE1, "6Gi")],
                ),
                slice_with_devices(
                    SLICE3,
                    Nodes::Name(NODE2),
                    resource_pool(POOL1, 3),
                    DRIVER_A,
                    vec![from_counters(DEVICE2, "6Gi"), from_counters(DEVICE3, "2Gi")],
                ),
            ],
            allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
            node: node(NODE2, REGION1),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE2),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE3, false)],
        )],
    );
}

#[test]
fn partitionable_devices_validation_error_on_non_targeting_slice() {
    invalid(Case {
        features: part(),
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_counter_sets(
                SLICE1,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 3),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
            ),
            slice_with_devices(
                SLICE2,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 3),
                DRIVER_A,
                vec![from_counters(DEVICE1, "6Gi")],
            ),
            slice_with_devices(
                SLICE3,
                Nodes::Name(NODE2),
                resource_pool(POOL1, 3),
                DRIVER_A,
                vec![with_counter_consumption(
                    device(DEVICE3),
                    vec![consumption(COUNTER_SET2, &[("memory", "6Gi")])],
                )],
            ),
        ],
        ..Case::default()
    });
}

#[test]
fn different_resourceslices_in_pool_can_target_different_nodes() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE2),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![device(DEVICE1)],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![device(DEVICE2)],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE2, false)],
        )],
    );
}

fn invalid_pool_and_another() -> Vec<ResourceSlice> {
    vec![
        slice_with_devices(
            SLICE1,
            Nodes::Name(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![device(DEVICE1)],
        ),
        slice_with_devices(
            SLICE2,
            Nodes::Name(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![device(DEVICE1)],
        ),
        slice_with_devices(
            SLICE3,
            Nodes::Name(NODE1),
            resource_pool(POOL2, 1),
            DRIVER_A,
            vec![device(DEVICE2)],
        ),
    ]
}

#[test]
fn invalid_pool_is_ok_if_devices_can_be_allocated_from_other() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: invalid_pool_and_another(),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL2, DEVICE2, false)],
        )],
    );
}

#[test]
fn invalid_pool_is_error_if_no_other_device_can_be_allocated() {
    invalid(Case {
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: invalid_pool_and_another(),
        allocated: vec![id(DRIVER_A, POOL2, DEVICE2)],
        ..Case::default()
    });
}

#[test]
fn no_allocation_from_incomplete_pools() {
    expect_none(Case {
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_devices(
            SLICE1,
            Nodes::Name(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![device(DEVICE1)],
        )],
        ..Case::default()
    });
}
