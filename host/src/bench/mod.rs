//! `berth bench`: workloads shaped like kube-scheduler's scheduler_perf
//! (`test/integration/scheduler_perf/config/performance-config.yaml`, the pod group
//! test cases of `test/integration/scheduler_perf/podgroup/`, and the dynamic
//! resource allocation ones of `test/integration/scheduler_perf/dra/`) run on the
//! embedded cluster, on a paced virtual clock (`VirtualClock::paced`): what the
//! scheduler decides reads only virtual time, which moves when the scheduler waits,
//! so a workload's placements are the same on any machine (as `berth simulate`'s),
//! while the wall time measured still includes every wait. The one exception is a
//! workload with churn (pods made every so often of wall time, as upstream's
//! `churn`): there the wall clock is an input, read before each attempt.
//!
//! Each run builds a fresh scheduler, adds the nodes (and a DRA workload's devices,
//! device class, claim templates and claims held before measuring), adds and
//! schedules the initial pods, creates the PodGroups of a pod group workload, then
//! adds every measured pod and times only their scheduling: the time of each attempt
//! (pop, snapshot, PreFilter to Permit, hand-off to the binding cycle; for a member of
//! a PodGroup, the whole pod group cycle) and the wall time until every binding is
//! done. Pods per second are the measured pods bound per second of that wall time.
//! A steady-state workload instead keeps a few pods pending for its duration, each
//! deleted once bound and replaced (`steady.rs`); its pods per second are those bound
//! per second of the whole run.

use crate::clock::VirtualClock;
use crate::cluster::manifest::{self, ManifestError, Object};
use crate::cluster::memory::MemoryCluster;
use crate::cluster::pod_groups::{PodGroupObject, PodGroupPolicy};
use crate::config::Configuration;
use crate::scheduler::{PodError, Scheduler, SchedulerError, SchedulerOptions};
use crate::wasm::Runtime;
use berth_sdk::dra::DeviceId;
use berth_sdk::{Labels, Node, Pod, Resources};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod churn;
mod dra;
mod steady;
pub use churn::{ChurnOptions, ChurnResult, ChurnSample, churn_to_text, rss_mib, run_churn};
pub use dra::{Devices, Held};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// No workload has the name asked for.
    #[error(
        "no workload {name:?}; the workloads are {}",
        WORKLOADS.map(|w| w.name).join(", ")
    )]
    NoWorkload {
        /// The name asked for.
        name: String,
    },
    /// A workload has no size of the name asked for (`--workload NAME/SIZE`).
    #[error("workload {workload} has no size {size:?}; its sizes are {sizes}")]
    NoSize {
        /// The workload.
        workload: &'static str,
        /// The size asked for.
        size: String,
        /// The workload's sizes, comma-separated.
        sizes: String,
    },
    /// A workload's pod template is not a valid manifest.
    #[error(transparent)]
    Template(#[from] ManifestError),
    /// A workload's pod template is a valid manifest of something else.
    #[error("bench template is not a pod")]
    TemplateNotPod,
    /// A DRA workload's template is not the kind of object it stands for.
    #[error("bench template is not a {0}")]
    TemplateNotA(&'static str),
    /// The scheduler could not be built.
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// The scheduler refused a pod of the workload.
    #[error(transparent)]
    Pod(#[from] PodError),
    /// A pod names a ResourceClaimTemplate its namespace does not have.
    #[error("bench pod {pod} names a ResourceClaimTemplate its namespace does not have")]
    NoTemplate {
        /// The pod, `namespace/name`.
        pod: String,
    },
    /// The claims to allocate before measuring are more than the devices.
    #[error("{claims} claims to allocate before measuring are more than the devices")]
    DevicesFull {
        /// The claims asked for.
        claims: usize,
    },
}

/// One size of a workload: nodes, pods scheduled before measuring, measured pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// The size's name: upstream's workload name for the pod group workloads
    /// (`5000Nodes_1000Gangs_3000Pods`), the node count for the others (`5000Nodes`).
    pub name: &'static str,
    /// Nodes.
    pub nodes: usize,
    /// Pods created (and scheduled) before measuring.
    pub init_pods: usize,
    /// Pods whose scheduling is measured.
    pub measure_pods: usize,
    /// Members per PodGroup of the measured pods (upstream's `podsPerGroup`); 0 when
    /// they belong to no group.
    pub pods_per_group: usize,
    /// The devices of a DRA workload; [`Devices::NONE`] for the others.
    pub devices: Devices,
    /// For a steady-state workload (upstream's `steadyState`), how long it lasts
    /// (upstream's `duration`): `measure_pods` are then the pods pending at once, each
    /// deleted once bound and replaced.
    pub steady: Option<Duration>,
}

impl Size {
    /// The measured pods' PodGroups (upstream's `initPodGroups`): 0 when they belong
    /// to none.
    pub fn pod_groups(&self) -> usize {
        self.measure_pods
            .checked_div(self.pods_per_group)
            .unwrap_or(0)
    }
}

/// How the nodes of a workload are labelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Zones {
    /// No zone label.
    None,
    /// Every node in `zone1`.
    One,
    /// Round-robin over `moon-1`, `moon-2`, `moon-3`.
    Moons,
}

/// The PodGroups the measured pods of a workload belong to, as upstream's
/// `createPodGroups` makes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Groups {
    /// None: the pods are scheduled one by one.
    None,
    /// `GangScheduling`: `gang-<i>` with `gang: {minCount: podsPerGroup}`.
    Gang,
    /// `BasicScheduling`: `basic-group-<i>` with `basic: {}`.
    Basic,
}

impl Groups {
    /// The name of the measured pods' `i`th PodGroup.
    fn group_name(self, i: usize) -> String {
        match self {
            Groups::None => String::new(),
            Groups::Gang => format!("gang-{i}"),
            Groups::Basic => format!("basic-group-{i}"),
        }
    }

    /// The PodGroup object of the `i`th group, whose members are `pods_per_group`.
    fn object(self, namespace: &str, i: usize, pods_per_group: usize) -> PodGroupObject {
        PodGroupObject {
            namespace: namespace.to_owned(),
            name: self.group_name(i),
            policy: match self {
                Groups::Gang => PodGroupPolicy::Gang {
                    min_count: u32::try_from(pods_per_group).unwrap_or(u32::MAX),
                },
                Groups::None | Groups::Basic => PodGroupPolicy::Basic,
            },
            topology_keys: Vec::new(),
            ..Default::default()
        }
    }
}

/// A scheduler_perf-shaped workload.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// The name, as upstream's test case.
    pub name: &'static str,
    /// The sizes it runs at, the smallest first: 500 and 5000 nodes, or upstream's
    /// named sizes (the pod group and DRA workloads).
    pub sizes: &'static [Size],
    zones: Zones,
    groups: Groups,
    measure_pod_name: &'static str,
    init_template: &'static str,
    measure_template: &'static str,
    init_namespace: &'static str,
    measure_namespace: &'static str,
    /// Pods created while the measured pods are scheduled (upstream's `churn`
    /// opcode in `create` mode); none for most workloads.
    churn: Option<Churn>,
}

/// Upstream's `churn` in `create` mode: a pod of `template` created every `every` of
/// wall time, from the start of the measurement to its end. Its pods are not measured
/// (they compete with the measured ones, as upstream's do).
#[derive(Clone, Copy, Debug)]
struct Churn {
    template: &'static str,
    every: Duration,
}

const fn size(name: &'static str, nodes: usize, init_pods: usize, measure_pods: usize) -> Size {
    Size {
        name,
        nodes,
        init_pods,
        measure_pods,
        pods_per_group: 0,
        devices: Devices::NONE,
        steady: None,
    }
}

/// Upstream's `SchedulingWithResourceClaimTemplate` size: `plain` nodes without
/// devices and `with_devices` with `per_node` each (`nodesWithoutDRA`,
/// `nodesWithDRA`, `maxClaimsPerNode`), `init_pods` and `measure_pods` each taking
/// one device through its claim template.
const fn with_devices(
    name: &'static str,
    plain: usize,
    with_devices: usize,
    per_node: usize,
    init_pods: usize,
    measure_pods: usize,
) -> Size {
    with_extended_resources(
        name,
        0,
        plain,
        with_devices,
        per_node,
        init_pods,
        measure_pods,
    )
}

