//! The dynamic resource allocation objects of the cluster — DeviceClasses,
//! ResourceClaims, ResourceClaimTemplates, ResourceSlices, DeviceTaintRules — shared
//! with plugin instances, which read them through the host's listers.
//!
//! Between a claim's Reserve and the cluster's answer to the status write of its
//! allocation, the view shows the claim as the binding cycle is about to write it (an
//! assumption in flight, upstream's in-flight allocations), so that other cycles do
//! not allocate the same devices; the cluster's copy of a newer `resourceVersion`, or
//! a restore, drops it. Once the write is answered, the claim as written is shown
//! until the cluster's copy catches up with it (upstream's assume cache).
//!
//! Two generations say what moved: the device generation (classes, slices, taint
//! rules: what a plugin builds its device pools from) and the claim generation
//! (claims and what is assumed of them), which binding cycles may wait on.

use crate::storage::{BlockingHook, ChangeSignal, WaitEnd};
use berth_sdk::dra::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

type Key = (String, String);

fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_owned(), name.to_owned())
}

/// A claim as the scheduler shows it in place of the cluster's copy.
#[derive(Debug)]
struct Assumed {
    claim: Arc<ResourceClaim>,
    /// Assumed at Reserve, not written yet: an allocation in flight. Otherwise the
    /// cluster answered the write and the watch has not shown it yet.
    in_flight: bool,
}

#[derive(Debug, Default)]
struct Objects {
    classes: BTreeMap<String, Arc<DeviceClass>>,
    claims: HashMap<Key, Arc<ResourceClaim>>,
    templates: HashMap<Key, Arc<ResourceClaimTemplate>>,
    /// By name; ordered so that listings are stable.
    slices: BTreeMap<String, Arc<ResourceSlice>>,
    taint_rules: BTreeMap<String, Arc<DeviceTaintRule>>,
    /// Claims as a binding cycle is about to write them, or wrote them; they hide
    /// the cluster's copy until it catches up.
    assumed: HashMap<Key, Assumed>,
}

impl Objects {
    /// A claim as shown: assumed if it is.
    fn shown(&self, k: &Key) -> Option<&Arc<ResourceClaim>> {
        self.assumed
            .get(k)
            .map(|a| &a.claim)
            .or_else(|| self.claims.get(k))
    }
}

#[derive(Debug, Default)]
struct Shared {
    objects: RwLock<Objects>,
    /// Grows at every change of a class, slice or taint rule.
    devices: AtomicU64,
    /// Grows at every change of a claim, assumptions included; binding cycles wait
    /// on it.
    claims: ChangeSignal,
}

/// Which generation a change moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// Classes, slices, taint rules.
    Devices,
    /// Claims.
    Claims,
    /// Templates: no plugin reads them through the view, so no generation.
    Templates,
}

/// The write guard of [`Dra::write`].
struct Changing<'a> {
    objects: RwLockWriteGuard<'a, Objects>,
    shared: &'a Shared,
    part: Part,
}

impl std::ops::Deref for Changing<'_> {
    type Target = Objects;
    fn deref(&self) -> &Objects {
        &self.objects
    }
}

impl std::ops::DerefMut for Changing<'_> {
    fn deref_mut(&mut self) -> &mut Objects {
        &mut self.objects
    }
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        // Still under the lock: the objects guard drops after this.
        match self.part {
            Part::Devices => {
                self.shared.devices.fetch_add(1, Ordering::AcqRel);
            }
            Part::Claims => self.shared.claims.bump(),
            Part::Templates => {}
        }
    }
}

/// The cluster's dynamic resource allocation objects. Clones share them.
#[derive(Clone, Debug, Default)]
pub struct Dra(Arc<Shared>);

/// Why a claim could not be assumed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssumeError {
    /// The claim is not in the view.
    #[error("resourceclaim {0} not found")]
    NotFound(String),
    /// The claim in the view is not the one the allocation was computed for (another
    /// cycle assumed it, or the cluster changed it).
    #[error(
        "resourceclaim {key} changed since it was read (resourceVersion {seen:?}, now {now:?})"
    )]
    Changed {
        /// `namespace/name`.
        key: String,
        /// The version the caller read.
        seen: String,
        /// The version in the view now.
        now: String,
    },
}

