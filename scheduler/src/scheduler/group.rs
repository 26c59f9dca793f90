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

use super::group_preemption::{GroupPostFilterOutcome, GroupPreemption};
use super::{MemberState, Scheduler};
use crate::framework::{
    CyclePod, CycleState, Feasibility, Framework, MemberExplanation, PodGroupExplanation,
    ScheduleOutcome,
};
use crate::queue::QueuedPod;
use berth_cluster::pod_groups::PodGroupObject;
use berth_cluster::{FailureReason, PodGroupOutcome};
use berth_runtime::metrics::AttemptResult;
use berth_sdk::{
    Placement, PlacementProgress, Pod, PodGroup, PodGroupAssignments, ProposedAssignment,
};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// What the cycle made of one member.
pub(super) enum Member {
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

/// A trial of a group's members: how many were scheduled before it, within which
/// placement, what it made of each member (in the order tried), and the verdict.
pub(super) struct Trial {
    pub(super) before: u32,
    /// The placement it was tried within (none: every node).
    pub(super) placement: Option<String>,
    pub(super) tried: Vec<Member>,
    pub(super) verdict: Verdict,
}

/// Upstream's order of a pod group cycle's members: highest priority first, then by
/// first attempt (a sort that is stable keeps the queue's order of equals). The
/// order of first attempts is the queue's count, not the wall clock, whose readings
/// may tie or not depending on the machine.
fn cycle_order(a: (&Pod, Option<u64>), b: (&Pod, Option<u64>)) -> std::cmp::Ordering {
    b.0.priority.cmp(&a.0.priority).then(a.1.cmp(&b.1))
}

/// How the cycle ended for the group as a whole.
pub(super) enum Verdict {
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

impl Verdict {
    /// What it says: the reason, or `feasible`.
    pub(super) fn message(&self) -> String {
        match self {
            Verdict::Feasible => "feasible".to_owned(),
            Verdict::Unschedulable { message, .. } => message.clone(),
            Verdict::Error(e) => e.clone(),
        }
    }
}

/// The node proposed for each member a cycle placed (`tried[k]` of the `k`th member).
pub(super) fn placed_assignments<'a>(
    members: impl IntoIterator<Item = &'a Pod>,
    tried: &[Member],
) -> Vec<ProposedAssignment> {
    members
        .into_iter()
        .zip(tried)
        .filter_map(|(pod, t)| match t {
            Member::Placed { node, .. } => Some(ProposedAssignment {
                pod_uid: pod.uid.clone(),
                node: node.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// A member going back to the queue after its group's cycle, nominated to the node
/// a workload-aware preemption made room on for it (if any).
fn nominated(mut qp: QueuedPod, preemption: Option<&GroupPreemption>) -> QueuedPod {
    if let Some(node) = preemption.and_then(|p| p.nominations.get(&qp.pod.uid)) {
        qp.pod.nominated_node_name = node.clone();
    }
    qp
}

impl Scheduler {
    /// The PodGroup `pod` is scheduled with: its `spec.schedulingGroup`, when the
    /// cluster has that PodGroup. A member of a group the cluster lacks is scheduled
    /// alone (GangScheduling holds such pods back at PreEnqueue; with it disabled,
    /// nothing waits for the object). None with GenericWorkload off, as upstream's
    /// queue has it: every pod is then scheduled alone.
    pub(super) fn group_of(&self, pod: &Pod) -> Option<PodGroupObject> {
        if !self.settings.generic_workload {
            return None;
        }
        let name = pod.scheduling_group.as_deref()?;
        self.cluster.pod_groups.get(&pod.namespace, name)
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
        members.sort_by(|a, b| cycle_order((&a.pod, a.first_attempt), (&b.pod, b.first_attempt)));
        for qp in &mut members {
            qp.pod.default_selector = self.default_selector(&qp.pod);
            // A member nominated by an earlier preemption is placed for real in this
            // cycle: its nomination must not count against the others (upstream
            // drops a pod's nomination when it is assumed). One going back to the
            // queue is nominated again there.
            self.unnominate(&qp.pod.uid);
        }
        let pods: Vec<&Pod> = members.iter().map(|q| &q.pod).collect();
        let Trial {
            tried, mut verdict, ..
        } = self.place(&fw, &group, &pods);
        let group_key = format!("{}/{}", group.namespace, group.name);
        let preemption = self.preempt_for_group(&fw, &group, &members, &mut verdict);
        tracing::debug!(
            group = %group_key,
            members = members.len(),
            placed = tried.iter().filter(|t| matches!(t, Member::Placed { .. })).count(),
            "pod group cycle: {}",
            verdict.message()
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
        self.services
            .recorder
            .pod_group_scheduled(&group.namespace, &group.name, &outcome);
        let elapsed = started.elapsed();
        let nominees: Vec<Pod> = if preemption.is_some() {
            members.iter().map(|q| q.pod.clone()).collect()
        } else {
            Vec::new()
        };
        for (qp, t) in members.into_iter().zip(tried) {
            match (t, &verdict) {
                (Member::Placed { node, state }, Verdict::Feasible) => {
                    self.services.metrics.observe_attempt(
                        AttemptResult::Scheduled,
                        fw.scheduler_name(),
                        elapsed,
                    );
                    self.assume_and_permit(fw.clone(), qp, node, state, false);
                }
                (
                    Member::Failed { plugins, message },
                    Verdict::Feasible | Verdict::Unschedulable { .. },
                ) => {
                    self.services.metrics.observe_attempt(
                        AttemptResult::Unschedulable,
                        fw.scheduler_name(),
                        elapsed,
                    );
                    let qp = nominated(qp, preemption.as_ref());
                    self.fail(qp, plugins, FailureReason::Unschedulable, message);
                }
                (_, Verdict::Error(e)) => {
                    self.services.metrics.observe_attempt(
                        AttemptResult::Error,
                        fw.scheduler_name(),
                        elapsed,
                    );
                    let message = format!("pod group {group_key}: {e}");
                    self.fail(qp, BTreeSet::new(), FailureReason::SchedulerError, message);
                }
                (_, Verdict::Unschedulable { plugin, message }) => {
                    self.services.metrics.observe_attempt(
                        AttemptResult::Unschedulable,
                        fw.scheduler_name(),
                        elapsed,
                    );
                    // Retried when what rejected the group may change its mind; a
                    // group no plugin rejected, on any event.
                    let plugins = BTreeSet::from([plugin.clone().unwrap_or_else(|| "*".into())]);
                    let qp = nominated(qp, preemption.as_ref());
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
        if let Some(p) = preemption {
            // The members go back nominated (above); the room is made now.
            let preemptors: Vec<(Pod, String)> = nominees
                .into_iter()
                .filter_map(|pod| {
                    let node = p.nominations.get(&pod.uid)?.clone();
                    let mut pod = pod;
                    pod.nominated_node_name = node.clone();
                    Some((pod, node))
                })
                .collect();
            self.carry_preemption(preemptors, group.priority, p.victims, &p.plugin);
        }
    }

    /// Workload-aware preemption for a group unschedulable as a whole (as upstream,
    /// only for Unschedulable, not for an error): the preemption PodGroupPostFilter
    /// decides on, if any, with its reason added to the verdict's message.
    fn preempt_for_group(
        &mut self,
        fw: &Arc<Framework>,
        group: &PodGroupObject,
        members: &[QueuedPod],
        verdict: &mut Verdict,
    ) -> Option<GroupPreemption> {
        if !matches!(verdict, Verdict::Unschedulable { .. }) || !fw.has_pod_group_post_filter() {
            return None;
        }
        let mut preemption = None;
        self.services.metrics.count_preemption_attempt();
        let tried_pods: Vec<Pod> = members.iter().map(|q| q.pod.clone()).collect();
        match self.group_post_filter(fw, group, &tried_pods) {
            Ok(GroupPostFilterOutcome::Preempt(p)) => {
                if let Verdict::Unschedulable { message, .. } = verdict {
                    message.push_str(&format!(
                        "; preempting {} pod(s) to make room for {} member(s)",
                        p.victims.len(),
                        p.nominations.len()
                    ));
                }
                preemption = Some(p);
            }
            Ok(GroupPostFilterOutcome::Declined { status, .. }) => {
                if let Verdict::Unschedulable { message, .. } = verdict {
                    // As upstream appends the PodGroupPostFilter's reason.
                    message.push_str(&format!("; {}", status.message()));
                }
            }
            Ok(GroupPostFilterOutcome::NoPlugin) => {}
            Err(e) => *verdict = Verdict::Error(e.to_string()),
        }
        preemption
    }

    /// Tries `members` (in this order) as one pod group cycle: PlacementFeasible
    /// before the first and after each, every member placed assumed and reserved for
    /// the next ones to see, and every assumption undone at the end. The cache is as
    /// before; what the members would get is in the answer.
    fn trial(
        &mut self,
        fw: &Arc<Framework>,
        info: &PodGroup,
        members: &[&Pod],
        within: Option<&HashSet<String>>,
    ) -> Trial {
        let before = info.scheduled_count;
        let group_state = CycleState::sampled();
        let mut progress = PlacementProgress {
            scheduled: before,
            remaining: u32::try_from(members.len()).unwrap_or(u32::MAX),
        };
        let mut tried: Vec<Member> = members.iter().map(|_| Member::Untried).collect();
        let goes_on = |f: &Result<Feasibility, _>| {
            matches!(f, Ok(Feasibility::Feasible | Feasibility::Wait { .. }))
        };
        let mut feasibility = fw.placement_feasible(&group_state, info, progress);
        let mut error: Option<String> = None;
        if goes_on(&feasibility) {
            for (k, pod) in members.iter().enumerate() {
                match self.try_member(fw, pod, within) {
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
                feasibility = fw.placement_feasible(&group_state, info, progress);
                if !goes_on(&feasibility) {
                    break;
                }
            }
        }
        self.undo_placed(fw, members, &tried);
        let any_placed = tried.iter().any(|t| matches!(t, Member::Placed { .. }));
        let group_key = format!("{}/{}", info.namespace, info.name);
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
        Trial {
            before,
            placement: None,
            tried,
            verdict,
        }
    }

    /// Undoes every assumption of a cycle (`tried[k]` of `members[k]`), the last
    /// first: unreserved and forgotten.
    pub(super) fn undo_placed(&mut self, fw: &Arc<Framework>, members: &[&Pod], tried: &[Member]) {
        for (pod, t) in members.iter().zip(tried).rev() {
            if let Member::Placed { node, state } = t {
                let mut assumed = (*pod).clone();
                assumed.node_name = node.clone();
                fw.unreserve(state, &CyclePod::new(assumed), node);
                let _ = self.cluster.cache.forget_pod(&pod.uid);
            }
        }
    }

    /// The group as the plugins see it: its policy and constraints, and the members
    /// bound or assumed before this cycle (how many, and on which nodes).
    pub(super) fn group_info(&self, group: &PodGroupObject) -> PodGroup {
        let mut scheduled =
            self.cluster
                .pod_groups
                .members_in(&group.namespace, &group.name, MemberState::Assumed);
        scheduled.extend(self.cluster.pod_groups.members_in(
            &group.namespace,
            &group.name,
            MemberState::Bound,
        ));
        let mut scheduled_nodes: Vec<String> = scheduled
            .iter()
            .filter_map(|uid| self.cluster.cache.pod(uid).map(|p| p.node_name.clone()))
            .collect();
        scheduled_nodes.sort();
        scheduled_nodes.dedup();
        PodGroup {
            namespace: group.namespace.clone(),
            name: group.name.clone(),
            min_count: group.min_count(),
            scheduled_count: u32::try_from(scheduled.len()).unwrap_or(u32::MAX),
            unscheduled_pods: Vec::new(),
            topology_keys: group.topology_keys.clone(),
            scheduled_nodes,
        }
    }

    /// Places `members` as the group's cycle does: one trial over every node, or,
    /// when the profile generates placements, one trial within each, the feasible
    /// ones ranked by PlacementScore (the first of equals wins) and the best one's
    /// kept (upstream's placement algorithm).
    pub(super) fn place(
        &mut self,
        fw: &Arc<Framework>,
        group: &PodGroupObject,
        members: &[&Pod],
    ) -> Trial {
        let info = self.group_info(group);
        if !fw.has_placement_generate() {
            return self.trial(fw, &info, members, None);
        }
        let group_key = format!("{}/{}", group.namespace, group.name);
        let failed = |verdict: Verdict| Trial {
            before: info.scheduled_count,
            placement: None,
            tried: members.iter().map(|_| Member::Untried).collect(),
            verdict,
        };
        let group_state = CycleState::sampled();
        self.cluster.refresh_snapshot();
        let placements = match fw.generate_placements(&group_state, &info, &self.cluster.snapshot) {
            Ok(p) => p,
            Err(e) => return failed(Verdict::Error(e.to_string())),
        };
        if placements.is_empty() {
            return failed(Verdict::Unschedulable {
                plugin: None,
                message: format!("pod group {group_key}: no placement was generated"),
            });
        }
        let total = placements.len();
        let mut first: Option<Trial> = None;
        let mut feasible: Vec<(Placement, Trial)> = Vec::new();
        for placement in placements {
            let within: HashSet<String> = placement.nodes.iter().cloned().collect();
            let mut trial = self.trial(fw, &info, members, Some(&within));
            trial.placement = Some(placement.name.clone());
            if let Verdict::Error(_) = trial.verdict {
                return trial;
            }
            if matches!(trial.verdict, Verdict::Feasible) {
                feasible.push((placement, trial));
            } else if first.is_none() {
                first = Some(trial);
            }
        }
        if feasible.is_empty() {
            // As upstream, the first placement's failure stands for all of them.
            let mut trial = first.expect("a placement was tried");
            let within = trial.placement.clone().unwrap_or_default();
            if let Verdict::Unschedulable { message, .. } = &mut trial.verdict {
                let prefix = format!("pod group {group_key} cannot be placed: ");
                let inner = message.strip_prefix(&prefix).unwrap_or(message);
                *message = format!(
                    "{prefix}none of its {total} placement(s) can take it; within {within:?}: {inner}"
                );
            }
            return trial;
        }
        if feasible.len() == 1 {
            return feasible.pop().expect("one").1;
        }
        let assignments: Vec<PodGroupAssignments> = feasible
            .iter()
            .map(|(placement, trial)| PodGroupAssignments {
                placement: placement.clone(),
                assignments: placed_assignments(members.iter().copied(), &trial.tried),
            })
            .collect();
        match fw.score_placements(&group_state, &info, &assignments) {
            Ok(scores) => {
                let best = scores.best().unwrap_or(0);
                feasible.swap_remove(best).1
            }
            Err(e) => failed(Verdict::Error(e.to_string())),
        }
    }

    /// What the pod group cycle of `pod`'s group would make of its waiting members
    /// now (`pod` among them), as `explain` shows it; `None` for a pod of no group
    /// the cluster has. Nothing is popped, bound or kept.
    pub(super) fn explain_group(
        &mut self,
        fw: &Arc<Framework>,
        pod: &Pod,
    ) -> Option<PodGroupExplanation> {
        let group = self.group_of(pod)?;
        // Members whose gates are to be asked again are, as the loop would before
        // its next pop.
        self.regate();
        let mut members: Vec<(Pod, Option<u64>)> = self
            .cluster
            .pod_groups
            .members_in(&group.namespace, &group.name, MemberState::Pending)
            .into_iter()
            .filter(|uid| *uid != pod.uid)
            .filter_map(|uid| self.queue.get(&uid))
            .filter(|qp| qp.gated_by.is_none() && qp.pod.scheduler_name == pod.scheduler_name)
            .map(|qp| (qp.pod.clone(), qp.first_attempt))
            .collect();
        // As the cycle would take them were `pod` popped now: it first, the others
        // in name order; a member never tried before gets its first attempt then.
        members.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let own = self.queue.get(&pod.uid).and_then(|qp| qp.first_attempt);
        members.insert(0, (pod.clone(), own));
        let mut next = self.queue.next_first_attempt();
        for (_, first) in &mut members {
            first.get_or_insert_with(|| {
                next += 1;
                next - 1
            });
        }
        members.sort_by(|a, b| cycle_order((&a.0, a.1), (&b.0, b.1)));
        for (p, _) in &mut members {
            p.default_selector = self.default_selector(p);
        }
        let pods: Vec<&Pod> = members.iter().map(|(p, _)| p).collect();
        let Trial {
            before,
            placement,
            tried,
            verdict,
        } = self.place(fw, &group, &pods);
        let preemption =
            if matches!(verdict, Verdict::Unschedulable { .. }) && fw.has_pod_group_post_filter() {
                let tried_pods: Vec<Pod> = members.iter().map(|(p, _)| p.clone()).collect();
                self.explain_group_preemption(fw, &group, &tried_pods)
            } else {
                None
            };
        Some(PodGroupExplanation {
            group: format!("{}/{}", group.namespace, group.name),
            policy: match group.min_count() {
                Some(n) => format!("gang, minCount {n}"),
                None => "basic".to_owned(),
            },
            workload: self.cluster.pod_groups.template_of(&group).map(Into::into),
            scheduled_before: before,
            placement,
            members: pods
                .iter()
                .zip(tried)
                .map(|(p, t)| MemberExplanation {
                    pod: p.key(),
                    node: match &t {
                        Member::Placed { node, .. } => Some(node.clone()),
                        _ => None,
                    },
                    reason: match t {
                        Member::Placed { .. } => None,
                        Member::Failed { message, .. } => Some(message),
                        Member::Untried => {
                            Some("not tried: the cycle stopped before it".to_owned())
                        }
                    },
                })
                .collect(),
            feasible: matches!(verdict, Verdict::Feasible),
            verdict: verdict.message(),
            preemption,
        })
    }

    /// Takes the group's other waiting members of the same profile out of the queue
    /// into the cycle, in name order.
    fn take_members(&mut self, first: &QueuedPod, group: &PodGroupObject) -> Vec<QueuedPod> {
        let mut candidates: Vec<(String, String)> = self
            .cluster
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
    pub(super) fn try_member(
        &mut self,
        fw: &Arc<Framework>,
        pod: &Pod,
        within: Option<&HashSet<String>>,
    ) -> Result<Member, String> {
        self.cluster.refresh_snapshot();
        let wpod = CyclePod::new(pod.clone());
        match fw.schedule_pod(
            &wpod,
            &self.cluster.snapshot,
            &self.nominated,
            false,
            within,
            None,
        ) {
            ScheduleOutcome::Scheduled { node, state, .. } => {
                let mut assumed = pod.clone();
                assumed.node_name = node.clone();
                self.cluster
                    .cache
                    .assume_pod(&assumed)
                    .map_err(|e| format!("cannot assume pod {}: {e}", assumed.key()))?;
                let wassumed = CyclePod::new(assumed);
                if let Err(e) = fw.reserve(&state, &wassumed, &node) {
                    fw.unreserve(&state, &wassumed, &node);
                    let _ = self.cluster.cache.forget_pod(&pod.uid);
                    return Ok(Member::Failed {
                        plugins: BTreeSet::from([e.plugin.clone()]),
                        message: e.to_string(),
                    });
                }
                Ok(Member::Placed { node, state })
            }
            ScheduleOutcome::Unschedulable(fit, _) => Ok(Member::Failed {
                plugins: super::rejecting_plugins(&fit),
                message: fit.to_string(),
            }),
            ScheduleOutcome::Error(e) => Err(format!("pod {}: {e}", pod.key())),
        }
    }

    /// Gives the queue the QueueSort key of `pod`'s PodGroup, once per group: the
    /// profile's QueueSort plugin keys the pod that stands for the group
    /// ([`berth_sdk::Pod::standing_for_pod_group`]), so that the group is sorted as a
    /// whole among pods and other groups. A pod of no group, or of one the cluster
    /// lacks, needs none.
    pub(super) fn key_group_of(
        &mut self,
        fw: &Framework,
        pod: &Pod,
    ) -> Result<(), crate::framework::PluginError> {
        let Some(name) = &pod.scheduling_group else {
            return Ok(());
        };
        let id = (pod.namespace.clone(), name.clone());
        if self.queue.has_group_key(&id) {
            return Ok(());
        }
        if let Some(group) = self.group_of(pod) {
            let key = fw.sort_key(&CyclePod::new(standing_pod(&group)))?;
            self.queue.set_group_key(id, key);
        }
        Ok(())
    }

    /// A PodGroup appeared or changed: its waiting members are let past their gates
    /// again, or retried (a gang's `minCount` lowered may let it fit).
    /// With GenericWorkload off the scheduler knows no PodGroups, as upstream's cache.
    pub fn add_or_update_pod_group(&mut self, group: PodGroupObject) {
        if !self.settings.generic_workload {
            return;
        }
        let old = self.cluster.pod_groups.set(group.clone());
        if old.as_ref() == Some(&group) {
            return;
        }
        // Its key is asked again (its priority may have changed), with the profile of
        // a member that waits; with none waiting, when the next one is enqueued.
        let id = (group.namespace.clone(), group.name.clone());
        if self.queue.has_group_key(&id) {
            self.rekey_group(&group);
        }
        let event = if old.is_some() {
            "PodGroupUpdate"
        } else {
            "PodGroupAdd"
        };
        let members =
            self.cluster
                .pod_groups
                .members_in(&group.namespace, &group.name, MemberState::Pending);
        let now = self.services.clock.now();
        self.queue.group_changed(&members, now, event);
    }

    /// A PodGroup is gone: its members stay where they are (a member popped now is
    /// scheduled alone; GangScheduling holds back the ones its PreEnqueue asks next).
    pub fn remove_pod_group(&mut self, namespace: &str, name: &str) {
        if !self.settings.generic_workload {
            return;
        }
        self.cluster.pod_groups.remove(namespace, name);
        self.queue
            .forget_group(&(namespace.to_owned(), name.to_owned()));
    }

    /// A member of the PodGroup that waits in the queue, if any: whose profile keys
    /// the group.
    pub(super) fn waiting_member(&self, namespace: &str, name: &str) -> Option<&QueuedPod> {
        self.cluster
            .pod_groups
            .members_in(namespace, name, MemberState::Pending)
            .iter()
            .find_map(|uid| self.queue.get(uid))
    }

    /// Asks `group`'s key again of the QueueSort plugin of a waiting member's
    /// profile. When it fails, or no member waits, the group is forgotten: its members
    /// wait as pods of their own until the next one's enqueue keys it again.
    fn rekey_group(&mut self, group: &PodGroupObject) {
        let id = (group.namespace.clone(), group.name.clone());
        let fw = self
            .waiting_member(&group.namespace, &group.name)
            .and_then(|qp| self.framework_for(&qp.pod.scheduler_name).cloned());
        let key = fw.map(|fw| fw.sort_key(&CyclePod::new(standing_pod(group))));
        match key {
            Some(Ok(key)) => self.queue.set_group_key(id, key),
            Some(Err(e)) => {
                tracing::warn!(
                    pod_group = %format!("{}/{}", group.namespace, group.name),
                    "cannot key the pod group in the queue, its members wait as pods: {e}"
                );
                self.queue.forget_group(&id);
            }
            None => self.queue.forget_group(&id),
        }
    }
}

/// The pod that stands for a PodGroup before a QueueSort plugin (see
/// [`berth_sdk::Pod::standing_for_pod_group`]).
pub(super) fn standing_pod(group: &PodGroupObject) -> Pod {
    Pod::standing_for_pod_group(&group.namespace, &group.name, group.priority)
}
