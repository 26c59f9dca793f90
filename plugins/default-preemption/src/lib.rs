//! DefaultPreemption: when no node fits a pod, find the node where evicting the
//! fewest, least important pods of lower priority lets it in, nominate the pod there
//! and name the victims (kube-scheduler's `defaultpreemption` plugin and the
//! preemption evaluator it runs).
//!
//! The search runs on the host's what-ifs: for each candidate node the plugin removes
//! every pod of lower priority from a copy of the node, asks whether the pod then
//! passes every Filter plugin, and gives the pods back one at a time, most important
//! first (PodDisruptionBudget-protected ones before the others), keeping each that
//! still leaves room. The host evicts the victims the plugin names.

use berth_sdk::{
    Candidate, Code, CycleState, DryRun, NodeInfo, NodeVictims, Plugin, Pod, PodDisruptionBudget,
    PostFilter, PostFilterResult, PreemptionPolicy, SelectVictims, Status, args,
};
use serde::Deserialize;
use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};

/// The fewest nodes the dry run asks the host to run at once (upstream runs 16 at a
/// time); more when more candidates are still wanted.
const MIN_BATCH: usize = 16;

/// `DefaultPreemptionArgs`, as written in the profile.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default = "default_percentage")]
    min_candidate_nodes_percentage: i32,
    #[serde(default = "default_absolute")]
    min_candidate_nodes_absolute: i32,
}

fn default_percentage() -> i32 {
    10
}

fn default_absolute() -> i32 {
    100
}

impl Default for RawArgs {
    fn default() -> Self {
        RawArgs {
            api_version: None,
            kind: None,
            min_candidate_nodes_percentage: default_percentage(),
            min_candidate_nodes_absolute: default_absolute(),
        }
    }
}

/// The plugin and its validated args.
#[derive(Debug)]
pub struct DefaultPreemption {
    /// The share of the potential nodes to dry-run at least (0..=100).
    pub min_candidate_nodes_percentage: i32,
    /// How many potential nodes to dry-run at least.
    pub min_candidate_nodes_absolute: i32,
}

impl Plugin for DefaultPreemption {
    const NAME: &'static str = "DefaultPreemption";
    /// Victims are chosen among the pods on each node.
    const WANTS_PODS: bool = true;

    fn new(raw: berth_sdk::serde_json::Value) -> Result<Self, String> {
        let raw: RawArgs = args::parse(raw)?;
        let _ = raw.api_version;
        args::check_kind(raw.kind.as_deref(), "DefaultPreemptionArgs")?;
        let mut errors = Vec::new();
        if !(0..=100).contains(&raw.min_candidate_nodes_percentage) {
            errors.push(format!(
                "minCandidateNodesPercentage: Invalid value: {}: not in valid range [0, 100]",
                raw.min_candidate_nodes_percentage
            ));
        }
        if raw.min_candidate_nodes_absolute < 0 {
            errors.push(format!(
                "minCandidateNodesAbsolute: Invalid value: {}: not in valid range [0, inf)",
                raw.min_candidate_nodes_absolute
            ));
        }
        if raw.min_candidate_nodes_percentage == 0 && raw.min_candidate_nodes_absolute == 0 {
            errors.push(
                "minCandidateNodesPercentage, minCandidateNodesAbsolute: cannot both be zero"
                    .to_owned(),
            );
        }
        if !errors.is_empty() {
            return Err(errors.join("; "));
        }
        Ok(DefaultPreemption {
            min_candidate_nodes_percentage: raw.min_candidate_nodes_percentage,
            min_candidate_nodes_absolute: raw.min_candidate_nodes_absolute,
        })
    }

    /// The plugin never rejects a pod by itself, so no event concerns it.
    fn events() -> Option<Vec<berth_sdk::EventRegistration>> {
        Some(Vec::new())
    }
}

/// When the pod started, for ordering victims: a pod that has not started counts as
/// starting now, i.e. after every pod that has.
pub(crate) fn start_time(p: &Pod) -> i64 {
    p.start_time_ms.unwrap_or(i64::MAX)
}

/// Upstream's `MoreImportantPod`: higher priority first, then the one that started
/// earlier.
pub fn more_important(a: &Pod, b: &Pod) -> bool {
    match a.priority.cmp(&b.priority) {
        Ordering::Greater => true,
        Ordering::Less => false,
        Ordering::Equal => start_time(a) < start_time(b),
    }
}

