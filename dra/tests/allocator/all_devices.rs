//! Requests for all matching devices (`allocationMode: All`).

use super::common::*;
use berth_sdk::dra::ResourceClaim;

fn all_claim(name: &str, class: &str) -> ResourceClaim {
    claim_with_requests(name, vec![], vec![all_request(REQ0, class)])
}

fn one_claim(name: &str, class: &str) -> ResourceClaim {
    claim_with_requests(name, vec![], vec![request(REQ0, class, 1)])
}

#[test]
fn all_devices_single() {
    expect_results(
        Case {
            claims: vec![all_claim(CLAIM0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn all_devices_with_consumed_counters() {
    expect_results(
        Case {
            features: features(|f| f.partitionable_devices = true),
            claims: vec![all_claim(CLAIM0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![with_counter_consumption(
                        device(DEVICE1),
                        vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                    )],
                ),
                slice_with_counter_sets(
                    SLICE2,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
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
fn all_devices_many() {
    expect_results(
        Case {
            claims: vec![all_claim(CLAIM0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A),
                slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL2.into(), DRIVER_A),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL2, DEVICE1, false),
            ],
        )],
    );
}

#[test]
fn all_devices_of_the_incomplete_pool() {
    let mut s = slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A);
    s.pool.resource_slice_count += 1;
    expect_error(
        Case {
            claims: vec![all_claim(CLAIM0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![s],
            ..Case::default()
        },
        "claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated",
    );
}

fn two_drivers(devices_a: usize) -> Vec<berth_sdk::dra::ResourceSlice> {
    let a = if devices_a == 1 {
        slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A)
    } else {
        slice_with_devices(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
            vec![device(DEVICE1), device(DEVICE2)],
        )
    };
    vec![
        a,
        slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_B),
    ]
}

#[test]
fn all_devices_plus_another() {
    expect_results(
        Case {
            claims: vec![all_claim(CLAIM0, CLASS_A), one_claim(CLAIM1, CLASS_B)],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: two_drivers(1),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)],
            ),
        ],
    );
}

#[test]
fn all_devices_plus_another_reversed() {
    expect_results(
        Case {
            claims: vec![one_claim(CLAIM1, CLASS_B), all_claim(CLAIM0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: two_drivers(1),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
        ],
    );
}

#[test]
fn all_devices_many_plus_another() {
    expect_results(
        Case {
            claims: vec![all_claim(CLAIM0, CLASS_A), one_claim(CLAIM1, CLASS_B)],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: two_drivers(2),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                ],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)],
            ),
        ],
    );
}

#[test]
fn all_devices_many_plus_another_reversed() {
    expect_results(
        Case {
            claims: vec![one_claim(CLAIM1, CLASS_B), all_claim(CLAIM0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: two_drivers(2),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![
                    result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                    result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                ],
            ),
        ],
    );
}

#[test]
fn all_devices_no_solution() {
    expect_none(Case {
        claims: vec![one_claim(CLAIM1, CLASS_A), all_claim(CLAIM0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
        )],
        ..Case::default()
    });
}

#[test]
fn all_devices_no_solution_reversed() {
    expect_none(Case {
        claims: vec![all_claim(CLAIM0, CLASS_A), one_claim(CLAIM1, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
        )],
        ..Case::default()
    });
}

#[test]
fn all_devices_slice_without_devices() {
    expect_none(Case {
        claims: vec![all_claim(CLAIM0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_no_devices(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
        )],
        ..Case::default()
    });
}

#[test]
fn all_devices_no_slices() {
    expect_none(Case {
        claims: vec![all_claim(CLAIM0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        ..Case::default()
    });
}

#[test]
fn all_devices_some_allocated() {
    expect_none(Case {
        claims: vec![all_claim(CLAIM0, CLASS_A)],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_devices(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
            vec![device(DEVICE1), device(DEVICE2)],
        )],
        ..Case::default()
    });
}
