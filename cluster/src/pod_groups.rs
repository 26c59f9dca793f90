//! The cluster's PodGroups (`scheduling.k8s.io` PodGroup, kube-scheduler's
//! workload-aware scheduling) and what the scheduler knows of their members: which
//! pods name each group in `spec.schedulingGroup`, and which of them are assumed or
//! bound. kube-scheduler keeps the same in its `PodGroupManager`'s states; plugins
//! read it through `workload.get-pod-group`, the pod group cycle through
//! [`PodGroups::state`]. The Workloads beside them say which template each group
//! was made from; scheduling does not need them.

pub use super::manifest::pod_group::{PodGroupObject, PodGroupPolicy};
pub use super::manifest::scheduling_workload::WorkloadObject;
use berth_sdk::PodGroupState;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Where a member is, as the group counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// Pending: queued (held back included) or in a scheduling cycle.
    Pending,
    /// Assumed on a node: in a binding cycle or waiting at Permit.
    Assumed,
    /// Bound.
    Bound,
}

/// A group and its members, counted (see [`PodGroups::summaries`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSummary {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The PodGroup object, if the cluster has it.
    pub object: Option<PodGroupObject>,
    /// Members pending (held back included) or in a scheduling cycle.
    pub pending: usize,
    /// Members assumed.
    pub assumed: usize,
    /// Members bound.
    pub bound: usize,
    /// The Workload template its PodGroup names, if it names one.
    pub template: Option<GroupTemplate>,
}

/// The Workload template a PodGroup was made from
/// (`spec.workloadRef`), and whether the cluster has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupTemplate {
    /// The Workload's namespace (the group's).
    pub namespace: String,
    /// The Workload's name.
    pub workload: String,
    /// The template's name within it.
    pub template: String,
    /// Whether the cluster has them.
    pub found: TemplateFound,
}

/// Whether the cluster has the Workload template a PodGroup names. Either way the
/// group is scheduled: it carries its own copy of the template's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateFound {
    /// The Workload, with that template.
    Yes,
    /// No Workload of that name in the group's namespace.
    NoWorkload,
    /// The Workload, without a template of that name.
    NoTemplate,
}

impl GroupTemplate {
    /// Why the template is not known, in a sentence; `None` when it is.
    pub fn missing(&self) -> Option<String> {
        match self.found {
            TemplateFound::Yes => None,
            TemplateFound::NoWorkload => Some(format!(
                "the cluster has no Workload {}/{}",
                self.namespace, self.workload
            )),
            TemplateFound::NoTemplate => Some(format!(
                "Workload {}/{} has no pod group template {:?}",
                self.namespace, self.workload, self.template
            )),
        }
    }
}

/// One group's members, by UID, and how many are in each state (so that a group's
/// counts, asked at every member's PreEnqueue, do not walk a big gang).
#[derive(Debug, Default)]
struct Members {
    states: HashMap<String, MemberState>,
    /// Pending, assumed and bound, in that order.
    counts: [usize; 3],
}

impl Members {
    fn slot(state: MemberState) -> usize {
        match state {
            MemberState::Pending => 0,
            MemberState::Assumed => 1,
            MemberState::Bound => 2,
        }
    }

    fn insert(&mut self, uid: &str, state: MemberState) {
        if let Some(old) = self.states.insert(uid.to_owned(), state) {
            self.counts[Self::slot(old)] -= 1;
        }
        self.counts[Self::slot(state)] += 1;
    }

    fn remove(&mut self, uid: &str) {
        if let Some(old) = self.states.remove(uid) {
            self.counts[Self::slot(old)] -= 1;
        }
    }

