//! The Kubernetes objects a plugin reads, as plain Rust.
//!
//! These mirror the records of the WIT package: the host converts manifests and API
//! objects into them, and the guest side of the SDK converts the records it receives
//! into them, so a plugin sees the same types natively and in the sandbox.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use crate::affinity::*;

/// Resource name of CPU.
pub const CPU: &str = "cpu";
/// Resource name of memory.
pub const MEMORY: &str = "memory";
/// Resource name of ephemeral storage.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// Resource name of the pod count.
pub const PODS: &str = "pods";

/// Labels, annotations and node selectors: ordered, unique keys.
pub type Labels = BTreeMap<String, String>;

/// Quantities by resource name as a manifest writes them: CPU in millicores, memory
/// and storage in bytes, other resources in their own unit. Absent is not zero.
pub type ResourceList = BTreeMap<String, i64>;

/// Aggregated resource quantities, as kube-scheduler's `framework.Resource`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// How many pods fit (allocatable only).
    pub allowed_pod_number: i64,
    /// Extended and hugepages resources, by name.
    pub scalar: BTreeMap<String, i64>,
}

impl Resources {
    /// The requested resources with a quantity that a DeviceClass may back as an
    /// extended resource ([`is_dra_extended_resource_name`](crate::validation::is_dra_extended_resource_name)).
    pub fn dra_extended_requests(&self) -> impl Iterator<Item = (&String, i64)> {
        self.scalar
            .iter()
            .filter(|(name, q)| **q > 0 && crate::validation::is_dra_extended_resource_name(name))
            .map(|(name, q)| (name, *q))
    }

    /// Builds the aggregate from a resource list (`pods` goes to `allowed_pod_number`).
    pub fn from_list(list: &ResourceList) -> Self {
        let mut r = Resources::default();
        r.add_list(list);
        r
    }

    /// Adds every quantity of the list.
    pub fn add_list(&mut self, list: &ResourceList) {
        for (name, &q) in list {
            self.add_one(name, q);
        }
    }

    fn add_one(&mut self, name: &str, q: i64) {
        *self.quantity_mut(name) += q;
    }

    /// The quantity of one resource by name, to change (a scalar resource is added
    /// at 0 when absent).
    fn quantity_mut(&mut self, name: &str) -> &mut i64 {
        match name {
            CPU => &mut self.milli_cpu,
            MEMORY => &mut self.memory,
            EPHEMERAL_STORAGE => &mut self.ephemeral_storage,
            PODS => &mut self.allowed_pod_number,
            _ => self.scalar.entry(name.to_owned()).or_default(),
        }
    }

    /// Adds `other` to these quantities.
    pub fn add(&mut self, other: &Resources) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.allowed_pod_number += other.allowed_pod_number;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
    }

    /// Subtracts `other` from these quantities.
    pub fn sub(&mut self, other: &Resources) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.allowed_pod_number -= other.allowed_pod_number;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() -= v;
        }
        self.scalar.retain(|_, v| *v != 0);
    }

    /// Raises each quantity to at least `other`'s.
    pub fn max_with(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(other.allowed_pod_number);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    /// The quantity of one resource by name (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            _ => self.scalar.get(name).copied().unwrap_or(0),
        }
    }

    /// True when every quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.allowed_pod_number == 0
            && self.scalar.values().all(|v| *v == 0)
    }

    /// Sets one resource by name to `q`.
    pub fn set(&mut self, name: &str, q: i64) {
        *self.quantity_mut(name) = q;
    }
}

/// Whether pod-level resources (`spec.resources`) may set this resource: CPU, memory
/// and hugepages, as upstream's `IsSupportedPodLevelResource`.
pub fn is_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// The effect of a taint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// New pods that do not tolerate the taint are not scheduled.
    NoSchedule,
    /// The scheduler tries to avoid the node.
    PreferNoSchedule,
    /// Running pods that do not tolerate the taint are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The spelling of the Kubernetes API.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taint {
    /// The taint key.
    pub key: String,
    /// The taint value (may be empty).
    pub value: String,
    /// The taint effect.
    pub effect: TaintEffect,
}

/// How a toleration matches a taint's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// Key and value must be equal.
    Equal,
    /// The key must exist (any value).
    Exists,
}

/// A pod toleration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toleration {
    /// Empty with `Exists` tolerates every key.
    pub key: String,
    /// `Equal` or `Exists`.
    pub operator: TolerationOperator,
    /// Compared with `Equal`.
    pub value: String,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
    /// For `NoExecute`: how long the pod stays bound after the taint appears.
    pub toleration_seconds: Option<i64>,
}

impl Toleration {
    /// Whether this toleration tolerates the taint, as upstream's `ToleratesTaint`.
    #[inline]
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = self.effect
            && effect != taint.effect
        {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

/// Whether any toleration in the list tolerates the taint.
pub fn tolerations_tolerate_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// The first taint (of the effects `filter` accepts) that no toleration tolerates.
pub fn find_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| filter(t))
        .find(|t| !tolerations_tolerate_taint(tolerations, t))
}

