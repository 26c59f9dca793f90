//! Every node of a replica in slot order, as PreFilter and PreScore take them,
//! kept up to date as the replica changes.
//!
//! Both replicas (the guest's, behind the component boundary, and the host's native
//! views) hand PreFilter and PreScore the whole cluster as `&[&NodeInfo]`. Building
//! that list walks every slot; a cycle changes one node (the pod just bound), so
//! rebuilding it on the first such call of every cycle cost each plugin a walk of the
//! cluster per cycle. Here a node replaced in its slot moves one pointer; only a slot
//! that gains or loses its node makes the next use rebuild the list.

use crate::NodeInfo;

/// Pointers to a replica's nodes, in slot order, and where each slot's is.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct NodeList {
    ptrs: Vec<*const NodeInfo>,
    /// Each slot's index in `ptrs`, [`NodeList::EMPTY`] for a slot without a node.
    /// Meaningful only while `valid`.
    pos: Vec<u32>,
    valid: bool,
}

// SAFETY: the pointers are into node infos that the replica owning this list owns
// (boxes, or `Arc`s, which are `Send` and `Sync`); the list moves between threads
// only with that replica.
unsafe impl Send for NodeList {}

impl NodeList {
    const EMPTY: u32 = u32::MAX;

    /// Notes that `slot` now holds `node` (`None`: nothing). Call it before the
    /// slot's previous node can be dropped.
    pub fn set(&mut self, slot: u32, node: Option<*const NodeInfo>) {
        if !self.valid {
            return;
        }
        let at = self.pos.get(slot as usize).copied().unwrap_or(Self::EMPTY);
        match (at, node) {
            (Self::EMPTY, None) => {}
            (Self::EMPTY, Some(_)) | (_, None) => self.invalidate(),
            (at, Some(ptr)) => self.ptrs[at as usize] = ptr,
        }
    }

    /// Forgets every pointer; the next [`NodeList::refresh`] rebuilds the list.
    pub fn invalidate(&mut self) {
        self.valid = false;
        self.ptrs.clear();
        self.pos.clear();
    }

    /// Rebuilds the list from `slots` (each slot's node in slot order, `None` for
    /// an empty slot) if a slot gained or lost its node since it was built.
    pub fn refresh(&mut self, slots: impl Iterator<Item = Option<*const NodeInfo>>) {
        if self.valid {
            return;
        }
        for node in slots {
            match node {
                Some(ptr) => {
                    self.pos.push(self.ptrs.len() as u32);
                    self.ptrs.push(ptr);
                }
                None => self.pos.push(Self::EMPTY),
            }
        }
        self.valid = true;
    }

    /// The nodes, as [`NodeList::refresh`] left them.
    ///
    /// # Safety
    /// Every pointer given to [`NodeList::refresh`] or [`NodeList::set`] since the
    /// last rebuild must point to a live node info for as long as the returned slice
    /// is used: the owner may drop or replace a slot's node only after telling the
    /// list with `set`, and not while the slice lives.
    pub unsafe fn nodes(&self) -> &[&NodeInfo] {
        debug_assert!(self.valid || self.ptrs.is_empty());
        // SAFETY: `*const NodeInfo` and `&NodeInfo` have the same layout, every
        // pointer is non-null, and the caller keeps what they point to alive.
        unsafe { std::slice::from_raw_parts(self.ptrs.as_ptr().cast(), self.ptrs.len()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> Box<NodeInfo> {
        Box::new(NodeInfo::new(crate::Node {
            name: name.into(),
            ..Default::default()
        }))
    }

    fn names(list: &NodeList) -> Vec<String> {
        // SAFETY: the boxes the tests point to outlive every call.
        unsafe { list.nodes() }
            .iter()
            .map(|n| n.name().to_owned())
            .collect()
    }

    fn refresh(list: &mut NodeList, slots: &[Option<Box<NodeInfo>>]) {
        list.refresh(slots.iter().map(|s| s.as_deref().map(|n| n as *const _)));
    }

    #[test]
    fn a_replaced_node_moves_its_pointer_and_a_gained_or_lost_slot_rebuilds() {
        let mut slots: Vec<Option<Box<NodeInfo>>> = vec![Some(node("a")), None, Some(node("c"))];
        let mut list = NodeList::default();
        refresh(&mut list, &slots);
        assert_eq!(names(&list), ["a", "c"]);

        // Replaced in place: no rebuild needed, the new node is seen.
        let new = node("c2");
        list.set(2, Some(&*new as *const _));
        slots[2] = Some(new);
        assert!(list.valid);
        assert_eq!(names(&list), ["a", "c2"]);

        // An empty slot stays empty: still valid.
        list.set(1, None);
        assert!(list.valid);

        // A slot gains a node: rebuilt, in slot order.
        let b = node("b");
        list.set(1, Some(&*b as *const _));
        slots[1] = Some(b);
        assert!(!list.valid);
        refresh(&mut list, &slots);
        assert_eq!(names(&list), ["a", "b", "c2"]);

        // A slot loses its node, and a slot past the end gains one.
        list.set(0, None);
        slots[0] = None;
        refresh(&mut list, &slots);
        assert_eq!(names(&list), ["b", "c2"]);
        let d = node("d");
        list.set(5, Some(&*d as *const _));
        slots.resize_with(6, || None);
        slots[5] = Some(d);
        refresh(&mut list, &slots);
        assert_eq!(names(&list), ["b", "c2", "d"]);
        let e = node("e");
        list.set(5, Some(&*e as *const _));
        slots[5] = Some(e);
        assert_eq!(names(&list), ["b", "c2", "e"]);
    }
}
