//! Workload-aware preemption's scheduler side: when a pod group's cycle ends
//! unschedulable, the profile's PodGroupPostFilter plugins may make room for the
//! group as a whole. The host answers their what-if on the real cache (pods set
//! aside, the group's cycle run on what is left, proposed assignments tried again),
//! puts everything back, checks what the plugin decided, and carries it out: each
//! member placed in the what-if is nominated to its node, and the victims are
//! evicted, all of them or (as upstream) as many as the API server allows before the
//! first refusal. Nothing binds in this cycle: the members go back to the queue and
//! their next cycle finds the room.

use super::Scheduler;
use super::group::{Member, Verdict, placed_assignments};
use crate::framework::{
    CycleState, Framework, GroupAnswer, GroupAsk, GroupPostFilterVerdict,
    GroupPreemptionExplanation, PluginError,
};
use berth_cluster::pod_groups::PodGroupObject;
use berth_runtime::cache::SetAside;
use berth_sdk::{Pod, ProposedAssignment, Status};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What the PodGroupPostFilter plugins made of a pod group.
pub(super) enum GroupPostFilterOutcome {
    /// The profile has none.
    NoPlugin,
    /// None made room: the last one's status says why.
    Declined { plugin: String, status: Status },
    /// One did: its preemption, checked.
    Preempt(GroupPreemption),
}

/// A preemption for a pod group, checked and ready to carry out.
pub(super) struct GroupPreemption {
    /// The plugin that decided it.
    pub(super) plugin: String,
    /// Member UID to the node it is nominated to.
    pub(super) nominations: HashMap<String, String>,
    /// The victims, as the cache has them.
    pub(super) victims: Vec<Pod>,
}

impl Scheduler {
    /// A pod's priority as workload-aware preemption weighs it: its PodGroup's, when
    /// it is the member of one the cluster has; else its own.
    pub(super) fn preemption_priority(&self, pod: &Pod) -> i32 {
        pod.scheduling_group
            .as_deref()
            .and_then(|g| self.cluster.pod_groups.get(&pod.namespace, g))
            .map_or(pod.priority, |g| g.priority)
    }

    /// Runs the profile's PodGroupPostFilter plugins for `group`, whose cycle over
    /// `members` ended unschedulable: the preemption one of them decided, checked,
    /// or why none did.
    pub(super) fn group_post_filter(
        &mut self,
        fw: &Arc<Framework>,
        group: &PodGroupObject,
        members: &[Pod],
    ) -> Result<GroupPostFilterOutcome, PluginError> {
        let mut info = self.group_info(group);
        info.unscheduled_pods = members.to_vec();
        let state = CycleState::sampled();
        self.cluster.refresh_snapshot();
        let snapshot = self.cluster.snapshot.clone();
        let mut aside: Vec<SetAside> = Vec::new();
        let run = fw.pod_group_post_filter(&state, &info, snapshot, &mut |question| {
            self.answer_group_what_if(fw, group, members, &mut aside, question)
        });
        // Whatever the what-if left aside comes back, the last first.
        while let Some(a) = aside.pop() {
            self.cluster.cache.put_back(a);
        }
        self.cluster.refresh_snapshot();
        let verdict = match run? {
            None => return Ok(GroupPostFilterOutcome::NoPlugin),
            Some(v) if !v.status.is_success() => {
                return Ok(GroupPostFilterOutcome::Declined {
                    plugin: v.plugin,
                    status: v.status,
                });
            }
            Some(v) => v,
        };
        match self.checked_group_preemption(group, members, &verdict) {
            Ok(p) => Ok(GroupPostFilterOutcome::Preempt(p)),
            Err(why) => {
                tracing::warn!(plugin = %verdict.plugin, group = %format!("{}/{}", group.namespace, group.name), "preemption refused: {why}");
                self.services.metrics.count_refused_call(
                    &verdict.plugin,
                    "evict",
                    "PodGroupPostFilter",
                );
                Err(PluginError {
                    plugin: verdict.plugin,
                    message: format!("was refused evictions at PodGroupPostFilter: {why}"),
                })
            }
        }
    }

