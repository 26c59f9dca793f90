//! The search tries combinations of devices, not permutations: upstream counts its
//! steps (`expectNumAllocateOneInvocations`), and these rows count the same.

use super::common::*;
use berth_sdk::dra::{DeviceAttribute, ResourceSlice};

fn five_of(slices: Vec<ResourceSlice>) -> Case {
    Case {
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 5)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices,
        ..Case::default()
    }
}

#[track_caller]
fn expect_none_in_steps(case: Case, steps: i64) {
    let (outcome, taken) = case.run_counting();
    assert!(matches!(outcome, Ok(None)), "{outcome:?}");
    assert_eq!(taken, steps, "search steps");
}

#[test]
fn check_combinations_within_single_request_single_pool_single_slice() {
    expect_none_in_steps(
        five_of(vec![slice_with_devices(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
            vec![
                device(DEVICE1),
                device(DEVICE2),
                device(DEVICE3),
                device(DEVICE4),
            ],
        )]),
        16,
    );
}

#[test]
fn check_combinations_within_single_request_single_pool_multiple_slices() {
    expect_none_in_steps(
        five_of(vec![
            slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            ),
            slice_with_devices(
                SLICE2,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE3), device(DEVICE4)],
            ),
        ]),
        16,
    );
}

#[test]
fn check_combinations_within_single_request_multiple_pools_multiple_slices() {
    expect_none_in_steps(
        five_of(vec![
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
                vec![device(DEVICE2)],
            ),
            slice_with_devices(
                SLICE3,
                Nodes::Name(NODE1),
                POOL2.into(),
                DRIVER_A,
                vec![device(DEVICE3), device(DEVICE4)],
            ),
        ]),
        16,
    );
}

#[test]
fn check_combinations_within_single_request_many_pools() {
    expect_none_in_steps(
        five_of(vec![
            slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![device(DEVICE1)],
            ),
            slice_with_devices(
                SLICE2,
                Nodes::Name(NODE1),
                POOL2.into(),
                DRIVER_A,
                vec![device(DEVICE2)],
            ),
            slice_with_devices(
                SLICE3,
                Nodes::Name(NODE1),
                POOL3.into(),
                DRIVER_A,
                vec![device(DEVICE3)],
            ),
            slice_with_devices(
                SLICE4,
                Nodes::Name(NODE1),
                POOL4.into(),
                DRIVER_A,
                vec![device(DEVICE4)],
            ),
        ]),
        16,
    );
}

fn typed(name: &str, t: &str) -> berth_sdk::dra::Device {
    with_attributes(device(name), &[("type", DeviceAttribute::String(t.into()))])
}

const TYPE_X: &str = r#"device.attributes["driver-a"].type == "X""#;
const TYPE_Y: &str = r#"device.attributes["driver-a"].type == "Y""#;

fn two_then_x() -> Vec<berth_sdk::dra::ResourceClaim> {
    vec![claim_with_requests(
        CLAIM0,
        vec![],
        vec![
            request(REQ1, CLASS_A, 2),
            request_with(REQ2, CLASS_A, 1, &[TYPE_X]),
        ],
    )]
}

#[test]
fn check_combinations_with_backtracking() {
    expect_results_in_steps(
        Case {
            claims: two_then_x(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![
                    typed(DEVICE1, "X"),
                    typed(DEVICE2, "Y"),
                    typed(DEVICE3, "Y"),
                ],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ1, DRIVER_A, POOL1, DEVICE2, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE3, false),
                result(REQ2, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )],
        Some(12),
    );
}

#[test]
fn check_combinations_with_backtracking_across_slices_and_pools() {
    expect_results_in_steps(
        Case {
            features: features(|f| f.device_binding_conditions = true),
            claims: two_then_x(),
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![typed(DEVICE1, "X")],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![typed(DEVICE2, "Y")],
                ),
                slice_with_devices(
                    SLICE3,
                    Nodes::Name(NODE1),
                    POOL2.into(),
                    DRIVER_A,
                    vec![with_binding_conditions(
                        typed(DEVICE3, "Y"),
                        &["IsPrepare"],
                        &[],
                    )],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ1, DRIVER_A, POOL1, DEVICE2, false),
                result_with_binding_conditions(REQ1, DRIVER_A, POOL2, DEVICE3, &["IsPrepare"], &[]),
                result(REQ2, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )],
        Some(12),
    );
}

#[test]
fn check_combinations_with_prioritized_list() {
    expect_results_in_steps(
        Case {
            features: features(|f| f.prioritized_list = true),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![
                    prioritized(
                        REQ1,
                        vec![
                            sub_with_selectors(sub_request(SUB_REQ0, CLASS_A, 3), &[TYPE_Y]),
                            sub_request(SUB_REQ1, CLASS_A, 2),
                        ],
                    ),
                    prioritized(
                        REQ2,
                        vec![
                            sub_request(SUB_REQ0, CLASS_A, 2),
                            sub_with_selectors(sub_request(SUB_REQ1, CLASS_A, 1), &[TYPE_X]),
                        ],
                    ),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![
                    typed(DEVICE1, "X"),
                    typed(DEVICE2, "Y"),
                    typed(DEVICE3, "Y"),
                ],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false),
                result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, false),
                result(REQ2_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )],
        Some(26),
    );
}
