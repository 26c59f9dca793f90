//! The dynamic resource allocation objects of the cluster — DeviceClasses,
//! ResourceClaims, ResourceClaimTemplates, ResourceSlices, DeviceTaintRules — shared
//! with plugin instances, which read them through the host's listers.
//!
//! Between a claim's Reserve and the cluster's answer to the status write of its
//! allocation, the view shows the claim as the binding cycle is about to write it (an
//! assumption, upstream's assume cache), so that other cycles do not allocate the same
//! devices; the cluster's copy of a newer `resourceVersion`, or a restore, drops it.

use berth_sdk::dra::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

type Key = (String, String);

fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_owned(), name.to_owned())
}

#[derive(Debug, Default)]
struct Objects {
    classes: BTreeMap<String, Arc<DeviceClass>>,
    claims: HashMap<Key, Arc<ResourceClaim>>,
    templates: HashMap<Key, Arc<ResourceClaimTemplate>>,
    /// By name; ordered so that listings are stable.
    slices: BTreeMap<String, Arc<ResourceSlice>>,
    taint_rules: BTreeMap<String, Arc<DeviceTaintRule>>,
    /// Claims as a binding cycle is about to write them; they hide the cluster's copy
    /// until it changes.
    assumed: HashMap<Key, Arc<ResourceClaim>>,
}

#[derive(Debug, Default)]
struct Shared {
    objects: RwLock<Objects>,
    /// Grows at every change, assumptions included.
    generation: AtomicU64,
}

/// The write guard of [`Dra::write`].
struct Changing<'a> {
    objects: RwLockWriteGuard<'a, Objects>,
    generation: &'a AtomicU64,
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
        self.generation.fetch_add(1, Ordering::AcqRel);
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

