//! Consumable capacity: devices with `allowMultipleAllocations` shared by what each
//! request consumes, request policies, and `distinctAttribute` on shared devices.

use super::common::*;
use berth_sdk::dra::{Device, DeviceAttribute, DeviceRequest, ResourceClaim, ResourceSlice};

fn cc() -> berth_dra::Features {
    features(|f| f.consumable_capacity = true)
}

fn multi(name: &str) -> Device {
    with_allow_multiple_allocations(device(name))
}

fn one_slice(devices: Vec<Device>) -> Vec<ResourceSlice> {
    vec![slice_with_devices(
        SLICE1,
        Nodes::Name(NODE1),
        POOL1.into(),
        DRIVER_A,
        devices,
    )]
}

fn claim_of(name: &str, requests: Vec<DeviceRequest>) -> ResourceClaim {
    claim_with_requests(name, vec![], requests)
}

fn asking(name: &str, quantity: Option<&str>) -> ResourceClaim {
    claim_of(
        name,
        vec![with_capacity_request(request(REQ0, CLASS_A, 1), quantity)],
    )
}

fn share(
    request: &str,
    device: &str,
    consumed: &[(&str, &str)],
) -> berth_sdk::dra::DeviceRequestAllocationResult {
    result_with_consumed_capacity(request, DRIVER_A, POOL1, device, consumed)
}

fn multi_class() -> Vec<berth_sdk::dra::DeviceClass> {
    vec![class_with_allow_multiple_allocations(
        CLASS_A, DRIVER_A, true,
    )]
}

#[test]
fn consumable_capacity_disabled_feature() {
    expect_error(
        Case {
            features: features(|f| f.device_binding_conditions = true),
            claims: vec![asking(CLAIM0, Some("1"))],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_one_device(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
            )],
            ..Case::default()
        },
        "claim claim-0, request req-0: has capacity requests, but the DRAConsumableCapacity feature is disabled",
    );
}

