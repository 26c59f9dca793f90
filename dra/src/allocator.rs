//! The structured allocator: finds devices for a pod's unallocated claims on one
//! node (upstream's "incubating" allocator of `k8s.io/dynamic-resource-allocation`).
//!
//! The search is exhaustive and stops at the first full solution: claim after claim,
//! request after request, device after device, each candidate checked against what
//! is in use, the class's and the request's selectors, the claim's constraints,
//! taints, counters and capacity; on a dead end it backtracks. Devices of one request
//! are tried as combinations, not permutations. A `firstAvailable` request tries its
//! subrequests in order.

use crate::allocated::{AllocatedState, ConsumedCapacity};
use crate::capacity;
use crate::cel::SelectorCache;
use crate::pools::{Pool, gather_pools, node_matches};
use crate::{AllocError, Features};
use berth_sdk::Node;
use berth_sdk::affinity::{NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm};
use berth_sdk::dra::{
    AllocationConfigSource, AllocationMode, AllocationResult, Device,
    DeviceAllocationConfiguration, DeviceAttribute, DeviceClass, DeviceConstraint, DeviceId,
    DeviceRequest, DeviceRequestAllocationResult, DeviceSelector, DeviceSubRequest,
    DeviceTaintEffect, DeviceTaintRule, ResourceClaim, ResourceSlice, SliceNodes,
};
use berth_sdk::quantity::Amount;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// The most devices one claim may get (`AllocationResultsMaxSize`).
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

/// The most subrequests a `firstAvailable` request may have
/// (`FirstAvailableDeviceRequestMaxSize`).
pub const FIRST_AVAILABLE_MAX_SIZE: i64 = 8;

/// The device classes and resource slices allocators draw from, taint rules applied
/// to the devices: built once while the devices stand, and shared by the allocators
/// of every set of allocated claims seen meanwhile.
#[derive(Debug)]
pub struct Devices {
    classes: BTreeMap<String, DeviceClass>,
    slices: Vec<ResourceSlice>,
}

impl Devices {
    /// The classes and slices, with the taint of each rule on the devices it selects
    /// (with device taints on), as upstream's scheduler puts them before the
    /// allocator sees the slices.
    pub fn new(
        features: &Features,
        classes: Vec<DeviceClass>,
        mut slices: Vec<ResourceSlice>,
        taint_rules: &[DeviceTaintRule],
    ) -> Devices {
        if features.device_taints && !taint_rules.is_empty() {
            for slice in &mut slices {
                for device in &mut slice.devices {
                    for rule in taint_rules {
                        if rule
                            .selector
                            .selects(&slice.driver, &slice.pool.name, &device.name)
                        {
                            device.taints.push(rule.taint.clone());
                        }
                    }
                }
            }
        }
        Devices {
            classes: classes.into_iter().map(|c| (c.name.clone(), c)).collect(),
            slices,
        }
    }
}

/// Allocates claims from a fixed view of the cluster: the device classes, the
/// resource slices, what is allocated already, and the taint rules. Built once per
/// scheduling cycle, asked once per node.
#[derive(Debug)]
pub struct Allocator {
    features: Features,
    devices: Arc<Devices>,
    allocated: AllocatedState,
    selectors: Arc<SelectorCache>,
    /// How many steps the searches of this allocator took (upstream's
    /// `NumAllocateOneInvocations`): a measure of its work.
    steps: AtomicI64,
}

impl Allocator {
    /// An allocator over these objects (see [`Devices::new`] for the taint rules).
    pub fn new(
        features: Features,
        classes: Vec<DeviceClass>,
        slices: Vec<ResourceSlice>,
        allocated: AllocatedState,
        taint_rules: &[DeviceTaintRule],
    ) -> Allocator {
        let devices = Arc::new(Devices::new(&features, classes, slices, taint_rules));
        Allocator::with_devices(features, devices, allocated)
    }

    /// An allocator over devices already prepared, with `allocated` in use.
    pub fn with_devices(
        features: Features,
        devices: Arc<Devices>,
        allocated: AllocatedState,
    ) -> Allocator {
        Allocator {
            features,
            devices,
            allocated,
            selectors: Arc::new(SelectorCache::new()),
            steps: AtomicI64::new(0),
        }
    }

    /// How many search steps all allocations of this allocator took so far
    /// (upstream's `Stats.NumAllocateOneInvocations`).
    pub fn search_steps(&self) -> i64 {
        self.steps.load(Ordering::Relaxed)
    }

    /// Uses this cache of compiled selectors (one kept across cycles compiles each
    /// expression once).
    pub fn with_selector_cache(mut self, cache: Arc<SelectorCache>) -> Allocator {
        self.selectors = cache;
        self
    }

    /// Allocates the claims on the node: one result per claim, in order; `None` when
    /// they cannot all be allocated there (including while a pool they would need is
    /// being updated); an error for input that no node can fix (a missing class, a
    /// CEL error, an impossible request) or, as [`AllocError::OnNode`], for invalid
    /// pools that kept this node from being used.
    pub fn allocate(
        &self,
        node: &Node,
        claims: &[&ResourceClaim],
    ) -> Result<Option<Vec<AllocationResult>>, AllocError> {
        let all: Vec<&ResourceSlice> = self.devices.slices.iter().collect();
        let for_node: Vec<&ResourceSlice> = self
            .devices
            .slices
            .iter()
            .filter(|s| match &s.nodes {
                SliceNodes::NodeName(n) => *n == node.name,
                _ => true,
            })
            .collect();
        let pools = gather_pools(&for_node, node, &self.features, &all);
        let mut search = Search::new(self, node, claims, pools);
        search.prepare()?;
        match search.allocate_one(Position::default(), false, Location::default()) {
            Ok(true) => {}
            Ok(false) | Err(Stop::MaxSize) => {
                if search.pools.iter().any(|p| p.invalid) {
                    return Err(AllocError::OnNode(
                        "invalid resource pools were encountered".to_owned(),
                    ));
                }
                return Ok(None);
            }
            Err(Stop::Error(e)) => return Err(e),
        }
        search.results().map(Some)
    }
}

