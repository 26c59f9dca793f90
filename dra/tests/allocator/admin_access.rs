//! Admin access: devices are not taken exclusively.

use super::common::*;

fn two_devices() -> Vec<berth_sdk::dra::ResourceSlice> {
    vec![slice_with_devices(
        SLICE1,
        Nodes::Name(NODE1),
        POOL1.into(),
        DRIVER_A,
        vec![device(DEVICE1), device(DEVICE2)],
    )]
}

#[test]
fn all_devices_some_allocated_admin_access() {
    expect_results(
        Case {
            features: features(|f| f.admin_access = true),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![admin(all_request(REQ0, CLASS_A))],
            )],
            allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: two_devices(),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, true),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, true),
            ],
        )],
    );
}

#[test]
fn all_devices_some_allocating_admin_access() {
    expect_none(Case {
        features: features(|f| f.admin_access = true),
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![
                admin(request(REQ0, CLASS_A, 1)),
                admin(all_request(REQ1, CLASS_A)),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: two_devices(),
        ..Case::default()
    });
}

#[test]
fn count_devices_some_allocated_admin_access() {
    expect_results(
        Case {
            features: features(|f| f.admin_access = true),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![admin(request(REQ0, CLASS_A, 2))],
            )],
            allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: two_devices(),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, true),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, true),
            ],
        )],
    );
}

#[test]
fn separate_claims_share_device_admin_access() {
    expect_results(
        Case {
            features: features(|f| f.admin_access = true),
            claims: vec![
                claim_with_requests(CLAIM0, vec![], vec![admin(request(REQ0, CLASS_A, 1))]),
                claim_with_requests(CLAIM1, vec![], vec![admin(request(REQ0, CLASS_A, 1))]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: two_devices(),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
            ),
        ],
    );
}

#[test]
fn admin_access_claims_device_allocating_for_non_admin_access() {
    expect_results(
        Case {
            features: features(|f| f.admin_access = true),
            claims: vec![
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim_with_requests(CLAIM1, vec![], vec![admin(request(REQ0, CLASS_A, 1))]),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: two_devices(),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
            ),
        ],
    );
}

#[test]
fn admin_access_disabled() {
    expect_error(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![admin(request(REQ0, CLASS_A, 1))],
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
        "claim claim-0, request req-0: admin access is requested, but the feature is disabled",
    );
}

#[test]
fn admin_access_enabled() {
    expect_results(
        Case {
            features: features(|f| f.admin_access = true),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![admin(request(REQ0, CLASS_A, 1))],
            )],
            allocated: vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)],
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
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
        )],
    );
}
