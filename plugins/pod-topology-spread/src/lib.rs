//! PodTopologySpread: as upstream's `podtopologyspread` plugin, keeps the pods that a
//! pod's `topologySpreadConstraints` select evenly spread across topology domains.
//! `DoNotSchedule` constraints filter out nodes where placing the pod would make the
//! skew exceed `maxSkew`; `ScheduleAnyway` constraints score nodes, favouring those
//! whose domains hold fewer matching pods. Pods without constraints of their own get
//! the default constraints, selecting what their Services, ReplicaSets and
//! StatefulSets select ([`Pod::default_selector`]). The PreFilter extensions (AddPod,
//! RemovePod) keep the DoNotSchedule counts right when preemption's what-ifs or the
//! pods nominated to a node add or remove a pod.
//!
//! Args (JSON, kube-scheduler's `PodTopologySpreadArgs`):
//!
//! ```json
//! {
//!   "defaultingType": "List",
//!   "defaultConstraints": [
//!     {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
//!      "whenUnsatisfiable": "ScheduleAnyway"}
//!   ]
//! }
//! ```
//!
//! Without args, `defaultingType` is `System`: hostname with maxSkew 3 and zone with
//! maxSkew 5, both `ScheduleAnyway`.

pub mod args;
pub mod common;
pub mod queueing;
pub mod scoring;

use std::collections::HashMap;

use berth_sdk::types::{NodeAffinity, TopologySpreadConstraint, WhenUnsatisfiable};
use berth_sdk::{
    CycleState, DomainMemo, Filter, Labels, NodeInfo, Plugin, Pod, PreFilter, PreFilterExtensions,
    PreFilterResult, Sign, SignFragment, StateKey, Status, Toleration, sign,
};
use serde::{Deserialize, Serialize};

pub use args::{DefaultingType, SpreadArgs};
pub use common::{Constraint, LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};

use common::{
    count_key, node_has_all_keys, pod_constraints, required_node_affinity_matches, with_count_key,
};

/// The CycleState key of what PreFilter computes (upstream's key); the per-domain
/// counts live under keys with this prefix. The PreFilter extensions update both.
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterPodTopologySpread";
/// [`PRE_FILTER_STATE_KEY`] with its value.
static PRE_FILTER_STATE: StateKey<PreFilterState> = StateKey::new(PRE_FILTER_STATE_KEY);
/// The reason when placing the pod would exceed a constraint's maxSkew.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// The reason when the node lacks a constraint's topology label.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// The plugin.
pub struct PodTopologySpread {
    args: SpreadArgs,
    default_constraints: Vec<TopologySpreadConstraint>,
    system_defaulted: bool,
    /// PreFilter's counts, node by node, kept across cycles.
    pre_filter_counts: DomainMemo<CountKey>,
    /// PreScore's counts, node by node, kept across cycles.
    pre_score_counts: DomainMemo<CountKey>,
}

impl PodTopologySpread {
    /// Builds the plugin from validated args.
    pub fn with_args(args: SpreadArgs) -> Self {
        PodTopologySpread {
            default_constraints: args.effective_default_constraints(),
            system_defaulted: args.defaulting_type == DefaultingType::System,
            args,
            pre_filter_counts: DomainMemo::new(),
            pre_score_counts: DomainMemo::new(),
        }
    }

    /// The args in force.
    pub fn args(&self) -> &SpreadArgs {
        &self.args
    }

    /// The pod's constraints with the given action: its own, or the default ones
    /// when it has none.
    pub fn constraints(&self, pod: &Pod, action: WhenUnsatisfiable) -> Vec<Constraint> {
        pod_constraints(&self.default_constraints, pod, action)
    }
}

impl Plugin for PodTopologySpread {
    const NAME: &'static str = "PodTopologySpread";
    // Counting matching pods per domain needs every node's pods.
    const WANTS_PODS: bool = true;

    fn new(args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        SpreadArgs::from_json(args).map(PodTopologySpread::with_args)
    }

    // A pod without constraints of its own gets the default ones only when something
    // selects it; with neither, PreFilter and PreScore answer Skip.
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        use berth_sdk::PodFeature::{DefaultSelector, TopologySpread};
        if self.default_constraints.is_empty() {
            &[TopologySpread]
        } else {
            &[TopologySpread, DefaultSelector]
        }
    }

    fn events() -> Option<Vec<berth_sdk::EventRegistration>> {
        Some(queueing::events())
    }
}