/// Upstream's `SchedulingWithExtendedResource` size: `classes` DeviceClasses each
/// backing one extended resource, the nodes and devices as [`with_devices`]'s, and
/// `init_pods` and `measure_pods` each asking for one of the resource of its index
/// (no classes: [`with_devices`]'s one class and claim templates).
const fn with_extended_resources(
    name: &'static str,
    classes: usize,
    plain: usize,
    with_devices: usize,
    per_node: usize,
    init_pods: usize,
    measure_pods: usize,
) -> Size {
    Size {
        devices: Devices {
            plain_nodes: plain,
            per_node,
            held: Held::Empty,
            classes,
        },
        ..size(name, plain + with_devices, init_pods, measure_pods)
    }
}

/// Pods pending at once in upstream's DRA steady states (`createPods` `count: 10`).
const STEADY_PENDING: usize = 10;

/// Upstream's `SteadyStateClusterResourceClaimTemplate` size: its nodes and devices,
/// what claims hold before measuring, ten pods pending at once for `seconds`.
const fn steady(
    name: &'static str,
    plain: usize,
    with_devices: usize,
    held: Held,
    seconds: u64,
) -> Size {
    Size {
        devices: Devices {
            plain_nodes: plain,
            per_node: 10,
            held,
            classes: 0,
        },
        steady: Some(Duration::from_secs(seconds)),
        ..size(name, plain + with_devices, 0, STEADY_PENDING)
    }
}

/// Upstream's pod group workload: `groups` PodGroups of `per_group` members on
/// `nodes` nodes, no initial pods, every member measured.
const fn grouped(name: &'static str, nodes: usize, groups: usize, per_group: usize) -> Size {
    Size {
        name,
        nodes,
        init_pods: 0,
        measure_pods: groups * per_group,
        pods_per_group: per_group,
        devices: Devices::NONE,
        steady: None,
    }
}

// Pod templates, as scheduler_perf's: a pause container asking 100m CPU and 500Mi.
const POD_DEFAULT: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

const POD_LARGE_CPU: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      requests: {cpu: "9", memory: 500Mi}
"#;

const POD_NODE_AFFINITY: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: topology.kubernetes.io/zone, operator: In, values: [zone1, zone2]}
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

// The affinity terms name both namespaces of the workload, so that the measured pods
// see the initial ones.
const POD_ANTI_AFFINITY: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
  labels: {color: green}
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {color: green}}
        topologyKey: kubernetes.io/hostname
        namespaces: [sched-0, sched-1]
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

const POD_AFFINITY: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
  labels: {color: blue}
spec:
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {color: blue}}
        topologyKey: topology.kubernetes.io/zone
        namespaces: [sched-0, sched-1]
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

const POD_SPREAD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
  labels: {color: blue}
spec:
  topologySpreadConstraints:
  - maxSkew: 5
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {matchLabels: {color: blue}}
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 100m, memory: 500Mi}
      requests: {cpu: 100m, memory: 500Mi}
"#;

const POD_LOW_PRIORITY: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
spec:
  priority: 1
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 900m, memory: 500Mi}
      requests: {cpu: 900m, memory: 500Mi}
"#;

const POD_HIGH_PRIORITY: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: pod
spec:
  priority: 10
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    ports: [{containerPort: 80}]
    resources:
      limits: {cpu: 3000m, memory: 500Mi}
      requests: {cpu: 3000m, memory: 500Mi}
"#;

// upstream's `templates/pod-hostport-80.yaml`: host port 80, so one pod per node
// (the HostPortConflict workload of `batching/`).
const POD_HOST_PORT_80: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10.1
    ports: [{containerPort: 80, hostPort: 80}]
    resources:
      requests: {cpu: 100m, memory: 100Mi}
"#;

// upstream's `templates/pod-saturation.yaml`: 3 CPUs of a 4-CPU node, so one pod per
// node (the ResourceSaturation workload of `batching/`).
const POD_SATURATION: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10.1
    resources:
      requests: {cpu: "3", memory: 1Gi}
"#;

// A PodGroup's member, as upstream's `podgroup/*/templates/*-pod.yaml`: 100m CPU and
// 100Mi requested; its `podGroupName` is set per pod.
const POD_GROUP_MEMBER: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  schedulingGroup: {podGroupName: group}
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10.1
    resources:
      requests: {cpu: 100m, memory: 100Mi}
"#;

// upstream's `dra/templates/pod-with-claim-template.yaml`: no resources but one
// claim, made for the pod from its namespace's `test-claim-template`.
const POD_WITH_CLAIM_TEMPLATE: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10.1
    resources:
      claims: [{name: resource}]
  resourceClaims:
  - name: resource
    resourceClaimTemplateName: test-claim-template
"#;

// upstream's `dra/templates/pod-with-extended-resource.yaml`: no claim, but one of
// the extended resource `example.com/gpu-<i>` (`<i>` the pod's index among the pods
// made with it), which DeviceClass `test-class-<i>` backs: DynamicResources gives the
// pod a device of that class through a claim it makes for it.
const POD_WITH_EXTENDED_RESOURCE: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pod}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.9
    resources:
      requests:
        example.com/gpu-{{.Index}}: 1
      limits:
        example.com/gpu-{{.Index}}: 1
"#;

/// Upstream's `batching/` sizes (its integration size, 20000 nodes), and 5000 nodes
/// as the other workloads.
const ONE_POD_PER_NODE_SIZES: &[Size] = &[
    size("10Nodes_10Pods", 10, 0, 10),
    size("5000Nodes_5000Pods", 5000, 0, 5000),
    size("20000Nodes_20000Pods", 20000, 0, 20000),
];

/// A workload of upstream's `batching/`: pods of `template` on as many nodes, each
/// taking a node the next cannot use.
const fn one_pod_per_node(name: &'static str, template: &'static str) -> Workload {
    Workload {
        name,
        sizes: ONE_POD_PER_NODE_SIZES,
        zones: Zones::None,
        init_template: template,
        measure_template: template,
        init_namespace: "default",
        measure_namespace: "default",
        groups: Groups::None,
        measure_pod_name: "measured",
        churn: None,
    }
}

