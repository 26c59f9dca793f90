//! Workload-aware scheduling end to end, as upstream's pod group integration tests
//! (`test/integration/scheduler/podgroup/`) run it: PodGroups and their members as
//! `berth simulate` timelines on the default profile with `GenericWorkload` on
//! (GangScheduling included), each run with the plugins as wasm components and as
//! their native twins, which must agree; and what the default (`GenericWorkload` off)
//! does with the same objects.

use berth::scheduler::SchedulerOptions;
use berth::simulate::{GroupReport, Report, SimulateOptions, explain, simulate};
use berth_tests::{runtime, write};
use std::collections::BTreeMap;

/// The scheduler's options with `GenericWorkload` on, as upstream's pod group
/// integration tests run (`--feature-gates GenericWorkload=true`).
fn gated() -> SchedulerOptions {
    let mut o = SchedulerOptions::default();
    o.framework.generic_workload = true;
    o
}

/// A node with `cpu` cores.
fn node(name: &str, cpu: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nstatus: {{allocatable: {{cpu: '{cpu}', memory: 16Gi, pods: '110'}}}}\n---\n"
    )
}

/// A PodGroup with the gang policy.
fn gang(name: &str, min_count: u32) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: default}}\nspec: {{schedulingPolicy: {{gang: {{minCount: {min_count}}}}}}}\n---\n"
    )
}

/// A List of `count` members of `group` named `GROUP-i`, each asking `cpu` cores
/// (each item is a step of the timeline: they arrive one after the other).
fn members(group: &str, count: usize, cpu: &str) -> String {
    members_from(group, 0, count, cpu)
}

fn members_from(group: &str, first: usize, count: usize, cpu: &str) -> String {
    let mut out = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in first..first + count {
        out += &format!(
            "- {{apiVersion: v1, kind: Pod, metadata: {{name: {group}-{i}, namespace: default}}, spec: {{schedulingGroup: {{podGroupName: {group}}}, containers: [{{name: c, image: i, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}}}\n"
        );
    }
    out + "---\n"
}

/// A pod of no group.
fn plain(name: &str, cpu: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec: {{containers: [{{name: c, image: i, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\n---\n"
    )
}

/// Runs the timeline with the plugins as components and natively; both must place
/// every pod alike. The report of the components' run.
fn run(name: &str, timeline: &str) -> Report {
    run_with(name, timeline, None)
}

/// As [`run`], with a configuration.
fn run_with(name: &str, timeline: &str, config: Option<&str>) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), &format!("{name}.yaml"), timeline);
    let config = config.map(|c| write(dir.path(), "config.yaml", c));
    let mut reports = Vec::new();
    for native in [false, true] {
        let mut scheduler = gated();
        scheduler.framework.native = native;
        scheduler.framework.seed = 3;
        let opts = SimulateOptions {
            files: vec![file.clone()],
            config: config.clone(),
            cluster: None,
            scheduler,
        };
        reports.push(simulate(&runtime(), &opts).unwrap_or_else(|e| panic!("{name}: {e:#}")));
    }
    let placed = |r: &Report| -> Vec<(String, Option<String>, String)> {
        r.pods
            .iter()
            .map(|p| (p.name.clone(), p.node.clone(), p.message.clone()))
            .collect()
    };
    assert_eq!(
        placed(&reports[0]),
        placed(&reports[1]),
        "{name}: wasm and native differ"
    );
    reports.swap_remove(0)
}

/// Each pod's node (None: pending), by name.
fn nodes(r: &Report) -> BTreeMap<String, Option<String>> {
    r.pods
        .iter()
        .map(|p| (p.name.clone(), p.node.clone()))
        .collect()
}

fn message<'a>(r: &'a Report, pod: &str) -> &'a str {
    &r.pods.iter().find(|p| p.name == pod).unwrap().message
}

fn bound_of(r: &Report, prefix: &str) -> usize {
    r.pods
        .iter()
        .filter(|p| p.name.starts_with(prefix) && p.node.is_some())
        .count()
}

