//! NodeResourcesFit: as upstream's `noderesources` Fit plugin, filters out nodes
//! without room for the pod's requests and scores the rest with one of three
//! strategies (`LeastAllocated`, `MostAllocated`, `RequestedToCapacityRatio`).
//!
//! Args (JSON, kube-scheduler's `NodeResourcesFitArgs`):
//!
//! ```json
//! {
//!   "ignoredResources": ["example.com/foo"],
//!   "ignoredResourceGroups": ["example.org"],
//!   "scoringStrategy": {
//!     "type": "RequestedToCapacityRatio",
//!     "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
//!     "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
//!                                            {"utilization": 100, "score": 0}]}
//!   }
//! }
//! ```

pub mod args;
pub mod queueing;
pub mod score;

use berth_sdk::helpers::NodeResource;
use std::collections::{BTreeMap, BTreeSet};

use berth_sdk::{
    Code, CycleState, Filter, NodeInfo, Plugin, Pod, PreFilter, PreFilterResult, PreScore,
    Resources, Score, Sign, SignFragment, StateKey, Status, sign,
};
use serde::{Deserialize, Serialize};

pub use args::{FitArgs, ResourceSpec, ScoringStrategyType, ShapePoint};
pub use berth_sdk::validation::{is_extended_resource_name, is_scalar_resource_name};

/// The CycleState key of the pod's requests, written by PreFilter (upstream's key).
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeResourcesFit";
/// The CycleState key of the pod's requests for the scored resources, written by
/// PreScore (upstream's key).
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeResourcesFit";
/// [`PRE_FILTER_STATE_KEY`] read as Filter wants it (PreFilter writes a
/// [`PreFilterState`], whose encoding [`Requests`] decodes).
static PRE_FILTER_STATE: StateKey<Requests> = StateKey::new(PRE_FILTER_STATE_KEY);
/// [`PRE_SCORE_STATE_KEY`] with its value: the pod's requests of the scored resources.
static PRE_SCORE_STATE: StateKey<Vec<i64>> = StateKey::new(PRE_SCORE_STATE_KEY);
/// The reason when the node runs out of pod slots.
pub const ERR_REASON_TOO_MANY_PODS: &str = "Too many pods";

/// The plugin.
pub struct NodeResourcesFit {
    args: FitArgs,
    /// `args.resources`, resolved once for Score.
    scored: Vec<NodeResource>,
    ignored_resources: BTreeSet<String>,
    ignored_resource_groups: BTreeSet<String>,
    /// The extended resources the DeviceClasses back, by the device generation they
    /// were read at: read again only when classes change.
    backed: std::sync::Mutex<Option<(u64, std::sync::Arc<BTreeSet<String>>)>>,
}

impl NodeResourcesFit {
    /// Builds the plugin from validated args.
    pub fn with_args(args: FitArgs) -> Self {
        NodeResourcesFit {
            scored: NodeResource::of_specs(&args.resources),
            ignored_resources: args.ignored_resources.iter().cloned().collect(),
            ignored_resource_groups: args.ignored_resource_groups.iter().cloned().collect(),
            backed: std::sync::Mutex::new(None),
            args,
        }
    }

    /// The resources of `request` that a DeviceClass backs (upstream's
    /// `DeviceClassResolver` asked by `shouldDelegateResourceToDRA`): extended resources
    /// named by a class's `extendedResourceName`, or a class's implicit
    /// `deviceclass.resource.kubernetes.io/<class>`. Where a node's allocatable has
    /// none of such a resource, DynamicResources gives the pod devices of the class
    /// instead, and Filter leaves it out. The classes are asked of the host only when
    /// the pod requests a resource that may be so backed, and once per device
    /// generation.
    pub fn dra_backed(&self, request: &Resources) -> BTreeSet<String> {
        let mut names = request
            .dra_extended_requests()
            .map(|(name, _)| name)
            .peekable();
        if names.peek().is_none() {
            return BTreeSet::new();
        }
        let backed = self.backed_resources();
        names.filter(|n| backed.contains(*n)).cloned().collect()
    }

    /// Every extended resource a DeviceClass backs, explicitly or implicitly.
    fn backed_resources(&self) -> std::sync::Arc<BTreeSet<String>> {
        let generation = berth_sdk::dra::host::device_generation();
        let mut kept = self.backed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, backed)) = kept.as_ref()
            && *g == generation
        {
            return std::sync::Arc::clone(backed);
        }
        let classes = berth_sdk::dra::host::device_classes();
        let backed: BTreeSet<String> = berth_sdk::dra::extended_resource_classes(&classes)
            .into_keys()
            .collect();
        let backed = std::sync::Arc::new(backed);
        *kept = Some((generation, std::sync::Arc::clone(&backed)));
        backed
    }

    /// The args in force.
    pub fn args(&self) -> &FitArgs {
        &self.args
    }
}

