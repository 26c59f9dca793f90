//! The dynamic resource allocation objects of upstream's DRA workloads
//! (`test/integration/scheduler_perf/dra/performance-config.yaml`): the test driver's
//! devices (its `createResourceDriver` op: one ResourceSlice per node with the driver,
//! `maxClaimsPerNode` devices in it), the DeviceClass that selects them, a
//! ResourceClaimTemplate in each namespace that pods take one device from, and the
//! claims allocated before measuring without a pod (`allocResourceClaims`); for
//! `dra/extendedresource/performance-config.yaml`, DeviceClasses that each back an
//! extended resource instead of the class and the templates.

use super::{BenchError, Size};
use crate::cluster::dra::DraChange;
use crate::cluster::manifest::{self, Object};
use crate::scheduler::Scheduler;
use berth_sdk::Pod;
use berth_sdk::affinity::{NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm};
use berth_sdk::dra::{
    AllocationResult, DeviceClass, DeviceId, DeviceRequestAllocationResult, ResourceClaim,
    ResourceSlice,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

/// The test driver's name.
pub const DRIVER: &str = "test-driver.cdi.k8s.io";

/// The namespace of the claims allocated before measuring.
pub const INIT_CLAIMS_NAMESPACE: &str = "init";

// upstream's `templates/deviceclass.yaml`.
const DEVICE_CLASS: &str = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: test-class}
spec:
  selectors:
  - cel: {expression: 'device.driver == "test-driver.cdi.k8s.io"'}
"#;

// upstream's `templates/resourceclaimtemplate.yaml` with its one request.
const CLAIM_TEMPLATE: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: test-claim-template}
spec:
  spec:
    devices:
      requests:
      - name: req-0
        exactly: {deviceClassName: test-class}
"#;

// upstream's `templates/resourceclaim.yaml`; each copy is named `test-claim-<i>`.
const CLAIM: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: test-claim}
spec:
  devices:
    requests:
    - name: req-0
      exactly: {deviceClassName: test-class}
"#;

/// How much of the devices claims hold before measuring, with no pod (upstream's
/// `initClaims`, which its steady-state sizes set to none, half the devices, or all
/// but room for the pods pending at once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Held {
    /// None (upstream's `empty_*` sizes).
    #[default]
    Empty,
    /// Half the devices (`half_*`).
    Half,
    /// All but one device per pod pending at once (`full_*`: "the cluster can
    /// accommodate exactly 10 additional pods").
    Full,
}

/// The devices of a workload's size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Devices {
    /// Nodes without devices, created first (upstream's `nodesWithoutDRA`); the
    /// size's other nodes have the driver's.
    pub plain_nodes: usize,
    /// Devices on each node with the driver's (upstream's `maxClaimsPerNode`); 0 for
    /// a workload without dynamic resources.
    pub per_node: usize,
    /// What claims hold before measuring.
    pub held: Held,
    /// DeviceClasses `test-class-<i>` selecting the driver's devices, each backing the
    /// extended resource `example.com/gpu-<i>` (upstream's `classes`, in
    /// SchedulingWithExtendedResource), which the pods ask for instead of claims; 0
    /// for the one class `test-class` that the claim templates name.
    pub classes: usize,
}

impl Devices {
    /// No devices: a workload without dynamic resources.
    pub const NONE: Devices = Devices {
        plain_nodes: 0,
        per_node: 0,
        held: Held::Empty,
        classes: 0,
    };
}

impl Size {
    /// Nodes with the driver's devices.
    pub fn device_nodes(&self) -> usize {
        if self.devices.per_node == 0 {
            0
        } else {
            self.nodes.saturating_sub(self.devices.plain_nodes)
        }
    }

    /// Claims allocated before measuring (upstream's `initClaims`).
    pub fn init_claims(&self) -> usize {
        let devices = self.device_nodes() * self.devices.per_node;
        match self.devices.held {
            Held::Empty => 0,
            Held::Half => devices / 2,
            Held::Full => devices.saturating_sub(self.measure_pods),
        }
    }
}

fn object(text: &str) -> Result<Object, BenchError> {
    let docs = manifest::load_str("<bench DRA template>", text)?;
    docs.into_iter()
        .next()
        .map(|d| d.object)
        .ok_or(BenchError::TemplateNotA("manifest"))
}

