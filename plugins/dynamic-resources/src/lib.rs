//! DynamicResources: as upstream's `dynamicresources` plugin, allocates the devices
//! of the ResourceClaims a pod names (`spec.resourceClaims`) and places the pod where
//! they are reachable.
//!
//! - **PreEnqueue** keeps a pod out of the active queue until every claim it names
//!   exists, is not being deleted, and (when made from a template) belongs to it.
//! - **PreFilter** reads the claims. An allocated claim must be reservable for the pod
//!   (`reservedFor` not full, or the pod already in it); its allocation's node
//!   selector limits the nodes. A claim whose allocation another cycle assumed and
//!   the cluster has not shown yet makes the pod wait. An unallocated claim's device
//!   classes must exist. The allocator (`berth-dra`) is built from the classes,
//!   slices, taint rules and the devices already given.
//! - **Filter** checks an allocated claim's node selector and its devices' binding
//!   conditions, and allocates the unallocated claims on the node; the result is kept
//!   per node for Reserve and Score.
//! - **Score**, when a claim has `firstAvailable` requests: nodes whose allocation
//!   took earlier (preferred) alternatives score higher; normalized to 0..=100.
//! - **PostFilter** names the allocated claim whose deallocation upstream would ask
//!   for; Berth cannot write a claim in the scheduling cycle, so it only answers
//!   Unschedulable (see [`PostFilter`] below).
//! - **Reserve** assumes each changed claim in the host (the allocation found on the
//!   node and the pod in `reservedFor`), so that other cycles do not give the same
//!   devices; **Unreserve** restores them.
//! - **PreBind** writes each changed claim's status, then waits (up to
//!   `bindingTimeout`) until the binding conditions of the allocated devices are true.
//!
//! The allocator cannot live in the cycle state (its values are bytes in the host),
//! so each instance keeps the one it built last, keyed by the device and claim
//! generations it was built from; a cycle's state names the key, and an instance
//! that has another builds its own from the host's current view.
//!
//! Extended resources backed by DRA (a DeviceClass's `extendedResourceName`, or the
//! implicit `deviceclass.resource.kubernetes.io/<class>`) are given the same way, on
//! the nodes that do not advertise them, through one claim the plugin makes for the
//! pod at PreBind (see [`extended`]).
//!
//! Not modelled: the binding timeout of a claim allocated by an earlier attempt (it
//! needs a clock the sandbox does not give).

pub mod args;
pub mod claims;
pub mod extended;

use berth_dra::{AllocError, AllocatedState, Allocator, Devices, Features, cel::SelectorCache};
use berth_sdk::affinity::NodeSelectorTerm;
use berth_sdk::dra::host as dra;
use berth_sdk::dra::{AllocationResult, DeviceClass, DeviceRequest, ResourceClaim};
use berth_sdk::preemption::DryRun;
use berth_sdk::{
    ActionType, ClusterEvent, ContainerExtendedResourceRequest, CycleState, EnqueueExtensions,
    EventRegistration, EventResource, Filter, NodeInfo, NormalizeScore, Object, Plugin, Pod,
    PostFilter, PostFilterResult, PreBind, PreEnqueue, PreFilter, PreFilterResult, PreScore,
    QueueingHint, Reserve, Score, Sign, SignFragment, StateKey, Status, sign,
};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

pub use args::Args;

/// The CycleState key of PreFilter's state (upstream's key, the plugin's name).
pub const STATE_KEY: &str = "DynamicResources";
static STATE: StateKey<PreFilterState> = StateKey::new(STATE_KEY);
/// What Reserve assumed, for Unreserve and PreBind.
const RESERVED_KEY: &str = "DynamicResources/reserved";
/// The claim PreBind created for the pod's extended resources (namespace, name), for
/// Unreserve to delete should binding fail after it.
const CREATED_KEY: &str = "DynamicResources/extended-created";

/// Filter's reason when the allocator finds no devices for the claims on a node.
pub const ERR_CANNOT_ALLOCATE: &str = "cannot allocate all claims";
/// Filter's reason when an allocated claim cannot be used on a node.
pub const ERR_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// PreFilter's reason when an allocated claim has no room for the pod.
pub const ERR_IN_USE: &str = "resourceclaim in use";
/// Filter's reason while a claim an earlier attempt made for the pod's extended
/// resources exists (PostFilter deletes it).
pub const ERR_STALE_EXTENDED: &str = "cannot schedule extended resource claim";

fn node_key(node: &str) -> String {
    format!("{STATE_KEY}/node/{node}")
}