/// With `GenericWorkload` off (1.37's default) kube-scheduler knows no PodGroups: a
/// gang's members are scheduled one by one, as many as fit, and nothing speaks of
/// the group.
#[test]
fn without_generic_workload_members_are_scheduled_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let timeline = node("n1", 2)
        + &node("n2", 2)
        + &node("n3", 2)
        + &gang("big", 4)
        + &members("big", 4, "1500m");
    let file = write(dir.path(), "off.yaml", &timeline);
    for native in [false, true] {
        let mut scheduler = SchedulerOptions::default();
        assert!(!scheduler.framework.generic_workload);
        scheduler.framework.native = native;
        let opts = SimulateOptions {
            files: vec![file.clone()],
            config: None,
            cluster: None,
            scheduler,
        };
        let r = simulate(&runtime(), &opts).unwrap();
        assert_eq!(bound_of(&r, "big-"), 3, "{r:#?}");
        assert!(r.groups.is_empty(), "{r:#?}");
        assert_eq!(
            message(&r, "big-3"),
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are \
             available: 3 No preemption victims found for incoming pod.",
            "{r:#?}"
        );
        let e = explain(&runtime(), &opts, "default/big-3").unwrap();
        assert!(e.pod_group.is_none(), "{e:#?}");
    }
    // The same objects with the gate on: the gang binds nothing.
    let r = run("on", &timeline);
    assert_eq!(bound_of(&r, "big-"), 0, "{r:#?}");
}

#[test]
fn a_gang_that_fits_lands_whole() {
    let r = run(
        "fits",
        &(node("n1", 4) + &node("n2", 4) + &gang("train", 4) + &members("train", 4, "2")),
    );
    assert_eq!(bound_of(&r, "train-"), 4, "{r:#?}");
    // Two per node: each member saw the ones placed before it.
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for n in nodes(&r).into_values().flatten() {
        *per_node.entry(n).or_default() += 1;
    }
    assert_eq!(per_node.into_values().collect::<Vec<_>>(), [2, 2]);
}

#[test]
fn a_gang_that_does_not_fit_binds_nothing_and_leaves_room_for_others() {
    let r = run(
        "too-big",
        &(node("n1", 2)
            + &node("n2", 2)
            + &node("n3", 2)
            + &gang("big", 4)
            + &members("big", 4, "1500m")
            + &plain("web", "1500m")),
    );
    assert_eq!(bound_of(&r, "big-"), 0, "{r:#?}");
    // Three members fit alone, and the one that does not says why; the others say
    // that the group cannot be placed.
    let unplaced: Vec<&str> = r
        .pods
        .iter()
        .filter(|p| p.name.starts_with("big-"))
        .map(|p| p.message.as_str())
        .collect();
    assert_eq!(
        unplaced
            .iter()
            .filter(|m| **m
                == "pod group default/big cannot be placed: minCount (4) cannot be satisfied: 3 scheduled, 0 remaining; preemption: No preemption victims found for incoming preemptor")
            .count(),
        3,
        "{unplaced:#?}"
    );
    assert_eq!(
        unplaced
            .iter()
            .filter(|m| m.contains("Insufficient cpu"))
            .count(),
        1
    );
    // Nothing of the gang was left assumed: an ordinary pod still finds a node.
    assert!(nodes(&r)["web"].is_some(), "{r:#?}");
    // The report says it of the group as a whole.
    assert_eq!(
        r.groups,
        [GroupReport {
            namespace: "default".into(),
            name: "big".into(),
            policy: Some("gang"),
            min_count: Some(4),
            members: 4,
            bound: 0,
            state: "unschedulable",
            workload: None,
        }]
    );
    assert!(
        r.to_text().contains(
            "pod group default/big (gang, minCount 4): 0 of 4 member(s) bound: unschedulable\n"
        ),
        "{}",
        r.to_text()
    );
}