/// The workloads, with upstream's node and pod counts.
pub const WORKLOADS: [Workload; 15] = [
    Workload {
        name: "SchedulingBasic",
        sizes: &[
            size("500Nodes", 500, 500, 1000),
            size("5000Nodes", 5000, 1000, 1000),
        ],
        zones: Zones::None,
        init_template: POD_DEFAULT,
        measure_template: POD_DEFAULT,
        init_namespace: "default",
        measure_namespace: "default",
        groups: Groups::None,
        measure_pod_name: "measured",
        churn: None,
    },
    Workload {
        name: "SchedulingNodeAffinity",
        sizes: &[
            size("500Nodes", 500, 500, 1000),
            size("5000Nodes", 5000, 5000, 1000),
        ],
        zones: Zones::One,
        init_template: POD_NODE_AFFINITY,
        measure_template: POD_NODE_AFFINITY,
        init_namespace: "default",
        measure_namespace: "default",
        groups: Groups::None,
        measure_pod_name: "measured",
        churn: None,
    },
    Workload {
        name: "TopologySpreading",
        sizes: &[
            size("500Nodes", 500, 1000, 1000),
            size("5000Nodes", 5000, 5000, 2000),
        ],
        zones: Zones::Moons,
        init_template: POD_DEFAULT,
        measure_template: POD_SPREAD,
        init_namespace: "default",
        measure_namespace: "default",
        groups: Groups::None,
        measure_pod_name: "measured",
        churn: None,
    },
    Workload {
        name: "SchedulingPodAntiAffinity",
        sizes: &[
            size("500Nodes", 500, 100, 400),
            size("5000Nodes", 5000, 1000, 1000),
        ],
        zones: Zones::None,
        init_template: POD_ANTI_AFFINITY,
        measure_template: POD_ANTI_AFFINITY,
        init_namespace: "sched-0",
        measure_namespace: "sched-1",
        groups: Groups::None,
        measure_pod_name: "measured",
        churn: None,
    },
    Workload {
        name: "SchedulingPodAffinity",
        sizes: &[
            size("500Nodes", 500, 500, 1000),
            size("5000Nodes", 5000, 5000, 1000),
        ],
        zones: Zones::One,
        init_template: POD_AFFINITY,
        measure_template: POD_AFFINITY,
        init_namespace: "sched-0",
        measure_namespace: "sched-1",
        groups: Groups::None,
        measure_pod_name: "measured",
        churn: None,
    },
    Workload {
        // Nodes full of low-priority pods; each measured pod must evict three.
        name: "PreemptionBasic",
        sizes: &[
            size("500Nodes", 500, 2000, 500),
            size("5000Nodes", 5000, 20000, 5000),
        ],
        zones: Zones::None,
        init_template: POD_LOW_PRIORITY,
        measure_template: POD_HIGH_PRIORITY,
        init_namespace: "default",
        measure_namespace: "default",
        groups: Groups::None,
        measure_pod_name: "measured",
        churn: None,
    },
    Workload {
        // Upstream's PreemptionAsync: nodes as PreemptionBasic's (four low-priority
        // pods on each, 3.6 of 4 CPUs), a high-priority pod that must evict three of
        // them arriving every 200 ms, and the measured pods small ones that always
        // fit: how fast pods are placed while preemptions run beside them.
        name: "PreemptionAsync",
        sizes: &[
            size("5Nodes", 5, 20, 5),
            size("500Nodes", 500, 2000, 500),
            size("5000Nodes", 5000, 20000, 5000),
        ],
        zones: Zones::None,
        init_template: POD_LOW_PRIORITY,
        measure_template: POD_DEFAULT,
        init_namespace: "default",
        measure_namespace: "default",
        groups: Groups::None,
        measure_pod_name: "measured",
        churn: Some(Churn {
            template: POD_HIGH_PRIORITY,
            every: Duration::from_millis(200),
        }),
    },
    Workload {
        name: "Unschedulable",
        sizes: &[
            size("500Nodes", 500, 200, 1000),
            size("5000Nodes", 5000, 200, 5000),
        ],
        zones: Zones::None,
        init_template: POD_LARGE_CPU,
        measure_template: POD_DEFAULT,
        init_namespace: "default",
        measure_namespace: "default",
        groups: Groups::None,
        measure_pod_name: "measured",
        churn: None,
    },
    Workload {
        // Upstream's `podgroup/gangscheduling`: gangs of 3 and of 1000 or 5000, each
        // PodGroup's minCount its size; every member measured.
        name: "GangScheduling",
        sizes: &[
            grouped("100Nodes_10Gangs", 100, 10, 3),
            grouped("5000Nodes_1000Gangs_3000Pods", 5000, 1000, 3),
            grouped("5000Nodes_2000Gangs_6000Pods", 5000, 2000, 3),
            grouped("5000Nodes_3000Gangs_9000Pods", 5000, 3000, 3),
            grouped("5000Nodes_3Gangs_3000Pods_1000PerGroup", 5000, 3, 1000),
            grouped("5000Nodes_6Gangs_6000Pods_1000PerGroup", 5000, 6, 1000),
            grouped("5000Nodes_9Gangs_9000Pods_1000PerGroup", 5000, 9, 1000),
            grouped("5000Nodes_10Gangs_50000Pods_5000PerGroup", 5000, 10, 5000),
        ],
        zones: Zones::None,
        init_template: POD_GROUP_MEMBER,
        measure_template: POD_GROUP_MEMBER,
        init_namespace: "gang-ns-0",
        measure_namespace: "gang-ns-0",
        groups: Groups::Gang,
        measure_pod_name: "test-gang-scheduling",
        churn: None,
    },
    Workload {
        // Upstream's `podgroup/basicscheduling`: the same shapes, PodGroups with the
        // basic policy.
        name: "BasicScheduling",
        sizes: &[
            grouped("100Nodes_10Groups", 100, 10, 3),
            grouped("5000Nodes_1000Groups_3000Pods", 5000, 1000, 3),
            grouped("5000Nodes_2000Groups_6000Pods", 5000, 2000, 3),
            grouped("5000Nodes_3000Groups_9000Pods", 5000, 3000, 3),
            grouped("5000Nodes_3Groups_3000Pods_1000PerGroup", 5000, 3, 1000),
            grouped("5000Nodes_6Groups_6000Pods_1000PerGroup", 5000, 6, 1000),
            grouped("5000Nodes_9Groups_9000Pods_1000PerGroup", 5000, 9, 1000),
            grouped("5000Nodes_10Groups_50000Pods_5000PerGroup", 5000, 10, 5000),
        ],
        zones: Zones::None,
        init_template: POD_GROUP_MEMBER,
        measure_template: POD_GROUP_MEMBER,
        init_namespace: "basic-ns-0",
        measure_namespace: "basic-ns-0",
        groups: Groups::Basic,
        measure_pod_name: "test-basic-scheduling",
        churn: None,
    },
    Workload {
        // Upstream's `dra` SchedulingWithResourceClaimTemplate: every pod's claim is
        // made from a template and takes one of the test driver's devices; the
        // counts fill the cluster's devices. Berth always uses queueing hints, so
        // each size and its `_QueueingHintsEnabled` twin are one.
        name: "SchedulingWithResourceClaimTemplate",
        sizes: &[
            with_devices("fast", 1, 1, 10, 0, 10),
            with_devices("2000pods_100nodes", 0, 100, 20, 1000, 1000),
            with_devices("2000pods_200nodes", 0, 200, 10, 1000, 1000),
            with_devices("5000pods_500nodes", 0, 500, 10, 2500, 2500),
        ],
        zones: Zones::None,
        init_template: POD_WITH_CLAIM_TEMPLATE,
        measure_template: POD_WITH_CLAIM_TEMPLATE,
        init_namespace: "init",
        measure_namespace: "test",
        groups: Groups::None,
        measure_pod_name: "test-dra",
        churn: None,
    },
    Workload {
        // Upstream's `dra` SteadyStateClusterResourceClaimTemplate: claims without a
        // pod hold none, half or all but ten of the devices; ten pods with template
        // claims are kept pending, each deleted once bound and replaced.
        name: "SteadyStateClusterResourceClaimTemplate",
        sizes: &[
            steady("fast", 1, 1, Held::Empty, 2),
            steady("empty_100nodes", 0, 100, Held::Empty, 10),
            steady("empty_200nodes", 0, 200, Held::Empty, 10),
            steady("empty_500nodes", 0, 500, Held::Empty, 10),
            steady("half_100nodes", 0, 100, Held::Half, 10),
            steady("half_200nodes", 0, 200, Held::Half, 10),
            steady("half_500nodes", 0, 500, Held::Half, 10),
            steady("full_100nodes", 0, 100, Held::Full, 10),
            steady("full_200nodes", 0, 200, Held::Full, 10),
            steady("full_500nodes", 0, 500, Held::Full, 10),
        ],
        zones: Zones::None,
        init_template: POD_WITH_CLAIM_TEMPLATE,
        measure_template: POD_WITH_CLAIM_TEMPLATE,
        init_namespace: "init",
        measure_namespace: "test",
        groups: Groups::None,
        measure_pod_name: "test-dra",
        churn: None,
    },
    Workload {
        // Upstream's `dra/extendedresource` SchedulingWithExtendedResource: pod <i>
        // (of the initial ones, and of the measured ones) asks for one
        // `example.com/gpu-<i>`, which no node advertises and DeviceClass
        // `test-class-<i>` backs with the test driver's devices; DynamicResources
        // allocates one through a claim it makes for the pod.
        name: "SchedulingWithExtendedResource",
        sizes: &[
            with_extended_resources("fast", 10, 1, 1, 10, 0, 10),
            with_extended_resources("2000pods_100nodes", 1000, 0, 100, 10, 1000, 1000),
            with_extended_resources("5000pods_500nodes", 2500, 0, 500, 10, 2500, 2500),
        ],
        zones: Zones::None,
        init_template: POD_WITH_EXTENDED_RESOURCE,
        measure_template: POD_WITH_EXTENDED_RESOURCE,
        init_namespace: "init",
        measure_namespace: "test",
        groups: Groups::None,
        measure_pod_name: "test-dra",
        churn: None,
    },
    // upstream's `batching/` workloads (opportunistic batching's best case: each pod
    // takes a node the next cannot use). Upstream runs them with PodTopologySpread's
    // default constraints turned off so that its pods can be signed; Berth signs a pod
    // that nothing selects under system defaulting, so the default profile serves.
    one_pod_per_node("HostPortConflict", POD_HOST_PORT_80),
    one_pod_per_node("ResourceSaturation", POD_SATURATION),
];

