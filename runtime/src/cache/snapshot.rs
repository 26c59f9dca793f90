//! A consistent view of the cache for one scheduling cycle.

use super::Slot;
use berth_sdk::{AffinityCounts, NodeInfo};
use std::collections::HashMap;
use std::sync::Arc;

/// The nodes as of one generation. Node infos are shared with the cache until the
/// cache changes them, so catching up costs one copy per changed node.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    generation: u64,
    nodes: Vec<Option<Arc<NodeInfo>>>,
    slot_generation: Vec<u64>,
    /// Slots of the nodes, in the order cycles visit them.
    order: Vec<u32>,
    by_name: HashMap<String, u32>,
    /// The slots each catch-up changed, as (the generation caught up to, slot), in
    /// order: a replica at generation `g` needs only the entries after `g`, so
    /// catching a replica up costs what changed, not the number of nodes.
    log: Vec<(u64, u32)>,
    /// Entries up to this generation were dropped from `log`; older replicas are
    /// caught up by a full scan.
    log_floor: u64,
    /// The pods with inter-pod affinity terms, over every node.
    affinity: AffinityCounts,
}

impl Snapshot {
    /// The cache generation this snapshot reflects.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How many nodes the snapshot holds.
    pub fn num_nodes(&self) -> usize {
        self.order.len()
    }

    /// The slots of every node, in visiting order.
    pub fn slots(&self) -> &[u32] {
        &self.order
    }

    /// A node by slot.
    pub fn node(&self, slot: u32) -> Option<&NodeInfo> {
        self.nodes.get(slot as usize)?.as_deref()
    }

    /// The shared node info of a slot (native plugins see it as is).
    pub fn shared(&self, slot: u32) -> Option<&Arc<NodeInfo>> {
        self.nodes.get(slot as usize)?.as_ref()
    }

    /// A node's slot by name.
    pub fn slot_of(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// A node by name.
    pub fn node_by_name(&self, name: &str) -> Option<&NodeInfo> {
        self.node(self.slot_of(name)?)
    }

    /// How many pods on the snapshot's nodes have inter-pod affinity terms.
    pub fn affinity_counts(&self) -> AffinityCounts {
        self.affinity
    }

    /// The shared node info by name (to see what changed).
    pub fn node_arc(&self, name: &str) -> Option<Arc<NodeInfo>> {
        self.nodes.get(self.slot_of(name)? as usize)?.clone()
    }

    pub(super) fn catch_up(
        &mut self,
        generation: u64,
        slots: &[Option<Slot>],
        slot_generation: &[u64],
    ) {
        if generation == self.generation && !self.nodes.is_empty() {
            return;
        }
        self.nodes.resize(slots.len(), None);
        self.slot_generation.resize(slots.len(), 0);
        let mut membership_changed = false;
        if self.log.len() > 2 * slots.len().max(64) {
            // Forget the older half; replicas that old take the full scan.
            let cut = self.log.len() / 2;
            self.log_floor = self.log[cut - 1].0;
            self.log.drain(..cut);
        }
        for (i, slot) in slots.iter().enumerate() {
            if slot_generation[i] <= self.generation && self.generation != 0 {
                continue;
            }
            self.log.push((generation, i as u32));
            let now = slot.as_ref().filter(|s| s.has_node).map(|s| s.info.clone());
            let was = self.nodes[i].take();
            if let Some(w) = &was {
                self.affinity.remove(w);
            }
            if let Some(n) = &now {
                self.affinity.add(n);
            }
            if was.is_some() != now.is_some()
                || was.as_ref().map(|w| w.name()) != now.as_ref().map(|n| n.name())
            {
                membership_changed = true;
            }
            self.nodes[i] = now;
            self.slot_generation[i] = slot_generation[i];
        }
        if membership_changed {
            self.order = (0..self.nodes.len() as u32)
                .filter(|&s| self.nodes[s as usize].is_some())
                .collect();
            self.by_name = self
                .order
                .iter()
                .map(|&s| {
                    (
                        self.nodes[s as usize]
                            .as_ref()
                            .expect("live")
                            .name()
                            .to_owned(),
                        s,
                    )
                })
                .collect();
        }
        self.generation = generation;
    }

    /// What a replica at generation `since` (`None`: an empty replica) must apply:
    /// the nodes to (re)send by slot, and the slots to drop.
    pub fn changes_since(&self, since: Option<u64>) -> (Vec<(u32, &NodeInfo)>, Vec<u32>) {
        let mut updated = Vec::new();
        let mut removed = Vec::new();
        if let Some(g) = since
            && g >= self.log_floor
            && g > 0
        {
            let from = self.log.partition_point(|&(cg, _)| cg <= g);
            let mut slots: Vec<u32> = self.log[from..].iter().map(|&(_, s)| s).collect();
            slots.sort_unstable();
            slots.dedup();
            for s in slots {
                let i = s as usize;
                if self.slot_generation.get(i).is_none_or(|&sg| sg <= g) {
                    continue;
                }
                match &self.nodes[i] {
                    Some(n) => updated.push((s, &**n)),
                    None => removed.push(s),
                }
            }
            return (updated, removed);
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let changed = match since {
                None => true,
                Some(g) => self.slot_generation[i] > g,
            };
            if !changed {
                continue;
            }
            match node {
                Some(n) => updated.push((i as u32, &**n)),
                None if since.is_some() => removed.push(i as u32),
                None => {}
            }
        }
        (updated, removed)
    }
}
