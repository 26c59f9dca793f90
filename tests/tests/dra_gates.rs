//! DynamicResources follows the DRA feature gates kube-scheduler 1.37.2 lets one turn
//! off, through `--feature-gates` (`berth::features::apply`) and the `feature-gate`
//! host call, as a component and as a native twin alike. One cluster file, each gate
//! on (the default) and off:
//!
//! - `DRAPartitionableDevices=false`: upstream's allocator leaves out slices with
//!   shared counters (or per-device node selection) and never allocates a device
//!   that consumes counters; the pool's other devices stay allocatable.
//! - `DRAConsumableCapacity=false`: a device that allows multiple allocations is
//!   allocated whole, to one claim, and a claim that asks for capacity fails the
//!   pod's Filter with an error.

use berth::features;
use berth::simulate::{Report, SimulateOptions, simulate};
use berth_tests::{runtime, write};

/// `parts` has a GPU split in two halves that share its counters, and a plain GPU
/// beside them in the same pool; `nics` has one NIC that claims may share by
/// bandwidth (1G each unless they ask for more).
const CLUSTER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: parts, labels: {kubernetes.io/hostname: parts}}
status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: nics, labels: {kubernetes.io/hostname: nics}}
status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110"}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "nic.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: parts-counters}
spec:
  driver: gpu.example.com
  nodeName: parts
  pool: {name: parts, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0-counters
    counters: {memory: {value: 80Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: parts-devices}
spec:
  driver: gpu.example.com
  nodeName: parts
  pool: {name: parts, generation: 1, resourceSliceCount: 2}
  devices:
  - name: gpu-0-half-a
    consumesCounters:
    - counterSet: gpu-0-counters
      counters: {memory: {value: 40Gi}}
  - name: gpu-0-half-b
    consumesCounters:
    - counterSet: gpu-0-counters
      counters: {memory: {value: 40Gi}}
  - name: gpu-1
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: nics-devices}
spec:
  driver: nic.example.com
  nodeName: nics
  pool: {name: nics, generation: 1, resourceSliceCount: 1}
  devices:
  - name: nic-0
    allowMultipleAllocations: true
    capacity:
      bandwidth:
        value: 10G
        requestPolicy:
          default: 1G
          validRange: {min: 1G}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: nic, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: nic
        exactly: {deviceClassName: nic.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: nic-2g, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: nic
        exactly:
          deviceClassName: nic.example.com
          capacity: {requests: {bandwidth: 2G}}
"#;

/// A pod whose claim comes from `template`.
fn pod(name: &str, template: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  containers:\n  - name: c\n    image: app\n    resources: {{requests: {{cpu: 100m}}, claims: [{{name: dev}}]}}\n  resourceClaims:\n  - {{name: dev, resourceClaimTemplateName: {template}}}\n"
    )
}

/// The cluster with four pods asking for a GPU and three for the NIC, run with
/// `gates` as a component or natively.
fn run(gates: &str, native: bool) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = CLUSTER.to_owned();
    for p in ["gpu-a", "gpu-b", "gpu-c", "gpu-d"] {
        cluster += &pod(p, "gpu");
    }
    cluster += &pod("share-0", "nic");
    cluster += &pod("share-1", "nic");
    cluster += &pod("sized", "nic-2g");
    let cluster = write(dir.path(), "cluster.yaml", &cluster);
    let mut options = SimulateOptions {
        files: vec![cluster],
        ..SimulateOptions::default()
    };
    options.scheduler.framework.native = native;
    let warnings = features::apply(gates, &mut options.scheduler.framework).unwrap();
    assert_eq!(warnings, Vec::<String>::new());
    simulate(&runtime(), &options).unwrap()
}

/// The devices each pod got (`driver/pool/device`), by pod name: none for a pod
/// left pending.
fn devices_of(report: &Report, pod: &str) -> Vec<String> {
    let claim = format!("{pod}-dev-");
    let mut devices: Vec<String> = report
        .devices
        .iter()
        .filter(|d| d.claim.starts_with(&claim))
        .map(|d| d.device.clone())
        .collect();
    devices.sort();
    devices
}

fn node_of<'a>(report: &'a Report, pod: &str) -> Option<&'a str> {
    report
        .pods
        .iter()
        .find(|p| p.name == pod)
        .unwrap_or_else(|| panic!("{pod} is not in the report: {report:?}"))
        .node
        .as_deref()
}

