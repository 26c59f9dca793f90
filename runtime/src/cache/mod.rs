//! The cluster cache: nodes and the pods on them (bound and assumed), with
//! generation-based snapshots that copy only the nodes that changed.
//!
//! Nodes live in numbered slots. A slot's number is what plugins see as the node's
//! index in their replica; a removed node's slot is reused by a later one. Every change
//! to a slot takes the next generation, so a snapshot (and a plugin replica) catches
//! up by looking at the slots whose generation moved.

mod snapshot;

pub use snapshot::Snapshot;

use berth_cluster::pod_groups::{MemberState, PodGroups};
use berth_sdk::{Node, NodeInfo, Pod};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a cache operation was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CacheError {
    /// The pod is already in the cache.
    #[error("pod {0} is already in the cache")]
    PodExists(String),
    /// The pod is not in the cache.
    #[error("pod {0} is not in the cache")]
    PodNotFound(String),
    /// The pod is in the cache but not assumed.
    #[error("pod {0} is not assumed")]
    NotAssumed(String),
    /// The pod has no node.
    #[error("pod {0} has no node name")]
    NoNode(String),
}

#[derive(Clone, Debug)]
struct PodEntry {
    pod: Pod,
    assumed: bool,
    binding_finished: bool,
}

/// A pod taken out of the cache's counts by [`Cache::set_aside`].
#[derive(Debug)]
pub struct SetAside(PodEntry);

impl SetAside {
    /// The pod.
    pub fn pod(&self) -> &Pod {
        &self.0.pod
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub(crate) info: Arc<NodeInfo>,
    /// False while only pods (no node object) name this node.
    pub(crate) has_node: bool,
}

/// The scheduler's view of the cluster.
#[derive(Debug, Default)]
pub struct Cache {
    slots: Vec<Option<Slot>>,
    /// The generation at which each slot last changed (also on removal).
    slot_generation: Vec<u64>,
    free: Vec<u32>,
    by_name: HashMap<String, u32>,
    pods: HashMap<String, PodEntry>,
    pods_by_node: HashMap<String, HashSet<String>>,
    /// Which nodes list each image name (for `ImageState::num_nodes`).
    image_nodes: HashMap<String, HashSet<String>>,
    generation: u64,
    /// Where the members of pod groups are told of being assumed, bound or
    /// forgotten, if anywhere.
    groups: Option<PodGroups>,
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tells `groups` where each pod group member is, from now on: assumed, bound,
    /// or (forgotten) pending again; a removed member leaves its group.
    pub fn track_groups(&mut self, groups: PodGroups) {
        self.groups = Some(groups);
    }

    fn member(&self, pod: &Pod, state: MemberState) {
        if let (Some(groups), Some(group)) = (&self.groups, &pod.scheduling_group) {
            groups.set_member(&pod.uid, &pod.namespace, group, state);
        }
    }

    /// The current generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How many nodes (with a node object) there are.
    pub fn node_count(&self) -> usize {
        self.slots.iter().flatten().filter(|s| s.has_node).count()
    }

    /// How many pods the cache counts on nodes (bound, and assumed).
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// The node info of a node by name.
    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        let slot = *self.by_name.get(name)?;
        self.slots[slot as usize]
            .as_ref()
            .filter(|s| s.has_node)
            .map(|s| &*s.info)
    }