/// The ResourceSlice upstream's `createResourceDriver` publishes for `node`: one pool
/// named after the node, `count` devices `instance-<i>` with the attributes and
/// capacity upstream gives them.
fn slice(node: &str, count: usize) -> Result<ResourceSlice, BenchError> {
    let mut text = format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node}}}\nspec:\n  driver: {DRIVER}\n  nodeName: {node}\n  pool: {{name: {node}, resourceSliceCount: 1}}\n  devices:\n"
    );
    for i in 0..count {
        text.push_str(&format!(
            "  - name: instance-{i}\n    attributes:\n      model: {{string: A100}}\n      family: {{string: GPU}}\n      driverVersion: {{version: 1.2.3}}\n      dra.example.com/numa: {{int: {i}}}\n    capacity:\n      memory: {{value: 1Gi}}\n"
        ));
    }
    match object(&text)? {
        Object::ResourceSlice(s) => Ok(s),
        _ => Err(BenchError::TemplateNotA("ResourceSlice")),
    }
}

/// The extended resource DeviceClass `test-class-<i>` backs.
pub fn extended_resource(i: usize) -> String {
    format!("example.com/gpu-{i}")
}

/// upstream's `templates/deviceclass-extended-resource.yaml` of index `i`: the class
/// `test-class-<i>`, the test driver's devices, backing [`extended_resource`] `i`.
fn extended_resource_class(i: usize) -> Result<DeviceClass, BenchError> {
    let text = format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: test-class-{i}}}\nspec:\n  selectors:\n  - cel: {{expression: 'device.driver == \"{DRIVER}\"'}}\n  extendedResourceName: {}\n",
        extended_resource(i)
    );
    match object(&text)? {
        Object::DeviceClass(c) => Ok(c),
        _ => Err(BenchError::TemplateNotA("DeviceClass")),
    }
}

/// Puts a DRA workload's objects into the scheduler: a slice for each node from
/// the size's first with devices on (`nodes` names every node); the DeviceClass and
/// the claim template in each of `namespaces`, or the classes backing extended
/// resources when the size has them (and then no template); and the claims allocated
/// before measuring, each on a node picked at random (seeded) among those with a free
/// device, as upstream's `allocResourceClaims` does. Answers the claims allocated.
pub(super) fn install(
    s: &mut Scheduler,
    size: Size,
    nodes: &[String],
    namespaces: &[&str],
    seed: u64,
) -> Result<usize, BenchError> {
    let with_devices = &nodes[size.devices.plain_nodes.min(nodes.len())..];
    for node in with_devices {
        s.apply_dra(DraChange::Slice(slice(node, size.devices.per_node)?));
    }
    if size.devices.classes > 0 {
        for i in 0..size.devices.classes {
            s.apply_dra(DraChange::Class(extended_resource_class(i)?));
        }
        return Ok(0);
    }
    match object(DEVICE_CLASS)? {
        Object::DeviceClass(c) => s.apply_dra(DraChange::Class(c)),
        _ => return Err(BenchError::TemplateNotA("DeviceClass")),
    }
    let Object::ResourceClaimTemplate(template) = object(CLAIM_TEMPLATE)? else {
        return Err(BenchError::TemplateNotA("ResourceClaimTemplate"));
    };
    for ns in namespaces {
        let mut t = template.clone();
        t.namespace = (*ns).to_owned();
        s.apply_dra(DraChange::Template(t));
    }
    let count = size.init_claims();
    if count == 0 {
        return Ok(0);
    }
    let Object::ResourceClaim(claim) = object(CLAIM)? else {
        return Err(BenchError::TemplateNotA("ResourceClaim"));
    };
    // Devices taken on each node: the allocator gives a claim the first free device
    // of the node's pool, and these take them in order.
    let mut taken = vec![0usize; with_devices.len()];
    let mut free: Vec<usize> = (0..with_devices.len()).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..count {
        if free.is_empty() {
            return Err(BenchError::DevicesFull { claims: count });
        }
        let pick = rng.random_range(0..free.len());
        let n = free[pick];
        let node = &with_devices[n];
        let mut c = claim.clone();
        c.namespace = INIT_CLAIMS_NAMESPACE.to_owned();
        c.name = format!("test-claim-{i}");
        c.uid = format!("{INIT_CLAIMS_NAMESPACE}-test-claim-{i}");
        c.resource_version = "1".to_owned();
        c.status.allocation = Some(allocation(node, taken[n]));
        s.apply_dra(DraChange::Claim(c));
        taken[n] += 1;
        if taken[n] == size.devices.per_node {
            free.swap_remove(pick);
        }
    }
    Ok(count)
}

