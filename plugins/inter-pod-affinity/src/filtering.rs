//! PreFilter and Filter, as upstream's `filtering.go`: PreFilter counts, per topology
//! domain (a node label key and value), the existing pods that matter to the incoming
//! pod, so that Filter only looks the node's domains up.

use berth_sdk::{DomainMemo, Labels, NodeInfo, NodePart, Pod, Status};
use serde::{Deserialize, Serialize};

use crate::terms::{self, IncomingNamespace, NamespaceCache, PodKey, PodTerms};

/// The CycleState key of what PreFilter computes (upstream's key).
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterInterPodAffinity";
/// The CycleState key of the id of that state, which Filter reads to find it in the
/// plugin's memo without decoding the whole state for every node.
pub const PRE_FILTER_ID_KEY: &str = "PreFilterInterPodAffinity/id";

/// The reason when a node does not satisfy the incoming pod's required affinity.
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// The reason when a node does not satisfy the incoming pod's required anti-affinity.
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";
/// The reason when the incoming pod would break an existing pod's required
/// anti-affinity.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// Counts by topology domain: topology key, then value. Nested so a lookup borrows
/// the node's label instead of building a pair.
pub type TopologyCounts = berth_sdk::DomainCounts;

/// Adds `delta` (possibly negative) to the domain of `key` the node belongs to, and
/// drops a domain whose count comes down to 0 (upstream's
/// `topologyToMatchedTermCount.update`): Filter tells "no pod anywhere" by an empty
/// map, so a domain left at 0 must not linger. A node without the label changes
/// nothing.
pub fn update(counts: &mut TopologyCounts, node_labels: &Labels, key: &str, delta: i64) {
    let Some(value) = node_labels.get(key) else {
        return;
    };
    let by_value = match counts.get_mut(key) {
        Some(m) => m,
        None => counts.entry(key.to_owned()).or_default(),
    };
    let now = match by_value.get_mut(value) {
        Some(c) => {
            *c += delta;
            *c
        }
        None => {
            by_value.insert(value.clone(), delta);
            delta
        }
    };
    if now == 0 {
        by_value.remove(value);
        if by_value.is_empty() {
            counts.remove(key);
        }
    }
}

/// The count of one domain (0 when absent).
pub fn count(counts: &TopologyCounts, key: &str, value: &str) -> i64 {
    counts
        .get(key)
        .and_then(|m| m.get(value))
        .copied()
        .unwrap_or(0)
}

/// What PreFilter computes for Filter (upstream's `preFilterState`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreFilterState {
    /// Existing pods whose required anti-affinity terms match the incoming pod, by
    /// the domain of each matching term.
    pub existing_anti_affinity_counts: TopologyCounts,
    /// Existing pods that match all the incoming pod's required affinity terms, by
    /// the domain of each term.
    pub affinity_counts: TopologyCounts,
    /// Existing pods that match the incoming pod's required anti-affinity terms, by
    /// the domain of each matching term.
    pub anti_affinity_counts: TopologyCounts,
    /// The topology keys of the incoming pod's required affinity terms, in order.
    pub affinity_topology_keys: Vec<String>,
    /// The topology keys of the incoming pod's required anti-affinity terms.
    pub anti_affinity_topology_keys: Vec<String>,
    /// Whether the incoming pod matches all its own required affinity terms.
    pub matches_own_affinity: bool,
}

impl PreFilterState {
    /// Whether Filter can let every node pass, so PreFilter may answer Skip: no
    /// existing pod's anti-affinity matches and the pod has no required terms.
    pub fn nothing_to_check(&self) -> bool {
        self.existing_anti_affinity_counts.is_empty()
            && self.affinity_topology_keys.is_empty()
            && self.anti_affinity_topology_keys.is_empty()
    }
}

/// Counts what Filter needs over every node of the snapshot (upstream's PreFilter
/// without the Skip decision), from scratch.
pub fn compute(pod: &Pod, terms: &PodTerms, nodes: &[&NodeInfo]) -> PreFilterState {
    compute_kept(&DomainMemo::new(), pod, terms, nodes)
}

