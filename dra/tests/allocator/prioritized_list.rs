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

fn mem(q: &str) -> String {
    format!(r#"device.capacity["driver-a"].memory.compareTo(quantity("{q}")) >= 0"#)
}

fn pl() -> berth_dra::Features {
    features(|f| f.prioritized_list = true)
}

fn claim_with(requests: Vec<berth_sdk::dra::DeviceRequest>) -> ResourceClaim {
    claim_with_requests(CLAIM0, vec![], requests)
}

#[test]
fn prioritized_list_first_unavailable() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![prioritized(
                REQ0,
                vec![
                    sub_request(SUB_REQ0, CLASS_B, 1),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ],
            )])],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
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
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn prioritized_list_non_available() {
    expect_none(Case {
        features: pl(),
        claims: vec![claim_with(vec![prioritized(
            REQ0,
            vec![
                sub_request(SUB_REQ0, CLASS_B, 2),
                sub_request(SUB_REQ1, CLASS_A, 2),
            ],
        )])],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![
            slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A),
            slice_with_one_device(SLICE2, Nodes::Name(NODE1), POOL2.into(), DRIVER_B),
        ],
        ..Case::default()
    });
}

#[test]
fn prioritized_list_device_config() {
    use berth_sdk::dra::AllocationConfigSource::FromClaim;
    let mut c = claim_with(vec![prioritized(
        REQ0,
        vec![
            sub_request(SUB_REQ0, CLASS_A, 1),
            sub_request(SUB_REQ1, CLASS_B, 2),
        ],
    )]);
    c.spec.config = vec![
        claim_config(&[REQ0_SUB_REQ0], device_configuration(DRIVER_A, "foo")),
        claim_config(&[REQ0_SUB_REQ1], device_configuration(DRIVER_B, "bar")),
    ];
    expect_results(
        Case {
            features: pl(),
            claims: vec![c],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_B,
                vec![device(DEVICE1), device(DEVICE2)],
            )],
            ..Case::default()
        },
        vec![allocation_with_configs(
            local_node_selector(NODE1),
            vec![
                result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE1, false),
                result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE2, false),
            ],
            vec![config(FromClaim, &[], DRIVER_B, "bar")],
        )],
    );
}

#[test]
fn prioritized_list_class_config() {
    use berth_sdk::dra::AllocationConfigSource::FromClass;
    expect_results(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![prioritized(
                REQ0,
                vec![
                    sub_request(SUB_REQ0, CLASS_A, 2),
                    sub_request(SUB_REQ1, CLASS_B, 2),
                ],
            )])],
            classes: vec![
                class_with_config(CLASS_A, DRIVER_A, "foo"),
                class_with_config(CLASS_B, DRIVER_B, "bar"),
            ],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    POOL1.into(),
                    DRIVER_B,
                    vec![device(DEVICE1), device(DEVICE2)],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE1),
                    POOL2.into(),
                    DRIVER_A,
                    vec![device(DEVICE3)],
                ),
            ],
            ..Case::default()
        },
        vec![allocation_with_configs(
            local_node_selector(NODE1),
            vec![
                result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE1, false),
                result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE2, false),
            ],
            vec![config(FromClass, &[], DRIVER_B, "bar")],
        )],
    );
}