/// How much smaller than upstream's 500-node size `--quick` runs a workload.
pub const QUICK_DIVISOR: usize = 5;

/// Finds a workload by name (case-insensitive).
pub fn workload(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name.eq_ignore_ascii_case(name))
}

/// Finds a workload, `NAME`, or one of its sizes, `NAME/SIZE` as upstream names its
/// benchmarks (`GangScheduling/5000Nodes_1000Gangs_3000Pods`), case-insensitive:
/// the workload and the sizes meant.
pub fn find(name: &str) -> Result<(&'static Workload, &'static [Size]), BenchError> {
    let (w, size) = name.split_once('/').unwrap_or((name, ""));
    let w = workload(w).ok_or_else(|| BenchError::NoWorkload {
        name: name.to_owned(),
    })?;
    if size.is_empty() {
        return Ok((w, w.sizes));
    }
    let k = w
        .sizes
        .iter()
        .position(|s| s.name.eq_ignore_ascii_case(size))
        .ok_or_else(|| BenchError::NoSize {
            workload: w.name,
            size: size.to_owned(),
            sizes: w
                .sizes
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    Ok((w, &w.sizes[k..=k]))
}

/// Whether plugins run as wasm components or natively compiled into the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every plugin a sandboxed WebAssembly component.
    Wasm,
    /// The same plugin crates compiled into the host.
    Native,
}

impl Mode {
    /// `wasm` or `native`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Wasm => "wasm",
            Mode::Native => "native",
        }
    }
}

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct BenchOptions {
    /// Workload names; empty runs them all.
    pub workloads: Vec<String>,
    /// Run only the size with this many nodes (another count runs the nearest
    /// size's pods on this many nodes).
    pub nodes: Option<usize>,
    /// Override the initial pod count.
    pub init_pods: Option<usize>,
    /// Override the measured pod count.
    pub measure_pods: Option<usize>,
    /// Small counts, for a smoke run.
    pub quick: bool,
    /// Run the plugins natively instead of as wasm.
    pub native: bool,
    /// Run each workload both as wasm and natively, and report the ratio.
    pub compare_native: bool,
    /// How the scheduler runs (parallelism, seed).
    pub scheduler: SchedulerOptions,
}

/// One workload at one size in one mode.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchResult {
    /// The workload's name.
    pub workload: String,
    /// The size's name, for a workload whose sizes go by upstream's names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Nodes.
    pub nodes: usize,
    /// Pods scheduled before measuring.
    pub init_pods: usize,
    /// Measured pods (for a steady state, the pods made during it).
    pub measured_pods: usize,
    /// `wasm` or `native`.
    pub mode: Mode,
    /// Measured pods bound per second.
    pub pods_per_second: f64,
    /// Median attempt latency, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile attempt latency, in milliseconds.
    pub p99_ms: f64,
    /// Peak resident memory of the process during the run (VmHWM), in MiB.
    pub peak_rss_mib: f64,
    /// Measured pods that were bound.
    pub scheduled: usize,
    /// Scheduling attempts while measuring that placed a pod from the batch of an
    /// earlier cycle (opportunistic batching).
    pub batched: u64,
    /// The measured pods' PodGroups, for a pod group workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_groups: Option<usize>,
    /// Members per PodGroup, for a pod group workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods_per_group: Option<usize>,
    /// Devices on each node with devices, for a DRA workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices_per_node: Option<usize>,
    /// Claims holding devices before measuring, with no pod, for a DRA workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_claims: Option<usize>,
    /// Wall time of the measured part, in seconds.
    pub seconds: f64,
    /// The machine's cores.
    pub cores: usize,
    /// With a native comparison, on the wasm result: wasm time over native time per
    /// measured pod (the same pods both ways, but in a steady state, where both run
    /// for its duration and make as many as they can).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wasm_over_native: Option<f64>,
}

/// Wasm time over native time per measured pod; `None` when either has none.
fn wasm_over_native(wasm: &BenchResult, native: &BenchResult) -> Option<f64> {
    let per_pod =
        |r: &BenchResult| (r.measured_pods > 0).then(|| r.seconds / r.measured_pods as f64);
    match (per_pod(wasm), per_pod(native)) {
        (Some(w), Some(n)) if n > 0.0 => Some(w / n),
        _ => None,
    }
}

/// The cores of this machine.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Peak resident memory of the process so far (VmHWM), in MiB; 0 when unknown.
pub fn peak_rss_mib() -> f64 {
    proc_status_mib(None, "VmHWM:")
}

/// A memory figure (the field with its colon) of a process's `/proc/<pid>/status`,
/// this process's without a pid, in MiB; 0 when unknown.
pub(crate) fn proc_status_mib(pid: Option<u32>, field: &str) -> f64 {
    let path = pid.map_or_else(
        || "/proc/self/status".to_owned(),
        |p| format!("/proc/{p}/status"),
    );
    let Ok(status) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Resets the peak resident memory to the current one (Linux: `clear_refs` 5), so
/// each run reports its own peak.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn parse_pod(text: &str) -> Result<Pod, BenchError> {
    let docs = manifest::load_str("<bench template>", text)?;
    match docs.into_iter().next().map(|d| d.object) {
        Some(Object::Pod(p)) => Ok(p),
        _ => Err(BenchError::TemplateNotPod),
    }
}

/// What a pod template has in place of the pod's index among the pods made with it
/// (upstream's templates are Go templates, and its `createPods` gives them `.Index`);
/// the one substitution Berth's templates know.
const INDEX: &str = "{{.Index}}";

/// A pod template, parsed. One that holds [`INDEX`] makes each pod from its text
/// with the pod's index in that place; the others make copies of one pod.
#[derive(Clone, Debug)]
struct PodTemplate {
    text: &'static str,
    indexed: bool,
    /// The pod of index 0 (the only one, when the template holds no [`INDEX`]).
    first: Pod,
}

fn template(text: &'static str) -> Result<PodTemplate, BenchError> {
    Ok(PodTemplate {
        text,
        indexed: text.contains(INDEX),
        first: parse_pod(&text.replace(INDEX, "0"))?,
    })
}

impl PodTemplate {
    /// The pod of index `i` as the template has it (before [`make_pod`] names it).
    fn at(&self, i: usize) -> Result<Pod, BenchError> {
        if !self.indexed || i == 0 {
            return Ok(self.first.clone());
        }
        parse_pod(&self.text.replace(INDEX, &i.to_string()))
    }
}

/// Node `node-<i>` as the workloads without zones have it (scheduler_perf's
/// default: 4 CPUs, 32Gi, 110 pods), for tests that build a cluster of them.
pub fn default_node(i: usize) -> Node {
    make_node(i, Zones::None)
}