#[test]
fn explain_shows_a_member_its_group_s_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "explain.yaml",
        &(node("n1", 2) + &node("n2", 2) + &gang("big", 3) + &members("big", 3, "1500m")),
    );
    let opts = SimulateOptions {
        files: vec![file],
        config: None,
        cluster: None,
        scheduler: gated(),
    };
    let e = explain(&runtime(), &opts, "default/big-1").unwrap();
    let g = e
        .pod_group
        .as_ref()
        .expect("a member's explanation has its group");
    assert_eq!(g.group, "default/big");
    assert_eq!(g.policy, "gang, minCount 3");
    assert!(!g.feasible);
    // The pod asked about is tried first, then the others by name: two land, the
    // third finds no room, and the gang cannot be placed.
    let order: Vec<&str> = g.members.iter().map(|m| m.pod.as_str()).collect();
    assert_eq!(order, ["default/big-1", "default/big-0", "default/big-2"]);
    assert!(g.members[0].node.is_some() && g.members[1].node.is_some());
    assert_eq!(g.members[2].node, None);
    assert!(
        g.members[2]
            .reason
            .as_deref()
            .unwrap()
            .contains("Insufficient cpu"),
        "{g:?}"
    );
    assert_eq!(
        g.verdict,
        "pod group default/big cannot be placed: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
    );
    let text = e.to_text();
    assert!(
        text.contains("Pod group default/big (gang, minCount 3): 0 member(s) scheduled before; its cycle would try 3:\n"),
        "{text}"
    );
    assert!(
        text.contains("  verdict: pod group default/big cannot be placed: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining\n"),
        "{text}"
    );
    // The explanation left nothing behind: the member's own table sees both nodes
    // free.
    assert!(e.nodes.iter().all(|n| n.feasible), "{text}");
}

#[test]
fn a_gang_short_of_members_waits_until_the_last_one_comes() {
    let timeline = node("n1", 8)
        + &gang("train", 3)
        + &members_from("train", 0, 2, "1")
        + &plain("marker", "1");
    let r = run("short", &timeline);
    assert_eq!(bound_of(&r, "train-"), 0);
    assert_eq!(
        message(&r, "train-0"),
        "waiting at PreEnqueue: GangScheduling: waiting for minCount pods from a gang to appear in scheduling queue"
    );
    assert_eq!(
        r.pods
            .iter()
            .find(|p| p.name == "train-0")
            .unwrap()
            .attempts,
        0
    );
    assert_eq!(r.groups[0].state, "waiting for members");
    // The third member completes the gang: all three land.
    let r = run("completed", &(timeline + &members_from("train", 2, 1, "1")));
    assert_eq!(bound_of(&r, "train-"), 3, "{r:#?}");
    assert_eq!((r.groups[0].bound, r.groups[0].state), (3, "placed"));
}

#[test]
fn members_wait_for_a_pod_group_created_late() {
    let before = node("n1", 8) + &members("late", 2, "1");
    let r = run("no-group", &before);
    assert_eq!(r.groups[0].state, "waiting for its PodGroup");
    assert_eq!(r.groups[0].policy, None);
    assert_eq!(
        message(&r, "late-0"),
        "waiting at PreEnqueue: GangScheduling: waiting for pods's pod group \"late\" to appear in scheduling queue"
    );
    let r = run("group-created", &(before + &gang("late", 2)));
    assert_eq!(bound_of(&r, "late-"), 2, "{r:#?}");
}

#[test]
fn two_gangs_competing_for_one_room_never_interleave() {
    // Room for four members: either gang fits alone, never both.
    let room = node("n1", 2) + &node("n2", 2);
    for (first, second) in [("a", "b"), ("b", "a")] {
        let timeline = room.clone()
            + &gang("a", 4)
            + &gang("b", 4)
            + &members(first, 4, "1")
            + &members(second, 4, "1");
        let r = run(&format!("compete-{first}{second}"), &timeline);
        assert_eq!(
            bound_of(&r, &format!("{first}-")),
            4,
            "{first} first: {r:#?}"
        );
        assert_eq!(
            bound_of(&r, &format!("{second}-")),
            0,
            "{first} first: {r:#?}"
        );
    }
}

