//! InterPodAffinity: as upstream's `interpodaffinity` plugin, keeps pods off nodes
//! where their required pod affinity or anti-affinity, or an existing pod's required
//! anti-affinity, would not hold, and prefers nodes by the preferred terms of the
//! incoming pod and of the pods already running (and by existing pods' required
//! affinity terms the incoming pod matches).
//!
//! A term ties pods by topology domain: the nodes sharing the value of the term's
//! `topologyKey` label. PreFilter and PreScore go once over every pod of the snapshot
//! and count by domain; Filter and Score only look the node's domains up. The
//! PreFilter extensions (AddPod, RemovePod) update those counts for one pod added to
//! or removed from a node, as preemption's what-ifs and the pods nominated to a node
//! need.
//!
//! Args (JSON, kube-scheduler's `InterPodAffinityArgs`):
//!
//! ```json
//! {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": false}
//! ```
//!
//! `hardPodAffinityWeight` (0..=100, default 1) is what an existing pod's required
//! affinity term adds to the nodes of its domain when the incoming pod matches it;
//! with `ignorePreferredTermsOfExistingPods`, a pod without preferred terms of its
//! own is not scored at all.

pub mod args;
pub mod filtering;
pub mod queueing;
pub mod scoring;
pub mod terms;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use berth_sdk::{
    Code, CycleState, DomainMemo, Filter, NodeInfo, NormalizeScore, Plugin, Pod, PreFilter,
    PreFilterExtensions, PreFilterResult, PreScore, Score, Sign, SignFragment, StateKey, Status,
    sign,
};
use serde::{Serialize, de::DeserializeOwned};

pub use args::InterPodAffinityArgs;
pub use filtering::{
    ERR_REASON_AFFINITY_RULES_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, PRE_FILTER_ID_KEY, PRE_FILTER_STATE_KEY,
    PreFilterState, TopologyCounts,
};
pub use scoring::{PRE_SCORE_ID_KEY, PRE_SCORE_STATE_KEY, PreScoreState};

/// [`PRE_FILTER_ID_KEY`] with its value, read once per node by Filter.
static PRE_FILTER_ID: StateKey<u64> = StateKey::new(PRE_FILTER_ID_KEY);
/// [`PRE_SCORE_ID_KEY`] with its value, read once per node by Score.
static PRE_SCORE_ID: StateKey<u64> = StateKey::new(PRE_SCORE_ID_KEY);

/// The last state a cycle wrote, decoded. The host calls Filter and Score once per
/// node; decoding a state that grows with the cluster each time would turn a lookup
/// into a scan, so the decoded state is kept under an id the cycle stores with it.
///
/// The id is a hash of the encoded state, so equal ids mean equal states whichever
/// instance of the plugin wrote them and however the sandbox seeds its randomness.
struct Memo<T>(Mutex<Option<(u64, Arc<T>)>>);

impl<T: Serialize + DeserializeOwned> Memo<T> {
    fn new() -> Self {
        Memo(Mutex::new(None))
    }

    /// Writes the state and its id into the cycle, and keeps it.
    fn save(&self, state: &CycleState, id_key: &StateKey<u64>, key: &str, value: T) {
        // Encoding plain data into a Vec cannot fail.
        let bytes = postcard::to_allocvec(&value).unwrap_or_default();
        // `DefaultHasher::new` has fixed keys: the id does not depend on a process's
        // seed. Equal states may still get different ids (the counts' hash order, the
        // guest's 32-bit length prefix); a reader then decodes again, which costs time
        // only.
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        let id = hasher.finish();
        state.write(key, &value);
        state.set(id_key, &id);
        *self.lock() = Some((id, Arc::new(value)));
    }

    /// The state of this cycle: from the memo when the ids agree, else decoded (it
    /// may have been written by another instance of the plugin).
    fn load(&self, state: &CycleState, id_key: &StateKey<u64>, key: &str) -> Option<Arc<T>> {
        let id = *state.value(id_key)?;
        let mut slot = self.lock();
        if let Some((memo_id, value)) = slot.as_ref()
            && *memo_id == id
        {
            return Some(Arc::clone(value));
        }
        let value = Arc::new(state.read::<T>(key)?);
        *slot = Some((id, Arc::clone(&value)));
        Some(value)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(u64, Arc<T>)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The plugin.
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
    pre_filter_memo: Memo<PreFilterState>,
    pre_score_memo: Memo<PreScoreState>,
    /// PreFilter's counts, node by node, kept across cycles.
    pre_filter_counts: DomainMemo<terms::PodKey>,
    /// PreScore's weights, node by node, kept across cycles.
    pre_score_weights: DomainMemo<terms::PodKey>,
}

impl InterPodAffinity {
    /// Builds the plugin from validated args.
    pub fn with_args(args: InterPodAffinityArgs) -> Self {
        InterPodAffinity {
            args,
            pre_filter_memo: Memo::new(),
            pre_score_memo: Memo::new(),
            pre_filter_counts: DomainMemo::new(),
            pre_score_weights: DomainMemo::new(),
        }
    }

    /// The args in force.
    pub fn args(&self) -> &InterPodAffinityArgs {
        &self.args
    }

    fn pre_score_state(&self, state: &CycleState) -> Result<Arc<PreScoreState>, Status> {
        self.pre_score_memo
            .load(state, &PRE_SCORE_ID, PRE_SCORE_STATE_KEY)
            .ok_or_else(|| {
                Status::error(format!(
                    "failed to read {PRE_SCORE_STATE_KEY:?} from cycleState: not found"
                ))
            })
    }
}

impl Plugin for InterPodAffinity {
    const NAME: &'static str = "InterPodAffinity";
    // The existing pods' labels and terms are what this plugin is about.
    const WANTS_PODS: bool = true;
    fn new(args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        InterPodAffinityArgs::from_json(args).map(InterPodAffinity::with_args)
    }