/// The `resourceVersion` the embedded cluster gives an object it changes: one more
/// than `version` (0 when it is not a number).
pub fn next_version(version: &str) -> String {
    (version.parse::<u64>().unwrap_or(0) + 1).to_string()
}

/// Whether `version` is older than `than`: numerically when both are numbers (as
/// the API server's are, and upstream's assume cache compares them), else whenever
/// they differ (the cluster's copy is not the one written).
fn older(version: &str, than: &str) -> bool {
    match (version.parse::<u64>(), than.parse::<u64>()) {
        (Ok(a), Ok(b)) => a < b,
        _ => version != than,
    }
}

impl Dra {
    /// No objects.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Objects> {
        self.0.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The objects, to change `part`: its generation grows when the guard drops,
    /// once the change is made (a reader that sees the new generation sees the
    /// change).
    fn write(&self, part: Part) -> Changing<'_> {
        Changing {
            objects: self.0.objects.write().unwrap_or_else(|e| e.into_inner()),
            shared: &self.0,
            part,
        }
    }

    /// A number that grows at every change of a DeviceClass, ResourceSlice or
    /// DeviceTaintRule: a plugin may keep what it built from them while it stays.
    pub fn device_generation(&self) -> u64 {
        self.0.devices.load(Ordering::Acquire)
    }

    /// A number that grows at every change of a ResourceClaim, what is assumed of
    /// one included.
    pub fn claim_generation(&self) -> u64 {
        self.0.claims.generation()
    }

    /// Waits until the claim generation passes `after`, `timeout` passes, or the pod
    /// `for_pod` (the binding cycle's) is deleted ([`Dra::end_waits_of`]).
    pub fn wait_for_claim_change(
        &self,
        after: u64,
        timeout: Duration,
        for_pod: Option<&str>,
    ) -> WaitEnd {
        self.0.claims.wait_for_change(after, timeout, for_pod)
    }

    /// The pod `uid` was deleted during its binding cycle: its claim waits end now,
    /// and any it starts end at once, until [`Dra::forget_pod`].
    pub fn end_waits_of(&self, uid: &str) {
        self.0.claims.end_waits_of(uid);
    }

    /// The binding cycle of `uid` is over: forget that its waits ended.
    pub fn forget_pod(&self, uid: &str) {
        self.0.claims.forget_pod(uid);
    }

    /// Tells `hook` of every claim wait that blocks its thread, from now on.
    pub fn on_blocking(&self, hook: BlockingHook) {
        self.0.claims.on_blocking(hook);
    }

    /// Adds or replaces a DeviceClass; answers the one it replaced.
    pub fn set_class(&self, class: DeviceClass) -> Option<Arc<DeviceClass>> {
        self.write(Part::Devices)
            .classes
            .insert(class.name.clone(), Arc::new(class))
    }

    /// Removes a DeviceClass; answers it.
    pub fn remove_class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        self.write(Part::Devices).classes.remove(name)
    }

    /// A DeviceClass by name.
    pub fn class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        self.read().classes.get(name).cloned()
    }

    /// Every DeviceClass, by name.
    pub fn classes(&self) -> Vec<Arc<DeviceClass>> {
        self.read().classes.values().cloned().collect()
    }

    /// Adds or replaces a claim as the cluster has it; answers the one it replaced.
    /// An assumption in flight is dropped when the cluster's copy is of another
    /// `resourceVersion` than the one it was assumed from (the write landed, or
    /// lost); the claim as written, when the cluster's copy is no older than it.
    pub fn set_claim(&self, claim: ResourceClaim) -> Option<Arc<ResourceClaim>> {
        let k = key(&claim.namespace, &claim.name);
        let mut objects = self.write(Part::Claims);
        let new = Arc::new(claim);
        let old = objects.claims.insert(k.clone(), new.clone());
        let keep = match objects.assumed.get(&k) {
            None => true,
            Some(a) if a.in_flight => matches!(
                &old,
                Some(o) if o.resource_version == new.resource_version
                    && !new.resource_version.is_empty()
            ),
            Some(a) => older(&new.resource_version, &a.claim.resource_version),
        };
        if !keep {
            objects.assumed.remove(&k);
        }
        old
    }

    /// Removes a claim; answers it.
    pub fn remove_claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        let k = key(namespace, name);
        let mut objects = self.write(Part::Claims);
        objects.assumed.remove(&k);
        objects.claims.remove(&k)
    }

    /// A claim by namespace and name, as assumed if it is.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.read().shown(&key(namespace, name)).cloned()
    }

    /// The claim made for the extended resources of the pod `pod_uid` in
    /// `namespace`, as shown (upstream's `findExtendedResourceClaim`); not the one
    /// assumed at Reserve before it was created.
    pub fn extended_claim(&self, namespace: &str, pod_uid: &str) -> Option<Arc<ResourceClaim>> {
        let objects = self.read();
        let wanted = |c: &ResourceClaim| {
            c.namespace == namespace
                && c.is_extended_resource_claim_of(pod_uid)
                && !berth_sdk::dra::is_in_memory_extended_claim_name(&c.name)
        };
        // Asked at every PreFilter of a pod with such resources: a walk without
        // copies, the assumed claims first as they hide the cluster's copies.
        objects
            .assumed
            .values()
            .map(|a| &a.claim)
            .chain(objects.claims.values())
            .find(|c| wanted(c))
            .cloned()
    }

    /// A claim as the cluster has it (what is assumed of it aside).
    pub fn cluster_claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.read().claims.get(&key(namespace, name)).cloned()
    }

    /// Every claim with an allocation, as assumed where it is: the devices in use.
    pub fn allocated_claims(&self) -> Vec<Arc<ResourceClaim>> {
        let mut out: Vec<Arc<ResourceClaim>> = self
            .claims()
            .into_iter()
            .filter(|c| c.status.allocation.is_some())
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out
    }

    /// The device results of every allocated claim (as assumed), each with its
    /// claim's `namespace/name`: what the `allocated-device-results` host call answers.
    pub fn allocated_device_results(
        &self,
    ) -> Vec<(String, berth_sdk::dra::DeviceRequestAllocationResult)> {
        berth_sdk::dra::device_results_of(self.allocated_claims().iter().map(|c| &**c))
    }

    /// Every claim, as assumed where it is, by namespace and name: the claims made
    /// for pods' extended resources that the cluster does not show yet too (assumed
    /// at Reserve, or created and written by a binding cycle).
    pub fn claims(&self) -> Vec<Arc<ResourceClaim>> {
        let objects = self.read();
        let mut out: Vec<Arc<ResourceClaim>> = objects
            .claims
            .keys()
            .filter_map(|k| objects.shown(k).cloned())
            .chain(
                objects
                    .assumed
                    .iter()
                    .filter(|(k, _)| !objects.claims.contains_key(*k))
                    .map(|(_, a)| a.claim.clone()),
            )
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out
    }

    /// Assumes `claim` (its allocation and `reservedFor` as a binding cycle is about
    /// to write them: an allocation in flight) until the cluster's copy changes or
    /// [`Dra::restore_claim`]. The claim must be the one in the view: same
    /// `resourceVersion`, as assumed or not.
    ///
    /// The claim for a pod's extended resources before PreBind creates it (named
    /// `<extended-resources>/<pod UID>`) has no copy in the cluster: it is assumed as
    /// it is, until restored or until the claim created for it is written
    /// ([`Dra::assume_written`]).
    pub fn assume_claim(&self, claim: ResourceClaim) -> Result<(), AssumeError> {
        let k = key(&claim.namespace, &claim.name);
        let mut objects = self.write(Part::Claims);
        if berth_sdk::dra::is_in_memory_extended_claim_name(&claim.name) {
            objects.assumed.insert(
                k,
                Assumed {
                    claim: Arc::new(claim),
                    in_flight: true,
                },
            );
            return Ok(());
        }
        let Some(current) = objects.shown(&k) else {
            return Err(AssumeError::NotFound(claim.key()));
        };
        if current.resource_version != claim.resource_version {
            return Err(AssumeError::Changed {
                key: claim.key(),
                seen: claim.resource_version.clone(),
                now: current.resource_version.clone(),
            });
        }
        objects.assumed.insert(
            k,
            Assumed {
                claim: Arc::new(claim),
                in_flight: true,
            },
        );
        Ok(())
    }

    /// The cluster answered a status write with `written`: it is shown (and no
    /// longer in flight) until the cluster's copy catches up with its
    /// `resourceVersion`, so that the scheduler sees the write before the watch
    /// does. Nothing is assumed when the cluster's copy has caught up already, or
    /// the claim is gone.
    ///
    /// A claim made for a pod's extended resources shows even before the cluster's
    /// copy first arrives (it was just created), and once written with its
    /// allocation takes the place of the claim assumed for them at Reserve.
    pub fn assume_written(&self, written: ResourceClaim) {
        let k = key(&written.namespace, &written.name);
        let mut objects = self.write(Part::Claims);
        let extended_of = written
            .controller
            .as_ref()
            .filter(|c| written.is_extended_resource_claim_of(&c.uid))
            .map(|c| c.uid.clone());
        // Once its allocation is written, the claim created for a pod's extended
        // resources stands for the one assumed at Reserve (until then that one keeps
        // its devices given).
        if let Some(uid) = extended_of
            .as_ref()
            .filter(|_| written.status.allocation.is_some())
        {
            let in_memory = key(
                &written.namespace,
                &berth_sdk::dra::in_memory_extended_claim_name(uid),
            );
            objects.assumed.remove(&in_memory);
        }
        let behind = match objects.claims.get(&k) {
            Some(c) => older(&c.resource_version, &written.resource_version),
            None => extended_of.is_some(),
        };
        if behind {
            objects.assumed.insert(
                k,
                Assumed {
                    claim: Arc::new(written),
                    in_flight: false,
                },
            );
        } else {
            objects.assumed.remove(&k);
        }
    }

    /// Drops an allocation in flight of a claim (Unreserve). What the cluster
    /// answered a write with stays until the cluster's copy catches up: the devices
    /// are given in the cluster already.
    pub fn restore_claim(&self, namespace: &str, name: &str) {
        let k = key(namespace, name);
        let mut objects = self.write(Part::Claims);
        if objects.assumed.get(&k).is_some_and(|a| a.in_flight) {
            objects.assumed.remove(&k);
        }
    }

    /// Whether something is assumed of the claim (in flight, or written and not
    /// shown by the cluster yet).
    pub fn is_assumed(&self, namespace: &str, name: &str) -> bool {
        self.read().assumed.contains_key(&key(namespace, name))
    }

    /// Whether the claim has an allocation in flight: assumed at Reserve and not
    /// written yet (upstream's `ClaimHasPendingAllocation`).
    pub fn allocation_pending(&self, namespace: &str, name: &str) -> bool {
        self.read()
            .assumed
            .get(&key(namespace, name))
            .is_some_and(|a| a.in_flight)
    }

    /// Adds or replaces a template; answers the one it replaced.
    pub fn set_template(&self, t: ResourceClaimTemplate) -> Option<Arc<ResourceClaimTemplate>> {
        let k = key(&t.namespace, &t.name);
        self.write(Part::Templates).templates.insert(k, Arc::new(t))
    }

    /// Removes a template; answers it.
    pub fn remove_template(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<ResourceClaimTemplate>> {
        self.write(Part::Templates)
            .templates
            .remove(&key(namespace, name))
    }

    /// A template by namespace and name.
    pub fn template(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaimTemplate>> {
        self.read().templates.get(&key(namespace, name)).cloned()
    }

    /// Adds or replaces a slice; answers the one it replaced.
    pub fn set_slice(&self, slice: ResourceSlice) -> Option<Arc<ResourceSlice>> {
        self.write(Part::Devices)
            .slices
            .insert(slice.name.clone(), Arc::new(slice))
    }

    /// Removes a slice; answers it.
    pub fn remove_slice(&self, name: &str) -> Option<Arc<ResourceSlice>> {
        self.write(Part::Devices).slices.remove(name)
    }

    /// Every slice, by name.
    pub fn slices(&self) -> Vec<Arc<ResourceSlice>> {
        self.read().slices.values().cloned().collect()
    }

    /// Adds or replaces a DeviceTaintRule; answers the one it replaced.
    pub fn set_taint_rule(&self, rule: DeviceTaintRule) -> Option<Arc<DeviceTaintRule>> {
        self.write(Part::Devices)
            .taint_rules
            .insert(rule.name.clone(), Arc::new(rule))
    }

    /// Removes a DeviceTaintRule; answers it.
    pub fn remove_taint_rule(&self, name: &str) -> Option<Arc<DeviceTaintRule>> {
        self.write(Part::Devices).taint_rules.remove(name)
    }

    /// Every DeviceTaintRule, by name.
    pub fn taint_rules(&self) -> Vec<Arc<DeviceTaintRule>> {
        self.read().taint_rules.values().cloned().collect()
    }

    /// How many objects of each kind the view holds, for summaries.
    pub fn counts(&self) -> [(&'static str, usize); 5] {
        let o = self.read();
        [
            ("DeviceClass", o.classes.len()),
            ("ResourceClaim", o.claims.len()),
            ("ResourceClaimTemplate", o.templates.len()),
            ("ResourceSlice", o.slices.len()),
            ("DeviceTaintRule", o.taint_rules.len()),
        ]
    }
}

/// A change of a dynamic resource allocation object, as a cluster source reports it.
#[derive(Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one change at a time, as `cluster::Change`"
)]
pub enum DraChange {
    /// A DeviceClass appeared or changed.
    Class(DeviceClass),
    /// A DeviceClass is gone (by name).
    ClassDeleted(String),
    /// A ResourceClaim appeared or changed.
    Claim(ResourceClaim),
    /// A ResourceClaim is gone.
    ClaimDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A ResourceClaimTemplate appeared or changed.
    Template(ResourceClaimTemplate),
    /// A ResourceClaimTemplate is gone.
    TemplateDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A ResourceSlice appeared or changed.
    Slice(ResourceSlice),
    /// A ResourceSlice is gone (by name).
    SliceDeleted(String),
    /// A DeviceTaintRule appeared or changed.
    TaintRule(DeviceTaintRule),
    /// A DeviceTaintRule is gone (by name).
    TaintRuleDeleted(String),
}

