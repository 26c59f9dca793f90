//! Embedded runs are deterministic: the same input, profile and seed place the same
//! pods on the same nodes whatever the parallelism, whether the plugins run as
//! components or natively, and however slow the binding threads are. What crosses
//! threads (binding results) reaches the scheduling loop at points the run fixes, the
//! scheduler's clock is virtual, and pods that leave the queue's unschedulable set
//! together do so in queue order, not in the order of a hash map (which differs from
//! one process, and one map, to the next).

use berth::bench::{Mode, find, placements};
use berth::clock::{Clock, VirtualClock};
use berth::cluster::memory::MemoryCluster;
use berth::cluster::{Binder, PodState, WriteError};
use berth::config::Configuration;
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_sdk::{ClaimRef, Object, Pod};
use berth_tests::{apply, runtime};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The embedded cluster behind binds that take a while: every bind but every third
/// sleeps 1 to 5 times `delay` first, as binds through a slow API server would (and
/// as a slow or busy machine's binding threads do).
struct SlowBinds {
    cluster: Arc<MemoryCluster>,
    delay: Duration,
    binds: AtomicU64,
}

impl Binder for SlowBinds {
    fn bind(&self, pod: &Pod, node: &str) -> Result<(), WriteError> {
        let n = self.binds.fetch_add(1, Ordering::Relaxed);
        if !n.is_multiple_of(3) {
            std::thread::sleep(self.delay * (1 + (n % 5) as u32));
        }
        self.cluster.bind(pod, node)
    }
    fn evict(&self, victim: &Pod, preemptor: &Pod, message: &str) -> Result<(), WriteError> {
        self.cluster.evict(victim, preemptor, message)
    }
    fn reports_deletions(&self) -> bool {
        self.cluster.reports_deletions()
    }
    fn lookup(&self, pod: &Pod) -> PodState {
        self.cluster.lookup(pod)
    }
    fn bind_volume(&self, volume: &str, claim: &ClaimRef) -> Result<(), WriteError> {
        self.cluster.bind_volume(volume, claim)
    }
    fn attach_storage(&self, storage: &berth::cluster::storage::Storage) {
        self.cluster.attach_storage(storage)
    }
    fn attach_dra(&self, dra: &berth::cluster::dra::Dra) {
        self.cluster.attach_dra(dra)
    }
    fn take_storage_changes(&self) -> Vec<(Option<Object>, Object)> {
        self.cluster.take_storage_changes()
    }
}

/// Six nodes of 4 CPUs in three zones.
fn nodes() -> String {
    (0..6)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, labels: {{kubernetes.io/hostname: n{i}, topology.kubernetes.io/zone: z{}}}}}\nstatus: {{allocatable: {{cpu: '4', memory: 16Gi, pods: '110'}}}}\n",
                i % 3
            )
        })
        .collect()
}

/// A pod of `cpu`, labelled `app`, of `priority`, needing (when `near` is set) a pod
/// labelled `app: <near>` in its zone.
fn pod(name: &str, app: &str, cpu: &str, priority: i32, near: Option<&str>) -> String {
    let affinity = near
        .map(|near| {
            format!(
                "  affinity:\n    podAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - labelSelector: {{matchLabels: {{app: {near}}}}}\n        topologyKey: topology.kubernetes.io/zone\n"
            )
        })
        .unwrap_or_default();
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}, labels: {{app: {app}}}}}\nspec:\n  priority: {priority}\n{affinity}  containers:\n  - name: c\n    image: app\n    resources: {{requests: {{cpu: '{cpu}'}}}}\n"
    )
}

/// Where each pod of the scenario is at the end (`None`: pending, or evicted), in
/// pod order; and the evictions, in order.
type Placed = (Vec<(String, Option<String>)>, Vec<String>);

