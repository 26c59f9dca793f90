//! Gathering the pools a node can allocate from (upstream's `GatherPools`).

use crate::Features;
use berth_sdk::Node;
use berth_sdk::affinity::NodeSelectorTerm;
use berth_sdk::dra::{CounterSet, ResourceSlice, SliceNodes};
use std::collections::{BTreeMap, BTreeSet};

/// Whether a node is one of those a slice or device names (upstream's `NodeMatches`):
/// by name, all nodes, or a node selector whose terms are ORed.
pub fn node_matches(
    node: &Node,
    node_name: Option<&str>,
    all_nodes: bool,
    selector: Option<&[NodeSelectorTerm]>,
) -> bool {
    if let Some(name) = node_name.filter(|n| !n.is_empty()) {
        return node.name == name;
    }
    if all_nodes {
        return true;
    }
    match selector {
        Some(terms) => terms.iter().any(|t| t.matches(&node.labels, &node.name)),
        None => false,
    }
}

/// A pool of one driver, as far as one node sees it.
#[derive(Debug)]
pub(crate) struct Pool<'a> {
    pub driver: &'a str,
    pub name: &'a str,
    /// Fewer slices than the pool's `resourceSliceCount`: nothing is allocated from
    /// it, and asking for all devices fails.
    pub incomplete: bool,
    /// The pool's slices contradict each other (duplicate device names, counter
    /// sets): nothing is allocated from it.
    pub invalid: bool,
    /// Slices whose devices the node may reach, by name.
    pub slices: Vec<&'a ResourceSlice>,
    /// The pool's other slices: their allocated devices consume counters too.
    pub other_slices: Vec<&'a ResourceSlice>,
    /// The pool's counter sets, by name.
    pub counter_sets: BTreeMap<&'a str, &'a CounterSet>,
}

impl Pool<'_> {
    /// `driver/pool`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.driver, self.name)
    }

    fn has_binding_conditions(&self) -> bool {
        self.slices
            .iter()
            .any(|s| s.devices.iter().any(|d| !d.binding_conditions.is_empty()))
    }
}

/// The pools of the slices reachable from the node, sorted by driver and pool name;
/// pools with devices that have binding conditions come last.
///
/// `for_node` are the slices that name the node or no node at all; `all` are every
/// slice, to tell whether a pool whose slices the node only partly sees is complete.
pub(crate) fn gather_pools<'a>(
    for_node: &[&'a ResourceSlice],
    node: &Node,
    features: &Features,
    all: &[&'a ResourceSlice],
) -> Vec<Pool<'a>> {
    let mut by_pool: BTreeMap<(&'a str, &'a str), Vec<&'a ResourceSlice>> = BTreeMap::new();
    for &slice in for_node {
        let per_device = matches!(slice.nodes, SliceNodes::PerDevice);
        if !features.partitionable_devices && (per_device || !slice.shared_counters.is_empty()) {
            continue;
        }
        let relevant = match &slice.nodes {
            SliceNodes::NodeName(name) => node_matches(node, Some(name), false, None),
            SliceNodes::AllNodes => true,
            SliceNodes::NodeSelector(terms) => node_matches(node, None, false, Some(terms)),
            SliceNodes::PerDevice => slice.devices.iter().any(|d| {
                node_matches(
                    node,
                    d.node_name.as_deref(),
                    d.all_nodes,
                    d.node_selector.as_deref(),
                )
            }),
        };
        if !relevant {
            continue;
        }
        let slices = by_pool
            .entry((slice.driver.as_str(), slice.pool.name.as_str()))
            .or_default();
        match slices.first().map(|s| s.pool.generation) {
            Some(g) if slice.pool.generation < g => {}
            Some(g) if slice.pool.generation > g => *slices = vec![slice],
            _ => slices.push(slice),
        }
    }

    let mut pools = Vec::new();
    let mut with_binding_conditions = Vec::new();
    for ((driver, name), slices) in by_pool {
        let generation = slices[0].pool.generation;
        let count = slices[0].pool.resource_slice_count;
        let pool = if slices.len() as i64 == count {
            build_pool(driver, name, slices, features, &[])
        } else {
            // The node sees part of the pool: a newer generation elsewhere makes
            // this one obsolete; otherwise it is complete if all its slices exist.
            let same_pool = || {
                all.iter()
                    .filter(move |s| s.driver == driver && s.pool.name == name)
            };
            if same_pool().any(|s| s.pool.generation > generation) {
                continue;
            }
            let whole: Vec<&'a ResourceSlice> = same_pool()
                .filter(|s| s.pool.generation == generation)
                .copied()
                .collect();
            if whole.len() as i64 != count {
                Pool {
                    driver,
                    name,
                    incomplete: true,
                    invalid: false,
                    slices: Vec::new(),
                    other_slices: Vec::new(),
                    counter_sets: BTreeMap::new(),
                }
            } else {
                build_pool(driver, name, slices, features, &whole)
            }
        };
        if pool.has_binding_conditions() {
            with_binding_conditions.push(pool);
        } else {
            pools.push(pool);
        }
    }
    pools.extend(with_binding_conditions);
    pools
}

fn build_pool<'a>(
    driver: &'a str,
    name: &'a str,
    mut slices: Vec<&'a ResourceSlice>,
    features: &Features,
    whole: &[&'a ResourceSlice],
) -> Pool<'a> {
    slices.sort_by(|a, b| a.name.cmp(&b.name));
    let counters_only =
        |s: &ResourceSlice| features.partitionable_devices && !s.shared_counters.is_empty();
    let mut device_slices = Vec::new();
    let mut counter_slices = Vec::new();
    for &s in &slices {
        if counters_only(s) {
            counter_slices.push(s);
        } else {
            device_slices.push(s);
        }
    }
    let mut other_slices = Vec::new();
    if slices.len() < whole.len() {
        let seen: BTreeSet<&str> = slices.iter().map(|s| s.name.as_str()).collect();
        for &s in whole {
            if seen.contains(s.name.as_str()) {
                continue;
            }
            if counters_only(s) {
                counter_slices.push(s);
            } else {
                other_slices.push(s);
            }
        }
    }
    let mut pool = Pool {
        driver,
        name,
        incomplete: false,
        invalid: false,
        slices: device_slices,
        other_slices: Vec::new(),
        counter_sets: BTreeMap::new(),
    };
    let mut names = BTreeSet::new();
    if pool
        .slices
        .iter()
        .flat_map(|s| &s.devices)
        .any(|d| !names.insert(d.name.as_str()))
    {
        pool.invalid = true;
        pool.slices = Vec::new();
        return pool;
    }
    if !features.partitionable_devices {
        return pool;
    }
    for s in &counter_slices {
        for set in &s.shared_counters {
            if pool.counter_sets.insert(set.name.as_str(), set).is_some() {
                pool.invalid = true;
            }
        }
    }
    let consumption_valid = |slices: &[&ResourceSlice]| {
        slices.iter().flat_map(|s| &s.devices).all(|d| {
            d.consumes_counters.iter().all(|c| {
                pool.counter_sets
                    .get(c.counter_set.as_str())
                    .is_some_and(|set| c.counters.keys().all(|k| set.counters.contains_key(k)))
            })
        })
    };
    if pool.invalid || !consumption_valid(&pool.slices) || !consumption_valid(&other_slices) {
        pool.invalid = true;
        pool.slices = Vec::new();
        pool.counter_sets = BTreeMap::new();
        return pool;
    }
    pool.other_slices = other_slices;
    pool
}