fn make_node(i: usize, zones: Zones) -> Node {
    let name = format!("node-{i}");
    let mut labels = Labels::new();
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    match zones {
        Zones::None => {}
        Zones::One => {
            labels.insert("topology.kubernetes.io/zone".into(), "zone1".into());
        }
        Zones::Moons => {
            labels.insert(
                "topology.kubernetes.io/zone".into(),
                format!("moon-{}", i % 3 + 1),
            );
        }
    }
    // scheduler_perf's default node: 4 CPUs, 32Gi, 110 pods.
    Node {
        name,
        labels,
        allocatable: Resources {
            milli_cpu: 4000,
            memory: 32 << 30,
            allowed_pod_number: 110,
            ..Resources::default()
        },
        ..Node::default()
    }
}

/// The `i`th pod of `template` (its index `i`), `<prefix>-<i>` in `namespace`.
fn make_pod(
    template: &PodTemplate,
    namespace: &str,
    prefix: &str,
    i: usize,
) -> Result<Pod, BenchError> {
    let mut p = template.at(i)?;
    p.namespace = namespace.to_owned();
    p.name = format!("{prefix}-{i}");
    p.uid = pod_uid(namespace, prefix, i);
    Ok(p)
}

/// The UID of the `i`th pod `<prefix>-<i>` of `namespace`.
fn pod_uid(namespace: &str, prefix: &str, i: usize) -> String {
    format!("{namespace}-{prefix}-{i}")
}

/// The `i`th measured pod; a member of a pod group workload names the group of its
/// index (pods 0 to `pods_per_group - 1` the first, and so on, as upstream's
/// templates do).
fn make_measured(
    w: &Workload,
    template: &PodTemplate,
    size: Size,
    i: usize,
) -> Result<Pod, BenchError> {
    let mut p = make_pod(template, w.measure_namespace, w.measure_pod_name, i)?;
    p.scheduling_group = match w.groups {
        Groups::None => None,
        g => Some(g.group_name(i / size.pods_per_group.max(1))),
    };
    Ok(p)
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let k = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[k].as_secs_f64() * 1000.0
}

/// The sizes a run picks for a workload.
pub fn sizes_for(w: &Workload, opts: &BenchOptions) -> Vec<Size> {
    sizes_among(w.sizes, opts)
}

/// The sizes a run picks among `sizes` (a workload's, or the one named): with
/// `--quick` the first divided by [`QUICK_DIVISOR`] (or as it is when that would leave
/// no node: upstream's `fast` DRA sizes, two nodes and ten pods, are quick already);
/// with `--nodes N` those of the node count nearest to N, on N nodes; the pod counts
/// as overridden. A pod group workload measures whole groups: its measured count is
/// rounded up to a multiple of its group's size.
fn sizes_among(sizes: &[Size], opts: &BenchOptions) -> Vec<Size> {
    let mut sizes: Vec<Size> = if opts.quick {
        let s = sizes[0];
        if s.nodes / QUICK_DIVISOR == 0 {
            vec![s]
        } else {
            vec![Size {
                nodes: s.nodes / QUICK_DIVISOR,
                init_pods: s.init_pods / QUICK_DIVISOR,
                measure_pods: s.measure_pods / QUICK_DIVISOR,
                devices: Devices {
                    plain_nodes: s.devices.plain_nodes / QUICK_DIVISOR,
                    ..s.devices
                },
                ..s
            }]
        }
    } else {
        match opts.nodes {
            Some(n) => {
                let nearest = sizes
                    .iter()
                    .min_by_key(|s| s.nodes.abs_diff(n))
                    .expect("a workload has sizes")
                    .nodes;
                sizes
                    .iter()
                    .filter(|s| s.nodes == nearest)
                    .map(|s| Size { nodes: n, ..*s })
                    .collect()
            }
            None => sizes.to_vec(),
        }
    };
    for s in &mut sizes {
        if opts.quick
            && let Some(n) = opts.nodes
        {
            s.nodes = n;
        }
        if let Some(p) = opts.init_pods {
            s.init_pods = p;
        }
        if let Some(p) = opts.measure_pods {
            s.measure_pods = p;
        }
        if s.pods_per_group > 0 {
            s.measure_pods = s.measure_pods.max(1).div_ceil(s.pods_per_group) * s.pods_per_group;
        }
    }
    sizes
}

impl Workload {
    /// Whether its sizes go by upstream's names rather than by their node counts:
    /// the pod group and DRA workloads, several of whose sizes have one node count.
    fn names_sizes(&self) -> bool {
        self.groups != Groups::None || self.sizes.iter().any(|s| s.devices.per_node > 0)
    }
}

/// How progress lines name a run: a workload of named sizes with its size's name.
fn label(w: &Workload, size: Size, mode: Mode) -> String {
    let name = if w.names_sizes() {
        format!("{}/{}", w.name, size.name)
    } else {
        w.name.to_owned()
    };
    format!("{name} {} nodes {}", size.nodes, mode.as_str())
}