/// A host port that a container asks for, or that a node has in use.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostPort {
    /// The host IP ("" or "0.0.0.0" means every address).
    pub host_ip: String,
    /// "TCP", "UDP" or "SCTP".
    pub protocol: String,
    /// The port number.
    pub port: i32,
}

/// A container of a pod, as far as scheduling reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    /// The container name.
    pub name: String,
    /// The image reference.
    pub image: String,
    /// Resource requests.
    pub requests: ResourceList,
    /// Host ports.
    pub ports: Vec<HostPort>,
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub restartable: bool,
    /// From the container's status: `allocatedResources`, what the kubelet admitted
    /// (an in-place resize changes it); `None` when the status has none.
    #[serde(default)]
    pub allocated: Option<ResourceList>,
    /// From the container's status: `resources.requests`, what the container runs
    /// with now; `None` when the status has none.
    #[serde(default)]
    pub actuated: Option<ResourceList>,
    /// The `action` of each of `restartPolicyRules`, in order.
    #[serde(default)]
    pub restart_policy_rule_actions: Vec<String>,
    /// `volumeMounts`, as far as scheduling reads them.
    #[serde(default)]
    pub volume_mounts: Vec<VolumeMount>,
}

/// An entry of a container's `volumeMounts`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeMount {
    /// The volume's name.
    pub name: String,
    /// `bindMountOptions`; empty when unset.
    #[serde(default)]
    pub bind_mount_options: Vec<String>,
}

/// Which device request of a pod's extended-resource claim serves which resource of
/// which container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerExtendedResourceRequest {
    /// The container.
    pub container_name: String,
    /// The extended resource it requests.
    pub resource_name: String,
    /// The request of the claim that serves it.
    pub request_name: String,
}

/// `status.extendedResourceClaimStatus`: the claim the scheduler made for the pod's
/// DRA-backed extended resources.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodExtendedResourceClaimStatus {
    /// The claim's name.
    pub resource_claim_name: String,
    /// Which request serves which container's resource.
    pub request_mappings: Vec<ContainerExtendedResourceRequest>,
}

/// Requests and limits: pod-level resources (`spec.resources`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRequirements {
    /// Requests.
    pub requests: ResourceList,
    /// Limits.
    pub limits: ResourceList,
}

/// Where a pod's ResourceClaim comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClaimSource {
    /// `resourceClaimName`: an existing claim of the pod's namespace.
    ClaimName(String),
    /// `resourceClaimTemplateName`: a claim made for the pod from this template.
    TemplateName(String),
}

/// An entry of `spec.resourceClaims`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodResourceClaim {
    /// The name the pod's containers use for the claim.
    pub name: String,
    /// Where the claim comes from.
    pub source: ClaimSource,
}

/// An entry of `status.resourceClaimStatuses`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodResourceClaimStatus {
    /// The entry of `spec.resourceClaims` it is about.
    pub name: String,
    /// The claim made for the pod from the template; `None` when it needs none.
    pub resource_claim_name: Option<String>,
}

/// `spec.preemptionPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreemptionPolicy {
    /// The pod may preempt pods of lower priority (the default).
    #[default]
    PreemptLowerPriority,
    /// The pod never preempts.
    Never,
}

/// A pod, as far as scheduling reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    /// The pod's UID.
    pub uid: String,
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// The resolved priority (0 when none).
    pub priority: i32,
    /// The scheduler that should place the pod.
    pub scheduler_name: String,
    /// The node the pod is bound to; empty when pending.
    pub node_name: String,
    /// The node the pod was nominated to by preemption; empty when none.
    pub nominated_node_name: String,
    /// Containers.
    pub containers: Vec<Container>,
    /// Init containers, in order.
    pub init_containers: Vec<Container>,
    /// The runtime class's pod overhead.
    pub overhead: ResourceList,
    /// `spec.nodeSelector`.
    pub node_selector: Labels,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// `spec.schedulingGates` by name.
    pub scheduling_gates: Vec<String>,
    /// The pod has a deletion timestamp.
    pub terminating: bool,
    /// The pod has a `DisruptionTarget` condition with reason `PreemptionByScheduler`:
    /// a scheduler preempted it.
    pub preempted: bool,
    /// `spec.preemptionPolicy`.
    pub preemption_policy: PreemptionPolicy,
    /// `status.startTime`, in milliseconds since the Unix epoch; `None` before the
    /// pod starts.
    pub start_time_ms: Option<i64>,
    /// `spec.affinity`.
    pub affinity: Affinity,
    /// `spec.topologySpreadConstraints`.
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// The merged selectors of the Services, ReplicaSets and StatefulSets that select
    /// the pod (upstream's `DefaultSelector`), filled in by the host; `None` when
    /// nothing selects it. PodTopologySpread's default constraints use it.
    pub default_selector: Option<LabelSelector>,
    /// `spec.volumes`, as far as scheduling reads them.
    pub volumes: Vec<crate::volumes::Volume>,
    /// `spec.resources`: pod-level requests and limits; `None` when unset.
    #[serde(default)]
    pub resources: Option<ResourceRequirements>,
    /// The pod has a `PodResizePending` condition with reason `Infeasible`: the
    /// kubelet will not resize it as its spec asks.
    #[serde(default)]
    pub resize_infeasible: bool,
    /// `spec.resourceClaims`.
    #[serde(default)]
    pub resource_claims: Vec<PodResourceClaim>,
    /// `status.resourceClaimStatuses`.
    #[serde(default)]
    pub resource_claim_statuses: Vec<PodResourceClaimStatus>,
    /// `spec.schedulingGroup.podGroupName`: the pod group the pod belongs to.
    #[serde(default)]
    pub scheduling_group: Option<String>,
    /// `spec.hostNetwork`.
    #[serde(default)]
    pub host_network: bool,
    /// `spec.hostUsers`; `None` when unset.
    #[serde(default)]
    pub host_users: Option<bool>,
    /// `spec.ephemeralContainers` (they request nothing; what the declared-features
    /// inference reads is filled).
    #[serde(default)]
    pub ephemeral_containers: Vec<Container>,
    /// `status.extendedResourceClaimStatus`; `None` before the pod has one.
    #[serde(default)]
    pub extended_resource_claim_status: Option<PodExtendedResourceClaimStatus>,
}