fn unavailable_key(index: usize) -> String {
    format!("{STATE_KEY}/unavailable/{index}")
}

/// Which view of the cluster an allocator was built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatorKey {
    /// [`dra::device_generation`] then.
    pub devices: u64,
    /// [`dra::claim_generation`] then.
    pub claims: u64,
}

/// PreFilter's findings (upstream's `stateData`, less what cannot be bytes).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PreFilterState {
    /// The pod's claims, in the order of `spec.resourceClaims`, as PreFilter read them.
    pub claims: Vec<ResourceClaim>,
    /// Per claim: the node selector of its allocation (`None`: unallocated, or
    /// reachable from every node).
    pub available_on_nodes: Vec<Option<Vec<NodeSelectorTerm>>>,
    /// The indices of the claims the scheduler allocates.
    pub to_allocate: Vec<usize>,
    /// The view the allocator of this cycle was built from (`None`: nothing to
    /// allocate).
    pub allocator: Option<AllocatorKey>,
    /// The pod's extended resources a DeviceClass backs (`None`: it requests none).
    #[serde(default)]
    pub extended: Option<extended::ExtendedState>,
}

/// What Filter found on a node, for Reserve and Score.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeAllocation {
    /// The allocations of the claims to allocate, in their order.
    pub results: Vec<AllocationResult>,
    /// The claim for the pod's extended resources on this node (none when the node
    /// advertises them all), its allocation and which request serves which
    /// container.
    pub extended: Option<(
        ResourceClaim,
        AllocationResult,
        Vec<ContainerExtendedResourceRequest>,
    )>,
}

impl PreFilterState {
    fn claims_to_allocate(&self) -> Vec<&ResourceClaim> {
        self.to_allocate.iter().map(|&i| &self.claims[i]).collect()
    }
}

/// A claim as Reserve assumed it: what PreBind writes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReservedClaim {
    /// The claim with its new status (allocation, `reservedFor`).
    pub claim: ResourceClaim,
    /// Whether the scheduler allocated it in this cycle.
    pub allocated_here: bool,
    /// For the claim of the pod's extended resources (not created yet): which
    /// request serves which container, for the pod's status.
    #[serde(default)]
    pub extended: Option<Vec<ContainerExtendedResourceRequest>>,
}

/// The classes, slices and taint rules of one device generation.
#[derive(Debug)]
struct DeviceView {
    generation: u64,
    classes: Vec<DeviceClass>,
    /// The class backing each extended resource (`extended_resource_classes`).
    extended: std::collections::BTreeMap<String, String>,
    /// The classes, slices and taint rules prepared for allocators: every allocator
    /// built while this view stands shares them, whatever the claims do.
    devices: Arc<Devices>,
}

#[derive(Debug, Default)]
struct Kept {
    devices: Option<Arc<DeviceView>>,
    allocator: Option<(AllocatorKey, Arc<Allocator>)>,
}

/// The plugin.
#[derive(Debug)]
pub struct DynamicResources {
    args: Args,
    features: Features,
    /// Compiled CEL selectors, kept across cycles.
    selectors: Arc<SelectorCache>,
    kept: Mutex<Kept>,
}

impl DynamicResources {
    /// The plugin with these args, the allocator following kube-scheduler 1.37's
    /// default feature gates.
    pub fn with_args(args: Args) -> Self {
        DynamicResources::with_features(args, Features::default())
    }

