//! Random clusters and one pending pod, seeded: what the default profile's plugins
//! read, in the shapes an API server stores (the generator writes what admission and
//! defaulting leave, so that a case means the same to Berth and to the oracle).

use serde_json::{Map, Value, json};

/// SplitMix64: small, seedable, the same on every platform and release.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.range(0, items.len() as u64 - 1) as usize]
    }
}

/// One generated case: the documents of a cluster file and the pending pod to
/// explain (`namespace/name`).
#[derive(Clone, Debug)]
pub struct Case {
    /// The seed it was generated from.
    pub seed: u64,
    /// The manifests, in the order they are written.
    pub docs: Vec<Value>,
    /// The pod explained.
    pub pod: String,
}

impl Case {
    /// The cluster file's text: one JSON document per `---`, which YAML readers
    /// (Berth's and the Go one's) both take.
    pub fn to_file_text(&self) -> String {
        let mut out = format!(
            "# differential case, seed {}; pod {}\n",
            self.seed, self.pod
        );
        for d in &self.docs {
            out.push_str("---\n");
            out.push_str(&serde_json::to_string(d).expect("JSON"));
            out.push('\n');
        }
        out
    }
}

/// A manifest's `namespace/name` (`default` when it names no namespace).
pub fn key_of(doc: &Value) -> String {
    format!(
        "{}/{}",
        doc["metadata"]["namespace"].as_str().unwrap_or("default"),
        doc["metadata"]["name"].as_str().unwrap_or_default()
    )
}

impl Case {
    /// Whether the case is one an API server could hold, the way the generator
    /// writes it (the shrinker keeps to these): one pending pod, every pod has a
    /// container and its claims' names, every
    /// node states how many pods it takes (where Berth deliberately assumes the
    /// kubelet's 110 for a manifest that says nothing, upstream reads 0; see the
    /// book's differences page, docs/src/operators/differences.md).
    pub fn is_valid(&self) -> bool {
        self.docs.iter().all(|d| match d["kind"].as_str() {
            // One pending pod, the one explained: the others stay on their nodes.
            Some("Pod")
                if d["spec"]["nodeName"].as_str().is_none_or(str::is_empty)
                    && key_of(d) != self.pod =>
            {
                false
            }
            Some("Pod") => {
                d["spec"]["containers"]
                    .as_array()
                    .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c.get("name").is_some()))
                    && d["spec"]["volumes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .all(|v| {
                            v.get("persistentVolumeClaim")
                                .is_none_or(|c| c["claimName"].is_string())
                        })
            }
            Some("Node") => {
                d["status"]["allocatable"]["pods"].is_string()
                    && d["status"]["images"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .all(|i| i["sizeBytes"].is_u64() && i["names"].is_array())
            }
            _ => true,
        })
    }
}

const ZONES: &[&str] = &["zone-a", "zone-b", "zone-c"];
const APPS: &[&str] = &["web", "db", "cache"];
const IMAGES: &[&str] = &[
    "nginx:1.27",
    "redis",
    "registry.k8s.io/pause:3.10",
    "docker.io/library/busybox:1.36",
    "quay.io/example/big:2",
];
const NAMESPACES: &[&str] = &["default", "team-a"];
const HOST_PORTS: &[u64] = &[80, 8080, 9090];
const GPU: &str = "example.com/gpu";
const GPU_DRIVER: &str = "gpu.example.com";
const GPU_CLASS: &str = "gpu.example.com";
const MODELS: &[&str] = &["a100", "h100", "l4"];

const CSI_DRIVER: &str = "csi.example.com";

