//! What a plugin's failure does to the pod: an error naming the plugin, the pod and
//! the node, and `failurePolicy: FailOpen` for plugins that only score, whose
//! failures drop their scores for the cycle instead of failing the pod.

use super::{CyclePod, CycleState, Framework, InstanceSet, PluginError};
use berth_runtime::cache::Snapshot;
use berth_sdk::{MAX_NODE_SCORE, MIN_NODE_SCORE, Status};

impl Framework {
    /// A plugin answered an Error status for a node.
    pub(super) fn node_failure(
        &self,
        plugin: usize,
        pod: &CyclePod,
        snapshot: &Snapshot,
        slot: u32,
        status: &Status,
    ) -> PluginError {
        let node = snapshot.node(slot).map_or("<gone>", |n| n.name());
        PluginError {
            plugin: self.plugins[plugin].name.clone(),
            message: format!(
                "{} for pod {} on node {node}: {}",
                status.code.as_str(),
                pod.key(),
                status.message()
            ),
        }
    }

    /// A plugin answered an Error (or another failing) status for a pod at a point
    /// that concerns no single node.
    pub(super) fn pod_failure(
        &self,
        plugin: usize,
        point: &str,
        pod: &CyclePod,
        status: &Status,
    ) -> PluginError {
        PluginError {
            plugin: self.plugins[plugin].name.clone(),
            message: format!(
                "{} at {point} for pod {}: {}",
                status.code.as_str(),
                pod.key(),
                status.message()
            ),
        }
    }

    /// A plugin failed while scoring (PreScore, Score, NormalizeScore, or scores out
    /// of range). Fail-closed (the default): the error, which fails the pod. Fail-open:
    /// a log line and `berth_plugin_failures_ignored_total`, and `Ok`: the caller
    /// drops the plugin's scores for this cycle and the other plugins decide.
    pub(super) fn scoring_failed(
        &self,
        plugin: usize,
        pod: &CyclePod,
        error: PluginError,
    ) -> Result<(), PluginError> {
        let p = &self.plugins[plugin];
        if !p.fail_open {
            return Err(error);
        }
        tracing::warn!(
            plugin = %p.name,
            pod = %pod.key(),
            "failurePolicy FailOpen: scores of {} dropped for this cycle: {}",
            p.name,
            error.message
        );
        if let Some(m) = &self.metrics {
            m.count_failure_ignored(&p.name);
        }
        Ok(())
    }

    /// A plugin's final scores for the `feasible` nodes, in order: its raw scores
    /// (or how getting them failed), normalized if it normalizes, each checked to be
    /// in [0, 100]. `None`: the plugin failed open and its scores are dropped.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn final_scores(
        &self,
        main: &mut InstanceSet,
        state: &CycleState,
        pod: &CyclePod,
        plugin: usize,
        raw: Result<Vec<i64>, PluginError>,
        feasible: &[u32],
        snapshot: &Snapshot,
    ) -> Result<Option<Vec<i64>>, PluginError> {
        match self.checked_scores(main, state, pod, plugin, raw, feasible, snapshot) {
            Ok(scores) => Ok(Some(scores)),
            Err(e) => self.scoring_failed(plugin, pod, e).map(|()| None),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn checked_scores(
        &self,
        main: &mut InstanceSet,
        state: &CycleState,
        pod: &CyclePod,
        plugin: usize,
        raw: Result<Vec<i64>, PluginError>,
        feasible: &[u32],
        snapshot: &Snapshot,
    ) -> Result<Vec<i64>, PluginError> {
        let mut scores = raw?;
        let name = &self.plugins[plugin].name;
        if self.plugins[plugin].normalizes {
            let t = self.plugin_clock(state);
            let normalized = main
                .get(plugin, &self.plugins)?
                .normalize_score(state, pod, &scores)
                .map_err(|e| {
                    // The call covers every feasible node: name them.
                    let mut e = PluginError::from(e);
                    e.message.push_str(&format!(
                        " (normalizing nodes {})",
                        node_list(feasible, snapshot)
                    ));
                    e
                })?;
            let code = normalized
                .as_ref()
                .map_or_else(|e| e.code.as_str(), |_| "Success");
            self.observe_plugin(plugin, "ScoreExtensionNormalize", code, t);
            scores = normalized.map_err(|status| {
                let mut e = self.pod_failure(plugin, "NormalizeScore", pod, &status);
                e.message.push_str(&format!(
                    " (normalizing nodes {})",
                    node_list(feasible, snapshot)
                ));
                e
            })?;
        }
        if scores.len() != feasible.len() {
            return Err(PluginError {
                plugin: name.clone(),
                message: format!(
                    "answered {} scores for pod {} on {} nodes ({})",
                    scores.len(),
                    pod.key(),
                    feasible.len(),
                    node_list(feasible, snapshot)
                ),
            });
        }
        for (k, s) in scores.iter().enumerate() {
            if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(s) {
                let node = snapshot.node(feasible[k]).map_or("<gone>", |n| n.name());
                return Err(PluginError {
                    plugin: name.clone(),
                    message: format!(
                        "returned an invalid score {s} for pod {} on node {node}: scores must be in [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                        pod.key()
                    ),
                });
            }
        }
        Ok(scores)
    }
}

/// The names of some nodes, for a message: the first three and how many more.
fn node_list(slots: &[u32], snapshot: &Snapshot) -> String {
    const NAMED: usize = 3;
    let mut out: Vec<&str> = slots
        .iter()
        .take(NAMED)
        .map(|s| snapshot.node(*s).map_or("<gone>", |n| n.name()))
        .collect();
    let more = slots.len().saturating_sub(NAMED);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    out.dedup();
    format!("{}{more}", out.join(", "))
}