    /// The plugin with these args, the allocator following `features`.
    pub fn with_features(args: Args, features: Features) -> Self {
        DynamicResources {
            args,
            features,
            selectors: Arc::new(SelectorCache::new()),
            kept: Mutex::new(Kept::default()),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The classes, slices and taint rules, fetched again only when the device
    /// generation moved.
    fn device_view(&self) -> Arc<DeviceView> {
        let generation = dra::device_generation();
        if let Some(v) = &self.kept().devices
            && v.generation == generation
        {
            return Arc::clone(v);
        }
        let (classes, slices, rules) = (
            dra::device_classes(),
            dra::resource_slices(),
            dra::device_taint_rules(),
        );
        let devices = Arc::new(Devices::new(
            &self.features,
            classes.clone(),
            slices,
            &rules,
        ));
        let view = Arc::new(DeviceView {
            generation,
            extended: berth_sdk::dra::extended_resource_classes(&classes),
            classes,
            devices,
        });
        self.kept().devices = Some(Arc::clone(&view));
        view
    }

    /// An allocator over the host's view now (the kept one when neither generation
    /// moved).
    fn current_allocator(&self) -> Result<(AllocatorKey, Arc<Allocator>), Status> {
        let key = AllocatorKey {
            devices: dra::device_generation(),
            claims: dra::claim_generation(),
        };
        if let Some((k, a)) = &self.kept().allocator
            && *k == key
        {
            return Ok((key, Arc::clone(a)));
        }
        let view = self.device_view();
        // Only the device results cross, not the claims: with thousands of claims
        // holding devices, the whole claims were most of a cycle's cost in wasm.
        let allocated =
            AllocatedState::from_results(&dra::allocated_device_results(), &self.features)
                .map_err(|e| Status::error(e.to_string()))?;
        let allocator = Arc::new(
            Allocator::with_devices(self.features, Arc::clone(&view.devices), allocated)
                .with_selector_cache(Arc::clone(&self.selectors)),
        );
        self.kept().allocator = Some((key, Arc::clone(&allocator)));
        Ok((key, allocator))
    }

    /// The allocator of the cycle: the kept one when it was built from the view the
    /// cycle's PreFilter saw, else one over the host's view now.
    fn cycle_allocator(&self, key: AllocatorKey) -> Result<Arc<Allocator>, Status> {
        if let Some((k, a)) = &self.kept().allocator
            && *k == key
        {
            return Ok(Arc::clone(a));
        }
        self.current_allocator().map(|(_, a)| a)
    }

    /// Upstream's `validateDeviceClass`.
    fn check_class(view: &DeviceView, class: &str, request: &str) -> Result<(), Status> {
        if class.is_empty() {
            return Err(Status::error(format!(
                "request {request}: unsupported request type"
            )));
        }
        if !view.classes.iter().any(|c| c.name == class) {
            return Err(Status::unresolvable(format!(
                "request {request}: device class {class} does not exist"
            )));
        }
        Ok(())
    }

    /// Upstream's `isSchedulableAfterClaimChange`.
    fn after_claim_change(
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let modified =
            berth_sdk::events::required(new, Object::as_resource_claim, "resourceclaim", "new")?;
        let original = old.and_then(Object::as_resource_claim);
        let Ok(claims) = claims::pod_claims(pod) else {
            // The pod still waits for something else.
            return Ok(QueueingHint::QueueSkip);
        };
        if original.is_some_and(|o| o.status.allocation.is_some())
            && modified.status.allocation.is_none()
        {
            // Deallocated: its devices are free for any pod.
            return Ok(QueueingHint::Queue);
        }
        if !claims.iter().any(|c| c.uid == modified.uid) {
            return Ok(QueueingHint::QueueSkip);
        }
        Ok(match original {
            None => QueueingHint::Queue,
            Some(o) if o.status == modified.status => QueueingHint::QueueSkip,
            Some(_) => QueueingHint::Queue,
        })
    }

    /// Upstream's `isSchedulableAfterPodChange`: the pod's own status now names the
    /// claims made for it.
    fn after_pod_change(pod: &Pod, new: Option<&Object>) -> Result<QueueingHint, String> {
        let modified = berth_sdk::events::required(new, Object::as_pod, "pod", "new")?;
        if modified.uid != pod.uid {
            return Ok(QueueingHint::QueueSkip);
        }
        Ok(match claims::pod_claims(modified) {
            Ok(_) => QueueingHint::Queue,
            Err(_) => QueueingHint::QueueSkip,
        })
    }

    /// Waits until the binding conditions of every claim's devices are true (upstream's
    /// `isPodReadyForBinding` polled until `bindingTimeout`).
    fn wait_for_binding_conditions(&self, claims: &[ResourceClaim]) -> Status {
        let mut waited = 0u64;
        loop {
            let generation = dra::claim_generation();
            let mut ready = true;
            for c in claims {
                let Some(current) = dra::resource_claim(&c.namespace, &c.name) else {
                    return Status::error(format!(
                        "could not find ResourceClaim \"{}/{}\"",
                        c.namespace, c.name
                    ));
                };
                match claims::ready_for_binding(&current) {
                    Err(e) => return Status::error(e),
                    Ok(false) => ready = false,
                    Ok(true) => {}
                }
            }
            if ready {
                return Status::success();
            }
            if waited >= self.args.binding_timeout_ms {
                return Status::error("device binding timeout");
            }
            let (_, ms) = dra::wait_claim_change(generation, self.args.binding_timeout_ms - waited);
            waited += ms;
        }
    }
}

impl Plugin for DynamicResources {
    const NAME: &'static str = "DynamicResources";

    /// The allocator follows the scheduler's DRA feature gates, as upstream's `New`
    /// maps them (`AllocatorFeatures`); a gate the host does not answer keeps its
    /// default.
    fn new(args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(DynamicResources::with_features(
            Args::from_json(args)?,
            Features::from_gates(berth_sdk::feature_gate),
        ))
    }

    // A pod without claims is skipped by PreFilter and left alone everywhere else.
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        &[berth_sdk::PodFeature::ResourceClaims]
    }

    /// As upstream with queueing hints: a node added, relabelled or with new
    /// allocatable; a claim added or updated (hint); the pod's status naming a claim
    /// made for it (hint); a DeviceClass or ResourceSlice added or updated.
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![
            EventRegistration::without_hint(
                EventResource::Node,
                ActionType::ADD
                    | ActionType::UPDATE_NODE_LABEL
                    | ActionType::UPDATE_NODE_ALLOCATABLE,
            ),
            EventRegistration::with_hint(
                EventResource::ResourceClaim,
                ActionType::ADD | ActionType::UPDATE,
            ),
            EventRegistration::with_hint(
                EventResource::UnscheduledPod,
                ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
            ),
            EventRegistration::without_hint(
                EventResource::DeviceClass,
                ActionType::ADD | ActionType::UPDATE,
            ),
            EventRegistration::without_hint(
                EventResource::ResourceSlice,
                ActionType::ADD | ActionType::UPDATE,
            ),
        ])
    }
}

