//! Conversions between the SDK's types and the host-side WIT records.

use super::bindings::berth::scheduler::types as w;
use berth_sdk::types as sdk;

pub(crate) fn resources_to_wit(r: &sdk::Resources) -> w::Resources {
    w::Resources {
        milli_cpu: r.milli_cpu,
        memory: r.memory,
        ephemeral_storage: r.ephemeral_storage,
        allowed_pod_number: r.allowed_pod_number,
        scalar: r.scalar.iter().map(|(k, v)| (k.clone(), *v)).collect(),
    }
}

fn list_to_wit(l: &sdk::ResourceList) -> Vec<(String, i64)> {
    l.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

fn labels_to_wit(l: &sdk::Labels) -> Vec<(String, String)> {
    l.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn effect_to_wit(e: sdk::TaintEffect) -> w::TaintEffect {
    match e {
        sdk::TaintEffect::NoSchedule => w::TaintEffect::NoSchedule,
        sdk::TaintEffect::PreferNoSchedule => w::TaintEffect::PreferNoSchedule,
        sdk::TaintEffect::NoExecute => w::TaintEffect::NoExecute,
    }
}

fn effect_from_wit(e: w::TaintEffect) -> sdk::TaintEffect {
    match e {
        w::TaintEffect::NoSchedule => sdk::TaintEffect::NoSchedule,
        w::TaintEffect::PreferNoSchedule => sdk::TaintEffect::PreferNoSchedule,
        w::TaintEffect::NoExecute => sdk::TaintEffect::NoExecute,
    }
}

fn port_to_wit(p: &sdk::HostPort) -> w::HostPort {
    w::HostPort {
        host_ip: p.host_ip.clone(),
        protocol: p.protocol.clone(),
        port: p.port,
    }
}

fn port_from_wit(p: w::HostPort) -> sdk::HostPort {
    sdk::HostPort {
        host_ip: p.host_ip,
        protocol: p.protocol,
        port: p.port,
    }
}

fn container_to_wit(c: &sdk::Container) -> w::Container {
    w::Container {
        name: c.name.clone(),
        image: c.image.clone(),
        requests: list_to_wit(&c.requests),
        ports: c.ports.iter().map(port_to_wit).collect(),
        restartable: c.restartable,
    }
}

fn container_from_wit(c: w::Container) -> sdk::Container {
    sdk::Container {
        name: c.name,
        image: c.image,
        requests: c.requests.into_iter().collect(),
        ports: c.ports.into_iter().map(port_from_wit).collect(),
        restartable: c.restartable,
    }
}

pub(crate) fn pod_to_wit(p: &sdk::Pod) -> w::Pod {
    w::Pod {
        uid: p.uid.clone(),
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        labels: labels_to_wit(&p.labels),
        priority: p.priority,
        scheduler_name: p.scheduler_name.clone(),
        node_name: p.node_name.clone(),
        nominated_node_name: p.nominated_node_name.clone(),
        containers: p.containers.iter().map(container_to_wit).collect(),
        init_containers: p.init_containers.iter().map(container_to_wit).collect(),
        overhead: list_to_wit(&p.overhead),
        node_selector: labels_to_wit(&p.node_selector),
        tolerations: p
            .tolerations
            .iter()
            .map(|t| w::Toleration {
                key: t.key.clone(),
                operator: match t.operator {
                    sdk::TolerationOperator::Equal => w::TolerationOperator::Equal,
                    sdk::TolerationOperator::Exists => w::TolerationOperator::Exists,
                },
                value: t.value.clone(),
                effect: t.effect.map(effect_to_wit),
                toleration_seconds: t.toleration_seconds,
            })
            .collect(),
        scheduling_gates: p.scheduling_gates.clone(),
        terminating: p.terminating,
    }
}

pub(crate) fn pod_from_wit(p: w::Pod) -> sdk::Pod {
    sdk::Pod {
        uid: p.uid,
        namespace: p.namespace,
        name: p.name,
        labels: p.labels.into_iter().collect(),
        priority: p.priority,
        scheduler_name: p.scheduler_name,
        node_name: p.node_name,
        nominated_node_name: p.nominated_node_name,
        containers: p.containers.into_iter().map(container_from_wit).collect(),
        init_containers: p
            .init_containers
            .into_iter()
            .map(container_from_wit)
            .collect(),
        overhead: p.overhead.into_iter().collect(),
        node_selector: p.node_selector.into_iter().collect(),
        tolerations: p
            .tolerations
            .into_iter()
            .map(|t| sdk::Toleration {
                key: t.key,
                operator: match t.operator {
                    w::TolerationOperator::Equal => sdk::TolerationOperator::Equal,
                    w::TolerationOperator::Exists => sdk::TolerationOperator::Exists,
                },
                value: t.value,
                effect: t.effect.map(effect_from_wit),
                toleration_seconds: t.toleration_seconds,
            })
            .collect(),
        scheduling_gates: p.scheduling_gates,
        terminating: p.terminating,
    }
}

pub(crate) fn node_info_to_wit(n: &sdk::NodeInfo) -> w::NodeInfo {
    let node = &n.node;
    w::NodeInfo {
        node: w::Node {
            name: node.name.clone(),
            labels: labels_to_wit(&node.labels),
            taints: node
                .taints
                .iter()
                .map(|t| w::Taint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect: effect_to_wit(t.effect),
                })
                .collect(),
            unschedulable: node.unschedulable,
            allocatable: resources_to_wit(&node.allocatable),
            images: node
                .images
                .iter()
                .map(|i| w::ImageState {
                    names: i.names.clone(),
                    size_bytes: i.size_bytes,
                })
                .collect(),
        },
        requested: resources_to_wit(&n.requested),
        non_zero_requested: resources_to_wit(&n.non_zero_requested),
        pod_count: n.pod_count,
        used_ports: n.used_ports.iter().map(port_to_wit).collect(),
    }
}

pub(crate) fn status_from_wit(s: w::Status) -> sdk::Status {
    let code = match s.code {
        w::Code::Success => sdk::Code::Success,
        w::Code::Error => sdk::Code::Error,
        w::Code::Unschedulable => sdk::Code::Unschedulable,
        w::Code::UnschedulableAndUnresolvable => sdk::Code::UnschedulableAndUnresolvable,
        w::Code::Wait => sdk::Code::Wait,
        w::Code::Skip => sdk::Code::Skip,
        w::Code::Pending => sdk::Code::Pending,
    };
    sdk::Status::new(code, s.reasons)
}

pub(crate) fn point_from_wit(p: w::ExtensionPoint) -> sdk::ExtensionPoint {
    use sdk::ExtensionPoint as E;
    match p {
        w::ExtensionPoint::PreEnqueue => E::PreEnqueue,
        w::ExtensionPoint::QueueSort => E::QueueSort,
        w::ExtensionPoint::PreFilter => E::PreFilter,
        w::ExtensionPoint::Filter => E::Filter,
        w::ExtensionPoint::PostFilter => E::PostFilter,
        w::ExtensionPoint::PreScore => E::PreScore,
        w::ExtensionPoint::Score => E::Score,
        w::ExtensionPoint::NormalizeScore => E::NormalizeScore,
        w::ExtensionPoint::Reserve => E::Reserve,
        w::ExtensionPoint::Permit => E::Permit,
        w::ExtensionPoint::PreBind => E::PreBind,
        w::ExtensionPoint::Bind => E::Bind,
        w::ExtensionPoint::PostBind => E::PostBind,
    }
}