impl Pod {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The `status.resourceClaimStatuses` entry of the `spec.resourceClaims` entry
    /// named `entry`: where the claim made from its template is recorded (its
    /// `resource_claim_name` is `None` when no claim is needed). `None` before the
    /// claim is made.
    pub fn resource_claim_status(&self, entry: &str) -> Option<&PodResourceClaimStatus> {
        self.resource_claim_statuses
            .iter()
            .find(|s| s.name == entry)
    }

    /// The pod that stands for a PodGroup before a QueueSort plugin. The scheduling
    /// queue holds pod groups as wholes, as kube-scheduler's does (its QueueSort
    /// compares entities: a pod, or a pod group), and keys a group by asking the
    /// QueueSort plugin the key of this pod: the group's namespace and name, the
    /// PodGroup's priority (`spec.priority`, its members' own do not count), its
    /// `scheduling_group` naming the group itself, and no UID, no containers.
    /// [`Pod::stands_for_pod_group`] tells it from a real pod.
    pub fn standing_for_pod_group(namespace: &str, name: &str, priority: i32) -> Pod {
        Pod {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            priority,
            scheduling_group: Some(name.to_owned()),
            ..Pod::default()
        }
    }

    /// Whether this pod stands for a PodGroup (see [`Pod::standing_for_pod_group`]):
    /// no UID, and a scheduling group of its own name.
    pub fn stands_for_pod_group(&self) -> bool {
        self.uid.is_empty() && self.scheduling_group.as_deref() == Some(self.name.as_str())
    }

    /// The pod's effective requests, as upstream's `PodRequests` with the status
    /// resources of in-place resize and pod-level resources counted: the sum of its
    /// containers, raised to what any init container needs at its turn (sidecars keep
    /// running); while a resize is under way, the largest of what the spec asks, what
    /// the kubelet allocated and what the containers run with (only the last two when
    /// the resize is infeasible); the pod-level requests of CPU, memory and hugepages
    /// in place of the containers' sum; plus the overhead. `default_missing` gives a
    /// quantity to containers that request none of a resource (used by scoring's
    /// non-zero requests).
    pub fn requests_with(&self, default_missing: &[(&str, i64)]) -> Resources {
        let infeasible = self.resize_infeasible;
        let spec = self.aggregate_containers(default_missing, |c| Some(&c.requests));
        let status_says = self
            .containers
            .iter()
            .chain(&self.init_containers)
            .any(|c| c.allocated.is_some() || c.actuated.is_some());
        // Without status resources, allocated and actuated are the spec's.
        let mut reqs = if !status_says && !infeasible {
            spec
        } else {
            let allocated = self.aggregate_containers(default_missing, |c| {
                c.allocated
                    .as_ref()
                    .or((!infeasible).then_some(&c.requests))
            });
            let actuated = self.aggregate_containers(default_missing, |c| {
                c.actuated
                    .as_ref()
                    .or(c.allocated.as_ref())
                    .or((!infeasible).then_some(&c.requests))
            });
            let mut r = actuated;
            r.max_with(&allocated);
            if !infeasible {
                r.max_with(&spec);
            }
            r
        };
        if let Some(pod_level) = &self.resources {
            for (name, &q) in &pod_level.requests {
                if is_pod_level_resource(name) {
                    reqs.set(name, q);
                }
            }
        }
        reqs.add_list(&self.overhead);
        reqs
    }