impl EnqueueExtensions for DynamicResources {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::ResourceClaim => Self::after_claim_change(pod, old, new),
            EventResource::UnscheduledPod | EventResource::AssignedPod => {
                Self::after_pod_change(pod, new)
            }
            _ => Ok(QueueingHint::Queue),
        }
    }
}

impl PreEnqueue for DynamicResources {
    fn pre_enqueue(&self, pod: &Pod) -> Status {
        match claims::pod_claims(pod) {
            Ok(_) => Status::success(),
            Err(reason) => Status::unresolvable(reason),
        }
    }
}

impl PreFilter for DynamicResources {
    fn pre_filter(&self, state: &CycleState, pod: &Pod, _nodes: &[&NodeInfo]) -> PreFilterResult {
        // Later points read an empty state as "nothing to do".
        state.set(&STATE, &PreFilterState::default());
        let claims = match claims::pod_claims(pod) {
            Ok(c) => c,
            Err(reason) => return Status::unresolvable(reason).into(),
        };
        let mut view = None;
        // The classes are read only when the pod asks for a resource one may back.
        let requests = pod.requests();
        let extended = if requests.dra_extended_requests().next().is_some() {
            let v = view.get_or_insert_with(|| self.device_view());
            extended::ExtendedState::of(pod, &requests, &v.extended)
        } else {
            None
        };
        if claims.is_empty() && extended.is_none() {
            return Status::skip().into();
        }
        let mut s = PreFilterState {
            available_on_nodes: vec![None; claims.len()],
            ..PreFilterState::default()
        };
        for (index, claim) in claims.iter().enumerate() {
            let reserved_here = claim.is_reserved_for(&pod.uid);
            // Berth's claims read with what other cycles assumed: an allocation in
            // flight shows as one, so this is asked of allocated claims too. A claim
            // another pod's cycle is reserving waits the same way, which keeps two
            // binding cycles from writing one claim's `reservedFor` at once.
            if !reserved_here && dra::claim_allocation_pending(&claim.namespace, &claim.name) {
                return Status::unresolvable(format!(
                    "resource claim {} is in the process of being allocated",
                    claim.key()
                ))
                .into();
            }
            if let Some(allocation) = &claim.status.allocation {
                if !claims::can_be_reserved(claim) && !reserved_here {
                    return Status::unresolvable(ERR_IN_USE).into();
                }
                s.available_on_nodes[index] = allocation.node_selector.clone();
                continue;
            }
            s.to_allocate.push(index);
            let view = view.get_or_insert_with(|| self.device_view());
            for request in &claim.spec.requests {
                let checked = match request {
                    DeviceRequest::Exactly(r) => {
                        Self::check_class(view, &r.device_class_name, &r.name)
                    }
                    DeviceRequest::FirstAvailable { name, subrequests } => {
                        subrequests.iter().try_for_each(|sub| {
                            Self::check_class(
                                view,
                                &sub.device_class_name,
                                &format!("{name}/{}", sub.name),
                            )
                        })
                    }
                };
                if let Err(status) = checked {
                    return status.into();
                }
            }
        }
        let extended_to_allocate = extended.as_ref().is_some_and(|e| e.stale.is_none());
        s.extended = extended;
        if !s.to_allocate.is_empty() || extended_to_allocate {
            match self.current_allocator() {
                Ok((key, _)) => s.allocator = Some(key),
                Err(status) => return status.into(),
            }
        }
        s.claims = claims;
        state.set(&STATE, &s);
        Status::success().into()
    }
}

