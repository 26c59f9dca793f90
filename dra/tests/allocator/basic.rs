//! Plain requests: one or more devices, nodes, classes, slices.

use super::common::*;

#[test]
fn empty() {
    expect_results(Case::default(), vec![]);
}

#[test]
fn simple() {
    expect_results(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
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
fn other_node() {
    expect_results(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_B),
                slice_with_one_device(SLICE2, Nodes::Name(NODE2), POOL2.into(), DRIVER_A),
            ],
            node: node(NODE2, REGION2),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE2),
            vec![result(REQ0, DRIVER_A, POOL2, DEVICE1, false)],
        )],
    );
}

const AT_LEAST_1GI: &str = r#"device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0"#;
const AT_LEAST_2GI: &str = r#"device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0"#;

fn small_and_large_slice(large_first: bool) -> Vec<berth_sdk::dra::ResourceSlice> {
    let small = with_capacity(device(DEVICE1), &[("memory", "1Gi")]);
    let large = with_capacity(device(DEVICE2), &[("memory", "2Gi")]);
    let devices = if large_first {
        vec![large, small]
    } else {
        vec![small, large]
    };
    vec![slice_with_devices(
        SLICE1,
        Nodes::Name(NODE1),
        POOL1.into(),
        DRIVER_A,
        devices,
    )]
}

#[test]
fn small_and_large() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![
                    request_with(REQ0, CLASS_A, 1, &[AT_LEAST_1GI]),
                    request_with(REQ1, CLASS_A, 1, &[AT_LEAST_2GI]),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: small_and_large_slice(false),
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
fn small_and_large_backtrack_requests() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![
                    request_with(REQ0, CLASS_A, 1, &[AT_LEAST_1GI]),
                    request_with(REQ1, CLASS_A, 1, &[AT_LEAST_2GI]),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: small_and_large_slice(true),
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
fn small_and_large_backtrack_claims() {
    expect_results(
        Case {
            claims: vec![
                claim_with_requests(
                    CLAIM0,
                    vec![],
                    vec![request_with(REQ0, CLASS_A, 1, &[AT_LEAST_1GI])],
                ),
                claim_with_requests(
                    CLAIM1,
                    vec![],
                    vec![request_with(REQ1, CLASS_A, 1, &[AT_LEAST_2GI])],
                ),
            ],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: small_and_large_slice(true),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![result(REQ1, DRIVER_A, POOL1, DEVICE2, false)],
            ),
        ],
    );
}

#[test]
fn devices_split_across_different_slices() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 2)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A),
                slice_with_one_device(SLICE2, Nodes::Name(NODE1), POOL2.into(), DRIVER_A),
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
fn no_slices() {
    expect_none(Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        ..Case::default()
    });
}

#[test]
fn not_enough_suitable_devices() {
    expect_none(Case {
        claims: vec![
            claim_with_request(CLAIM0, REQ0, CLASS_A),
            claim_with_request(CLAIM0, REQ1, CLASS_A),
        ],
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
fn no_classes() {
    expect_error(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        "could not retrieve device class class-a",
    );
}

#[test]
fn unknown_class() {
    expect_error(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, "unknown-class")],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        "could not retrieve device class unknown-class",
    );
}

#[test]
fn empty_class() {
    expect_error(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, "")],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        "claim claim-0, request req-0: missing device class name (unsupported request type?)",
    );
}

#[test]
fn no_claims_to_allocate() {
    expect_results(
        Case {
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        vec![],
    );
}

#[test]
fn network_attached_device() {
    expect_results(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Selector(node_label_selector(REGION_KEY, &[REGION1])),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        vec![allocation(
            Some(node_label_selector(REGION_KEY, &[REGION1])),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn unsuccessful_allocation_network_attached_device() {
    expect_none(Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Nodes::Selector(node_label_selector(REGION_KEY, &[REGION1])),
            POOL1.into(),
            DRIVER_A,
        )],
        node: node(NODE2, REGION2),
        ..Case::default()
    });
}

#[test]
fn many_network_attached_devices() {
    use berth_sdk::affinity::{NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm};
    let req = |key: &str, value: &str| NodeSelectorRequirement {
        key: key.into(),
        operator: NodeSelectorOperator::In,
        values: vec![value.into()],
    };
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 4)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_one_device(
                    SLICE1,
                    Nodes::Selector(node_label_selector(REGION_KEY, &[REGION1])),
                    POOL1.into(),
                    DRIVER_A,
                ),
                slice_with_one_device(SLICE1, Nodes::All, POOL2.into(), DRIVER_A),
                slice_with_one_device(
                    SLICE1,
                    Nodes::Selector(node_label_selector(PLANET_KEY, &[PLANET_EARTH])),
                    POOL3.into(),
                    DRIVER_A,
                ),
                slice_with_one_device(
                    SLICE1,
                    Nodes::Selector(local_node_selector(NODE1).unwrap()),
                    POOL4.into(),
                    DRIVER_A,
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            Some(vec![NodeSelectorTerm {
                match_expressions: vec![req(REGION_KEY, REGION1), req(PLANET_KEY, PLANET_EARTH)],
                match_fields: vec![req(FIELD_NAME_KEY, NODE1)],
            }]),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL2, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL3, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL4, DEVICE1, false),
            ],
        )],
    );
}