    /// What the PodGroupPostFilter plugins would do for `group` (as `explain` shows
    /// it): the what-if runs, nothing is carried out.
    pub(super) fn explain_group_preemption(
        &mut self,
        fw: &Arc<Framework>,
        group: &PodGroupObject,
        members: &[Pod],
    ) -> Option<GroupPreemptionExplanation> {
        let refused = |plugin: String, reason: String| GroupPreemptionExplanation {
            plugin,
            found_room: false,
            reason: Some(reason),
            victims: Vec::new(),
            nominations: Vec::new(),
        };
        Some(match self.group_post_filter(fw, group, members) {
            Ok(GroupPostFilterOutcome::Preempt(p)) => GroupPreemptionExplanation {
                plugin: p.plugin,
                found_room: true,
                reason: None,
                victims: p
                    .victims
                    .iter()
                    .map(|v| format!("{} on {}", v.key(), v.node_name))
                    .collect(),
                nominations: members
                    .iter()
                    .filter_map(|m| Some((m.key(), p.nominations.get(&m.uid)?.clone())))
                    .collect(),
            },
            Ok(GroupPostFilterOutcome::Declined { plugin, status }) => {
                refused(plugin, status.message())
            }
            Ok(GroupPostFilterOutcome::NoPlugin) => return None,
            Err(e) => refused(e.plugin.clone(), e.to_string()),
        })
    }

    /// One answer of the what-if, on the cache itself (the plugin's thread waits).
    fn answer_group_what_if(
        &mut self,
        fw: &Arc<Framework>,
        group: &PodGroupObject,
        members: &[Pod],
        aside: &mut Vec<SetAside>,
        question: GroupAsk,
    ) -> GroupAnswer {
        match question {
            GroupAsk::Remove(uid) => {
                GroupAnswer::Status(match self.may_preempt(group, members, &uid) {
                    Err(why) => Status::error(why),
                    Ok(()) => match self.cluster.cache.set_aside(&uid) {
                        Ok(a) => {
                            aside.push(a);
                            Status::success()
                        }
                        Err(e) => Status::error(e.to_string()),
                    },
                })
            }
            GroupAsk::Add(uid) => {
                GroupAnswer::Status(match aside.iter().position(|a| a.pod().uid == uid) {
                    Some(i) => {
                        self.cluster.cache.put_back(aside.swap_remove(i));
                        Status::success()
                    }
                    None => Status::error(format!("pod {uid} was not removed from the what-if")),
                })
            }
            GroupAsk::Schedule => {
                let pods: Vec<&Pod> = members.iter().collect();
                let trial = self.place(fw, group, &pods);
                GroupAnswer::Placed(match trial.verdict {
                    Verdict::Feasible => Ok(placed_assignments(members, &trial.tried)),
                    Verdict::Unschedulable { message, .. } => Err(Status::unschedulable(message)),
                    Verdict::Error(e) => Err(Status::error(e)),
                })
            }
            GroupAsk::Fits(assignments) => {
                GroupAnswer::Status(self.assignments_fit(fw, members, &assignments))
            }
        }
    }

    /// Whether the group may take `uid` out of the cluster: a pod on a node, not a
    /// member of the group, of lower priority than the group's.
    fn may_preempt(
        &self,
        group: &PodGroupObject,
        members: &[Pod],
        uid: &str,
    ) -> Result<(), String> {
        let Some(pod) = self.cluster.cache.pod(uid) else {
            return Err(format!("pod {uid} is not on a node"));
        };
        if members.iter().any(|m| m.uid == uid)
            || (pod.namespace == group.namespace
                && pod.scheduling_group.as_deref() == Some(group.name.as_str()))
        {
            return Err(format!(
                "pod {} is a member of the preempting pod group",
                pod.key()
            ));
        }
        let p = self.preemption_priority(pod);
        if p >= group.priority {
            return Err(format!(
                "pod {} of priority {p} is not of lower priority than pod group {}/{} ({})",
                pod.key(),
                group.namespace,
                group.name,
                group.priority
            ));
        }
        Ok(())
    }