impl Plugin for NodeResourcesFit {
    const NAME: &'static str = "NodeResourcesFit";
    fn new(args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        FitArgs::from_json(args).map(NodeResourcesFit::with_args)
    }

    fn events() -> Option<Vec<berth_sdk::EventRegistration>> {
        Some(queueing::events())
    }
}

/// The pod's requests as PreFilter stores them (`Resources` is not serializable).
#[derive(Debug, Default, Serialize, Deserialize)]
struct PreFilterState {
    milli_cpu: i64,
    memory: i64,
    ephemeral_storage: i64,
    scalar: BTreeMap<String, i64>,
    /// The requested extended resources a DeviceClass backs ([`dra_backed`]).
    #[serde(default)]
    dra_backed: BTreeSet<String>,
}

impl PreFilterState {
    fn of(r: &Resources, dra_backed: BTreeSet<String>) -> Self {
        PreFilterState {
            milli_cpu: r.milli_cpu,
            memory: r.memory,
            ephemeral_storage: r.ephemeral_storage,
            scalar: r.scalar.clone(),
            dra_backed,
        }
    }
}

/// PreFilter's state decoded into the requests Filter checks and the extended
/// resources it leaves to DynamicResources where a node does not advertise them.
#[derive(Debug, Deserialize)]
#[serde(from = "PreFilterState")]
struct Requests(Resources, BTreeSet<String>);

impl From<PreFilterState> for Requests {
    fn from(mut s: PreFilterState) -> Self {
        let backed = std::mem::take(&mut s.dra_backed);
        Requests(s.into(), backed)
    }
}

impl From<PreFilterState> for Resources {
    fn from(s: PreFilterState) -> Self {
        Resources {
            milli_cpu: s.milli_cpu,
            memory: s.memory,
            ephemeral_storage: s.ephemeral_storage,
            allowed_pod_number: 0,
            scalar: s.scalar,
        }
    }
}

/// One resource the node lacks for the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InsufficientResource {
    /// The resource name (`pods` for the pod count).
    pub resource_name: String,
    /// The reason Filter reports, e.g. "Insufficient cpu".
    pub reason: String,
    /// What the pod asks for.
    pub requested: i64,
    /// What the node's pods already request.
    pub used: i64,
    /// The node's allocatable quantity.
    pub capacity: i64,
    /// The pod asks for more than the whole node has, so preemption cannot help.
    pub unresolvable: bool,
}

/// Upstream's `fitsRequest`: every resource the node lacks for a pod requesting
/// `request`, the pod count first, then cpu, memory, ephemeral storage and scalar
/// resources by name. Extended resources named in `ignored` or whose group (the part
/// before `/`) is in `ignored_groups` are not checked, nor those of `dra_backed` the
/// node's allocatable has none of (DynamicResources gives them as devices).
pub fn fits_request(
    request: &Resources,
    node: &NodeInfo,
    ignored: &BTreeSet<String>,
    ignored_groups: &BTreeSet<String>,
    dra_backed: &BTreeSet<String>,
) -> Vec<InsufficientResource> {
    let mut out = Vec::new();
    let allowed = node.node.allocatable.allowed_pod_number;
    let pods = i64::from(node.pod_count);
    if pods + 1 > allowed {
        out.push(InsufficientResource {
            resource_name: berth_sdk::types::PODS.to_owned(),
            reason: ERR_REASON_TOO_MANY_PODS.to_owned(),
            requested: 1,
            used: pods,
            capacity: allowed,
            unresolvable: false,
        });
    }
    if request.milli_cpu == 0
        && request.memory == 0
        && request.ephemeral_storage == 0
        && request.scalar.is_empty()
    {
        return out;
    }

    let alloc = &node.node.allocatable;
    let used = &node.requested;
    let mut check = |name: &str, wanted: i64, used: i64, capacity: i64| {
        // A zero request always fits, even on an overcommitted node.
        if wanted > 0 && wanted > capacity - used {
            out.push(InsufficientResource {
                resource_name: name.to_owned(),
                reason: format!("Insufficient {name}"),
                requested: wanted,
                used,
                capacity,
                unresolvable: wanted > capacity,
            });
        }
    };
    use berth_sdk::types::{CPU, EPHEMERAL_STORAGE, MEMORY};
    check(CPU, request.milli_cpu, used.milli_cpu, alloc.milli_cpu);
    check(MEMORY, request.memory, used.memory, alloc.memory);
    check(
        EPHEMERAL_STORAGE,
        request.ephemeral_storage,
        used.ephemeral_storage,
        alloc.ephemeral_storage,
    );
    for (name, &wanted) in &request.scalar {
        if is_extended_resource_name(name) {
            let group = name.split('/').next().unwrap_or_default();
            if ignored.contains(name) || ignored_groups.contains(group) {
                continue;
            }
        }
        let get = |r: &Resources| r.scalar.get(name).copied().unwrap_or(0);
        if get(alloc) == 0 && dra_backed.contains(name) {
            // Upstream's shouldDelegateResourceToDRA.
            continue;
        }
        check(name, wanted, get(used), get(alloc));
    }
    out
}

