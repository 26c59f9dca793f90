//! Opportunistic batching, as kube-scheduler 1.37's (KEP-5598, with rescoring): a
//! cycle that filtered and scored the nodes keeps the ranked feasible nodes it did
//! not choose; the next pod with the same signature (the fragments its plugins sign,
//! [`berth_sdk::Sign`]) is offered the best of them as a hint, filtered on that node
//! alone, and placed there without filtering or scoring the others.
//!
//! The ranking stays valid because between the two cycles only the chosen node
//! changed (the previous pod went there): before each hint that node is filtered
//! again for the new pod, and if it still fits it is scored again and ranked among
//! the kept nodes (the others' raw scores kept, every score normalized again). The
//! batch is thrown away when it cannot be trusted: another cycle ran in between (a
//! pod of another profile, a failed attempt), the pod's signature differs, the pod
//! is nominated somewhere, the chosen node is gone, or the batch is older than
//! [`MAX_BATCH_AGE`].
//!
//! A profile batches only when each of its PreFilter, Filter, PreScore and Score
//! plugins implements SignPod, and no shadow runs beside it (a shadow compares whole
//! cycles).

use super::schedule::{Cycle, Runner};
use super::{CyclePod, CycleState, Framework, PluginError, lock};
use berth_runtime::cache::Snapshot;
use berth_sdk::{Code, ExtensionPoint};
use std::collections::BTreeSet;
use std::time::Duration;

/// How long a batch is trusted, as upstream's `maxBatchAge`: changes to other nodes
/// (a pod deleted, a node added) are not seen by a batch, so it must not live long.
pub const MAX_BATCH_AGE: Duration = Duration::from_millis(500);

/// What a profile's batching needs: which plugins sign a pod, whether batching is on,
/// and the signatures and ranked nodes kept from cycle to cycle. `signers`,
/// `batchable` and `signers_builtin` are fixed when the framework is built and
/// follow from its plugins; `templates` and `batch` change with each cycle (each
/// behind its own lock, taken one at a time).
pub(super) struct Batching {
    /// The plugins whose fragments sign a pod (every PreFilter, Filter, PreScore and
    /// Score plugin, see [`Framework::signers`]).
    pub(super) signers: Vec<usize>,
    /// Batching is on and every signer implements SignPod.
    pub(super) batchable: bool,
    /// Every signer is a built-in plugin, whose fragments never read a pod's name or
    /// UID: a pod template's signature may be kept.
    pub(super) signers_builtin: bool,
    /// Signatures of pod templates signed lately (used only when `signers_builtin`).
    pub(super) templates: std::sync::Mutex<Templates>,
    /// The ranked nodes of the last full cycle, for the next pods of its signature.
    pub(super) batch: std::sync::Mutex<Batch>,
}

/// Pod templates signed lately (see [`Framework::template_key`]): at most
/// [`TEMPLATES_KEPT`], the oldest forgotten first.
#[derive(Default)]
pub(super) struct Templates {
    signed: std::collections::HashMap<String, Option<String>>,
    order: std::collections::VecDeque<String>,
}

/// How many pod templates' signatures a profile keeps.
const TEMPLATES_KEPT: usize = 256;

impl Templates {
    fn get(&self, key: &str) -> Option<Option<String>> {
        self.signed.get(key).cloned()
    }

    fn put(&mut self, key: String, signature: Option<String>) {
        if self.signed.len() >= TEMPLATES_KEPT
            && let Some(oldest) = self.order.pop_front()
        {
            self.signed.remove(&oldest);
        }
        if self.signed.insert(key.clone(), signature).is_none() {
            self.order.push_back(key);
        }
    }
}

/// A profile's batch: the ranked nodes of the last full cycle, and the last cycle.
#[derive(Default)]
pub(super) struct Batch {
    ranked: Option<Ranked>,
    last: Option<LastCycle>,
}

/// What a full cycle left for the next pods of its signature.
struct Ranked {
    signature: String,
    /// The cycle's scorers (plugin index, weight), in order: each node's raw scores
    /// follow it.
    scorers: Vec<(usize, i64)>,
    /// The feasible nodes not chosen, best last (the next hint is popped).
    nodes: Vec<RankedNode>,
    /// When the cycle that ranked them began, on the scheduler's clock.
    made: Duration,
}

struct RankedNode {
    name: String,
    /// The raw score of each scorer, before normalization.
    raw: Vec<i64>,
    /// The weighted sum of the normalized scores.
    total: i64,
}

struct LastCycle {
    cycle: u64,
    chosen: String,
}

