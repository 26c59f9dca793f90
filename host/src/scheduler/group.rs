//! The pod group cycle (kube-scheduler's workload-aware scheduling): when a member of
//! a PodGroup is popped, the group's other waiting members are taken out of the
//! queue with it and tried in one cycle, each on the snapshot the ones before it left
//! (assumed and reserved there), with PlacementFeasible asked before the first and
//! after each. Every assumption is then reverted: when the group is feasible, its
//! placed members go on to Reserve, Permit and binding as any pod does, in the same
//! order and on the same nodes (GangScheduling's Permit lets them bind together);
//! when it is not, every member goes back to the queue and nothing binds.
//!
//! Upstream's algorithm is followed as of kubernetes/kubernetes master around 1.37
//! (`schedule_one_podgroup.go`, the default algorithm without placements): the
//! members are tried highest priority first, then by their first attempt; a member
//! that no node fits does not stop the others; single-pod PostFilter (preemption)
//! does not run inside the cycle; a cycle that ends feasible with no member placed is
//! unschedulable.

use super::{MemberState, Scheduler};
use crate::cluster::pod_groups::PodGroupObject;
use crate::cluster::{FailureReason, PodGroupOutcome};
use crate::framework::{CyclePod, CycleState, Feasibility, Framework, ScheduleOutcome};
use crate::metrics::AttemptResult;
use crate::queue::QueuedPod;
use berth_sdk::{PlacementProgress, Pod, PodGroup};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// What the cycle made of one member.
enum Member {
    /// Not tried: the cycle stopped before it.
    Untried,
    /// A node fits it; assumed and reserved there for the rest of the cycle.
    Placed { node: String, state: CycleState },
    /// No node fits it (or Reserve refused it): its own failure.
    Failed {
        plugins: BTreeSet<String>,
        message: String,
    },
}

/// How the cycle ended for the group as a whole.
enum Verdict {
    /// Feasible with at least one member placed: the placed members bind.
    Feasible,
    /// Not feasible: every member goes back (a rejection names its plugin).
    Unschedulable {
        plugin: Option<String>,
        message: String,
    },
    /// A plugin or the cache failed: every member goes back after an error.
    Error(String),
}

impl Scheduler {
    /// The PodGroup `pod` is scheduled with: its `spec.schedulingGroup`, when the
    /// cluster has that PodGroup. A member of a group the cluster lacks is scheduled
    /// alone (GangScheduling holds such pods back at PreEnqueue; with it disabled,
    /// nothing waits for the object).
    pub(super) fn group_of(&self, pod: &Pod) -> Option<PodGroupObject> {
        let name = pod.scheduling_group.as_deref()?;
        self.pod_groups.get(&pod.namespace, name)
    }

