//! Extended resources backed by DRA (upstream's `extendeddynamicresources.go`): a
//! pod asks for `example.com/gpu` (a DeviceClass's `extendedResourceName`) or
//! `deviceclass.resource.kubernetes.io/<class>` in its containers' requests; on a node
//! whose allocatable has none of it (no device plugin advertises it), the scheduler
//! gives the pod devices of the class through one claim of its own, made for the pod
//! in PreBind and recorded in the pod's `status.extendedResourceClaimStatus`.
//!
//! Until then the claim lives in the cycle only, named
//! `<extended-resources>/<pod UID>`: Filter gives it the requests the node needs,
//! Reserve assumes it in the host as any claim, Unreserve restores it.

use berth_sdk::dra::{
    AllocationMode, ControllerReference, DeviceClaim, DeviceRequest, DeviceSubRequest,
    EXTENDED_RESOURCE_CLAIM_ANNOTATION, ResourceClaim, in_memory_extended_claim_name,
};
use berth_sdk::{Container, ContainerExtendedResourceRequest, NodeInfo, Pod, Resources};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What PreFilter found of the pod's extended resources.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ExtendedState {
    /// Each extended resource the pod requests (a name a DeviceClass may back) with
    /// its quantity, and the class that backs it, if any.
    pub requests: BTreeMap<String, (i64, Option<String>)>,
    /// The claim made for them in an earlier attempt, if any: it is stale (its
    /// requests were those of the node that attempt chose), so Filter refuses every
    /// node and PostFilter deletes it, as upstream.
    pub stale: Option<ResourceClaim>,
}

/// Whether a DeviceClass backs any extended resource of `requests` (`backed`: the
/// classes by the resource they back, [`berth_sdk::dra::extended_resource_classes`]).
pub fn backs_any(requests: &Resources, backed: &BTreeMap<String, String>) -> bool {
    requests
        .dra_extended_requests()
        .any(|(name, _)| backed.contains_key(name))
}

impl ExtendedState {
    /// Upstream's `preFilterExtendedResources` for a pod requesting `requests`:
    /// `None` when a class (of `backed`, [`berth_sdk::dra::extended_resource_classes`]) backs none of
    /// its extended resources.
    pub fn of(
        pod: &Pod,
        requests: &Resources,
        backed: &BTreeMap<String, String>,
    ) -> Option<ExtendedState> {
        let requests: BTreeMap<String, (i64, Option<String>)> = requests
            .dra_extended_requests()
            .map(|(name, q)| (name.clone(), (q, backed.get(name).cloned())))
            .collect();
        if !requests.values().any(|(_, class)| class.is_some()) {
            return None;
        }
        let stale = berth_sdk::dra::host::extended_resource_claim(&pod.namespace, &pod.uid);
        Some(ExtendedState { requests, stale })
    }

    /// Upstream's `filterExtendedResources` for one node: the resources the node must
    /// give as devices (backed by a class, none in its allocatable), or the reason
    /// the pod cannot run there (a requested resource neither advertised by the node
    /// nor backed by a class).
    pub fn needs_on(&self, node: &NodeInfo) -> Result<BTreeMap<String, i64>, String> {
        let mut needs = BTreeMap::new();
        for (name, (quantity, class)) in &self.requests {
            let allocatable = node.node.allocatable.scalar.get(name).copied();
            if class.is_some() && allocatable.unwrap_or(0) == 0 {
                needs.insert(name.clone(), *quantity);
            } else if allocatable.is_none() {
                return Err(format!("cannot fit resource {name}"));
            }
        }
        Ok(needs)
    }

