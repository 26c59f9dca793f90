//! Configuration from classes and claims copied into the results.

use super::common::*;
use berth_sdk::dra::AllocationConfigSource::{FromClaim, FromClass};

#[test]
fn with_class_device_config() {
    expect_results(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class_with_config(CLASS_A, DRIVER_A, "classAttribute")],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        vec![allocation_with_configs(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            vec![config(FromClass, &[], DRIVER_A, "classAttribute")],
        )],
    );
}

#[test]
fn with_class_device_config_with_multiple_request_and_configs() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![
                    request(REQ0, CLASS_A, 1),
                    request(REQ1, CLASS_A, 1),
                    request(REQ2, CLASS_B, 1),
                ],
            )],
            classes: vec![
                class_with_config(CLASS_A, DRIVER_A, "classAttribute-A"),
                class_with_config(CLASS_B, DRIVER_B, "classAttribute-B"),
            ],
            slices: vec![
                slice_with_multiple_devices(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A, 2),
                slice_with_one_device(SLICE2, Nodes::Name(NODE1), POOL1.into(), DRIVER_B),
            ],
            ..Case::default()
        },
        vec![allocation_with_configs(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE0, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ2, DRIVER_B, POOL1, DEVICE1, false),
            ],
            vec![
                config(FromClass, &[REQ0, REQ1], DRIVER_A, "classAttribute-A"),
                config(FromClass, &[REQ2], DRIVER_B, "classAttribute-B"),
            ],
        )],
    );
}

#[test]
fn with_claim_config_for_two_requests() {
    let mut c = claim_with_requests(
        CLAIM0,
        vec![],
        vec![
            request(REQ0, CLASS_A, 1),
            request(REQ1, CLASS_A, 1),
            request(REQ2, CLASS_A, 1),
        ],
    );
    c.spec.config = vec![claim_config(
        &[REQ0, REQ1],
        device_configuration(DRIVER_A, "deviceAttribute"),
    )];
    expect_results(
        Case {
            claims: vec![c],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_multiple_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                3,
            )],
            ..Case::default()
        },
        vec![allocation_with_configs(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE0, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ2, DRIVER_A, POOL1, DEVICE2, false),
            ],
            vec![config(
                FromClaim,
                &[REQ0, REQ1],
                DRIVER_A,
                "deviceAttribute",
            )],
        )],
    );
}

#[test]
fn claim_with_device_config() {
    expect_results(
        Case {
            claims: vec![super::common::claim_with_device_config(
                CLAIM0,
                REQ0,
                CLASS_A,
                DRIVER_A,
                "deviceAttribute",
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        vec![allocation_with_config(
            local_node_selector(NODE1),
            DRIVER_A,
            FromClaim,
            "deviceAttribute",
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}
