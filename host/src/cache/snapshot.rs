//! A consistent view of the cache for one scheduling cycle.

use super::Slot;
use berth_sdk::NodeInfo;
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

    /// A node's slot by name.
    pub fn slot_of(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// A node by name.
    pub fn node_by_name(&self, name: &str) -> Option<&NodeInfo> {
        self.node(self.slot_of(name)?)
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
        for (i, slot) in slots.iter().enumerate() {
            if slot_generation[i] <= self.generation && self.generation != 0 {
                continue;
            }
            let now = slot.as_ref().filter(|s| s.has_node).map(|s| s.info.clone());
            let was = self.nodes[i].take();
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