    /// What the containers ask for together by their spec (upstream's
    /// `AggregateContainerRequests` without status resources): neither pod-level
    /// resources nor the overhead.
    pub fn container_requests(&self) -> Resources {
        self.aggregate_containers(&[], |c| Some(&c.requests))
    }

    /// What the containers request, each container's list chosen by `list` (`None`:
    /// it counts for nothing), with `default_missing` for a resource a container's
    /// list lacks: the containers' sum, raised to what any init container needs at
    /// its turn (sidecars keep running), as upstream's container aggregation.
    fn aggregate_containers<'a>(
        &'a self,
        default_missing: &[(&str, i64)],
        list: impl Fn(&'a Container) -> Option<&'a ResourceList>,
    ) -> Resources {
        let container_requests = |c: &'a Container| {
            let l = list(c);
            let mut r = l.map(Resources::from_list).unwrap_or_default();
            for (name, q) in default_missing {
                if !l.is_some_and(|l| l.contains_key(*name)) {
                    r.add_list(&ResourceList::from([((*name).to_owned(), *q)]));
                }
            }
            r
        };
        let mut reqs = Resources::default();
        for c in &self.containers {
            reqs.add(&container_requests(c));
        }
        let mut sidecars = Resources::default();
        let mut init_max = Resources::default();
        for c in &self.init_containers {
            let r = container_requests(c);
            let at_turn = if c.restartable {
                reqs.add(&r);
                sidecars.add(&r);
                sidecars.clone()
            } else {
                let mut t = r;
                t.add(&sidecars);
                t
            };
            init_max.max_with(&at_turn);
        }
        reqs.max_with(&init_max);
        reqs
    }

    /// The pod's effective requests (see [`Pod::requests_with`]).
    pub fn requests(&self) -> Resources {
        self.requests_with(&[])
    }

    /// Requests with upstream's defaults for containers that request no CPU (100m)
    /// or memory (200 MiB), as scoring uses them.
    pub fn non_zero_requests(&self) -> Resources {
        self.requests_with(&[
            (CPU, DEFAULT_MILLI_CPU_REQUEST),
            (MEMORY, DEFAULT_MEMORY_REQUEST),
        ])
    }

    /// Every host port of the pod's containers (init containers included).
    pub fn host_ports(&self) -> impl Iterator<Item = &HostPort> {
        self.init_containers
            .iter()
            .chain(&self.containers)
            .flat_map(|c| c.ports.iter())
            .filter(|p| p.port > 0)
    }

    /// The host ports the pod holds while it runs, as upstream's `GetHostPorts`: those
    /// of its containers and of its sidecars (init containers with `restartPolicy:
    /// Always`). Plain init containers have exited before the containers start, so
    /// their ports do not stay taken. What NodePorts checks for the pod it places.
    pub fn running_host_ports(&self) -> impl Iterator<Item = &HostPort> {
        self.init_containers
            .iter()
            .filter(|c| c.restartable)
            .chain(&self.containers)
            .flat_map(|c| c.ports.iter())
            .filter(|p| p.port > 0)
    }
}

/// CPU that scoring assumes for a container that requests none (millicores).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory that scoring assumes for a container that requests none (bytes).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A container image present on a node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageState {
    /// The names (tags and digests) of the image.
    pub names: Vec<String>,
    /// Its size in bytes.
    pub size_bytes: i64,
    /// How many nodes of the cluster have this image (filled in by the host).
    pub num_nodes: u32,
}

/// A node, as far as scheduling reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// The node name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// Taints.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `status.allocatable`.
    pub allocatable: Resources,
    /// `status.images`.
    pub images: Vec<ImageState>,
    /// `status.declaredFeatures`: the features the node's kubelet says it has.
    #[serde(default)]
    pub declared_features: Vec<String>,
}

/// A node with the sum of what its pods (bound and assumed) request.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node.
    pub node: Node,
    /// Sum of the pods' effective requests.
    pub requested: Resources,
    /// Sum of the pods' non-zero requests (see [`Pod::non_zero_requests`]).
    pub non_zero_requested: Resources,
    /// How many pods are on the node.
    pub pod_count: u32,
    /// Host ports in use.
    pub used_ports: Vec<HostPort>,
    /// The pods on the node (bound and assumed). Sent to a plugin's replica only when
    /// the plugin asks for pods ([`Plugin::WANTS_PODS`](crate::Plugin::WANTS_PODS));
    /// empty otherwise.
    pub pods: Vec<Pod>,
    /// This state of the node in the plugin's view of the cluster: a replica gives
    /// the node a new stamp, never given before, whenever the node or its pods change.
    /// While a node keeps its stamp, what a plugin computed from it still holds (see
    /// [`DomainMemo`](crate::DomainMemo)). 0 is no stamp (a node built by hand, or a
    /// what-if copy): nothing may be kept for it. Not part of equality.
    #[serde(skip)]
    pub stamp: u64,
}