/// `namespace/name`, or the name alone without a namespace (klog's `KObj`).
fn claim_ref(claim: &ResourceClaim) -> String {
    if claim.namespace.is_empty() {
        claim.name.clone()
    } else {
        claim.key()
    }
}

/// A request or one subrequest of a `firstAvailable` request.
#[derive(Clone, Copy, Debug)]
struct Request<'a> {
    request: &'a DeviceSubRequest,
    /// The name of the `firstAvailable` request this subrequest belongs to.
    parent: Option<&'a str>,
}

impl Request<'_> {
    fn name(&self) -> &str {
        &self.request.name
    }

    /// `<request>` or `<request>/<subrequest>`.
    fn full_name(&self) -> String {
        match self.parent {
            Some(p) => format!("{p}/{}", self.request.name),
            None => self.request.name.clone(),
        }
    }

    fn admin_access(&self) -> bool {
        self.parent.is_none() && self.request.admin_access
    }
}

/// Identifies a request (`sub` is 0 for a request without subrequests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct RequestKey {
    claim: usize,
    request: usize,
    sub: usize,
}

/// The device being looked for: which claim, request, subrequest and which of the
/// request's devices.
#[derive(Clone, Copy, Debug, Default)]
struct Position {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

impl Position {
    fn key(&self) -> RequestKey {
        RequestKey {
            claim: self.claim,
            request: self.request,
            sub: self.sub,
        }
    }
}

/// Where a device sits in the pools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct Location {
    pool: usize,
    slice: usize,
    device: usize,
}

struct RequestData<'a> {
    request: Request<'a>,
    class: &'a DeviceClass,
    /// How many devices it asks for (upstream's Go `int`, 64 bits), on every target.
    count: i64,
    /// `count`, for the search: capped just past the claim limit, where any larger
    /// count fails alike, so that it fits a 32-bit `usize` as well.
    num_devices: usize,
    /// For `All`: the devices, chosen up front.
    all_devices: Vec<Location>,
    /// On the entry of a request's first subrequest: the one that got picked.
    selected_sub: usize,
}

/// One device of a claim's result.
struct Chosen<'a> {
    request: Request<'a>,
    location: Location,
    id: DeviceId,
    share_id: Option<String>,
    consumed: BTreeMap<String, Amount>,
}

/// How the search stops early.
enum Stop {
    /// The claim would get more than [`ALLOCATION_RESULTS_MAX_SIZE`] devices.
    MaxSize,
    /// A real error.
    Error(AllocError),
}

impl From<AllocError> for Stop {
    fn from(e: AllocError) -> Self {
        Stop::Error(e)
    }
}

/// A constraint across the requests of a claim.
enum Constraint {
    Match {
        requests: BTreeSet<String>,
        attribute: String,
        value: Option<DeviceAttribute>,
        count: usize,
    },
    Distinct {
        requests: BTreeSet<String>,
        attribute: String,
        /// By request name, as upstream keeps them.
        values: BTreeMap<String, DeviceAttribute>,
        count: usize,
    },
}

fn applies(requests: &BTreeSet<String>, request: &str, sub: Option<&str>) -> bool {
    requests.is_empty()
        || requests.contains(request)
        || sub.is_some_and(|s| requests.contains(&format!("{request}/{s}")))
}

/// The attribute by fully qualified name: as written, or by its bare name when the
/// domain is the driver's.
fn lookup_attribute<'d>(
    device: &'d Device,
    driver: &str,
    name: &str,
) -> Option<&'d DeviceAttribute> {
    if let Some(a) = device.attributes.get(name) {
        return Some(a);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    device.attributes.get(id)
}

impl Constraint {
    fn add(&mut self, request: &str, sub: Option<&str>, device: &Device, driver: &str) -> bool {
        match self {
            Constraint::Match {
                requests,
                attribute,
                value,
                count,
            } => {
                if !applies(requests, request, sub) {
                    return true;
                }
                let Some(a) = lookup_attribute(device, driver, attribute) else {
                    return false;
                };
                if *count == 0 {
                    *value = Some(a.clone());
                } else if value.as_ref() != Some(a) {
                    return false;
                }
                *count += 1;
                true
            }
            Constraint::Distinct {
                requests,
                attribute,
                values,
                count,
            } => {
                if !applies(requests, request, sub) {
                    return true;
                }
                let Some(a) = lookup_attribute(device, driver, attribute) else {
                    return false;
                };
                if *count > 0 && values.values().any(|v| v == a) {
                    return false;
                }
                values.insert(request.to_owned(), a.clone());
                *count += 1;
                true
            }
        }
    }