#[test]
fn claim_config_scoped_to_subrequests_of_one_request() {
    use berth_sdk::dra::AllocationConfigSource::FromClaim;
    let mut c = claim_with(vec![
        prioritized(
            REQ0,
            vec![
                sub_request(SUB_REQ0, CLASS_A, 1),
                sub_request(SUB_REQ1, CLASS_B, 1),
            ],
        ),
        request(REQ1, CLASS_A, 1),
    ]);
    c.spec.config = vec![claim_config(
        &[REQ0_SUB_REQ0, REQ0_SUB_REQ1],
        device_configuration(DRIVER_A, "scoped"),
    )];
    expect_results(
        Case {
            features: pl(),
            claims: vec![c],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![slice_with_multiple_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                2,
            )],
            ..Case::default()
        },
        vec![allocation_with_configs(
            local_node_selector(NODE1),
            vec![
                result(REQ0_SUB_REQ0, DRIVER_A, POOL1, DEVICE0, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
            vec![config(
                FromClaim,
                &[REQ0_SUB_REQ0, REQ0_SUB_REQ1],
                DRIVER_A,
                "scoped",
            )],
        )],
    );
}

#[test]
fn claim_config_covering_all_requests_is_cleared() {
    use berth_sdk::dra::AllocationConfigSource::FromClaim;
    let mut c = claim_with(vec![
        prioritized(
            REQ0,
            vec![
                sub_request(SUB_REQ0, CLASS_A, 1),
                sub_request(SUB_REQ1, CLASS_B, 1),
            ],
        ),
        request(REQ1, CLASS_A, 1),
    ]);
    c.spec.config = vec![claim_config(
        &[REQ0_SUB_REQ0, REQ1],
        device_configuration(DRIVER_A, "all"),
    )];
    expect_results(
        Case {
            features: pl(),
            claims: vec![c],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![slice_with_multiple_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                2,
            )],
            ..Case::default()
        },
        vec![allocation_with_configs(
            local_node_selector(NODE1),
            vec![
                result(REQ0_SUB_REQ0, DRIVER_A, POOL1, DEVICE0, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
            vec![config(FromClaim, &[], DRIVER_A, "all")],
        )],
    );
}

#[test]
fn prioritized_list_subrequests_with_expressions() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![
                request_with(REQ0, CLASS_A, 1, &[&mem("1Gi")]),
                prioritized(
                    REQ1,
                    vec![
                        sub_with_selectors(sub_request(SUB_REQ0, CLASS_A, 1), &[&mem("4Gi")]),
                        sub_with_selectors(sub_request(SUB_REQ1, CLASS_A, 2), &[&mem("2Gi")]),
                    ],
                ),
            ])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![
                    with_capacity(device(DEVICE1), &[("memory", "2Gi")]),
                    with_capacity(device(DEVICE2), &[("memory", "2Gi")]),
                    with_capacity(device(DEVICE3), &[("memory", "1Gi")]),
                ],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE3, false),
                result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )],
    );
}

fn versioned(name: &str, memory: &str, version: &str) -> berth_sdk::dra::Device {
    with_attributes(
        with_capacity(device(name), &[("memory", memory)]),
        &[(
            "driverVersion",
            berth_sdk::dra::DeviceAttribute::Version(version.into()),
        )],
    )
}

fn constrained_claim(constraint_requests: &[&str]) -> ResourceClaim {
    claim_with_requests(
        CLAIM0,
        vec![match_attribute(
            "driver-a/driverVersion",
            constraint_requests,
        )],
        vec![
            request_with(REQ0, CLASS_A, 1, &[&mem("8Gi")]),
            prioritized(
                REQ1,
                vec![
                    sub_with_selectors(sub_request(SUB_REQ0, CLASS_A, 1), &[&mem("2Gi")]),
                    sub_with_selectors(sub_request(SUB_REQ1, CLASS_A, 1), &[&mem("1Gi")]),
                ],
            ),
        ],
    )
}

#[test]
fn prioritized_list_subrequests_with_constraints_ref_parent_request() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![constrained_claim(&[REQ0, REQ1])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    POOL1.into(),
                    DRIVER_A,
                    vec![versioned(DEVICE1, "8Gi", "1.0.0")],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE1),
                    POOL2.into(),
                    DRIVER_A,
                    vec![
                        versioned(DEVICE2, "2Gi", "2.0.0"),
                        versioned(DEVICE3, "1Gi", "1.0.0"),
                    ],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1_SUB_REQ1, DRIVER_A, POOL2, DEVICE3, false),
            ],
        )],
    );
}

#[test]
fn prioritized_list_subrequests_with_constraints_ref_sub_request() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![constrained_claim(&[REQ0, REQ1_SUB_REQ0])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    POOL1.into(),
                    DRIVER_A,
                    vec![versioned(DEVICE1, "8Gi", "1.0.0")],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE1),
                    POOL2.into(),
                    DRIVER_A,
                    vec![versioned(DEVICE2, "2Gi", "2.0.0")],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, false),
            ],
        )],
    );
}

