//! Workload-aware scheduling end to end, as upstream's pod group integration tests
//! (`test/integration/scheduler/podgroup/`) run it: PodGroups and their members as
//! `berth simulate` timelines on the default profile (GangScheduling included), each
//! run with the plugins as wasm components and as their native twins, which must
//! agree.

use berth::scheduler::SchedulerOptions;
use berth::simulate::{Report, SimulateOptions, simulate};
use berth_tests::{runtime, write};
use std::collections::BTreeMap;

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
/// (one document: they arrive together).
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
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), &format!("{name}.yaml"), timeline);
    let mut reports = Vec::new();
    for native in [false, true] {
        let mut scheduler = SchedulerOptions::default();
        scheduler.framework.native = native;
        scheduler.framework.seed = 3;
        let opts = SimulateOptions {
            files: vec![file.clone()],
            config: None,
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
                == "pod group default/big cannot be placed: minCount (4) cannot be satisfied: 3 scheduled, 0 remaining")
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
    // The third member completes the gang: all three land.
    let r = run("completed", &(timeline + &members_from("train", 2, 1, "1")));
    assert_eq!(bound_of(&r, "train-"), 3, "{r:#?}");
}

#[test]
fn members_wait_for_a_pod_group_created_late() {
    let before = node("n1", 8) + &members("late", 2, "1");
    let r = run("no-group", &before);
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
        scheduler: SchedulerOptions::default(),
    };
    let e = simulate(&runtime(), &opts).unwrap_err().to_string();
    assert!(
        e.contains("spec.schedulingPolicy.gang.minCount")
            && e.contains("must be greater than or equal to 1"),
        "{e}"
    );
}