/// A scheduler with the workload's nodes (and a DRA workload's devices, class, claim
/// templates and the claims that hold devices before measuring), its initial pods
/// placed and its PodGroups created; with the clock it runs on and the uids of the
/// initial pods. A measured run's clock is `paced` (its waits cost wall time); a run
/// that only asks where pods land need not wait.
fn setup(
    runtime: &Arc<Runtime>,
    w: &Workload,
    size: Size,
    mode: Mode,
    options: &SchedulerOptions,
    paced: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<(Scheduler, Arc<VirtualClock>, Vec<String>), BenchError> {
    let init_template = template(w.init_template)?;
    let mut options = options.clone();
    options.framework.native = mode == Mode::Native;
    // Upstream's pod group workloads run with `featureGates: {GenericWorkload: true}`
    // (their performance-config.yaml), whatever the command line says.
    if !matches!(w.groups, Groups::None) {
        options.framework.generic_workload = true;
    }
    crate::features::complete(&mut options.framework);
    let cluster = Arc::new(MemoryCluster::new());
    let clock = Arc::new(if paced {
        VirtualClock::paced()
    } else {
        VirtualClock::default()
    });
    let mut s = Scheduler::new(
        runtime,
        &Configuration::default(),
        "<default configuration>",
        &options,
        cluster,
        clock.clone(),
    )?;
    let label = label(w, size, mode);
    for ns in ["default", w.init_namespace, w.measure_namespace] {
        s.add_or_update_namespace(ns, Labels::new());
    }
    let mut names = Vec::with_capacity(size.nodes);
    for i in 0..size.nodes {
        let node = make_node(i, w.zones);
        names.push(node.name.clone());
        s.add_or_update_node(node);
    }
    if size.devices.per_node > 0 {
        let held = dra::install(
            &mut s,
            size,
            &names,
            &[w.init_namespace, w.measure_namespace],
            options.framework.seed,
        )?;
        progress(&format!(
            "{label}: {} devices on {} nodes, {held} held by claims",
            size.device_nodes() * size.devices.per_node,
            size.device_nodes(),
        ));
    }
    progress(&format!(
        "{label}: scheduling {} initial pods",
        size.init_pods
    ));
    let initial = (0..size.init_pods)
        .map(|i| {
            add(
                &mut s,
                make_pod(&init_template, w.init_namespace, "init", i)?,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    s.run_until_idle();

    // As upstream's `createPodGroups`: every PodGroup exists before its members.
    for i in 0..size.pod_groups() {
        s.add_or_update_pod_group(w.groups.object(w.measure_namespace, i, size.pods_per_group));
    }
    Ok((s, clock, initial))
}

/// Adds a pod as the embedded cluster has it: its claims made from their templates
/// first. Answers its uid.
fn add(s: &mut Scheduler, mut p: Pod) -> Result<String, BenchError> {
    dra::make_claims(s, &mut p)?;
    let uid = p.uid.clone();
    s.add_pod(p)?;
    Ok(uid)
}

/// A scheduler [`prepare`]d: its clock and the uids of the initial and measured pods.
struct Prepared {
    scheduler: Scheduler,
    clock: Arc<VirtualClock>,
    initial: Vec<String>,
    measured: Vec<String>,
}

/// [`setup`], then the measured pods added (not yet scheduled).
fn prepare(
    runtime: &Arc<Runtime>,
    w: &Workload,
    size: Size,
    mode: Mode,
    options: &SchedulerOptions,
    paced: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<Prepared, BenchError> {
    let measure_template = template(w.measure_template)?;
    let (mut s, clock, initial) = setup(runtime, w, size, mode, options, paced, progress)?;
    let label = label(w, size, mode);
    let adding = Instant::now();
    let measured = (0..size.measure_pods)
        .map(|i| add(&mut s, make_measured(w, &measure_template, size, i)?))
        .collect::<Result<Vec<_>, _>>()?;
    progress(&format!(
        "{label}: {} pods added in {:.2} s{}; measuring",
        size.measure_pods,
        adding.elapsed().as_secs_f64(),
        match size.pod_groups() {
            0 => String::new(),
            n => format!(" ({n} PodGroups of {})", size.pods_per_group),
        },
    ));
    Ok(Prepared {
        scheduler: s,
        clock,
        initial,
        measured,
    })
}

/// The measured pods of a steady state, as [`steady::run`] makes them.
fn steady_pods<'a>(
    w: &'a Workload,
    template: &'a PodTemplate,
    size: Size,
    label: &'a str,
) -> steady::Pods<'a> {
    steady::Pods {
        template,
        namespace: w.measure_namespace,
        prefix: w.measure_pod_name,
        pending: size.measure_pods,
        label,
    }
}

/// A steady state compared between two runs ([`placed`]) makes this many times its
/// pending pods, so that each pending place is taken again and again.
pub const STEADY_COMPARED_ROUNDS: usize = 10;

impl Size {
    /// The pods [`placed`] reports: the initial and measured ones; for a steady state
    /// the initial ones and [`STEADY_COMPARED_ROUNDS`] times its pending pods.
    pub fn placed_pods(&self) -> usize {
        match self.steady {
            None => self.init_pods + self.measure_pods,
            Some(_) => self.init_pods + STEADY_COMPARED_ROUNDS * self.measure_pods,
        }
    }
}

/// A pod of a run: where it landed and the devices its claims were given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The pod's UID.
    pub uid: String,
    /// Its node; `None` when it was left pending.
    pub node: Option<String>,
    /// The devices its claims were given (none without claims).
    pub devices: Vec<DeviceId>,
}

/// Where the pods of a run landed, and what was wrong with the devices the cluster's
/// claims held whenever they were looked at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placements {
    /// The pods, initial ones first ([`Size::placed_pods`] of them).
    pub pods: Vec<Placed>,
    /// For a DRA workload: a device held by two claims, or one that does not exist,
    /// each time it was seen (after the run; in a steady state, each time pods were
    /// seen bound). Empty when all is well.
    pub device_conflicts: Vec<String>,
}

/// Where every pod of a workload lands, with its devices: what the wasm and native
/// runs of the same seed must agree on. A steady state goes in lockstep here (every
/// pending pod scheduled and bound before the bound ones are replaced), so that two
/// runs see the same order, and stops after [`Size::placed_pods`].
pub fn placed(
    runtime: &Arc<Runtime>,
    w: &Workload,
    size: Size,
    mode: Mode,
    options: &SchedulerOptions,
) -> Result<Placements, BenchError> {
    let per_node = size.devices.per_node;
    let at = |s: &Scheduler, uid: &str| Placed {
        uid: uid.to_owned(),
        node: s.outcome(uid).and_then(|o| o.node.clone()),
        devices: s
            .pod(uid)
            .map(|p| dra::devices_of(s, p))
            .unwrap_or_default(),
    };
    if size.steady.is_none() {
        let Prepared {
            scheduler: mut s,
            initial,
            measured,
            ..
        } = prepare(runtime, w, size, mode, options, false, &mut |_| {})?;
        s.run_until_idle();
        let pods = initial
            .iter()
            .chain(&measured)
            .map(|uid| at(&s, uid))
            .collect();
        let device_conflicts = if per_node > 0 {
            dra::device_conflicts(&s, per_node)
        } else {
            Vec::new()
        };
        return Ok(Placements {
            pods,
            device_conflicts,
        });
    }
    let (mut s, clock, initial) = setup(runtime, w, size, mode, options, false, &mut |_| {})?;
    let mut pods: Vec<Placed> = initial.iter().map(|uid| at(&s, uid)).collect();
    let template = template(w.measure_template)?;
    let label = label(w, size, mode);
    let mut bound: Vec<Placed> = Vec::new();
    let mut device_conflicts = Vec::new();
    let run = steady::run(
        &mut s,
        &*clock,
        &steady_pods(w, &template, size, &label),
        steady::Until::Made(size.placed_pods() - size.init_pods),
        &mut |s, p, node| {
            bound.push(Placed {
                uid: p.uid.clone(),
                node: Some(node.to_owned()),
                devices: dra::devices_of(s, p),
            });
            device_conflicts.extend(dra::device_conflicts(s, per_node));
        },
        &mut |_| {},
    )?;
    // The pods made, in order: those never seen bound were left pending.
    for i in 0..run.made {
        let uid = pod_uid(w.measure_namespace, w.measure_pod_name, i);
        pods.push(match bound.iter().position(|b| b.uid == uid) {
            Some(k) => bound.swap_remove(k),
            None => Placed {
                uid,
                node: None,
                devices: Vec::new(),
            },
        });
    }
    Ok(Placements {
        pods,
        device_conflicts,
    })
}

/// Where every pod of a workload lands (uid and node, `None` when left pending),
/// initial pods first: [`placed`] without the devices.
pub fn placements(
    runtime: &Arc<Runtime>,
    w: &Workload,
    size: Size,
    mode: Mode,
    options: &SchedulerOptions,
) -> Result<Vec<(String, Option<String>)>, BenchError> {
    Ok(placed(runtime, w, size, mode, options)?
        .pods
        .into_iter()
        .map(|p| (p.uid, p.node))
        .collect())
}

/// Runs one workload at one size in one mode. `progress` receives a line now and
/// then.
pub fn run_one(
    runtime: &Arc<Runtime>,
    w: &Workload,
    size: Size,
    mode: Mode,
    options: &SchedulerOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<BenchResult, BenchError> {
    reset_peak_rss();
    let label = label(w, size, mode);
    let (seconds, peak, mut latencies, measured_pods, scheduled, batched) = match size.steady {
        None => measure_burst(runtime, w, size, mode, options, &label, progress)?,
        Some(duration) => {
            let (mut s, clock, _) = setup(runtime, w, size, mode, options, true, progress)?;
            let batched_before = batched_so_far(&s);
            let template = template(w.measure_template)?;
            progress(&format!(
                "{label}: {} pods pending at a time for {} s; measuring",
                size.measure_pods,
                duration.as_secs_f64()
            ));
            let start = Instant::now();
            let run = steady::run(
                &mut s,
                &*clock,
                &steady_pods(w, &template, size, &label),
                steady::Until::Elapsed(duration),
                &mut |_, _, _| {},
                progress,
            )?;
            let seconds = start.elapsed().as_secs_f64();
            let batched = batched_so_far(&s) - batched_before;
            (
                seconds,
                peak_rss_mib(),
                run.latencies,
                run.made,
                run.bound,
                batched,
            )
        }
    };
    latencies.sort_unstable();
    Ok(BenchResult {
        workload: w.name.to_owned(),
        size: w.names_sizes().then(|| size.name.to_owned()),
        nodes: size.nodes,
        init_pods: size.init_pods,
        measured_pods,
        mode,
        pods_per_second: if seconds > 0.0 {
            scheduled as f64 / seconds
        } else {
            0.0
        },
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        peak_rss_mib: peak,
        scheduled,
        batched,
        pod_groups: (size.pods_per_group > 0).then(|| size.pod_groups()),
        pods_per_group: (size.pods_per_group > 0).then_some(size.pods_per_group),
        devices_per_node: (size.devices.per_node > 0).then_some(size.devices.per_node),
        held_claims: (size.devices.per_node > 0).then(|| size.init_claims()),
        seconds,
        cores: cores(),
        wasm_over_native: None,
    })
}

/// Pods placed from a batch so far (measured before the scheduler is dropped, which
/// joins its threads).
fn batched_so_far(s: &Scheduler) -> u64 {
    s.metrics()
        .batch_attempts(crate::config::DEFAULT_SCHEDULER_NAME, "hint_used")
}

/// What one measurement found: seconds, peak RSS (MiB), each attempt's latency, the
/// pods measured, those scheduled, those placed from a batch.
type Measured = (f64, f64, Vec<Duration>, usize, usize, u64);

/// The measurement of a workload whose measured pods are made at once (with its
/// churn, if any, made beside the scheduler at the churn's pace).
fn measure_burst(
    runtime: &Arc<Runtime>,
    w: &Workload,
    size: Size,
    mode: Mode,
    options: &SchedulerOptions,
    label: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<Measured, BenchError> {
    let Prepared {
        scheduler: mut s,
        clock,
        measured,
        ..
    } = prepare(runtime, w, size, mode, options, true, progress)?;
    let batched_before = batched_so_far(&s);
    let churn = w
        .churn
        .map(|c| Ok::<_, BenchError>((template(c.template)?, c.every)))
        .transpose()?;
    let mut churned: u32 = 0;
    let preemptions_before = s.metrics().preemption_attempts();
    let mut latencies: Vec<Duration> = Vec::with_capacity(size.measure_pods);
    let start = Instant::now();
    let mut last_report = start;
    loop {
        if let Some((template, every)) = &churn {
            // Upstream's churn makes its pods beside the scheduler, at its
            // pace whatever the scheduler does: every pod due by now is made
            // before the next attempt.
            while start.elapsed() >= *every * churned {
                add(
                    &mut s,
                    make_pod(template, w.measure_namespace, "churn", churned as usize)?,
                )?;
                churned += 1;
            }
            // As the scheduler's own loop: results taken in, and pods whose
            // backoff ended (the preemptors, once their victims are gone)
            // back in activeQ. The churn comes at a wall-clock pace, so the
            // scheduler's clock follows the wall clock here.
            clock.catch_up();
            let now = crate::clock::Clock::now(&*clock);
            s.poll(now);
            s.flush_backoff(now);
        }
        let t = Instant::now();
        if !s.schedule_one() {
            break;
        }
        latencies.push(t.elapsed());
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = Instant::now();
            progress(&format!(
                "{label}: {} attempts{}, {:.1} s",
                latencies.len(),
                if churn.is_some() {
                    format!(" ({churned} churn pods made)")
                } else {
                    String::new()
                },
                start.elapsed().as_secs_f64()
            ));
        }
    }
    if churn.is_some() {
        progress(&format!(
            "{label}: {churned} churn pods made while measuring, {} preemption attempts",
            s.metrics().preemption_attempts() - preemptions_before
        ));
        // The binding cycles of the last pods; the churn's pods still
        // waiting (preemptors in backoff) are not what is measured.
        s.finish_in_flight(Duration::from_secs(60));
    } else {
        // Wait for the binding cycles still under way (and retry what can be
        // retried).
        s.run_until_idle();
    }
    let seconds = start.elapsed().as_secs_f64();
    let scheduled = measured
        .iter()
        .filter(|uid| s.outcome(uid).is_some_and(|o| o.node.is_some()))
        .count();
    Ok((
        seconds,
        peak_rss_mib(),
        latencies,
        size.measure_pods,
        scheduled,
        batched_so_far(&s) - batched_before,
    ))
}

/// Runs the chosen workloads; `progress` receives a line now and then.
pub fn run(
    runtime: &Arc<Runtime>,
    opts: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<BenchResult>, BenchError> {
    let mut chosen: Vec<(&Workload, &[Size])> = Vec::new();
    for name in &opts.workloads {
        chosen.push(find(name)?);
    }
    if chosen.is_empty() {
        chosen = WORKLOADS.iter().map(|w| (w, w.sizes)).collect();
    }
    let modes: Vec<Mode> = if opts.compare_native {
        vec![Mode::Wasm, Mode::Native]
    } else if opts.native {
        vec![Mode::Native]
    } else {
        vec![Mode::Wasm]
    };
    let mut out = Vec::new();
    for (w, sizes) in chosen {
        for size in sizes_among(sizes, opts) {
            let mut results = Vec::new();
            for &mode in &modes {
                results.push(run_one(runtime, w, size, mode, &opts.scheduler, progress)?);
            }
            if let [wasm, native] = results.as_mut_slice() {
                wasm.wasm_over_native = wasm_over_native(wasm, native);
            }
            out.extend(results);
        }
    }
    Ok(out)
}

/// Aligns rows under a header, two spaces apart: the columns in `left` to the left,
/// the others (numbers) to the right.
fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]], left: &[usize]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            if left.contains(&i) {
                s.push_str(&format!("{c:<w$}", w = widths[i]));
            } else {
                s.push_str(&format!("{c:>w$}", w = widths[i]));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// The results as an aligned table.
pub fn to_text(results: &[BenchResult]) -> String {
    let header = [
        "workload",
        "nodes",
        "init",
        "measured",
        "mode",
        "pods/s",
        "p50 ms",
        "p99 ms",
        "peak RSS MiB",
        "wasm/native",
        "groups",
        "devices",
        "batched",
    ];
    let rows: Vec<[String; 13]> = results
        .iter()
        .map(|r| {
            [
                r.workload.clone(),
                r.nodes.to_string(),
                r.init_pods.to_string(),
                format!("{}/{}", r.scheduled, r.measured_pods),
                r.mode.as_str().to_owned(),
                format!("{:.0}", r.pods_per_second),
                format!("{:.3}", r.p50_ms),
                format!("{:.3}", r.p99_ms),
                format!("{:.0}", r.peak_rss_mib),
                r.wasm_over_native
                    .map_or_else(String::new, |x| format!("{x:.2}")),
                match (r.pod_groups, r.pods_per_group) {
                    (Some(g), Some(p)) => format!("{g}x{p}"),
                    _ => String::new(),
                },
                match (r.devices_per_node, r.held_claims) {
                    (Some(d), Some(0) | None) => format!("{d}/node"),
                    (Some(d), Some(h)) => format!("{d}/node {h} held"),
                    _ => String::new(),
                },
                if r.batched > 0 {
                    r.batched.to_string()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    let mut out = table(&header, &rows, &[0, 4]);
    out.push_str(&format!("{} cores\n", cores()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_and_workloads_are_found() {
        for w in &WORKLOADS {
            template(w.init_template).unwrap();
            template(w.measure_template).unwrap();
            assert_eq!(workload(&w.name.to_lowercase()).unwrap().name, w.name);
        }
        let spread = parse_pod(POD_SPREAD).unwrap();
        assert_eq!(spread.topology_spread_constraints.len(), 1);
        let anti = parse_pod(POD_ANTI_AFFINITY).unwrap();
        assert_eq!(anti.affinity.pod_anti_affinity.required.len(), 1);
    }

    #[test]
    fn sizes_follow_the_options() {
        let w = workload("SchedulingBasic").unwrap();
        let all = sizes_for(w, &BenchOptions::default());
        assert_eq!(all.len(), 2);
        let one = sizes_for(
            w,
            &BenchOptions {
                nodes: Some(5000),
                ..BenchOptions::default()
            },
        );
        assert_eq!(one, vec![size("5000Nodes", 5000, 1000, 1000)]);
        let quick = sizes_for(
            w,
            &BenchOptions {
                quick: true,
                ..BenchOptions::default()
            },
        );
        assert_eq!(quick, vec![size("500Nodes", 100, 100, 200)]);
    }

    #[test]
    fn pod_group_workloads_have_upstreams_shapes_and_names() {
        let (gang, sizes) = find("GangScheduling/5000Nodes_1000Gangs_3000Pods").unwrap();
        assert_eq!(gang.name, "GangScheduling");
        assert_eq!(sizes.len(), 1);
        assert_eq!((sizes[0].nodes, sizes[0].init_pods), (5000, 0));
        assert_eq!((sizes[0].pod_groups(), sizes[0].pods_per_group), (1000, 3));
        let (_, big) = find("gangscheduling/5000nodes_10gangs_50000pods_5000pergroup").unwrap();
        assert_eq!((big[0].measure_pods, big[0].pod_groups()), (50000, 10));
        let (basic, _) = find("BasicScheduling").unwrap();
        assert_eq!(basic.sizes.len(), gang.sizes.len());
        for w in [gang, basic] {
            // The smallest first (the twins test runs it); the rest on 5000 nodes.
            assert_eq!(w.sizes[0].nodes, 100);
            assert!(w.sizes[1..].iter().all(|s| s.nodes == 5000), "{}", w.name);
            assert!(w.sizes.iter().all(
                |s| s.pods_per_group > 0 && s.measure_pods == s.pod_groups() * s.pods_per_group
            ));
        }
        // A gang's minCount is its size; a basic group has none.
        assert_eq!(
            Groups::Gang.object("gang-ns-0", 7, 3),
            PodGroupObject {
                namespace: "gang-ns-0".into(),
                name: "gang-7".into(),
                policy: PodGroupPolicy::Gang { min_count: 3 },
                topology_keys: Vec::new(),
                ..Default::default()
            }
        );
        assert_eq!(
            Groups::Basic.object("basic-ns-0", 0, 3).policy,
            PodGroupPolicy::Basic
        );
        // Pods 0 to 2 are gang-0's, 3 to 5 gang-1's.
        let member = template(POD_GROUP_MEMBER).unwrap();
        let size = sizes[0];
        let names: Vec<Option<String>> = (0..6)
            .map(|i| {
                make_measured(gang, &member, size, i)
                    .unwrap()
                    .scheduling_group
            })
            .collect();
        assert_eq!(
            names,
            ["gang-0", "gang-0", "gang-0", "gang-1", "gang-1", "gang-1"].map(|g| Some(g.into()))
        );
        let p = make_measured(gang, &member, size, 4).unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.name.as_str()),
            ("gang-ns-0", "test-gang-scheduling-4")
        );
        assert_eq!(p.requests().milli_cpu, 100);

        let err = find("GangScheduling/5000Nodes").unwrap_err().to_string();
        assert!(
            err.contains("has no size \"5000Nodes\"") && err.contains("100Nodes_10Gangs"),
            "{err}"
        );
        assert!(matches!(find("Gangs"), Err(BenchError::NoWorkload { .. })));
    }

    #[test]
    fn pod_group_sizes_measure_whole_groups() {
        let w = workload("GangScheduling").unwrap();
        let quick = sizes_for(
            w,
            &BenchOptions {
                quick: true,
                ..BenchOptions::default()
            },
        );
        // 100 nodes and 10 gangs of 3, divided by 5: 20 nodes, 2 gangs.
        assert_eq!(
            (quick[0].nodes, quick[0].measure_pods, quick[0].pod_groups()),
            (20, 6, 2)
        );
        let at_5000 = sizes_for(
            w,
            &BenchOptions {
                nodes: Some(5000),
                measure_pods: Some(1001),
                ..BenchOptions::default()
            },
        );
        assert_eq!(at_5000.len(), 7);
        // 1001 pods: rounded up to whole groups.
        assert_eq!(at_5000[0].measure_pods, 1002);
        assert_eq!(at_5000[3].measure_pods, 2000);
        assert_eq!(at_5000[6].measure_pods, 5000);
    }

    #[test]
    fn dra_workloads_run_their_fast_size_when_quick_and_name_their_sizes() {
        for name in [
            "SchedulingWithResourceClaimTemplate",
            "SteadyStateClusterResourceClaimTemplate",
            "SchedulingWithExtendedResource",
        ] {
            let w = workload(name).unwrap();
            let quick = sizes_for(
                w,
                &BenchOptions {
                    quick: true,
                    ..BenchOptions::default()
                },
            );
            // Two nodes, one with ten devices: quick already, run as it is.
            assert_eq!(quick, vec![w.sizes[0]], "{name}");
            assert_eq!((quick[0].nodes, quick[0].device_nodes()), (2, 1));
            assert_eq!(
                label(w, quick[0], Mode::Wasm),
                format!("{name}/fast 2 nodes wasm")
            );
        }
        let (_, sizes) = find("steadystateclusterresourceclaimtemplate/FULL_500nodes").unwrap();
        assert_eq!(sizes[0].name, "full_500nodes");
        // On other node counts the held claims follow the devices: all but ten.
        let at_120 = sizes_for(
            workload("SteadyStateClusterResourceClaimTemplate").unwrap(),
            &BenchOptions {
                nodes: Some(120),
                ..BenchOptions::default()
            },
        );
        let held: Vec<usize> = at_120.iter().map(Size::init_claims).collect();
        assert_eq!(held, [0, 600, 1190]);
        assert_eq!(
            label(
                workload("SchedulingBasic").unwrap(),
                size("5000Nodes", 5000, 0, 1),
                Mode::Native
            ),
            "SchedulingBasic 5000 nodes native"
        );
    }

    #[test]
    fn a_dra_pod_template_takes_one_claim_from_its_namespace_s_template() {
        let p = parse_pod(POD_WITH_CLAIM_TEMPLATE).unwrap();
        assert_eq!(p.resource_claims.len(), 1);
        assert_eq!(
            p.resource_claims[0].source,
            berth_sdk::ClaimSource::TemplateName("test-claim-template".into())
        );
        assert_eq!(p.requests().milli_cpu, 0);
    }

    #[test]
    fn an_extended_resource_pod_asks_for_the_resource_of_its_index() {
        let t = template(POD_WITH_EXTENDED_RESOURCE).unwrap();
        for (i, p) in [0, 1, 999].map(|i| (i, make_pod(&t, "test", "test-dra", i).unwrap())) {
            assert_eq!(p.name, format!("test-dra-{i}"));
            assert!(p.resource_claims.is_empty());
            let want = berth_sdk::ResourceList::from([(dra::extended_resource(i), 1)]);
            assert_eq!(p.containers[0].requests, want, "pod {i}");
            assert_eq!(p.requests().scalar, want, "pod {i}");
        }
        // A template without the index makes copies of one pod.
        let t = template(POD_DEFAULT).unwrap();
        assert!(!t.indexed);
        assert_eq!(
            make_pod(&t, "default", "p", 7).unwrap().requests(),
            make_pod(&t, "default", "p", 0).unwrap().requests()
        );
    }

    #[test]
    fn wasm_over_native_compares_time_per_measured_pod() {
        let result = |mode, measured_pods, seconds| BenchResult {
            workload: "W".into(),
            size: None,
            nodes: 2,
            init_pods: 0,
            measured_pods,
            mode,
            pods_per_second: measured_pods as f64 / seconds,
            p50_ms: 0.1,
            p99_ms: 0.2,
            peak_rss_mib: 1.0,
            scheduled: measured_pods,
            batched: 0,
            pod_groups: None,
            pods_per_group: None,
            devices_per_node: None,
            held_claims: None,
            seconds,
            cores: 2,
            wasm_over_native: None,
        };
        // The same pods: the wall times' ratio.
        let r = wasm_over_native(
            &result(Mode::Wasm, 1000, 2.0),
            &result(Mode::Native, 1000, 1.0),
        );
        assert_eq!(r, Some(2.0));
        // A steady state: both ran 10 s, native made three times the pods.
        let r = wasm_over_native(
            &result(Mode::Wasm, 1000, 10.0),
            &result(Mode::Native, 3000, 10.0),
        );
        assert_eq!(r, Some(3.0));
        assert_eq!(
            wasm_over_native(
                &result(Mode::Wasm, 1000, 1.0),
                &result(Mode::Native, 0, 1.0)
            ),
            None
        );
    }

    #[test]
    fn percentiles() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&d, 0.5), 50.0);
        assert_eq!(percentile(&d, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