/// High-priority pods that need a `db` pod in their zone wait (unschedulable, their
/// backoffs long over) until one is bound; then they are moved back to activeQ
/// together and, of higher priority, go before the filler pods still queued (and
/// preempt fillers where they find no room). When a bind's result reaches the loop
/// decides which fillers they compete with, and the order they are moved in decides
/// which of them gets which room.
fn scenario(native: bool, parallelism: usize, bind_delay: Option<Duration>) -> Placed {
    let cluster = Arc::new(MemoryCluster::new());
    let binder: Arc<dyn Binder> = match bind_delay {
        Some(delay) => Arc::new(SlowBinds {
            cluster: cluster.clone(),
            delay,
            binds: AtomicU64::new(0),
        }),
        None => cluster.clone(),
    };
    let mut options = SchedulerOptions::default();
    options.framework.native = native;
    options.framework.parallelism = parallelism;
    options.framework.seed = 11;
    let clock = Arc::new(VirtualClock::default());
    let mut s = Scheduler::new(
        &runtime(),
        &Configuration::default(),
        "<default>",
        &options,
        binder,
        clock.clone(),
    )
    .unwrap();
    let mut names = Vec::new();
    let mut yaml = nodes();
    for i in 0..16 {
        let name = format!("web-{i:02}");
        yaml += &pod(&name, "web", "700m", 100, Some("db"));
        names.push(name);
    }
    apply(&mut s, &yaml);
    s.run_until_idle();
    // Long past every backoff: an event that may help them moves them to activeQ.
    clock.advance_to(clock.now() + Duration::from_secs(600));
    let mut yaml = String::new();
    for i in 0..3 {
        let name = format!("db-{i}");
        yaml += &pod(&name, "db", "500m", 0, None);
        names.push(name);
    }
    for i in 0..40 {
        let name = format!("filler-{i:02}");
        yaml += &pod(&name, "filler", "300m", 0, None);
        names.push(name);
    }
    apply(&mut s, &yaml);
    s.run_until_idle();
    let at = names
        .into_iter()
        .map(|n| {
            let node = s
                .cache()
                .pod(&format!("uid-{n}"))
                .map(|p| p.node_name.clone())
                .filter(|node| !node.is_empty());
            (n, node)
        })
        .collect();
    let evicted = cluster.evictions().into_iter().map(|e| e.key).collect();
    (at, evicted)
}

#[test]
fn slow_binding_threads_parallelism_and_twins_change_no_placement() {
    let reference = scenario(false, 1, None);
    let placed = |prefix: &str| {
        reference
            .0
            .iter()
            .filter(|(n, node)| n.starts_with(prefix) && node.is_some())
            .count()
    };
    // Not a vacuous comparison: the dbs all land, and the webs compete with the
    // fillers for what is left.
    assert_eq!(placed("db-"), 3, "{reference:?}");
    assert!(placed("web-") > 0, "{reference:?}");
    assert!(placed("filler-") > 0, "{reference:?}");
    assert!(
        reference.0.iter().any(|(_, node)| node.is_none()),
        "some pod must be left without room: {reference:?}"
    );
    for native in [false, true] {
        for parallelism in [1, 2, 4] {
            for delay in [None, Some(Duration::from_millis(2))] {
                let got = scenario(native, parallelism, delay);
                assert_eq!(
                    got, reference,
                    "native {native}, parallelism {parallelism}, bind delay {delay:?}"
                );
            }
        }
    }
}

/// Bench workloads (their smallest size) at parallelism 1, 2 and 4, as components
/// and natively: the same placements. (`twins.rs` compares every workload at
/// parallelism 2.) The bench used to run on the wall clock, where a batch expired, or
/// not, depending on how fast the machine was.
#[test]
fn bench_workloads_place_alike_at_any_parallelism() {
    let runtime = runtime();
    for name in [
        "SchedulingBasic",
        "SchedulingPodAffinity",
        "PreemptionBasic",
        "GangScheduling",
        "SteadyStateClusterResourceClaimTemplate",
    ] {
        let (w, sizes) = find(name).unwrap();
        let size = sizes[0];
        let mut reference: Option<Vec<(String, Option<String>)>> = None;
        for mode in [Mode::Wasm, Mode::Native] {
            for parallelism in [1, 4] {
                let mut options = SchedulerOptions::default();
                options.framework.seed = 7;
                options.framework.parallelism = parallelism;
                let got = placements(&runtime, w, size, mode, &options).expect("run");
                assert!(
                    got.iter().any(|(_, n)| n.is_some()),
                    "{name}: nothing placed"
                );
                match &reference {
                    None => reference = Some(got),
                    Some(r) => {
                        assert_eq!(r.len(), got.len(), "{name}");
                        for (a, b) in r.iter().zip(&got) {
                            assert_eq!(a, b, "{name}: {mode:?} at parallelism {parallelism}");
                        }
                    }
                }
            }
        }
    }
}