/// A full cycle's scoring, kept for the batch: the scorers and each feasible node's
/// raw and total scores, in feasible order.
pub(super) struct Scored {
    pub(super) scorers: Vec<(usize, i64)>,
    /// Per scorer, the raw scores of the feasible nodes.
    pub(super) raw: Vec<Vec<i64>>,
    pub(super) totals: Vec<i64>,
}

/// The cycle's Filter plugins run on a few nodes (by slot): those that fit.
pub(super) type FitFilter<'a> = dyn FnMut(&[u32]) -> Result<Vec<u32>, PluginError> + 'a;

/// The node a batch offers a pod.
pub(super) struct Hint {
    /// The node.
    pub(super) slot: u32,
    /// Whether the pod fits there, when the hint's own filtering already told.
    pub(super) fits: Option<bool>,
}

/// How a batchable cycle ended, for the metrics.
pub(super) enum BatchResult {
    HintUsed,
    HintNotUsed,
    NoHint,
}

impl BatchResult {
    fn as_str(&self) -> &'static str {
        match self {
            BatchResult::HintUsed => "hint_used",
            BatchResult::HintNotUsed => "hint_not_used",
            BatchResult::NoHint => "no_hint",
        }
    }
}

/// Sorts ranked nodes best last; among equal totals the node earlier in `nodes`
/// comes out (is popped) first.
fn rank(nodes: &mut [RankedNode]) {
    // A stable sort by total keeps the cycle's order among equals; reversing that
    // order first makes the earliest of equals the last, popped first.
    nodes.reverse();
    nodes.sort_by_key(|n| n.total);
}

impl Framework {
    /// Whether the profile batches: every plugin at PreFilter, Filter, PreScore and
    /// Score signs pods, and no shadow compares its cycles.
    pub(super) fn batchable(&self) -> bool {
        self.batching.batchable && !self.has_shadows()
    }