/// What the resourceclaim controller changes once the pod of this UID is gone
/// (deleted or evicted): the claims made for it are deleted (the garbage collector
/// follows their owner), and it is dropped from the `reservedFor` of the others; a
/// claim whose last consumer that was loses its allocation (and the status of its
/// devices), so that its devices are free for other claims and a later consumer may
/// be placed anywhere, as upstream's controller deallocates on the transition from
/// used to unused. The embedded cluster runs these; a real one has its own
/// controller. Answers the changes in the order of the claims' keys.
pub fn released_by_pod(dra: &Dra, uid: &str) -> Vec<DraChange> {
    // The cluster's copies: what is assumed of a claim is the scheduler's, not the
    // controller's.
    let mut claims: Vec<Arc<ResourceClaim>> = dra
        .read()
        .claims
        .values()
        .filter(|c| c.is_for_pod(uid) || c.is_reserved_for(uid))
        .cloned()
        .collect();
    claims.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    claims
        .into_iter()
        .filter_map(|c| {
            if c.is_for_pod(uid) {
                return Some(DraChange::ClaimDeleted {
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                });
            }
            if !c.is_reserved_for(uid) {
                return None;
            }
            let mut released = (*c).clone();
            released.status.reserved_for.retain(|r| !r.is_pod(uid));
            if released.status.reserved_for.is_empty() {
                released.status.allocation = None;
                released.status.devices.clear();
            }
            released.resource_version = next_version(&c.resource_version);
            Some(DraChange::Claim(released))
        })
        .collect()
}