    /// Every node (with a node object) and its pods, in slot order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeInfo> {
        self.slots
            .iter()
            .flatten()
            .filter(|s| s.has_node)
            .map(|s| &*s.info)
    }

    /// Marks a slot changed: a new generation, and for the node info a new stamp
    /// (`NodeInfo::stamp`, which native plugins see; process-wide, so that no two
    /// caches give the same stamp to different nodes).
    fn touch(&mut self, slot: u32) {
        static LAST_STAMP: AtomicU64 = AtomicU64::new(0);
        self.generation += 1;
        self.slot_generation[slot as usize] = self.generation;
        if let Some(entry) = self.slots[slot as usize].as_mut() {
            // Every caller changed the info through `make_mut` just before: the Arc
            // is not shared, so this copies nothing.
            Arc::make_mut(&mut entry.info).stamp = LAST_STAMP.fetch_add(1, Ordering::Relaxed) + 1;
        }
    }

    fn slot_for(&mut self, name: &str) -> u32 {
        if let Some(&s) = self.by_name.get(name) {
            return s;
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.slot_generation.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        let info = NodeInfo::new(Node {
            name: name.to_owned(),
            ..Node::default()
        });
        self.slots[slot as usize] = Some(Slot {
            info: Arc::new(info),
            has_node: false,
        });
        self.by_name.insert(name.to_owned(), slot);
        slot
    }

    fn release_if_empty(&mut self, name: &str) {
        let Some(&slot) = self.by_name.get(name) else {
            return;
        };
        let empty = self.pods_by_node.get(name).is_none_or(|p| p.is_empty());
        let has_node = self.slots[slot as usize]
            .as_ref()
            .is_some_and(|s| s.has_node);
        if empty && !has_node {
            self.slots[slot as usize] = None;
            self.by_name.remove(name);
            self.pods_by_node.remove(name);
            self.free.push(slot);
            self.touch(slot);
        }
    }

    /// Adds a node, or updates it (its pods stay counted).
    pub fn add_or_update_node(&mut self, node: Node) {
        let name = node.name.clone();
        let slot = self.slot_for(&name);
        let entry = self.slots[slot as usize].as_mut().expect("slot just made");
        let old_images = image_names(&entry.info.node);
        let new_images = image_names(&node);
        let info = Arc::make_mut(&mut entry.info);
        info.node = node;
        entry.has_node = true;
        self.touch(slot);
        if old_images != new_images {
            for n in &old_images {
                if let Some(set) = self.image_nodes.get_mut(n) {
                    set.remove(&name);
                }
            }
            for n in &new_images {
                self.image_nodes
                    .entry(n.clone())
                    .or_default()
                    .insert(name.clone());
            }
            self.refresh_image_counts(old_images.union(&new_images));
        } else if !new_images.is_empty() {
            // The node object was replaced: its counts must be filled in again.
            self.refresh_image_counts(new_images.iter());
        }
    }

    /// Recounts `ImageState::num_nodes` on every node that lists one of `names`.
    fn refresh_image_counts<'a>(&mut self, names: impl Iterator<Item = &'a String>) {
        let mut nodes: HashSet<String> = HashSet::new();
        for n in names {
            if let Some(set) = self.image_nodes.get(n) {
                nodes.extend(set.iter().cloned());
            }
            if self.image_nodes.get(n).is_some_and(HashSet::is_empty) {
                self.image_nodes.remove(n);
            }
        }
        for node in nodes {
            let Some(&slot) = self.by_name.get(&node) else {
                continue;
            };
            let counts: Vec<u32> = match &self.slots[slot as usize] {
                Some(entry) => entry
                    .info
                    .node
                    .images
                    .iter()
                    .map(|img| {
                        let mut holders: HashSet<&String> = HashSet::new();
                        for n in &img.names {
                            if let Some(set) = self.image_nodes.get(n) {
                                holders.extend(set);
                            }
                        }
                        holders.len() as u32
                    })
                    .collect(),
                None => continue,
            };
            let entry = self.slots[slot as usize].as_mut().expect("checked above");
            if entry
                .info
                .node
                .images
                .iter()
                .map(|i| i.num_nodes)
                .eq(counts.iter().copied())
            {
                continue;
            }
            let info = Arc::make_mut(&mut entry.info);
            for (img, c) in info.node.images.iter_mut().zip(counts) {
                img.num_nodes = c;
            }
            self.touch(slot);
        }
    }

    /// Removes a node. Pods that still name it stay counted until they are removed,
    /// as upstream keeps them; the node itself is gone from snapshots.
    pub fn remove_node(&mut self, name: &str) {
        let Some(&slot) = self.by_name.get(name) else {
            return;
        };
        let mut images = HashSet::new();
        if let Some(entry) = self.slots[slot as usize].as_mut() {
            entry.has_node = false;
            images = image_names(&entry.info.node);
            Arc::make_mut(&mut entry.info).node.images.clear();
        }
        for n in &images {
            if let Some(set) = self.image_nodes.get_mut(n) {
                set.remove(name);
            }
        }
        self.touch(slot);
        self.release_if_empty(name);
        self.refresh_image_counts(images.iter());
    }

    fn count_pod(&mut self, pod: &Pod) {
        let slot = self.slot_for(&pod.node_name);
        let entry = self.slots[slot as usize].as_mut().expect("slot just made");
        Arc::make_mut(&mut entry.info).add_pod(pod);
        self.pods_by_node
            .entry(pod.node_name.clone())
            .or_default()
            .insert(pod.uid.clone());
        self.touch(slot);
    }

    fn uncount_pod(&mut self, pod: &Pod) {
        if let Some(&slot) = self.by_name.get(&pod.node_name) {
            if let Some(entry) = self.slots[slot as usize].as_mut() {
                Arc::make_mut(&mut entry.info).remove_pod(pod);
            }
            if let Some(set) = self.pods_by_node.get_mut(&pod.node_name) {
                set.remove(&pod.uid);
            }
            self.touch(slot);
            self.release_if_empty(&pod.node_name);
        }
    }

    /// Counts a pod the scheduler placed before the API server confirmed it.
    pub fn assume_pod(&mut self, pod: &Pod) -> Result<(), CacheError> {
        if pod.node_name.is_empty() {
            return Err(CacheError::NoNode(pod.key()));
        }
        if self.pods.contains_key(&pod.uid) {
            return Err(CacheError::PodExists(pod.key()));
        }
        self.count_pod(pod);
        self.member(pod, MemberState::Assumed);
        self.pods.insert(
            pod.uid.clone(),
            PodEntry {
                pod: pod.clone(),
                assumed: true,
                binding_finished: false,
            },
        );
        Ok(())
    }

    /// Marks an assumed pod's binding as done (it stays assumed until the cluster
    /// confirms it with [`Cache::add_pod`]).
    pub fn finish_binding(&mut self, uid: &str) -> Result<(), CacheError> {
        match self.pods.get_mut(uid) {
            Some(e) if e.assumed => {
                e.binding_finished = true;
                Ok(())
            }
            Some(e) => Err(CacheError::NotAssumed(e.pod.key())),
            None => Err(CacheError::PodNotFound(uid.to_owned())),
        }
    }

    /// Drops an assumed pod whose binding failed.
    pub fn forget_pod(&mut self, uid: &str) -> Result<(), CacheError> {
        match self.pods.get(uid) {
            Some(e) if e.assumed => {
                let pod = e.pod.clone();
                self.pods.remove(uid);
                self.uncount_pod(&pod);
                // Back to pending, unless it left its group meanwhile (deleted).
                if let Some(groups) = &self.groups {
                    groups.move_member(uid, MemberState::Pending);
                }
                Ok(())
            }
            Some(e) => Err(CacheError::NotAssumed(e.pod.key())),
            None => Err(CacheError::PodNotFound(uid.to_owned())),
        }
    }

    /// Whether the pod is assumed.
    pub fn is_assumed(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|e| e.assumed)
    }

    /// Whether the pod was assumed and its binding finished.
    pub fn binding_finished(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|e| e.binding_finished)
    }

    /// A bound pod the cluster reports: confirms an assumed pod (moving it if the
    /// cluster placed it elsewhere), or counts a new one.
    pub fn add_pod(&mut self, pod: &Pod) -> Result<(), CacheError> {
        if pod.node_name.is_empty() {
            return Err(CacheError::NoNode(pod.key()));
        }
        match self.pods.get(&pod.uid) {
            Some(e) if e.assumed => {
                let old = e.pod.clone();
                self.uncount_pod(&old);
            }
            Some(_) => return Err(CacheError::PodExists(pod.key())),
            None => {}
        }
        self.count_pod(pod);
        self.member(pod, MemberState::Bound);
        self.pods.insert(
            pod.uid.clone(),
            PodEntry {
                pod: pod.clone(),
                assumed: false,
                binding_finished: false,
            },
        );
        Ok(())
    }

    /// A bound pod changed.
    pub fn update_pod(&mut self, pod: &Pod) -> Result<(), CacheError> {
        let old = self
            .pods
            .get(&pod.uid)
            .ok_or_else(|| CacheError::PodNotFound(pod.key()))?
            .pod
            .clone();
        self.uncount_pod(&old);
        self.count_pod(pod);
        if let Some(e) = self.pods.get_mut(&pod.uid) {
            e.pod = pod.clone();
        }
        Ok(())
    }

    /// A bound (or assumed) pod is gone.
    pub fn remove_pod(&mut self, uid: &str) -> Result<Pod, CacheError> {
        let e = self
            .pods
            .remove(uid)
            .ok_or_else(|| CacheError::PodNotFound(uid.to_owned()))?;
        self.uncount_pod(&e.pod);
        if let Some(groups) = &self.groups {
            groups.remove_member(uid);
        }
        Ok(e.pod)
    }

    /// Takes a pod out of its node's counts for a what-if (workload-aware
    /// preemption's): the pod is kept aside as it was (assumed or bound), its pod
    /// group is not told; [`Cache::put_back`] counts it again.
    pub fn set_aside(&mut self, uid: &str) -> Result<SetAside, CacheError> {
        let e = self
            .pods
            .remove(uid)
            .ok_or_else(|| CacheError::PodNotFound(uid.to_owned()))?;
        self.uncount_pod(&e.pod);
        Ok(SetAside(e))
    }

    /// Counts a pod set aside again, as it was.
    pub fn put_back(&mut self, aside: SetAside) {
        let SetAside(e) = aside;
        if self.pods.contains_key(&e.pod.uid) {
            // The what-if runs on the scheduler's thread, which alone changes the
            // cache: nothing can have taken the UID meanwhile.
            tracing::error!(pod = %e.pod.key(), "a pod set aside came back twice");
            return;
        }
        self.count_pod(&e.pod);
        self.pods.insert(e.pod.uid.clone(), e);
    }

    /// The pod with this UID, if the cache has it.
    pub fn pod(&self, uid: &str) -> Option<&Pod> {
        self.pods.get(uid).map(|e| &e.pod)
    }

    /// Brings a snapshot up to date, copying only the slots that changed since it
    /// was last updated.
    pub fn update_snapshot(&self, snapshot: &mut Snapshot) {
        snapshot.catch_up(self.generation, &self.slots, &self.slot_generation);
    }
}

