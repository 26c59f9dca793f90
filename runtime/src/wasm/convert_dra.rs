//! Tests of the resource.k8s.io records' conversions on the host's bindings
//! ([`super::convert::dra`], the SDK's `dra_wit_conversions!`): every field reaches
//! the WIT, and a claim, a slice, a class and a taint rule come back as they went.

use super::bindings::berth::scheduler::types as w;
use super::convert;
use super::convert::dra::{
    claim_from_wit, claim_to_wit, class_from_wit, class_to_wit, slice_from_wit, slice_to_wit,
    taint_rule_from_wit, taint_rule_to_wit,
};
use berth_sdk::affinity::{NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm};
use berth_sdk::dra as d;
use berth_sdk::quantity::Quantity;
use std::collections::BTreeMap;

mod tests {
    use super::*;

    fn term(key: &str, operator: NodeSelectorOperator, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement {
                key: key.into(),
                operator,
                values: values.iter().map(|v| (*v).to_owned()).collect(),
            }],
            match_fields: vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: NodeSelectorOperator::In,
                values: vec!["n1".into()],
            }],
        }
    }

    fn sub_request(name: &str, mode: d::AllocationMode) -> d::DeviceSubRequest {
        d::DeviceSubRequest {
            name: name.into(),
            device_class_name: "gpu.example.com".into(),
            selectors: vec![d::DeviceSelector {
                expression: "device.attributes[\"gpu.example.com\"].model == \"a100\"".into(),
            }],
            allocation_mode: mode,
            admin_access: true,
            tolerations: vec![
                d::DeviceToleration {
                    key: "maintenance".into(),
                    operator: berth_sdk::TolerationOperator::Equal,
                    value: "soon".into(),
                    effect: Some(d::DeviceTaintEffect::NoExecute),
                    toleration_seconds: Some(300),
                },
                d::DeviceToleration {
                    key: String::new(),
                    operator: berth_sdk::TolerationOperator::Exists,
                    value: String::new(),
                    effect: None,
                    toleration_seconds: None,
                },
            ],
            capacity: BTreeMap::from([
                ("memory".to_owned(), Quantity("40Gi".into())),
                ("cores".to_owned(), Quantity("1500m".into())),
            ]),
        }
    }

    /// A claim with every field set, each kind of every enum and variant somewhere.
    fn full_claim() -> d::ResourceClaim {
        let opaque = d::OpaqueDeviceConfiguration {
            driver: "gpu.example.com".into(),
            parameters: r#"{"sharing":"timeSlicing"}"#.into(),
        };
        d::ResourceClaim {
            namespace: "ml".into(),
            name: "trainer-gpu-x7k2q".into(),
            uid: "c-uid".into(),
            resource_version: "42".into(),
            annotations: BTreeMap::from([("team".to_owned(), "vision".to_owned())]),
            controller: Some(d::ControllerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: "trainer".into(),
                uid: "p-uid".into(),
            }),
            terminating: true,
            spec: d::DeviceClaim {
                requests: vec![
                    d::DeviceRequest::Exactly(sub_request("gpu", d::AllocationMode::ExactCount(2))),
                    d::DeviceRequest::FirstAvailable {
                        name: "nic".into(),
                        subrequests: vec![
                            sub_request("fast", d::AllocationMode::All),
                            sub_request("slow", d::AllocationMode::ExactCount(1)),
                        ],
                    },
                ],
                constraints: vec![d::DeviceConstraint {
                    requests: vec!["gpu".into(), "nic".into()],
                    match_attribute: Some("gpu.example.com/numa".into()),
                    distinct_attribute: Some("gpu.example.com/index".into()),
                }],
                config: vec![d::DeviceConfiguration {
                    requests: vec!["gpu".into()],
                    opaque: Some(opaque.clone()),
                }],
            },
            status: d::ResourceClaimStatus {
                allocation: Some(d::AllocationResult {
                    devices: vec![d::DeviceRequestAllocationResult {
                        request: "nic/fast".into(),
                        driver: "nic.example.com".into(),
                        pool: "n1".into(),
                        device: "eth0".into(),
                        admin_access: Some(false),
                        tolerations: sub_request("t", d::AllocationMode::All).tolerations,
                        binding_conditions: vec!["Attached".into()],
                        binding_failure_conditions: vec!["AttachFailed".into()],
                        share_id: Some("share-1".into()),
                        consumed_capacity: BTreeMap::from([(
                            "bandwidth".to_owned(),
                            Quantity("10G".into()),
                        )]),
                    }],
                    config: vec![
                        d::DeviceAllocationConfiguration {
                            source: d::AllocationConfigSource::FromClass,
                            requests: Vec::new(),
                            opaque: Some(opaque.clone()),
                        },
                        d::DeviceAllocationConfiguration {
                            source: d::AllocationConfigSource::FromClaim,
                            requests: vec!["gpu".into()],
                            opaque: None,
                        },
                    ],
                    node_selector: Some(vec![
                        term("zone", NodeSelectorOperator::In, &["a", "b"]),
                        term("gpu", NodeSelectorOperator::Exists, &[]),
                        term("old", NodeSelectorOperator::DoesNotExist, &[]),
                        term("zone", NodeSelectorOperator::NotIn, &["c"]),
                        term("cores", NodeSelectorOperator::Gt, &["8"]),
                        term("cores", NodeSelectorOperator::Lt, &["64"]),
                    ]),
                    allocation_timestamp_ms: Some(1_700_000_000_123),
                }),
                reserved_for: vec![d::ConsumerReference::pod("trainer", "p-uid")],
                devices: vec![d::AllocatedDeviceStatus {
                    driver: "nic.example.com".into(),
                    pool: "n1".into(),
                    device: "eth0".into(),
                    share_id: Some("share-1".into()),
                    conditions: vec![
                        d::DeviceCondition {
                            type_: "Attached".into(),
                            status: true,
                        },
                        d::DeviceCondition {
                            type_: "AttachFailed".into(),
                            status: false,
                        },
                    ],
                }],
            },
        }
    }

    #[test]
    fn a_claim_with_every_field_set_comes_back_as_it_went() {
        let claim = full_claim();
        let back = claim_from_wit(claim_to_wit(&claim));
        assert_eq!(back, claim);
        // Quantities keep their text, not only their value.
        let d::DeviceRequest::Exactly(gpu) = &back.spec.requests[0] else {
            panic!(
                "the first request is `exactly`: {:?}",
                back.spec.requests[0]
            );
        };
        assert_eq!(gpu.capacity["cores"].0, "1500m");
        // An unallocated claim with nothing optional set comes back too.
        let bare = d::ResourceClaim {
            namespace: "ml".into(),
            name: "bare".into(),
            ..d::ResourceClaim::default()
        };
        assert_eq!(claim_from_wit(claim_to_wit(&bare)), bare);
    }

    #[test]
    fn maps_travel_as_lists_in_their_order() {
        let w = claim_to_wit(&full_claim());
        let w::DeviceRequest::Exactly(gpu) = &w.spec.requests[0] else {
            panic!("the first request is `exactly`");
        };
        let names: Vec<&str> = gpu.capacity.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["cores", "memory"]);
        assert_eq!(w.annotations, [("team".to_owned(), "vision".to_owned())]);
        let w::DeviceRequest::FirstAvailable((name, subs)) = &w.spec.requests[1] else {
            panic!("the second request is `firstAvailable`");
        };
        assert_eq!(name, "nic");
        assert!(matches!(subs[0].allocation_mode, w::AllocationMode::All));
    }

    #[test]
    fn a_slice_its_devices_and_a_taint_rule_reach_the_wit_whole() {
        let device = d::Device {
            name: "gpu-0".into(),
            attributes: BTreeMap::from([
                (
                    "model".to_owned(),
                    d::DeviceAttribute::String("a100".into()),
                ),
                ("index".to_owned(), d::DeviceAttribute::Int(0)),
                ("healthy".to_owned(), d::DeviceAttribute::Bool(true)),
                (
                    "driverVersion".to_owned(),
                    d::DeviceAttribute::Version("1.2.3".into()),
                ),
            ]),
            capacity: BTreeMap::from([(
                "memory".to_owned(),
                d::DeviceCapacity {
                    value: Quantity("80Gi".into()),
                    request_policy: Some(d::CapacityRequestPolicy {
                        default: Some(Quantity("1Gi".into())),
                        valid_values: vec![Quantity("1Gi".into()), Quantity("2Gi".into())],
                        valid_range: Some(d::CapacityRange {
                            min: Quantity("1Gi".into()),
                            max: Some(Quantity("80Gi".into())),
                            step: Some(Quantity("1Gi".into())),
                        }),
                    }),
                },
            )]),
            consumes_counters: vec![d::DeviceCounterConsumption {
                counter_set: "gpu-0-set".into(),
                counters: BTreeMap::from([("memory".to_owned(), Quantity("80Gi".into()))]),
            }],
            node_name: None,
            node_selector: Some(vec![term("zone", NodeSelectorOperator::In, &["a"])]),
            all_nodes: false,
            taints: vec![d::DeviceTaint {
                key: "maintenance".into(),
                value: "soon".into(),
                effect: d::DeviceTaintEffect::None,
                time_added_ms: Some(5),
            }],
            binds_to_node: true,
            binding_conditions: vec!["Ready".into()],
            binding_failure_conditions: vec!["Failed".into()],
            allow_multiple_allocations: true,
        };
        let slice = d::ResourceSlice {
            name: "n1-gpu".into(),
            driver: "gpu.example.com".into(),
            pool: d::ResourcePool {
                name: "n1".into(),
                generation: 3,
                resource_slice_count: 2,
            },
            nodes: d::SliceNodes::PerDevice,
            devices: vec![device],
            shared_counters: vec![d::CounterSet {
                name: "gpu-0-set".into(),
                counters: BTreeMap::from([("memory".to_owned(), Quantity("80Gi".into()))]),
            }],
        };
        assert_eq!(slice_from_wit(slice_to_wit(&slice)), slice);
        let w = slice_to_wit(&slice);
        assert_eq!(
            (
                w.pool.name.as_str(),
                w.pool.generation,
                w.pool.resource_slice_count
            ),
            ("n1", 3, 2)
        );
        assert!(matches!(w.nodes, w::SliceNodes::PerDevice));
        let dev = &w.devices[0];
        let attributes: Vec<&str> = dev.attributes.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(attributes, ["driverVersion", "healthy", "index", "model"]);
        assert!(matches!(&dev.attributes[0].1, w::DeviceAttribute::Version(v) if v == "1.2.3"));
        let policy = dev.capacity[0].request_policy.as_ref().unwrap();
        assert_eq!(
            (
                dev.capacity[0].name.as_str(),
                dev.capacity[0].value.as_str(),
                policy.default.as_deref(),
                policy.valid_values.clone(),
                policy.valid_range.as_ref().unwrap().step.as_deref()
            ),
            (
                "memory",
                "80Gi",
                Some("1Gi"),
                vec!["1Gi".to_owned(), "2Gi".to_owned()],
                Some("1Gi")
            )
        );
        assert_eq!(dev.consumes_counters[0].counters[0].value, "80Gi");
        assert_eq!(
            dev.node_selector.as_ref().unwrap()[0].match_expressions[0].key,
            "zone"
        );
        assert!(matches!(dev.taints[0].effect, w::DeviceTaintEffect::None));
        assert!(dev.binds_to_node && dev.allow_multiple_allocations && !dev.all_nodes);
        assert_eq!(w.shared_counters[0].counters[0].name, "memory");
        for (nodes, wanted) in [
            (d::SliceNodes::NodeName("n1".into()), "node-name"),
            (d::SliceNodes::AllNodes, "all-nodes"),
            (
                d::SliceNodes::NodeSelector(vec![term("zone", NodeSelectorOperator::In, &["a"])]),
                "node-selector",
            ),
        ] {
            let slice = d::ResourceSlice {
                nodes,
                ..d::ResourceSlice::default()
            };
            assert_eq!(slice_from_wit(slice_to_wit(&slice)), slice);
            let got = match slice_to_wit(&slice).nodes {
                w::SliceNodes::NodeName(n) if n == "n1" => "node-name",
                w::SliceNodes::AllNodes => "all-nodes",
                w::SliceNodes::NodeSelector(t) if t.len() == 1 => "node-selector",
                _ => "wrong",
            };
            assert_eq!(got, wanted);
        }

        let rule = d::DeviceTaintRule {
            name: "drain-n1".into(),
            selector: d::DeviceTaintSelector {
                driver: Some("gpu.example.com".into()),
                pool: Some("n1".into()),
                device: None,
            },
            taint: d::DeviceTaint {
                key: "drain".into(),
                value: String::new(),
                effect: d::DeviceTaintEffect::NoSchedule,
                time_added_ms: None,
            },
        };
        assert_eq!(taint_rule_from_wit(taint_rule_to_wit(&rule)), rule);
        let w = taint_rule_to_wit(&rule);
        assert_eq!(w.selector.pool.as_deref(), Some("n1"));
        assert!(w.selector.device.is_none());
        assert!(matches!(w.taint.effect, w::DeviceTaintEffect::NoSchedule));
    }

    #[test]
    fn a_class_and_a_storage_capacity_reach_the_wit_whole() {
        let class = d::DeviceClass {
            name: "gpu.example.com".into(),
            uid: "u".into(),
            selectors: vec![d::DeviceSelector {
                expression: "device.driver == \"gpu.example.com\"".into(),
            }],
            config: vec![d::DeviceConfiguration {
                requests: Vec::new(),
                opaque: Some(d::OpaqueDeviceConfiguration {
                    driver: "gpu.example.com".into(),
                    parameters: "{}".into(),
                }),
            }],
            extended_resource_name: Some("example.com/gpu".into()),
        };
        assert_eq!(class_from_wit(class_to_wit(&class)), class);
        let w = class_to_wit(&class);
        assert_eq!(w.selectors[0].expression, class.selectors[0].expression);
        assert_eq!(w.config[0].opaque.as_ref().unwrap().parameters, "{}");
        assert_eq!(w.extended_resource_name.as_deref(), Some("example.com/gpu"));

        let capacity = berth_sdk::CsiStorageCapacity {
            namespace: "kube-system".into(),
            name: "csisc-1".into(),
            storage_class_name: "fast".into(),
            node_topology: Some(berth_sdk::affinity::LabelSelector {
                match_labels: BTreeMap::from([(
                    "topology.kubernetes.io/zone".to_owned(),
                    "a".to_owned(),
                )]),
                match_expressions: Vec::new(),
            }),
            capacity: Some(100 << 30),
            maximum_volume_size: None,
        };
        let w = convert::storage_capacity_to_wit(&capacity);
        assert_eq!(
            (
                w.namespace.as_str(),
                w.name.as_str(),
                w.storage_class_name.as_str()
            ),
            ("kube-system", "csisc-1", "fast")
        );
        assert_eq!(w.capacity, Some(100 << 30));
        assert_eq!(w.maximum_volume_size, None);
        assert_eq!(
            w.node_topology.unwrap().match_labels,
            [("topology.kubernetes.io/zone".to_owned(), "a".to_owned())]
        );
    }
}
