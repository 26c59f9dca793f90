//! NodePorts: as upstream's `nodeports` plugin, filters out nodes where a host port
//! the pod asks for (same protocol and port, on the same or a wildcard host IP) is
//! already in use.
//!
//! The plugin takes no args.
//!
//! A pod it rejected may fit once a bound pod holding one of its ports goes away, or
//! once a node appears (upstream's `EventsToRegister`).

use berth_sdk::{
    ActionType, ClusterEvent, CycleState, EnqueueExtensions, EventRegistration, EventResource,
    Filter, HostPort, NodeInfo, Object, Plugin, Pod, PreFilter, PreFilterResult, QueueingHint,
    Sign, SignFragment, StateKey, Status, sign,
};

/// The CycleState key of the pod's host ports, written by PreFilter (upstream's key).
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterNodePorts";
/// [`PRE_FILTER_STATE_KEY`] with its value: the pod's host ports.
static PRE_FILTER_STATE: StateKey<Vec<HostPort>> = StateKey::new(PRE_FILTER_STATE_KEY);
/// The reason upstream gives when a wanted host port is taken.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";
/// The host IP that stands for every address of the node.
pub const DEFAULT_BIND_ALL_HOST_IP: &str = "0.0.0.0";
/// The protocol of a port that names none.
pub const DEFAULT_PROTOCOL: &str = "TCP";

/// The plugin.
pub struct NodePorts;

impl Plugin for NodePorts {
    const NAME: &'static str = "NodePorts";
    // PreFilter answers Skip and nothing else acts: a pod without host ports fits every node.
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        &[berth_sdk::PodFeature::HostPorts]
    }
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(NodePorts)
    }

    /// A bound pod deleted (with the hint): it may free a port. A node added (no
    /// hint: a new node has every port free). Ports are immutable, so pod updates
    /// never help; node updates do not free ports either (upstream registers them
    /// only when queueing hints are off, for its preCheck).
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![
            EventRegistration::with_hint(EventResource::AssignedPod, ActionType::DELETE),
            EventRegistration::without_hint(EventResource::Node, ActionType::ADD),
        ])
    }
}

impl NodePorts {
    /// Upstream's `isSchedulableAfterPodDeleted`: Queue when the deleted pod was
    /// bound (or nominated) and held a host port that conflicts with one the pod
    /// wants.
    pub fn is_schedulable_after_pod_deleted(
        &self,
        pod: &Pod,
        old: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let deleted = match old {
            Some(Object::Pod(p)) => p,
            Some(other) => return Err(format!("expected a pod, got {}", other.describe())),
            None => return Err("the event has no deleted pod".into()),
        };
        // A pod that held no node held no port.
        if deleted.node_name.is_empty() && deleted.nominated_node_name.is_empty() {
            return Ok(QueueingHint::QueueSkip);
        }
        // What the node counted as used for the pod (the SDK's `NodeInfo` counts the
        // ports of plain init containers too), so that no port Filter saw taken is
        // missed.
        let freed: Vec<HostPort> = deleted.host_ports().cloned().collect();
        if freed.is_empty() {
            return Ok(QueueingHint::QueueSkip);
        }
        let wanted = pod_host_ports(pod);
        if wanted.iter().any(|p| conflicts(&freed, p)) {
            Ok(QueueingHint::Queue)
        } else {
            Ok(QueueingHint::QueueSkip)
        }
    }
}

impl EnqueueExtensions for NodePorts {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        _new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::AssignedPod if event.actions.intersects(ActionType::DELETE) => {
                self.is_schedulable_after_pod_deleted(pod, old)
            }
            // Not asked with a hint: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

/// The host ports a pod holds while it runs, as upstream's `GetHostPorts`
/// ([`Pod::running_host_ports`]: its containers' and its sidecars'; plain init
/// containers have exited before the containers start).
pub fn pod_host_ports(pod: &Pod) -> Vec<HostPort> {
    pod.running_host_ports().cloned().collect()
}

/// `(ip, protocol)` with upstream's defaults for empty values.
fn sanitized(port: &HostPort) -> (&str, &str) {
    let ip = match port.host_ip.as_str() {
        "" => DEFAULT_BIND_ALL_HOST_IP,
        ip => ip,
    };
    let protocol = match port.protocol.as_str() {
        "" => DEFAULT_PROTOCOL,
        p => p,
    };
    (ip, protocol)
}

/// Whether `wanted` conflicts with a port in `used`, as upstream's
/// `HostPortInfo.CheckConflict`: same protocol and port, and either side binds every
/// address (`0.0.0.0`) or both bind the same one.
pub fn conflicts(used: &[HostPort], wanted: &HostPort) -> bool {
    if wanted.port <= 0 {
        return false;
    }
    let (ip, protocol) = sanitized(wanted);
    used.iter().filter(|u| u.port == wanted.port).any(|u| {
        let (used_ip, used_protocol) = sanitized(u);
        used_protocol == protocol
            && (ip == DEFAULT_BIND_ALL_HOST_IP
                || used_ip == DEFAULT_BIND_ALL_HOST_IP
                || used_ip == ip)
    })
}

/// Whether every wanted port is free on the node.
pub fn fits_ports(wanted: &[HostPort], node: &NodeInfo) -> bool {
    !wanted.iter().any(|p| conflicts(&node.used_ports, p))
}

impl PreFilter for NodePorts {
    fn pre_filter(&self, state: &CycleState, pod: &Pod, _nodes: &[&NodeInfo]) -> PreFilterResult {
        let ports = pod_host_ports(pod);
        // A pod without host ports fits everywhere: Filter need not run.
        if ports.is_empty() {
            return Status::skip().into();
        }
        state.set(&PRE_FILTER_STATE, &ports);
        Status::success().into()
    }
}

impl Filter for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        // As upstream, Filter relies on PreFilter's state rather than recomputing it.
        let Some(wanted) = state.value(&PRE_FILTER_STATE) else {
            return Status::error(format!(
                "reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
            ));
        };
        if fits_ports(&wanted, node) {
            Status::success()
        } else {
            // Preemption can free the port, so the node is only Unschedulable.
            Status::unschedulable(ERR_REASON)
        }
    }
}

