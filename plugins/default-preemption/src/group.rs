//! DefaultPreemption's PodGroupPostFilter: workload-aware preemption (kube-scheduler's
//! pod group preemption evaluator). The preemptor is a pod group, ranked by its
//! PodGroup's priority, and the domain is the whole cluster: every unit of lower
//! priority (a pod; or a PodGroup whose members go all together, whatever node they
//! are on) is taken out of the host's what-if, the group's cycle is run on what is
//! left, and when the group then fits, the units are given back one at a time, most
//! important first (those a PodDisruptionBudget protects before the others), each
//! kept back whenever the group's proposed assignments still pass Filter with it.
//! What could not be given back is evicted; each member placed in the what-if is
//! nominated to its node. All or nothing: when the group does not fit even with
//! every lower unit gone, nothing is evicted.

use crate::{DefaultPreemption, split_by, start_time, unschedulable, violations};
use berth_sdk::{
    CycleState, GroupSimulation, NodeInfo, Pod, PodDisruptionBudget, PodGroup, PodGroupPostFilter,
    PodGroupPostFilterResult, PodGroupPreemption, PreemptionPolicy, ProposedAssignment, Status,
    get_pod_group_preemption, simulate_group,
};
use std::cmp::Ordering;
use std::collections::HashMap;

/// A unit preemption takes or leaves whole (upstream's `Victim`).
#[derive(Debug)]
pub(crate) struct Unit<'a> {
    /// Its pods.
    pub(crate) pods: Vec<&'a Pod>,
    /// Its priority: its PodGroup's for a member of one, else the pod's own.
    pub(crate) priority: i32,
    /// Its pods belong to a PodGroup.
    pub(crate) of_group: bool,
}

impl Unit<'_> {
    /// The earliest start among its pods (a pod not started counts as starting
    /// after every pod that has).
    fn earliest_start(&self) -> i64 {
        self.pods
            .iter()
            .map(|p| start_time(p))
            .min()
            .unwrap_or(i64::MAX)
    }
}

/// Upstream's `moreImportantVictim`: higher priority; then a pod group before a
/// single pod; between single pods the one started earlier; between pod groups the
/// larger, then the one started earlier.
pub(crate) fn more_important_unit(a: &Unit<'_>, b: &Unit<'_>) -> bool {
    if a.priority != b.priority {
        return a.priority > b.priority;
    }
    if a.of_group != b.of_group {
        return a.of_group;
    }
    if a.of_group && a.pods.len() != b.pods.len() {
        return a.pods.len() > b.pods.len();
    }
    a.earliest_start() < b.earliest_start()
}

fn unit_order(a: &Unit<'_>, b: &Unit<'_>) -> Ordering {
    if more_important_unit(a, b) {
        Ordering::Less
    } else if more_important_unit(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// The units on `nodes` that a group of `priority` may preempt, its own members
/// (`namespace`/`name`) aside. `policy` says how a PodGroup is preempted (`None`:
/// the cluster has no such PodGroup, and its members go as single pods).
pub(crate) fn units<'a>(
    nodes: &[&'a NodeInfo],
    namespace: &str,
    name: &str,
    priority: i32,
    policy: &mut dyn FnMut(&str, &str) -> Option<PodGroupPreemption>,
) -> Vec<Unit<'a>> {
    let mut out: Vec<Unit<'a>> = Vec::new();
    let mut whole: HashMap<(String, String), usize> = HashMap::new();
    let mut policies: HashMap<(String, String), Option<PodGroupPreemption>> = HashMap::new();
    for node in nodes {
        for p in &node.pods {
            let Some(g) = p.scheduling_group.as_deref() else {
                if p.priority < priority {
                    out.push(Unit {
                        pods: vec![p],
                        priority: p.priority,
                        of_group: false,
                    });
                }
                continue;
            };
            if p.namespace == namespace && g == name {
                continue;
            }
            let key = (p.namespace.clone(), g.to_owned());
            let pg = *policies
                .entry(key.clone())
                .or_insert_with(|| policy(&p.namespace, g));
            let unit_priority = pg.map_or(p.priority, |pg| pg.priority);
            if unit_priority >= priority {
                continue;
            }
            match pg {
                Some(pg) if pg.disruption_all => match whole.get(&key) {
                    Some(&i) => out[i].pods.push(p),
                    None => {
                        whole.insert(key, out.len());
                        out.push(Unit {
                            pods: vec![p],
                            priority: unit_priority,
                            of_group: true,
                        });
                    }
                },
                _ => out.push(Unit {
                    pods: vec![p],
                    priority: unit_priority,
                    of_group: true,
                }),
            }
        }
    }
    out
}

/// Splits units (keeping their order) into those whose eviction would violate a
/// PodDisruptionBudget, counting the units before them, and the others.
pub(crate) fn split_units_by_budget<'a>(
    units: Vec<Unit<'a>>,
    budgets: &[PodDisruptionBudget],
) -> (Vec<Unit<'a>>, Vec<Unit<'a>>) {
    let flags = violations(units.iter().map(|u| u.pods.as_slice()), budgets);
    split_by(units, &flags)
}