/// The resourceclaim controller of the embedded cluster (`simulate`, `bench`): for
/// each entry of the pod's `spec.resourceClaims` that names a template and has no
/// claim yet, the claim made from the template (owned by the pod, named as the API
/// server's `generateName` would), recorded in the pod's
/// `status.resourceClaimStatuses`. Answers the claims to create, or `None`, changing
/// nothing, while one of the templates does not exist. A claim made before (the pod
/// applied again) is recorded but not made twice.
pub fn claims_from_templates(dra: &Dra, pod: &mut berth_sdk::Pod) -> Option<Vec<ResourceClaim>> {
    use crate::manifest::dra::{claim_for_pod, claim_suffix};
    let mut made = Vec::new();
    for entry in &pod.resource_claims {
        let berth_sdk::ClaimSource::TemplateName(template) = &entry.source else {
            continue;
        };
        if pod.resource_claim_status(&entry.name).is_some() {
            continue;
        }
        let t = dra.template(&pod.namespace, template)?;
        let claim = claim_for_pod(&t, pod, &entry.name, &claim_suffix(pod, &entry.name));
        let exists = dra
            .claim(&claim.namespace, &claim.name)
            .is_some_and(|c| c.is_for_pod(&pod.uid));
        made.push((entry.name.clone(), claim, exists));
    }
    let mut claims = Vec::with_capacity(made.len());
    for (entry, claim, exists) in made {
        pod.resource_claim_statuses
            .push(berth_sdk::PodResourceClaimStatus {
                name: entry,
                resource_claim_name: Some(claim.name.clone()),
            });
        if !exists {
            claims.push(claim);
        }
    }
    Some(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::dra::{AllocationResult, ConsumerReference};

    fn claim(name: &str, version: &str) -> ResourceClaim {
        ResourceClaim {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            resource_version: version.into(),
            ..ResourceClaim::default()
        }
    }

    fn allocated(mut c: ResourceClaim) -> ResourceClaim {
        c.status.allocation = Some(AllocationResult::default());
        c.status.reserved_for = vec![ConsumerReference::pod("p", "uid-p")];
        c
    }

    #[test]
    fn a_pod_s_extended_resource_claim_is_assumed_before_it_exists_and_yields_to_the_one_written() {
        use berth_sdk::dra::{
            ControllerReference, EXTENDED_RESOURCE_CLAIM_ANNOTATION, in_memory_extended_claim_name,
        };
        let dra = Dra::new();
        let mut in_memory = allocated(claim(&in_memory_extended_claim_name("uid-p"), ""));
        in_memory
            .annotations
            .insert(EXTENDED_RESOURCE_CLAIM_ANNOTATION.into(), "true".into());
        in_memory.controller = Some(ControllerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "p".into(),
            uid: "uid-p".into(),
        });
        // Reserve: assumed with no copy in the cluster; its devices are given.
        dra.assume_claim(in_memory.clone()).unwrap();
        assert!(dra.allocation_pending("default", &in_memory.name));
        assert_eq!(dra.allocated_claims().len(), 1);
        assert!(dra.extended_claim("default", "uid-p").is_none());
        // PreBind creates it: shown at once, without status; the assumed one keeps
        // the devices until the allocation is written.
        let mut created = in_memory.clone();
        created.name = "p-extended-resources-bcdfg".into();
        created.resource_version = "1".into();
        created.status = Default::default();
        dra.assume_written(created.clone());
        assert_eq!(
            dra.extended_claim("default", "uid-p").unwrap().name,
            created.name
        );
        assert_eq!(dra.allocated_claims()[0].name, in_memory.name);
        // Its allocation written: it stands for the assumed one.
        let mut written = created.clone();
        written.resource_version = "2".into();
        written.status = in_memory.status.clone();
        dra.assume_written(written.clone());
        assert!(!dra.allocation_pending("default", &in_memory.name));
        let allocated: Vec<String> = dra
            .allocated_claims()
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(allocated, [created.name.clone()]);
        // The watch catches up; nothing is left assumed.
        dra.set_claim(written);
        assert!(!dra.is_assumed("default", &created.name));
        assert_eq!(dra.claims().len(), 1);
        // A restore of the in-memory claim afterwards changes nothing.
        dra.restore_claim("default", &in_memory.name);
        assert_eq!(dra.claims().len(), 1);
    }

    #[test]
    fn a_gone_pod_releases_its_claims_as_the_resourceclaim_controller_does() {
        let dra = Dra::new();
        // Shared by p and q.
        let mut shared = allocated(claim("shared", "4"));
        shared
            .status
            .reserved_for
            .push(ConsumerReference::pod("q", "uid-q"));
        dra.set_claim(shared);
        // Made for p from a template.
        let mut made = allocated(claim("p-gpu-x", "2"));
        made.controller = Some(berth_sdk::dra::ControllerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "p".into(),
            uid: "uid-p".into(),
        });
        dra.set_claim(made);
        // Used only by p: its last consumer.
        dra.set_claim(allocated(claim("solo", "7")));
        // Allocated, not reserved for anyone (a driver's): left alone.
        let mut idle = claim("idle", "1");
        idle.status.allocation = Some(AllocationResult::default());
        dra.set_claim(idle);

        let changes = released_by_pod(&dra, "uid-p");
        assert_eq!(changes.len(), 3, "{changes:?}");
        let DraChange::ClaimDeleted { name, .. } = &changes[0] else {
            panic!("the claim made for the pod is deleted: {changes:?}");
        };
        assert_eq!(name, "p-gpu-x");
        let DraChange::Claim(shared) = &changes[1] else {
            panic!("{changes:?}");
        };
        assert_eq!(shared.name, "shared");
        assert_eq!(
            shared.status.reserved_for,
            vec![ConsumerReference::pod("q", "uid-q")]
        );
        assert!(shared.status.allocation.is_some(), "q still uses it");
        assert_eq!(shared.resource_version, "5");
        let DraChange::Claim(solo) = &changes[2] else {
            panic!("{changes:?}");
        };
        assert_eq!(solo.name, "solo");
        assert!(solo.status.reserved_for.is_empty());
        assert!(solo.status.allocation.is_none(), "deallocated");
        assert_eq!(solo.resource_version, "8");

        // Nothing of a pod that used nothing.
        assert!(released_by_pod(&dra, "uid-z").is_empty());
    }

    #[test]
    fn an_assumed_claim_hides_the_cluster_copy_until_the_cluster_moves_on() {
        let dra = Dra::new();
        dra.set_claim(claim("a", "1"));
        assert!(dra.allocated_claims().is_empty());
        let g = dra.claim_generation();
        dra.assume_claim(allocated(claim("a", "1"))).unwrap();
        assert!(dra.claim_generation() > g);
        assert!(dra.allocation_pending("default", "a"));
        assert!(
            dra.claim("default", "a")
                .unwrap()
                .status
                .allocation
                .is_some()
        );
        assert!(
            dra.cluster_claim("default", "a")
                .unwrap()
                .status
                .allocation
                .is_none()
        );
        assert_eq!(dra.allocated_claims().len(), 1);
        // The same version again (a resync): the assumption stays.
        dra.set_claim(claim("a", "1"));
        assert!(dra.is_assumed("default", "a"));
        // The cluster's copy of a newer version replaces it.
        dra.set_claim(allocated(claim("a", "2")));
        assert!(!dra.is_assumed("default", "a"));
        assert!(!dra.allocation_pending("default", "a"));
        assert_eq!(dra.claim("default", "a").unwrap().resource_version, "2");
        assert_eq!(dra.allocated_claims().len(), 1);
    }

    #[test]
    fn a_written_claim_shows_until_the_watch_catches_up_and_is_no_longer_pending() {
        let dra = Dra::new();
        dra.set_claim(claim("a", "7"));
        dra.assume_claim(allocated(claim("a", "7"))).unwrap();
        assert!(dra.allocation_pending("default", "a"));
        // The API server answered the write with version 8; the watch is behind.
        dra.assume_written(allocated(claim("a", "8")));
        assert!(dra.is_assumed("default", "a"));
        assert!(!dra.allocation_pending("default", "a"));
        assert_eq!(dra.claim("default", "a").unwrap().resource_version, "8");
        // Unreserve restores only what is in flight: the devices are given already.
        dra.restore_claim("default", "a");
        assert_eq!(dra.claim("default", "a").unwrap().resource_version, "8");
        assert_eq!(dra.allocated_claims().len(), 1);
        // A resync of the old version keeps it; the written version replaces it.
        dra.set_claim(claim("a", "7"));
        assert!(dra.is_assumed("default", "a"));
        dra.set_claim(allocated(claim("a", "8")));
        assert!(!dra.is_assumed("default", "a"));
        assert_eq!(dra.allocated_claims().len(), 1);
        // A cluster that shows its writes at once (the embedded one) leaves nothing
        // to assume, nor does a claim gone meanwhile.
        dra.assume_written(allocated(claim("a", "8")));
        assert!(!dra.is_assumed("default", "a"));
        dra.assume_written(allocated(claim("gone", "3")));
        assert!(dra.claim("default", "gone").is_none());
    }

    #[test]
    fn a_written_claim_outlives_an_older_copy_and_yields_to_a_newer_one() {
        let dra = Dra::new();
        dra.set_claim(claim("a", "7"));
        dra.assume_written(allocated(claim("a", "9")));
        // Version 8 (a change before the write) arrives late: 9 still shows.
        dra.set_claim(claim("a", "8"));
        assert_eq!(dra.claim("default", "a").unwrap().resource_version, "9");
        // Version 10 (a change after it) wins.
        dra.set_claim(claim("a", "10"));
        assert!(!dra.is_assumed("default", "a"));
        assert_eq!(dra.claim("default", "a").unwrap().resource_version, "10");
    }

    #[test]
    fn devices_and_claims_have_generations_of_their_own() {
        let dra = Dra::new();
        let (d, c) = (dra.device_generation(), dra.claim_generation());
        dra.set_slice(ResourceSlice {
            name: "s".into(),
            ..ResourceSlice::default()
        });
        dra.set_class(DeviceClass {
            name: "gpu".into(),
            uid: "u".into(),
            selectors: Vec::new(),
            config: Vec::new(),
            extended_resource_name: None,
        });
        assert_eq!(dra.device_generation(), d + 2);
        assert_eq!(dra.claim_generation(), c);
        dra.set_claim(claim("a", "1"));
        dra.remove_claim("default", "a");
        assert_eq!(dra.device_generation(), d + 2);
        assert_eq!(dra.claim_generation(), c + 2);
        dra.set_template(ResourceClaimTemplate {
            namespace: "default".into(),
            name: "t".into(),
            ..ResourceClaimTemplate::default()
        });
        assert_eq!(
            (dra.device_generation(), dra.claim_generation()),
            (d + 2, c + 2)
        );
    }

    #[test]
    fn a_claim_wait_ends_on_a_claim_change_or_when_the_pod_is_gone() {
        let dra = Dra::new();
        let day = Duration::from_secs(86_400);
        // Already past: no wait.
        dra.set_claim(claim("a", "1"));
        let end = dra.wait_for_claim_change(0, day, Some("p"));
        assert_eq!((end.generation, end.pod_gone), (1, false));
        // Nothing changes: the timeout ends it.
        let end = dra.wait_for_claim_change(1, Duration::ZERO, None);
        assert_eq!((end.generation, end.pod_gone), (1, false));
        // A claim changed by another thread wakes the waiter; a slice does not count.
        let waiter = {
            let dra = dra.clone();
            std::thread::spawn(move || dra.wait_for_claim_change(1, day, Some("p")))
        };
        dra.set_slice(ResourceSlice::default());
        dra.set_claim(claim("a", "2"));
        let end = waiter.join().unwrap();
        assert!(end.generation >= 2 && !end.pod_gone, "{end:?}");
        // The pod deleted: its wait ends, and so do those it starts, until forgotten.
        let waiter = {
            let dra = dra.clone();
            std::thread::spawn(move || dra.wait_for_claim_change(2, day, Some("p")))
        };
        dra.end_waits_of("p");
        assert!(waiter.join().unwrap().pod_gone);
        assert!(dra.wait_for_claim_change(2, day, Some("p")).pod_gone);
        dra.forget_pod("p");
        assert!(
            !dra.wait_for_claim_change(2, Duration::ZERO, Some("p"))
                .pod_gone
        );
    }

    #[test]
    fn a_claim_is_assumed_only_from_the_version_in_the_view() {
        let dra = Dra::new();
        assert_eq!(
            dra.assume_claim(claim("a", "1")),
            Err(AssumeError::NotFound("default/a".into()))
        );
        dra.set_claim(claim("a", "2"));
        let err = dra.assume_claim(allocated(claim("a", "1"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "resourceclaim default/a changed since it was read (resourceVersion \"1\", now \"2\")"
        );
        dra.assume_claim(allocated(claim("a", "2"))).unwrap();
        dra.restore_claim("default", "a");
        assert!(dra.allocated_claims().is_empty());
        dra.assume_claim(allocated(claim("a", "2"))).unwrap();
        dra.remove_claim("default", "a");
        assert!(dra.claim("default", "a").is_none());
        assert!(!dra.is_assumed("default", "a"));
    }

    #[test]
    fn listings_are_by_name() {
        let dra = Dra::new();
        for n in ["b", "a", "c"] {
            dra.set_slice(ResourceSlice {
                name: n.into(),
                ..ResourceSlice::default()
            });
            dra.set_claim(claim(n, "1"));
        }
        let names: Vec<_> = dra.slices().iter().map(|s| s.name.clone()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        let names: Vec<_> = dra.claims().iter().map(|s| s.name.clone()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(dra.counts()[1], ("ResourceClaim", 3));
        assert_eq!(dra.counts()[3], ("ResourceSlice", 3));
    }
}
