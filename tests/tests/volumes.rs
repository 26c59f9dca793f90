//! Volume binding end to end on the embedded cluster, with the default profile's
//! real components: pods with `WaitForFirstConsumer` claims land where a volume can
//! follow them, their claims end bound (by the embedded cluster's PersistentVolume
//! controller and provisioner), no volume is bound twice, and a failed PreBind gives
//! back what Reserve assumed.

use berth::clock::VirtualClock;
use berth::cluster::memory::MemoryCluster;
use berth::config::Configuration;
use berth::scheduler::{Scheduler, SchedulerOptions};
use berth_sdk::{ANNOTATION_BIND_COMPLETED, ANNOTATION_SELECTED_NODE, ClaimPhase, VolumePhase};
use berth_tests::{apply, plugin_calls, runtime};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

fn scheduler(cluster: Arc<MemoryCluster>) -> Scheduler {
    let options = SchedulerOptions {
        max_attempts: 20,
        ..SchedulerOptions::default()
    };
    Scheduler::new(
        &runtime(),
        &Configuration::default(),
        "<default>",
        &options,
        cluster,
        Arc::new(VirtualClock::default()),
    )
    .unwrap()
}

fn node(name: &str, zone: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}}}}}\nstatus: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}}}\n---\n"
    )
}

fn local_volume(name: &str, node: &str, size: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec:\n  capacity: {{storage: {size}}}\n  accessModes: [ReadWriteOnce]\n  storageClassName: local\n  local: {{path: /mnt/disks/{name}}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n        - {{key: kubernetes.io/hostname, operator: In, values: [{node}]}}\n---\n"
    )
}

fn claim(name: &str, class: &str, size: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  storageClassName: {class}\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: {size}}}}}\n---\n"
    )
}

fn pod_with_claim(name: &str, claim: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}}}\nspec:\n  containers: [{{name: c, image: app, resources: {{requests: {{cpu: 100m}}}}}}]\n  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: {claim}}}\n---\n"
    )
}

const CLASSES: &str = "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: csi.example.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [z1]}
---
";

/// The node of each volume's node affinity, by volume.
fn volume_nodes() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([("pv-a", "n1"), ("pv-b", "n2"), ("pv-c", "n3")])
}

#[test]
fn stateful_pods_land_where_their_volumes_can_follow_and_the_claims_end_bound() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    let mut yaml = String::from(CLASSES);
    for (n, z) in [("n1", "z1"), ("n2", "z1"), ("n3", "z2"), ("n4", "z2")] {
        yaml += &node(n, z);
    }
    for (pv, n) in volume_nodes() {
        yaml += &local_volume(pv, n, "10Gi");
    }
    // A StatefulSet's pods, each with its own claim: three volumes for four pods.
    for i in 0..4 {
        yaml += &claim(&format!("data-web-{i}"), "local", "5Gi");
        yaml += &pod_with_claim(&format!("web-{i}"), &format!("data-web-{i}"));
    }
    // A claim of a provisioning class: only zone z1 may have its volume.
    yaml += &claim("cache", "fast", "1Gi");
    yaml += &pod_with_claim("cache-0", "cache");
    apply(&mut s, &yaml);
    s.run_until_idle();

    let storage = s.storage().clone();
    let mut placed = BTreeMap::new();
    for i in 0..4 {
        let pod = format!("web-{i}");
        let o = s.outcome(&format!("uid-{pod}")).unwrap().clone();
        let Some(node) = o.node else {
            placed.insert(pod, None);
            assert!(
                o.message
                    .contains("didn't find available persistent volumes to bind"),
                "{o:?}"
            );
            continue;
        };
        let c = storage.claim("default", &format!("data-web-{i}")).unwrap();
        assert_eq!(c.phase, ClaimPhase::Bound, "{c:?}");
        assert!(c.annotations.contains_key(ANNOTATION_BIND_COMPLETED));
        assert_eq!(volume_nodes()[c.volume_name.as_str()], node, "{pod}");
        let v = storage.volume(&c.volume_name).unwrap();
        assert_eq!(v.phase, VolumePhase::Bound);
        assert_eq!(v.claim_ref.unwrap().name, c.name);
        placed.insert(pod, Some(node));
    }
    // Three pods placed, on three nodes (one volume each), the fourth pending.
    let nodes: std::collections::BTreeSet<_> = placed.values().flatten().collect();
    assert_eq!(nodes.len(), 3, "{placed:?}");
    assert_eq!(placed.values().filter(|n| n.is_none()).count(), 1);
    let pending = placed
        .iter()
        .find(|(_, n)| n.is_none())
        .map(|(p, _)| p.clone())
        .unwrap();

    // The provisioned claim: selected node in zone z1, a volume made for it, bound.
    let o = s.outcome("uid-cache-0").unwrap().clone();
    let cache_node = o.node.clone().unwrap();
    assert!(["n1", "n2"].contains(&cache_node.as_str()), "{o:?}");
    let c = storage.claim("default", "cache").unwrap();
    assert_eq!(c.selected_node(), Some(cache_node.as_str()));
    assert_eq!(c.annotations[ANNOTATION_SELECTED_NODE], cache_node);
    assert_eq!(c.phase, ClaimPhase::Bound);
    let v = storage.volume(&c.volume_name).unwrap();
    assert_eq!(v.storage_class_name, "fast");
    assert_eq!(v.capacity_storage, 1 << 30);

    // Every binding reached the cluster once; nothing is left assumed.
    assert_eq!(cluster.bindings().len(), 4);
    assert_eq!(storage.assumed(), (0, 0));

    // A new volume on the fourth node brings the pending pod back, and it lands there.
    apply(&mut s, &local_volume("pv-d", "n4", "10Gi"));
    s.run_until_idle();
    let o = s.outcome(&format!("uid-{pending}")).unwrap();
    assert_eq!(o.node.as_deref(), Some("n4"), "{o:?}");
    let claim_name = format!("data-{pending}");
    assert_eq!(
        storage.claim("default", &claim_name).unwrap().volume_name,
        "pv-d"
    );
    assert_eq!(storage.assumed(), (0, 0));
}