impl PartialEq for NodeInfo {
    fn eq(&self, other: &Self) -> bool {
        // `stamp` names a version, it is not part of the node's content.
        let NodeInfo {
            node,
            requested,
            non_zero_requested,
            pod_count,
            used_ports,
            pods,
            stamp: _,
        } = self;
        *node == other.node
            && *requested == other.requested
            && *non_zero_requested == other.non_zero_requested
            && *pod_count == other.pod_count
            && *used_ports == other.used_ports
            && *pods == other.pods
    }
}

impl Eq for NodeInfo {}

impl NodeInfo {
    /// A node with no pods.
    pub fn new(node: Node) -> Self {
        NodeInfo {
            node,
            ..NodeInfo::default()
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.node.name
    }

    /// Counts a pod on this node.
    pub fn add_pod(&mut self, pod: &Pod) {
        self.requested.add(&pod.requests());
        self.non_zero_requested.add(&pod.non_zero_requests());
        self.pod_count += 1;
        self.used_ports.extend(pod.host_ports().cloned());
        self.pods.push(pod.clone());
    }

    /// Stops counting a pod on this node.
    pub fn remove_pod(&mut self, pod: &Pod) {
        self.requested.sub(&pod.requests());
        self.non_zero_requested.sub(&pod.non_zero_requests());
        self.pod_count = self.pod_count.saturating_sub(1);
        for p in pod.host_ports() {
            if let Some(i) = self.used_ports.iter().position(|u| u == p) {
                self.used_ports.swap_remove(i);
            }
        }
        if let Some(i) = self.pods.iter().position(|p| p.uid == pod.uid) {
            self.pods.remove(i);
        }
    }

    /// How the pods of `self` differ from those of `old`, the same node earlier: the
    /// UIDs of `old`'s pods to drop and the pods to append, such that
    /// [`NodeInfo::apply_pods_change`] turns `old`'s list into `self`'s, order
    /// included. The longest prefix of `self`'s pods found unchanged, in order, among
    /// `old`'s is kept; a pod added to a node goes to the end of its list, so usually
    /// only the pods that came and went cross the sandbox.
    pub fn pods_change_since<'a>(&'a self, old: &'a NodeInfo) -> (Vec<&'a str>, &'a [Pod]) {
        let mut kept = vec![false; old.pods.len()];
        let mut from = 0;
        let mut matched = 0;
        for pod in &self.pods {
            match old.pods[from..].iter().position(|o| o.uid == pod.uid) {
                Some(at) if old.pods[from + at] == *pod => {
                    kept[from + at] = true;
                    from += at + 1;
                    matched += 1;
                }
                _ => break,
            }
        }
        let removed = old
            .pods
            .iter()
            .zip(&kept)
            .filter(|(_, k)| !**k)
            .map(|(p, _)| p.uid.as_str())
            .collect();
        (removed, &self.pods[matched..])
    }

    /// Drops the pods with these UIDs and appends `added` (see
    /// [`NodeInfo::pods_change_since`]).
    pub fn apply_pods_change(&mut self, removed: &[String], added: impl IntoIterator<Item = Pod>) {
        if !removed.is_empty() {
            self.pods.retain(|p| !removed.contains(&p.uid));
        }
        self.pods.extend(added);
    }
}

/// A status code, as kube-scheduler's `framework.Code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Code {
    /// The plugin ran and the pod may proceed.
    Success,
    /// An internal error; the pod is retried with backoff.
    Error,
    /// The pod does not fit now; preemption may help.
    Unschedulable,
    /// The pod does not fit and preemption cannot help.
    UnschedulableAndUnresolvable,
    /// Permit only: the pod waits.
    Wait,
    /// The plugin has nothing to do for this pod.
    Skip,
    /// The pod waits for something outside the scheduler.
    Pending,
}

impl Code {
    /// The spelling kube-scheduler uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Error => "Error",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Wait => "Wait",
            Code::Skip => "Skip",
            Code::Pending => "Pending",
        }
    }
}

/// The answer of an extension point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The code.
    pub code: Code,
    /// Reasons, e.g. "Insufficient cpu".
    pub reasons: Vec<String>,
}

impl Status {
    /// Success, no reasons.
    pub fn success() -> Self {
        Status::new(Code::Success, Vec::new())
    }
    /// Skip, no reasons.
    pub fn skip() -> Self {
        Status::new(Code::Skip, Vec::new())
    }
    /// A status with a code and reasons.
    pub fn new(code: Code, reasons: Vec<String>) -> Self {
        Status { code, reasons }
    }
    /// Unschedulable with one reason.
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Status::new(Code::Unschedulable, vec![reason.into()])
    }
    /// UnschedulableAndUnresolvable with one reason.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Status::new(Code::UnschedulableAndUnresolvable, vec![reason.into()])
    }
    /// Error with a message.
    pub fn error(message: impl Into<String>) -> Self {
        Status::new(Code::Error, vec![message.into()])
    }
    /// Whether the code is Success.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }
    /// Whether the code is Unschedulable or UnschedulableAndUnresolvable.
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable
        )
    }
    /// The reasons joined by ", ".
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