#[test]
fn a_gang_waits_for_a_node_to_join() {
    let before = node("n1", 2) + &gang("train", 3) + &members("train", 3, "1");
    let r = run("one-node", &before);
    assert_eq!(bound_of(&r, "train-"), 0);
    let r = run("node-joins", &(before + &node("n2", 2)));
    assert_eq!(bound_of(&r, "train-"), 3, "{r:#?}");
}

#[test]
fn lowering_min_count_lets_a_gang_land() {
    // Four members, room for three.
    let before = node("n1", 3) + &gang("train", 4) + &members("train", 4, "1");
    let r = run("min-4", &before);
    assert_eq!(bound_of(&r, "train-"), 0);
    let r = run("min-3", &(before + &gang("train", 3)));
    assert_eq!(bound_of(&r, "train-"), 3, "{r:#?}");
}

#[test]
fn bound_members_count_toward_min_count() {
    // Two members already run; a third, pending, completes the gang of three.
    let bound = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec: {{nodeName: n1, schedulingGroup: {{podGroupName: train}}, containers: [{{name: c, image: i, resources: {{requests: {{cpu: '1'}}}}}}]}}\n---\n"
        )
    };
    let timeline = node("n1", 4)
        + &gang("train", 3)
        + &bound("train-a")
        + &bound("train-b")
        + &members("train", 1, "1");
    let r = run("bound-count", &timeline);
    assert_eq!(nodes(&r)["train-0"].as_deref(), Some("n1"), "{r:#?}");
}

#[test]
fn a_basic_group_places_what_fits() {
    let timeline = node("n1", 2)
        + "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: batch}\nspec: {schedulingPolicy: {basic: {}}}\n---\n"
        + &members("batch", 3, "1");
    let r = run("basic", &timeline);
    assert_eq!(bound_of(&r, "batch-"), 2, "{r:#?}");
    assert_eq!(
        (r.groups[0].policy, r.groups[0].state),
        (Some("basic"), "partly placed")
    );
    let pending = r
        .pods
        .iter()
        .find(|p| p.name.starts_with("batch-") && p.node.is_none())
        .unwrap();
    assert!(pending.message.contains("Insufficient cpu"), "{pending:?}");
}

#[test]
fn a_bad_pod_group_names_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "bad.yaml",
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\nspec: {schedulingPolicy: {gang: {minCount: 0}}}\n",
    );
    let opts = SimulateOptions {
        files: vec![file],
        config: None,
        cluster: None,
        scheduler: gated(),
    };
    let e = simulate(&runtime(), &opts).unwrap_err().to_string();
    assert!(
        e.contains("spec.schedulingPolicy.gang.minCount")
            && e.contains("must be greater than or equal to 1"),
        "{e}"
    );
}

/// A node with `cpu` cores in a zone.
fn zone_node(name: &str, zone: &str, cpu: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{topology.kubernetes.io/zone: {zone}}}}}\nstatus: {{allocatable: {{cpu: '{cpu}', memory: 16Gi, pods: '110'}}}}\n---\n"
    )
}

/// A gang placed within one zone.
fn zoned_gang(name: &str, min_count: u32) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  schedulingPolicy: {{gang: {{minCount: {min_count}}}}}\n  schedulingConstraints:\n    topology: [{{key: topology.kubernetes.io/zone}}]\n---\n"
    )
}

/// The topology placement plugins on, as upstream's tests turn them on.
const PLACEMENTS: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    placementGenerate:
      enabled: [{name: TopologyPlacementGenerator}]
    placementScore:
      enabled: [{name: PodGroupPodsCount, weight: 1}]
";

/// The zone of each bound member whose name starts with `prefix`.
fn zones_of(r: &Report, prefix: &str) -> Vec<String> {
    r.pods
        .iter()
        .filter(|p| p.name.starts_with(prefix))
        .filter_map(|p| p.node.as_ref())
        .map(|n| n.split('-').nth(1).unwrap().to_owned())
        .collect()
}