/// Storage the default plugins read, and the incoming pod's volumes: classes bound
/// at once and at first consumer, local PersistentVolumes pinned to a node, zonal
/// CSI volumes, CSINodes with attach limits, claims bound, unbound and
/// ReadWriteOncePod (some held by running pods).
fn volumes(r: &mut Rng, ns: &str, nodes: &[String], docs: &mut Vec<Value>, pod: &mut Value) {
    docs.push(
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "immediate"}, "provisioner": CSI_DRIVER,
        "volumeBindingMode": "Immediate"}),
    );
    docs.push(
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    docs.push(
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": CSI_DRIVER}, "spec": {"attachRequired": true}}),
    );
    for n in nodes {
        if r.chance(0.5) {
            docs.push(json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                "metadata": {"name": n},
                "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": n,
                    "allocatable": {"count": r.range(0, 2)}}]}}));
        }
    }
    let pick_node = |r: &mut Rng| nodes[r.range(0, nodes.len() as u64 - 1) as usize].clone();
    let mut claims: Vec<String> = Vec::new();
    // Local volumes for claims bound at first consumer.
    for k in 0..r.range(0, 3) {
        let node = pick_node(r);
        docs.push(json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": format!("local-{k}")},
            "spec": {"capacity": {"storage": r.pick(&["1Gi", "5Gi"])}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local", "local": {"path": format!("/mnt/disk{k}")},
                "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem",
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
            "status": {"phase": "Available"}}));
    }
    if r.chance(0.7) {
        docs.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "local-data", "namespace": ns, "uid": "uid-local-data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                "volumeMode": "Filesystem",
                "resources": {"requests": {"storage": r.pick(&["1Gi", "2Gi"])}}},
            "status": {"phase": "Pending"}}));
        claims.push("local-data".into());
    }
    // A zonal CSI volume, bound.
    if r.chance(0.6) {
        let zone = r.pick(ZONES);
        let mode = if r.chance(0.3) {
            "ReadWriteOncePod"
        } else {
            "ReadWriteOnce"
        };
        docs.push(json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "zonal", "labels": {"topology.kubernetes.io/zone": zone}},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": [mode],
                "storageClassName": "immediate", "volumeMode": "Filesystem",
                "persistentVolumeReclaimPolicy": "Delete",
                "csi": {"driver": CSI_DRIVER, "volumeHandle": "vol-zonal"},
                "claimRef": {"namespace": ns, "name": "zonal-data", "uid": "uid-zonal-data"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}},
            "status": {"phase": "Bound"}}));
        docs.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "zonal-data", "namespace": ns, "uid": "uid-zonal-data"},
            "spec": {"accessModes": [mode], "storageClassName": "immediate",
                "volumeMode": "Filesystem", "volumeName": "zonal",
                "resources": {"requests": {"storage": "10Gi"}}},
            "status": {"phase": "Bound", "accessModes": [mode], "capacity": {"storage": "10Gi"}}}));
        claims.push("zonal-data".into());
        // Held by a running pod on some node.
        if r.chance(0.4) {
            let node = pick_node(r);
            docs.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "holder", "namespace": ns, "uid": "uid-holder"},
                "spec": {"nodeName": node, "schedulerName": "default-scheduler", "priority": 0,
                    "containers": [{"name": "c", "image": "busybox"}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "zonal-data"}}]},
                "status": {"phase": "Running"}}));
        }
    }
    // A claim of a class bound at once, still unbound.
    if r.chance(0.05) {
        docs.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "pending-data", "namespace": ns, "uid": "uid-pending-data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "immediate",
                "volumeMode": "Filesystem", "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"}}));
        claims.push("pending-data".into());
    }
    let vols: Vec<Value> = claims
        .iter()
        .filter(|_| r.chance(0.8))
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    if !vols.is_empty() {
        pod["spec"]["volumes"] = vols.into();
    }
}

/// A node's ResourceSlice of GPUs, and its devices' names.
fn resource_slice(r: &mut Rng, node: &str) -> (Value, Vec<String>) {
    let mut devices = Vec::new();
    let mut names = Vec::new();
    for d in 0..r.range(1, 4) {
        let name = format!("gpu-{d}");
        let mem = r.pick(&[16u64, 40, 80]);
        devices.push(json!({"name": name,
            "attributes": {"model": {"string": r.pick(MODELS)}, "index": {"int": d}},
            "capacity": {"memory": {"value": format!("{mem}Gi")}}}));
        names.push(name);
    }
    let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {"driver": GPU_DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}});
    (slice, names)
}

/// A CEL selector over the generated devices.
fn device_selector(r: &mut Rng) -> String {
    match r.range(0, 3) {
        0 => format!(
            "device.attributes[\"{GPU_DRIVER}\"].model == \"{}\"",
            r.pick(MODELS)
        ),
        1 => format!(
            "device.capacity[\"{GPU_DRIVER}\"].memory.compareTo(quantity(\"{}Gi\")) >= 0",
            r.pick(&[16, 40, 80])
        ),
        2 => format!(
            "device.attributes[\"{GPU_DRIVER}\"].index < {}",
            r.range(1, 3)
        ),
        _ => format!(
            "device.attributes[\"{GPU_DRIVER}\"].model in [\"{}\", \"{}\"]",
            r.pick(MODELS),
            r.pick(MODELS)
        ),
    }
}