/// Something a pod has, which a plugin may need before it has anything to do with the
/// pod ([`Plugin::only_for_pods_with`](crate::Plugin::only_for_pods_with)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PodFeature {
    /// At least one entry in `spec.volumes`.
    Volumes,
    /// At least one container port (of any container, init containers too) with a
    /// host port.
    HostPorts,
    /// A node selector with at least one entry, or node affinity with a required
    /// selector or preferred terms.
    NodeAffinity,
    /// Pod affinity or anti-affinity terms of the pod's own, or, while any pod in the
    /// cluster has such terms (upstream's `PodsWithAffinity`), every pod.
    PodAffinity,
    /// At least one topology spread constraint.
    TopologySpread,
    /// A non-empty [`Pod::default_selector`]: a Service, ReplicationController,
    /// ReplicaSet or StatefulSet selects the pod.
    DefaultSelector,
    /// At least one entry in `spec.resourceClaims`, or a request (of a container or
    /// of the pod) for an extended resource a DeviceClass may back
    /// ([`is_dra_extended_resource_name`](crate::validation::is_dra_extended_resource_name)).
    ResourceClaims,
}

impl PodFeature {
    /// The feature as WIT names it (`volumes`, `host-ports`, `node-affinity`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            PodFeature::Volumes => "volumes",
            PodFeature::HostPorts => "host-ports",
            PodFeature::NodeAffinity => "node-affinity",
            PodFeature::PodAffinity => "pod-affinity",
            PodFeature::TopologySpread => "topology-spread",
            PodFeature::DefaultSelector => "default-selector",
            PodFeature::ResourceClaims => "resource-claims",
        }
    }

    /// Whether `pod` has this feature; `cluster_has_affinity` says whether a pod in
    /// the cluster has pod affinity or anti-affinity terms (which gives every pod
    /// [`PodFeature::PodAffinity`]).
    pub fn of(self, pod: &Pod, cluster_has_affinity: bool) -> bool {
        let affinity = &pod.affinity;
        match self {
            PodFeature::Volumes => !pod.volumes.is_empty(),
            PodFeature::HostPorts => pod.host_ports().next().is_some(),
            PodFeature::NodeAffinity => {
                !pod.node_selector.is_empty()
                    || affinity
                        .node_affinity
                        .as_ref()
                        .is_some_and(|n| n.required.is_some() || !n.preferred.is_empty())
            }
            PodFeature::PodAffinity => {
                cluster_has_affinity
                    || !affinity.pod_affinity.is_empty()
                    || !affinity.pod_anti_affinity.is_empty()
            }
            PodFeature::TopologySpread => !pod.topology_spread_constraints.is_empty(),
            PodFeature::DefaultSelector => {
                pod.default_selector.as_ref().is_some_and(|s| !s.is_empty())
            }
            PodFeature::ResourceClaims => {
                !pod.resource_claims.is_empty()
                    || pod
                        .containers
                        .iter()
                        .chain(&pod.init_containers)
                        .flat_map(|c| c.requests.keys())
                        .chain(pod.resources.iter().flat_map(|r| r.requests.keys()))
                        .any(|name| crate::validation::is_dra_extended_resource_name(name))
            }
        }
    }

    /// Whether a plugin that declares `features` takes part in `pod`'s cycles: always
    /// when it declares none, else when the pod has one of them (see [`PodFeature::of`]
    /// for `cluster_has_affinity`).
    pub fn takes_part(features: &[PodFeature], pod: &Pod, cluster_has_affinity: bool) -> bool {
        features.is_empty() || features.iter().any(|f| f.of(pod, cluster_has_affinity))
    }
}