impl PreFilter for NodeResourcesFit {
    fn pre_filter(&self, state: &CycleState, pod: &Pod, _nodes: &[&NodeInfo]) -> PreFilterResult {
        let requests = pod.requests();
        let backed = self.dra_backed(&requests);
        state.write(PRE_FILTER_STATE_KEY, &PreFilterState::of(&requests, backed));
        Status::success().into()
    }
}

impl Filter for NodeResourcesFit {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(request) = state.value(&PRE_FILTER_STATE) else {
            return Status::error(format!(
                "error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
            ));
        };
        let insufficient = fits_request(
            &request.0,
            node,
            &self.ignored_resources,
            &self.ignored_resource_groups,
            &request.1,
        );
        if insufficient.is_empty() {
            return Status::success();
        }
        // Every reason is kept; preemption is pointless when the pod alone
        // exceeds the node.
        let code = if insufficient.iter().any(|r| r.unresolvable) {
            Code::UnschedulableAndUnresolvable
        } else {
            Code::Unschedulable
        };
        Status::new(code, insufficient.into_iter().map(|r| r.reason).collect())
    }
}

impl PreScore for NodeResourcesFit {
    fn pre_score(
        &self,
        state: &CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        _all_nodes: &[&NodeInfo],
    ) -> Status {
        state.set(
            &PRE_SCORE_STATE,
            &score::pod_requests(pod, &self.args.resources),
        );
        Status::success()
    }
}

impl Score for NodeResourcesFit {
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        // As upstream, Score works without PreScore by computing the requests itself.
        let requests = state
            .value(&PRE_SCORE_STATE)
            .filter(|r| r.len() == self.args.resources.len())
            .unwrap_or_else(|| std::rc::Rc::new(score::pod_requests(pod, &self.args.resources)));
        Ok(score::score(&self.args, &self.scored, node, &requests))
    }
}

impl Sign for NodeResourcesFit {
    /// PreFilter and Filter read the pod's effective requests, PreScore and Score its
    /// non-zero requests: both computed from the containers, init containers and
    /// sidecars, the in-place resize state, the pod-level resources and the overhead,
    /// and signed as computed ([`sign::resources`]). Extended resources backed by
    /// DRA are not modelled here (they are checked against the node's allocatable as
    /// any extended resource), so nothing else of the pod is read; the args are the
    /// instance's.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::resources(pod)])
    }
}