/// The case for `seed`.
pub fn case(seed: u64) -> Case {
    let mut r = Rng::new(seed);
    let mut docs = Vec::new();
    docs.push(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}}));
    docs.push(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a", "team": "a"}}}));
    let n_nodes = r.range(1, 6) as usize;
    let nodes: Vec<String> = (0..n_nodes).map(|i| format!("node-{i}")).collect();
    // An image has one size wherever it is (a kubelet reports the image's size).
    let sizes: Vec<u64> = IMAGES
        .iter()
        .map(|_| r.pick(&[5u64, 30, 200, 900]) * 1024 * 1024)
        .collect();
    for name in &nodes {
        docs.push(node(&mut r, name, &sizes));
    }
    let dra = r.chance(0.2);
    let mut devices: Vec<(String, String)> = Vec::new();
    if dra {
        docs.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": GPU_CLASS},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{GPU_DRIVER}\"")}}]}}));
        for name in &nodes {
            if r.chance(0.7) {
                let (slice, names) = resource_slice(&mut r, name);
                docs.push(slice);
                devices.extend(names.into_iter().map(|d| (name.clone(), d)));
            }
        }
    }
    let n_pods = r.range(0, 8);
    // The host ports in use per node: a kubelet refuses a second pod on a port in
    // use, so no two running pods of a node share one.
    let mut ports_in_use: Vec<(String, Value, Value)> = Vec::new();
    for i in 0..n_pods {
        let on = r
            .pick(&nodes.iter().map(String::as_str).collect::<Vec<_>>())
            .to_owned();
        let mut pod = existing_pod(&mut r, i, &on, &nodes);
        if let Some(c) = pod["spec"]["containers"][0].as_object_mut()
            && let Some(p) = c.get("ports").and_then(|p| p.get(0)).cloned()
        {
            let key = (on.clone(), p["hostPort"].clone(), p["protocol"].clone());
            if ports_in_use.contains(&key) {
                c.remove("ports");
            } else {
                ports_in_use.push(key);
            }
        }
        // A pod on a node with devices may hold one, through a claim allocated to it.
        let free: Vec<usize> = (0..devices.len()).filter(|&d| devices[d].0 == on).collect();
        if !free.is_empty() && r.chance(0.5) {
            let (node, device) = devices.remove(free[r.range(0, free.len() as u64 - 1) as usize]);
            let ns = pod["metadata"]["namespace"].as_str().unwrap().to_owned();
            let claim = format!("claim-pod-{i}");
            docs.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": claim, "namespace": ns, "uid": format!("uid-{claim}")},
                "spec": {"devices": {"requests": [{"name": "gpu",
                    "exactly": {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 1}}]}},
                "status": {
                    "allocation": {
                        "devices": {"results": [{"request": "gpu", "driver": GPU_DRIVER, "pool": node, "device": device}]},
                        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                    "reservedFor": [{"resource": "pods", "name": format!("pod-{i}"), "uid": format!("uid-pod-{i}")}]}}));
            pod["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": claim}]);
            pod["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
        }
        docs.push(pod);
    }
    let ns = r.pick(NAMESPACES);
    let mut pod = incoming_pod(&mut r, ns, &nodes);
    if r.chance(0.25) {
        volumes(&mut r, ns, &nodes, &mut docs, &mut pod);
    }
    if dra && r.chance(0.8) {
        let mut requests = Vec::new();
        for k in 0..r.range(1, 2) {
            let mut exactly = json!({"deviceClassName": GPU_CLASS});
            if r.chance(0.3) {
                exactly["allocationMode"] = "All".into();
            } else {
                exactly["allocationMode"] = "ExactCount".into();
                exactly["count"] = r.range(1, 2).into();
            }
            if r.chance(0.6) {
                exactly["selectors"] = json!([{"cel": {"expression": device_selector(&mut r)}}]);
            }
            requests.push(json!({"name": format!("req-{k}"), "exactly": exactly}));
        }
        docs.push(
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "claim-incoming", "namespace": ns, "uid": "uid-claim-incoming"},
            "spec": {"devices": {"requests": requests}}}),
        );
        pod["spec"]["resourceClaims"] =
            json!([{"name": "gpu", "resourceClaimName": "claim-incoming"}]);
        pod["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    }
    docs.push(pod);
    Case {
        seed,
        docs,
        pod: format!("{ns}/incoming"),
    }
}