fn importance_order(a: &Pod, b: &Pod) -> Ordering {
    if more_important(a, b) {
        Ordering::Less
    } else if more_important(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// For each set of pods in turn (keeping their order), whether evicting it, after the
/// sets before it, would violate a PodDisruptionBudget (upstream's
/// `filterPodsWithPDBViolation`, a set counting as one victim).
pub(crate) fn violations<'a>(
    sets: impl IntoIterator<Item = &'a [&'a Pod]>,
    budgets: &[PodDisruptionBudget],
) -> Vec<bool> {
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.disruptions_allowed).collect();
    let mut out = Vec::new();
    for pods in sets {
        let mut violated = false;
        for p in pods {
            for (i, b) in budgets.iter().enumerate() {
                if !b.covers(p) || b.disrupted_pods.contains(&p.name) {
                    continue;
                }
                allowed[i] -= 1;
                if allowed[i] < 0 {
                    violated = true;
                }
            }
        }
        out.push(violated);
    }
    out
}

/// Splits items (keeping their order) by `violating`: those that would violate a
/// budget, and the others.
pub(crate) fn split_by<T>(items: Vec<T>, violating: &[bool]) -> (Vec<T>, Vec<T>) {
    let (mut bad, mut fine) = (Vec::new(), Vec::new());
    for (item, v) in items.into_iter().zip(violating) {
        if *v { bad.push(item) } else { fine.push(item) }
    }
    (bad, fine)
}

/// Splits pods (keeping their order) into those whose eviction would violate a
/// PodDisruptionBudget and the others (upstream's `filterPodsWithPDBViolation`).
pub fn split_by_budget<'a>(
    pods: &[&'a Pod],
    budgets: &[PodDisruptionBudget],
) -> (Vec<&'a Pod>, Vec<&'a Pod>) {
    let flags = violations(pods.iter().map(std::slice::from_ref), budgets);
    split_by(pods.to_vec(), &flags)
}

/// The victims chosen on one node and how many of them a budget protects.
struct Victims<'a> {
    pods: Vec<&'a Pod>,
    pdb_violations: u32,
}

impl DefaultPreemption {
    /// How many candidates the dry run looks for among `n` potential nodes.
    pub fn num_candidates(&self, n: i32) -> i32 {
        let mut c = n * self.min_candidate_nodes_percentage / 100;
        if c < self.min_candidate_nodes_absolute {
            c = self.min_candidate_nodes_absolute;
        }
        c.min(n)
    }

    /// Upstream's `PodEligibleToPreemptOthers`: `None` when the pod may preempt, else
    /// why not.
    fn ineligible(&self, pod: &Pod, nodes: &[(&NodeInfo, Status)]) -> Option<&'static str> {
        if pod.preemption_policy == PreemptionPolicy::Never {
            return Some("not eligible due to preemptionPolicy=Never.");
        }
        if pod.nominated_node_name.is_empty() {
            return None;
        }
        let nominated = nodes
            .iter()
            .find(|(n, _)| n.name() == pod.nominated_node_name);
        if let Some((node, status)) = nominated {
            // A nominated node the filters now rule out for good: preempt again.
            if status.code == Code::UnschedulableAndUnresolvable {
                return None;
            }
            if node
                .pods
                .iter()
                .any(|p| p.priority < pod.priority && p.terminating && p.preempted)
            {
                return Some("not eligible due to a terminating pod on the nominated node.");
            }
        }
        None
    }

    /// Upstream's `SelectVictimsOnNode`.
    fn select_victims<'a>(
        &self,
        pod: &Pod,
        node: &'a NodeInfo,
        budgets: &[PodDisruptionBudget],
        dry: &dyn DryRun,
    ) -> Result<Victims<'a>, Status> {
        let mut potential: Vec<&Pod> = node
            .pods
            .iter()
            .filter(|p| p.priority < pod.priority)
            .collect();
        if potential.is_empty() {
            return Err(Status::unresolvable(
                "No preemption victims found for incoming pod",
            ));
        }
        let mut sim = dry.simulate(node.name())?;
        for p in &potential {
            let s = sim.remove_pod(&p.uid);
            if !s.is_success() {
                return Err(Status::error(s.message()));
            }
        }
        // Without every lower-priority pod the pod must fit; affinity to a victim is
        // not considered, as upstream.
        let fits = sim.fits();
        if !fits.is_success() {
            return Err(fits);
        }
        potential.sort_by(|a, b| importance_order(a, b));
        let (violating, fine) = split_by_budget(&potential, budgets);
        let mut victims: Vec<&Pod> = Vec::new();
        let mut pdb_violations = 0;
        let mut reprieve = |p: &'a Pod, victims: &mut Vec<&'a Pod>| -> Result<bool, Status> {
            let s = sim.add_pod(&p.uid);
            if !s.is_success() {
                return Err(Status::error(s.message()));
            }
            let fits = sim.fits();
            if fits.code == Code::Error {
                return Err(fits);
            }
            if !fits.is_success() {
                let s = sim.remove_pod(&p.uid);
                if !s.is_success() {
                    return Err(Status::error(s.message()));
                }
                victims.push(p);
                return Ok(false);
            }
            Ok(true)
        };
        for p in &violating {
            if !reprieve(p, &mut victims)? {
                pdb_violations += 1;
            }
        }
        for p in &fine {
            reprieve(p, &mut victims)?;
        }
        if !violating.is_empty() && !fine.is_empty() {
            victims.sort_by(|a, b| importance_order(a, b));
        }
        Ok(Victims {
            pods: victims,
            pdb_violations,
        })
    }
}