    /// The claim for `needs` on one node: in the pod's namespace, named until PreBind
    /// creates it as [`in_memory_extended_claim_name`], annotated, the pod its
    /// controller, with the requests and the mappings of
    /// [`requests_and_mappings`].
    pub fn claim_for(
        &self,
        pod: &Pod,
        needs: &BTreeMap<String, i64>,
    ) -> (ResourceClaim, Vec<ContainerExtendedResourceRequest>) {
        let classes: BTreeMap<&str, &str> = self
            .requests
            .iter()
            .filter_map(|(name, (_, class))| Some((name.as_str(), class.as_deref()?)))
            .collect();
        let resources: BTreeSet<&str> = needs.keys().map(String::as_str).collect();
        let (requests, mappings) = requests_and_mappings(pod, &resources, &classes);
        let claim = ResourceClaim {
            namespace: pod.namespace.clone(),
            name: in_memory_extended_claim_name(&pod.uid),
            annotations: [(
                EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_owned(),
                "true".to_owned(),
            )]
            .into(),
            controller: Some(ControllerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
            }),
            spec: DeviceClaim {
                requests,
                ..DeviceClaim::default()
            },
            ..ResourceClaim::default()
        };
        (claim, mappings)
    }
}

/// Upstream's `createResourceRequestAndMappings`: the request container `index` (of
/// the init containers followed by the containers) needs for `resource`, after what
/// the `reusable` requests (of sidecars and containers that start after it, for a
/// plain init container) already give it, and which requests serve it.
fn request_and_mappings(
    index: usize,
    container: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<DeviceSubRequest>],
) -> (
    Option<DeviceSubRequest>,
    Vec<ContainerExtendedResourceRequest>,
) {
    let mut mappings = Vec::new();
    let wanted = match container.requests.get(resource) {
        Some(&q) if q > 0 => q,
        _ => return (None, mappings),
    };
    let mapping = |request: &str| ContainerExtendedResourceRequest {
        container_name: container.name.clone(),
        resource_name: resource.to_owned(),
        request_name: request.to_owned(),
    };
    let mut given = 0;
    for r in reusable.iter().flatten() {
        given += count(r);
        mappings.push(mapping(&r.name));
        if given >= wanted {
            return (None, mappings);
        }
    }
    // The resource's place among the container's requests, by name.
    let position = container
        .requests
        .keys()
        .position(|k| k == resource)
        .unwrap_or(0);
    let name = format!("container-{index}-request-{position}");
    mappings.push(mapping(&name));
    let request = DeviceSubRequest {
        name,
        device_class_name: class.to_owned(),
        selectors: Vec::new(),
        allocation_mode: AllocationMode::ExactCount(wanted - given),
        admin_access: false,
        tolerations: Vec::new(),
        capacity: Default::default(),
    };
    (Some(request), mappings)
}

fn count(r: &DeviceSubRequest) -> i64 {
    match r.allocation_mode {
        AllocationMode::ExactCount(n) => n,
        AllocationMode::All => 0,
    }
}