fn quantity_cpu(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

fn quantity_mem(mi: u64) -> String {
    if mi.is_multiple_of(1024) {
        format!("{}Gi", mi / 1024)
    } else {
        format!("{mi}Mi")
    }
}

fn node(r: &mut Rng, name: &str, sizes: &[u64]) -> Value {
    let mut labels = Map::new();
    labels.insert("kubernetes.io/hostname".into(), name.into());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    if r.chance(0.85) {
        labels.insert("topology.kubernetes.io/zone".into(), r.pick(ZONES).into());
    }
    if r.chance(0.5) {
        labels.insert("disk".into(), r.pick(&["ssd", "hdd"]).into());
    }
    if r.chance(0.5) {
        labels.insert("tier".into(), r.range(1, 5).to_string().into());
    }
    let mut alloc = Map::new();
    alloc.insert(
        "cpu".into(),
        quantity_cpu(r.pick(&[1000, 2000, 4000, 8000, 16000])).into(),
    );
    alloc.insert(
        "memory".into(),
        quantity_mem(r.pick(&[1024, 2048, 4096, 8192, 16384])).into(),
    );
    alloc.insert(
        "pods".into(),
        r.pick(&[3u64, 8, 110, 110]).to_string().into(),
    );
    if r.chance(0.5) {
        alloc.insert(GPU.into(), r.range(0, 4).to_string().into());
    }
    if r.chance(0.8) {
        alloc.insert(
            "ephemeral-storage".into(),
            r.pick(&["1Gi", "20Gi", "100Gi"]).into(),
        );
    }
    let mut spec = Map::new();
    let mut taints = Vec::new();
    let n_taints = if r.chance(0.6) { 0 } else { r.range(1, 2) };
    for _ in 0..n_taints {
        let effect = r.pick(&["NoSchedule", "PreferNoSchedule", "NoExecute"]);
        let key = r.pick(&["dedicated", "gpu"]);
        if taints
            .iter()
            .any(|t: &Value| t["key"] == key && t["effect"] == effect)
        {
            continue;
        }
        let mut t = json!({"key": key, "effect": effect});
        if r.chance(0.7) {
            t["value"] = r.pick(&["a", "b"]).into();
        }
        taints.push(t);
    }
    if r.chance(0.04) {
        spec.insert("unschedulable".into(), true.into());
        taints.push(json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}));
    }
    if !taints.is_empty() {
        spec.insert("taints".into(), taints.into());
    }
    let mut status = json!({"allocatable": alloc.clone(), "capacity": alloc});
    if r.chance(0.6) {
        let mut images: Vec<Value> = Vec::new();
        for (i, size) in IMAGES.iter().zip(sizes) {
            if r.chance(0.4) {
                images.push(json!({"names": [normalized_image(i)], "sizeBytes": size}));
            }
        }
        if !images.is_empty() {
            status["images"] = images.into();
        }
    }
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels}, "spec": spec, "status": status})
}

/// An image as a kubelet reports it (the registry and tag spelled out).
fn normalized_image(i: &str) -> String {
    let with_tag = if i.rsplit('/').next().is_some_and(|l| l.contains(':')) {
        i.to_owned()
    } else {
        format!("{i}:latest")
    };
    let first = with_tag.split('/').next().unwrap_or_default();
    if !with_tag.contains('/') {
        format!("docker.io/library/{with_tag}")
    } else if first.contains('.') || first.contains(':') {
        with_tag
    } else {
        format!("docker.io/{with_tag}")
    }
}

fn labels(r: &mut Rng) -> Map<String, Value> {
    let mut m = Map::new();
    if r.chance(0.85) {
        m.insert("app".into(), r.pick(APPS).into());
    }
    if r.chance(0.4) {
        m.insert("tier".into(), r.pick(&["front", "back"]).into());
    }
    m
}

