//! Partitionable devices: shared counters, counter sets, `consumesCounters`,
//! per-device node selection.

use super::common::*;
use berth_sdk::dra::{Device, DeviceCounterConsumption, ResourceSlice};

fn part() -> berth_dra::Features {
    features(|f| f.partitionable_devices = true)
}

fn mem(q: &str) -> String {
    format!(r#"device.capacity["driver-a"].memory.compareTo(quantity("{q}")) >= 0"#)
}

/// A device whose capacity mirrors what it consumes (upstream's `fromCounters`).
fn from_counters(name: &str, c: Vec<DeviceCounterConsumption>) -> Device {
    with_counter_consumption_as_capacity(device(name), c)
}

fn consuming(name: &str, c: Vec<DeviceCounterConsumption>) -> Device {
    with_counter_consumption(device(name), c)
}

fn pool_of(
    slice: &str,
    pool: &str,
    devices: Vec<Device>,
    counters_slice: &str,
    sets: Vec<berth_sdk::dra::CounterSet>,
) -> Vec<ResourceSlice> {
    vec![
        slice_with_devices(
            slice,
            Nodes::Name(NODE1),
            resource_pool(pool, 2),
            DRIVER_A,
            devices,
        ),
        slice_with_counter_sets(
            counters_slice,
            Nodes::Name(NODE1),
            resource_pool(pool, 2),
            DRIVER_A,
            sets,
        ),
    ]
}

fn four_six_four_memory() -> Vec<ResourceSlice> {
    pool_of(
        SLICE1,
        POOL1,
        vec![
            from_counters(
                DEVICE1,
                vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
            ),
            from_counters(
                DEVICE2,
                vec![consumption(COUNTER_SET1, &[("memory", "6Gi")])],
            ),
            from_counters(
                DEVICE3,
                vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
            ),
        ],
        SLICE2,
        vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
    )
}

#[test]
fn partitionable_devices_single_device() {
    expect_results(
        Case {
            features: part(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool_of(
                SLICE1,
                POOL1,
                vec![consuming(
                    DEVICE1,
                    vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                )],
                SLICE2,
                vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

fn six_then_four_claim() -> berth_sdk::dra::ResourceClaim {
    claim_with_requests(
        CLAIM0,
        vec![],
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
    )
}

#[test]
fn partitionable_devices_prioritized_list() {
    expect_results(
        Case {
            features: features(|f| {
                f.partitionable_devices = true;
                f.prioritized_list = true;
            }),
            claims: vec![six_then_four_claim()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: four_six_four_memory(),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )],
    );
}

#[test]
fn partitionable_devices_multiple_devices() {
    expect_results(
        Case {
            features: part(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: four_six_four_memory(),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )],
    );
}

#[test]
fn partitionable_devices_multiple_capacity_pools() {
    let d = |name: &str, memory: &str, cpus: &str| {
        from_counters(
            name,
            vec![
                consumption(COUNTER_SET1, &[("memory", memory)]),
                consumption(COUNTER_SET2, &[("cpus", cpus)]),
            ],
        )
    };
    expect_results(
        Case {
            features: features(|f| {
                f.partitionable_devices = true;
                f.prioritized_list = true;
            }),
            claims: vec![six_then_four_claim()],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool_of(
                SLICE1,
                POOL1,
                vec![
                    d(DEVICE1, "4Gi", "4"),
                    d(DEVICE2, "6Gi", "6"),
                    d(DEVICE3, "4Gi", "4"),
                ],
                SLICE2,
                vec![
                    counter_set(COUNTER_SET1, &[("memory", "18Gi")]),
                    counter_set(COUNTER_SET2, &[("cpus", "8")]),
                ],
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )],
    );
}

#[test]
fn partitionable_devices_multiple_counters() {
    let d = |name: &str, a: [(&str, &str); 2], b: [(&str, &str); 2]| {
        from_counters(
            name,
            vec![consumption(COUNTER_SET1, &a), consumption(COUNTER_SET2, &b)],
        )
    };
    expect_results(
        Case {
            features: part(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool_of(
                SLICE1,
                POOL1,
                vec![
                    d(
                        DEVICE1,
                        [("memory", "4Gi"), ("cpus", "6")],
                        [("cpus", "4"), ("memory", "2Gi")],
                    ),
                    d(
                        DEVICE2,
                        [("memory", "6Gi"), ("cpus", "4")],
                        [("cpus", "6"), ("memory", "6Gi")],
                    ),
                    d(
                        DEVICE3,
                        [("memory", "4Gi"), ("cpus", "4")],
                        [("cpus", "4"), ("memory", "4Gi")],
                    ),
                ],
                SLICE2,
                vec![
                    counter_set(COUNTER_SET1, &[("cpus", "8"), ("memory", "18Gi")]),
                    counter_set(COUNTER_SET2, &[("cpus", "12"), ("memory", "18Gi")]),
                ],
            ),
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

#[test]
fn partitionable_devices_multiple_pools() {
    let d = |name: &str, cpus: &str, memory: &str| {
        from_counters(
            name,
            vec![consumption(
                COUNTER_SET1,
                &[("cpus", cpus), ("memory", memory)],
            )],
        )
    };
    let sets = || {
        vec![counter_set(
            COUNTER_SET1,
            &[("cpus", "8"), ("memory", "18Gi")],
        )]
    };
    let mut slices = pool_of(
        SLICE1,
        POOL1,
        vec![
            d(DEVICE1, "6", "4Gi"),
            d(DEVICE2, "4", "6Gi"),
            d(DEVICE3, "4", "4Gi"),
        ],
        SLICE2,
        sets(),
    );
    slices.extend(pool_of(
        SLICE3,
        POOL2,
        vec![
            d(DEVICE1, "6", "4Gi"),
            d(DEVICE2, "1", "7Gi"),
            d(DEVICE3, "1", "7Gi"),
        ],
        SLICE4,
        sets(),
    ));
    expect_results(
        Case {
            features: part(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices,
            allocated: vec![
                id(DRIVER_A, POOL1, DEVICE2),
                id(DRIVER_A, POOL1, DEVICE3),
                id(DRIVER_A, POOL2, DEVICE1),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL2, DEVICE2, false),
                result(REQ1, DRIVER_A, POOL2, DEVICE3, false),
            ],
        )],
    );
}

#[test]
fn partitionable_devices_unused_counters_in_counter_set() {
    expect_results(
        Case {
            features: part(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 2)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool_of(
                SLICE1,
                POOL1,
                vec![
                    consuming(
                        DEVICE1,
                        vec![consumption(COUNTER_SET1, &[("memory", "5Gi")])],
                    ),
                    consuming(
                        DEVICE2,
                        vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                    ),
                    consuming(
                        DEVICE3,
                        vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                    ),
                ],
                SLICE2,
                vec![counter_set(
                    COUNTER_SET1,
                    &[("memory", "8Gi"), ("unused", "1Gi")],
                )],
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                result(REQ0, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )],
    );
}

fn one_slice_each(second: &str) -> Vec<ResourceSlice> {
    vec![
        slice_with_devices(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
            vec![
                from_counters(
                    DEVICE1,
                    vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                ),
                from_counters(
                    DEVICE2,
                    vec![consumption(COUNTER_SET1, &[("memory", second)])],
                ),
            ],
        ),
        slice_with_counter_sets(
            SLICE2,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
            vec![counter_set(COUNTER_SET1, &[("memory", "18Gi")])],
        ),
    ]
}

#[test]
fn partitionable_devices_no_capacity_available() {
    expect_none(Case {
        features: part(),
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice_each("16Gi"),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE2)],
        ..Case::default()
    });
}

#[test]
fn partitionable_devices_overallocated_capacity_pool() {
    expect_none(Case {
        features: part(),
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice_each("20Gi"),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE2)],
        ..Case::default()
    });
}

#[test]
fn partitionable_devices_disabled_device_consumes_counters() {
    expect_none(Case {
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![consuming(
                    DEVICE1,
                    vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                )],
            ),
            slice_with_counter_sets(
                SLICE2,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[("memory", "18Gi")])],
            ),
        ],
        ..Case::default()
    });
}

#[test]
fn partitionable_devices_disabled_other_device_do_not_consume_counters() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool_of(
                SLICE1,
                POOL1,
                vec![
                    consuming(
                        DEVICE1,
                        vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                    ),
                    device(DEVICE2),
                ],
                SLICE2,
                vec![counter_set(COUNTER_SET1, &[("memory", "18Gi")])],
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE2, false)],
        )],
    );
}