/// The victims the host's workers chose on `node` ([`NodeVictims`]) as the pods of
/// the node, in the order given; an error names a UID not on the node.
fn victims_on<'a>(node: &'a NodeInfo, v: NodeVictims) -> Result<Victims<'a>, Status> {
    let pods = v
        .pods
        .iter()
        .map(|uid| {
            node.pods.iter().find(|p| &p.uid == uid).ok_or_else(|| {
                Status::error(format!("victim {uid} is not on node {}", node.name()))
            })
        })
        .collect::<Result<Vec<&Pod>, Status>>()?;
    Ok(Victims {
        pods,
        pdb_violations: v.pdb_violations,
    })
}

impl SelectVictims for DefaultPreemption {
    fn select_victims_on_node(
        &self,
        _state: &CycleState,
        pod: &Pod,
        node: &NodeInfo,
        dry: &dyn DryRun,
    ) -> Result<NodeVictims, Status> {
        let budgets = dry.pod_disruption_budgets();
        self.select_victims(pod, node, &budgets, dry)
            .map(|v| NodeVictims {
                pods: v.pods.iter().map(|p| p.uid.clone()).collect(),
                pdb_violations: v.pdb_violations,
            })
    }
}

/// Where the dry run starts among `n` nodes: spread over pods like upstream's random
/// offset, but repeatable (a hash of the pod's UID), so that a run can be replayed.
fn offset(pod: &Pod, n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pod.uid.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % n as u64) as usize
}

/// The earliest start among the highest-priority victims (upstream's
/// `GetEarliestPodStartTime`).
fn earliest_start_of_top(victims: &[&Pod]) -> i64 {
    let top = victims.iter().map(|p| p.priority).max().unwrap_or(0);
    victims
        .iter()
        .filter(|p| p.priority == top)
        .map(|p| start_time(p))
        .min()
        .unwrap_or(i64::MIN)
}