/// The allocation the structured allocator gives a claim of one request that takes
/// device `instance-<device>` of `node`'s pool: the device, reachable from that node
/// only.
fn allocation(node: &str, device: usize) -> AllocationResult {
    AllocationResult {
        devices: vec![DeviceRequestAllocationResult {
            request: "req-0".to_owned(),
            driver: DRIVER.to_owned(),
            pool: node.to_owned(),
            device: format!("instance-{device}"),
            admin_access: None,
            tolerations: Vec::new(),
            binding_conditions: Vec::new(),
            binding_failure_conditions: Vec::new(),
            share_id: None,
            consumed_capacity: BTreeMap::new(),
        }],
        config: Vec::new(),
        node_selector: Some(vec![NodeSelectorTerm {
            match_expressions: Vec::new(),
            match_fields: vec![NodeSelectorRequirement {
                key: "metadata.name".to_owned(),
                operator: NodeSelectorOperator::In,
                values: vec![node.to_owned()],
            }],
        }]),
        allocation_timestamp_ms: None,
    }
}

/// Makes a pod's claims from its templates, as the embedded cluster's resourceclaim
/// controller does, and puts them into the scheduler; the pod records them.
pub(super) fn make_claims(s: &mut Scheduler, pod: &mut Pod) -> Result<(), BenchError> {
    if pod.resource_claims.is_empty() || s.make_claims_from_templates(pod) {
        return Ok(());
    }
    Err(BenchError::NoTemplate { pod: pod.key() })
}

/// The devices the claims made for `pod` were given: those made from its templates
/// and the one made for its extended resources (annotated as such, the pod its
/// controller).
pub(super) fn devices_of(s: &Scheduler, pod: &Pod) -> Vec<DeviceId> {
    let dra = s.dra();
    pod.resource_claim_statuses
        .iter()
        .filter_map(|st| st.resource_claim_name.as_ref())
        .filter_map(|name| dra.claim(&pod.namespace, name))
        .chain(dra.extended_claim(&pod.namespace, &pod.uid))
        .flat_map(|c| allocated_devices(&c))
        .collect()
}

fn allocated_devices(c: &ResourceClaim) -> Vec<DeviceId> {
    c.status
        .allocation
        .iter()
        .flat_map(|a| {
            a.devices
                .iter()
                .map(DeviceRequestAllocationResult::device_id)
        })
        .collect()
}