#[test]
fn local_and_network_attached_devices() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 2)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_one_device(
                    SLICE1,
                    Nodes::Selector(node_label_selector(REGION_KEY, &[REGION1])),
                    POOL1.into(),
                    DRIVER_A,
                ),
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
fn several_different_drivers() {
    expect_results(
        Case {
            claims: vec![
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                claim_with_request(CLAIM0, REQ0, CLASS_B),
            ],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    POOL1.into(),
                    DRIVER_A,
                    vec![device(DEVICE1), device(DEVICE2)],
                ),
                slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_B),
            ],
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
fn already_allocated_devices() {
    expect_none(Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)],
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
fn unknown_constraint() {
    let mut c = claim_with_request(CLAIM0, REQ0, CLASS_A);
    c.spec.constraints = vec![berth_sdk::dra::DeviceConstraint {
        requests: vec![],
        match_attribute: None,
        distinct_attribute: None,
    }];
    expect_error(
        Case {
            claims: vec![c],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        "empty constraint (unsupported constraint type?)",
    );
}

#[test]
fn invalid_cel_one_device() {
    let e = expect_error(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request_with(REQ0, CLASS_A, 1, &["noSuchVar"])],
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
        "undeclared reference",
    );
    assert_eq!(
        e.to_string(),
        "claim claim-0: selector #0 (\"noSuchVar\") on device driver-a/pool-1/device-1: CEL runtime error: undeclared reference to 'noSuchVar'"
    );
}

#[test]
fn invalid_cel_one_device_class() {
    let mut c = class(CLASS_A, DRIVER_A);
    c.selectors[0].expression = "noSuchVar".into();
    let e = expect_error(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![c],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        "undeclared reference",
    );
    assert!(
        e.to_string().starts_with(
            "class class-a: selector #0 (\"noSuchVar\") on device driver-a/pool-1/device-1: CEL runtime error"
        ),
        "{e}"
    );
}

#[test]
fn invalid_cel_all_devices() {
    let mut c = claim_with_requests(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]);
    if let berth_sdk::dra::DeviceRequest::Exactly(r) = &mut c.spec.requests[0] {
        r.selectors = vec![selector("noSuchVar")];
    }
    expect_error(
        Case {
            claims: vec![c],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        "undeclared reference",
    );
}

#[test]
fn too_many_devices_single_request() {
    expect_error(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 500)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            ..Case::default()
        },
        "exceeds the claim limit",
    );
}

/// Counts are 64-bit on every target: one past what a 32-bit `usize` holds (the
/// guest's) is refused for the claim limit with its own value, as natively.
#[test]
fn a_count_past_32_bits_exceeds_the_claim_limit() {
    expect_error(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 5_000_000_000)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            ..Case::default()
        },
        "claim claim-0: number of requested devices 5000000000 exceeds the claim limit of 32",
    );
}

/// The counts of a claim add up without overflowing, in the guest as natively.
#[test]
fn huge_counts_add_up_exactly() {
    expect_error(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![
                    request(REQ0, CLASS_A, i64::MAX),
                    request(REQ1, CLASS_A, i64::MAX),
                    request("req-2", CLASS_A, i64::MAX),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            ..Case::default()
        },
        "number of requested devices 27670116110564327421 exceeds the claim limit of 32",
    );
}

#[test]
fn many_devices_okay() {
    expect_none(Case {
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 32)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        ..Case::default()
    });
}

#[test]
fn too_many_devices_total() {
    expect_error(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 32), request(REQ1, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_multiple_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                33,
            )],
            ..Case::default()
        },
        "exceeds the claim limit",
    );
}

#[test]
fn obsolete_slice() {
    let mut newer = slice_with_devices(
        "slice-1-obsolete",
        Nodes::Name(NODE1),
        resource_pool(POOL1, 2),
        DRIVER_A,
        vec![device(DEVICE2)],
    );
    newer.pool.generation += 1;
    expect_none(Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_devices(
                "slice-1-obsolete",
                Nodes::Name(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE1)],
            ),
            newer,
        ],
        ..Case::default()
    });
}

#[test]
fn duplicate_slice() {
    let mut a = slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A);
    a.pool.resource_slice_count = 2;
    let mut b = a.clone();
    b.name.push_str("-2");
    let e = expect_error(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![a, b],
            ..Case::default()
        },
        "invalid resource pools were encountered",
    );
    assert!(matches!(e, berth_dra::AllocError::OnNode(_)));
}

#[test]
fn max_number_devices() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 32)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_multiple_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                32,
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            multiple_results(REQ0, DRIVER_A, POOL1, 32, 0),
        )],
    );
}

#[test]
fn all_devices_invalid_cel() {
    // Upstream's row of this name asks for 500 devices, as too-many-devices-single-request.
    expect_error(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 500)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            ..Case::default()
        },
        "exceeds the claim limit",
    );
}

#[test]
fn a_selector_that_does_not_compile_is_named_with_its_expression() {
    let mut c = class(CLASS_A, DRIVER_A);
    c.selectors[0].expression = "device.driver ==".into();
    let e = expect_error(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![c],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        "CEL compile error",
    );
    assert!(
        e.to_string()
            .starts_with("class class-a: selector #0 (\"device.driver ==\"): CEL compile error: compilation failed: "),
        "{e}"
    );
}