/// Upstream's `createRequestsAndMappings`: the device requests of the claim for the
/// pod's extended `resources` (each backed by `classes[resource]`) and which request
/// serves which container. Containers and sidecars run together, so each asks for
/// its own; a plain init container runs alone, reusing the requests of the sidecars
/// and containers after it and asking for the rest, and the init containers of one
/// resource share the largest of their requests. The requests are sorted by name.
pub fn requests_and_mappings(
    pod: &Pod,
    resources: &BTreeSet<&str>,
    classes: &BTreeMap<&str, &str>,
) -> (Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let containers: Vec<&Container> = pod.init_containers.iter().chain(&pod.containers).collect();
    let inits = pod.init_containers.len();
    let short_lived = |i: usize| i < inits && !containers[i].restartable;
    let mut requests: Vec<DeviceSubRequest> = Vec::new();
    let mut mappings = Vec::new();
    for &resource in resources {
        let Some(&class) = classes.get(resource) else {
            continue;
        };
        let mut long_lived: Vec<Option<DeviceSubRequest>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for (i, c) in containers
            .iter()
            .enumerate()
            .filter(|(i, _)| !short_lived(*i))
        {
            let (r, m) = request_and_mappings(i, c, resource, class, &[]);
            long_lived[i] = r;
            long_mappings.extend(m);
        }
        let mut largest: Option<DeviceSubRequest> = None;
        let mut short_names: BTreeSet<String> = BTreeSet::new();
        let mut short_mappings = Vec::new();
        for (i, c) in containers
            .iter()
            .enumerate()
            .filter(|(i, _)| short_lived(*i))
        {
            let (r, m) = request_and_mappings(i, c, resource, class, &long_lived[i..]);
            if let Some(r) = r {
                short_names.insert(r.name.clone());
                if largest.as_ref().is_none_or(|l| count(l) < count(&r)) {
                    largest = Some(r);
                }
            }
            short_mappings.extend(m);
        }
        if let Some(l) = &largest
            && short_names.len() > 1
        {
            short_names.remove(&l.name);
            for m in &mut short_mappings {
                if short_names.contains(&m.request_name) {
                    m.request_name = l.name.clone();
                }
            }
        }
        requests.extend(largest);
        requests.extend(long_lived.into_iter().flatten());
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (
        requests.into_iter().map(DeviceRequest::Exactly).collect(),
        mappings,
    )
}

#[cfg(test)]
mod tests {
    //! The shapes upstream's request and mapping builder distinguishes (containers,
    //! plain init containers reusing later requests, init containers sharing the
    //! largest, sidecars), and the per-node choice of `filterExtendedResources`.

    use super::*;
    use berth_sdk::{Node, ResourceList};

    const GPU: &str = "example.com/gpu";

    fn container(name: &str, gpus: i64, restartable: bool) -> Container {
        let mut requests = ResourceList::new();
        requests.insert("cpu".into(), 100);
        if gpus > 0 {
            requests.insert(GPU.into(), gpus);
        }
        Container {
            name: name.into(),
            requests,
            restartable,
            ..Container::default()
        }
    }

    fn pod(inits: Vec<Container>, containers: Vec<Container>) -> Pod {
        Pod {
            namespace: "default".into(),
            name: "p".into(),
            uid: "u1".into(),
            init_containers: inits,
            containers,
            ..Pod::default()
        }
    }

    /// The requests (name, count) and mappings (container, request) for `GPU`.
    type Plan = (Vec<(String, i64)>, Vec<(String, String)>);

    fn plan(p: &Pod) -> Plan {
        let (requests, mappings) = built(p, &[GPU], &[(GPU, "gpu-class")]);
        (
            requests
                .into_iter()
                .map(|(name, class, n)| {
                    assert_eq!(class, "gpu-class");
                    (name, n)
                })
                .collect(),
            mappings.into_iter().map(|(c, _, r)| (c, r)).collect(),
        )
    }

    fn s(v: &[(&str, i64)]) -> Vec<(String, i64)> {
        v.iter().map(|(a, b)| ((*a).to_owned(), *b)).collect()
    }

    fn m(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn each_container_asks_for_its_own_devices() {
        let p = pod(
            vec![],
            vec![container("a", 1, false), container("b", 2, false)],
        );
        // "cpu" sorts before "example.com/gpu": the resource is the container's
        // request 1.
        assert_eq!(
            plan(&p),
            (
                s(&[("container-0-request-1", 1), ("container-1-request-1", 2)]),
                m(&[
                    ("a", "container-0-request-1"),
                    ("b", "container-1-request-1")
                ])
            )
        );
    }

    #[test]
    fn a_plain_init_container_reuses_the_requests_of_the_containers_after_it() {
        // The init container needs 2; the container after it has 2: nothing more.
        let p = pod(
            vec![container("init", 2, false)],
            vec![container("c", 2, false)],
        );
        assert_eq!(
            plan(&p),
            (
                s(&[("container-1-request-1", 2)]),
                m(&[
                    ("c", "container-1-request-1"),
                    ("init", "container-1-request-1")
                ])
            )
        );
        // It needs 3: one more of its own.
        let p = pod(
            vec![container("init", 3, false)],
            vec![container("c", 2, false)],
        );
        assert_eq!(
            plan(&p),
            (
                s(&[("container-0-request-1", 1), ("container-1-request-1", 2)]),
                m(&[
                    ("c", "container-1-request-1"),
                    ("init", "container-1-request-1"),
                    ("init", "container-0-request-1")
                ])
            )
        );
    }

    #[test]
    fn plain_init_containers_share_the_largest_of_their_requests() {
        let p = pod(
            vec![container("i0", 1, false), container("i1", 3, false)],
            vec![container("c", 0, false)],
        );
        assert_eq!(
            plan(&p),
            (
                s(&[("container-1-request-1", 3)]),
                m(&[
                    ("i0", "container-1-request-1"),
                    ("i1", "container-1-request-1")
                ])
            )
        );
    }

    #[test]
    fn a_sidecar_asks_for_its_own_and_serves_the_init_containers_before_it() {
        let p = pod(
            vec![container("i0", 1, false), container("side", 1, true)],
            vec![container("c", 1, false)],
        );
        assert_eq!(
            plan(&p),
            (
                s(&[("container-1-request-1", 1), ("container-2-request-1", 1)]),
                m(&[
                    ("side", "container-1-request-1"),
                    ("c", "container-2-request-1"),
                    ("i0", "container-1-request-1")
                ])
            )
        );
    }

    /// A container requesting only `items` (upstream's `st.MakePod().Res`).
    fn only(name: &str, items: &[(&str, i64)], restartable: bool) -> Container {
        Container {
            name: name.into(),
            requests: items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            restartable,
            ..Container::default()
        }
    }

    /// The requests and mappings for `resources` with `classes`, as (name, class,
    /// count) and (container, resource, request).
    #[allow(clippy::type_complexity)]
    fn built(
        p: &Pod,
        resources: &[&str],
        classes: &[(&str, &str)],
    ) -> (Vec<(String, String, i64)>, Vec<(String, String, String)>) {
        let resources: BTreeSet<&str> = resources.iter().copied().collect();
        let classes: BTreeMap<&str, &str> = classes.iter().copied().collect();
        let (requests, mappings) = requests_and_mappings(p, &resources, &classes);
        (
            requests
                .into_iter()
                .map(|r| match r {
                    DeviceRequest::Exactly(r) => {
                        (r.name.clone(), r.device_class_name.clone(), count(&r))
                    }
                    other => panic!("{other:?}"),
                })
                .collect(),
            mappings
                .into_iter()
                .map(|m| (m.container_name, m.resource_name, m.request_name))
                .collect(),
        )
    }

    fn r(name: &str, class: &str, n: i64) -> (String, String, i64) {
        (name.into(), class.into(), n)
    }

    fn cer(container: &str, resource: &str, request: &str) -> (String, String, String) {
        (container.into(), resource.into(), request.into())
    }

    const EXT: &str = "example.com/gpu";
    const EXT1: &str = "example.com/gpu1";
    const EXT_INIT: &str = "example.com/gpuinit";
    const IMPLICIT_INIT: &str = "deviceclass.resource.kubernetes.io/classInit";

    #[test]
    fn upstream_s_request_table() {
        // Test_createRequestsAndMappings_requests, case by case.
        let pod1 = pod(vec![], vec![only("con0", &[(EXT, 1), (EXT1, 2)], false)]);
        let pod2 = pod(
            vec![],
            vec![
                only("con0", &[(EXT, 1)], false),
                only("con1", &[(EXT1, 2)], false),
            ],
        );
        let pod_init = pod(
            vec![only("init-con0", &[(EXT_INIT, 2)], false)],
            vec![only("con0", &[(EXT, 1)], false)],
        );
        let pod_init2 = pod(
            vec![
                only("init-con0", &[(EXT_INIT, 1)], false),
                only("init-con1", &[(EXT_INIT, 2)], false),
            ],
            vec![only("con0", &[(EXT, 1)], false)],
        );
        let pod_init3 = pod(
            vec![
                only("init-con0", &[(EXT_INIT, 1)], false),
                only("sidecar-con1", &[(EXT_INIT, 1)], true),
                only("init-con2", &[(EXT_INIT, 2)], false),
            ],
            vec![only("con0", &[(EXT, 1)], false)],
        );
        let map = [(EXT, "class")];
        let map2 = [(EXT, "class"), (EXT1, "class1")];
        let map_init = [(EXT, "class"), (EXT_INIT, "classInit")];
        // "nil"
        assert!(built(&pod1, &[], &[]).0.is_empty());
        // "one resource match"
        assert_eq!(
            built(&pod1, &[EXT], &map).0,
            [r("container-0-request-0", "class", 1)]
        );
        // "one resource match, one resource not match"
        assert_eq!(
            built(&pod1, &[EXT, EXT1], &map).0,
            [r("container-0-request-0", "class", 1)]
        );
        // "two resources match"
        assert_eq!(
            built(&pod1, &[EXT, EXT1], &map2).0,
            [
                r("container-0-request-0", "class", 1),
                r("container-0-request-1", "class1", 2)
            ]
        );
        // "two containers match"
        assert_eq!(
            built(&pod2, &[EXT, EXT1], &map2).0,
            [
                r("container-0-request-0", "class", 1),
                r("container-1-request-0", "class1", 2)
            ]
        );
        // "one init container, one regular container"
        assert_eq!(
            built(&pod_init, &[EXT, EXT_INIT], &map_init).0,
            [
                r("container-0-request-0", "classInit", 2),
                r("container-1-request-0", "class", 1)
            ]
        );
        // "two init containers, one regular container"
        assert_eq!(
            built(&pod_init2, &[EXT, EXT_INIT], &map_init).0,
            [
                r("container-1-request-0", "classInit", 2),
                r("container-2-request-0", "class", 1)
            ]
        );
        // "three init containers, one sidecar, one regular container"
        assert_eq!(
            built(&pod_init3, &[EXT, EXT_INIT], &map_init).0,
            [
                r("container-1-request-0", "classInit", 1),
                r("container-2-request-0", "classInit", 2),
                r("container-3-request-0", "class", 1)
            ]
        );
    }

    #[test]
    fn upstream_s_mapping_table_first_cases() {
        // Test_createRequestsAndMappings_mappings: "one container, two requests" and
        // "one container, one explicit and one implicit request".
        let pod1 = pod(vec![], vec![only("con0", &[(EXT, 1), (EXT1, 2)], false)]);
        assert_eq!(
            built(&pod1, &[EXT, EXT1], &[(EXT, "class"), (EXT1, "class1")]).1,
            [
                cer("con0", EXT, "container-0-request-0"),
                cer("con0", EXT1, "container-0-request-1")
            ]
        );
        let implicit = pod(
            vec![only(
                "init-con0",
                &[(EXT_INIT, 1), (IMPLICIT_INIT, 2)],
                false,
            )],
            vec![],
        );
        assert_eq!(
            built(
                &implicit,
                &[EXT, EXT_INIT, IMPLICIT_INIT],
                &[
                    (EXT, "class"),
                    (EXT_INIT, "classInit"),
                    (IMPLICIT_INIT, "classInit")
                ]
            )
            .1,
            [
                cer("init-con0", IMPLICIT_INIT, "container-0-request-0"),
                cer("init-con0", EXT_INIT, "container-0-request-1")
            ]
        );
    }

    fn node(allocatable: &[(&str, i64)]) -> NodeInfo {
        let mut n = Node {
            name: "n1".into(),
            ..Node::default()
        };
        for (k, v) in allocatable {
            n.allocatable.scalar.insert((*k).to_owned(), *v);
        }
        NodeInfo::new(n)
    }

    #[test]
    fn a_node_gives_as_devices_only_what_it_does_not_advertise() {
        let state = ExtendedState {
            requests: BTreeMap::from([
                (GPU.to_owned(), (2, Some("gpu-class".to_owned()))),
                ("example.com/nic".to_owned(), (1, None)),
            ]),
            stale: None,
        };
        // The device plugin's resource is on the node: nothing for DRA; the unbacked
        // one is checked by NodeResourcesFit.
        assert_eq!(
            state.needs_on(&node(&[(GPU, 4), ("example.com/nic", 1)])),
            Ok(BTreeMap::new())
        );
        // No GPUs advertised: DRA gives them.
        assert_eq!(
            state.needs_on(&node(&[("example.com/nic", 1)])),
            Ok(BTreeMap::from([(GPU.to_owned(), 2)]))
        );
        assert_eq!(
            state.needs_on(&node(&[(GPU, 0), ("example.com/nic", 1)])),
            Ok(BTreeMap::from([(GPU.to_owned(), 2)]))
        );
        // Neither advertised nor backed: the pod cannot fit.
        assert_eq!(
            state.needs_on(&node(&[])),
            Err("cannot fit resource example.com/nic".to_owned())
        );
    }
}