    // Without terms of the pod's own and with no pod in the cluster having any,
    // PreFilter and PreScore answer Skip.
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        &[berth_sdk::PodFeature::PodAffinity]
    }

    fn events() -> Option<Vec<berth_sdk::EventRegistration>> {
        Some(queueing::events())
    }
}

impl PreFilter for InterPodAffinity {
    fn pre_filter(&self, state: &CycleState, pod: &Pod, nodes: &[&NodeInfo]) -> PreFilterResult {
        let terms = match terms::PodTerms::of(pod) {
            Ok(t) => t,
            // A selector that does not parse will not parse on a retry either.
            Err(e) => {
                return Status::new(
                    Code::UnschedulableAndUnresolvable,
                    vec![format!("parsing pod: {e}")],
                )
                .into();
            }
        };
        // Without required terms of its own, the pod meets only the existing pods'
        // required anti-affinity: with none in the cluster there is nothing to count.
        if terms.required_affinity.is_empty()
            && terms.required_anti_affinity.is_empty()
            && berth_sdk::replica_affinity_counts()
                .is_some_and(|c| c.with_required_anti_affinity == 0)
        {
            return Status::skip().into();
        }
        let computed = filtering::compute_kept(&self.pre_filter_counts, pod, &terms, nodes);
        if computed.nothing_to_check() {
            return Status::skip().into();
        }
        self.pre_filter_memo
            .save(state, &PRE_FILTER_ID, PRE_FILTER_STATE_KEY, computed);
        Status::success().into()
    }
}

impl InterPodAffinity {
    /// AddPod (`delta` 1) and RemovePod (-1): the cycle's PreFilter state, updated
    /// for `other` on `node` and written back (upstream's `updateWithPod`).
    fn update_with_pod(
        &self,
        state: &CycleState,
        pod: &Pod,
        other: &Pod,
        node: &NodeInfo,
        delta: i64,
    ) -> Status {
        let Some(current) = self
            .pre_filter_memo
            .load(state, &PRE_FILTER_ID, PRE_FILTER_STATE_KEY)
        else {
            return Status::error(format!(
                "error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
            ));
        };
        // PreFilter parsed the same terms before it wrote the state.
        let terms = match terms::PodTerms::of(pod) {
            Ok(t) => t,
            Err(e) => return Status::error(format!("parsing pod: {e}")),
        };
        let mut updated = PreFilterState::clone(&current);
        filtering::update_with_pod(&mut updated, pod, &terms, other, &node.node.labels, delta);
        if updated != *current {
            self.pre_filter_memo
                .save(state, &PRE_FILTER_ID, PRE_FILTER_STATE_KEY, updated);
        }
        Status::success()
    }
}

impl PreFilterExtensions for InterPodAffinity {
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

impl Filter for InterPodAffinity {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        match self
            .pre_filter_memo
            .load(state, &PRE_FILTER_ID, PRE_FILTER_STATE_KEY)
        {
            Some(s) => filtering::filter(&s, node),
            None => Status::error(format!(
                "error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
            )),
        }
    }
}

impl PreScore for InterPodAffinity {
    fn pre_score(
        &self,
        state: &CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        all_nodes: &[&NodeInfo],
    ) -> Status {
        if self.args.ignore_preferred_terms_of_existing_pods && !scoring::has_preferred_terms(pod) {
            return Status::skip();
        }
        let terms = match terms::PodTerms::of(pod) {
            Ok(t) => t,
            Err(e) => return Status::error(format!("failed to parse pod: {e}")),
        };
        // Without preferred terms of its own, the pod is scored only by the existing
        // pods' terms: with no pod in the cluster having any, no node gets a weight.
        if terms.preferred_affinity.is_empty()
            && terms.preferred_anti_affinity.is_empty()
            && berth_sdk::replica_affinity_counts().is_some_and(|c| c.with_affinity == 0)
        {
            return Status::skip();
        }
        let Some(topology_score) =
            scoring::compute_kept(&self.pre_score_weights, &self.args, pod, &terms, all_nodes)
        else {
            return Status::skip();
        };
        self.pre_score_memo.save(
            state,
            &PRE_SCORE_ID,
            PRE_SCORE_STATE_KEY,
            PreScoreState { topology_score },
        );
        Status::success()
    }
}

impl Score for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let s = self.pre_score_state(state)?;
        Ok(scoring::score(&s.topology_score, &node.node.labels))
    }
}

impl NormalizeScore for InterPodAffinity {
    fn normalize_score(&self, state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        let s = match self.pre_score_state(state) {
            Ok(s) => s,
            Err(status) => return status,
        };
        // Upstream leaves the scores alone when no domain has a weight.
        if !s.topology_score.is_empty() {
            scoring::normalize(scores);
        }
        Status::success()
    }
}

impl Sign for InterPodAffinity {
    /// A pod with terms of its own (affinity or anti-affinity, required or
    /// preferred) cannot be signed: its verdicts count the pods its terms select,
    /// which the pods placed before it in a batch change. Any other pod is judged by
    /// the existing pods' terms, which select it by its namespace (and that
    /// namespace's labels) and its labels ([`terms::PodKey`] without terms): those are
    /// signed.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        let a = &pod.affinity;
        if !a.pod_affinity.is_empty() || !a.pod_anti_affinity.is_empty() {
            return sign::unsignable("pods with pod affinity or anti-affinity are not signable");
        }
        Ok(vec![sign::labels(pod)])
    }
}

berth_sdk::export_plugin!(
    InterPodAffinity: queueing_hint,
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