/// What is wrong with the devices the cluster's claims hold now: a device held by two
/// claims, a device that does not exist (beyond `per_node` on its node). Empty when
/// all is well.
pub(super) fn device_conflicts(s: &Scheduler, per_node: usize) -> Vec<String> {
    let mut holders: BTreeMap<DeviceId, Vec<String>> = BTreeMap::new();
    for c in s.dra().allocated_claims() {
        for d in allocated_devices(&c) {
            holders.entry(d).or_default().push(c.key());
        }
    }
    let exists = |d: &DeviceId| {
        d.driver == DRIVER
            && d.device
                .strip_prefix("instance-")
                .and_then(|i| i.parse::<usize>().ok())
                .is_some_and(|i| i < per_node)
    };
    holders
        .into_iter()
        .filter(|(d, claims)| claims.len() > 1 || !exists(d))
        .map(|(d, claims)| {
            format!(
                "device {}/{}/{} held by {}",
                d.driver,
                d.pool,
                d.device,
                claims.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{Workload, find};

    /// A size's name, nodes with devices, nodes without, devices per node and claims
    /// held before measuring.
    type Shape = (&'static str, usize, usize, usize, usize);

    fn sizes(w: &str) -> (&'static Workload, Vec<Shape>) {
        let (w, sizes) = find(w).unwrap();
        let shape = sizes
            .iter()
            .map(|s| {
                (
                    s.name,
                    s.device_nodes(),
                    s.devices.plain_nodes,
                    s.devices.per_node,
                    s.init_claims(),
                )
            })
            .collect();
        (w, shape)
    }

    #[test]
    fn the_dra_workloads_have_upstreams_sizes() {
        let (w, shape) = sizes("SchedulingWithResourceClaimTemplate");
        assert_eq!(
            shape,
            [
                ("fast", 1, 1, 10, 0),
                ("2000pods_100nodes", 100, 0, 20, 0),
                ("2000pods_200nodes", 200, 0, 10, 0),
                ("5000pods_500nodes", 500, 0, 10, 0),
            ]
        );
        let pods: Vec<(usize, usize)> = w
            .sizes
            .iter()
            .map(|s| (s.init_pods, s.measure_pods))
            .collect();
        assert_eq!(pods, [(0, 10), (1000, 1000), (1000, 1000), (2500, 2500)]);
        assert!(w.sizes.iter().all(|s| s.steady.is_none()));

        assert!(w.sizes.iter().all(|s| s.devices.classes == 0));

        // upstream's `dra/extendedresource`: a class per pod index, no claim template.
        let (w, shape) = sizes("SchedulingWithExtendedResource");
        assert_eq!(
            shape,
            [
                ("fast", 1, 1, 10, 0),
                ("2000pods_100nodes", 100, 0, 10, 0),
                ("5000pods_500nodes", 500, 0, 10, 0),
            ]
        );
        let pods: Vec<(usize, usize, usize)> = w
            .sizes
            .iter()
            .map(|s| (s.devices.classes, s.init_pods, s.measure_pods))
            .collect();
        assert_eq!(pods, [(10, 0, 10), (1000, 1000, 1000), (2500, 2500, 2500)]);
        assert!(w.sizes.iter().all(|s| s.steady.is_none()));
        // Every pod's index has its class: the initial and the measured pods count
        // from 0 each.
        assert!(
            w.sizes
                .iter()
                .all(|s| s.devices.classes >= s.init_pods.max(s.measure_pods))
        );

        let (w, shape) = sizes("SteadyStateClusterResourceClaimTemplate");
        // upstream's initClaims: 0, 500, 990 at 100 nodes; 0, 1000, 1990 at 200; 0,
        // 2500, 4990 at 500.
        assert_eq!(
            shape,
            [
                ("fast", 1, 1, 10, 0),
                ("empty_100nodes", 100, 0, 10, 0),
                ("empty_200nodes", 200, 0, 10, 0),
                ("empty_500nodes", 500, 0, 10, 0),
                ("half_100nodes", 100, 0, 10, 500),
                ("half_200nodes", 200, 0, 10, 1000),
                ("half_500nodes", 500, 0, 10, 2500),
                ("full_100nodes", 100, 0, 10, 990),
                ("full_200nodes", 200, 0, 10, 1990),
                ("full_500nodes", 500, 0, 10, 4990),
            ]
        );
        // Ten pods pending at a time, for 2 s (fast) or 10 s.
        let steady: Vec<(usize, u64)> = w
            .sizes
            .iter()
            .map(|s| (s.measure_pods, s.steady.unwrap().as_secs()))
            .collect();
        assert_eq!(steady[0], (10, 2));
        assert!(steady[1..].iter().all(|&x| x == (10, 10)), "{steady:?}");
        assert!(w.sizes.iter().all(|s| s.devices.classes == 0));
    }

    #[test]
    fn an_extended_resource_class_backs_the_resource_of_its_index() {
        let c = extended_resource_class(7).unwrap();
        assert_eq!(c.name, "test-class-7");
        assert_eq!(
            c.extended_resource_name.as_deref(),
            Some("example.com/gpu-7")
        );
        assert_eq!(c.selectors.len(), 1);
        let classes = [extended_resource_class(0).unwrap(), c];
        let backed = berth_sdk::dra::extended_resource_classes(&classes);
        assert_eq!(
            backed.get("example.com/gpu-7").map(String::as_str),
            Some("test-class-7")
        );
    }

    #[test]
    fn a_node_s_slice_has_upstreams_devices() {
        let s = slice("node-3", 2).unwrap();
        assert_eq!((s.name.as_str(), s.driver.as_str()), ("node-3", DRIVER));
        assert_eq!(s.pool.name, "node-3");
        assert_eq!(s.pool.resource_slice_count, 1);
        assert_eq!(
            s.nodes,
            berth_sdk::dra::SliceNodes::NodeName("node-3".into())
        );
        let names: Vec<&str> = s.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["instance-0", "instance-1"]);
        let d = &s.devices[1];
        assert_eq!(
            d.attributes["dra.example.com/numa"],
            berth_sdk::dra::DeviceAttribute::Int(1)
        );
        assert_eq!(
            d.attributes["driverVersion"],
            berth_sdk::dra::DeviceAttribute::Version("1.2.3".into())
        );
        assert_eq!(d.capacity["memory"].value.to_string(), "1Gi");
        assert!(d.binding_conditions.is_empty());
    }
}