/// The cycle's state, or the Error status upstream gives when it is missing.
fn read_state(state: &CycleState) -> Result<std::rc::Rc<PreFilterState>, Status> {
    state
        .value(&STATE)
        .ok_or_else(|| Status::error(format!("reading {STATE_KEY:?} from cycleState: not found")))
}

impl Filter for DynamicResources {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let s = match read_state(state) {
            Ok(s) => s,
            Err(status) => return status,
        };
        let mut node_claim = None;
        if let Some(ext) = &s.extended {
            if ext.stale.is_some() {
                // Made by an earlier attempt for the node it chose: PostFilter
                // deletes it, and the next attempt starts anew.
                return Status::unresolvable(ERR_STALE_EXTENDED);
            }
            match ext.needs_on(node) {
                Err(reason) => return Status::unresolvable(reason),
                Ok(needs) if !needs.is_empty() => node_claim = Some(ext.claim_for(pod, &needs)),
                Ok(_) => {}
            }
        }
        if s.claims.is_empty() && node_claim.is_none() {
            // No claim of its own, and the node advertises its extended resources:
            // NodeResourcesFit checks them.
            return Status::success();
        }
        let mut unavailable = Vec::new();
        for (index, claim) in s.claims.iter().enumerate() {
            if let Some(terms) = &s.available_on_nodes[index]
                && !terms
                    .iter()
                    .any(|t| t.matches(&node.node.labels, &node.node.name))
            {
                unavailable.push(index);
                continue;
            }
            if claim.status.allocation.is_none() {
                continue;
            }
            // A device whose binding failed makes the claim unusable until it is
            // deallocated.
            if claims::ready_for_binding(claim).is_err() {
                unavailable.push(index);
            }
        }
        let mut allocations = None;
        if let Some(key) = s.allocator {
            let allocator = match self.cycle_allocator(key) {
                Ok(a) => a,
                Err(status) => return status,
            };
            let mut to_allocate = s.claims_to_allocate();
            if let Some((claim, _)) = &node_claim {
                to_allocate.push(claim);
            }
            match allocator.allocate(&node.node, &to_allocate) {
                Ok(Some(results)) if results.len() == to_allocate.len() => {
                    allocations = Some(results)
                }
                Ok(_) => return Status::unresolvable(ERR_CANNOT_ALLOCATE),
                Err(AllocError::OnNode(reason)) => return Status::unresolvable(reason),
                Err(AllocError::Invalid(e)) => return Status::error(e),
            }
        }
        if !unavailable.is_empty() {
            for index in unavailable {
                state.write(&unavailable_key(index), &true);
            }
            return Status::unresolvable(ERR_NOT_AVAILABLE);
        }
        if let Some(mut results) = allocations {
            let extended = node_claim.map(|(claim, mappings)| {
                let result = results.pop().unwrap_or_default();
                (claim, result, mappings)
            });
            state.write(
                &node_key(&node.node.name),
                &NodeAllocation { results, extended },
            );
        }
        Status::success()
    }
}

impl PostFilter for DynamicResources {
    /// Deallocates one claim of the pod that Filter found allocated where no node
    /// could use it and that no other consumer has reserved (upstream's PostFilter),
    /// so that the next attempt may allocate it anew; the pod stays unschedulable
    /// until then, and the claim's update brings it back. Upstream picks such a claim
    /// at random; Berth the first, in `spec.resourceClaims` order.
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &Pod,
        _nodes: &[(&NodeInfo, Status)],
        _dry_run: &dyn DryRun,
    ) -> PostFilterResult {
        // No state: an earlier PreFilter rejected the pod before this plugin's ran,
        // so it has no claim to free. Upstream 1.37.2 answers Error "not found" here,
        // which ends its PostFilter phase and tails its FailedScheduling message;
        // Berth lets preemption say why it cannot help (the book's "Differences from
        // kube-scheduler" lists this).
        let Some(s) = state.value(&STATE) else {
            return Status::unschedulable("no new claims to deallocate").into();
        };
        if s.claims.is_empty() && s.extended.is_none() {
            return Status::unschedulable("no new claims to deallocate").into();
        }
        for (index, claim) in s.claims.iter().enumerate() {
            if state.read::<bool>(&unavailable_key(index)) != Some(true) {
                continue;
            }
            let reserved = &claim.status.reserved_for;
            if reserved.is_empty() || (reserved.len() == 1 && reserved[0].uid == pod.uid) {
                let mut deallocated = claim.clone();
                deallocated.status = Default::default();
                return match dra::write_resource_claim_status(&deallocated) {
                    Ok(_) => Status::unschedulable("deallocation of ResourceClaim completed"),
                    Err(e) => {
                        Status::error(format!("deallocate resourceclaim {}: {e}", claim.key()))
                    }
                }
                .into();
            }
        }
        if let Some(stale) = s.extended.as_ref().and_then(|e| e.stale.as_ref()) {
            // Made by an earlier attempt whose binding failed: deleted, so that the
            // next attempt makes one for the node it chooses (upstream's PostFilter).
            return match dra::delete_extended_resource_claim(&stale.namespace, &stale.name) {
                Ok(()) => Status::unschedulable("deletion of ResourceClaim completed"),
                Err(e) => Status::error(format!("delete resourceclaim {}: {e}", stale.key())),
            }
            .into();
        }
        Status::unschedulable("still not schedulable").into()
    }
}