    /// Runs the pod group cycle of `group`, whose member `first` was popped.
    pub(super) fn schedule_group(
        &mut self,
        fw: Arc<Framework>,
        first: QueuedPod,
        group: PodGroupObject,
    ) {
        let started = Instant::now();
        let mut members = self.take_members(&first, &group);
        members.insert(0, first);
        // Highest priority first, then by first attempt (upstream's order); the sort
        // is stable, so equals keep the queue's order.
        members.sort_by(|a, b| {
            b.pod
                .priority
                .cmp(&a.pod.priority)
                .then(a.initial_attempt.cmp(&b.initial_attempt))
        });
        for qp in &mut members {
            qp.pod.default_selector = self.default_selector(&qp.pod);
        }
        let before = self
            .pod_groups
            .state(&group.namespace, &group.name)
            .map_or(0, |s| s.scheduled_pods);
        let info = PodGroup {
            namespace: group.namespace.clone(),
            name: group.name.clone(),
            min_count: group.min_count(),
            scheduled_count: before,
            unscheduled_pods: Vec::new(),
        };
        let group_state = CycleState::sampled();
        let mut progress = PlacementProgress {
            scheduled: before,
            remaining: u32::try_from(members.len()).unwrap_or(u32::MAX),
        };
        let mut tried: Vec<Member> = members.iter().map(|_| Member::Untried).collect();
        let mut feasibility = fw.placement_feasible(&group_state, &info, progress);
        let proceed = matches!(
            feasibility,
            Ok(Feasibility::Feasible | Feasibility::Wait { .. })
        );
        let mut error: Option<String> = None;
        if proceed {
            for (k, qp) in members.iter().enumerate() {
                match self.try_member(&fw, qp) {
                    Ok(t) => {
                        if matches!(t, Member::Placed { .. }) {
                            progress.scheduled += 1;
                        }
                        tried[k] = t;
                    }
                    Err(message) => {
                        error = Some(message);
                        break;
                    }
                }
                progress.remaining -= 1;
                feasibility = fw.placement_feasible(&group_state, &info, progress);
                if !matches!(
                    feasibility,
                    Ok(Feasibility::Feasible | Feasibility::Wait { .. })
                ) {
                    break;
                }
            }
        }
        // Every assumption of the cycle is undone, the last first.
        for (qp, t) in members.iter().zip(&tried).rev() {
            if let Member::Placed { node, state } = t {
                let mut assumed = qp.pod.clone();
                assumed.node_name = node.clone();
                fw.unreserve(state, &CyclePod::new(assumed), node);
                let _ = self.cache.forget_pod(&qp.pod.uid);
            }
        }
        let any_placed = tried.iter().any(|t| matches!(t, Member::Placed { .. }));
        let group_key = format!("{}/{}", group.namespace, group.name);
        let verdict = match (error, feasibility) {
            (Some(e), _) => Verdict::Error(e),
            (None, Err(e)) => Verdict::Error(e.to_string()),
            (None, Ok(Feasibility::Feasible)) if any_placed => Verdict::Feasible,
            (None, Ok(Feasibility::Feasible)) => Verdict::Unschedulable {
                plugin: None,
                message: format!("pod group {group_key}: no pods were schedulable"),
            },
            (None, Ok(Feasibility::Wait { plugin, message }))
            | (None, Ok(Feasibility::Unschedulable { plugin, message })) => {
                Verdict::Unschedulable {
                    plugin: Some(plugin),
                    message: format!("pod group {group_key} cannot be placed: {message}"),
                }
            }
        };
        tracing::debug!(
            group = %group_key,
            members = members.len(),
            placed = tried.iter().filter(|t| matches!(t, Member::Placed { .. })).count(),
            "pod group cycle: {}",
            match &verdict {
                Verdict::Feasible => "feasible".to_owned(),
                Verdict::Unschedulable { message, .. } => message.clone(),
                Verdict::Error(e) => e.clone(),
            }
        );
        let outcome = match &verdict {
            Verdict::Feasible => PodGroupOutcome {
                scheduled: true,
                reason: "Scheduled",
                message: String::new(),
            },
            Verdict::Unschedulable { message, .. } => PodGroupOutcome {
                scheduled: false,
                reason: "Unschedulable",
                message: message.clone(),
            },
            Verdict::Error(e) => PodGroupOutcome {
                scheduled: false,
                reason: "SchedulerError",
                message: e.clone(),
            },
        };
        self.recorder
            .pod_group_scheduled(&group.namespace, &group.name, &outcome);
        let elapsed = started.elapsed();
        for (qp, t) in members.into_iter().zip(tried) {
            match (t, &verdict) {
                (Member::Placed { node, state }, Verdict::Feasible) => {
                    self.metrics.observe_attempt(
                        AttemptResult::Scheduled,
                        fw.scheduler_name(),
                        elapsed,
                    );
                    self.assume_and_permit(fw.clone(), qp, node, state);
                }
                (
                    Member::Failed { plugins, message },
                    Verdict::Feasible | Verdict::Unschedulable { .. },
                ) => {
                    self.metrics.observe_attempt(
                        AttemptResult::Unschedulable,
                        fw.scheduler_name(),
                        elapsed,
                    );
                    self.fail(qp, plugins, FailureReason::Unschedulable, message);
                }
                (_, Verdict::Error(e)) => {
                    self.metrics.observe_attempt(
                        AttemptResult::Error,
                        fw.scheduler_name(),
                        elapsed,
                    );
                    let message = format!("pod group {group_key}: {e}");
                    self.fail(qp, BTreeSet::new(), FailureReason::SchedulerError, message);
                }
                (_, Verdict::Unschedulable { plugin, message }) => {
                    self.metrics.observe_attempt(
                        AttemptResult::Unschedulable,
                        fw.scheduler_name(),
                        elapsed,
                    );
                    // Retried when what rejected the group may change its mind; a
                    // group no plugin rejected, on any event.
                    let plugins = BTreeSet::from([plugin.clone().unwrap_or_else(|| "*".into())]);
                    self.fail(qp, plugins, FailureReason::Unschedulable, message.clone());
                }
                (Member::Untried, Verdict::Feasible) => {
                    // A feasible cycle tries every member; should one be left, it
                    // goes back rather than be lost.
                    let message = format!("pod group {group_key}: not tried in its cycle");
                    self.fail(
                        qp,
                        BTreeSet::from(["*".to_owned()]),
                        FailureReason::Unschedulable,
                        message,
                    );
                }
            }
        }
    }