    fn count(&self, state: MemberState) -> usize {
        self.counts[Self::slot(state)]
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// The PodGroup objects, by (namespace, name).
    objects: HashMap<(String, String), PodGroupObject>,
    /// The members of each group (whether its object exists yet or not), by
    /// (namespace, name).
    members: HashMap<(String, String), Members>,
    /// Each member's group, by UID.
    group_of: HashMap<String, (String, String)>,
    /// The Workloads, by (namespace, name).
    workloads: HashMap<(String, String), WorkloadObject>,
}

/// The PodGroups and their members; clones share them.
#[derive(Clone, Debug, Default)]
pub struct PodGroups(Arc<RwLock<Inner>>);

impl PodGroups {
    /// None.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds or replaces a PodGroup; the one it replaced, if any.
    pub fn set(&self, group: PodGroupObject) -> Option<PodGroupObject> {
        let key = (group.namespace.clone(), group.name.clone());
        self.write().objects.insert(key, group)
    }

    /// Removes a PodGroup (its members stay known, waiting for it to come back).
    pub fn remove(&self, namespace: &str, name: &str) -> Option<PodGroupObject> {
        self.write()
            .objects
            .remove(&(namespace.to_owned(), name.to_owned()))
    }

    /// The PodGroup object, if the cluster has it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<PodGroupObject> {
        self.read()
            .objects
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Adds or replaces a Workload; the one it replaced, if any.
    pub fn set_workload(&self, workload: WorkloadObject) -> Option<WorkloadObject> {
        let key = (workload.namespace.clone(), workload.name.clone());
        self.write().workloads.insert(key, workload)
    }

    /// Removes a Workload (the PodGroups made from it stay, and are scheduled).
    pub fn remove_workload(&self, namespace: &str, name: &str) -> Option<WorkloadObject> {
        self.write()
            .workloads
            .remove(&(namespace.to_owned(), name.to_owned()))
    }

    /// The Workload, if the cluster has it.
    pub fn workload(&self, namespace: &str, name: &str) -> Option<WorkloadObject> {
        self.read()
            .workloads
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// The Workload template `group` names, and whether the cluster has it; `None`
    /// for a group that names none.
    pub fn template_of(&self, group: &PodGroupObject) -> Option<GroupTemplate> {
        Self::lookup(&self.read(), group)
    }

    fn lookup(inner: &Inner, group: &PodGroupObject) -> Option<GroupTemplate> {
        let r = group.template_ref.as_ref()?;
        let key = (group.namespace.clone(), r.workload_name.clone());
        let found = match inner.workloads.get(&key) {
            None => TemplateFound::NoWorkload,
            Some(w) if w.template(&r.template_name).is_none() => TemplateFound::NoTemplate,
            Some(_) => TemplateFound::Yes,
        };
        Some(GroupTemplate {
            namespace: group.namespace.clone(),
            workload: r.workload_name.clone(),
            template: r.template_name.clone(),
            found,
        })
    }

    /// Notes where a member is: `group` is the pod's `spec.schedulingGroup`.
    pub fn set_member(&self, uid: &str, namespace: &str, group: &str, state: MemberState) {
        let key = (namespace.to_owned(), group.to_owned());
        let mut inner = self.write();
        inner.group_of.insert(uid.to_owned(), key.clone());
        inner.members.entry(key).or_default().insert(uid, state);
    }

    /// Moves a known member to `state`; nothing for a pod of no group.
    pub fn move_member(&self, uid: &str, state: MemberState) {
        let mut inner = self.write();
        let Some(key) = inner.group_of.get(uid).cloned() else {
            return;
        };
        if let Some(m) = inner.members.get_mut(&key) {
            m.insert(uid, state);
        }
    }

    /// A member is gone.
    pub fn remove_member(&self, uid: &str) {
        let mut inner = self.write();
        let Some(key) = inner.group_of.remove(uid) else {
            return;
        };
        if let Some(m) = inner.members.get_mut(&key) {
            m.remove(uid);
            if m.states.is_empty() {
                inner.members.remove(&key);
            }
        }
    }

    /// The group of a member, as (namespace, name).
    pub fn group_of(&self, uid: &str) -> Option<(String, String)> {
        self.read().group_of.get(uid).cloned()
    }

    /// The UIDs of a group's members in `state`.
    pub fn members_in(&self, namespace: &str, name: &str, state: MemberState) -> Vec<String> {
        let inner = self.read();
        let key = (namespace.to_owned(), name.to_owned());
        let mut uids: Vec<String> = inner
            .members
            .get(&key)
            .map(|m| {
                m.states
                    .iter()
                    .filter(|(_, s)| **s == state)
                    .map(|(u, _)| u.clone())
                    .collect()
            })
            .unwrap_or_default();
        uids.sort();
        uids
    }

    /// The group with its members counted; `None` while the cluster has no such
    /// PodGroup.
    pub fn state(&self, namespace: &str, name: &str) -> Option<PodGroupState> {
        let inner = self.read();
        let key = (namespace.to_owned(), name.to_owned());
        let object = inner.objects.get(&key)?;
        let mut state = PodGroupState {
            min_count: object.min_count(),
            ..PodGroupState::default()
        };
        if let Some(members) = inner.members.get(&key) {
            state.all_pods = u32::try_from(members.states.len()).unwrap_or(u32::MAX);
            let scheduled = members.count(MemberState::Assumed) + members.count(MemberState::Bound);
            state.scheduled_pods = u32::try_from(scheduled).unwrap_or(u32::MAX);
        }
        Some(state)
    }

    /// Every group that has a PodGroup object or members, by (namespace, name), with
    /// its members counted by where they are.
    pub fn summaries(&self) -> Vec<GroupSummary> {
        let inner = self.read();
        let mut keys: Vec<&(String, String)> =
            inner.objects.keys().chain(inner.members.keys()).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|key| {
                let object = inner.objects.get(key);
                let mut summary = GroupSummary {
                    namespace: key.0.clone(),
                    name: key.1.clone(),
                    object: object.cloned(),
                    pending: 0,
                    assumed: 0,
                    bound: 0,
                    template: object.and_then(|o| Self::lookup(&inner, o)),
                };
                if let Some(m) = inner.members.get(key) {
                    summary.pending = m.count(MemberState::Pending);
                    summary.assumed = m.count(MemberState::Assumed);
                    summary.bound = m.count(MemberState::Bound);
                }
                summary
            })
            .collect()
    }