/// [`compute`], walking again only the nodes that changed since `memo` last counted
/// for a pod with the same [`PodKey`].
pub fn compute_kept(
    memo: &DomainMemo<PodKey>,
    pod: &Pod,
    terms: &PodTerms,
    nodes: &[&NodeInfo],
) -> PreFilterState {
    let mut state = PreFilterState {
        affinity_topology_keys: keys(&terms.required_affinity),
        anti_affinity_topology_keys: keys(&terms.required_anti_affinity),
        ..PreFilterState::default()
    };
    // Existing pods' terms select namespaces by the incoming pod's namespace labels;
    // the incoming pod's terms by each existing pod's.
    let mut ns = Namespaces {
        incoming: IncomingNamespace::new(&pod.namespace),
        others: NamespaceCache::default(),
    };
    memo.count(
        PodKey::of(pod),
        nodes,
        |node, part| {
            for existing in &node.pods {
                count_pod(part, pod, terms, existing, &node.node.labels, 1, &mut ns);
            }
            if ns.consulted() {
                part.volatile();
            }
        },
        |totals| {
            // PreFilter only adds 1s, so every domain counted is above 0, as
            // `update` keeps them.
            for table in Table::ALL {
                *state.table(table) = totals.take_table(table as usize);
            }
        },
    );
    state.matches_own_affinity = terms::matches_all(&terms.required_affinity, pod, &mut ns.others);
    state
}

/// The three counts of a [`PreFilterState`].
#[derive(Clone, Copy, Debug)]
enum Table {
    ExistingAntiAffinity,
    Affinity,
    AntiAffinity,
}

impl Table {
    const ALL: [Table; 3] = [
        Table::ExistingAntiAffinity,
        Table::Affinity,
        Table::AntiAffinity,
    ];
}

impl PreFilterState {
    fn table(&mut self, table: Table) -> &mut TopologyCounts {
        match table {
            Table::ExistingAntiAffinity => &mut self.existing_anti_affinity_counts,
            Table::Affinity => &mut self.affinity_counts,
            Table::AntiAffinity => &mut self.anti_affinity_counts,
        }
    }
}

/// Where [`count_pod`] counts: straight into a state (the PreFilter extensions), or
/// into what a node adds to a [`DomainMemo`] (PreFilter).
trait Counts {
    /// Adds `delta` to the domain of `key` the node belongs to, in `table`; a node
    /// without the label counts nothing.
    fn count(&mut self, table: Table, node_labels: &Labels, key: &str, delta: i64);
}

impl Counts for PreFilterState {
    fn count(&mut self, table: Table, node_labels: &Labels, key: &str, delta: i64) {
        update(self.table(table), node_labels, key, delta);
    }
}

impl Counts for NodePart<'_> {
    fn count(&mut self, table: Table, node_labels: &Labels, key: &str, delta: i64) {
        if let Some(value) = node_labels.get(key) {
            self.add(table as usize, key, value, delta);
        }
    }
}

/// Where the terms of one cycle find namespace labels.
struct Namespaces<'a> {
    /// The incoming pod's namespace, which existing pods' terms select.
    incoming: IncomingNamespace<'a>,
    /// Every other namespace, which the incoming pod's terms select.
    others: NamespaceCache,
}

impl Namespaces<'_> {
    /// Whether a term asked for a namespace's labels, which change without any node
    /// changing.
    fn consulted(&self) -> bool {
        self.incoming.consulted() || self.others.consulted()
    }
}

