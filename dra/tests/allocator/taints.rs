//! Device taints and tolerations, and taints from DeviceTaintRules.

use super::common::*;
use berth_sdk::dra::{
    DeviceTaint, DeviceTaintEffect, DeviceTaintRule, DeviceTaintSelector, DeviceToleration,
};
use berth_sdk::types::TolerationOperator;

const TAINT_KEY: &str = "taint-key";

fn taint_none() -> DeviceTaint {
    taint(TAINT_KEY, "taint-value", DeviceTaintEffect::None)
}

fn taint_no_schedule() -> DeviceTaint {
    taint(TAINT_KEY, "taint-value", DeviceTaintEffect::NoSchedule)
}

fn taint_no_execute() -> DeviceTaint {
    taint(TAINT_KEY, "taint-value-2", DeviceTaintEffect::NoExecute)
}

fn toleration_no_schedule() -> DeviceToleration {
    toleration(
        TAINT_KEY,
        TolerationOperator::Exists,
        "",
        Some(DeviceTaintEffect::NoSchedule),
    )
}

fn toleration_no_execute() -> DeviceToleration {
    toleration(
        TAINT_KEY,
        TolerationOperator::Equal,
        "taint-value-2",
        Some(DeviceTaintEffect::NoExecute),
    )
}

fn taints_on() -> berth_dra::Features {
    features(|f| f.device_taints = true)
}

fn two_tainted_devices() -> Vec<berth_sdk::dra::ResourceSlice> {
    vec![slice_with_devices(
        SLICE1,
        Nodes::Name(NODE1),
        POOL1.into(),
        DRIVER_A,
        vec![
            with_taints(device(DEVICE1), &[taint_no_schedule()]),
            with_taints(device(DEVICE2), &[taint_no_execute()]),
        ],
    )]
}

fn one_device_tainted(taints: &[DeviceTaint]) -> Vec<berth_sdk::dra::ResourceSlice> {
    vec![slice_with_devices(
        SLICE1,
        Nodes::Name(NODE1),
        POOL1.into(),
        DRIVER_A,
        vec![with_taints(device(DEVICE1), taints)],
    )]
}