/// One domain and its count of matching pods, as upstream's `criticalPath`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriticalPath {
    /// The topology value ("" in an unused slot).
    pub value: String,
    /// The matching pods in that domain.
    pub match_num: i64,
}

/// The two domains with the fewest matching pods, as upstream's `criticalPaths`.
/// After PreFilter `0` holds the smallest count and `1` the next. Updates keep `0`
/// the smallest while they touch a single domain, which is all a what-if does (it
/// changes one node, on its own copy of the state); `1` then holds a count at least
/// as large, not necessarily the second smallest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriticalPaths(pub [CriticalPath; 2]);

impl Default for CriticalPaths {
    fn default() -> Self {
        // Upstream starts both at MaxInt32.
        let empty = || CriticalPath {
            value: String::new(),
            match_num: i64::from(i32::MAX),
        };
        CriticalPaths([empty(), empty()])
    }
}

impl CriticalPaths {
    /// Records that domain `value` now holds `num` matching pods (upstream's
    /// `criticalPaths.update`).
    pub fn update(&mut self, value: &str, num: i64) {
        let p = &mut self.0;
        match p.iter().position(|c| c.value == value) {
            Some(i) => {
                p[i].match_num = num;
                if p[0].match_num > p[1].match_num {
                    p.swap(0, 1);
                }
            }
            None if num < p[0].match_num => {
                p[1] = std::mem::replace(
                    &mut p[0],
                    CriticalPath {
                        value: value.to_owned(),
                        match_num: num,
                    },
                );
            }
            None if num < p[1].match_num => {
                p[1] = CriticalPath {
                    value: value.to_owned(),
                    match_num: num,
                };
            }
            None => {}
        }
    }
}

/// What Filter needs of one constraint, computed by PreFilter and kept up to date by
/// the PreFilter extensions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterConstraint {
    /// The node label that defines domains.
    pub topology_key: String,
    /// The largest allowed skew.
    pub max_skew: i32,
    /// Whether the incoming pod itself matches the selector (it adds 1 to a domain).
    pub self_match: bool,
    /// Fewest eligible domains before the global minimum is taken as 0.
    pub min_domains: i32,
    /// How many eligible domains there are (upstream's `len(TpValueToMatchNum[i])`).
    pub domains: u64,
    /// The domains with the fewest matching pods.
    pub critical_paths: CriticalPaths,
}

impl FilterConstraint {
    /// The global minimum used for skew (upstream's `minMatchNum`): the smallest
    /// count over eligible domains, or 0 when there are fewer eligible domains than
    /// `min_domains`.
    pub fn min_match(&self) -> i64 {
        if self.domains < u64::try_from(self.min_domains).unwrap_or(0) {
            return 0;
        }
        self.critical_paths.0[0].match_num
    }
}

/// What PreFilter stores under [`PRE_FILTER_STATE_KEY`]; the counts are stored per
/// domain beside it ([`count_key`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreFilterState {
    /// The pod's DoNotSchedule constraints, in order.
    pub constraints: Vec<FilterConstraint>,
}

/// What the counts of PreFilter and PreScore depend on of the incoming pod: the key
/// under which the plugin keeps them across cycles ([`DomainMemo`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CountKey {
    constraints: Vec<Constraint>,
    namespace: String,
    node_selector: Labels,
    node_affinity: Option<NodeAffinity>,
    tolerations: Vec<Toleration>,
    /// PreScore's `requireAllTopologies`; false for PreFilter.
    require_all: bool,
}

impl CountKey {
    /// The key of `pod` with its resolved `constraints`.
    pub fn of(pod: &Pod, constraints: &[Constraint], require_all: bool) -> Self {
        CountKey {
            constraints: constraints.to_vec(),
            namespace: pod.namespace.clone(),
            node_selector: pod.node_selector.clone(),
            node_affinity: pod.affinity.node_affinity.clone(),
            tolerations: pod.tolerations.clone(),
            require_all,
        }
    }
}