    /// The plugins whose fragments make a signature: every plugin at PreFilter,
    /// Filter, PreScore or Score, once each, in profile order.
    pub(super) fn signers(
        points: &std::collections::HashMap<ExtensionPoint, Vec<(usize, i64)>>,
    ) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for point in [
            ExtensionPoint::PreFilter,
            ExtensionPoint::Filter,
            ExtensionPoint::PreScore,
            ExtensionPoint::Score,
        ] {
            for &(i, _) in points.get(&point).map(Vec::as_slice).unwrap_or(&[]) {
                if !out.contains(&i) {
                    out.push(i);
                }
            }
        }
        out
    }

    /// The pod's signature: its scheduler name, the plugins that take part in its
    /// cycle, and the fragments each of them signs; `None` when one cannot sign it
    /// (it answered Unschedulable, or failed: a failure is logged and only turns
    /// batching off for the pod).
    pub(super) fn sign(
        &self,
        pod: &CyclePod,
        state: &CycleState,
        snapshot: &Snapshot,
    ) -> Result<Option<String>, PluginError> {
        let key = self.template_key(pod, state);
        if let Some(k) = &key
            && let Some(known) = lock(&self.batching.templates).get(k)
        {
            return Ok(known);
        }
        let signature = self.sign_with_plugins(pod, state, snapshot)?;
        if let Some(k) = key {
            lock(&self.batching.templates).put(k, signature.clone());
        }
        Ok(signature)
    }

    /// The pod's template, as the key its signature is kept under: the pod without
    /// its name and UID, and the plugins that take part in its cycle. `None` when a
    /// signer is not a built-in plugin: only of those is it known that their
    /// fragments do not read the pod's identity (pods of one ReplicaSet differ in
    /// nothing else, so they share one signing).
    fn template_key(&self, pod: &CyclePod, state: &CycleState) -> Option<String> {
        if !self.batching.signers_builtin {
            return None;
        }
        let mut template = pod.pod().clone();
        template.uid.clear();
        template.name.clear();
        let taking_part: Vec<bool> = self
            .batching
            .signers
            .iter()
            .map(|&i| self.takes_part(i, pod, state))
            .collect();
        serde_json::to_string(&(taking_part, template)).ok()
    }

    fn sign_with_plugins(
        &self,
        pod: &CyclePod,
        state: &CycleState,
        snapshot: &Snapshot,
    ) -> Result<Option<String>, PluginError> {
        let mut timer = self.time_point("SignPod");
        let mut fragments: BTreeSet<(String, String)> = BTreeSet::new();
        fragments.insert((
            berth_sdk::sign::SCHEDULER_NAME.to_owned(),
            pod.scheduler_name.clone(),
        ));
        let mut main = lock(&self.instances.main);
        let mut taking_part: Vec<&str> = Vec::new();
        for &i in &self.batching.signers {
            if !self.takes_part(i, pod, state) {
                continue;
            }
            taking_part.push(&self.plugins[i].name);
            let inst = main.get(i, &self.plugins)?;
            inst.sync_for(snapshot, &[], pod)?;
            let t = self.plugin_clock(state);
            let signed = inst.sign_pod(state, pod)?;
            let code = signed
                .as_ref()
                .map_or_else(|s| s.code.as_str(), |_| "Success");
            self.observe_plugin(i, "SignPod", code, t);
            match signed {
                Ok(list) => {
                    fragments.extend(list.into_iter().map(|f| (f.key, f.value)));
                }
                Err(status) => {
                    if status.code == Code::Error {
                        tracing::warn!(
                            plugin = %self.plugins[i].name,
                            pod = %pod.key(),
                            "SignPod failed: {}",
                            status.message()
                        );
                    } else {
                        tracing::trace!(
                            plugin = %self.plugins[i].name,
                            pod = %pod.key(),
                            "cannot sign the pod: {}",
                            status.message()
                        );
                    }
                    timer.status = status.code.as_str();
                    return Ok(None);
                }
            }
        }
        timer.status = "Success";
        fragments.insert(("berth.participants".to_owned(), taking_part.join(",")));
        Ok(Some(
            serde_json::to_string(&fragments).expect("strings serialize"),
        ))
    }

    /// Throws the batch away for `reason` (a label of
    /// `scheduler_batch_cache_flushed_total`).
    fn flush(&self, batch: &mut Batch, reason: &str) {
        batch.ranked = None;
        if let Some(m) = &self.metrics {
            m.count_batch_flush(&self.scheduler_name, reason);
        }
        tracing::trace!(profile = %self.scheduler_name, reason, "batch flushed");
    }

    /// The node the batch offers `pod` in cycle `cycle`, if it can be trusted: the
    /// best of the kept nodes, after the node the last pod went to was filtered for
    /// this pod and, if it still fits, scored and ranked again. `filter` runs the
    /// cycle's Filter plugins on a few nodes and answers those that fit. The node the
    /// last pod went to and the best kept one are filtered in one call; the answer
    /// says whether the hint fits when that call already told.
    #[allow(clippy::too_many_arguments, reason = "the cycle's inputs")]
    pub(super) fn batch_hint(
        &self,
        pod: &CyclePod,
        signature: &str,
        cycle: Cycle,
        state: &CycleState,
        snapshot: &Snapshot,
        filter: &mut FitFilter<'_>,
    ) -> Result<Option<Hint>, PluginError> {
        let mut batch = lock(&self.batching.batch);
        let Some(ranked) = &batch.ranked else {
            return Ok(None);
        };
        let reason = match &batch.last {
            _ if ranked.nodes.is_empty() => Some("empty_list"),
            None => Some("pod_skipped"),
            Some(last) if last.cycle + 1 != cycle.number => Some("pod_skipped"),
            Some(_) if !pod.nominated_node_name.is_empty() => Some("pod_nominated"),
            Some(_) if ranked.signature != signature => Some("pod_incompatible"),
            Some(_) if cycle.at.saturating_sub(ranked.made) > MAX_BATCH_AGE => Some("expired"),
            Some(_) => None,
        };
        if let Some(reason) = reason {
            self.flush(&mut batch, reason);
            return Ok(None);
        }
        let chosen = batch
            .last
            .as_ref()
            .map(|l| l.chosen.clone())
            .unwrap_or_default();
        let Some(slot) = snapshot.slot_of(&chosen) else {
            self.flush(&mut batch, "node_missing");
            return Ok(None);
        };
        // The best kept node, filtered with the last pod's node: if the latter no
        // longer fits (or is not ranked above it again), it is the hint.
        let head = batch
            .ranked
            .as_ref()
            .and_then(|r| r.nodes.last())
            .and_then(|n| snapshot.slot_of(&n.name))
            .filter(|&h| h != slot);
        let asked: Vec<u32> = std::iter::once(slot).chain(head).collect();
        let fit = filter(&asked)?;
        // The node the last pod went to: if this pod fits there too, it competes
        // again with its new score.
        if fit.contains(&slot) && !self.rescore(&mut batch, pod, state, snapshot, slot, &chosen)? {
            return Ok(None);
        }
        let Some(best) = batch.ranked.as_mut().and_then(|r| r.nodes.pop()) else {
            return Ok(None);
        };
        let Some(best_slot) = snapshot.slot_of(&best.name) else {
            // Gone since: no hint, and the batch is stale.
            self.flush(&mut batch, "node_missing");
            return Ok(None);
        };
        let fits = asked.contains(&best_slot).then(|| fit.contains(&best_slot));
        Ok(Some(Hint {
            slot: best_slot,
            fits,
        }))
    }

    /// Scores the node in `slot` (named `name`) for `pod` and ranks it among the
    /// batch's nodes, every plugin's scores normalized again over them all, as
    /// upstream's `rescoreHintedNode`. False (and the batch thrown away) when the
    /// scoring differs from the batch's or a plugin failed.
    fn rescore(
        &self,
        batch: &mut Batch,
        pod: &CyclePod,
        state: &CycleState,
        snapshot: &Snapshot,
        slot: u32,
        name: &str,
    ) -> Result<bool, PluginError> {
        let Some(ranked) = batch.ranked.as_mut() else {
            return Ok(false);
        };
        let skip_score = match self.run_pre_score(pod, state, snapshot, &[slot]) {
            Ok(skip) => skip,
            Err(_) => {
                self.flush(batch, "pre_score_error");
                return Ok(false);
            }
        };
        let scorers = self.scorers(&skip_score);
        if scorers != ranked.scorers {
            self.flush(batch, "rescore_error");
            return Ok(false);
        }
        let fresh = self.score_chunk(Runner::Main, state, pod, snapshot, &[slot], &scorers);
        let mut raw_of_new: Vec<i64> = Vec::with_capacity(scorers.len());
        for r in fresh {
            match r {
                Ok(s) if s.len() == 1 => raw_of_new.push(s[0]),
                _ => {
                    self.flush(batch, "rescore_error");
                    return Ok(false);
                }
            }
        }
        ranked.nodes.push(RankedNode {
            name: name.to_owned(),
            raw: raw_of_new,
            total: 0,
        });
        let slots: Vec<u32> = ranked
            .nodes
            .iter()
            .map(|n| snapshot.slot_of(&n.name).unwrap_or(u32::MAX))
            .collect();
        let mut totals = vec![0i64; ranked.nodes.len()];
        {
            let mut main = lock(&self.instances.main);
            for (p, &(i, weight)) in scorers.iter().enumerate() {
                let raw: Vec<i64> = ranked.nodes.iter().map(|n| n.raw[p]).collect();
                let normalized =
                    match self.final_scores(&mut main, state, pod, i, Ok(raw), &slots, snapshot) {
                        Ok(Some(s)) => s,
                        _ => {
                            drop(main);
                            self.flush(batch, "normalize_error");
                            return Ok(false);
                        }
                    };
                for (k, s) in normalized.iter().enumerate() {
                    totals[k] += s * weight;
                }
            }
        }
        for (n, t) in ranked.nodes.iter_mut().zip(totals) {
            n.total = t;
        }
        // The kept nodes were best last, the rescored one appended: it goes where
        // its total puts it, after the earlier of equals.
        rank(&mut ranked.nodes);
        Ok(true)
    }

    /// Records how a cycle of a batchable profile ended: the node chosen and, when
    /// the cycle filtered and scored the nodes itself (no hint used), what it ranked,
    /// kept for the next pods of `signature`.
    #[allow(clippy::too_many_arguments, reason = "the cycle's outcome")]
    pub(super) fn store_batch(
        &self,
        signature: Option<String>,
        cycle: Cycle,
        chosen: &str,
        result: BatchResult,
        feasible: &[u32],
        scored: Option<Scored>,
        snapshot: &Snapshot,
    ) {
        if let Some(m) = &self.metrics {
            m.count_batch_attempt(&self.scheduler_name, result.as_str());
        }
        let mut batch = lock(&self.batching.batch);
        batch.last = Some(LastCycle {
            cycle: cycle.number,
            chosen: chosen.to_owned(),
        });
        if matches!(result, BatchResult::HintUsed) {
            return;
        }
        let (Some(signature), Some(scored)) = (signature, scored) else {
            self.flush(
                &mut batch,
                if feasible.len() <= 1 {
                    "empty_list"
                } else {
                    "pod_not_batchable"
                },
            );
            return;
        };
        let chosen_slot = snapshot.slot_of(chosen);
        let mut nodes: Vec<RankedNode> = feasible
            .iter()
            .enumerate()
            .filter(|(_, s)| Some(**s) != chosen_slot)
            .filter_map(|(k, s)| {
                Some(RankedNode {
                    name: snapshot.node(*s)?.name().to_owned(),
                    raw: scored.raw.iter().map(|r| r[k]).collect(),
                    total: scored.totals[k],
                })
            })
            .collect();
        if nodes.is_empty() {
            self.flush(&mut batch, "empty_list");
            return;
        }
        rank(&mut nodes);
        batch.ranked = Some(Ranked {
            signature,
            scorers: scored.scorers,
            nodes,
            made: cycle.at,
        });
    }
}