    fn remove(&mut self, request: &str, sub: Option<&str>) {
        match self {
            Constraint::Match {
                requests, count, ..
            } => {
                if applies(requests, request, sub) {
                    *count -= 1;
                }
            }
            Constraint::Distinct {
                requests,
                values,
                count,
                ..
            } => {
                if applies(requests, request, sub) {
                    values.remove(request);
                    *count -= 1;
                }
            }
        }
    }
}

/// What allocating one device changed, to undo it when the search backtracks.
struct Undo {
    claim: usize,
    request: String,
    sub: Option<String>,
    id: DeviceId,
    shared: bool,
    location: Location,
    consumed: ConsumedCapacity,
    counters: bool,
}

/// Counters by counter set and name, in nano-units.
type Counters = BTreeMap<String, BTreeMap<String, i128>>;

/// One run of [`Allocator::allocate`].
struct Search<'a> {
    alloc: &'a Allocator,
    node: &'a Node,
    claims: &'a [&'a ResourceClaim],
    pools: Vec<Pool<'a>>,
    requests: HashMap<RequestKey, RequestData<'a>>,
    constraints: Vec<Vec<Constraint>>,
    matches: HashMap<(Location, RequestKey), bool>,
    /// Devices being allocated exclusively, and for which claims.
    allocating: HashMap<DeviceId, BTreeSet<usize>>,
    /// Capacity being allocated from shared devices.
    allocating_capacity: HashMap<DeviceId, ConsumedCapacity>,
    /// Counters still available per pool (counter sets minus allocated devices).
    available_counters: HashMap<usize, Counters>,
    /// Counters consumed by the devices being allocated, per pool.
    consumed_counters: HashMap<usize, Counters>,
    results: Vec<Vec<Chosen<'a>>>,
}