#[test]
fn a_gang_with_a_topology_lands_within_one_zone() {
    let room = zone_node("n-east-1", "east", 2)
        + &zone_node("n-east-2", "east", 2)
        + &zone_node("n-west-1", "west", 2)
        + &zone_node("n-west-2", "west", 2);
    let r = run_with(
        "one-zone",
        &(room.clone() + &zoned_gang("train", 3) + &members("train", 3, "1")),
        Some(PLACEMENTS),
    );
    // Both zones can take it and take all three: the first of equals.
    assert_eq!(zones_of(&r, "train-"), ["east", "east", "east"], "{r:#?}");
    // Without the placement plugins the same gang spreads over the zones.
    let r = run(
        "spread",
        &(room + &zoned_gang("train", 3) + &members("train", 3, "1")),
    );
    let mut zones = zones_of(&r, "train-");
    zones.sort();
    zones.dedup();
    assert_eq!(zones, ["east", "west"], "{r:#?}");
}

#[test]
fn pod_group_pods_count_prefers_the_placement_that_takes_the_most_members() {
    // East takes two members (enough for minCount), west all three. The members
    // wait for their PodGroup, so that one cycle tries all three.
    let timeline = zone_node("n-east-1", "east", 2)
        + &zone_node("n-west-1", "west", 2)
        + &zone_node("n-west-2", "west", 2)
        + &members("train", 3, "1")
        + &zoned_gang("train", 2);
    let r = run_with("most-members", &timeline, Some(PLACEMENTS));
    assert_eq!(zones_of(&r, "train-"), ["west", "west", "west"], "{r:#?}");
}

#[test]
fn a_gang_that_fits_no_single_zone_stays_pending() {
    // Three members of 2 CPUs: the cluster has room for three, no zone for more than
    // two.
    let timeline = zone_node("n-east-1", "east", 4)
        + &zone_node("n-west-1", "west", 2)
        + &zoned_gang("train", 3)
        + &members("train", 3, "2");
    let r = run_with("no-zone", &timeline, Some(PLACEMENTS));
    assert_eq!(bound_of(&r, "train-"), 0, "{r:#?}");
    // The two members east could take say why the group cannot be placed; the one it
    // could not, why not.
    let group_message = "pod group default/train cannot be placed: none of its 2 placement(s) can take it; within \"east\": minCount (3) cannot be satisfied: 2 scheduled, 0 remaining; preemption: No preemption victims found for incoming preemptor";
    let messages: Vec<&str> = r.pods.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        messages.iter().filter(|m| **m == group_message).count(),
        2,
        "{messages:#?}"
    );
    assert_eq!(
        messages
            .iter()
            .filter(|m| m.contains("Insufficient cpu"))
            .count(),
        1,
        "{messages:#?}"
    );
    // Placed pod by pod over the whole cluster, it would have landed.
    let r = run("no-zone-default", &timeline);
    assert_eq!(bound_of(&r, "train-"), 3, "{r:#?}");
}

/// A PodGroup with the gang policy and more of its spec (`priority: 1000`, ...).
fn gang_with(name: &str, min_count: u32, spec: &str) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: default}}\nspec: {{schedulingPolicy: {{gang: {{minCount: {min_count}}}}}, {spec}}}\n---\n"
    )
}