fn message_of<'a>(report: &'a Report, pod: &str) -> &'a str {
    &report.pods.iter().find(|p| p.name == pod).unwrap().message
}

/// With the gates at their defaults: the two halves and the plain GPU go to three
/// pods, the fourth waits; three claims share the NIC.
fn assert_defaults(r: &Report, mode: &str) {
    for (pod, device) in [
        ("gpu-a", "gpu.example.com/parts/gpu-0-half-a"),
        ("gpu-b", "gpu.example.com/parts/gpu-0-half-b"),
        ("gpu-c", "gpu.example.com/parts/gpu-1"),
    ] {
        assert_eq!(node_of(r, pod), Some("parts"), "{mode} {pod}: {r:?}");
        assert_eq!(devices_of(r, pod), [device], "{mode} {pod}");
    }
    assert_eq!(node_of(r, "gpu-d"), None, "{mode}: {r:?}");
    assert!(
        message_of(r, "gpu-d").contains("cannot allocate all claims"),
        "{mode}: {}",
        message_of(r, "gpu-d")
    );
    for pod in ["share-0", "share-1", "sized"] {
        assert_eq!(node_of(r, pod), Some("nics"), "{mode} {pod}: {r:?}");
        assert_eq!(
            devices_of(r, pod),
            ["nic.example.com/nics/nic-0"],
            "{mode} {pod}"
        );
    }
}

#[test]
fn the_dra_gates_on_share_partitions_and_capacity_as_a_component_and_natively() {
    for native in [false, true] {
        let mode = if native { "native" } else { "wasm" };
        assert_defaults(&run("", native), mode);
        assert_defaults(
            &run(
                "DRAPartitionableDevices=true,DRAConsumableCapacity=true",
                native,
            ),
            mode,
        );
    }
}

#[test]
fn partitionable_devices_off_leaves_devices_that_consume_counters_alone() {
    for native in [false, true] {
        let mode = if native { "native" } else { "wasm" };
        let r = run("DRAPartitionableDevices=false", native);
        // The halves consume counters: only the plain GPU of the pool is given.
        assert_eq!(node_of(&r, "gpu-a"), Some("parts"), "{mode}: {r:?}");
        assert_eq!(
            devices_of(&r, "gpu-a"),
            ["gpu.example.com/parts/gpu-1"],
            "{mode}"
        );
        for pod in ["gpu-b", "gpu-c", "gpu-d"] {
            assert_eq!(node_of(&r, pod), None, "{mode} {pod}: {r:?}");
            assert!(
                message_of(&r, pod).contains("cannot allocate all claims"),
                "{mode} {pod}: {}",
                message_of(&r, pod)
            );
        }
        // Consumable capacity is as by default.
        for pod in ["share-0", "share-1", "sized"] {
            assert_eq!(node_of(&r, pod), Some("nics"), "{mode} {pod}: {r:?}");
        }
    }
}

#[test]
fn consumable_capacity_off_gives_a_shareable_device_whole_and_refuses_capacity_requests() {
    for native in [false, true] {
        let mode = if native { "native" } else { "wasm" };
        let r = run("DRAConsumableCapacity=false", native);
        // The NIC is allocated exclusively: the first claim takes it whole.
        assert_eq!(node_of(&r, "share-0"), Some("nics"), "{mode}: {r:?}");
        assert_eq!(
            devices_of(&r, "share-0"),
            ["nic.example.com/nics/nic-0"],
            "{mode}"
        );
        assert_eq!(node_of(&r, "share-1"), None, "{mode}: {r:?}");
        assert!(
            message_of(&r, "share-1").contains("cannot allocate all claims"),
            "{mode}: {}",
            message_of(&r, "share-1")
        );
        // A claim asking for capacity is an error, whatever the node.
        assert_eq!(node_of(&r, "sized"), None, "{mode}: {r:?}");
        let m = message_of(&r, "sized");
        assert!(
            m.contains(
                "request nic: has capacity requests, but the DRAConsumableCapacity feature is disabled"
            ),
            "{mode}: {m}"
        );
        // Partitionable devices are as by default.
        for pod in ["gpu-a", "gpu-b", "gpu-c"] {
            assert_eq!(node_of(&r, pod), Some("parts"), "{mode} {pod}: {r:?}");
        }
    }
}
