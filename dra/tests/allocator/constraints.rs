//! `matchAttribute` and `distinctAttribute` constraints.

use super::common::*;
use berth_sdk::dra::{Device, DeviceAttribute};

pub const NON_EXISTENT_ATTRIBUTE: &str = "driver-a/NonExistentAttribute";
pub const BOOL_ATTRIBUTE: &str = "driver-a/boolAttribute";
pub const STRING_ATTRIBUTE: &str = "driver-a/stringAttribute";
pub const VERSION_ATTRIBUTE: &str = "driver-a/driverVersion";
pub const INT_ATTRIBUTE: &str = "driver-a/numa";

fn s(v: &str) -> DeviceAttribute {
    DeviceAttribute::String(v.into())
}

fn v(v: &str) -> DeviceAttribute {
    DeviceAttribute::Version(v.into())
}

fn devices(devices: Vec<Device>) -> Vec<berth_sdk::dra::ResourceSlice> {
    vec![slice_with_devices(
        SLICE1,
        Nodes::Name(NODE1),
        POOL1.into(),
        DRIVER_A,
        devices,
    )]
}

#[test]
fn with_constraint() {
    let attrs = [
        ("driverVersion", v("1.0.0")),
        ("numa", DeviceAttribute::Int(1)),
        ("stringAttribute", s("stringAttributeValue")),
        ("boolAttribute", DeviceAttribute::Bool(true)),
    ];
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    match_attribute(INT_ATTRIBUTE, &[]),
                    match_attribute(VERSION_ATTRIBUTE, &[]),
                    match_attribute(STRING_ATTRIBUTE, &[]),
                    match_attribute(BOOL_ATTRIBUTE, &[]),
                ],
                vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: devices(vec![
                with_attributes(device(DEVICE1), &attrs),
                with_attributes(device(DEVICE2), &attrs),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )],
    );
}

#[test]
fn with_constraint_non_existent_attribute() {
    expect_none(Case {
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![match_attribute(NON_EXISTENT_ATTRIBUTE, &[])],
            vec![request(REQ0, CLASS_A, 1)],
        )],
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

fn not_matching(attribute: &str, name: &str, a: DeviceAttribute, b: DeviceAttribute) -> Case {
    Case {
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![match_attribute(attribute, &[])],
            vec![request(REQ0, CLASS_A, 2)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: devices(vec![
            with_attributes(device(DEVICE1), &[(name, a)]),
            with_attributes(device(DEVICE2), &[(name, b)]),
        ]),
        ..Case::default()
    }
}

#[test]
fn with_constraint_not_matching_int_attribute() {
    expect_none(not_matching(
        INT_ATTRIBUTE,
        "numa",
        DeviceAttribute::Int(1),
        DeviceAttribute::Int(2),
    ));
}

#[test]
fn with_constraint_not_matching_int_attribute_all_devices() {
    let mut case = not_matching(
        INT_ATTRIBUTE,
        "numa",
        DeviceAttribute::Int(1),
        DeviceAttribute::Int(2),
    );
    case.claims[0].spec.requests = vec![all_request(REQ0, CLASS_A)];
    expect_error(
        case,
        "claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied",
    );
}

#[test]
fn with_constraint_not_matching_string_attribute() {
    expect_none(not_matching(
        STRING_ATTRIBUTE,
        "stringAttribute",
        s("stringAttributeValue"),
        s("stringAttributeValue2"),
    ));
}

#[test]
fn with_constraint_not_matching_bool_attribute() {
    expect_none(not_matching(
        BOOL_ATTRIBUTE,
        "boolAttribute",
        DeviceAttribute::Bool(true),
        DeviceAttribute::Bool(false),
    ));
}

#[test]
fn with_constraint_not_matching_version_attribute() {
    expect_none(not_matching(
        VERSION_ATTRIBUTE,
        "driverVersion",
        v("1.0.0"),
        v("2.0.0"),
    ));
}

#[test]
fn with_constraint_for_request() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![match_attribute(VERSION_ATTRIBUTE, &[REQ0])],
                vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: devices(vec![
                with_attributes(device(DEVICE1), &[("driverVersion", v("1.0.0"))]),
                with_attributes(device(DEVICE2), &[("driverVersion", v("2.0.0"))]),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )],
    );
}

#[test]
fn with_constraint_for_request_retry() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    match_attribute(VERSION_ATTRIBUTE, &[REQ0]),
                    match_attribute(STRING_ATTRIBUTE, &[]),
                ],
                vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: devices(vec![
                with_attributes(
                    device(DEVICE1),
                    &[("driverVersion", v("1.0.0")), ("stringAttribute", s("a"))],
                ),
                with_attributes(
                    device(DEVICE2),
                    &[("driverVersion", v("2.0.0")), ("stringAttribute", s("b"))],
                ),
                with_attributes(
                    device(DEVICE3),
                    &[("driverVersion", v("3.0.0")), ("stringAttribute", s("b"))],
                ),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )],
    );
}

fn cc() -> berth_dra::Features {
    features(|f| f.consumable_capacity = true)
}

fn shared(name: &str, attrs: &[(&str, DeviceAttribute)]) -> Device {
    with_allow_multiple_allocations(with_attributes(device(name), attrs))
}