/// Upstream's `calPreFilterState` counts: for each constraint, the matching pods of
/// every eligible domain. A node is eligible when it has every constraint's
/// topology label and passes the constraint's node inclusion policies; each
/// eligible node's domain is present, with 0 when it holds no matching pod.
pub fn count_matching_pods(
    pod: &Pod,
    constraints: &[Constraint],
    nodes: &[&NodeInfo],
) -> Vec<HashMap<String, i64>> {
    count_matching_pods_kept(&DomainMemo::new(), pod, constraints, nodes)
}

/// [`count_matching_pods`], walking again only the nodes that changed since `memo`
/// last counted for a pod with the same [`CountKey`].
pub fn count_matching_pods_kept(
    memo: &DomainMemo<CountKey>,
    pod: &Pod,
    constraints: &[Constraint],
    nodes: &[&NodeInfo],
) -> Vec<HashMap<String, i64>> {
    let needs_affinity = constraints.iter().any(|c| c.honor_node_affinity);
    let mut values: Vec<&str> = Vec::with_capacity(constraints.len());
    memo.count(
        CountKey::of(pod, constraints, false),
        nodes,
        |info, part| {
            let node = &info.node;
            // Every constraint's domain of the node, each label looked up once.
            values.clear();
            for c in constraints {
                match node.labels.get(&c.topology_key) {
                    Some(v) => values.push(v),
                    None => return,
                }
            }
            let affinity_matches = needs_affinity && required_node_affinity_matches(pod, node);
            for (i, (c, value)) in constraints.iter().zip(&values).enumerate() {
                if c.includes_node(pod, node, affinity_matches) {
                    let n = c.count_pods(&info.pods, &pod.namespace);
                    part.add(i, &c.topology_key, value, n);
                }
            }
        },
        |totals| {
            constraints
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    totals
                        .table(i)
                        .get(&c.topology_key)
                        .map(|by_value| by_value.iter().map(|(v, n)| (v.clone(), *n)).collect())
                        .unwrap_or_default()
                })
                .collect()
        },
    )
}

/// The critical paths of one constraint's counts. Domains are taken in the order of
/// their values, so ties resolve the same in every instance of the plugin (upstream
/// walks a Go map).
pub fn critical_paths(domains: &HashMap<String, i64>) -> CriticalPaths {
    let mut sorted: Vec<(&String, &i64)> = domains.iter().collect();
    sorted.sort_unstable();
    let mut paths = CriticalPaths::default();
    for (value, &n) in sorted {
        paths.update(value, n);
    }
    paths
}

impl PreFilter for PodTopologySpread {
    fn pre_filter(&self, state: &CycleState, pod: &Pod, nodes: &[&NodeInfo]) -> PreFilterResult {
        let constraints = self.constraints(pod, WhenUnsatisfiable::DoNotSchedule);
        if constraints.is_empty() {
            return Status::skip().into();
        }
        let counts = count_matching_pods_kept(&self.pre_filter_counts, pod, &constraints, nodes);
        let header = PreFilterState {
            constraints: constraints
                .iter()
                .zip(&counts)
                .map(|(c, domains)| FilterConstraint {
                    topology_key: c.topology_key.clone(),
                    max_skew: c.max_skew,
                    self_match: c.self_matches(&pod.labels),
                    min_domains: c.min_domains,
                    domains: u64::try_from(domains.len()).unwrap_or(u64::MAX),
                    critical_paths: critical_paths(domains),
                })
                .collect(),
        };
        state.set(&PRE_FILTER_STATE, &header);
        for (i, domains) in counts.iter().enumerate() {
            // An absent key reads as 0, so empty domains need no write.
            for (value, &n) in domains.iter().filter(|(_, n)| **n != 0) {
                state.write(&count_key(PRE_FILTER_STATE_KEY, i, value), &n);
            }
        }
        Status::success().into()
    }
}