#[test]
fn a_failed_pre_bind_gives_back_the_volume_and_the_pod_binds_on_retry() {
    let cluster = Arc::new(MemoryCluster::new());
    let refusals = Arc::new(AtomicUsize::new(0));
    let counted = refusals.clone();
    // The cluster refuses the first volume binding.
    cluster.refuse_volume_bindings(Box::new(move |_, _| {
        (counted.fetch_add(1, Ordering::SeqCst) == 0).then(|| "etcd is unhappy".to_owned())
    }));
    let mut s = scheduler(cluster.clone());
    let mut yaml = String::from(CLASSES);
    yaml += &node("n1", "z1");
    yaml += &node("n2", "z1");
    yaml += &local_volume("pv-a", "n1", "10Gi");
    yaml += &local_volume("pv-b", "n2", "10Gi");
    yaml += &claim("data", "local", "5Gi");
    yaml += &pod_with_claim("db-0", "data");
    apply(&mut s, &yaml);
    s.run_until_idle();

    let o = s.outcome("uid-db-0").unwrap().clone();
    assert_eq!(o.attempts, 2, "{o:?}");
    let node = o.node.unwrap();
    assert_eq!(refusals.load(Ordering::SeqCst), 2);
    let storage = s.storage();
    let c = storage.claim("default", "data").unwrap();
    assert_eq!(volume_nodes()[c.volume_name.as_str()], node);
    // The volume not used is free again in the scheduler's view: nothing assumed leaked.
    let other = if c.volume_name == "pv-a" {
        "pv-b"
    } else {
        "pv-a"
    };
    let v = storage.volume(other).unwrap();
    assert_eq!((v.claim_ref, v.phase), (None, VolumePhase::Available));
    assert_eq!(storage.assumed(), (0, 0));
    assert_eq!(cluster.bindings().len(), 1);
}