impl Sign for NodePorts {
    /// PreFilter reads the host ports the running pod holds ([`pod_host_ports`]);
    /// Filter only what PreFilter stored.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::host_ports(pod)])
    }
}

berth_sdk::export_plugin!(NodePorts: queueing_hint, pre_filter, filter, sign_pod);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Code, Container, MemoryState, Node};

    /// A host port from upstream's test notation `PROTOCOL/IP/PORT`.
    fn port(spec: &str) -> HostPort {
        let parts: Vec<&str> = spec.split('/').collect();
        HostPort {
            protocol: parts[0].into(),
            host_ip: parts[1].into(),
            port: parts[2].parse().unwrap(),
        }
    }

    /// A pod with one container holding these host ports, as upstream's `newPod`.
    fn pod(ports: &[&str]) -> Pod {
        Pod {
            name: "pod".into(),
            containers: vec![Container {
                name: "c".into(),
                ports: ports.iter().map(|p| port(p)).collect(),
                ..Container::default()
            }],
            ..Pod::default()
        }
    }

    #[test]
    fn signs_the_host_ports_the_running_pod_holds() {
        let sign = |p: &Pod| NodePorts.sign_pod(p).unwrap();
        let a = pod(&["TCP/127.0.0.1/8080"]);
        assert_ne!(sign(&a), sign(&pod(&["TCP/127.0.0.1/8081"])));
        assert_ne!(sign(&a), sign(&pod(&["UDP/127.0.0.1/8080"])));
        assert_ne!(sign(&a), sign(&pod(&["TCP/10.0.0.1/8080"])));
        assert_ne!(sign(&a), sign(&pod(&[])));
        // A sidecar's port is held like a container's; a plain init container's is
        // not, and PreFilter then finds no port at all.
        let init = |restartable: bool| Pod {
            init_containers: vec![Container {
                ports: vec![port("TCP/127.0.0.1/8080")],
                restartable,
                ..Container::default()
            }],
            ..Pod::default()
        };
        assert_eq!(sign(&init(true)), sign(&a));
        assert_eq!(sign(&init(false)), sign(&Pod::default()));
        assert_ne!(sign(&init(true)), sign(&init(false)));
        // The order of the ports and what else the pod says do not count.
        let elsewhere = Pod {
            name: "other".into(),
            labels: [("app".to_owned(), "x".to_owned())].into(),
            ..pod(&["UDP/127.0.0.1/53", "TCP/127.0.0.1/8080"])
        };
        assert_eq!(
            sign(&elsewhere),
            sign(&pod(&["TCP/127.0.0.1/8080", "UDP/127.0.0.1/53"]))
        );
    }

    fn node_with(pods: &[Pod]) -> NodeInfo {
        let mut info = NodeInfo::new(Node {
            name: "m1".into(),
            ..Node::default()
        });
        for p in pods {
            info.add_pod(p);
        }
        info
    }

    /// PreFilter then Filter, as upstream's TestNodePorts runs them.
    fn run(incoming: &Pod, node: &NodeInfo) -> (Code, Option<Status>) {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pre = NodePorts.pre_filter(&state, incoming, &[node]);
        if pre.status.code != Code::Success {
            return (pre.status.code, None);
        }
        (
            pre.status.code,
            Some(NodePorts.filter(&state, incoming, node)),
        )
    }

    fn fits(incoming: &[&str], existing: &[&str]) -> bool {
        let (code, status) = run(&pod(incoming), &node_with(&[pod(existing)]));
        assert_eq!(code, Code::Success);
        let status = status.unwrap();
        if !status.is_success() {
            assert_eq!(status, Status::unschedulable(ERR_REASON));
        }
        status.is_success()
    }

    // The cases of upstream's TestNodePorts.
    #[test]
    fn a_pod_without_host_ports_skips_filter() {
        let (code, status) = run(&Pod::default(), &node_with(&[]));
        assert_eq!(code, Code::Skip);
        assert!(status.is_none());
        // Container ports without a host port do not count either.
        let no_host_port = pod(&["TCP/127.0.0.1/0"]);
        assert_eq!(run(&no_host_port, &node_with(&[])).0, Code::Skip);
    }

    #[test]
    fn other_port() {
        assert!(fits(&["UDP/127.0.0.1/8080"], &["UDP/127.0.0.1/9090"]));
    }

    #[test]
    fn same_udp_port() {
        assert!(!fits(&["UDP/127.0.0.1/8080"], &["UDP/127.0.0.1/8080"]));
    }

    #[test]
    fn same_tcp_port() {
        assert!(!fits(&["TCP/127.0.0.1/8080"], &["TCP/127.0.0.1/8080"]));
    }

    #[test]
    fn different_host_ip() {
        assert!(fits(&["TCP/127.0.0.1/8080"], &["TCP/127.0.0.2/8080"]));
    }

    #[test]
    fn different_protocol() {
        assert!(fits(&["UDP/127.0.0.1/8080"], &["TCP/127.0.0.1/8080"]));
    }

    #[test]
    fn second_udp_port_conflict() {
        assert!(!fits(
            &["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"],
            &["UDP/127.0.0.1/8080"]
        ));
    }

    #[test]
    fn first_tcp_port_conflict() {
        assert!(!fits(
            &["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
            &["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"]
        ));
    }

    #[test]
    fn first_tcp_port_conflict_due_to_wildcard_host_ip() {
        assert!(!fits(&["TCP/0.0.0.0/8001"], &["TCP/127.0.0.1/8001"]));
    }

    #[test]
    fn tcp_host_port_conflict_due_to_wildcard_host_ip() {
        assert!(!fits(
            &["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
            &["TCP/127.0.0.1/8001"]
        ));
    }

    #[test]
    fn second_tcp_port_conflict_to_wildcard_host_ip() {
        assert!(!fits(&["TCP/127.0.0.1/8001"], &["TCP/0.0.0.0/8001"]));
    }

    #[test]
    fn second_different_protocol() {
        assert!(fits(&["UDP/127.0.0.1/8001"], &["TCP/0.0.0.0/8001"]));
    }

    #[test]
    fn udp_host_port_conflict_due_to_wildcard_host_ip() {
        assert!(!fits(
            &["UDP/127.0.0.1/8001"],
            &["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"]
        ));
    }

    // Upstream's HostPortInfo sanitizes empty values.
    #[test]
    fn empty_ip_and_protocol_mean_every_address_and_tcp() {
        assert!(!fits(&["//8080"], &["TCP/10.0.0.1/8080"]));
        assert!(!fits(&["TCP/10.0.0.1/8080"], &["/0.0.0.0/8080"]));
        assert!(fits(&["UDP//8080"], &["//8080"]));
    }

    // Upstream's TestPreFilterDisabled.
    #[test]
    fn filter_without_pre_filter_state_is_an_error() {
        let store = MemoryState::default();
        let status = NodePorts.filter(&CycleState::new(&store), &Pod::default(), &node_with(&[]));
        assert_eq!(status.code, Code::Error);
        assert_eq!(
            status.reasons,
            ["reading \"PreFilterNodePorts\" from cycleState: not found"]
        );
    }

    // Upstream's TestGetContainerPorts, and its GetHostPorts for init containers.
    #[test]
    fn host_ports_of_containers_and_sidecars_only() {
        let mut p = pod(&["TCP//8001", "TCP//8002"]);
        p.containers.push(Container {
            name: "c2".into(),
            ports: vec![port("TCP//8003"), port("TCP//0")],
            ..Container::default()
        });
        p.init_containers = vec![
            Container {
                name: "init".into(),
                ports: vec![port("TCP//9000")],
                ..Container::default()
            },
            Container {
                name: "sidecar".into(),
                ports: vec![port("TCP//9001")],
                restartable: true,
                ..Container::default()
            },
        ];
        let ports: Vec<i32> = pod_host_ports(&p).iter().map(|p| p.port).collect();
        assert_eq!(ports, [9001, 8001, 8002, 8003]);
    }

    #[test]
    fn a_sidecar_port_conflicts_but_a_plain_init_container_port_does_not() {
        let node = node_with(&[pod(&["TCP//8080"])]);
        let mut incoming = Pod {
            init_containers: vec![Container {
                name: "init".into(),
                ports: vec![port("TCP//8080")],
                ..Container::default()
            }],
            ..Pod::default()
        };
        assert_eq!(run(&incoming, &node).0, Code::Skip);
        incoming.init_containers[0].restartable = true;
        let (code, status) = run(&incoming, &node);
        assert_eq!(code, Code::Success);
        assert_eq!(status.unwrap(), Status::unschedulable(ERR_REASON));
    }

    // Upstream's Test_isSchedulableAfterPodDeleted, with `podWithHostPort` wanting
    // TCP port 8080 on every address.
    fn deleted_hint(old: &Object) -> Result<QueueingHint, String> {
        let event = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
        NodePorts.queueing_hint(&event, &pod(&["TCP//8080"]), Some(old), None)
    }

    fn bound(mut p: Pod) -> Object {
        p.node_name = "fake-node".into();
        Object::Pod(p)
    }

    #[test]
    fn backoff_wrong_old_object() {
        let not_a_pod = Object::Node(Node::default());
        assert!(deleted_hint(&not_a_pod).is_err());
    }

    #[test]
    fn skip_queue_on_unscheduled() {
        assert_eq!(
            deleted_hint(&Object::Pod(pod(&["TCP//8080"]))),
            Ok(QueueingHint::QueueSkip)
        );
    }

    #[test]
    fn skip_queue_on_non_hostport() {
        assert_eq!(deleted_hint(&bound(pod(&[]))), Ok(QueueingHint::QueueSkip));
    }

    #[test]
    fn skip_queue_on_unrelated_hostport() {
        assert_eq!(
            deleted_hint(&bound(pod(&["TCP//8081"]))),
            Ok(QueueingHint::QueueSkip)
        );
    }

    #[test]
    fn queue_on_released_hostport() {
        assert_eq!(
            deleted_hint(&bound(pod(&["TCP//8080"]))),
            Ok(QueueingHint::Queue)
        );
    }

    // Berth's own cases.
    #[test]
    fn a_nominated_pod_held_its_ports() {
        let mut p = pod(&["TCP//8080"]);
        p.nominated_node_name = "fake-node".into();
        assert_eq!(deleted_hint(&Object::Pod(p)), Ok(QueueingHint::Queue));
    }

    #[test]
    fn freed_ports_conflict_as_filter_sees_them() {
        // Same port, other protocol or other address: nothing the pod wants.
        assert_eq!(
            deleted_hint(&bound(pod(&["UDP//8080"]))),
            Ok(QueueingHint::QueueSkip)
        );
        let event = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
        let hint = |wanted: &[&str], freed: &[&str]| {
            NodePorts
                .queueing_hint(&event, &pod(wanted), Some(&bound(pod(freed))), None)
                .unwrap()
        };
        assert_eq!(
            hint(&["TCP/127.0.0.1/8080"], &["TCP/127.0.0.2/8080"]),
            QueueingHint::QueueSkip
        );
        // A wildcard address on either side conflicts.
        assert_eq!(
            hint(&["TCP/127.0.0.1/8080"], &["TCP/0.0.0.0/8080"]),
            QueueingHint::Queue
        );
        assert_eq!(
            hint(&["TCP//8080"], &["TCP/10.0.0.1/8080"]),
            QueueingHint::Queue
        );
        // A plain init container's port: upstream does not count it as held, but the
        // SDK's NodeInfo does, so its release may matter to Filter.
        let mut init_only = Pod {
            init_containers: vec![Container {
                name: "init".into(),
                ports: vec![port("TCP//8080")],
                ..Container::default()
            }],
            ..Pod::default()
        };
        assert_eq!(
            deleted_hint(&bound(init_only.clone())),
            Ok(QueueingHint::Queue)
        );
        init_only.init_containers[0].restartable = true;
        assert_eq!(deleted_hint(&bound(init_only)), Ok(QueueingHint::Queue));
    }

    #[test]
    fn registers_assigned_pod_delete_with_a_hint_and_node_add_without() {
        let events = NodePorts::events().unwrap();
        let find = |resource, actions| {
            events
                .iter()
                .find(|r| r.event.covers(&ClusterEvent::new(resource, actions)))
                .map(|r| r.has_hint)
        };
        assert_eq!(
            find(EventResource::AssignedPod, ActionType::DELETE),
            Some(true)
        );
        assert_eq!(find(EventResource::Node, ActionType::ADD), Some(false));
        assert_eq!(find(EventResource::AssignedPod, ActionType::ADD), None);
        assert_eq!(find(EventResource::AssignedPod, ActionType::UPDATE), None);
        assert_eq!(find(EventResource::Node, ActionType::UPDATE), None);
        assert_eq!(find(EventResource::Node, ActionType::DELETE), None);
    }
}
