//! Prioritized lists (`firstAvailable`): the first subrequest that can be satisfied.

use super::common::*;
use berth_sdk::dra::ResourceClaim;

fn first_all_then_one() -> ResourceClaim {
    let mut c = claim(CLAIM0);
    c.spec.requests = vec![prioritized(
        REQ0,
        vec![
            sub_all(sub_request(SUB_REQ0, CLASS_A, 0)),
            sub_request(SUB_REQ1, CLASS_B, 1),
        ],
    )];
    c
}

#[test]
fn all_devices_slice_without_devices_prioritized_list() {
    expect_results(
        Case {
            features: features(|f| f.prioritized_list = true),
            claims: vec![first_all_then_one()],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice_with_no_devices(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A),
                slice_with_one_device(SLICE2, Nodes::Name(NODE1), POOL2.into(), DRIVER_B),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, false)],
        )],
    );
}

#[test]
fn all_devices_no_slices_prioritized_list() {
    expect_results(
        Case {
            features: features(|f| f.prioritized_list = true),
            claims: vec![first_all_then_one()],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![slice_with_one_device(
                SLICE2,
                Nodes::Name(NODE1),
                POOL2.into(),
                DRIVER_B,
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, false)],
        )],
    );
}

#[test]
fn all_devices_some_allocated_prioritized_list() {
    expect_results(
        Case {
            features: features(|f| f.prioritized_list = true),
            claims: vec![first_all_then_one()],
            allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    POOL1.into(),
                    DRIVER_A,
                    vec![device(DEVICE1), device(DEVICE2)],
                ),
                slice_with_one_device(SLICE2, Nodes::Name(NODE1), POOL2.into(), DRIVER_B),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, false)],
        )],
    );
}