berth_sdk::export_plugin!(
    NodeResourcesFit: queueing_hint,
    pre_filter,
    filter,
    pre_score,
    score,
    sign_pod
);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Container, MemoryState, Node, ResourceList};

    const EXT_A: &str = "example.com/aaa";
    const EXT_B: &str = "example.com/bbb";
    const K8S_IO_A: &str = "kubernetes.io/something";
    const K8S_IO_B: &str = "subdomain.kubernetes.io/something";
    const HUGEPAGES_A: &str = "hugepages-2Mi";

    fn list(items: &[(&str, i64)]) -> ResourceList {
        items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn container(items: &[(&str, i64)]) -> Container {
        Container {
            requests: list(items),
            ..Container::default()
        }
    }

    fn pod(containers: &[&[(&str, i64)]]) -> Pod {
        Pod {
            containers: containers.iter().map(|c| container(c)).collect(),
            ..Pod::default()
        }
    }

    fn with_init(mut p: Pod, inits: &[&[(&str, i64)]]) -> Pod {
        p.init_containers = inits.iter().map(|c| container(c)).collect();
        p
    }

    /// Upstream's test node: 10m cpu, 20 bytes memory, 32 pods, 5 of example.com/aaa,
    /// 20 bytes ephemeral storage, 5 of hugepages-2Mi; `existing` runs on it.
    fn node_with(allowed_pods: i64, existing: &Pod) -> NodeInfo {
        let mut info = NodeInfo::new(Node {
            name: "node".into(),
            allocatable: Resources::from_list(&list(&[
                ("cpu", 10),
                ("memory", 20),
                ("pods", allowed_pods),
                (EXT_A, 5),
                ("ephemeral-storage", 20),
                (HUGEPAGES_A, 5),
            ])),
            ..Node::default()
        });
        info.add_pod(existing);
        info
    }

    fn filter_with(args: FitArgs, p: &Pod, node: &NodeInfo) -> Status {
        let plugin = NodeResourcesFit::with_args(args);
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        assert!(plugin.pre_filter(&state, p, &[]).status.is_success());
        plugin.filter(&state, p, node)
    }

    fn filter(p: &Pod, existing: &Pod) -> Status {
        filter_with(FitArgs::default(), p, &node_with(32, existing))
    }

    fn unschedulable(reasons: &[&str]) -> Status {
        Status::new(
            Code::Unschedulable,
            reasons.iter().map(|r| (*r).to_owned()).collect(),
        )
    }

    fn unresolvable(reasons: &[&str]) -> Status {
        Status::new(
            Code::UnschedulableAndUnresolvable,
            reasons.iter().map(|r| (*r).to_owned()).collect(),
        )
    }

    // The cases of upstream's TestEnoughRequests.
    #[test]
    fn no_resources_requested_always_fits() {
        let existing = pod(&[&[("cpu", 10), ("memory", 20)]]);
        assert_eq!(filter(&Pod::default(), &existing), Status::success());
    }

    #[test]
    fn too_many_resources_fails_with_every_reason() {
        let existing = pod(&[&[("cpu", 10), ("memory", 20)]]);
        let p = pod(&[&[("cpu", 1), ("memory", 1)]]);
        assert_eq!(
            filter(&p, &existing),
            unschedulable(&["Insufficient cpu", "Insufficient memory"])
        );
        let details = fits_request(
            &p.requests(),
            &node_with(32, &existing),
            &BTreeSet::new(),
            &BTreeSet::new(),
            &BTreeSet::new(),
        );
        assert_eq!(
            details[0],
            InsufficientResource {
                resource_name: "cpu".into(),
                reason: "Insufficient cpu".into(),
                requested: 1,
                used: 10,
                capacity: 10,
                unresolvable: false,
            }
        );
        assert_eq!((details[1].requested, details[1].used), (1, 20));
    }

    #[test]
    fn init_containers_count_by_their_maximum() {
        let existing = pod(&[&[("cpu", 8), ("memory", 19)]]);
        let p = with_init(
            pod(&[&[("cpu", 1), ("memory", 1)]]),
            &[&[("cpu", 3), ("memory", 1)]],
        );
        assert_eq!(filter(&p, &existing), unschedulable(&["Insufficient cpu"]));
        let p = with_init(
            pod(&[&[("cpu", 1), ("memory", 1)]]),
            &[&[("cpu", 3), ("memory", 1)], &[("cpu", 2), ("memory", 1)]],
        );
        assert_eq!(filter(&p, &existing), unschedulable(&["Insufficient cpu"]));

        let existing = pod(&[&[("cpu", 9), ("memory", 19)]]);
        let p = with_init(
            pod(&[&[("cpu", 1), ("memory", 1)]]),
            &[&[("cpu", 1), ("memory", 3)]],
        );
        assert_eq!(
            filter(&p, &existing),
            unschedulable(&["Insufficient memory"])
        );
        let p = with_init(
            pod(&[&[("cpu", 1), ("memory", 1)]]),
            &[&[("cpu", 1), ("memory", 3)], &[("cpu", 1), ("memory", 2)]],
        );
        assert_eq!(
            filter(&p, &existing),
            unschedulable(&["Insufficient memory"])
        );

        // The maximum, not the sum, of containers and init containers.
        let p = with_init(
            pod(&[&[("cpu", 1), ("memory", 1)]]),
            &[&[("cpu", 1), ("memory", 1)]],
        );
        assert_eq!(filter(&p, &existing), Status::success());
        let p = with_init(
            pod(&[&[("cpu", 1), ("memory", 1)]]),
            &[&[("cpu", 1), ("memory", 1)], &[("cpu", 1), ("memory", 1)]],
        );
        assert_eq!(filter(&p, &existing), Status::success());
    }

    #[test]
    fn one_resource_short() {
        let both = pod(&[&[("cpu", 5), ("memory", 5)]]);
        assert_eq!(
            filter(&pod(&[&[("cpu", 1), ("memory", 1)]]), &both),
            Status::success()
        );
        let existing = pod(&[&[("cpu", 9), ("memory", 5)]]);
        assert_eq!(
            filter(&pod(&[&[("cpu", 2), ("memory", 1)]]), &existing),
            unschedulable(&["Insufficient cpu"])
        );
        let existing = pod(&[&[("cpu", 5), ("memory", 19)]]);
        assert_eq!(
            filter(&pod(&[&[("cpu", 1), ("memory", 2)]]), &existing),
            unschedulable(&["Insufficient memory"])
        );
    }

    #[test]
    fn equal_edge_cases_fit() {
        let existing = pod(&[&[("cpu", 5), ("memory", 19)]]);
        assert_eq!(
            filter(&pod(&[&[("cpu", 5), ("memory", 1)]]), &existing),
            Status::success()
        );
        let p = with_init(
            pod(&[&[("cpu", 4), ("memory", 1)]]),
            &[&[("cpu", 5), ("memory", 1)]],
        );
        assert_eq!(filter(&p, &existing), Status::success());
    }

    #[test]
    fn extended_resources() {
        let empty = pod(&[&[]]);
        assert_eq!(filter(&pod(&[&[(EXT_A, 1)]]), &empty), Status::success());
        assert_eq!(
            filter(&with_init(pod(&[&[]]), &[&[(EXT_A, 1)]]), &empty),
            Status::success()
        );

        // More than the node's whole capacity: preemption cannot help.
        let want_10 = pod(&[&[("cpu", 1), ("memory", 1), (EXT_A, 10)]]);
        let zero = pod(&[&[(EXT_A, 0)]]);
        assert_eq!(
            filter(&want_10, &zero),
            unresolvable(&["Insufficient example.com/aaa"])
        );
        let init_10 = with_init(pod(&[&[]]), &[&[("cpu", 1), ("memory", 1), (EXT_A, 10)]]);
        assert_eq!(
            filter(&init_10, &zero),
            unresolvable(&["Insufficient example.com/aaa"])
        );

        // Capacity taken by another pod: preemption may help.
        let full = pod(&[&[(EXT_A, 5)]]);
        let want_1 = pod(&[&[("cpu", 1), ("memory", 1), (EXT_A, 1)]]);
        assert_eq!(
            filter(&want_1, &full),
            unschedulable(&["Insufficient example.com/aaa"])
        );

        let two = pod(&[&[(EXT_A, 2)]]);
        let sum_6 = pod(&[&[(EXT_A, 3)], &[(EXT_A, 3)]]);
        assert_eq!(
            filter(&sum_6, &two),
            unresolvable(&["Insufficient example.com/aaa"])
        );
        let inits_3 = with_init(pod(&[&[]]), &[&[(EXT_A, 3)], &[(EXT_A, 3)]]);
        assert_eq!(filter(&inits_3, &two), Status::success());
        let inits_6 = with_init(pod(&[&[]]), &[&[(EXT_A, 6)], &[(EXT_A, 3)]]);
        assert_eq!(
            filter(&inits_6, &two),
            unresolvable(&["Insufficient example.com/aaa"])
        );
    }

    #[test]
    fn extended_resources_backed_by_dra_are_left_where_the_node_has_none() {
        // Upstream's shouldDelegateResourceToDRA: a resource a DeviceClass backs is not
        // checked on a node that advertises none of it (DynamicResources gives it as
        // devices), but is where the node advertises some (a device plugin's).
        const GPU: &str = "example.com/gpu";
        const IMPLICIT: &str = "deviceclass.resource.kubernetes.io/gpu.example.com";
        let backed: BTreeSet<String> = [GPU.to_owned(), IMPLICIT.to_owned()].into();
        let none = BTreeSet::new();
        let want = pod(&[&[("cpu", 1), (GPU, 2), (IMPLICIT, 1)]]);
        let node = node_with(32, &Pod::default());
        let reasons = |backed: &BTreeSet<String>, node: &NodeInfo| -> Vec<String> {
            fits_request(&want.requests(), node, &none, &none, backed)
                .into_iter()
                .map(|r| r.reason)
                .collect()
        };
        assert!(reasons(&backed, &node).is_empty());
        assert_eq!(
            reasons(&none, &node),
            [
                "Insufficient deviceclass.resource.kubernetes.io/gpu.example.com",
                "Insufficient example.com/gpu"
            ]
        );
        // One GPU advertised by a device plugin: checked against it, backed or not.
        let mut plugin_node = node.clone();
        plugin_node.node.allocatable.scalar.insert(GPU.into(), 1);
        assert_eq!(
            reasons(&backed, &plugin_node),
            ["Insufficient example.com/gpu"]
        );
    }

    #[test]
    fn a_device_class_requeues_the_pod_when_it_comes_to_back_what_it_requests() {
        use crate::queueing::is_schedulable_after_device_class_event;
        use berth_sdk::dra::DeviceClass;
        use berth_sdk::{Object, QueueingHint};
        let class = |name: &str, resource: Option<&str>| {
            Object::DeviceClass(DeviceClass {
                name: name.into(),
                uid: String::new(),
                selectors: Vec::new(),
                config: Vec::new(),
                extended_resource_name: resource.map(str::to_owned),
            })
        };
        let gpu_pod = pod(&[&[("example.com/gpu", 1)]]);
        let implicit_pod = pod(&[&[("deviceclass.resource.kubernetes.io/fast", 1)]]);
        let hint = |p: &Pod, old: Option<Object>, new: Object| {
            is_schedulable_after_device_class_event(p, old.as_ref(), Some(&new)).unwrap()
        };
        let named = class("fast", Some("example.com/gpu"));
        assert_eq!(hint(&gpu_pod, None, named.clone()), QueueingHint::Queue);
        assert_eq!(
            hint(&implicit_pod, None, class("fast", None)),
            QueueingHint::Queue
        );
        assert_eq!(
            hint(&gpu_pod, None, class("fast", None)),
            QueueingHint::QueueSkip
        );
        // An update that leaves the name as it was changes nothing.
        assert_eq!(
            hint(&gpu_pod, Some(named.clone()), named.clone()),
            QueueingHint::QueueSkip
        );
        assert_eq!(
            hint(&gpu_pod, Some(class("fast", None)), named),
            QueueingHint::Queue
        );
        assert_eq!(
            hint(&gpu_pod, None, class("fast", Some("example.com/fpga"))),
            QueueingHint::QueueSkip
        );
    }

    #[test]
    fn unknown_and_native_scalar_resources_are_enforced() {
        let empty = pod(&[&[]]);
        assert_eq!(
            filter(&pod(&[&[(EXT_B, 1)]]), &empty),
            unresolvable(&["Insufficient example.com/bbb"])
        );
        assert_eq!(
            filter(&with_init(pod(&[&[]]), &[&[(EXT_B, 1)]]), &empty),
            unresolvable(&["Insufficient example.com/bbb"])
        );
        assert_eq!(
            filter(&pod(&[&[(K8S_IO_A, 10)]]), &empty),
            unresolvable(&["Insufficient kubernetes.io/something"])
        );
        assert_eq!(
            filter(&with_init(pod(&[&[]]), &[&[(K8S_IO_B, 10)]]), &empty),
            unresolvable(&["Insufficient subdomain.kubernetes.io/something"])
        );
    }

    #[test]
    fn hugepages_are_enforced() {
        let zero = pod(&[&[(HUGEPAGES_A, 0)]]);
        assert_eq!(
            filter(&pod(&[&[(HUGEPAGES_A, 10)]]), &zero),
            unresolvable(&["Insufficient hugepages-2Mi"])
        );
        let two = pod(&[&[(HUGEPAGES_A, 2)]]);
        assert_eq!(
            filter(&pod(&[&[(HUGEPAGES_A, 3)], &[(HUGEPAGES_A, 3)]]), &two),
            unresolvable(&["Insufficient hugepages-2Mi"])
        );
        let p = pod(&[&[(HUGEPAGES_A, 3)]]);
        assert_eq!(filter(&p, &two), Status::success());
        let four = pod(&[&[(HUGEPAGES_A, 4)]]);
        assert_eq!(
            filter(&p, &four),
            unschedulable(&["Insufficient hugepages-2Mi"])
        );
    }

    #[test]
    fn ignored_extended_resources_are_skipped() {
        let node = node_with(32, &pod(&[&[]]));
        let args = |value| FitArgs::from_json(value).unwrap();
        use berth_sdk::serde_json::json;
        let p = pod(&[&[("cpu", 1), ("memory", 1), (EXT_B, 1)]]);
        assert_eq!(
            filter_with(args(json!({"ignoredResources": [EXT_B]})), &p, &node),
            Status::success()
        );

        // Groups match the part before the slash; native resources are never ignored.
        let p = pod(&[&[("cpu", 1), ("memory", 1), (EXT_B, 1), (K8S_IO_A, 1)]]);
        let groups = args(json!({"ignoredResourceGroups": ["example.com"]}));
        assert_eq!(
            filter_with(groups, &p, &node),
            unresolvable(&["Insufficient kubernetes.io/something"])
        );
        let native = args(
            json!({"ignoredResources": [K8S_IO_A], "ignoredResourceGroups": ["kubernetes.io"]}),
        );
        assert_eq!(
            filter_with(native, &p, &node),
            unresolvable(&[
                "Insufficient example.com/bbb",
                "Insufficient kubernetes.io/something"
            ])
        );
    }

    #[test]
    fn zero_quantity_requests_are_skipped() {
        let node = node_with(32, &pod(&[&[(EXT_A, 6)]]));
        let p = pod(&[&[("cpu", 1), ("memory", 1), (EXT_A, 0)]]);
        assert_eq!(
            filter_with(FitArgs::default(), &p, &node),
            Status::success()
        );
    }

    #[test]
    fn overhead_is_added_to_the_requests() {
        let existing = pod(&[&[("cpu", 5), ("memory", 5)]]);
        let mut p = pod(&[&[("cpu", 1), ("memory", 1)]]);
        p.overhead = list(&[("cpu", 3), ("memory", 13)]);
        assert_eq!(filter(&p, &existing), Status::success());
        p.overhead = list(&[("cpu", 1), ("memory", 15)]);
        assert_eq!(
            filter(&p, &existing),
            unschedulable(&["Insufficient memory"])
        );
    }

    // The cases of upstream's TestNotEnoughRequests: one pod slot, already taken.
    #[test]
    fn too_many_pods() {
        let existing = pod(&[&[("cpu", 10), ("memory", 20)]]);
        let node = node_with(1, &existing);
        let run = |p: &Pod| filter_with(FitArgs::default(), p, &node);
        assert_eq!(run(&Pod::default()), unschedulable(&["Too many pods"]));
        let node = node_with(1, &pod(&[&[("cpu", 5), ("memory", 5)]]));
        let run = |p: &Pod| filter_with(FitArgs::default(), p, &node);
        assert_eq!(
            run(&pod(&[&[("cpu", 1), ("memory", 1)]])),
            unschedulable(&["Too many pods"])
        );
        let node = node_with(1, &pod(&[&[("cpu", 5), ("memory", 19)]]));
        let run = |p: &Pod| filter_with(FitArgs::default(), p, &node);
        assert_eq!(
            run(&pod(&[&[("cpu", 5), ("memory", 1)]])),
            unschedulable(&["Too many pods"])
        );
        let init = with_init(
            pod(&[&[("cpu", 5), ("memory", 1)]]),
            &[&[("cpu", 5), ("memory", 1)]],
        );
        assert_eq!(run(&init), unschedulable(&["Too many pods"]));
        // Reported before the resources, all together.
        assert_eq!(
            run(&pod(&[&[("cpu", 6), ("memory", 2)]])),
            unschedulable(&["Too many pods", "Insufficient cpu", "Insufficient memory"])
        );
    }

    // The cases of upstream's TestStorageRequests.
    #[test]
    fn ephemeral_storage() {
        assert_eq!(
            filter(
                &pod(&[&[("cpu", 1), ("memory", 1)]]),
                &pod(&[&[("cpu", 10), ("memory", 10)]])
            ),
            unschedulable(&["Insufficient cpu"])
        );
        let small = pod(&[&[("cpu", 2), ("memory", 2)]]);
        assert_eq!(
            filter(&pod(&[&[("cpu", 1), ("memory", 1)]]), &small),
            Status::success()
        );
        assert_eq!(
            filter(&pod(&[&[("ephemeral-storage", 25)]]), &small),
            unresolvable(&["Insufficient ephemeral-storage"])
        );
        assert_eq!(
            filter(&pod(&[&[("ephemeral-storage", 10)]]), &small),
            Status::success()
        );
        let used = pod(&[&[("ephemeral-storage", 15)]]);
        assert_eq!(
            filter(&pod(&[&[("ephemeral-storage", 10)]]), &used),
            unschedulable(&["Insufficient ephemeral-storage"])
        );
    }

    #[test]
    fn signs_what_filter_and_score_read_of_the_requests() {
        let plugin = NodeResourcesFit::with_args(FitArgs::default());
        let sign = |p: &Pod| plugin.sign_pod(p).unwrap();
        let base = pod(&[&[("cpu", 2), ("memory", 4)]]);
        assert_ne!(sign(&base), sign(&pod(&[&[("cpu", 3), ("memory", 4)]])));
        // Pod-level requests take the containers' place.
        let mut pod_level = base.clone();
        pod_level.resources = Some(berth_sdk::ResourceRequirements {
            requests: list(&[("cpu", 8)]),
            limits: ResourceList::new(),
        });
        assert_ne!(sign(&base), sign(&pod_level));
        // An infeasible resize counts what the kubelet allocated.
        let mut resized = base.clone();
        resized.containers[0].allocated = Some(list(&[("cpu", 1), ("memory", 4)]));
        resized.resize_infeasible = true;
        assert_ne!(sign(&base), sign(&resized));
        let mut overhead = base.clone();
        overhead.overhead = list(&[("cpu", 1)]);
        assert_ne!(sign(&base), sign(&overhead));
        // Equal requests, but a container without requests gets scoring's defaults.
        assert_ne!(sign(&pod(&[])), sign(&pod(&[&[]])));
        // Split over two containers, the same requests (and non-zero requests): the
        // same fragments, and the same verdict and score on any node.
        let mut split = pod(&[&[("cpu", 1), ("memory", 2)], &[("cpu", 1), ("memory", 2)]]);
        split.name = "other".into();
        split.containers[0].name = "x".into();
        split.labels = [("app".to_owned(), "x".to_owned())].into();
        assert_eq!(sign(&base), sign(&split));
        let node = node_with(32, &pod(&[&[("cpu", 7), ("memory", 1)]]));
        assert_eq!(
            filter(&base, &Pod::default()),
            filter(&split, &Pod::default())
        );
        assert_eq!(
            filter_with(FitArgs::default(), &base, &node),
            filter_with(FitArgs::default(), &split, &node)
        );
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        assert_eq!(
            plugin.score(&state, &base, &node),
            plugin.score(&state, &split, &node)
        );
    }

    #[test]
    fn filter_without_pre_filter_is_an_error() {
        let plugin = NodeResourcesFit::with_args(FitArgs::default());
        let store = MemoryState::default();
        let status = plugin.filter(
            &CycleState::new(&store),
            &Pod::default(),
            &NodeInfo::default(),
        );
        assert_eq!(
            status,
            Status::error(
                r#"error reading "PreFilterNodeResourcesFit" from cycleState: not found"#
            )
        );
    }

    #[test]
    fn resource_name_kinds() {
        assert!(is_extended_resource_name(EXT_A));
        assert!(!is_extended_resource_name(K8S_IO_A));
        assert!(!is_extended_resource_name(K8S_IO_B));
        assert!(!is_extended_resource_name("cpu"));
        assert!(!is_extended_resource_name(HUGEPAGES_A));
        assert!(!is_extended_resource_name("requests.example.com/x"));
        assert!(is_scalar_resource_name(EXT_A));
        assert!(is_scalar_resource_name(K8S_IO_A));
        assert!(is_scalar_resource_name(HUGEPAGES_A));
        assert!(is_scalar_resource_name("attachable-volumes-aws-ebs"));
        for native in ["cpu", "memory", "ephemeral-storage", "pods", "storage"] {
            assert!(!is_scalar_resource_name(native), "{native}");
        }
    }

    #[test]
    fn bad_args_refuse_the_plugin() {
        use berth_sdk::serde_json::json;
        let err = NodeResourcesFit::new(json!({"scoringStrategy": {"type": "Nope"}}))
            .err()
            .unwrap();
        assert!(err.starts_with("scoringStrategy.type"), "{err}");
        assert!(NodeResourcesFit::new(berth_sdk::serde_json::Value::Null).is_ok());
    }

    #[test]
    fn exports_its_extension_points() {
        use berth_sdk::{ExtensionPoint as E, Registered};
        assert_eq!(
            NodeResourcesFit::vtable().extension_points(),
            [E::PreFilter, E::Filter, E::PreScore, E::Score, E::SignPod]
        );
    }
}