    /// How many PodGroup objects and tracked members there are (bookkeeping).
    pub fn counts(&self) -> (usize, usize) {
        let inner = self.read();
        (inner.objects.len(), inner.group_of.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gang(name: &str, min_count: u32) -> PodGroupObject {
        PodGroupObject {
            namespace: "default".into(),
            name: name.into(),
            policy: PodGroupPolicy::Gang { min_count },
            topology_keys: Vec::new(),
            ..Default::default()
        }
    }

    #[test]
    fn a_group_counts_its_members_by_where_they_are() {
        let g = PodGroups::new();
        g.set_member("a", "default", "trainer", MemberState::Pending);
        g.set_member("b", "default", "trainer", MemberState::Pending);
        g.set_member("c", "default", "trainer", MemberState::Bound);
        g.set_member("x", "other", "trainer", MemberState::Pending);
        // No object yet: nothing to say.
        assert_eq!(g.state("default", "trainer"), None);
        g.set(gang("trainer", 3));
        g.move_member("a", MemberState::Assumed);
        let s = g.state("default", "trainer").unwrap();
        assert_eq!(
            s,
            PodGroupState {
                min_count: Some(3),
                all_pods: 3,
                scheduled_pods: 2,
            }
        );
        g.remove_member("c");
        g.move_member("a", MemberState::Pending);
        let s = g.state("default", "trainer").unwrap();
        assert_eq!((s.all_pods, s.scheduled_pods), (2, 0));
        assert_eq!(
            g.members_in("default", "trainer", MemberState::Pending),
            ["a", "b"]
        );
        // A member noted again (a pod seen again) is counted once, where it is now;
        // the counts kept per state agree with the members themselves.
        g.set_member("b", "default", "trainer", MemberState::Bound);
        g.set_member("b", "default", "trainer", MemberState::Bound);
        let s = g.state("default", "trainer").unwrap();
        assert_eq!((s.all_pods, s.scheduled_pods), (2, 1));
        let summary = g
            .summaries()
            .into_iter()
            .find(|s| s.namespace == "default" && s.name == "trainer")
            .unwrap();
        assert_eq!((summary.pending, summary.assumed, summary.bound), (1, 0, 1));
        g.move_member("b", MemberState::Pending);
        // A removed object keeps its members for when it comes back.
        g.remove("default", "trainer");
        assert_eq!(g.state("default", "trainer"), None);
        assert_eq!(g.group_of("b"), Some(("default".into(), "trainer".into())));
        g.remove_member("a");
        g.remove_member("b");
        g.remove_member("x");
        assert_eq!(g.counts(), (0, 0));
    }

    #[test]
    fn a_group_s_workload_template_is_looked_up_and_may_be_missing() {
        use crate::manifest::pod_group::WorkloadTemplateRef;
        use crate::manifest::scheduling_workload::PodGroupTemplate;
        let g = PodGroups::new();
        let mut trainer = gang("trainer", 2);
        trainer.template_ref = Some(WorkloadTemplateRef {
            workload_name: "train".into(),
            template_name: "workers".into(),
        });
        g.set(trainer.clone());
        g.set(gang("plain", 2));
        let found = |g: &PodGroups| g.template_of(&trainer).map(|t| t.found);
        // A group that names no template has none to find.
        assert_eq!(g.template_of(&gang("plain", 2)), None);
        // Named, but the cluster has no Workload yet.
        let t = g.template_of(&trainer).unwrap();
        assert_eq!(
            (t.workload.as_str(), t.template.as_str(), t.found),
            ("train", "workers", TemplateFound::NoWorkload)
        );
        assert_eq!(
            t.missing().as_deref(),
            Some("the cluster has no Workload default/train")
        );
        let workload = |templates: &[&str]| WorkloadObject {
            namespace: "default".into(),
            name: "train".into(),
            controller_ref: None,
            templates: templates
                .iter()
                .map(|n| PodGroupTemplate {
                    name: (*n).to_owned(),
                    ..Default::default()
                })
                .collect(),
        };
        // A Workload of that name in another namespace is not it.
        g.set_workload(WorkloadObject {
            namespace: "other".into(),
            ..workload(&["workers"])
        });
        assert_eq!(found(&g), Some(TemplateFound::NoWorkload));
        assert_eq!(g.set_workload(workload(&["driver"])), None);
        assert_eq!(found(&g), Some(TemplateFound::NoTemplate));
        assert_eq!(
            g.template_of(&trainer).unwrap().missing().as_deref(),
            Some("Workload default/train has no pod group template \"workers\"")
        );
        // Updated: the one replaced comes back.
        let old = g.set_workload(workload(&["driver", "workers"]));
        assert_eq!(old, Some(workload(&["driver"])));
        assert_eq!(found(&g), Some(TemplateFound::Yes));
        assert_eq!(g.template_of(&trainer).unwrap().missing(), None);
        assert_eq!(
            g.workload("default", "train").map(|w| w.templates.len()),
            Some(2)
        );
        // The summaries carry it.
        let summaries = g.summaries();
        let of = |name: &str| {
            summaries
                .iter()
                .find(|s| s.name == name)
                .unwrap()
                .template
                .clone()
        };
        assert_eq!(of("trainer").map(|t| t.found), Some(TemplateFound::Yes));
        assert_eq!(of("plain"), None);
        // Removed: the group stays, its template is missing again.
        assert!(g.remove_workload("default", "train").is_some());
        assert!(g.remove_workload("default", "train").is_none());
        assert_eq!(found(&g), Some(TemplateFound::NoWorkload));
        assert!(g.get("default", "trainer").is_some());
    }
}