    /// Whether each member still fits its proposed node, in the order given, the
    /// ones before it assumed there (upstream's reprieve check); nothing is kept.
    fn assignments_fit(
        &mut self,
        fw: &Arc<Framework>,
        members: &[Pod],
        assignments: &[ProposedAssignment],
    ) -> Status {
        let mut pods: Vec<&Pod> = Vec::with_capacity(assignments.len());
        for a in assignments {
            match members.iter().find(|m| m.uid == a.pod_uid) {
                Some(m) => pods.push(m),
                None => {
                    return Status::error(format!(
                        "pod {} is not a member the cycle tried",
                        a.pod_uid
                    ));
                }
            }
        }
        let mut tried: Vec<Member> = Vec::with_capacity(pods.len());
        let mut status = Status::success();
        for (pod, a) in pods.iter().zip(assignments) {
            let within = HashSet::from([a.node.clone()]);
            match self.try_member(fw, pod, Some(&within)) {
                Ok(m @ Member::Placed { .. }) => tried.push(m),
                Ok(Member::Failed { message, .. }) => {
                    status = Status::unschedulable(message);
                    break;
                }
                Ok(Member::Untried) => break,
                Err(e) => {
                    status = Status::error(e);
                    break;
                }
            }
        }
        self.undo_placed(fw, &pods[..tried.len()], &tried);
        status
    }

    /// The plugin's decision, checked before anything is evicted: nominations of
    /// the group's members to nodes the cluster has; victims on nodes, of lower
    /// priority than the group, and a victim whose PodGroup goes all together only
    /// with every placed member of that group.
    fn checked_group_preemption(
        &self,
        group: &PodGroupObject,
        members: &[Pod],
        v: &GroupPostFilterVerdict,
    ) -> Result<GroupPreemption, String> {
        let mut nominations = HashMap::new();
        for a in &v.nominations {
            if !members.iter().any(|m| m.uid == a.pod_uid) {
                return Err(format!(
                    "nominated pod {}, not a member the cycle tried",
                    a.pod_uid
                ));
            }
            if self.cluster.snapshot.slot_of(&a.node).is_none() {
                return Err(format!(
                    "nominated pod {} to node {}, which does not exist",
                    a.pod_uid, a.node
                ));
            }
            nominations.insert(a.pod_uid.clone(), a.node.clone());
        }
        if nominations.is_empty() {
            return Err("nominated no member".into());
        }
        let mut victims = Vec::with_capacity(v.victims.len());
        let named: HashSet<&str> = v.victims.iter().map(String::as_str).collect();
        for uid in &v.victims {
            self.may_preempt(group, members, uid)?;
            let pod = self
                .cluster
                .cache
                .pod(uid)
                .cloned()
                .expect("checked on a node");
            if let Some(name) = pod.scheduling_group.as_deref()
                && let Some(g) = self.cluster.pod_groups.get(&pod.namespace, name)
                && g.disruption_all
            {
                let placed = self.cluster.pod_groups.members_in(
                    &pod.namespace,
                    name,
                    berth_cluster::pod_groups::MemberState::Bound,
                );
                if let Some(spared) = placed
                    .iter()
                    .find(|m| self.cluster.cache.pod(m).is_some() && !named.contains(m.as_str()))
                {
                    return Err(format!(
                        "named {} but not {spared} of pod group {}/{name}, whose members are preempted all together",
                        pod.key(),
                        pod.namespace
                    ));
                }
            }
            victims.push(pod);
        }
        Ok(GroupPreemption {
            plugin: v.plugin.clone(),
            nominations,
            victims,
        })
    }
}