    /// Takes the group's other waiting members of the same profile out of the queue
    /// into the cycle, in name order.
    fn take_members(&mut self, first: &QueuedPod, group: &PodGroupObject) -> Vec<QueuedPod> {
        let mut candidates: Vec<(String, String)> = self
            .pod_groups
            .members_in(&group.namespace, &group.name, MemberState::Pending)
            .into_iter()
            .filter(|uid| *uid != first.pod.uid)
            .filter_map(|uid| {
                let qp = self.queue.get(&uid)?;
                (qp.pod.scheduler_name == first.pod.scheduler_name)
                    .then(|| (qp.pod.name.clone(), uid))
            })
            .collect();
        candidates.sort();
        candidates
            .into_iter()
            .filter_map(|(_, uid)| self.queue.pop_specific(&uid))
            .collect()
    }

    /// Tries one member on the current snapshot: when a node fits, it is assumed and
    /// reserved there, so that the next members see it. An error (a plugin failed, the
    /// cache refused) ends the cycle.
    fn try_member(&mut self, fw: &Arc<Framework>, qp: &QueuedPod) -> Result<Member, String> {
        self.cache.update_snapshot(&mut self.snapshot);
        let wpod = CyclePod::new(qp.pod.clone());
        match fw.schedule_pod(&wpod, &self.snapshot, &self.nominated, false) {
            ScheduleOutcome::Scheduled { node, state, .. } => {
                let mut assumed = qp.pod.clone();
                assumed.node_name = node.clone();
                self.cache
                    .assume_pod(&assumed)
                    .map_err(|e| format!("cannot assume pod {}: {e}", assumed.key()))?;
                let wassumed = CyclePod::new(assumed);
                if let Err(e) = fw.reserve(&state, &wassumed, &node) {
                    fw.unreserve(&state, &wassumed, &node);
                    let _ = self.cache.forget_pod(&qp.pod.uid);
                    return Ok(Member::Failed {
                        plugins: BTreeSet::from([e.plugin.clone()]),
                        message: e.to_string(),
                    });
                }
                Ok(Member::Placed { node, state })
            }
            ScheduleOutcome::Unschedulable(fit, _) => {
                let plugins: BTreeSet<String> = fit
                    .diagnosis
                    .unschedulable_plugins
                    .iter()
                    .cloned()
                    .collect();
                let plugins = if plugins.is_empty() {
                    BTreeSet::from(["*".to_owned()])
                } else {
                    plugins
                };
                Ok(Member::Failed {
                    plugins,
                    message: fit.to_string(),
                })
            }
            ScheduleOutcome::Error(e) => Err(format!("pod {}: {e}", qp.pod.key())),
        }
    }

    /// A PodGroup appeared or changed: its waiting members are let past their gates
    /// again, or retried (a gang's `minCount` lowered may let it fit).
    pub fn add_or_update_pod_group(&mut self, group: PodGroupObject) {
        let old = self.pod_groups.set(group.clone());
        if old.as_ref() == Some(&group) {
            return;
        }
        let event = if old.is_some() {
            "PodGroupUpdate"
        } else {
            "PodGroupAdd"
        };
        let members =
            self.pod_groups
                .members_in(&group.namespace, &group.name, MemberState::Pending);
        let now = self.clock.now();
        self.queue.group_changed(&members, now, event);
    }

    /// A PodGroup is gone: its members stay where they are (a member popped now is
    /// scheduled alone; GangScheduling holds back the ones its PreEnqueue asks next).
    pub fn remove_pod_group(&mut self, namespace: &str, name: &str) {
        self.pod_groups.remove(namespace, name);
    }
}
