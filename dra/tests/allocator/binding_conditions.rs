//! Binding conditions and `bindsToNode`, copied into the results.

use super::common::*;
use berth_sdk::dra::{Device, DeviceTaintEffect, ResourceSlice};
use berth_sdk::types::TolerationOperator;

fn bc() -> berth_dra::Features {
    features(|f| f.device_binding_conditions = true)
}

fn part_bc() -> berth_dra::Features {
    features(|f| {
        f.device_binding_conditions = true;
        f.partitionable_devices = true;
    })
}

fn conditioned(name: &str, c: &str, f: &str) -> Device {
    with_binding_conditions(device(name), &[c], &[f])
}

fn from_counters(name: &str, set: &str, memory: &str) -> Device {
    with_counter_consumption_as_capacity(
        device(name),
        vec![consumption(set, &[("memory", memory)])],
    )
}

#[test]
fn device_binding_conditions() {
    expect_results(
        Case {
            features: bc(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![conditioned(DEVICE1, "IsPrepare", "BindingFailed")],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result_with_binding_conditions(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE1,
                &["IsPrepare"],
                &["BindingFailed"],
            )],
        )],
    );
}

#[test]
fn binding_conditions_multiple_devices() {
    expect_results(
        Case {
            features: bc(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 2), request(REQ1, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![
                    conditioned(DEVICE1, "IsPrepare", "BindingFailed"),
                    conditioned(DEVICE2, "IsPrepare2", "BindingFailed2"),
                    conditioned(DEVICE3, "IsPrepare3", "BindingFailed3"),
                ],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result_with_binding_conditions(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
                result_with_binding_conditions(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE2,
                    &["IsPrepare2"],
                    &["BindingFailed2"],
                ),
                result_with_binding_conditions(
                    REQ1,
                    DRIVER_A,
                    POOL1,
                    DEVICE3,
                    &["IsPrepare3"],
                    &["BindingFailed3"],
                ),
            ],
        )],
    );
}

#[test]
fn binding_conditions_with_and_without() {
    expect_results(
        Case {
            features: bc(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![
                    device(DEVICE1),
                    conditioned(DEVICE2, "IsPrepare", "BindingFailed"),
                ],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                result_with_binding_conditions(
                    REQ1,
                    DRIVER_A,
                    POOL1,
                    DEVICE2,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
            ],
        )],
    );
}

#[test]
fn binding_conditions_without_feature_gate() {
    expect_none(Case {
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_devices(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
            vec![conditioned(DEVICE1, "IsPrepare", "BindingFailed")],
        )],
        ..Case::default()
    });
}