#[test]
fn a_pod_whose_immediate_claim_is_unbound_waits_for_the_controller() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    let mut yaml = node("n1", "z1");
    yaml += "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: standard}\nprovisioner: csi.example.com\n---\n";
    yaml += &claim("logs", "standard", "1Gi");
    yaml += &pod_with_claim("app", "logs");
    apply(&mut s, &yaml);
    s.run_until_idle();
    let o = s.outcome("uid-app").unwrap().clone();
    assert_eq!(o.node, None);
    assert!(
        o.message
            .contains("pod has unbound immediate PersistentVolumeClaims"),
        "{o:?}"
    );
    // The controller binds it (as a cluster would): the pod is placed.
    let mut bound = s.storage().claim("default", "logs").unwrap();
    bound.volume_name = "pv-logs".into();
    bound.phase = ClaimPhase::Bound;
    bound
        .annotations
        .insert(ANNOTATION_BIND_COMPLETED.into(), "yes".into());
    s.add_or_update_volume(berth_sdk::PersistentVolume {
        name: "pv-logs".into(),
        storage_class_name: "standard".into(),
        capacity_storage: 1 << 30,
        phase: VolumePhase::Bound,
        claim_ref: Some(berth_sdk::ClaimRef {
            namespace: "default".into(),
            name: "logs".into(),
            uid: bound.uid.clone(),
        }),
        ..berth_sdk::PersistentVolume::default()
    });
    s.add_or_update_claim(bound);
    s.run_until_idle();
    assert_eq!(s.outcome("uid-app").unwrap().node.as_deref(), Some("n1"));
    assert!(cluster.bindings().contains_key("uid-app"));
}

fn capacity(name: &str, node: &str, size: &str) -> String {
    format!(
        "apiVersion: storage.k8s.io/v1\nkind: CSIStorageCapacity\nmetadata: {{name: {name}, namespace: kube-system}}\nstorageClassName: fast\nnodeTopology: {{matchLabels: {{kubernetes.io/hostname: {node}}}}}\ncapacity: {size}\n---\n"
    )
}

#[test]
fn a_provisioner_with_no_capacity_on_a_node_is_refused_there_until_a_capacity_event() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    let mut yaml = node("n1", "z1") + &node("n2", "z1");
    yaml += CLASSES;
    yaml += "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: csi.example.com}\nspec: {storageCapacity: true}\n---\n";
    yaml += &claim("data", "fast", "5Gi");
    yaml += &pod_with_claim("app", "data");
    apply(&mut s, &yaml);
    s.run_until_idle();
    let o = s.outcome("uid-app").unwrap().clone();
    assert_eq!(o.node, None);
    assert!(
        o.message
            .contains("2 node(s) did not have enough free storage"),
        "{o:?}"
    );

    // The provisioner publishes a capacity on n2 too small for the claim: the pod is
    // tried again and still fits nowhere.
    apply(&mut s, &capacity("n2-small", "n2", "1Gi"));
    s.run_until_idle();
    assert_eq!(s.outcome("uid-app").unwrap().node, None);
    assert_eq!(s.storage().counts()["CSIStorageCapacity"], 1);

    // Room on n2: the pod lands there, its claim provisioned for n2.
    apply(&mut s, &capacity("n2-big", "n2", "10Gi"));
    s.run_until_idle();
    assert_eq!(s.outcome("uid-app").unwrap().node.as_deref(), Some("n2"));
    let claim = s.storage().claim("default", "data").unwrap();
    assert_eq!(
        claim
            .annotations
            .get(ANNOTATION_SELECTED_NODE)
            .map(String::as_str),
        Some("n2")
    );
    assert!(cluster.bindings().contains_key("uid-app"));
}

/// StorageCapacityScoring (on by default since 1.37): with nodes alike but for their
/// storage, a pod whose claim is to be provisioned goes where the claim would use the
/// smallest share of the class's capacity; VolumeBinding scores it through the
/// default shape (utilization 0 scores 100, 100 scores 0).
#[test]
fn a_claim_to_provision_goes_to_the_node_with_the_most_storage_left() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    let mut yaml = node("n1", "z1") + &node("n2", "z1") + &node("n3", "z1");
    yaml += CLASSES;
    yaml += "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: csi.example.com}\nspec: {storageCapacity: true}\n---\n";
    yaml += &capacity("n1-cap", "n1", "20Gi");
    yaml += &capacity("n2-cap", "n2", "100Gi");
    yaml += &capacity("n3-cap", "n3", "50Gi");
    yaml += &claim("data", "fast", "10Gi");
    yaml += &pod_with_claim("app", "data");
    apply(&mut s, &yaml);
    let (pod, _) = s.waiting_pod("default/app").expect("queued");
    let pod = pod.clone();
    let seen = s
        .explain(&pod, &berth::framework::ExplainOptions::default())
        .expect("explained");
    let volume_scores: BTreeMap<&str, i64> = seen
        .nodes
        .iter()
        .map(|n| {
            let score = n
                .scores
                .iter()
                .find(|e| e.plugin == "VolumeBinding")
                .unwrap_or_else(|| panic!("VolumeBinding scored {}: {n:?}", n.node));
            (n.node.as_str(), score.raw)
        })
        .collect();
    // 10Gi of 20Gi, 100Gi and 50Gi: 50%, 10% and 20% used.
    assert_eq!(
        volume_scores,
        BTreeMap::from([("n1", 50), ("n2", 90), ("n3", 80)])
    );
    s.run_until_idle();
    assert_eq!(s.outcome("uid-app").unwrap().node.as_deref(), Some("n2"));
    assert_eq!(
        s.storage()
            .claim("default", "data")
            .unwrap()
            .annotations
            .get(ANNOTATION_SELECTED_NODE)
            .map(String::as_str),
        Some("n2")
    );
}