/// A what-if step's failure, as the answer: an error stays an error.
fn failed(s: Status) -> PodGroupPostFilterResult {
    if s.code == berth_sdk::Code::Error {
        Status::error(format!("preemption: {}", s.message())).into()
    } else {
        s.into()
    }
}

fn all_ok(sim: &mut dyn GroupSimulation, pods: &[&Pod], add: bool) -> Result<(), Status> {
    for p in pods {
        let s = if add {
            sim.add_pod(&p.uid)
        } else {
            sim.remove_pod(&p.uid)
        };
        if !s.is_success() {
            return Err(Status::error(s.message()));
        }
    }
    Ok(())
}

impl PodGroupPostFilter for DefaultPreemption {
    fn pod_group_post_filter(
        &self,
        _state: &CycleState,
        group: &PodGroup,
        nodes: &[&NodeInfo],
    ) -> PodGroupPostFilterResult {
        let Some(me) = get_pod_group_preemption(&group.namespace, &group.name) else {
            return Status::unresolvable(format!(
                "preemption: pod group {}/{} is not known",
                group.namespace, group.name
            ))
            .into();
        };
        if me.preemption_policy == PreemptionPolicy::Never {
            return unschedulable("not eligible due to preemptionPolicy=Never.").into();
        }
        let mut policy = |ns: &str, name: &str| get_pod_group_preemption(ns, name);
        // A member already nominated where a lower pod it preempted still
        // terminates: wait for it rather than preempt again.
        for m in &group.unscheduled_pods {
            if m.nominated_node_name.is_empty() {
                continue;
            }
            if let Some(node) = nodes.iter().find(|n| n.name() == m.nominated_node_name) {
                let terminating = node.pods.iter().any(|p| {
                    let prio = p
                        .scheduling_group
                        .as_deref()
                        .and_then(|g| policy(&p.namespace, g))
                        .map_or(p.priority, |g| g.priority);
                    prio < me.priority && p.terminating && p.preempted
                });
                if terminating {
                    return unschedulable(
                        "not eligible due to a terminating pod on the nominated node.",
                    )
                    .into();
                }
            }
        }
        let mut potential = units(
            nodes,
            &group.namespace,
            &group.name,
            me.priority,
            &mut policy,
        );
        if potential.is_empty() {
            return Status::unresolvable(
                "preemption: No preemption victims found for incoming preemptor",
            )
            .into();
        }
        let mut sim = match simulate_group() {
            Ok(s) => s,
            Err(s) => return failed(s),
        };
        for u in &potential {
            if let Err(s) = all_ok(sim.as_mut(), &u.pods, false) {
                return failed(s);
            }
        }
        // Without every lower unit the group must fit.
        let assignments: Vec<ProposedAssignment> = match sim.schedule() {
            Ok(a) => a,
            Err(s) if s.code == berth_sdk::Code::Error => return failed(s),
            Err(s) => {
                let n: usize = potential.iter().map(|u| u.pods.len()).sum();
                return unschedulable(&format!(
                    "the group does not fit even without the {n} pod(s) of lower priority: {}",
                    s.message()
                ))
                .into();
            }
        };
        potential.sort_by(unit_order);
        let budgets = sim.pod_disruption_budgets();
        let (violating, fine) = split_units_by_budget(potential, &budgets);
        let mut evicted: Vec<Unit<'_>> = Vec::new();
        for u in violating.into_iter().chain(fine) {
            if let Err(s) = all_ok(sim.as_mut(), &u.pods, true) {
                return failed(s);
            }
            let fits = sim.fits(&assignments);
            if fits.code == berth_sdk::Code::Error {
                return failed(fits);
            }
            if !fits.is_success() {
                if let Err(s) = all_ok(sim.as_mut(), &u.pods, false) {
                    return failed(s);
                }
                evicted.push(u);
            }
        }
        evicted.sort_by(unit_order);
        PodGroupPostFilterResult {
            status: Status::success(),
            nominations: assignments,
            victims: evicted
                .iter()
                .flat_map(|u| u.pods.iter().map(|p| p.uid.clone()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::Node;

    fn pod(name: &str, priority: i32, group: Option<&str>, start: Option<i64>) -> Pod {
        Pod {
            uid: name.into(),
            namespace: "default".into(),
            name: name.into(),
            priority,
            scheduling_group: group.map(str::to_owned),
            start_time_ms: start,
            node_name: "n".into(),
            ..Pod::default()
        }
    }

    fn node(name: &str, pods: Vec<Pod>) -> NodeInfo {
        let mut n = NodeInfo::new(Node {
            name: name.into(),
            ..Node::default()
        });
        for p in pods {
            n.add_pod(&p);
        }
        n
    }

    fn policy(priority: i32, all: bool) -> Option<PodGroupPreemption> {
        Some(PodGroupPreemption {
            priority,
            preemption_policy: PreemptionPolicy::PreemptLowerPriority,
            disruption_all: all,
        })
    }

    #[test]
    fn units_follow_the_disruption_mode_and_the_group_priority() {
        let a = node(
            "a",
            vec![
                pod("single-low", 1, None, Some(1)),
                pod("single-high", 100, None, Some(1)),
                pod("all-1", 500, Some("batch"), Some(2)),
                pod("each-1", 500, Some("web"), Some(3)),
                pod("mine-1", 5, Some("trainer"), None),
            ],
        );
        let b = node(
            "b",
            vec![
                pod("all-2", 500, Some("batch"), Some(1)),
                pod("each-2", 500, Some("web"), Some(4)),
            ],
        );
        let mut lookups = 0;
        let mut look = |_: &str, g: &str| {
            lookups += 1;
            match g {
                // The members' own priority (500) does not count: the group's does.
                "batch" => policy(3, true),
                "web" => policy(4, false),
                _ => None,
            }
        };
        let u = units(&[&a, &b], "default", "trainer", 50, &mut look);
        let shape: Vec<(Vec<&str>, i32, bool)> = u
            .iter()
            .map(|u| {
                (
                    u.pods.iter().map(|p| p.name.as_str()).collect(),
                    u.priority,
                    u.of_group,
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (vec!["single-low"], 1, false),
                (vec!["all-1", "all-2"], 3, true),
                (vec!["each-1"], 4, true),
                (vec!["each-2"], 4, true),
            ]
        );
        assert_eq!(lookups, 2, "each PodGroup is looked up once");
    }

    #[test]
    fn importance_is_priority_then_groups_then_size_then_start() {
        let p = |n: &str, s| pod(n, 0, None, Some(s));
        let (a, b, c, d, e) = (p("a", 1), p("b", 2), p("c", 3), p("d", 4), p("e", 5));
        fn unit(pods: Vec<&Pod>, priority: i32, of_group: bool) -> Unit<'_> {
            Unit {
                pods,
                priority,
                of_group,
            }
        }
        let high = unit(vec![&e], 10, false);
        let group_big = unit(vec![&c, &d], 5, true);
        let group_small_early = unit(vec![&a], 5, true);
        let single_early = unit(vec![&a], 5, false);
        let single_late = unit(vec![&b], 5, false);
        assert!(more_important_unit(&high, &group_big));
        assert!(more_important_unit(&group_big, &group_small_early));
        assert!(more_important_unit(&group_small_early, &single_early));
        assert!(more_important_unit(&single_early, &single_late));
        assert!(!more_important_unit(&single_late, &single_early));
        let group_late = unit(vec![&e], 5, true);
        assert!(more_important_unit(&group_small_early, &group_late));
    }

    #[test]
    fn a_unit_violates_a_budget_when_any_of_its_pods_would() {
        let mut x = pod("x", 1, None, None);
        x.labels.insert("app".into(), "db".into());
        let mut y = pod("y", 1, None, None);
        y.labels.insert("app".into(), "db".into());
        let z = pod("z", 1, None, None);
        let budget = PodDisruptionBudget {
            namespace: "default".into(),
            name: "db".into(),
            selector: Some(berth_sdk::affinity::LabelSelector {
                match_labels: [("app".to_owned(), "db".to_owned())].into(),
                ..Default::default()
            }),
            disruptions_allowed: 1,
            disrupted_pods: Default::default(),
        };
        let units = vec![
            Unit {
                pods: vec![&x],
                priority: 1,
                of_group: false,
            },
            Unit {
                pods: vec![&z, &y],
                priority: 1,
                of_group: true,
            },
        ];
        let (violating, fine) = split_units_by_budget(units, &[budget]);
        assert_eq!(violating.len(), 1);
        assert_eq!(violating[0].pods[1].name, "y");
        assert_eq!(fine[0].pods[0].name, "x");
    }
}