impl PreScore for DynamicResources {
    /// Score only matters when some request lists alternatives.
    fn pre_score(
        &self,
        state: &CycleState,
        _pod: &Pod,
        _nodes: &[&NodeInfo],
        _all: &[&NodeInfo],
    ) -> Status {
        let s = match read_state(state) {
            Ok(s) => s,
            Err(status) => return status,
        };
        let prioritized = s.claims.iter().any(|c| {
            c.spec
                .requests
                .iter()
                .any(|r| matches!(r, DeviceRequest::FirstAvailable { .. }))
        });
        if prioritized {
            Status::success()
        } else {
            Status::skip()
        }
    }
}

impl Score for DynamicResources {
    /// For every `firstAvailable` request, `8 - i` where `i` is the alternative that
    /// got devices: from the node's allocation for the claims allocated here, from
    /// the claim's allocation for the others.
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let s = read_state(state)?;
        if s.claims.is_empty() {
            return Ok(0);
        }
        let mut node_results = state
            .read::<NodeAllocation>(&node_key(&node.node.name))
            .unwrap_or_default()
            .results
            .into_iter();
        let mut claims = Vec::with_capacity(s.claims.len());
        let mut results = Vec::with_capacity(s.claims.len());
        for claim in &s.claims {
            let result = match &claim.status.allocation {
                Some(a) => a.clone(),
                None => match node_results.next() {
                    Some(r) => r,
                    // Filter found nothing for this node.
                    None => return Ok(0),
                },
            };
            claims.push(claim);
            results.push(result);
        }
        Ok(berth_dra::prioritized_list_score(&claims, &results))
    }
}