#[test]
fn plugins_that_need_volumes_or_host_ports_sit_out_the_cycles_of_pods_without_them() {
    let cluster = Arc::new(MemoryCluster::new());
    let mut s = scheduler(cluster.clone());
    let mut yaml = String::from(CLASSES) + &node("n1", "z1") + &node("n2", "z2");
    yaml += &local_volume("pv-a", "n1", "10Gi");
    yaml += "apiVersion: v1\nkind: Pod\nmetadata: {name: plain, namespace: default, uid: uid-plain}\nspec:\n  containers: [{name: c, image: app, resources: {requests: {cpu: 100m}}}]\n---\n";
    apply(&mut s, &yaml);
    s.run_until_idle();
    assert!(s.outcome("uid-plain").unwrap().node.is_some());
    // The four volume plugins and NodePorts were not called for the plain pod, nor
    // sent it; the others were.
    for plugin in [
        "VolumeBinding",
        "VolumeZone",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "NodePorts",
    ] {
        for point in ["BeginCycle", "PreFilter", "Filter", "Reserve", "PreBind"] {
            assert_eq!(plugin_calls(&s, plugin, point), 0, "{plugin} at {point}");
        }
    }
    assert!(plugin_calls(&s, "NodeResourcesFit", "PreFilter") > 0);
    assert!(plugin_calls(&s, "NodeResourcesFit", "Filter") > 0);

    // A pod with a claim brings the volume plugins in, and VolumeBinding binds it.
    let yaml = claim("data", "local", "5Gi") + &pod_with_claim("db", "data");
    apply(&mut s, &yaml);
    s.run_until_idle();
    assert_eq!(
        s.outcome("uid-db").unwrap().node.as_deref(),
        Some("n1"),
        "the claim's only volume is on n1"
    );
    for plugin in [
        "VolumeBinding",
        "VolumeZone",
        "VolumeRestrictions",
        "NodeVolumeLimits",
    ] {
        assert!(plugin_calls(&s, plugin, "PreFilter") >= 1, "{plugin}");
    }
    assert!(plugin_calls(&s, "VolumeBinding", "Reserve") >= 1);
    assert!(plugin_calls(&s, "VolumeBinding", "PreBind") >= 1);
    assert_eq!(
        plugin_calls(&s, "NodePorts", "PreFilter"),
        0,
        "no host ports yet"
    );
}

/// A pod deleted while its PreBind waits for its volume ends the wait (upstream's
/// `checkBindings` stops once the pod is gone): the binding thread is free at once,
/// not after `bindTimeoutSeconds`, and what Reserve assumed is given back.
#[test]
fn a_pod_deleted_while_its_pre_bind_waits_for_a_volume_ends_the_wait() {
    let cluster = Arc::new(MemoryCluster::new());
    cluster.stall_provisioners(true);
    let mut s = scheduler(cluster.clone());
    let mut yaml = String::from(CLASSES);
    yaml += &node("n1", "z1");
    yaml += &claim("data", "fast", "5Gi");
    yaml += &pod_with_claim("db-0", "data");
    apply(&mut s, &yaml);
    assert!(s.schedule_one());
    // PreBind selected the node for the claim and waits for a provisioner that does
    // not come.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !s
        .storage()
        .cluster_claim("default", "data")
        .is_some_and(|c| c.annotations.contains_key(ANNOTATION_SELECTED_NODE))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "PreBind never selected a node"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(s.bindings_in_flight(), 1);

    s.delete_pod("uid-db-0");
    // The default bindTimeoutSeconds is 600: a wait that did not end would hold the
    // binding thread far past this.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while s.bindings_in_flight() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the binding cycle of a deleted pod still waits for its volume"
        );
        s.poll(std::time::Duration::ZERO);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(cluster.bindings().is_empty(), "{:?}", cluster.bindings());
    assert_eq!(s.outcome("uid-db-0"), None);
    assert!(s.is_quiet());
    assert_eq!(s.storage().assumed(), (0, 0));
}