fn label_selector(r: &mut Rng) -> Value {
    if r.chance(0.5) {
        json!({"matchLabels": {"app": r.pick(APPS)}})
    } else {
        let key = r.pick(&["app", "tier"]);
        let op = r.pick(&["In", "NotIn", "Exists", "DoesNotExist"]);
        let mut e = json!({"key": key, "operator": op});
        if op == "In" || op == "NotIn" {
            let vals: &[&str] = if key == "app" {
                APPS
            } else {
                &["front", "back"]
            };
            let mut v = vec![r.pick(vals)];
            if r.chance(0.3) {
                let w = r.pick(vals);
                if !v.contains(&w) {
                    v.push(w);
                }
            }
            e["values"] = json!(v);
        }
        json!({"matchExpressions": [e]})
    }
}

fn container(r: &mut Rng, name: &str, big: bool) -> Value {
    let image = r.pick(IMAGES);
    let mut c = json!({"name": name, "image": image});
    let scale = if big { 4 } else { 1 };
    let mut requests = Map::new();
    let mut limits = Map::new();
    match r.range(0, 5) {
        0 => {} // best effort
        1 => {
            // limits only: the API server copies them to requests
            let cpu = quantity_cpu(r.range(1, 12) * 100 * scale);
            let mem = quantity_mem(r.range(1, 8) * 64 * scale);
            requests.insert("cpu".into(), cpu.clone().into());
            requests.insert("memory".into(), mem.clone().into());
            limits.insert("cpu".into(), cpu.into());
            limits.insert("memory".into(), mem.into());
        }
        _ => {
            if r.chance(0.9) {
                requests.insert(
                    "cpu".into(),
                    quantity_cpu(r.range(1, 12) * 100 * scale).into(),
                );
            }
            if r.chance(0.8) {
                requests.insert(
                    "memory".into(),
                    quantity_mem(r.range(1, 8) * 64 * scale).into(),
                );
            }
        }
    }
    if r.chance(0.15) {
        let n = r.range(1, 2).to_string();
        requests.insert(GPU.into(), n.clone().into());
        limits.insert(GPU.into(), n.into());
    }
    if r.chance(0.1) {
        requests.insert("ephemeral-storage".into(), r.pick(&["500Mi", "5Gi"]).into());
    }
    let mut res = Map::new();
    if !requests.is_empty() {
        res.insert("requests".into(), requests.into());
    }
    if !limits.is_empty() {
        res.insert("limits".into(), limits.into());
    }
    c["resources"] = res.into();
    if r.chance(0.2) {
        let port = r.pick(HOST_PORTS);
        let mut p = json!({"containerPort": port, "hostPort": port,
            "protocol": r.pick(&["TCP", "TCP", "UDP"])});
        if r.chance(0.2) {
            p["hostIP"] = "127.0.0.1".into();
        }
        c["ports"] = json!([p]);
    }
    c
}

fn existing_pod(r: &mut Rng, i: u64, node: &str, nodes: &[String]) -> Value {
    let ns = r.pick(NAMESPACES);
    let big = r.chance(0.3);
    let mut spec = json!({
        "nodeName": node,
        "schedulerName": "default-scheduler",
        "containers": [container(r, "c", big)],
    });
    let priority = r.pick(&[0i64, 0, 100, 1000]);
    spec["priority"] = priority.into();
    if r.chance(0.2) {
        let term = affinity_term(r, nodes);
        let kind = if r.chance(0.5) {
            "podAntiAffinity"
        } else {
            "podAffinity"
        };
        if r.chance(0.6) {
            spec["affinity"] =
                json!({kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}});
        } else {
            spec["affinity"] = json!({kind: {"preferredDuringSchedulingIgnoredDuringExecution":
                [{"weight": r.range(1, 100), "podAffinityTerm": term}]}});
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "namespace": ns, "uid": format!("uid-pod-{i}"),
            "labels": labels(r)},
        "spec": spec,
        "status": {"phase": "Running"}})
}

fn affinity_term(r: &mut Rng, _nodes: &[String]) -> Value {
    let key = if r.chance(0.5) {
        "kubernetes.io/hostname"
    } else {
        "topology.kubernetes.io/zone"
    };
    let mut t = json!({"topologyKey": key, "labelSelector": label_selector(r)});
    match r.range(0, 5) {
        0 => t["namespaces"] = json!([r.pick(NAMESPACES)]),
        1 => t["namespaceSelector"] = json!({"matchLabels": {"team": "a"}}),
        2 => t["namespaceSelector"] = json!({}),
        _ => {}
    }
    t
}