/// Adds `delta` times what one pod (`other`, on a node with `node_labels`) counts for
/// the incoming pod to `state`: PreFilter's count of each existing pod, and the
/// PreFilter extensions' update when a what-if adds (1) or removes (-1) a pod
/// (upstream's `preFilterState.updateWithPod`).
fn count_pod(
    state: &mut impl Counts,
    pod: &Pod,
    terms: &PodTerms,
    other: &Pod,
    node_labels: &Labels,
    delta: i64,
    ns: &mut Namespaces,
) {
    let anti = &other.affinity.pod_anti_affinity.required;
    if !anti.is_empty() {
        for t in terms::existing_required_matching(other, anti, pod, &mut ns.incoming) {
            state.count(
                Table::ExistingAntiAffinity,
                node_labels,
                t.topology_key,
                delta,
            );
        }
    }
    // Affinity needs one pod matching every term; each term counts in its own
    // domain.
    if terms::matches_all(&terms.required_affinity, other, &mut ns.others) {
        for t in &terms.required_affinity {
            state.count(Table::Affinity, node_labels, t.topology_key, delta);
        }
    }
    for t in &terms.required_anti_affinity {
        if t.matches(other, &mut ns.others) {
            state.count(Table::AntiAffinity, node_labels, t.topology_key, delta);
        }
    }
}

/// The PreFilter extensions' update: `other` now counts (`delta` 1) or no longer
/// counts (-1) on a node with `node_labels`, as if PreFilter had seen the cluster so.
pub fn update_with_pod(
    state: &mut PreFilterState,
    pod: &Pod,
    terms: &PodTerms,
    other: &Pod,
    node_labels: &Labels,
    delta: i64,
) {
    let mut ns = Namespaces {
        incoming: IncomingNamespace::new(&pod.namespace),
        others: NamespaceCache::default(),
    };
    count_pod(state, pod, terms, other, node_labels, delta, &mut ns);
}

fn keys(terms: &[terms::Term]) -> Vec<String> {
    terms.iter().map(|t| t.topology_key.to_owned()).collect()
}

/// Whether the node satisfies the incoming pod's required affinity (upstream's
/// `satisfyPodAffinity`).
fn satisfies_pod_affinity(state: &PreFilterState, labels: &Labels) -> bool {
    let mut pods_exist = true;
    for key in &state.affinity_topology_keys {
        match labels.get(key) {
            Some(value) if count(&state.affinity_counts, key, value) <= 0 => pods_exist = false,
            Some(_) => {}
            // Every topology key must be on the node.
            None => return false,
        }
    }
    // The first pod of a group with affinity to itself would wait forever; it may go
    // anywhere with the topology keys while no pod in the cluster matches the terms.
    pods_exist || (state.affinity_counts.is_empty() && state.matches_own_affinity)
}

/// Whether the node satisfies the incoming pod's required anti-affinity.
fn satisfies_pod_anti_affinity(state: &PreFilterState, labels: &Labels) -> bool {
    state.anti_affinity_counts.is_empty()
        || !state.anti_affinity_topology_keys.iter().any(|key| {
            labels
                .get(key)
                .is_some_and(|value| count(&state.anti_affinity_counts, key, value) > 0)
        })
}

/// Whether placing the pod on the node keeps every existing pod's required
/// anti-affinity: none of the node's domains holds a pod whose term matches it.
fn satisfies_existing_pods_anti_affinity(state: &PreFilterState, labels: &Labels) -> bool {
    // Upstream walks the node's labels; walking the few counted keys is the same test.
    !state
        .existing_anti_affinity_counts
        .iter()
        .any(|(key, by_value)| {
            labels
                .get(key)
                .and_then(|value| by_value.get(value))
                .is_some_and(|c| *c > 0)
        })
}

/// Filter with PreFilter's state: the three checks in upstream's order and codes.
/// Preemption cannot add a matching pod, hence the affinity failure is unresolvable.
pub fn filter(state: &PreFilterState, node: &NodeInfo) -> Status {
    let labels = &node.node.labels;
    if !satisfies_pod_affinity(state, labels) {
        return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
    }
    if !satisfies_pod_anti_affinity(state, labels) {
        return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
    }
    if !satisfies_existing_pods_anti_affinity(state, labels) {
        return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
    }
    Status::success()
}