#[test]
fn prioritized_list_subrequests_with_allocation_mode_all() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![prioritized(
                REQ0,
                vec![
                    sub_all(sub_request(SUB_REQ0, CLASS_A, 0)),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ],
            )])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            )],
            allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false)],
        )],
    );
}

#[test]
fn prioritized_list_allocation_mode_all_multiple_requests() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![
                request(REQ0, CLASS_A, 1),
                prioritized(
                    REQ1,
                    vec![
                        sub_all(sub_request(SUB_REQ0, CLASS_A, 0)),
                        sub_request(SUB_REQ1, CLASS_A, 1),
                    ],
                ),
            ])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )],
    );
}

#[test]
fn prioritized_list_disabled() {
    expect_error(
        Case {
            claims: vec![claim_with(vec![prioritized(
                REQ0,
                vec![sub_request(SUB_REQ0, CLASS_A, 1)],
            )])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        "claim claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled",
    );
}

fn big_and_small() -> Vec<berth_sdk::dra::ResourceSlice> {
    vec![
        slice_with_devices(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
            vec![with_capacity(device(DEVICE1), &[("memory", "8Gi")])],
        ),
        slice_with_devices(
            SLICE2,
            Nodes::Name(NODE1),
            POOL2.into(),
            DRIVER_A,
            vec![with_capacity(device(DEVICE2), &[("memory", "4Gi")])],
        ),
    ]
}

fn eight_then_four(name: &str) -> berth_sdk::dra::DeviceRequest {
    prioritized(
        name,
        vec![
            sub_with_selectors(sub_request(SUB_REQ0, CLASS_A, 1), &[&mem("8Gi")]),
            sub_with_selectors(sub_request(SUB_REQ1, CLASS_A, 1), &[&mem("4Gi")]),
        ],
    )
}

#[test]
fn prioritized_list_multi_request() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![
                request_with(REQ1, CLASS_A, 1, &[&mem("8Gi")]),
                eight_then_four(REQ0),
            ])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: big_and_small(),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, false),
            ],
        )],
    );
}

#[test]
fn prioritized_list_with_backtracking() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![
                eight_then_four(REQ0),
                request_with(REQ1, CLASS_A, 1, &[&mem("8Gi")]),
            ])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: big_and_small(),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )],
    );
}

#[test]
fn prioritized_list_too_many_in_first_subrequest() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![prioritized(
                REQ0,
                vec![
                    sub_request(SUB_REQ0, CLASS_B, 500),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ],
            )])],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
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
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

fn v6_then_v5() -> ResourceClaim {
    claim_with(vec![prioritized(
        REQ0,
        vec![
            sub_all(sub_with_selectors(
                sub_request(SUB_REQ0, CLASS_A, 0),
                &[r#"device.attributes["driver-a"].generation == "v6""#],
            )),
            sub_all(sub_with_selectors(
                sub_request(SUB_REQ1, CLASS_A, 0),
                &[r#"device.attributes["driver-a"].generation == "v5""#],
            )),
        ],
    )])
}

fn generation(name: &str, g: &str) -> berth_sdk::dra::Device {
    with_attributes(
        device(name),
        &[(
            "generation",
            berth_sdk::dra::DeviceAttribute::String(g.into()),
        )],
    )
}

#[test]
fn prioritized_list_allocation_mode_all() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![prioritized(
                REQ0,
                vec![
                    sub_all(sub_request(SUB_REQ0, CLASS_A, 0)),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ],
            )])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            )],
            allocated: vec![id(DRIVER_A, POOL1, DEVICE2)],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn prioritized_list_allocation_mode_all_with_selectors() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![v6_then_v5()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![generation(DEVICE1, "v5")],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn prioritized_list_allocation_mode_all_with_selectors_multiple_pools() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![v6_then_v5()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    POOL1.into(),
                    DRIVER_A,
                    vec![generation(DEVICE1, "v5")],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE1),
                    POOL2.into(),
                    DRIVER_A,
                    vec![generation(DEVICE1, "v5")],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE1, false),
            ],
        )],
    );
}