/// Upstream's `pickOneNodeForPreemption`: fewest budget violations, then the lowest
/// highest victim priority, the smallest sum of priorities, the fewest victims, the
/// latest start of the most important victims; then the first.
fn pick(candidates: &[(&NodeInfo, Victims<'_>)]) -> usize {
    let scores: [&dyn Fn(&Victims<'_>) -> i64; 5] = [
        &|v| -i64::from(v.pdb_violations),
        &|v| -i64::from(v.pods.first().map_or(0, |p| p.priority)),
        &|v| {
            -v.pods
                .iter()
                .map(|p| i64::from(p.priority) + i64::from(i32::MAX) + 1)
                .sum::<i64>()
        },
        &|v| -(v.pods.len() as i64),
        &|v| earliest_start_of_top(&v.pods),
    ];
    let mut left: Vec<usize> = (0..candidates.len()).collect();
    for score in scores {
        let best = left
            .iter()
            .map(|&i| score(&candidates[i].1))
            .max()
            .unwrap_or(0);
        left.retain(|&i| score(&candidates[i].1) == best);
        if left.len() == 1 {
            break;
        }
    }
    left[0]
}

/// kube-scheduler's "0/N nodes are available: ..." over the dry run's statuses; the
/// nodes it did not judge are "Preemption is not helpful for scheduling".
fn no_candidate_message(all: usize, statuses: &[Status]) -> String {
    let mut histogram: BTreeMap<String, usize> = BTreeMap::new();
    for s in statuses {
        for r in &s.reasons {
            *histogram.entry(r.clone()).or_default() += 1;
        }
    }
    let absent = all.saturating_sub(statuses.len());
    if absent > 0 {
        *histogram
            .entry("Preemption is not helpful for scheduling".to_owned())
            .or_default() += absent;
    }
    let mut reasons: Vec<String> = histogram.iter().map(|(r, n)| format!("{n} {r}")).collect();
    reasons.sort();
    format!("0/{all} nodes are available: {}.", reasons.join(", "))
}

pub(crate) fn unschedulable(message: &str) -> Status {
    Status::new(Code::Unschedulable, vec![format!("preemption: {message}")])
}

impl PostFilter for DefaultPreemption {
    fn post_filter(
        &self,
        _state: &CycleState,
        pod: &Pod,
        nodes: &[(&NodeInfo, Status)],
        dry: &dyn DryRun,
    ) -> PostFilterResult {
        if let Some(why) = self.ineligible(pod, nodes) {
            return unschedulable(why).into();
        }
        if nodes.is_empty() {
            return Status::error("preemption: no nodes available").into();
        }
        let potential: Vec<&NodeInfo> = nodes
            .iter()
            .filter(|(_, s)| s.code == Code::Unschedulable)
            .map(|(n, _)| *n)
            .collect();
        let mut statuses: Vec<Status> = Vec::new();
        let mut fine: Vec<(&NodeInfo, Victims<'_>)> = Vec::new();
        let mut violating: Vec<(&NodeInfo, Victims<'_>)> = Vec::new();
        if !potential.is_empty() {
            let budgets = dry.pod_disruption_budgets();
            let n = potential.len();
            let start = offset(pod, n);
            let wanted = self.num_candidates(n as i32).max(0) as usize;
            // The host may run the nodes' dry runs in batches on its workers; the
            // answers are taken in the order the nodes are visited and the search
            // stops where the one-at-a-time search would, so the candidates are the
            // same (a batch's nodes past the stop are dry-run for nothing).
            let mut batched = true;
            let mut answers: VecDeque<Result<NodeVictims, Status>> = VecDeque::new();
            for k in 0..n {
                let node = potential[(start + k) % n];
                if answers.is_empty() && batched {
                    let need = wanted.saturating_sub(fine.len() + violating.len());
                    let size = need.max(MIN_BATCH).min(n - k);
                    let names: Vec<&str> = (k..k + size)
                        .map(|j| potential[(start + j) % n].name())
                        .collect();
                    match dry.select_victims_on_nodes(&names) {
                        Some(a) if a.len() == size => answers = a.into(),
                        Some(a) => {
                            return Status::error(format!(
                                "preemption: the host answered {} dry runs for {size} nodes",
                                a.len()
                            ))
                            .into();
                        }
                        None => batched = false,
                    }
                }
                let selected = match answers.pop_front() {
                    Some(answer) => answer.and_then(|v| victims_on(node, v)),
                    None => self.select_victims(pod, node, &budgets, dry),
                };
                match selected {
                    Ok(v) if v.pods.is_empty() => statuses.push(Status::error(format!(
                        "expected at least one victim pod on node {:?}",
                        node.name()
                    ))),
                    Ok(v) if v.pdb_violations == 0 => fine.push((node, v)),
                    Ok(v) => violating.push((node, v)),
                    Err(s) => {
                        if s.code == Code::Error {
                            return Status::error(format!("preemption: {}", s.message())).into();
                        }
                        statuses.push(s);
                    }
                }
                if !fine.is_empty() && fine.len() + violating.len() >= wanted {
                    break;
                }
            }
        }
        let mut candidates = fine;
        candidates.append(&mut violating);
        if candidates.is_empty() {
            let mut r: PostFilterResult =
                unschedulable(&no_candidate_message(nodes.len(), &statuses)).into();
            r.nominated_node_name = Some(String::new());
            return r;
        }
        let best = pick(&candidates);
        let chosen = candidates.swap_remove(best);
        let list = std::iter::once(&chosen)
            .chain(candidates.iter())
            .map(|(node, v)| Candidate {
                node: node.name().to_owned(),
                victims: v.pods.iter().map(|p| p.uid.clone()).collect(),
                pdb_violations: v.pdb_violations,
            })
            .collect::<Vec<_>>();
        PostFilterResult {
            status: Status::success(),
            nominated_node_name: Some(chosen.0.name().to_owned()),
            victims: chosen.1.pods.iter().map(|p| p.uid.clone()).collect(),
            candidates: list,
        }
    }
}

mod group;

berth_sdk::export_plugin!(
    DefaultPreemption: post_filter,
    select_victims_on_node,
    pod_group_post_filter
);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::serde_json::json;

    fn pod(name: &str, priority: i32, start: Option<i64>, app: &str) -> Pod {
        Pod {
            uid: name.to_owned(),
            namespace: "default".into(),
            name: name.to_owned(),
            priority,
            start_time_ms: start,
            labels: [("app".to_owned(), app.to_owned())].into(),
            ..Pod::default()
        }
    }

    #[test]
    fn args_default_and_validate_as_upstream() {
        let p = DefaultPreemption::new(berth_sdk::serde_json::Value::Null).unwrap();
        assert_eq!(p.min_candidate_nodes_percentage, 10);
        assert_eq!(p.min_candidate_nodes_absolute, 100);
        let e = DefaultPreemption::new(json!({
            "minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0
        }))
        .unwrap_err();
        assert!(e.contains("cannot both be zero"), "{e}");
        let e = DefaultPreemption::new(json!({
            "minCandidateNodesPercentage": 101, "minCandidateNodesAbsolute": -1
        }))
        .unwrap_err();
        assert!(e.contains("not in valid range [0, 100]"), "{e}");
        assert!(e.contains("not in valid range [0, inf)"), "{e}");
        assert!(DefaultPreemption::new(json!({"kind": "NodeResourcesFitArgs"})).is_err());
        assert!(DefaultPreemption::new(json!({"minCandidates": 1})).is_err());
    }

    #[test]
    fn candidates_to_find_follow_upstream() {
        let p = DefaultPreemption::new(json!({})).unwrap();
        assert_eq!(p.num_candidates(10), 10);
        assert_eq!(p.num_candidates(500), 100);
        assert_eq!(p.num_candidates(5000), 500);
        let p = DefaultPreemption::new(json!({
            "minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 10
        }))
        .unwrap();
        assert_eq!(p.num_candidates(20), 10);
        assert_eq!(p.num_candidates(100), 40);
    }

    #[test]
    fn importance_is_priority_then_start_time() {
        let a = pod("a", 10, Some(1), "x");
        let b = pod("b", 10, Some(2), "x");
        let c = pod("c", 20, Some(3), "x");
        let unstarted = pod("d", 10, None, "x");
        assert!(more_important(&c, &a));
        assert!(more_important(&a, &b));
        assert!(more_important(&b, &unstarted));
        assert!(!more_important(&a, &a));
    }

    #[test]
    fn budgets_split_victims_as_upstream() {
        let budget = PodDisruptionBudget {
            namespace: "default".into(),
            name: "b".into(),
            selector: Some(berth_sdk::affinity::LabelSelector {
                match_labels: [("app".to_owned(), "db".to_owned())].into(),
                match_expressions: Vec::new(),
            }),
            disruptions_allowed: 1,
            disrupted_pods: ["db-0".to_owned()].into(),
        };
        let pods = [
            pod("db-0", 1, None, "db"),
            pod("db-1", 1, None, "db"),
            pod("db-2", 1, None, "db"),
            pod("web", 1, None, "web"),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let (violating, fine) = split_by_budget(&refs, std::slice::from_ref(&budget));
        // db-0 is already disrupted; db-1 uses the one disruption left; db-2 violates.
        let names = |v: &[&Pod]| v.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&violating), ["db-2"]);
        assert_eq!(names(&fine), ["db-0", "db-1", "web"]);
        // An empty selector covers nothing.
        let empty = PodDisruptionBudget {
            selector: Some(Default::default()),
            disruptions_allowed: 0,
            ..budget
        };
        let (violating, _) = split_by_budget(&refs, &[empty]);
        assert!(violating.is_empty());
    }

    #[test]
    fn the_no_candidate_message_counts_reasons() {
        let msg = no_candidate_message(
            3,
            &[Status::unresolvable(
                "No preemption victims found for incoming pod",
            )],
        );
        assert_eq!(
            msg,
            "0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
        );
    }
}