#[test]
fn node_restriction() {
    expect_results(
        Case {
            features: bc(),
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Selector(node_label_selector(PLANET_KEY, &[PLANET_EARTH])),
                POOL1.into(),
                DRIVER_A,
                vec![with_binds_to_node(device(DEVICE1))],
            )],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

fn counters_pool(devices: Vec<Device>, total: &str) -> Vec<ResourceSlice> {
    vec![
        slice_with_devices(
            SLICE1,
            Nodes::Name(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            devices,
        ),
        slice_with_counter_sets(
            SLICE2,
            Nodes::Name(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![counter_set(COUNTER_SET1, &[("memory", total)])],
        ),
    ]
}

#[test]
fn partitionable_devices_with_binding_conditions() {
    expect_results(
        Case {
            features: part_bc(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 1)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: counters_pool(
                vec![with_binding_conditions(
                    from_counters(DEVICE1, COUNTER_SET1, "4Gi"),
                    &["IsPrepare"],
                    &["BindingFailed"],
                )],
                "8Gi",
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result_with_binding_conditions(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE1,
                &["IsPrepare"],
                &["BindingFailed"],
            )],
        )],
    );
}

#[test]
fn partitionable_devices_with_binding_conditions_multiple() {
    expect_results(
        Case {
            features: part_bc(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 2)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: counters_pool(
                vec![
                    with_binding_conditions(
                        from_counters(DEVICE1, COUNTER_SET1, "4Gi"),
                        &["IsPrepare"],
                        &["BindingFailed"],
                    ),
                    with_binding_conditions(
                        from_counters(DEVICE2, COUNTER_SET1, "4Gi"),
                        &["IsPrepare2"],
                        &["BindingFailed2"],
                    ),
                ],
                "8Gi",
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result_with_binding_conditions(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
                result_with_binding_conditions(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE2,
                    &["IsPrepare2"],
                    &["BindingFailed2"],
                ),
            ],
        )],
    );
}

#[test]
fn partitionable_devices_with_binding_conditions_some_devices_no_conditions() {
    expect_results(
        Case {
            features: part_bc(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 3)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: counters_pool(
                vec![
                    with_binding_conditions(
                        from_counters(DEVICE1, COUNTER_SET1, "2Gi"),
                        &["IsPrepare"],
                        &["BindingFailed"],
                    ),
                    from_counters(DEVICE2, COUNTER_SET1, "2Gi"),
                    with_binding_conditions(
                        from_counters(DEVICE3, COUNTER_SET1, "4Gi"),
                        &["IsReady"],
                        &["BindingTimeout"],
                    ),
                ],
                "8Gi",
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result_with_binding_conditions(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                result_with_binding_conditions(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE3,
                    &["IsReady"],
                    &["BindingTimeout"],
                ),
            ],
        )],
    );
}

#[test]
fn partitionable_devices_with_binding_conditions_multi_slices() {
    expect_results(
        Case {
            features: part_bc(),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![request(REQ0, CLASS_A, 2)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![
                slice_with_devices(
                    SLICE4,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 4),
                    DRIVER_A,
                    vec![with_binding_conditions(
                        from_counters(DEVICE1, COUNTER_SET1, "4Gi"),
                        &["IsPrepare"],
                        &["BindingFailed"],
                    )],
                ),
                slice_with_counter_sets(
                    SLICE3,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 4),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
                ),
                slice_with_devices(
                    SLICE2,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 4),
                    DRIVER_A,
                    vec![from_counters(DEVICE2, COUNTER_SET2, "4Gi")],
                ),
                slice_with_counter_sets(
                    SLICE1,
                    Nodes::Name(NODE1),
                    resource_pool(POOL1, 4),
                    DRIVER_A,
                    vec![counter_set(COUNTER_SET2, &[("memory", "8Gi")])],
                ),
            ],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                result_with_binding_conditions(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
            ],
        )],
    );
}

fn tainted_with_conditions() -> Device {
    with_taints(
        with_binding_conditions(
            from_counters(DEVICE1, COUNTER_SET1, "4Gi"),
            &["IsPrepare"],
            &["BindingFailed"],
        ),
        &[taint("key1", "value1", DeviceTaintEffect::NoSchedule)],
    )
}

fn all_three() -> berth_dra::Features {
    features(|f| {
        f.device_binding_conditions = true;
        f.partitionable_devices = true;
        f.device_taints = true;
    })
}

#[test]
fn partitionable_devices_with_binding_conditions_and_taints() {
    expect_none(Case {
        features: all_three(),
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 2)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![
                    tainted_with_conditions(),
                    from_counters(DEVICE2, COUNTER_SET1, "4Gi"),
                ],
            ),
            slice_with_counter_sets(
                SLICE2,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
            ),
        ],
        ..Case::default()
    });
}

#[test]
fn partitionable_devices_with_binding_conditions_and_taints_tolerated() {
    let tolerate = toleration(
        "key1",
        TolerationOperator::Exists,
        "",
        Some(DeviceTaintEffect::NoSchedule),
    );
    let with = |mut r: berth_sdk::dra::DeviceRequestAllocationResult| {
        r.tolerations = vec![tolerate.clone()];
        r
    };
    expect_results(
        Case {
            features: all_three(),
            claims: vec![with_tolerations(
                claim_with_requests(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)]),
                std::slice::from_ref(&tolerate),
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: counters_pool(
                vec![
                    tainted_with_conditions(),
                    from_counters(DEVICE2, COUNTER_SET1, "4Gi"),
                ],
                "8Gi",
            ),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![
                with(result_with_binding_conditions(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &["IsPrepare"],
                    &["BindingFailed"],
                )),
                with(result(REQ0, DRIVER_A, POOL1, DEVICE2, false)),
            ],
        )],
    );
}