impl PodTopologySpread {
    /// AddPod (`delta` 1) and RemovePod (-1), as upstream's `updateWithPod`: `other`
    /// counts in the domain of `node` for each constraint whose selector it matches,
    /// when it is in the incoming pod's namespace, the node has every constraint's
    /// topology key and passes the constraint's node inclusion policies. The domain's
    /// count and the constraint's critical paths are written back.
    fn update_with_pod(
        &self,
        state: &CycleState,
        pod: &Pod,
        other: &Pod,
        node: &NodeInfo,
        delta: i64,
    ) -> Status {
        let Some(mut s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!(
                "reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
            ));
        };
        // Terminating pods are not counted by PreFilter, so adding or removing one
        // changes no count (upstream's update does not check, and would count it).
        if other.namespace != pod.namespace || other.terminating {
            return Status::success();
        }
        // The same constraints PreFilter resolved: they depend on the pod and args only.
        let constraints = self.constraints(pod, WhenUnsatisfiable::DoNotSchedule);
        if constraints.len() != s.constraints.len() {
            return Status::error(format!(
                "{PRE_FILTER_STATE_KEY:?} holds {} constraints, the pod has {}",
                s.constraints.len(),
                constraints.len()
            ));
        }
        let node = &node.node;
        if !node_has_all_keys(&node.labels, &constraints) {
            return Status::success();
        }
        let affinity_matches = required_node_affinity_matches(pod, node);
        let mut changed = false;
        for (i, (c, fc)) in constraints.iter().zip(&mut s.constraints).enumerate() {
            // As PreFilter counts: an empty selector counts no pod.
            if !c.counts_labels(&other.labels) || !c.includes_node(pod, node, affinity_matches) {
                continue;
            }
            let value = &node.labels[&c.topology_key];
            let key = count_key(PRE_FILTER_STATE_KEY, i, value);
            let n = state.read::<i64>(&key).unwrap_or(0) + delta;
            state.write(&key, &n);
            fc.critical_paths.update(value, n);
            changed = true;
        }
        if changed {
            state.set(&PRE_FILTER_STATE, &s);
        }
        Status::success()
    }
}

impl PreFilterExtensions for PodTopologySpread {
    fn add_pod(&self, state: &CycleState, pod: &Pod, pod_to_add: &Pod, node: &NodeInfo) -> Status {
        self.update_with_pod(state, pod, pod_to_add, node, 1)
    }

    fn remove_pod(
        &self,
        state: &CycleState,
        pod: &Pod,
        pod_to_remove: &Pod,
        node: &NodeInfo,
    ) -> Status {
        self.update_with_pod(state, pod, pod_to_remove, node, -1)
    }
}

impl Filter for PodTopologySpread {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(s) = state.value(&PRE_FILTER_STATE) else {
            return Status::error(format!(
                "reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
            ));
        };
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.node.labels.get(&c.topology_key) else {
                // No domain to place the pod in; preemption cannot add a label.
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let matching = with_count_key(PRE_FILTER_STATE_KEY, i, value, |key| {
                state.get::<i64>(key).map_or(0, |n| *n)
            });
            let skew = matching + i64::from(c.self_match) - c.min_match();
            if skew > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

impl Sign for PodTopologySpread {
    /// A spread is not a matter of the pod and the node alone: whether a node keeps
    /// the skew, and how it scores, depends on where the other pods the constraints
    /// select went, and the first pod of a batch placed moves those counts for the
    /// next. So a pod this plugin spreads cannot be signed: one with constraints of
    /// its own, any pod while the args list default constraints (`List`), and, under
    /// `System` defaulting, any pod the defaults reach, which is one with a
    /// [`Pod::default_selector`]. Berth is stricter here than what PreFilter applies
    /// (an empty default selector spreads nothing, but refuses signing all the same):
    /// the selector comes from the Services and workloads of the cluster, so whether
    /// it spreads is not the pod's own to say. A pod none of this reaches is skipped
    /// by PreFilter and PreScore, and signs with no fragment.
    ///
    /// Upstream refuses every pod while any default constraints apply, the `System`
    /// ones included; Berth signs, under `System`, the pods nothing selects, for
    /// which the cycle runs no spreading at all.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        if !pod.topology_spread_constraints.is_empty() {
            return sign::unsignable("pods with topology spread constraints are not signable");
        }
        if !self.system_defaulted && !self.default_constraints.is_empty() {
            return sign::unsignable(
                "pods are not signable while PodTopologySpread has default constraints",
            );
        }
        if self.system_defaulted && pod.default_selector.is_some() {
            return sign::unsignable(
                "pods that a Service or workload selects are not signable: the system default constraints spread them",
            );
        }
        Ok(Vec::new())
    }
}

berth_sdk::export_plugin!(
    PodTopologySpread: queueing_hint,
    pre_filter,
    pre_filter_extensions,
    filter,
    pre_score,
    score,
    normalize_score,
    sign_pod
);

#[cfg(test)]
mod tests;