/// 64 pods whose PreBind waits for volumes that are not provisioned yet do not hold
/// up the binds of 500 others: with 32 binding threads, each waiting binding cycle
/// lets another thread take its place. Once the provisioner is back, the 64 are
/// bound too, and nothing is left waiting.
#[test]
fn binding_cycles_waiting_for_volumes_do_not_hold_up_other_binds() {
    use berth::cluster::Binder;
    use std::time::{Duration, Instant};
    let cluster = Arc::new(MemoryCluster::new());
    cluster.stall_provisioners(true);
    let options = SchedulerOptions {
        max_attempts: 20,
        parallel_bindings: 32,
        ..SchedulerOptions::default()
    };
    let mut s = Scheduler::new(
        &runtime(),
        &Configuration::default(),
        "<default>",
        &options,
        cluster.clone(),
        Arc::new(VirtualClock::default()),
    )
    .unwrap();
    let mut yaml = String::from(CLASSES);
    for i in 0..4 {
        yaml += &format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}, labels: {{kubernetes.io/hostname: n{i}, topology.kubernetes.io/zone: z1}}}}\nstatus: {{allocatable: {{cpu: '64', memory: 256Gi, pods: '200'}}}}\n---\n"
        );
    }
    // The pods with volumes come first, so that they take the binding threads.
    for i in 0..64 {
        yaml += &claim(&format!("data-{i}"), "fast", "1Gi");
        yaml += &pod_with_claim(&format!("db-{i}"), &format!("data-{i}"));
    }
    for i in 0..500 {
        yaml += &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web-{i}, namespace: default, uid: uid-web-{i}}}\nspec:\n  containers: [{{name: c, image: app, resources: {{requests: {{cpu: 100m}}}}}}]\n---\n"
        );
    }
    apply(&mut s, &yaml);
    let bound = |prefix: &str| {
        cluster
            .bindings()
            .values()
            .filter(|(key, _)| key.starts_with(prefix))
            .count()
    };
    let until = |s: &mut Scheduler, what: &str, done: &dyn Fn(&Scheduler) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            while s.schedule_one() {
                s.poll(Duration::ZERO);
            }
            s.poll(Duration::ZERO);
            if done(s) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    // bindTimeoutSeconds is 600: binds held up by the waits would not come in time.
    // The binding cycles of the 500 end, taken in by the loop, while the 64 wait
    // (each having selected a node for its claim).
    until(&mut s, "the binds of the other pods were held up", &|s| {
        bound("default/web-") == 500
            && s.bindings_in_flight() == 64
            && (0..64).all(|i| {
                s.storage()
                    .cluster_claim("default", &format!("data-{i}"))
                    .is_some_and(|c| c.annotations.contains_key(ANNOTATION_SELECTED_NODE))
            })
    });
    assert_eq!(bound("default/db-"), 0);

    // The provisioner is back: each claim gets its volume on the node selected for
    // it, and the waiting binding cycles go on.
    cluster.stall_provisioners(false);
    for i in 0..64 {
        let name = format!("data-{i}");
        let claim = s.storage().cluster_claim("default", &name).unwrap();
        let node = claim.annotations[ANNOTATION_SELECTED_NODE].clone();
        cluster
            .select_node_for_claim("default", &name, &node)
            .unwrap();
    }
    until(&mut s, "the pods with volumes were not bound", &|s| {
        bound("default/db-") == 64 && s.bindings_in_flight() == 0
    });
    for i in 0..64 {
        let o = s.outcome(&format!("uid-db-{i}")).unwrap();
        let c = s.storage().claim("default", &format!("data-{i}")).unwrap();
        assert_eq!(c.phase, ClaimPhase::Bound, "{c:?}");
        assert_eq!(
            c.annotations.get(ANNOTATION_SELECTED_NODE),
            o.node.as_ref(),
            "{o:?}"
        );
    }
    assert!(s.is_quiet());
    assert_eq!(s.storage().assumed(), (0, 0));
}