impl NormalizeScore for DynamicResources {
    fn normalize_score(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        berth_sdk::helpers::default_normalize_score(berth_sdk::MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

/// Restores what was assumed of these claims.
fn restore(claims: &[ReservedClaim]) {
    for r in claims {
        dra::restore_resource_claim(&r.claim.namespace, &r.claim.name);
    }
}

impl Reserve for DynamicResources {
    /// Assumes every claim the pod changes: the unallocated ones with the allocation
    /// Filter found on the node, every one with the pod in `reservedFor`.
    fn reserve(&self, state: &CycleState, pod: &Pod, node: &str) -> Status {
        let s = match read_state(state) {
            Ok(s) => s,
            Err(status) => return status,
        };
        if s.claims.is_empty() && s.extended.is_none() {
            return Status::success();
        }
        let found = state.read::<NodeAllocation>(&node_key(node));
        let mut results = Vec::new();
        if !s.to_allocate.is_empty() {
            let Some(found) = &found else {
                return Status::error("claim allocation not found for node");
            };
            if found.results.len() != s.to_allocate.len() {
                return Status::error(format!(
                    "internal error, have {} allocations, {} claims to allocate",
                    found.results.len(),
                    s.to_allocate.len()
                ));
            }
            results = found.results.clone();
        }
        let mut results = results.into_iter();
        let mut assumed: Vec<ReservedClaim> = Vec::new();
        for (index, claim) in s.claims.iter().enumerate() {
            let mut changed = claim.clone();
            let allocated_here = s.to_allocate.contains(&index);
            if allocated_here {
                changed.status.allocation = results.next();
            }
            if !claim.is_reserved_for(&pod.uid) {
                changed.status.reserved_for.push(claims::consumer(pod));
            } else if !allocated_here {
                continue;
            }
            if let Err(e) = dra::assume_resource_claim(&changed) {
                restore(&assumed);
                return Status::error(format!("assume resourceclaim {}: {e}", claim.key()));
            }
            assumed.push(ReservedClaim {
                claim: changed,
                allocated_here,
                extended: None,
            });
        }
        // The claim for the pod's extended resources on this node, if the node gives
        // them as devices: assumed under its name in the cycle until PreBind makes it.
        if let Some((claim, result, mappings)) = found.and_then(|f| f.extended) {
            let mut claim = claim;
            claim.status.allocation = Some(result);
            claim.status.reserved_for = vec![claims::consumer(pod)];
            if let Err(e) = dra::assume_resource_claim(&claim) {
                restore(&assumed);
                return Status::error(format!(
                    "assume the claim for the extended resources of pod {}/{}: {e}",
                    pod.namespace, pod.name
                ));
            }
            assumed.push(ReservedClaim {
                claim,
                allocated_here: true,
                extended: Some(mappings),
            });
        }
        state.write(RESERVED_KEY, &assumed);
        Status::success()
    }

    /// Restores every claim Reserve assumed, and deletes the claim PreBind made for
    /// the pod's extended resources, if it got that far (upstream's
    /// `unreserveExtendedResourceClaim`); idempotent.
    fn unreserve(&self, state: &CycleState, _pod: &Pod, _node: &str) {
        if let Some(assumed) = state.read::<Vec<ReservedClaim>>(RESERVED_KEY) {
            restore(&assumed);
        }
        if let Some((namespace, name)) = state.read::<(String, String)>(CREATED_KEY) {
            // Nothing more to do if it fails: the next attempt finds the claim and
            // PostFilter deletes it.
            let _ = dra::delete_extended_resource_claim(&namespace, &name);
            state.delete(CREATED_KEY);
        }
    }
}

/// How many times PreBind writes a claim that changed meanwhile (upstream's
/// `retry.DefaultRetry`).
const WRITE_ATTEMPTS: usize = 5;

/// Writes what Reserve assumed of a claim (upstream's `bindClaim`). When the write
/// fails and the claim has changed since it was read (a driver's or a user's
/// update), the change is applied again to the claim as it is now, as upstream
/// retries on a conflict: the allocation only while the claim is still unallocated
/// and its devices are still free (assumed again, so that other cycles keep off
/// them), the pod added to `reservedFor` unless it is there.
fn bind_claim(r: &ReservedClaim, pod: &Pod) -> Result<ResourceClaim, String> {
    let what = if r.allocated_here {
        "add allocation and reservation to"
    } else {
        "add reservation to"
    };
    let mut claim = r.claim.clone();
    let mut attempt = 1;
    loop {
        let err = match dra::write_resource_claim_status(&claim) {
            Ok(written) => return Ok(written),
            Err(e) => format!("{what} claim {}: {e}", claim.key()),
        };
        let Some(current) = dra::resource_claim(&claim.namespace, &claim.name) else {
            return Err(err);
        };
        if attempt >= WRITE_ATTEMPTS || current.resource_version == claim.resource_version {
            return Err(err);
        }
        attempt += 1;
        if current.terminating {
            return Err(format!("claim {} got deleted in the meantime", claim.key()));
        }
        let mut next = current;
        if r.allocated_here {
            if next.status.allocation.is_some() && next.status.allocation != claim.status.allocation
            {
                return Err(format!(
                    "claim {} got allocated elsewhere in the meantime",
                    claim.key()
                ));
            }
            let ours = claim.status.allocation.clone().unwrap_or_default();
            let taken = dra::allocated_resource_claims().into_iter().find(|other| {
                (other.namespace != claim.namespace || other.name != claim.name)
                    && other.status.allocation.as_ref().is_some_and(|a| {
                        a.devices.iter().any(|d| {
                            d.admin_access != Some(true)
                                && d.share_id.is_none()
                                && ours.devices.iter().any(|o| o.device_id() == d.device_id())
                        })
                    })
            });
            if let Some(other) = taken {
                return Err(format!(
                    "claim {}: its devices went to claim {} in the meantime",
                    claim.key(),
                    other.key()
                ));
            }
            next.status.allocation = Some(ours);
        }
        if !next.is_reserved_for(&pod.uid) {
            next.status.reserved_for.push(claims::consumer(pod));
        }
        if r.allocated_here {
            dra::assume_resource_claim(&next)
                .map_err(|e| format!("assume resourceclaim {}: {e}", claim.key()))?;
        }
        claim = next;
    }
}

/// Creates the claim for the pod's extended resources, writes its allocation and
/// `reservedFor` (as [`bind_claim`]) and records it in the pod's
/// `status.extendedResourceClaimStatus` (upstream's `bindClaim` for the special
/// claim). The created claim is remembered for Unreserve.
fn bind_extended_claim(
    state: &CycleState,
    r: &ReservedClaim,
    mappings: &[ContainerExtendedResourceRequest],
    pod: &Pod,
) -> Result<ResourceClaim, String> {
    let mut spec_only = r.claim.clone();
    spec_only.status = Default::default();
    let created = dra::create_extended_resource_claim(&spec_only)?;
    state.write(
        CREATED_KEY,
        &(created.namespace.clone(), created.name.clone()),
    );
    let mut with_status = created.clone();
    with_status.status = r.claim.status.clone();
    let written = bind_claim(
        &ReservedClaim {
            claim: with_status,
            allocated_here: true,
            extended: None,
        },
        pod,
    )?;
    if mappings.is_empty() {
        return Err(format!(
            "nil or empty request mappings, no update of pod {}/{} ExtendedResourceClaimStatus",
            pod.namespace, pod.name
        ));
    }
    let status = berth_sdk::PodExtendedResourceClaimStatus {
        resource_claim_name: written.name.clone(),
        request_mappings: mappings.to_vec(),
    };
    dra::write_extended_resource_claim_status(pod, &status).map_err(|e| {
        format!(
            "update pod {}/{} ExtendedResourceClaimStatus: {e}",
            pod.namespace, pod.name
        )
    })?;
    Ok(written)
}

impl PreBind for DynamicResources {
    /// Writes the claims Reserve changed (upstream's `bindClaim`), then waits for the
    /// binding conditions of their devices.
    fn pre_bind(&self, state: &CycleState, pod: &Pod, _node: &str) -> Status {
        let Some(reserved) = state.read::<Vec<ReservedClaim>>(RESERVED_KEY) else {
            // No claims, or nothing changed.
            return Status::success();
        };
        let mut written = Vec::with_capacity(reserved.len());
        for r in &reserved {
            let result = match &r.extended {
                Some(mappings) => bind_extended_claim(state, r, mappings, pod),
                None => bind_claim(r, pod),
            };
            match result {
                Ok(claim) => written.push(claim),
                Err(e) => return Status::error(e),
            }
        }
        let mut waiting: Vec<ResourceClaim> = Vec::new();
        if let Some(s) = state.value(&STATE) {
            // Every claim of the pod counts, the ones allocated before too.
            for claim in &s.claims {
                let current = written
                    .iter()
                    .find(|w| w.namespace == claim.namespace && w.name == claim.name)
                    .unwrap_or(claim);
                if claims::has_binding_conditions(current) {
                    waiting.push(current.clone());
                }
            }
        }
        // The claim made for the pod's extended resources counts too.
        for (r, w) in reserved.iter().zip(&written) {
            if r.extended.is_some() && claims::has_binding_conditions(w) {
                waiting.push(w.clone());
            }
        }
        if waiting.is_empty() {
            return Status::success();
        }
        self.wait_for_binding_conditions(&waiting)
    }
}

impl Sign for DynamicResources {
    /// A pod with claims cannot be signed, as upstream: whether its devices can be
    /// allocated on a node depends on the claims' state and on the devices the pods
    /// placed before it took (and a claim may be shared). The same goes for a pod
    /// whose DRA-backed extended resources the scheduler has made a claim for
    /// (`status.extendedResourceClaimStatus`). Any other pod is skipped by PreFilter
    /// and left alone by Filter and Score: it signs with no fragment.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        if !pod.resource_claims.is_empty() {
            return sign::unsignable("pods with resource claims are not signable");
        }
        if pod.extended_resource_claim_status.is_some() {
            return sign::unsignable(
                "pods with a claim for DRA-backed extended resources are not signable",
            );
        }
        let requests = pod.requests();
        if requests.dra_extended_requests().next().is_some()
            && extended::backs_any(&requests, &self.device_view().extended)
        {
            // Each such pod gets devices of its own through a claim: as a pod with
            // claims.
            return sign::unsignable("pods with extended resources backed by DRA are not signable");
        }
        Ok(Vec::new())
    }
}

berth_sdk::export_plugin!(DynamicResources: queueing_hint, pre_enqueue, pre_filter, filter, post_filter, pre_score, score, normalize_score, reserve, pre_bind, sign_pod);

#[cfg(test)]
mod tests;