#[test]
fn consumable_capacity_disabled_feature_with_prioritized_list() {
    expect_error(
        Case {
            features: features(|f| {
                f.device_binding_conditions = true;
                f.prioritized_list = true;
            }),
            claims: vec![claim_of(
                CLAIM0,
                vec![prioritized(
                    REQ0,
                    vec![
                        sub_with_capacity_request(sub_request(SUB_REQ0, CLASS_A, 1), Some("1")),
                        sub_with_capacity_request(sub_request(SUB_REQ1, CLASS_A, 1), Some("1")),
                    ],
                )],
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
        "claim claim-0, subrequest subReq-0: has capacity requests, but the DRAConsumableCapacity feature is disabled",
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_missing_capacity_request() {
    expect_none(Case {
        features: cc(),
        claims: vec![asking(CLAIM0, Some("1"))],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![with_capacity(multi(DEVICE1), &[(CAPACITY1, "1")])]),
        ..Case::default()
    });
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_with_missing_capacity_request()
{
    expect_none(Case {
        features: cc(),
        claims: vec![claim_of(
            CLAIM0,
            vec![with_capacity_request(all_request(REQ0, CLASS_A), Some("1"))],
        )],
        classes: multi_class(),
        slices: one_slice(vec![with_capacity(multi(DEVICE1), &[(CAPACITY1, "1")])]),
        ..Case::default()
    });
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_capacity_without_capacity_request() {
    // Both share the same device; nothing is consumed, as it defines no capacity.
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, None), asking(CLAIM1, None)],
            classes: multi_class(),
            slices: one_slice(vec![multi(DEVICE1)]),
            ..Case::default()
        },
        vec![
            allocation(local_node_selector(NODE1), vec![share(REQ0, DEVICE1, &[])]),
            allocation(local_node_selector(NODE1), vec![share(REQ0, DEVICE1, &[])]),
        ],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_policy_without_capacity_request() {
    // Each takes the whole capacity of a device.
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, None), asking(CLAIM1, None)],
            classes: multi_class(),
            slices: one_slice(vec![
                with_capacity(multi(DEVICE1), &[(CAPACITY0, "1")]),
                with_capacity(multi(DEVICE2), &[(CAPACITY0, "1")]),
            ]),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE1, &[(CAPACITY0, "1")])],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE2, &[(CAPACITY0, "1")])],
            ),
        ],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_policy_without_capacity_request_block() {
    expect_none(Case {
        features: cc(),
        claims: vec![asking(CLAIM0, None), asking(CLAIM1, None)],
        classes: multi_class(),
        slices: one_slice(vec![with_capacity(multi(DEVICE1), &[(CAPACITY0, "2")])]),
        ..Case::default()
    });
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_policy_with_capacity_request() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, Some("1")), asking(CLAIM1, Some("1"))],
            classes: multi_class(),
            slices: one_slice(vec![with_capacity(multi(DEVICE1), &[(CAPACITY0, "2")])]),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE1, &[(CAPACITY0, "1")])],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE1, &[(CAPACITY0, "1")])],
            ),
        ],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_policy_without_capacity_request() {
    // Both take the policy's default, two.
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, None), asking(CLAIM1, None)],
            classes: multi_class(),
            slices: one_slice(vec![with_capacity_request_policy_range(
                multi(DEVICE1),
                &[(CAPACITY0, "4")],
            )]),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE1, &[(CAPACITY0, "2")])],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE1, &[(CAPACITY0, "2")])],
            ),
        ],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_zero_request_policy() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, None), asking(CLAIM1, None)],
            classes: multi_class(),
            slices: one_slice(vec![with_capacity_request_policy_valid_values(
                multi(DEVICE1),
                "0",
                &[(CAPACITY0, "1")],
                &[],
            )]),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE1, &[(CAPACITY0, "0")])],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE1, &[(CAPACITY0, "0")])],
            ),
        ],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_violates_zero_request_policy() {
    expect_none(Case {
        features: cc(),
        claims: vec![asking(CLAIM0, Some("1"))],
        classes: multi_class(),
        slices: one_slice(vec![with_capacity_request_policy_valid_values(
            multi(DEVICE1),
            "0",
            &[(CAPACITY0, "1")],
            &[],
        )]),
        ..Case::default()
    });
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_range_policy_with_capacity_request() {
    // One is rounded up to the range's minimum, two; both fit on the device.
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, Some("1")), asking(CLAIM1, Some("1"))],
            classes: multi_class(),
            slices: one_slice(vec![with_capacity_request_policy_range(
                multi(DEVICE1),
                &[(CAPACITY0, "4")],
            )]),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE1, &[(CAPACITY0, "2")])],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE1, &[(CAPACITY0, "2")])],
            ),
        ],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_range_policy_step() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, Some("3"))],
            classes: multi_class(),
            slices: one_slice(vec![with_capacity_request_policy_range(
                multi(DEVICE1),
                &[(CAPACITY0, "4")],
            )]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0, DEVICE1, &[(CAPACITY0, "4")])],
        )],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_valid_values_policy() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, Some("2"))],
            classes: multi_class(),
            slices: one_slice(vec![with_capacity_request_policy_valid_values(
                multi(DEVICE1),
                "1",
                &[(CAPACITY0, "4")],
                &["2"],
            )]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0, DEVICE1, &[(CAPACITY0, "2")])],
        )],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_valid_values_policy_round_up() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, Some("2"))],
            classes: multi_class(),
            slices: one_slice(vec![with_capacity_request_policy_valid_values(
                multi(DEVICE1),
                "1",
                &[(CAPACITY0, "3")],
                &["3"],
            )]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0, DEVICE1, &[(CAPACITY0, "3")])],
        )],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_exceeded_consumable_capacity_request() {
    expect_none(Case {
        features: cc(),
        claims: vec![asking(CLAIM0, Some("1")), asking(CLAIM1, Some("2"))],
        classes: multi_class(),
        slices: one_slice(vec![with_capacity_request_policy_range(
            multi(DEVICE1),
            &[(CAPACITY0, "2")],
        )]),
        ..Case::default()
    });
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_request_over_max_sharing_policy() {
    // The range's maximum is four: six does not fit even though the device has ten.
    expect_none(Case {
        features: cc(),
        claims: vec![asking(CLAIM0, Some("6"))],
        classes: multi_class(),
        slices: one_slice(vec![with_capacity_request_policy_range(
            multi(DEVICE1),
            &[(CAPACITY0, "10")],
        )]),
        ..Case::default()
    });
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_allocated_capacity_use_remaining() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, Some("2"))],
            allocated_state: consumed_state(&[(id(DRIVER_A, POOL1, DEVICE1), &[(CAPACITY0, "2")])]),
            classes: multi_class(),
            slices: one_slice(vec![with_capacity_request_policy_range(
                multi(DEVICE1),
                &[(CAPACITY0, "4")],
            )]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0, DEVICE1, &[(CAPACITY0, "2")])],
        )],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_allocated_capacity_next_device() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, Some("2"))],
            allocated_state: consumed_state(&[(id(DRIVER_A, POOL1, DEVICE1), &[(CAPACITY0, "2")])]),
            classes: multi_class(),
            slices: one_slice(vec![
                with_capacity_request_policy_range(multi(DEVICE1), &[(CAPACITY0, "2")]),
                with_capacity_request_policy_range(multi(DEVICE2), &[(CAPACITY0, "2")]),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0, DEVICE2, &[(CAPACITY0, "2")])],
        )],
    );
}