#[test]
fn partitionable_devices_disabled_per_device_node_selection() {
    expect_none(Case {
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_devices(
            SLICE1,
            Nodes::PerDevice,
            POOL1.into(),
            DRIVER_A,
            vec![with_node_selection(device(DEVICE2), Nodes::Name(NODE1))],
        )],
        ..Case::default()
    });
}

fn per_device(devices: Vec<Device>, total: &str) -> Vec<ResourceSlice> {
    vec![
        slice_with_devices(
            SLICE1,
            Nodes::PerDevice,
            resource_pool(POOL1, 2),
            DRIVER_A,
            devices,
        ),
        slice_with_counter_sets(
            SLICE2,
            Nodes::PerDevice,
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![counter_set(COUNTER_SET1, &[("memory", total)])],
        ),
    ]
}

fn both() -> berth_dra::Features {
    features(|f| {
        f.partitionable_devices = true;
        f.prioritized_list = true;
    })
}

#[test]
fn partitionable_devices_per_device_node_selection_nodename() {
    expect_results(
        Case {
            features: both(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![prioritized(
                    REQ0,
                    vec![
                        sub_with_selectors(sub_request(SUB_REQ0, CLASS_A, 1), &[&mem("6Gi")]),
                        sub_with_selectors(sub_request(SUB_REQ1, CLASS_A, 1), &[&mem("4Gi")]),
                    ],
                )],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: per_device(
                vec![
                    with_node_selection(
                        from_counters(
                            DEVICE1,
                            vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                        ),
                        Nodes::Name(NODE1),
                    ),
                    with_node_selection(
                        from_counters(
                            DEVICE2,
                            vec![consumption(COUNTER_SET1, &[("memory", "6Gi")])],
                        ),
                        Nodes::Name(NODE2),
                    ),
                ],
                "18Gi",
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn partitionable_devices_per_device_node_selection_node_selector() {
    expect_results(
        Case {
            features: both(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: per_device(
                vec![with_node_selection(
                    from_counters(
                        DEVICE1,
                        vec![consumption(COUNTER_SET1, &[("memory", "4Gi")])],
                    ),
                    Nodes::Selector(node_label_selector(REGION_KEY, &[REGION1])),
                )],
                "18Gi",
            ),
            ..Case::default()
        },
        vec![allocation(
            Some(node_label_selector(REGION_KEY, &[REGION1])),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn partitionable_devices_per_device_node_selection_node_selector_multiple_devices() {
    let d =
        |name: &str, set: &str| from_counters(name, vec![consumption(set, &[("memory", "4Gi")])]);
    let mut slices = per_device(
        vec![
            with_node_selection(
                d(DEVICE1, COUNTER_SET1),
                Nodes::Selector(node_label_selector(REGION_KEY, &[REGION1])),
            ),
            with_node_selection(d(DEVICE2, COUNTER_SET1), Nodes::Name(NODE1)),
            with_node_selection(d(DEVICE3, COUNTER_SET1), Nodes::All),
        ],
        "18Gi",
    );
    slices.push(slice_with_devices(
        SLICE3,
        Nodes::Name(NODE1),
        resource_pool(POOL2, 2),
        DRIVER_B,
        vec![
            d(DEVICE1, COUNTER_SET2),
            d(DEVICE2, COUNTER_SET2),
            d(DEVICE3, COUNTER_SET2),
        ],
    ));
    slices.push(slice_with_counter_sets(
        SLICE4,
        Nodes::Name(NODE1),
        resource_pool(POOL2, 2),
        DRIVER_B,
        vec![counter_set(COUNTER_SET2, &[("memory", "12Gi")])],
    ));
    expect_results(
        Case {
            features: both(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 3), request(REQ1, CLASS_B, 3)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices,
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                result(REQ0, DRIVER_A, POOL1, DEVICE3, false),
                result(REQ1, DRIVER_B, POOL2, DEVICE1, false),
                result(REQ1, DRIVER_B, POOL2, DEVICE2, false),
                result(REQ1, DRIVER_B, POOL2, DEVICE3, false),
            ],
        )],
    );
}

#[test]
fn partitionable_devices_with_attribute_selector() {
    use berth_sdk::dra::DeviceAttribute;
    let d = |name: &str, special: bool, cpu: &str| {
        consuming(
            name,
            vec![
                consumption(COUNTER_SET1, &[(cpu, "1")]),
                consumption(COUNTER_SET2, &[("mem", "10Gi")]),
            ],
        )
        .with_special(special)
    };
    trait Special {
        fn with_special(self, special: bool) -> Self;
    }
    impl Special for Device {
        fn with_special(self, special: bool) -> Self {
            with_attributes(self, &[("special", DeviceAttribute::Bool(special))])
        }
    }
    expect_results(
        Case {
            features: part(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![
                    request(REQ0, CLASS_A, 2),
                    request_with(
                        REQ1,
                        CLASS_A,
                        1,
                        &[r#"device.attributes["driver-a"].special"#],
                    ),
                ],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: pool_of(
                SLICE1,
                POOL1,
                vec![
                    d(DEVICE1, true, "cpu1"),
                    d(DEVICE2, false, "cpu2"),
                    d(DEVICE3, false, "cpu3"),
                ],
                SLICE2,
                vec![
                    counter_set(COUNTER_SET1, &[("cpu1", "1"), ("cpu2", "1"), ("cpu3", "1")]),
                    counter_set(COUNTER_SET2, &[("mem", "30Gi")]),
                ],
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                result(REQ0, DRIVER_A, POOL1, DEVICE3, false),
                result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )],
    );
}
