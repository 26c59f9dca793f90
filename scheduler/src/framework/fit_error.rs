//! Why a pod fits no node, and kube-scheduler's message for it.

use berth_sdk::Status;
use std::collections::BTreeMap;

/// What a failed scheduling attempt found: the status of every node that was
/// rejected, or the PreFilter rejection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diagnosis {
    /// Rejected nodes: the node's slot in the cycle's snapshot and its status (the
    /// plugins that gave them are in `unschedulable_plugins`). Slots, not names: a
    /// pod that fits none of 5000 nodes costs no copy of their names.
    pub node_statuses: Vec<(u32, Status)>,
    /// Set when PreFilter rejected the pod: the plugin's message.
    pub pre_filter_msg: Option<String>,
    /// The code of that PreFilter rejection (every node has it).
    pub pre_filter_code: Option<berth_sdk::Code>,
    /// What PostFilter said when it did not nominate a node (e.g. why preemption
    /// cannot help).
    pub post_filter_msg: Option<String>,
    /// Plugins that rejected the pod (for queueing hints).
    pub unschedulable_plugins: Vec<String>,
}

/// What a cycle says of a pod when the cluster has no node, as upstream's
/// `ErrNoNodesAvailable`.
pub const NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";

/// A pod that fits no node, as kube-scheduler's `FitError`.
#[derive(Clone, Debug, PartialEq)]
pub struct FitError {
    /// How many nodes the snapshot had.
    pub num_all_nodes: usize,
    /// What was found.
    pub diagnosis: Diagnosis,
}

impl std::fmt::Display for FitError {
    /// `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s).`
    /// With no node at all, upstream's `ErrNoNodesAvailable`: `no nodes available to
    /// schedule pods` (its cycle stops before PreFilter and PostFilter).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.num_all_nodes == 0 {
            return f.write_str(NO_NODES_AVAILABLE);
        }
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        if let Some(msg) = &self.diagnosis.pre_filter_msg {
            // The PreFilter status stands for every node; listing them would repeat it.
            write!(f, " {msg}.")?;
            return self.write_post_filter(f);
        }
        let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, status) in &self.diagnosis.node_statuses {
            for reason in &status.reasons {
                *histogram.entry(reason.as_str()).or_default() += 1;
            }
        }
        let mut reasons: Vec<String> = histogram.iter().map(|(r, n)| format!("{n} {r}")).collect();
        // Upstream sorts the formatted "count reason" strings.
        reasons.sort();
        if !reasons.is_empty() {
            write!(f, " {}.", reasons.join(", "))?;
        }
        self.write_post_filter(f)
    }
}

impl FitError {
    fn write_post_filter(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.diagnosis.post_filter_msg {
            // As upstream: the message as PostFilter gave it (preemption's ends in
            // a full stop of its own; an Error's does not).
            Some(msg) if !msg.is_empty() => write!(f, " {msg}"),
            _ => Ok(()),
        }
    }

    /// Every node's status by slot, as PostFilter receives them: the node's Filter
    /// rejection, the PreFilter rejection for every node, or (for a node the cycle
    /// did not judge) UnschedulableAndUnresolvable, as upstream's absent nodes.
    pub fn statuses_by_slot(
        &self,
        snapshot: &berth_runtime::cache::Snapshot,
    ) -> Vec<(u32, Status)> {
        let mut rejected: Vec<&(u32, Status)> = self.diagnosis.node_statuses.iter().collect();
        rejected.sort_unstable_by_key(|(slot, _)| *slot);
        snapshot
            .slots()
            .iter()
            .filter(|&&slot| snapshot.node(slot).is_some())
            .map(|&slot| {
                let judged = rejected
                    .binary_search_by_key(&slot, |(s, _)| *s)
                    .ok()
                    .map(|i| &rejected[i].1);
                let status = match (judged, self.diagnosis.pre_filter_code) {
                    (Some(s), _) => s.clone(),
                    (None, Some(code)) => Status::new(
                        code,
                        self.diagnosis.pre_filter_msg.iter().cloned().collect(),
                    ),
                    (None, None) => {
                        Status::new(berth_sdk::Code::UnschedulableAndUnresolvable, Vec::new())
                    }
                };
                (slot, status)
            })
            .collect()
    }
}

impl std::error::Error for FitError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_without_nodes_says_so_as_upstream() {
        let e = FitError {
            num_all_nodes: 0,
            diagnosis: Diagnosis::default(),
        };
        assert_eq!(e.to_string(), "no nodes available to schedule pods");
    }

    #[test]
    fn message_counts_reasons_like_upstream() {
        let e = FitError {
            num_all_nodes: 3,
            diagnosis: Diagnosis {
                node_statuses: vec![
                    (0, Status::unschedulable("Insufficient cpu")),
                    (1, Status::unresolvable("node(s) had untolerated taint(s)")),
                    (2, Status::unresolvable("node(s) had untolerated taint(s)")),
                ],
                ..Diagnosis::default()
            },
        };
        assert_eq!(
            e.to_string(),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s)."
        );
    }

    #[test]
    fn prefilter_message_stands_alone() {
        let e = FitError {
            num_all_nodes: 5,
            diagnosis: Diagnosis {
                pre_filter_msg: Some("node(s) didn't match Pod's node affinity/selector".into()),
                ..Diagnosis::default()
            },
        };
        assert_eq!(
            e.to_string(),
            "0/5 nodes are available: node(s) didn't match Pod's node affinity/selector."
        );
    }
}
