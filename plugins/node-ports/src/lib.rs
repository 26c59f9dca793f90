//! NodePorts: as upstream's `nodeports` plugin, filters out nodes where a host port
//! the pod asks for (same protocol and port, on the same or a wildcard host IP) is
//! already in use.
//!
//! The plugin takes no args.

use berth_sdk::{
    CycleState, Filter, HostPort, NodeInfo, Plugin, Pod, PreFilter, PreFilterResult, Status,
};

/// The CycleState key of the pod's host ports, written by PreFilter (upstream's key).
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterNodePorts";
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
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(NodePorts)
    }
}

/// The host ports a pod holds while it runs, as upstream's `GetHostPorts`: those of
/// its containers and of its sidecars (init containers with `restartPolicy: Always`).
/// Plain init containers have exited before the containers start, so their ports do
/// not stay taken.
pub fn pod_host_ports(pod: &Pod) -> Vec<HostPort> {
    pod.init_containers
        .iter()
        .filter(|c| c.restartable)
        .chain(&pod.containers)
        .flat_map(|c| &c.ports)
        .filter(|p| p.port > 0)
        .cloned()
        .collect()
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
        state.write(PRE_FILTER_STATE_KEY, &ports);
        Status::success().into()
    }
}

impl Filter for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        // As upstream, Filter relies on PreFilter's state rather than recomputing it.
        let Some(wanted) = state.read::<Vec<HostPort>>(PRE_FILTER_STATE_KEY) else {
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

berth_sdk::export_plugin!(NodePorts: pre_filter, filter);

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
}