#[test]
fn tainted_two_devices() {
    expect_none(Case {
        features: taints_on(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: two_tainted_devices(),
        ..Case::default()
    });
}

#[test]
fn tainted_one_device_two_taints() {
    expect_none(Case {
        features: taints_on(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_device_tainted(&[taint_no_schedule(), taint_no_execute()]),
        ..Case::default()
    });
}

#[test]
fn tainted_two_devices_tolerated() {
    expect_results(
        Case {
            features: taints_on(),
            claims: vec![with_tolerations(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                &[toleration_no_execute()],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: two_tainted_devices(),
            ..Case::default()
        },
        // Only the second device's taint is tolerated.
        vec![allocation(
            local_node_selector(NODE1),
            vec![result_tolerating(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE2,
                &[toleration_no_execute()],
            )],
        )],
    );
}

#[test]
fn tainted_two_devices_prioritized_list_tolerated() {
    expect_results(
        Case {
            features: features(|f| {
                f.device_taints = true;
                f.prioritized_list = true;
            }),
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![prioritized(
                    REQ0,
                    vec![
                        sub_request(SUB_REQ0, CLASS_A, 1),
                        sub_with_tolerations(
                            sub_request(SUB_REQ1, CLASS_A, 1),
                            &[toleration_no_execute()],
                        ),
                    ],
                )],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: two_tainted_devices(),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result_tolerating(
                REQ0_SUB_REQ1,
                DRIVER_A,
                POOL1,
                DEVICE2,
                &[toleration_no_execute()],
            )],
        )],
    );
}

#[test]
fn tainted_no_effect() {
    expect_results(
        Case {
            features: taints_on(),
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_device_tainted(&[taint_none()]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn tainted_one_device_two_taints_both_tolerated() {
    let tolerations = [toleration_no_schedule(), toleration_no_execute()];
    expect_results(
        Case {
            features: taints_on(),
            claims: vec![with_tolerations(
                claim_with_request(CLAIM0, REQ0, CLASS_A),
                &tolerations,
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_device_tainted(&[taint_no_schedule(), taint_no_execute()]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result_tolerating(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE1,
                &tolerations,
            )],
        )],
    );
}

#[test]
fn tainted_disabled() {
    expect_results(
        Case {
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_device_tainted(&[taint_no_schedule(), taint_no_execute()]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

fn b_then_a() -> berth_sdk::dra::ResourceClaim {
    claim_with_requests(
        CLAIM0,
        vec![],
        vec![prioritized(
            REQ0,
            vec![
                sub_request(SUB_REQ0, CLASS_B, 1),
                sub_request(SUB_REQ1, CLASS_A, 1),
            ],
        )],
    )
}

#[test]
fn tainted_prioritized_list() {
    expect_none(Case {
        features: features(|f| {
            f.device_taints = true;
            f.prioritized_list = true;
        }),
        claims: vec![b_then_a()],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: one_device_tainted(&[taint_no_schedule()]),
        ..Case::default()
    });
}

#[test]
fn tainted_prioritized_list_disabled() {
    expect_results(
        Case {
            features: features(|f| f.prioritized_list = true),
            claims: vec![b_then_a()],
            classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
            slices: one_device_tainted(&[taint_no_schedule()]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

#[test]
fn tainted_admin_access() {
    expect_none(Case {
        features: features(|f| {
            f.device_taints = true;
            f.admin_access = true;
        }),
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![admin(request(REQ0, CLASS_A, 1))],
        )],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_device_tainted(&[taint_no_schedule()]),
        ..Case::default()
    });
}

#[test]
fn tainted_admin_access_disabled() {
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
            slices: one_device_tainted(&[taint_no_schedule()]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
        )],
    );
}

#[test]
fn tainted_all_devices_single() {
    expect_none(Case {
        features: taints_on(),
        claims: vec![claim_with_requests(
            CLAIM0,
            vec![],
            vec![all_request(REQ0, CLASS_A)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_device_tainted(&[taint_no_schedule()]),
        ..Case::default()
    });
}

#[test]
fn tainted_all_devices_single_disabled() {
    expect_results(
        Case {
            claims: vec![claim_with_requests(
                CLAIM0,
                vec![],
                vec![all_request(REQ0, CLASS_A)],
            )],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: one_device_tainted(&[taint_no_schedule()]),
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}

// Berth's own rows: DeviceTaintRules put their taint on the devices they select.

fn rule(selector: DeviceTaintSelector) -> DeviceTaintRule {
    DeviceTaintRule {
        name: "rule".into(),
        selector,
        taint: taint_no_schedule(),
    }
}

#[test]
fn taint_rule_taints_selected_device() {
    expect_results(
        Case {
            features: taints_on(),
            claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
            classes: vec![class(CLASS_A, DRIVER_A)],
            slices: vec![slice_with_devices(
                SLICE1,
                Nodes::Name(NODE1),
                POOL1.into(),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            )],
            taint_rules: vec![rule(DeviceTaintSelector {
                driver: Some(DRIVER_A.into()),
                pool: Some(POOL1.into()),
                device: Some(DEVICE1.into()),
            })],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE2, false)],
        )],
    );
}

#[test]
fn taint_rule_for_whole_driver_is_tolerated() {
    let case = |tolerations: &[DeviceToleration]| Case {
        features: taints_on(),
        claims: vec![with_tolerations(
            claim_with_request(CLAIM0, REQ0, CLASS_A),
            tolerations,
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Nodes::Name(NODE1),
            POOL1.into(),
            DRIVER_A,
        )],
        taint_rules: vec![rule(DeviceTaintSelector {
            driver: Some(DRIVER_A.into()),
            ..DeviceTaintSelector::default()
        })],
        ..Case::default()
    };
    expect_none(case(&[]));
    expect_results(
        case(&[toleration_no_schedule()]),
        vec![allocation(
            local_node_selector(NODE1),
            vec![result_tolerating(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE1,
                &[toleration_no_schedule()],
            )],
        )],
    );
}

#[test]
fn taint_rule_ignored_without_device_taints() {
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
            taint_rules: vec![rule(DeviceTaintSelector::default())],
            ..Case::default()
        },
        vec![allocation(
            local_node_selector(NODE1),
            vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )],
    );
}