/// A pod already running on `node` (its `spec.nodeName` set), of `group` if any.
fn running(name: &str, node: &str, cpu: &str, group: Option<&str>) -> String {
    let group = group.map_or(String::new(), |g| {
        format!(", schedulingGroup: {{podGroupName: {g}}}")
    });
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec: {{nodeName: {node}{group}, containers: [{{name: c, image: i, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\n---\n"
    )
}

fn evicted(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = r.evicted.iter().map(|e| e.name.clone()).collect();
    v.sort();
    v
}

#[test]
fn a_gang_preempts_lower_priority_pods_and_lands_whole() {
    let r = run(
        "gang-preempts",
        &(node("n1", 4)
            + &node("n2", 4)
            + &running("low-1", "n1", "2", None)
            + &running("low-2", "n1", "2", None)
            + &running("low-3", "n2", "2", None)
            + &running("low-4", "n2", "2", None)
            + "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: training}\nvalue: 1000\n---\n"
            + &members("train", 4, "2")
            + &gang_with("train", 4, "priorityClassName: training")),
    );
    // The group's priority (from its class) made room; its members' own is 0.
    assert_eq!(evicted(&r), ["low-1", "low-2", "low-3", "low-4"], "{r:#?}");
    assert_eq!(bound_of(&r, "train-"), 4, "{r:#?}");
    for e in &r.evicted {
        assert!(e.preemptor.starts_with("default/train-"), "{e:?}");
    }
    let g = r.groups.iter().find(|g| g.name == "train").unwrap();
    assert_eq!(g.bound, 4, "{g:?}");
}

#[test]
fn a_gang_that_preemption_cannot_make_room_for_evicts_nothing() {
    // Eight cores are needed; the pods of lower priority hold six, a pod of higher
    // priority the other two: preempting the six would not be enough, so none goes.
    let r = run(
        "gang-preempts-nothing",
        &(node("n1", 4)
            + &node("n2", 4)
            + &running("low-1", "n1", "2", None)
            + &running("low-2", "n1", "2", None)
            + &running("low-3", "n2", "2", None)
            + "apiVersion: v1\nkind: Pod\nmetadata: {name: vip, namespace: default}\nspec: {nodeName: n2, priority: 5000, containers: [{name: c, image: i, resources: {requests: {cpu: '2'}}}]}\n---\n"
            + &members("train", 4, "2")
            + &gang_with("train", 4, "priority: 1000")),
    );
    assert!(evicted(&r).is_empty(), "{r:#?}");
    assert_eq!(bound_of(&r, "train-"), 0, "{r:#?}");
    // The members the cycle could place say why preemption did not help.
    let m = message(&r, "train-1");
    assert!(
        m.ends_with("; preemption: the group does not fit even without the 3 pod(s) of lower priority: pod group default/train cannot be placed: minCount (4) cannot be satisfied: 3 scheduled, 0 remaining"),
        "{m}"
    );
}

#[test]
fn a_gang_of_lower_priority_never_preempts_and_a_never_policy_does_not_either() {
    for spec in ["priority: 0", "priority: 1000, preemptionPolicy: Never"] {
        let r = run(
            "gang-no-preemption",
            &(node("n1", 4)
                + &running("low-1", "n1", "2", None)
                + &running("low-2", "n1", "2", None)
                + &members("train", 2, "2")
                + &gang_with("train", 2, spec)),
        );
        assert!(evicted(&r).is_empty(), "{spec}: {r:#?}");
        assert_eq!(bound_of(&r, "train-"), 0, "{spec}: {r:#?}");
    }
}

#[test]
fn a_victim_group_that_goes_all_together_is_evicted_whole() {
    // The batch gang's members: two on n1, one on n2. A one-member gang of higher
    // priority needs three of n1's four cores: one batch member is in its way.
    let timeline = |mode: &str| {
        node("n1", 4)
            + &node("n2", 2)
            + &gang_with(
                "batch",
                3,
                &format!("priority: 10, disruptionMode: {{{mode}: {{}}}}"),
            )
            + &running("batch-0", "n1", "1", Some("batch"))
            + &running("batch-1", "n1", "1", Some("batch"))
            + &running("batch-2", "n2", "1", Some("batch"))
            + &members("solo", 1, "3")
            + &gang_with("solo", 1, "priority: 1000")
    };
    // disruptionMode all: the whole gang goes, its member on n2 too.
    let r = run("victim-all", &timeline("all"));
    assert_eq!(evicted(&r), ["batch-0", "batch-1", "batch-2"], "{r:#?}");
    assert_eq!(nodes(&r)["solo-0"].as_deref(), Some("n1"), "{r:#?}");
    // single: only the one member in the way.
    let r = run("victim-single", &timeline("single"));
    assert_eq!(evicted(&r).len(), 1, "{r:#?}");
    assert!(evicted(&r)[0].starts_with("batch-"), "{r:#?}");
    assert_eq!(nodes(&r)["solo-0"].as_deref(), Some("n1"), "{r:#?}");
}

/// A PodGroupPostFilter plugin that names victims the group may not preempt (a pod
/// of higher priority) is refused before anything is evicted: the host's what-if
/// refuses to take such a pod out, the host checks the answer, the group's cycle
/// fails naming the plugin, and every pod stays where it is.
#[test]
fn a_pod_group_post_filter_naming_a_higher_victim_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        &format!(
            "berth:\n  modules:\n  - {{name: Hostile, path: {}}}\nprofiles:\n- plugins:\n    podGroupPostFilter:\n      disabled: [{{name: '*'}}]\n      enabled: [{{name: Hostile}}]\n",
            berth_artifacts::fixtures::FIXTURE_HOSTILE
        ),
    );
    let timeline = node("n1", 4)
        + &running("low", "n1", "2", None)
        + "apiVersion: v1\nkind: Pod\nmetadata: {name: vip, namespace: default}\nspec: {nodeName: n1, priority: 5000, containers: [{name: c, image: i, resources: {requests: {cpu: '2'}}}]}\n---\n"
        + "apiVersion: v1\nkind: Pod\nmetadata: {name: g-0, namespace: default, labels: {berth.test/hostile: group-evict-higher, berth.test/hostile-node: n1}}\nspec: {schedulingGroup: {podGroupName: g}, containers: [{name: c, image: i, resources: {requests: {cpu: '4'}}}]}\n---\n"
        + &gang_with("g", 1, "priority: 1000");
    let file = write(dir.path(), "refused.yaml", &timeline);
    let opts = SimulateOptions {
        files: vec![file],
        config: Some(config),
        cluster: None,
        scheduler: gated(),
    };
    let r = simulate(&runtime(), &opts).unwrap();
    assert!(evicted(&r).is_empty(), "{r:#?}");
    let m = message(&r, "g-0");
    assert!(
        m.contains("Hostile")
            && m.contains("was refused evictions at PodGroupPostFilter")
            && m.contains("default/vip of priority 5000 is not of lower priority than pod group default/g (1000)"),
        "{m}"
    );
}

/// `explain` of a member of a gang that does not fit says what workload-aware
/// preemption would do (and does nothing of it): the victims and where each member
/// would be nominated; and why not, when it would not help.
#[test]
fn explain_shows_what_preemption_would_do_for_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let low = running("low-1", "n1", "2", None)
        + &running("low-2", "n1", "2", None)
        + &running("low-3", "n2", "2", None)
        + &running("low-4", "n2", "2", None);
    let timeline = |priority: u32| {
        node("n1", 4)
            + &node("n2", 4)
            + &low
            + &members("train", 4, "2")
            + &gang_with("train", 4, &format!("priority: {priority}"))
    };
    let explained = |name: &str, priority: u32| {
        let file = write(dir.path(), name, &timeline(priority));
        let opts = SimulateOptions {
            files: vec![file],
            config: None,
            cluster: None,
            scheduler: gated(),
        };
        explain(&runtime(), &opts, "default/train-0").unwrap()
    };
    let e = explained("room.yaml", 1000);
    let p = e.pod_group.as_ref().unwrap().preemption.as_ref().unwrap();
    assert!(p.found_room, "{p:?}");
    assert_eq!(p.plugin, "DefaultPreemption");
    let mut victims = p.victims.clone();
    victims.sort();
    assert_eq!(
        victims,
        [
            "default/low-1 on n1",
            "default/low-2 on n1",
            "default/low-3 on n2",
            "default/low-4 on n2"
        ]
    );
    assert_eq!(p.nominations.len(), 4, "{p:?}");
    let text = e.to_text();
    assert!(
        text.contains("  preemption (DefaultPreemption): would evict "),
        "{text}"
    );
    assert!(text.contains("    nominate default/train-0 to n"), "{text}");
    // Of no higher priority than the pods in the way: no victims.
    let e = explained("no-room.yaml", 0);
    let p = e.pod_group.as_ref().unwrap().preemption.as_ref().unwrap();
    assert!(!p.found_room, "{p:?}");
    assert_eq!(
        p.reason.as_deref(),
        Some("preemption: No preemption victims found for incoming preemptor")
    );
}

#[test]
fn the_queue_sorts_a_pod_group_by_its_own_priority_not_its_members() {
    // The node is too small for either the gang (PodGroup priority 1000, members' own
    // 0) or a pod of priority 500 that never preempts: both wait. When the node grows
    // to room for only one of them, both are queued again at once and the queue pops
    // the group first, as upstream's QueueSort compares the group entity: the gang
    // lands whole and nothing is evicted. (Sorted by its members' priority, the pod
    // would land first and the gang would then preempt it.)
    let r = run(
        "group-entity-order",
        &(node("n1", 1)
            + &gang_with("train", 2, "priority: 1000")
            + &members("train", 2, "1")
            + "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\nspec: {priority: 500, preemptionPolicy: Never, containers: [{name: c, image: i, resources: {requests: {cpu: '2'}}}]}\n---\n"
            + &node("n1", 2)),
    );
    assert!(evicted(&r).is_empty(), "{r:#?}");
    assert_eq!(bound_of(&r, "train-"), 2, "{r:#?}");
    assert_eq!(nodes(&r)["web"], None, "{r:#?}");
}

#[test]
fn within_a_placement_pre_filter_sees_only_the_placement_s_nodes() {
    // Members spread by hostname (maxSkew 1) among `app: x` pods; zone a's two nodes
    // run one such pod each, zone b's none. Upstream runs the cycle within a
    // placement on a snapshot of its nodes: within zone a the fewest on a node is 1,
    // so each member may go to a node of zone a (2 - 1 <= 1), and zone a, first of
    // two equally good placements, wins. Had PodTopologySpread's PreFilter counted the
    // whole cluster, zone b's empty nodes (0) would have ruled zone a out.
    let mut timeline = String::new();
    for (name, zone) in [
        ("n-a-1", "a"),
        ("n-a-2", "a"),
        ("n-b-1", "b"),
        ("n-b-2", "b"),
    ] {
        timeline += &format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{topology.kubernetes.io/zone: {zone}, kubernetes.io/hostname: {name}}}}}\nstatus: {{allocatable: {{cpu: '4', memory: 16Gi, pods: '110'}}}}\n---\n"
        );
    }
    for (name, node) in [("x-1", "n-a-1"), ("x-2", "n-a-2")] {
        timeline += &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, labels: {{app: x}}}}\nspec: {{nodeName: {node}, containers: [{{name: c, image: i, resources: {{requests: {{cpu: '1'}}}}}}]}}\n---\n"
        );
    }
    timeline += "apiVersion: v1\nkind: List\nitems:\n";
    for i in 0..2 {
        timeline += &format!(
            "- {{apiVersion: v1, kind: Pod, metadata: {{name: train-{i}, namespace: default, labels: {{app: x}}}}, spec: {{schedulingGroup: {{podGroupName: train}}, topologySpreadConstraints: [{{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: x}}}}}}], containers: [{{name: c, image: i, resources: {{requests: {{cpu: '1'}}}}}}]}}}}\n"
        );
    }
    timeline += "---\n";
    timeline += &zoned_gang("train", 2);
    let r = run_with("placement-prefilter", &timeline, Some(PLACEMENTS));
    assert_eq!(zones_of(&r, "train-"), ["a", "a"], "{r:#?}");
}