fn image_names(node: &Node) -> HashSet<String> {
    node.images
        .iter()
        .flat_map(|i| i.names.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Container, ImageState, ResourceList};

    #[test]
    fn image_states_count_the_nodes_that_have_them() {
        let img = |n: &str| ImageState {
            names: vec![n.into()],
            size_bytes: 100,
            num_nodes: 0,
        };
        let mut c = Cache::new();
        c.add_or_update_node(Node {
            images: vec![img("nginx"), img("redis")],
            ..node("a")
        });
        c.add_or_update_node(Node {
            images: vec![img("nginx")],
            ..node("b")
        });
        let counts = |c: &Cache, n: &str| -> Vec<u32> {
            c.node(n)
                .unwrap()
                .node
                .images
                .iter()
                .map(|i| i.num_nodes)
                .collect()
        };
        assert_eq!(counts(&c, "a"), [2, 1]);
        assert_eq!(counts(&c, "b"), [2]);
        c.remove_node("b");
        assert_eq!(counts(&c, "a"), [1, 1]);
    }

    fn node(name: &str) -> Node {
        Node {
            name: name.into(),
            ..Node::default()
        }
    }

    fn pod(uid: &str, node: &str, cpu: i64) -> Pod {
        Pod {
            uid: uid.into(),
            namespace: "default".into(),
            name: uid.into(),
            node_name: node.into(),
            containers: vec![Container {
                requests: ResourceList::from([("cpu".to_owned(), cpu)]),
                ..Container::default()
            }],
            ..Pod::default()
        }
    }

    #[test]
    fn assume_forget_and_confirm() {
        let mut c = Cache::new();
        c.add_or_update_node(node("a"));
        c.add_or_update_node(node("b"));
        c.assume_pod(&pod("p", "a", 100)).unwrap();
        assert_eq!(c.node("a").unwrap().requested.milli_cpu, 100);
        assert!(c.is_assumed("p"));
        assert_eq!(
            c.assume_pod(&pod("p", "a", 100)),
            Err(CacheError::PodExists("default/p".into()))
        );
        c.finish_binding("p").unwrap();
        assert!(c.binding_finished("p"));
        c.forget_pod("p").unwrap();
        assert_eq!(c.node("a").unwrap().requested.milli_cpu, 0);
        assert_eq!(c.node("a").unwrap().pod_count, 0);

        // An assumed pod the cluster places elsewhere moves.
        c.assume_pod(&pod("q", "a", 50)).unwrap();
        c.add_pod(&pod("q", "b", 50)).unwrap();
        assert!(!c.is_assumed("q"));
        assert_eq!(c.node("a").unwrap().requested.milli_cpu, 0);
        assert_eq!(c.node("b").unwrap().requested.milli_cpu, 50);
        assert_eq!(
            c.forget_pod("q"),
            Err(CacheError::NotAssumed("default/q".into()))
        );
        c.remove_pod("q").unwrap();
        assert_eq!(c.node("b").unwrap().pod_count, 0);
    }

    #[test]
    fn a_node_gets_a_new_stamp_with_each_change_and_no_two_caches_share_one() {
        let mut c = Cache::new();
        c.add_or_update_node(node("a"));
        c.add_or_update_node(node("b"));
        let stamp = |c: &Cache, n: &str| c.node(n).unwrap().stamp;
        let (a0, b0) = (stamp(&c, "a"), stamp(&c, "b"));
        assert!(a0 != 0 && b0 != 0 && a0 != b0);

        c.assume_pod(&pod("p", "a", 100)).unwrap();
        let a1 = stamp(&c, "a");
        assert_ne!(a1, a0, "a pod assumed");
        assert_eq!(stamp(&c, "b"), b0, "another node keeps its stamp");
        c.forget_pod("p").unwrap();
        assert!(![a0, a1].contains(&stamp(&c, "a")), "a pod forgotten");
        let mut relabelled = node("b");
        relabelled.labels.insert("zone".into(), "z1".into());
        c.add_or_update_node(relabelled);
        assert_ne!(stamp(&c, "b"), b0, "a node updated");

        // Another cache (another scheduler in the same process) never reuses one.
        let mut other = Cache::new();
        other.add_or_update_node(node("a"));
        assert!(![a0, a1, stamp(&c, "a")].contains(&stamp(&other, "a")));
    }

    #[test]
    fn pods_on_unknown_nodes_wait_for_the_node() {
        let mut c = Cache::new();
        c.add_pod(&pod("p", "later", 300)).unwrap();
        assert!(c.node("later").is_none());
        assert_eq!(c.nodes().count(), 0, "a node only pods name is not listed");
        c.add_or_update_node(node("later"));
        assert_eq!(c.node("later").unwrap().requested.milli_cpu, 300);
        let listed: Vec<(&str, usize)> = c.nodes().map(|n| (n.name(), n.pods.len())).collect();
        assert_eq!(listed, [("later", 1)]);
        c.remove_node("later");
        assert!(c.node("later").is_none());
        c.remove_pod("p").unwrap();
        assert_eq!(c.node_count(), 0);
    }

    #[test]
    fn snapshots_copy_only_changed_nodes() {
        let mut c = Cache::new();
        for n in ["a", "b", "c"] {
            c.add_or_update_node(node(n));
        }
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s);
        assert_eq!(s.num_nodes(), 3);
        let g1 = s.generation();
        let before_b = s.node_arc("b").unwrap();

        c.add_pod(&pod("p", "a", 10)).unwrap();
        c.update_snapshot(&mut s);
        assert!(s.generation() > g1);
        assert_eq!(s.node_by_name("a").unwrap().pod_count, 1);
        // b did not change: the snapshot still shares the same allocation.
        assert!(Arc::ptr_eq(&before_b, &s.node_arc("b").unwrap()));

        let (updated, removed) = s.changes_since(Some(g1));
        assert_eq!(updated.len(), 1);
        assert_eq!(updated[0].1.name(), "a");
        assert!(removed.is_empty());

        let g2 = s.generation();
        c.remove_node("c");
        c.update_snapshot(&mut s);
        assert_eq!(s.num_nodes(), 2);
        let (updated, removed) = s.changes_since(Some(g2));
        assert!(updated.is_empty());
        assert_eq!(removed.len(), 1);
        let (all, _) = s.changes_since(None);
        assert_eq!(all.len(), 2);
    }
}