#[test]
fn prioritized_list_allocation_mode_all_with_selectors_multiple_pools_across_nodes() {
    expect_results(
        Case {
            features: pl(),
            claims: vec![v6_then_v5()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    POOL1.into(),
                    DRIVER_A,
                    vec![generation(DEVICE1, "v5")],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE2),
                    POOL2.into(),
                    DRIVER_A,
                    vec![generation(DEVICE1, "v5"), generation(DEVICE2, "v6")],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn prioritized_list_allocation_mode_all_with_selectors_deviceclass_subset() {
    let mut c = class(CLASS_A, DRIVER_A);
    c.selectors = vec![selector(
        r#"device.driver == "driver-a" && device.attributes["driver-a"].selected"#,
    )];
    let d = |name: &str, g: &str, selected: bool| {
        with_attributes(
            device(name),
            &[
                (
                    "generation",
                    berth_sdk::dra::DeviceAttribute::String(g.into()),
                ),
                ("selected", berth_sdk::dra::DeviceAttribute::Bool(selected)),
            ],
        )
    };
    expect_results(
        Case {
            features: pl(),
            claims: vec![v6_then_v5()],
            classes: vec![c],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![
                    d(DEVICE1, "v6", false),
                    d(DEVICE2, "v5", false),
                    d(DEVICE3, "v5", true),
                ],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, false)],
        )],
    );
}

#[test]
fn prioritized_list_max_allocation_limit_request() {
    let mut expected = multiple_results(REQ0_SUB_REQ1, DRIVER_A, POOL1, 16, 0);
    expected.extend(multiple_results(REQ1_SUB_REQ1, DRIVER_A, POOL1, 16, 16));
    let list = |name: &str| {
        prioritized(
            name,
            vec![
                sub_request(SUB_REQ0, CLASS_A, 32),
                sub_request(SUB_REQ1, CLASS_A, 16),
            ],
        )
    };
    expect_results_in_steps(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![list(REQ0), list(REQ1)])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_multiple_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                64,
            )],
            ..Case::default()
        },
        vec![allocation(local_node_selector(NODE1), expected)],
        Some(75),
    );
}

#[test]
fn prioritized_list_max_allocation_allocation_mode_all() {
    expect_results_in_steps(
        Case {
            features: pl(),
            claims: vec![claim_with(vec![
                prioritized(
                    REQ0,
                    vec![
                        sub_all(sub_request(SUB_REQ0, CLASS_A, 0)),
                        sub_request(SUB_REQ1, CLASS_A, 2),
                    ],
                ),
                request(REQ1, CLASS_B, 2),
            ])],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice_with_multiple_devices(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A, 31),
                slice_with_multiple_devices(SLICE2, Nodes::Name(NODE1), POOL2.into(), DRIVER_B, 2),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0_SUB_REQ1, DRIVER_A, POOL1, "device-0", false),
                result(REQ0_SUB_REQ1, DRIVER_A, POOL1, "device-1", false),
                result(REQ1, DRIVER_B, POOL2, "device-0", false),
                result(REQ1, DRIVER_B, POOL2, "device-1", false),
            ],
        )],
        Some(42),
    );
}

/// A subrequest asking for more devices than a 32-bit `usize` holds (the guest's)
/// is passed over for the next one, as natively.
#[test]
fn a_subrequest_count_past_32_bits_is_passed_over() {
    let mut c = claim(CLAIM0);
    c.spec.requests = vec![prioritized(
        REQ0,
        vec![
            sub_request(SUB_REQ0, CLASS_A, 5_000_000_000),
            sub_request(SUB_REQ1, CLASS_B, 1),
        ],
    )];
    expect_results(
        Case {
            features: features(|f| f.prioritized_list = true),
            claims: vec![c],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: vec![
                slice_with_one_device(SLICE1, Nodes::Name(NODE1), POOL1.into(), DRIVER_A),
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