fn node_selector_requirement(r: &mut Rng, nodes: &[String]) -> Value {
    let key = r.pick(&[
        "topology.kubernetes.io/zone",
        "disk",
        "tier",
        "kubernetes.io/hostname",
    ]);
    let op = if key == "tier" {
        r.pick(&["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    } else {
        r.pick(&["In", "NotIn", "Exists", "DoesNotExist"])
    };
    let mut e = json!({"key": key, "operator": op});
    match op {
        "Gt" | "Lt" => e["values"] = json!([r.range(1, 5).to_string()]),
        "In" | "NotIn" => {
            let v: String = match key {
                "topology.kubernetes.io/zone" => r.pick(ZONES).into(),
                "disk" => r.pick(&["ssd", "hdd"]).into(),
                "tier" => r.range(1, 5).to_string(),
                _ => nodes[r.range(0, nodes.len() as u64 - 1) as usize].clone(),
            };
            e["values"] = json!([v]);
        }
        _ => {}
    }
    e
}

fn node_selector_term(r: &mut Rng, nodes: &[String]) -> Value {
    let mut term = Map::new();
    if r.chance(0.85) {
        let n = r.range(1, 2);
        let exprs: Vec<Value> = (0..n)
            .map(|_| node_selector_requirement(r, nodes))
            .collect();
        term.insert("matchExpressions".into(), exprs.into());
    }
    if term.is_empty() || r.chance(0.1) {
        let node = nodes[r.range(0, nodes.len() as u64 - 1) as usize].clone();
        term.insert(
            "matchFields".into(),
            json!([{"key": "metadata.name", "operator": r.pick(&["In", "NotIn"]), "values": [node]}]),
        );
    }
    term.into()
}

fn incoming_pod(r: &mut Rng, ns: &str, nodes: &[String]) -> Value {
    // Half the pods ask for little, so that many fit somewhere and are scored.
    let light = r.chance(0.5);
    let k = if light { 0.3 } else { 1.0 };
    let big = r.chance(0.3 * k);
    let n_containers = r.range(1, 2);
    let containers: Vec<Value> = (0..n_containers)
        .map(|i| container(r, &format!("c{i}"), big))
        .collect();
    let mut spec = json!({"schedulerName": "default-scheduler", "containers": containers,
        "priority": r.pick(&[0i64, 0, 500, 2000])});
    if r.chance(0.25 * k) {
        let mut init = container(r, "init", big);
        init.as_object_mut().unwrap().remove("ports");
        if r.chance(0.4) {
            init["restartPolicy"] = "Always".into();
        }
        spec["initContainers"] = json!([init]);
    }
    if r.chance(0.1 * k) {
        let cpu = quantity_cpu(r.range(2, 20) * 100);
        let mem = quantity_mem(r.range(2, 16) * 64);
        spec["resources"] = json!({"requests": {"cpu": cpu, "memory": mem},
            "limits": {"cpu": cpu, "memory": mem}});
    }
    if r.chance(0.25 * k) {
        let mut sel = Map::new();
        if r.chance(0.6) {
            sel.insert("topology.kubernetes.io/zone".into(), r.pick(ZONES).into());
        } else {
            sel.insert("disk".into(), r.pick(&["ssd", "hdd"]).into());
        }
        spec["nodeSelector"] = sel.into();
    }
    let mut affinity = Map::new();
    if r.chance(0.35 * k) {
        let mut na = Map::new();
        if r.chance(0.5) {
            let terms: Vec<Value> = (0..r.range(1, 2))
                .map(|_| node_selector_term(r, nodes))
                .collect();
            na.insert(
                "requiredDuringSchedulingIgnoredDuringExecution".into(),
                json!({"nodeSelectorTerms": terms}),
            );
        }
        if na.is_empty() || r.chance(0.5) {
            let prefs: Vec<Value> = (0..r.range(1, 2))
                .map(|_| {
                    let mut t = node_selector_term(r, nodes);
                    t.as_object_mut().unwrap().remove("matchFields");
                    if t.as_object().unwrap().is_empty() {
                        t = json!({"matchExpressions": [node_selector_requirement(r, nodes)]});
                    }
                    json!({"weight": r.range(1, 100), "preference": t})
                })
                .collect();
            na.insert(
                "preferredDuringSchedulingIgnoredDuringExecution".into(),
                prefs.into(),
            );
        }
        affinity.insert("nodeAffinity".into(), na.into());
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        if r.chance(0.25 * k) {
            let mut pa = Map::new();
            if r.chance(0.5) {
                pa.insert(
                    "requiredDuringSchedulingIgnoredDuringExecution".into(),
                    json!([affinity_term(r, nodes)]),
                );
            }
            if pa.is_empty() || r.chance(0.5) {
                let prefs: Vec<Value> = (0..r.range(1, 2))
                    .map(|_| json!({"weight": r.range(1, 100), "podAffinityTerm": affinity_term(r, nodes)}))
                    .collect();
                pa.insert(
                    "preferredDuringSchedulingIgnoredDuringExecution".into(),
                    prefs.into(),
                );
            }
            affinity.insert(kind.into(), pa.into());
        }
    }
    if !affinity.is_empty() {
        spec["affinity"] = affinity.into();
    }
    if r.chance(0.5 * k) {
        let tols: Vec<Value> = (0..r.range(1, 2))
            .map(|_| {
                let mut t = Map::new();
                if r.chance(0.1) {
                    t.insert("operator".into(), "Exists".into());
                } else {
                    t.insert("key".into(), r.pick(&["dedicated", "gpu"]).into());
                    if r.chance(0.4) {
                        t.insert("operator".into(), "Exists".into());
                    } else {
                        t.insert("operator".into(), "Equal".into());
                        t.insert("value".into(), r.pick(&["a", "b"]).into());
                    }
                }
                if r.chance(0.6) {
                    t.insert(
                        "effect".into(),
                        r.pick(&["NoSchedule", "PreferNoSchedule", "NoExecute"])
                            .into(),
                    );
                }
                Value::Object(t)
            })
            .collect();
        spec["tolerations"] = tols.into();
    }
    if r.chance(0.3 * k) {
        let n = r.range(1, 2);
        let mut keys_used = Vec::new();
        let mut tscs = Vec::new();
        for _ in 0..n {
            let key = r.pick(&["topology.kubernetes.io/zone", "kubernetes.io/hostname"]);
            let when = r.pick(&["DoNotSchedule", "ScheduleAnyway"]);
            if keys_used.contains(&(key, when)) {
                continue;
            }
            keys_used.push((key, when));
            let mut c = json!({"maxSkew": r.range(1, 3), "topologyKey": key,
                "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"app": r.pick(APPS)}}});
            if when == "DoNotSchedule" && r.chance(0.2) {
                c["minDomains"] = r.range(1, 4).into();
            }
            if r.chance(0.3) {
                c["nodeAffinityPolicy"] = r.pick(&["Honor", "Ignore"]).into();
            }
            if r.chance(0.3) {
                c["nodeTaintsPolicy"] = r.pick(&["Honor", "Ignore"]).into();
            }
            tscs.push(c);
        }
        spec["topologySpreadConstraints"] = tscs.into();
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "incoming", "namespace": ns, "uid": "uid-incoming",
            "labels": labels(r)},
        "spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_makes_the_same_case() {
        assert_eq!(case(7).to_file_text(), case(7).to_file_text());
        assert_ne!(case(7).to_file_text(), case(8).to_file_text());
    }

    #[test]
    fn generated_cases_keep_the_rules_the_shrinker_keeps() {
        for seed in 0..500 {
            assert!(case(seed).is_valid(), "seed {seed}");
        }
    }

    #[test]
    fn images_are_spelled_as_a_kubelet_reports_them() {
        assert_eq!(normalized_image("redis"), "docker.io/library/redis:latest");
        assert_eq!(
            normalized_image("registry.k8s.io/pause:3.10"),
            "registry.k8s.io/pause:3.10"
        );
        assert_eq!(
            normalized_image("quay.io/example/big:2"),
            "quay.io/example/big:2"
        );
        assert_eq!(
            normalized_image("nginx:1.27"),
            "docker.io/library/nginx:1.27"
        );
    }
}