#[test]
fn consumable_capacity_with_multi_allocatable_device_backtrack() {
    let d = |name: &str, value: &str, cap: &str| {
        with_capacity_request_policy_range(
            with_attributes(
                multi(name),
                &[("stringAttribute", DeviceAttribute::String(value.into()))],
            ),
            &[(CAPACITY0, cap)],
        )
    };
    let mut c0 = claim_of(
        CLAIM0,
        vec![
            with_capacity_request(request(REQ0, CLASS_A, 1), Some("2")),
            with_capacity_request(request(REQ1, CLASS_A, 1), Some("2")),
        ],
    );
    c0.spec.constraints = vec![match_attribute("driver-a/stringAttribute", &[])];
    expect_results(
        Case {
            features: cc(),
            claims: vec![c0, asking(CLAIM1, Some("2"))],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_slice(vec![
                d(DEVICE2, "stringAttributeValue1", "2"),
                d(DEVICE1, "stringAttributeValue2", "4"),
            ]),
            ..Case::default()
        },
        vec![
            allocation(
                local_node_selector(NODE1),
                vec![
                    share(REQ0, DEVICE1, &[(CAPACITY0, "2")]),
                    share(REQ1, DEVICE1, &[(CAPACITY0, "2")]),
                ],
            ),
            allocation(
                local_node_selector(NODE1),
                vec![share(REQ0, DEVICE2, &[(CAPACITY0, "2")])],
            ),
        ],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_subrequest() {
    expect_results(
        Case {
            features: features(|f| {
                f.consumable_capacity = true;
                f.prioritized_list = true;
            }),
            claims: vec![claim_of(
                CLAIM0,
                vec![prioritized(
                    REQ0,
                    vec![
                        sub_with_capacity_request(sub_request(SUB_REQ0, CLASS_A, 1), Some("4")),
                        sub_with_capacity_request(sub_request(SUB_REQ1, CLASS_A, 1), Some("2")),
                        sub_request(SUB_REQ1, CLASS_A, 1),
                    ],
                )],
            )],
            classes: multi_class(),
            slices: one_slice(vec![with_capacity_request_policy_range(
                multi(DEVICE1),
                &[(CAPACITY0, "2")],
            )]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0_SUB_REQ1, DEVICE1, &[(CAPACITY0, "2")])],
        )],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_no_available_consumable_capacity() {
    expect_none(Case {
        features: cc(),
        claims: vec![asking(CLAIM0, Some("2"))],
        allocated_state: consumed_state(&[(id(DRIVER_A, POOL1, DEVICE1), &[(CAPACITY0, "2")])]),
        classes: multi_class(),
        slices: one_slice(vec![with_capacity_request_policy_range(
            multi(DEVICE1),
            &[(CAPACITY0, "2")],
        )]),
        ..Case::default()
    });
}

fn all_asking(name: &str, quantity: &str) -> DeviceRequest {
    with_capacity_request(all_request(name, CLASS_A), Some(quantity))
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_filter_out_no_capacity() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![claim_of(CLAIM0, vec![all_asking(REQ0, "2")])],
            classes: multi_class(),
            slices: one_slice(vec![
                with_capacity(multi(DEVICE1), &[(CAPACITY0, "2")]),
                multi(DEVICE2),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0, DEVICE1, &[(CAPACITY0, "2")])],
        )],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_filter_out_insufficient_capacity()
 {
    expect_results(
        Case {
            features: cc(),
            claims: vec![claim_of(CLAIM0, vec![all_asking(REQ0, "2")])],
            classes: multi_class(),
            slices: one_slice(vec![
                with_capacity(multi(DEVICE1), &[(CAPACITY0, "2")]),
                with_capacity(multi(DEVICE2), &[(CAPACITY0, "1")]),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0, DEVICE1, &[(CAPACITY0, "2")])],
        )],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_allocating_sufficient() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![claim_of(
                CLAIM0,
                vec![
                    with_capacity_request(request(REQ0, CLASS_A, 1), Some("1")),
                    all_asking(REQ1, "1"),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_slice(vec![
                with_capacity(multi(DEVICE1), &[(CAPACITY0, "2")]),
                with_capacity(multi(DEVICE2), &[(CAPACITY0, "1")]),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                share(REQ0, DEVICE1, &[(CAPACITY0, "1")]),
                share(REQ1, DEVICE1, &[(CAPACITY0, "1")]),
                share(REQ1, DEVICE2, &[(CAPACITY0, "1")]),
            ],
        )],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_in_use_sufficient() {
    expect_results(
        Case {
            features: cc(),
            allocated_state: consumed_state(&[(id(DRIVER_A, POOL1, DEVICE1), &[(CAPACITY0, "1")])]),
            claims: vec![claim_of(CLAIM0, vec![all_asking(REQ0, "1")])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_slice(vec![
                with_capacity(multi(DEVICE1), &[(CAPACITY0, "2")]),
                with_capacity(multi(DEVICE2), &[(CAPACITY0, "1")]),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                share(REQ0, DEVICE1, &[(CAPACITY0, "1")]),
                share(REQ0, DEVICE2, &[(CAPACITY0, "1")]),
            ],
        )],
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_allocating_insufficient() {
    expect_none(Case {
        features: cc(),
        claims: vec![claim_of(
            CLAIM0,
            vec![
                with_capacity_request(request(REQ0, CLASS_A, 1), Some("1")),
                all_asking(REQ1, "1"),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            with_capacity(multi(DEVICE1), &[(CAPACITY0, "1")]),
            with_capacity(multi(DEVICE2), &[(CAPACITY0, "1")]),
        ]),
        ..Case::default()
    });
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_in_use_insufficient() {
    expect_results(
        Case {
            features: cc(),
            allocated_state: consumed_state(&[(id(DRIVER_A, POOL1, DEVICE1), &[(CAPACITY0, "1")])]),
            claims: vec![claim_of(CLAIM0, vec![all_asking(REQ0, "1")])],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_slice(vec![
                with_capacity(multi(DEVICE1), &[(CAPACITY0, "1")]),
                with_capacity(multi(DEVICE2), &[(CAPACITY0, "1")]),
            ]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0, DEVICE2, &[(CAPACITY0, "1")])],
        )],
    );
}

#[test]
fn consumable_capacity_dedicated_device_with_consumable_capacity_request() {
    expect_results(
        Case {
            features: cc(),
            claims: vec![asking(CLAIM0, Some("1"))],
            classes: vec![class_with_allow_multiple_allocations(
                CLASS_A, DRIVER_A, false,
            )],
            slices: one_slice(vec![with_capacity(device(DEVICE1), &[(CAPACITY0, "1")])]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn consumable_capacity_dedicated_device_with_multiple_consumable_capacity_request() {
    expect_none(Case {
        features: cc(),
        claims: vec![asking(CLAIM0, Some("1")), asking(CLAIM1, Some("1"))],
        classes: vec![class_with_allow_multiple_allocations(
            CLASS_A, DRIVER_A, false,
        )],
        slices: one_slice(vec![with_capacity_request_policy_range(
            device(DEVICE1),
            &[(CAPACITY0, "2")],
        )]),
        ..Case::default()
    });
}

#[test]
fn allow_multiple_allocations_exclude_multi_allocatable_device_by_class_selector() {
    expect_none(Case {
        features: cc(),
        claims: vec![asking(CLAIM0, Some("1"))],
        classes: vec![class_with_allow_multiple_allocations(
            CLASS_A, DRIVER_A, false,
        )],
        slices: one_slice(vec![with_capacity(multi(DEVICE1), &[(CAPACITY0, "1")])]),
        ..Case::default()
    });
}

#[test]
fn allow_multiple_allocations_not_allocate_multi_allocatable_device_which_already_dedicated() {
    expect_none(Case {
        features: cc(),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        claims: vec![asking(CLAIM0, Some("1"))],
        classes: multi_class(),
        slices: one_slice(vec![with_capacity_request_policy_range(
            multi(DEVICE1),
            &[(CAPACITY0, "2")],
        )]),
        ..Case::default()
    });
}

#[test]
fn allow_multiple_allocations_not_allocate_dedicated_device_which_change_from_multi_allocatable() {
    expect_none(Case {
        features: cc(),
        claims: vec![asking(CLAIM0, Some("1"))],
        allocated_state: consumed_state(&[(id(DRIVER_A, POOL1, DEVICE1), &[(CAPACITY0, "1")])]),
        classes: multi_class(),
        slices: one_slice(vec![with_capacity_request_policy_range(
            device(DEVICE1),
            &[(CAPACITY0, "2")],
        )]),
        ..Case::default()
    });
}

fn counted(name: &str, c: Vec<berth_sdk::dra::DeviceCounterConsumption>) -> Device {
    with_allow_multiple_allocations(with_counter_consumption_as_capacity(device(name), c))
}

#[test]
fn allow_multiple_allocations_with_partitionable_device() {
    let mem =
        |q: &str| format!(r#"device.capacity["driver-a"].memory.compareTo(quantity("{q}")) >= 0"#);
    expect_results(
        Case {
            features: features(|f| {
                f.prioritized_list = true;
                f.partitionable_devices = true;
                f.consumable_capacity = true;
            }),
            claims: vec![claim_of(
                CLAIM0,
                vec![
                    request(REQ0, CLASS_A, 1),
                    prioritized(
                        REQ1,
                        vec![
                            sub_with_selectors(sub_request(SUB_REQ0, CLASS_A, 1), &[&mem("6Gi")]),
                            sub_with_selectors(sub_request(SUB_REQ1, CLASS_A, 1), &[&mem("4Gi")]),
                        ],
                    ),
                ],
            )],
            classes: multi_class(),
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![
                        counted(
                            DEVICE1,
                            vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                        ),
                        counted(
                            DEVICE2,
                            vec![consumption(COUNTER_SET1, &[("memory", "6Gi")])],
                        ),
                        counted(
                            DEVICE3,
                            vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                        ),
                    ],
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
            vec![
                share(REQ0, DEVICE1, &[("memory", "4Gi")]),
                share(REQ1_SUB_REQ1, DEVICE3, &[("memory", "4Gi")]),
            ],
        )],
    );
}

#[test]
fn allow_multiple_allocations_with_shared_device_counter_cross_cycle() {
    let mode = |name: &str, m: &str| {
        with_attributes(
            counted(name, vec![consumption(COUNTER_SET1, &[(CAPACITY0, "1")])]),
            &[("mode", DeviceAttribute::String(m.into()))],
        )
    };
    let mut state = consumed_state(&[(id(DRIVER_A, POOL1, DEVICE1), &[(CAPACITY0, "1")])]);
    state
        .shares
        .insert((id(DRIVER_A, POOL1, DEVICE1), FIXED_SHARE_ID.to_owned()));
    let mut r = with_capacity_request(request(REQ0, CLASS_A, 1), Some("1"));
    if let DeviceRequest::Exactly(s) = &mut r {
        s.selectors = vec![selector(r#"device.attributes["driver-a"].mode == "b""#)];
    }
    expect_none(Case {
        features: features(|f| {
            f.partitionable_devices = true;
            f.consumable_capacity = true;
        }),
        claims: vec![claim_of(CLAIM0, vec![r])],
        allocated_state: state,
        classes: multi_class(),
        slices: vec![
            slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![mode(DEVICE1, "a"), mode(DEVICE2, "b")],
            ),
            slice_with_counter_sets(
                SLICE2,
                Nodes::Name(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[(CAPACITY0, "1")])],
            ),
        ],
        ..Case::default()
    });
}

#[test]
fn consumable_capacity_with_partitionable_device_multiple_capacity_pools() {
    let d = |name: &str, c0: &str| {
        with_capacity_request_policy_range(
            counted(
                name,
                vec![
                    consumption(COUNTER_SET1, &[(CAPACITY0, c0)]),
                    consumption(COUNTER_SET2, &[(CAPACITY1, "4")]),
                ],
            ),
            &[(CAPACITY1, "4")],
        )
    };
    let cap = |q: &str| {
        format!(r#"device.capacity["driver-a"]["capacity-0"].compareTo(quantity("{q}")) >= 0"#)
    };
    expect_results(
        Case {
            features: features(|f| {
                f.prioritized_list = true;
                f.partitionable_devices = true;
                f.consumable_capacity = true;
            }),
            claims: vec![claim_of(
                CLAIM0,
                vec![
                    with_capacity_request(request(REQ0, CLASS_A, 1), Some("1")),
                    with_capacity_request(request(REQ2, CLASS_A, 1), Some("2")),
                    prioritized(
                        REQ1,
                        vec![
                            sub_with_capacity_request(
                                sub_with_selectors(sub_request(SUB_REQ0, CLASS_A, 1), &[&cap("4")]),
                                Some("1"),
                            ),
                            sub_with_capacity_request(
                                sub_with_selectors(sub_request(SUB_REQ1, CLASS_A, 1), &[&cap("2")]),
                                Some("1"),
                            ),
                        ],
                    ),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![d(DEVICE1, "2"), d(DEVICE2, "4"), d(DEVICE3, "2")],
                ),
                slice_with_counter_sets(
                    SLICE2,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![
                        counter_set(COUNTER_SET1, &[(CAPACITY0, "4")]),
                        counter_set(COUNTER_SET2, &[(CAPACITY1, "8")]),
                    ],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                share(REQ0, DEVICE1, &[(CAPACITY0, "1"), (CAPACITY1, "2")]),
                share(REQ2, DEVICE3, &[(CAPACITY0, "2"), (CAPACITY1, "2")]),
                share(
                    REQ1_SUB_REQ1,
                    DEVICE1,
                    &[(CAPACITY0, "1"), (CAPACITY1, "2")],
                ),
            ],
        )],
    );
}

#[test]
fn allow_multiple_allocations_share_without_consumed_capacity_counts_its_counters_once() {
    // A share allocated earlier that consumed no capacity (the device defines none)
    // is recorded as a share alone: the device is in use, its counters are taken
    // once, and a further share does not take them again (upstream's
    // `deviceCapacityInUse` looks at the shares too).
    let mut state = berth_dra::AllocatedState::default();
    state
        .shares
        .insert((id(DRIVER_A, POOL1, DEVICE1), FIXED_SHARE_ID.to_owned()));
    let mut device = multi(DEVICE1);
    device.consumes_counters = vec![consumption(COUNTER_SET1, &[(CAPACITY0, "1")])];
    expect_results(
        Case {
            features: features(|f| {
                f.partitionable_devices = true;
                f.consumable_capacity = true;
            }),
            claims: vec![asking(CLAIM0, None)],
            allocated_state: state,
            classes: multi_class(),
            slices: vec![
                slice_with_devices(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![device],
                ),
                slice_with_counter_sets(
                    SLICE2,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 2),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, &[(CAPACITY0, "1")])],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![share(REQ0, DEVICE1, &[])],
        )],
    );
}