pub use crate::points::ExtensionPoint;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_features_come_from_the_pod_and_pod_affinity_from_the_cluster_too() {
        use crate::affinity::{LabelSelector, PodAffinityTerm};
        use PodFeature::*;
        let all = [
            Volumes,
            HostPorts,
            NodeAffinity,
            PodAffinity,
            TopologySpread,
            DefaultSelector,
            ResourceClaims,
        ];
        let plain = Pod::default();
        for f in all {
            assert!(!f.of(&plain, false), "{f:?}");
        }
        assert!(
            PodAffinity.of(&plain, true),
            "an affinity pod in the cluster"
        );
        assert!(PodFeature::takes_part(&[], &plain, false));
        assert!(!PodFeature::takes_part(
            &[NodeAffinity, TopologySpread],
            &plain,
            true
        ));

        let mut p = plain.clone();
        p.node_selector.insert("zone".into(), "a".into());
        assert!(NodeAffinity.of(&p, false));
        // Node affinity with neither a required selector nor preferred terms is none.
        let mut p = plain.clone();
        p.affinity.node_affinity = Some(crate::affinity::NodeAffinity::default());
        assert!(!NodeAffinity.of(&p, false));
        // A required selector with no terms matches no node: it counts.
        p.affinity.node_affinity = Some(crate::affinity::NodeAffinity {
            required: Some(Vec::new()),
            preferred: Vec::new(),
        });
        assert!(NodeAffinity.of(&p, false));

        let mut p = plain.clone();
        p.affinity
            .pod_anti_affinity
            .required
            .push(PodAffinityTerm::default());
        assert!(PodAffinity.of(&p, false));
        assert!(PodFeature::takes_part(
            &[NodeAffinity, PodAffinity],
            &p,
            false
        ));

        let mut p = plain.clone();
        p.default_selector = Some(LabelSelector::default());
        assert!(
            !DefaultSelector.of(&p, false),
            "an empty selector selects nothing"
        );
        p.default_selector = Some(LabelSelector {
            match_labels: [("app".to_owned(), "web".to_owned())].into(),
            match_expressions: Vec::new(),
        });
        assert!(DefaultSelector.of(&p, false));
    }

    fn pod_named(uid: &str, cpu: i64) -> Pod {
        Pod {
            uid: uid.into(),
            name: uid.into(),
            containers: vec![container(Some(cpu), None)],
            ..Pod::default()
        }
    }

    /// Replays a pods change on `old` and checks it gives `new`'s pods, and that it
    /// sends no more than `most` pods.
    fn round_trip(old: &NodeInfo, new: &NodeInfo, most: usize) {
        let (removed, added) = new.pods_change_since(old);
        assert!(added.len() <= most, "sent {} pods", added.len());
        let removed: Vec<String> = removed.into_iter().map(str::to_owned).collect();
        let mut replica = old.clone();
        replica.apply_pods_change(&removed, added.iter().cloned());
        assert_eq!(replica.pods, new.pods);
    }

    #[test]
    fn a_pods_change_carries_what_came_and_went_and_keeps_the_order() {
        let mut old = NodeInfo::default();
        for (i, uid) in ["a", "b", "c", "d"].iter().enumerate() {
            old.add_pod(&pod_named(uid, 100 * (i as i64 + 1)));
        }
        // Nothing changed.
        round_trip(&old, &old.clone(), 0);
        // One pod added: only it crosses.
        let mut new = old.clone();
        new.add_pod(&pod_named("e", 10));
        round_trip(&old, &new, 1);
        // One removed from the middle, one added.
        let mut new = old.clone();
        new.remove_pod(&pod_named("b", 200));
        new.add_pod(&pod_named("e", 10));
        round_trip(&old, &new, 1);
        // An assumed pod confirmed by the cluster moves to the end of the list.
        let mut new = old.clone();
        new.remove_pod(&pod_named("a", 100));
        new.add_pod(&pod_named("a", 100));
        round_trip(&old, &new, 1);
        // A pod changed in place (same UID) is sent again.
        let mut new = old.clone();
        new.pods[2].labels.insert("k".into(), "v".into());
        round_trip(&old, &new, 2);
        // Every pod gone.
        round_trip(&old, &NodeInfo::default(), 0);
        // From nothing.
        round_trip(&NodeInfo::default(), &old, 4);
    }

    fn container(cpu: Option<i64>, mem: Option<i64>) -> Container {
        let mut requests = ResourceList::new();
        if let Some(c) = cpu {
            requests.insert(CPU.into(), c);
        }
        if let Some(m) = mem {
            requests.insert(MEMORY.into(), m);
        }
        Container {
            requests,
            ..Container::default()
        }
    }

    #[test]
    fn requests_take_init_containers_and_sidecars_into_account() {
        let mut pod = Pod {
            containers: vec![container(Some(100), Some(10)), container(Some(200), None)],
            ..Pod::default()
        };
        assert_eq!(pod.requests().milli_cpu, 300);
        // A plain init container bigger than the sum wins.
        pod.init_containers = vec![container(Some(500), Some(5))];
        assert_eq!(pod.requests().milli_cpu, 500);
        assert_eq!(pod.requests().memory, 10);
        // A sidecar adds to the containers and to every later init container.
        let mut sidecar = container(Some(50), None);
        sidecar.restartable = true;
        pod.init_containers = vec![sidecar, container(Some(400), None)];
        assert_eq!(pod.requests().milli_cpu, 450);
        pod.overhead.insert(CPU.into(), 10);
        assert_eq!(pod.requests().milli_cpu, 460);
    }

    #[test]
    fn non_zero_requests_fill_only_missing_quantities() {
        let pod = Pod {
            containers: vec![container(None, None), container(Some(0), Some(0))],
            ..Pod::default()
        };
        let r = pod.non_zero_requests();
        assert_eq!(r.milli_cpu, DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(r.memory, DEFAULT_MEMORY_REQUEST);
        assert!(pod.requests().is_zero());
    }

    #[test]
    fn tolerations_match_as_upstream() {
        let taint = Taint {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: TaintEffect::NoSchedule,
        };
        let tol = |key: &str, op, value: &str, effect| Toleration {
            key: key.into(),
            operator: op,
            value: value.into(),
            effect,
            toleration_seconds: None,
        };
        use TolerationOperator::*;
        assert!(tol("dedicated", Equal, "gpu", None).tolerates(&taint));
        assert!(tol("dedicated", Exists, "", Some(TaintEffect::NoSchedule)).tolerates(&taint));
        assert!(tol("", Exists, "", None).tolerates(&taint));
        assert!(!tol("dedicated", Equal, "cpu", None).tolerates(&taint));
        assert!(!tol("dedicated", Exists, "", Some(TaintEffect::NoExecute)).tolerates(&taint));
        assert!(!tol("other", Exists, "", None).tolerates(&taint));
    }

    #[test]
    fn node_info_adds_and_removes_pods() {
        let pod = Pod {
            containers: vec![Container {
                ports: vec![HostPort {
                    host_ip: String::new(),
                    protocol: "TCP".into(),
                    port: 80,
                }],
                ..container(Some(100), Some(1 << 20))
            }],
            ..Pod::default()
        };
        let mut info = NodeInfo::new(Node::default());
        info.add_pod(&pod);
        assert_eq!(info.requested.milli_cpu, 100);
        assert_eq!(info.used_ports.len(), 1);
        assert_eq!(info.pod_count, 1);
        info.remove_pod(&pod);
        assert!(info.requested.is_zero());
        assert!(info.non_zero_requested.is_zero());
        assert!(info.used_ports.is_empty());
        assert_eq!(info.pod_count, 0);
    }

    fn list(items: &[(&str, i64)]) -> ResourceList {
        items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn pod_level_requests_stand_for_the_containers_cpu_memory_and_hugepages() {
        let mut p = Pod {
            containers: vec![
                Container {
                    requests: list(&[(CPU, 100), (MEMORY, 1000), ("example.com/gpu", 1)]),
                    ..Container::default()
                },
                container(Some(200), None),
            ],
            overhead: list(&[(CPU, 10)]),
            ..Pod::default()
        };
        assert_eq!(p.requests().milli_cpu, 310);
        p.resources = Some(ResourceRequirements {
            requests: list(&[(CPU, 1000), ("hugepages-2Mi", 4)]),
            limits: ResourceList::new(),
        });
        let r = p.requests();
        // CPU is the pod's, memory and the GPU the containers', the overhead on top.
        assert_eq!(r.milli_cpu, 1010);
        assert_eq!(r.memory, 1000);
        assert_eq!(r.get("example.com/gpu"), 1);
        assert_eq!(r.get("hugepages-2Mi"), 4);
        // Scoring's defaults fill the containers' missing memory; the pod-level CPU
        // still stands.
        let n = p.non_zero_requests();
        assert_eq!(n.milli_cpu, 1010);
        assert_eq!(n.memory, 1000 + DEFAULT_MEMORY_REQUEST);
        // Limits alone change nothing.
        p.resources = Some(ResourceRequirements {
            requests: ResourceList::new(),
            limits: list(&[(CPU, 5000)]),
        });
        assert_eq!(p.requests().milli_cpu, 310);
    }

    #[test]
    fn a_resize_counts_the_largest_of_spec_allocated_and_actuated() {
        let resized = |spec: i64, allocated: Option<i64>, actuated: Option<i64>| Pod {
            containers: vec![Container {
                requests: list(&[(CPU, spec)]),
                allocated: allocated.map(|a| list(&[(CPU, a)])),
                actuated: actuated.map(|a| list(&[(CPU, a)])),
                ..Container::default()
            }],
            ..Pod::default()
        };
        // Growing: the spec asks more than runs.
        assert_eq!(
            resized(1000, Some(500), Some(500)).requests().milli_cpu,
            1000
        );
        // Shrinking: the kubelet still holds the larger size.
        assert_eq!(resized(200, Some(500), Some(500)).requests().milli_cpu, 500);
        // Admitted, not actuated yet.
        assert_eq!(resized(200, Some(200), Some(700)).requests().milli_cpu, 700);
        // Allocated without actuated: the allocated size is what runs.
        assert_eq!(resized(100, Some(300), None).requests().milli_cpu, 300);
        // Infeasible: the spec no longer counts, only what runs and was admitted.
        let mut p = resized(2000, Some(500), Some(400));
        p.resize_infeasible = true;
        assert_eq!(p.requests().milli_cpu, 500);
        // Infeasible, and a container without status resources: it counts nothing,
        // as upstream's helpers have it.
        p.containers.push(container(Some(300), None));
        assert_eq!(p.requests().milli_cpu, 500);
        // A feasible pod with no status resources at all is its spec.
        assert_eq!(resized(800, None, None).requests().milli_cpu, 800);
    }
}