impl<'a> Search<'a> {
    fn new(
        alloc: &'a Allocator,
        node: &'a Node,
        claims: &'a [&'a ResourceClaim],
        pools: Vec<Pool<'a>>,
    ) -> Search<'a> {
        Search {
            alloc,
            node,
            claims,
            pools,
            requests: HashMap::new(),
            constraints: Vec::new(),
            matches: HashMap::new(),
            allocating: HashMap::new(),
            allocating_capacity: HashMap::new(),
            available_counters: HashMap::new(),
            consumed_counters: HashMap::new(),
            results: claims.iter().map(|_| Vec::new()).collect(),
        }
    }

    fn features(&self) -> &Features {
        &self.alloc.features
    }

    /// Checks every claim and request, finds their classes, and counts how many
    /// devices each needs (for `All`: which ones).
    fn prepare(&mut self) -> Result<(), AllocError> {
        for (ci, claim) in self.claims.iter().enumerate() {
            // Not in `usize`, which has 32 bits in the guest: exact on every target, so
            // that a twin and its component refuse the same claims with the same count.
            let mut min_devices = 0i128;
            for (ri, request) in claim.spec.requests.iter().enumerate() {
                match request {
                    DeviceRequest::Exactly(r) => {
                        if !self.features().consumable_capacity && !r.capacity.is_empty() {
                            return Err(AllocError::Invalid(format!(
                                "claim {}, request {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                                claim_ref(claim),
                                r.name
                            )));
                        }
                        let key = RequestKey {
                            claim: ci,
                            request: ri,
                            sub: 0,
                        };
                        let data = self.validate(
                            Request {
                                request: r,
                                parent: None,
                            },
                            key,
                        )?;
                        min_devices += i128::from(data.count);
                        self.requests.insert(key, data);
                    }
                    DeviceRequest::FirstAvailable { name, subrequests } => {
                        if !self.features().prioritized_list {
                            return Err(AllocError::Invalid(format!(
                                "claim {}, request {name}: has subrequests, but the DRAPrioritizedList feature is disabled",
                                claim_ref(claim)
                            )));
                        }
                        if !self.features().consumable_capacity
                            && let Some(s) = subrequests.iter().find(|s| !s.capacity.is_empty())
                        {
                            return Err(AllocError::Invalid(format!(
                                "claim {}, subrequest {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                                claim_ref(claim),
                                s.name
                            )));
                        }
                        let mut fewest: Option<i64> = None;
                        for (si, s) in subrequests.iter().enumerate() {
                            let key = RequestKey {
                                claim: ci,
                                request: ri,
                                sub: si,
                            };
                            let data = self.validate(
                                Request {
                                    request: s,
                                    parent: Some(name),
                                },
                                key,
                            )?;
                            fewest = Some(fewest.map_or(data.count, |f| f.min(data.count)));
                            self.requests.insert(key, data);
                        }
                        if let Some(fewest) = fewest {
                            min_devices += i128::from(fewest);
                        }
                    }
                }
            }
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE as i128 {
                return Err(AllocError::Invalid(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}",
                    claim_ref(claim)
                )));
            }
            let mut constraints = Vec::new();
            for (i, c) in claim.spec.constraints.iter().enumerate() {
                let requests: BTreeSet<String> = c.requests.iter().cloned().collect();
                constraints.push(match c {
                    DeviceConstraint {
                        match_attribute: Some(a),
                        ..
                    } => Constraint::Match {
                        requests,
                        attribute: a.clone(),
                        value: None,
                        count: 0,
                    },
                    DeviceConstraint {
                        distinct_attribute: Some(a),
                        ..
                    } => Constraint::Distinct {
                        requests,
                        attribute: a.clone(),
                        values: BTreeMap::new(),
                        count: 0,
                    },
                    _ => {
                        return Err(AllocError::Invalid(format!(
                            "claim {}, constraint #{i}: empty constraint (unsupported constraint type?)",
                            claim_ref(claim)
                        )));
                    }
                });
            }
            self.constraints.push(constraints);
        }
        Ok(())
    }

    fn validate(
        &mut self,
        request: Request<'a>,
        key: RequestKey,
    ) -> Result<RequestData<'a>, AllocError> {
        let claim = self.claims[key.claim];
        let r = request.request;
        if !self.features().admin_access && request.admin_access() {
            return Err(AllocError::Invalid(format!(
                "claim {}, request {}: admin access is requested, but the feature is disabled",
                claim_ref(claim),
                request.name()
            )));
        }
        if r.device_class_name.is_empty() {
            return Err(AllocError::Invalid(format!(
                "claim {}, request {}: missing device class name (unsupported request type?)",
                claim_ref(claim),
                request.name()
            )));
        }
        let class = self
            .alloc
            .devices
            .classes
            .get(&r.device_class_name)
            .ok_or_else(|| {
                AllocError::Invalid(format!(
                    "claim {}, request {}: could not retrieve device class {}: not found",
                    claim_ref(claim),
                    request.name(),
                    r.device_class_name
                ))
            })?;
        let mut data = RequestData {
            request,
            class,
            count: 0,
            num_devices: 0,
            all_devices: Vec::new(),
            selected_sub: 0,
        };
        match r.allocation_mode {
            AllocationMode::ExactCount(n) => {
                if n < 0 {
                    return Err(AllocError::Invalid(format!(
                        "claim {}, request {}: exact count {n} is invalid",
                        claim_ref(claim),
                        request.name()
                    )));
                }
                data.count = n;
                data.num_devices = n.min(ALLOCATION_RESULTS_MAX_SIZE as i64 + 1) as usize;
            }
            AllocationMode::All => {
                for pi in 0..self.pools.len() {
                    let pool = &self.pools[pi];
                    if pool.incomplete {
                        return Err(AllocError::Invalid(format!(
                            "claim {}, request {}: asks for all devices, but resource pool {} is currently being updated",
                            claim_ref(claim),
                            request.name(),
                            pool.id()
                        )));
                    }
                    if pool.invalid {
                        return Err(AllocError::Invalid(format!(
                            "claim {}, request {}: asks for all devices, but resource pool {} is currently invalid",
                            claim_ref(claim),
                            request.name(),
                            pool.id()
                        )));
                    }
                    for si in 0..pool.slices.len() {
                        for di in 0..self.pools[pi].slices[si].devices.len() {
                            let location = Location {
                                pool: pi,
                                slice: si,
                                device: di,
                            };
                            if !self.is_selectable(key, data.request, data.class, location)? {
                                continue;
                            }
                            if self.features().consumable_capacity
                                && !self.capacity_fits(request, location)
                            {
                                continue;
                            }
                            data.all_devices.push(location);
                        }
                    }
                }
                data.num_devices = data.all_devices.len();
                data.count = i64::try_from(data.num_devices).unwrap_or(i64::MAX);
            }
        }
        Ok(data)
    }

    fn device(&self, l: Location) -> (&'a ResourceSlice, &'a Device) {
        let slice = self.pools[l.pool].slices[l.slice];
        (slice, &slice.devices[l.device])
    }

    fn device_id(&self, l: Location) -> DeviceId {
        let (slice, device) = self.device(l);
        DeviceId {
            driver: slice.driver.clone(),
            pool: slice.pool.name.clone(),
            device: device.name.clone(),
        }
    }

    /// Whether the device matches the class's and the request's selectors and, with
    /// per-device node selection, is reachable from the node.
    fn is_selectable(
        &mut self,
        key: RequestKey,
        request: Request<'a>,
        class: &'a DeviceClass,
        location: Location,
    ) -> Result<bool, AllocError> {
        let (slice, device) = self.device(location);
        if !self.features().device_binding_conditions && !device.binding_conditions.is_empty() {
            return Ok(false);
        }
        if let Some(m) = self.matches.get(&(location, key)) {
            return Ok(*m);
        }
        let selectable = self.selectors_match(key, location, Some(class), &class.selectors)?
            && self.selectors_match(key, location, None, &request.request.selectors)?
            && (!matches!(slice.nodes, SliceNodes::PerDevice)
                || node_matches(
                    self.node,
                    device.node_name.as_deref(),
                    device.all_nodes,
                    device.node_selector.as_deref(),
                ));
        self.matches.insert((location, key), selectable);
        Ok(selectable)
    }

    fn selectors_match(
        &self,
        key: RequestKey,
        location: Location,
        class: Option<&DeviceClass>,
        selectors: &[DeviceSelector],
    ) -> Result<bool, AllocError> {
        let (slice, device) = self.device(location);
        let owner = || match class {
            Some(c) => format!("class {}", c.name),
            None => format!("claim {}", claim_ref(self.claims[key.claim])),
        };
        for (i, selector) in selectors.iter().enumerate() {
            let compiled = self.alloc.selectors.get_or_compile(&selector.expression);
            if let Some(e) = compiled.compile_error() {
                return Err(AllocError::Invalid(format!(
                    "{}: selector #{i} ({:?}): CEL compile error: {e}",
                    owner(),
                    selector.expression
                )));
            }
            match compiled.device_matches(&slice.driver, device) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => {
                    return Err(AllocError::Invalid(format!(
                        "{}: selector #{i} ({:?}) on device {}: CEL runtime error: {e}",
                        owner(),
                        selector.expression,
                        self.device_id(location)
                    )));
                }
            }
        }
        Ok(true)
    }

    /// Whether the device has the capacity the request asks for (with consumable
    /// capacity on); a request for a capacity the device lacks does not fit.
    fn capacity_fits(&self, request: Request<'a>, location: Location) -> bool {
        let (_, device) = self.device(location);
        let id = self.device_id(location);
        capacity::fits(
            self.alloc.allocated.consumed_capacity.get(&id),
            &request.request.capacity,
            &device.capacity,
            self.allocating_capacity.get(&id),
        )
        .unwrap_or(false)
    }

    fn in_use(&self, id: &DeviceId) -> bool {
        self.alloc.allocated.devices.contains(id)
            || self.allocating.get(id).is_some_and(|c| !c.is_empty())
    }

    fn allocating_for_claim(&self, id: &DeviceId, claim: usize) -> bool {
        self.allocating.get(id).is_some_and(|c| c.contains(&claim))
    }

    /// Looks for the device at `r` and everything after it; `true` once all claims
    /// are allocated.
    fn allocate_one(
        &mut self,
        r: Position,
        in_subrequest: bool,
        start: Location,
    ) -> Result<bool, Stop> {
        self.alloc.steps.fetch_add(1, Ordering::Relaxed);
        if r.claim >= self.claims.len() {
            return Ok(true);
        }
        let claim = self.claims[r.claim];
        if r.request >= claim.spec.requests.len() {
            let next = Position {
                claim: r.claim + 1,
                ..Position::default()
            };
            return match self.allocate_one(next, false, Location::default()) {
                // Another allocation of the earlier claims may leave room here.
                Err(Stop::MaxSize) => Ok(false),
                other => other,
            };
        }
        let key = r.key();
        let Some(data) = self.requests.get(&key) else {
            // A `firstAvailable` request without subrequests: nothing to allocate.
            return self.allocate_one(
                Position {
                    claim: r.claim,
                    request: r.request + 1,
                    ..Position::default()
                },
                false,
                Location::default(),
            );
        };
        let (request, class, num_devices, all_empty) = (
            data.request,
            data.class,
            data.num_devices,
            data.all_devices.is_empty(),
        );
        if !in_subrequest && request.parent.is_some() {
            let mut all_exceeded = true;
            for sub in 0.. {
                let sub_key = RequestKey { sub, ..key };
                if !self.requests.contains_key(&sub_key) {
                    return if all_exceeded {
                        Err(Stop::MaxSize)
                    } else {
                        Ok(false)
                    };
                }
                match self.allocate_one(Position { sub, ..r }, true, Location::default()) {
                    Err(Stop::MaxSize) => continue,
                    Err(e) => return Err(e),
                    Ok(done) => {
                        all_exceeded = false;
                        if done {
                            if let Some(first) = self.requests.get_mut(&key) {
                                first.selected_sub = sub;
                            }
                            return Ok(true);
                        }
                    }
                }
            }
        }
        let all = matches!(request.request.allocation_mode, AllocationMode::All);
        if all && all_empty {
            return Ok(false);
        }
        if r.device >= num_devices {
            return self.allocate_one(
                Position {
                    claim: r.claim,
                    request: r.request + 1,
                    ..Position::default()
                },
                false,
                Location::default(),
            );
        }
        if self.results[r.claim].len() + num_devices - r.device > ALLOCATION_RESULTS_MAX_SIZE {
            return Err(Stop::MaxSize);
        }
        let next = Position {
            device: r.device + 1,
            ..r
        };
        if all {
            let location = self.requests[&key].all_devices[r.device];
            let Some(undo) = self.allocate_device(r, location, true)? else {
                return Ok(false);
            };
            let done = self.allocate_one(next, in_subrequest, Location::default());
            if !matches!(done, Ok(true)) {
                self.deallocate(undo);
            }
            return done;
        }
        for pi in start.pool..self.pools.len() {
            let pool = &self.pools[pi];
            if pool.incomplete || pool.invalid {
                continue;
            }
            let slice_start = if pi == start.pool { start.slice } else { 0 };
            for si in slice_start..pool.slices.len() {
                let device_start = if pi == start.pool && si == start.slice {
                    start.device
                } else {
                    0
                };
                for di in device_start..self.pools[pi].slices[si].devices.len() {
                    let location = Location {
                        pool: pi,
                        slice: si,
                        device: di,
                    };
                    let id = self.device_id(location);
                    if request.admin_access() && self.allocating_for_claim(&id, r.claim) {
                        continue;
                    }
                    if !request.admin_access() && self.in_use(&id) {
                        continue;
                    }
                    if !self.is_selectable(key, request, class, location)? {
                        continue;
                    }
                    if self.features().consumable_capacity && !self.capacity_fits(request, location)
                    {
                        continue;
                    }
                    let Some(undo) = self.allocate_device(r, location, false)? else {
                        continue;
                    };
                    let after = Location {
                        pool: pi,
                        slice: si,
                        device: di + 1,
                    };
                    match self.allocate_one(next, in_subrequest, after) {
                        Ok(true) => return Ok(true),
                        Ok(false) => self.deallocate(undo),
                        Err(e) => {
                            self.deallocate(undo);
                            return Err(e);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// Takes the device for the request if it is free, untainted (or tolerated),
    /// within its counters and capacity and the claim's constraints. `must`: the
    /// request needs exactly this device (`All`), so a violated constraint is an
    /// error.
    fn allocate_device(
        &mut self,
        r: Position,
        location: Location,
        must: bool,
    ) -> Result<Option<Undo>, Stop> {
        let (slice, device) = self.device(location);
        let id = self.device_id(location);
        let request = self.requests[&r.key()].request;
        let shared = self.features().consumable_capacity && device.allow_multiple_allocations;
        if !shared && request.admin_access() && self.allocating_for_claim(&id, r.claim) {
            return Ok(None);
        }
        if !request.admin_access() && self.in_use(&id) {
            return Ok(None);
        }
        if !self.features().partitionable_devices && !device.consumes_counters.is_empty() {
            return Ok(None);
        }
        // Shared already: by a share that consumed capacity, by one that consumed
        // none (recorded as a share alone), or by a share of this search.
        let capacity_in_use = self.alloc.allocated.consumed_capacity.contains_key(&id)
            || self.alloc.allocated.shares.iter().any(|(d, _)| *d == id)
            || self.allocating_capacity.contains_key(&id);
        let mut counters = false;
        // A share of a device whose capacity is in use already counts its
        // counters once, with the first share.
        let counts = !(device.consumes_counters.is_empty() || shared && capacity_in_use);
        if counts {
            if !self.take_counters(location)? {
                return Ok(None);
            }
            counters = true;
        }
        if self.features().device_taints && taint_prevents(device, request.request) {
            if counters {
                self.release_counters(location);
            }
            return Ok(None);
        }
        let (base, sub) = match request.parent {
            Some(p) => (p, Some(request.name())),
            None => (request.name(), None),
        };
        let constraints = &mut self.constraints[r.claim];
        for i in 0..constraints.len() {
            if !constraints[i].add(base, sub, device, &slice.driver) {
                for c in &mut constraints[..i] {
                    c.remove(base, sub);
                }
                if counters {
                    self.release_counters(location);
                }
                if must {
                    return Err(Stop::Error(AllocError::Invalid(format!(
                        "claim {}, request {}: cannot add device {id} because a claim constraint would not be satisfied",
                        claim_ref(self.claims[r.claim]),
                        request.name()
                    ))));
                }
                return Ok(None);
            }
        }
        let entry = self.allocating.entry(id.clone()).or_default();
        if !shared {
            entry.insert(r.claim);
        }
        let mut consumed = BTreeMap::new();
        let mut share_id = None;
        if self.features().consumable_capacity {
            // Checked again: the devices of an `All` request were chosen before the
            // claim's other requests took their shares.
            if !self.capacity_fits(request, location) {
                self.undo_partial(r.claim, base, sub, &id, location, counters);
                return Ok(None);
            }
            if shared {
                match capacity::consumed_by(&request.request.capacity, &device.capacity) {
                    Ok(c) => consumed = c,
                    Err(_) => {
                        self.undo_partial(r.claim, base, sub, &id, location, counters);
                        return Ok(None);
                    }
                }
                let taken = self.allocating_capacity.entry(id.clone()).or_default();
                for (name, a) in &consumed {
                    *taken.entry(name.clone()).or_default() += a.nanos;
                }
                share_id = Some(share_id_for(
                    self.claims[r.claim],
                    self.results[r.claim].len(),
                    &id,
                ));
            }
        }
        let consumed_nanos: ConsumedCapacity =
            consumed.iter().map(|(k, a)| (k.clone(), a.nanos)).collect();
        self.results[r.claim].push(Chosen {
            request,
            location,
            id: id.clone(),
            share_id,
            consumed,
        });
        Ok(Some(Undo {
            claim: r.claim,
            request: base.to_owned(),
            sub: sub.map(str::to_owned),
            id,
            shared,
            location,
            consumed: consumed_nanos,
            counters,
        }))
    }

    fn undo_partial(
        &mut self,
        claim: usize,
        base: &str,
        sub: Option<&str>,
        id: &DeviceId,
        location: Location,
        counters: bool,
    ) {
        for c in &mut self.constraints[claim] {
            c.remove(base, sub);
        }
        if let Some(e) = self.allocating.get_mut(id) {
            e.remove(&claim);
        }
        if counters {
            self.release_counters(location);
        }
    }

    fn deallocate(&mut self, undo: Undo) {
        for c in &mut self.constraints[undo.claim] {
            c.remove(&undo.request, undo.sub.as_deref());
        }
        if let Some(e) = self.allocating.get_mut(&undo.id) {
            e.remove(&undo.claim);
        }
        if undo.shared
            && let Some(taken) = self.allocating_capacity.get_mut(&undo.id)
        {
            for (name, n) in &undo.consumed {
                if let Some(t) = taken.get_mut(name) {
                    *t -= n;
                }
            }
            if taken.values().all(|v| *v == 0) {
                self.allocating_capacity.remove(&undo.id);
            }
        }
        if undo.counters {
            self.release_counters(undo.location);
        }
        self.results[undo.claim].pop();
    }

    /// The pool's counters minus what its allocated devices consume.
    fn available_counters(&mut self, pool_index: usize) -> Result<&Counters, AllocError> {
        if !self.available_counters.contains_key(&pool_index) {
            let pool = &self.pools[pool_index];
            let mut available = Counters::new();
            for (name, set) in &pool.counter_sets {
                let counters = available.entry((*name).to_owned()).or_default();
                for (counter, c) in &set.counters {
                    let a = c.amount().map_err(|e| {
                        AllocError::Invalid(format!(
                            "resource pool {}: sharedCounters {name}: counter {counter}: {e}",
                            pool.id()
                        ))
                    })?;
                    counters.insert(counter.clone(), a.nanos);
                }
            }
            for slice in pool.slices.iter().chain(&pool.other_slices) {
                for device in &slice.devices {
                    let id = DeviceId {
                        driver: slice.driver.clone(),
                        pool: slice.pool.name.clone(),
                        device: device.name.clone(),
                    };
                    if !self.alloc.allocated.is_allocated(&id) {
                        continue;
                    }
                    for consumption in &device.consumes_counters {
                        let Some(set) = available.get_mut(&consumption.counter_set) else {
                            continue;
                        };
                        for (counter, q) in &consumption.counters {
                            let Some(have) = set.get_mut(counter) else {
                                continue;
                            };
                            let a = q.amount().map_err(|e| {
                                AllocError::Invalid(format!(
                                    "resource slice {}: device {}: consumesCounters {}: counter {counter}: {e}",
                                    slice.name, device.name, consumption.counter_set
                                ))
                            })?;
                            *have -= a.nanos;
                        }
                    }
                }
            }
            self.available_counters.insert(pool_index, available);
        }
        Ok(&self.available_counters[&pool_index])
    }

    fn consumption(&self, location: Location) -> Result<Vec<(String, String, i128)>, AllocError> {
        let (slice, device) = self.device(location);
        let mut out = Vec::new();
        for consumption in &device.consumes_counters {
            for (counter, q) in &consumption.counters {
                let a = q.amount().map_err(|e| {
                    AllocError::Invalid(format!(
                        "resource slice {}: device {}: consumesCounters {}: counter {counter}: {e}",
                        slice.name, device.name, consumption.counter_set
                    ))
                })?;
                out.push((consumption.counter_set.clone(), counter.clone(), a.nanos));
            }
        }
        Ok(out)
    }

    /// Adds the device's counter consumption; `false` (and nothing added) when a
    /// counter of its pool would be exceeded.
    fn take_counters(&mut self, location: Location) -> Result<bool, AllocError> {
        let consumption = self.consumption(location)?;
        let available = self.available_counters(location.pool)?.clone();
        let consumed = self.consumed_counters.entry(location.pool).or_default();
        for (set, counter, n) in &consumption {
            *consumed
                .entry(set.clone())
                .or_default()
                .entry(counter.clone())
                .or_default() += n;
        }
        let exceeded = available.iter().any(|(set, counters)| {
            counters.iter().any(|(counter, have)| {
                let used = consumed
                    .get(set)
                    .and_then(|c| c.get(counter))
                    .copied()
                    .unwrap_or(0);
                *have < used
            })
        });
        if exceeded {
            self.release_counters(location);
            return Ok(false);
        }
        Ok(true)
    }

    fn release_counters(&mut self, location: Location) {
        let Ok(consumption) = self.consumption(location) else {
            return;
        };
        if let Some(consumed) = self.consumed_counters.get_mut(&location.pool) {
            for (set, counter, n) in consumption {
                if let Some(c) = consumed.get_mut(&set).and_then(|c| c.get_mut(&counter)) {
                    *c -= n;
                }
            }
        }
    }

    /// The allocation results, one per claim, from the devices found.
    fn results(&self) -> Result<Vec<AllocationResult>, AllocError> {
        let mut out = Vec::with_capacity(self.claims.len());
        for (ci, claim) in self.claims.iter().enumerate() {
            let mut result = AllocationResult::default();
            for chosen in &self.results[ci] {
                let (_, device) = self.device(chosen.location);
                let binding = self.features().device_binding_conditions;
                result.devices.push(DeviceRequestAllocationResult {
                    request: chosen.request.full_name(),
                    driver: chosen.id.driver.clone(),
                    pool: chosen.id.pool.clone(),
                    device: chosen.id.device.clone(),
                    admin_access: chosen.request.admin_access().then_some(true),
                    tolerations: chosen.request.request.tolerations.clone(),
                    binding_conditions: if binding {
                        device.binding_conditions.clone()
                    } else {
                        Vec::new()
                    },
                    binding_failure_conditions: if binding {
                        device.binding_failure_conditions.clone()
                    } else {
                        Vec::new()
                    },
                    share_id: chosen.share_id.clone(),
                    consumed_capacity: chosen
                        .consumed
                        .iter()
                        .map(|(k, a)| (k.clone(), a.to_quantity()))
                        .collect(),
                });
            }
            result.config = self.configs(ci, claim);
            result.node_selector = self.node_selector(ci).map_err(|e| {
                AllocError::Invalid(format!("create NodeSelector for claim {}: {e}", claim.name))
            })?;
            out.push(result);
        }
        Ok(out)
    }

    /// The data of the request at `ri` of the claim, or of its picked subrequest.
    fn picked(&self, ci: usize, ri: usize) -> Option<&RequestData<'a>> {
        let key = RequestKey {
            claim: ci,
            request: ri,
            sub: 0,
        };
        let first = self.requests.get(&key)?;
        if first.request.parent.is_none() {
            return Some(first);
        }
        self.requests.get(&RequestKey {
            sub: first.selected_sub,
            ..key
        })
    }

    fn configs(&self, ci: usize, claim: &ResourceClaim) -> Vec<DeviceAllocationConfiguration> {
        let mut configs: Vec<DeviceAllocationConfiguration> = Vec::new();
        let mut class_ranges: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for ri in 0..claim.spec.requests.len() {
            let Some(data) = self.picked(ci, ri) else {
                continue;
            };
            let name = data.request.full_name();
            if let Some(&(start, end)) = class_ranges.get(data.class.name.as_str()) {
                for c in &mut configs[start..end] {
                    c.requests.push(name.clone());
                }
                continue;
            }
            let start = configs.len();
            for c in &data.class.config {
                configs.push(DeviceAllocationConfiguration {
                    source: AllocationConfigSource::FromClass,
                    requests: vec![name.clone()],
                    opaque: c.opaque.clone(),
                });
            }
            class_ranges.insert(&data.class.name, (start, configs.len()));
        }
        let picked_sub_name = |ri: usize| {
            self.picked(ci, ri)
                .filter(|d| d.request.parent.is_some())
                .map(|d| d.request.full_name())
        };
        for config in &claim.spec.config {
            if config.requests.is_empty() {
                configs.push(DeviceAllocationConfiguration {
                    source: AllocationConfigSource::FromClaim,
                    requests: Vec::new(),
                    opaque: config.opaque.clone(),
                });
                continue;
            }
            let applies = claim.spec.requests.iter().enumerate().any(|(ri, r)| {
                config.requests.iter().any(|n| n == r.name())
                    || picked_sub_name(ri).is_some_and(|s| config.requests.contains(&s))
            });
            if applies {
                configs.push(DeviceAllocationConfiguration {
                    source: AllocationConfigSource::FromClaim,
                    requests: config.requests.clone(),
                    opaque: config.opaque.clone(),
                });
            }
        }
        for c in &mut configs {
            if c.requests.is_empty() {
                continue;
            }
            let all = claim.spec.requests.iter().enumerate().all(|(ri, r)| {
                c.requests.iter().any(|n| n == r.name())
                    || picked_sub_name(ri).is_some_and(|s| c.requests.contains(&s))
            });
            if all {
                c.requests.clear();
            }
        }
        configs
    }

    /// The nodes the claim's devices are reachable from: this node alone when one is
    /// local to it or binds to it, the slices' selectors merged into one term, or
    /// `None` for every node.
    fn node_selector(&self, ci: usize) -> Result<Option<Vec<NodeSelectorTerm>>, String> {
        let mut term = NodeSelectorTerm::default();
        for chosen in &self.results[ci] {
            let (slice, device) = self.device(chosen.location);
            let (name, selector) = match &slice.nodes {
                SliceNodes::PerDevice => {
                    (device.node_name.as_deref(), device.node_selector.as_deref())
                }
                SliceNodes::NodeName(n) => (Some(n.as_str()), None),
                SliceNodes::NodeSelector(terms) => (None, Some(terms.as_slice())),
                SliceNodes::AllNodes => (None, None),
            };
            if name.is_some() || device.binds_to_node {
                return Ok(Some(vec![NodeSelectorTerm {
                    match_expressions: Vec::new(),
                    match_fields: vec![NodeSelectorRequirement {
                        key: "metadata.name".to_owned(),
                        operator: NodeSelectorOperator::In,
                        values: vec![self.node.name.clone()],
                    }],
                }]));
            }
            match selector {
                None | Some([]) => {}
                Some([t]) => {
                    merge_requirements(&t.match_fields, &mut term.match_fields);
                    merge_requirements(&t.match_expressions, &mut term.match_expressions);
                }
                Some(terms) => {
                    return Err(format!(
                        "unsupported ResourceSlice.NodeSelector with {} terms",
                        terms.len()
                    ));
                }
            }
        }
        if term.match_fields.is_empty() && term.match_expressions.is_empty() {
            return Ok(None);
        }
        Ok(Some(vec![term]))
    }
}

fn merge_requirements(from: &[NodeSelectorRequirement], to: &mut Vec<NodeSelectorRequirement>) {
    for r in from {
        let values: BTreeSet<&String> = r.values.iter().collect();
        let present = to.iter().any(|e| {
            e.key == r.key
                && e.operator == r.operator
                && e.values.iter().collect::<BTreeSet<_>>() == values
        });
        if !present {
            to.push(r.clone());
        }
    }
}

/// Whether a `NoSchedule` or `NoExecute` taint of the device is not tolerated by the
/// request.
fn taint_prevents(device: &Device, request: &DeviceSubRequest) -> bool {
    device.taints.iter().any(|taint| {
        matches!(
            taint.effect,
            DeviceTaintEffect::NoSchedule | DeviceTaintEffect::NoExecute
        ) && !request.tolerations.iter().any(|t| t.tolerates(taint))
    })
}

/// A share ID for a device of a claim's result: a UUID made from the claim, the
/// result's position and the device, so that shares never collide without needing
/// randomness in the sandbox.
fn share_id_for(claim: &ResourceClaim, index: usize, id: &DeviceId) -> String {
    let key = format!(
        "{}\0{}\0{}\0{index}\0{id}",
        claim.uid, claim.namespace, claim.name
    );
    // Two FNV-1a hashes with different offsets make 128 bits.
    let fnv = |offset: u64| {
        key.bytes().fold(offset, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let (hi, lo) = (fnv(0xcbf2_9ce4_8422_2325), fnv(0x6c62_272e_07bb_0142));
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&hi.to_be_bytes());
    bytes[8..].copy_from_slice(&lo.to_be_bytes());
    // Version 8 (custom), RFC 4122 variant.
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