fn share(
    request: &str,
    device: &str,
    consumed: &[(&str, &str)],
) -> berth_sdk::dra::DeviceRequestAllocationResult {
    result_with_consumed_capacity(request, DRIVER_A, POOL1, device, consumed)
}

#[test]
fn with_distinct_constraints() {
    let d = |name: &str, version: &str, numa: i64, b: bool| {
        shared(
            name,
            &[
                ("driverVersion", v(version)),
                ("numa", DeviceAttribute::Int(numa)),
                ("boolAttribute", DeviceAttribute::Bool(b)),
            ],
        )
    };
    expect_results(
        Case {
            features: cc(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![
                    distinct_attribute(BOOL_ATTRIBUTE, &[REQ0, REQ1]),
                    distinct_attribute(VERSION_ATTRIBUTE, &[REQ0, REQ1, REQ2]),
                    distinct_attribute(INT_ATTRIBUTE, &[REQ0, REQ1, REQ2, REQ3]),
                ],
                vec![
                    request(REQ0, CLASS_A, 1),
                    request(REQ1, CLASS_A, 1),
                    request(REQ2, CLASS_A, 1),
                    request(REQ3, CLASS_A, 1),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: devices(vec![
                d(DEVICE1, "1.0.0", 0, true),
                d(DEVICE2, "1.0.1", 1, false),
                d(DEVICE3, "1.0.2", 2, true),
                d(DEVICE4, "1.0.0", 3, true),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                share(REQ0, DEVICE1, &[]),
                share(REQ1, DEVICE2, &[]),
                share(REQ2, DEVICE3, &[]),
                share(REQ3, DEVICE4, &[]),
            ],
        )],
    );
}

#[test]
fn with_distinct_constraints_attribute_not_set() {
    expect_none(Case {
        features: cc(),
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![distinct_attribute(BOOL_ATTRIBUTE, &[REQ0])],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: devices(vec![with_allow_multiple_allocations(device(DEVICE1))]),
        ..Case::default()
    });
}

#[test]
fn with_distinct_constraints_with_subrequests() {
    let preferring_bool = |name: &str| {
        prioritized(
            name,
            vec![
                sub_with_selectors(
                    sub_request(SUB_REQ0, CLASS_A, 1),
                    &[r#"device.attributes["driver-a"].boolAttribute"#],
                ),
                sub_request(SUB_REQ1, CLASS_A, 1),
            ],
        )
    };
    expect_results(
        Case {
            features: features(|f| {
                f.consumable_capacity = true;
                f.prioritized_list = true;
            }),
            // Three requests prefer the bool attribute; the constraint covers two.
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![distinct_attribute(BOOL_ATTRIBUTE, &[REQ0, REQ1])],
                vec![
                    preferring_bool(REQ0),
                    preferring_bool(REQ1),
                    preferring_bool(REQ2),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: devices(vec![
                shared(DEVICE1, &[("boolAttribute", DeviceAttribute::Bool(true))]),
                shared(DEVICE2, &[("boolAttribute", DeviceAttribute::Bool(false))]),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                share(REQ0_SUB_REQ0, DEVICE1, &[]),
                share(REQ1_SUB_REQ1, DEVICE2, &[]),
                share(REQ2_SUB_REQ0, DEVICE1, &[]),
            ],
        )],
    );
}

#[test]
fn distinct_constraint_one_multi_allocatable_device_with_distinct_constraint() {
    expect_none(Case {
        features: cc(),
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![distinct_attribute(STRING_ATTRIBUTE, &[])],
            vec![
                with_capacity_request(request(REQ0, CLASS_A, 1), Some("1")),
                with_capacity_request(request(REQ1, CLASS_A, 1), Some("1")),
            ],
        )],
        classes: vec![class_with_allow_multiple_allocations(
            CLASS_A, DRIVER_A, true,
        )],
        slices: devices(vec![with_capacity_request_policy_range(
            shared(DEVICE1, &[("stringAttribute", s("stringAttributeValue"))]),
            &[(CAPACITY0, "2")],
        )]),
        ..Case::default()
    });
}

#[test]
fn distinct_constraint_two_multi_allocatable_devices_with_distinct_constraint() {
    let d = |name: &str, value: &str| {
        with_capacity_request_policy_range(
            shared(name, &[("stringAttribute", s(value))]),
            &[(CAPACITY0, "4")],
        )
    };
    expect_results(
        Case {
            features: cc(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![distinct_attribute(STRING_ATTRIBUTE, &[])],
                vec![
                    with_capacity_request(request(REQ0, CLASS_A, 1), Some("2")),
                    with_capacity_request(request(REQ1, CLASS_A, 1), Some("2")),
                ],
            )],
            classes: vec![class_with_allow_multiple_allocations(
                CLASS_A, DRIVER_A, true,
            )],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![d(DEVICE1, "stringAttributeValue1")],
                ),
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![d(DEVICE2, "stringAttributeValue2")],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                share(REQ0, DEVICE1, &[(CAPACITY0, "2")]),
                share(REQ1, DEVICE2, &[(CAPACITY0, "2")]),
            ],
        )],
    );
}