impl Dra {
    /// No objects.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Objects> {
        self.0.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The objects, to change: the generation grows when the guard drops, once the
    /// change is made (a reader that sees the new generation sees the change).
    fn write(&self) -> Changing<'_> {
        Changing {
            objects: self.0.objects.write().unwrap_or_else(|e| e.into_inner()),
            generation: &self.0.generation,
        }
    }

    /// A number that grows at every change: a plugin may keep what it derived from
    /// the objects while it stays the same.
    pub fn generation(&self) -> u64 {
        self.0.generation.load(Ordering::Acquire)
    }

    /// Adds or replaces a DeviceClass; answers the one it replaced.
    pub fn set_class(&self, class: DeviceClass) -> Option<Arc<DeviceClass>> {
        self.write()
            .classes
            .insert(class.name.clone(), Arc::new(class))
    }

    /// Removes a DeviceClass; answers it.
    pub fn remove_class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        self.write().classes.remove(name)
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
    /// An assumption of the claim is dropped when the cluster's copy is of another
    /// `resourceVersion` than the one it was assumed from (the write landed, or lost).
    pub fn set_claim(&self, claim: ResourceClaim) -> Option<Arc<ResourceClaim>> {
        let k = key(&claim.namespace, &claim.name);
        let mut objects = self.write();
        let old = objects.claims.insert(k.clone(), Arc::new(claim));
        let keep = matches!(
            (&old, objects.claims.get(&k)),
            (Some(o), Some(n)) if o.resource_version == n.resource_version
                && !n.resource_version.is_empty()
        );
        if !keep {
            objects.assumed.remove(&k);
        }
        old
    }

    /// Removes a claim; answers it.
    pub fn remove_claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        let k = key(namespace, name);
        let mut objects = self.write();
        objects.assumed.remove(&k);
        objects.claims.remove(&k)
    }

    /// A claim by namespace and name, as assumed if it is.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        let k = key(namespace, name);
        let objects = self.read();
        objects
            .assumed
            .get(&k)
            .or_else(|| objects.claims.get(&k))
            .cloned()
    }

    /// A claim as the cluster has it (what is assumed of it aside).
    pub fn cluster_claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.read().claims.get(&key(namespace, name)).cloned()
    }

    /// Every claim with an allocation, as assumed where it is: the devices in use.
    pub fn allocated_claims(&self) -> Vec<Arc<ResourceClaim>> {
        let objects = self.read();
        let mut out: Vec<Arc<ResourceClaim>> = objects
            .claims
            .iter()
            .filter(|(k, _)| !objects.assumed.contains_key(*k))
            .map(|(_, c)| c)
            .chain(objects.assumed.values())
            .filter(|c| c.status.allocation.is_some())
            .cloned()
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out
    }

    /// Every claim, as assumed where it is, by namespace and name.
    pub fn claims(&self) -> Vec<Arc<ResourceClaim>> {
        let objects = self.read();
        let mut out: Vec<Arc<ResourceClaim>> = objects
            .claims
            .iter()
            .map(|(k, c)| objects.assumed.get(k).unwrap_or(c).clone())
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out
    }

    /// Assumes `claim` (its allocation and `reservedFor` as a binding cycle is about
    /// to write them) until the cluster's copy changes or [`Dra::restore_claim`]. The
    /// claim must be the one in the view: same `resourceVersion`, as assumed or not.
    pub fn assume_claim(&self, claim: ResourceClaim) -> Result<(), AssumeError> {
        let k = key(&claim.namespace, &claim.name);
        let mut objects = self.write();
        let Some(current) = objects.assumed.get(&k).or_else(|| objects.claims.get(&k)) else {
            return Err(AssumeError::NotFound(claim.key()));
        };
        if current.resource_version != claim.resource_version {
            return Err(AssumeError::Changed {
                key: claim.key(),
                seen: claim.resource_version.clone(),
                now: current.resource_version.clone(),
            });
        }
        objects.assumed.insert(k, Arc::new(claim));
        Ok(())
    }

    /// Drops what was assumed of a claim.
    pub fn restore_claim(&self, namespace: &str, name: &str) {
        self.write().assumed.remove(&key(namespace, name));
    }

    /// Whether something is assumed of the claim.
    pub fn is_assumed(&self, namespace: &str, name: &str) -> bool {
        self.read().assumed.contains_key(&key(namespace, name))
    }

    /// Adds or replaces a template; answers the one it replaced.
    pub fn set_template(&self, t: ResourceClaimTemplate) -> Option<Arc<ResourceClaimTemplate>> {
        let k = key(&t.namespace, &t.name);
        self.write().templates.insert(k, Arc::new(t))
    }

    /// Removes a template; answers it.
    pub fn remove_template(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<ResourceClaimTemplate>> {
        self.write().templates.remove(&key(namespace, name))
    }

    /// A template by namespace and name.
    pub fn template(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaimTemplate>> {
        self.read().templates.get(&key(namespace, name)).cloned()
    }

    /// Adds or replaces a slice; answers the one it replaced.
    pub fn set_slice(&self, slice: ResourceSlice) -> Option<Arc<ResourceSlice>> {
        self.write()
            .slices
            .insert(slice.name.clone(), Arc::new(slice))
    }

    /// Removes a slice; answers it.
    pub fn remove_slice(&self, name: &str) -> Option<Arc<ResourceSlice>> {
        self.write().slices.remove(name)
    }

    /// Every slice, by name.
    pub fn slices(&self) -> Vec<Arc<ResourceSlice>> {
        self.read().slices.values().cloned().collect()
    }

    /// Adds or replaces a DeviceTaintRule; answers the one it replaced.
    pub fn set_taint_rule(&self, rule: DeviceTaintRule) -> Option<Arc<DeviceTaintRule>> {
        self.write()
            .taint_rules
            .insert(rule.name.clone(), Arc::new(rule))
    }

    /// Removes a DeviceTaintRule; answers it.
    pub fn remove_taint_rule(&self, name: &str) -> Option<Arc<DeviceTaintRule>> {
        self.write().taint_rules.remove(name)
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

impl Dra {
    /// Applies a change to the view.
    pub fn apply(&self, change: DraChange) {
        match change {
            DraChange::Class(c) => {
                self.set_class(c);
            }
            DraChange::ClassDeleted(n) => {
                self.remove_class(&n);
            }
            DraChange::Claim(c) => {
                self.set_claim(c);
            }
            DraChange::ClaimDeleted { namespace, name } => {
                self.remove_claim(&namespace, &name);
            }
            DraChange::Template(t) => {
                self.set_template(t);
            }
            DraChange::TemplateDeleted { namespace, name } => {
                self.remove_template(&namespace, &name);
            }
            DraChange::Slice(s) => {
                self.set_slice(s);
            }
            DraChange::SliceDeleted(n) => {
                self.remove_slice(&n);
            }
            DraChange::TaintRule(r) => {
                self.set_taint_rule(r);
            }
            DraChange::TaintRuleDeleted(n) => {
                self.remove_taint_rule(&n);
            }
        }
    }
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
    fn an_assumed_claim_hides_the_cluster_copy_until_the_cluster_moves_on() {
        let dra = Dra::new();
        dra.set_claim(claim("a", "1"));
        assert!(dra.allocated_claims().is_empty());
        let g = dra.generation();
        dra.assume_claim(allocated(claim("a", "1"))).unwrap();
        assert!(dra.generation() > g);
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
        assert_eq!(dra.claim("default", "a").unwrap().resource_version, "2");
        assert_eq!(dra.allocated_claims().len(), 1);
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
