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

fn port_to_wit(p: &sdk::HostPort) -> w::HostPort {
    w::HostPort {
        host_ip: p.host_ip.clone(),
        protocol: p.protocol.clone(),
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
        preempted: p.preempted,
        preemption_policy: match p.preemption_policy {
            sdk::PreemptionPolicy::PreemptLowerPriority => {
                w::PreemptionPolicy::PreemptLowerPriority
            }
            sdk::PreemptionPolicy::Never => w::PreemptionPolicy::Never,
        },
        start_time_ms: p.start_time_ms,
        affinity: affinity_to_wit(&p.affinity),
        topology_spread_constraints: p
            .topology_spread_constraints
            .iter()
            .map(spread_to_wit)
            .collect(),
        default_selector: p.default_selector.as_ref().map(selector_to_wit),
    }
}

fn node_term_to_wit(t: &sdk::NodeSelectorTerm) -> w::NodeSelectorTerm {
    let req = |r: &sdk::NodeSelectorRequirement| w::NodeSelectorRequirement {
        key: r.key.clone(),
        operator: match r.operator {
            sdk::NodeSelectorOperator::In => w::NodeSelectorOperator::In,
            sdk::NodeSelectorOperator::NotIn => w::NodeSelectorOperator::NotIn,
            sdk::NodeSelectorOperator::Exists => w::NodeSelectorOperator::Exists,
            sdk::NodeSelectorOperator::DoesNotExist => w::NodeSelectorOperator::DoesNotExist,
            sdk::NodeSelectorOperator::Gt => w::NodeSelectorOperator::Gt,
            sdk::NodeSelectorOperator::Lt => w::NodeSelectorOperator::Lt,
        },
        values: r.values.clone(),
    };
    w::NodeSelectorTerm {
        match_expressions: t.match_expressions.iter().map(req).collect(),
        match_fields: t.match_fields.iter().map(req).collect(),
    }
}

fn selector_to_wit(s: &sdk::LabelSelector) -> w::LabelSelector {
    w::LabelSelector {
        match_labels: labels_to_wit(&s.match_labels),
        match_expressions: s
            .match_expressions
            .iter()
            .map(|r| w::LabelSelectorRequirement {
                key: r.key.clone(),
                operator: match r.operator {
                    sdk::LabelSelectorOperator::In => w::LabelSelectorOperator::In,
                    sdk::LabelSelectorOperator::NotIn => w::LabelSelectorOperator::NotIn,
                    sdk::LabelSelectorOperator::Exists => w::LabelSelectorOperator::Exists,
                    sdk::LabelSelectorOperator::DoesNotExist => {
                        w::LabelSelectorOperator::DoesNotExist
                    }
                },
                values: r.values.clone(),
            })
            .collect(),
    }
}

fn pod_term_to_wit(t: &sdk::PodAffinityTerm) -> w::PodAffinityTerm {
    w::PodAffinityTerm {
        label_selector: t.label_selector.as_ref().map(selector_to_wit),
        namespaces: t.namespaces.clone(),
        namespace_selector: t.namespace_selector.as_ref().map(selector_to_wit),
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone(),
        mismatch_label_keys: t.mismatch_label_keys.clone(),
    }
}

fn pod_affinity_to_wit(a: &sdk::PodAffinity) -> w::PodAffinity {
    w::PodAffinity {
        required: a.required.iter().map(pod_term_to_wit).collect(),
        preferred: a
            .preferred
            .iter()
            .map(|p| w::WeightedPodAffinityTerm {
                weight: p.weight,
                term: pod_term_to_wit(&p.term),
            })
            .collect(),
    }
}

fn affinity_to_wit(a: &sdk::Affinity) -> w::Affinity {
    w::Affinity {
        node_affinity: a.node_affinity.as_ref().map(|n| w::NodeAffinity {
            required: n
                .required
                .as_ref()
                .map(|terms| terms.iter().map(node_term_to_wit).collect()),
            preferred: n
                .preferred
                .iter()
                .map(|p| w::PreferredSchedulingTerm {
                    weight: p.weight,
                    preference: node_term_to_wit(&p.preference),
                })
                .collect(),
        }),
        pod_affinity: pod_affinity_to_wit(&a.pod_affinity),
        pod_anti_affinity: pod_affinity_to_wit(&a.pod_anti_affinity),
    }
}

fn policy_to_wit(p: sdk::NodeInclusionPolicy) -> w::NodeInclusionPolicy {
    match p {
        sdk::NodeInclusionPolicy::Honor => w::NodeInclusionPolicy::Honor,
        sdk::NodeInclusionPolicy::Ignore => w::NodeInclusionPolicy::Ignore,
    }
}

fn spread_to_wit(c: &sdk::TopologySpreadConstraint) -> w::TopologySpreadConstraint {
    w::TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable: match c.when_unsatisfiable {
            sdk::WhenUnsatisfiable::DoNotSchedule => w::WhenUnsatisfiable::DoNotSchedule,
            sdk::WhenUnsatisfiable::ScheduleAnyway => w::WhenUnsatisfiable::ScheduleAnyway,
        },
        label_selector: c.label_selector.as_ref().map(selector_to_wit),
        min_domains: c.min_domains,
        node_affinity_policy: c.node_affinity_policy.map(policy_to_wit),
        node_taints_policy: c.node_taints_policy.map(policy_to_wit),
        match_label_keys: c.match_label_keys.clone(),
    }
}

fn node_to_wit(node: &sdk::Node) -> w::Node {
    w::Node {
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
                num_nodes: i.num_nodes,
            })
            .collect(),
    }
}

pub(crate) fn object_to_wit(o: &berth_sdk::Object) -> w::Object {
    match o {
        berth_sdk::Object::Pod(p) => w::Object::Pod(pod_to_wit(p)),
        berth_sdk::Object::Node(n) => w::Object::Node(node_to_wit(n)),
    }
}

pub(crate) fn event_to_wit(e: &berth_sdk::ClusterEvent) -> w::ClusterEvent {
    use berth_sdk::EventResource as R;
    w::ClusterEvent {
        resource: match e.resource {
            R::AssignedPod => w::EventResource::AssignedPod,
            R::UnscheduledPod => w::EventResource::UnscheduledPod,
            R::Node => w::EventResource::Node,
            R::Namespace => w::EventResource::Namespace,
        },
        actions: actions_to_wit(e.actions),
    }
}

pub(crate) fn registration_from_wit(r: w::EventRegistration) -> berth_sdk::EventRegistration {
    use berth_sdk::EventResource as R;
    berth_sdk::EventRegistration {
        event: berth_sdk::ClusterEvent {
            resource: match r.event.resource {
                w::EventResource::AssignedPod => R::AssignedPod,
                w::EventResource::UnscheduledPod => R::UnscheduledPod,
                w::EventResource::Node => R::Node,
                w::EventResource::Namespace => R::Namespace,
            },
            actions: actions_from_wit(r.event.actions),
        },
        has_hint: r.has_hint,
    }
}

pub(crate) fn node_info_to_wit(n: &sdk::NodeInfo, with_pods: bool) -> w::NodeInfo {
    w::NodeInfo {
        node: node_to_wit(&n.node),
        requested: resources_to_wit(&n.requested),
        non_zero_requested: resources_to_wit(&n.non_zero_requested),
        pod_count: n.pod_count,
        used_ports: n.used_ports.iter().map(port_to_wit).collect(),
        pods: if with_pods {
            n.pods.iter().map(pod_to_wit).collect()
        } else {
            Vec::new()
        },
    }
}

pub(crate) fn budget_to_wit(b: &berth_sdk::PodDisruptionBudget) -> w::PodDisruptionBudget {
    w::PodDisruptionBudget {
        namespace: b.namespace.clone(),
        name: b.name.clone(),
        selector: b.selector.as_ref().map(selector_to_wit),
        disruptions_allowed: b.disruptions_allowed,
        disrupted_pods: b.disrupted_pods.iter().cloned().collect(),
    }
}

pub(crate) fn status_to_wit(s: &sdk::Status) -> w::Status {
    let code = match s.code {
        sdk::Code::Success => w::Code::Success,
        sdk::Code::Error => w::Code::Error,
        sdk::Code::Unschedulable => w::Code::Unschedulable,
        sdk::Code::UnschedulableAndUnresolvable => w::Code::UnschedulableAndUnresolvable,
        sdk::Code::Wait => w::Code::Wait,
        sdk::Code::Skip => w::Code::Skip,
        sdk::Code::Pending => w::Code::Pending,
    };
    w::Status {
        code,
        reasons: s.reasons.clone(),
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

/// The WIT flags in declaration order: bit `i` of the SDK's `ActionType` is flag `i`.
const ACTION_FLAGS: [w::ActionType; 12] = [
    w::ActionType::ADD,
    w::ActionType::DELETE,
    w::ActionType::UPDATE_NODE_ALLOCATABLE,
    w::ActionType::UPDATE_NODE_LABEL,
    w::ActionType::UPDATE_NODE_TAINT,
    w::ActionType::UPDATE_NODE_CONDITION,
    w::ActionType::UPDATE_NODE_ANNOTATION,
    w::ActionType::UPDATE_POD_LABEL,
    w::ActionType::UPDATE_POD_SCALE_DOWN,
    w::ActionType::UPDATE_POD_TOLERATION,
    w::ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
    w::ActionType::UPDATE_OTHER,
];

fn actions_to_wit(a: berth_sdk::ActionType) -> w::ActionType {
    ACTION_FLAGS
        .iter()
        .enumerate()
        .filter(|(i, _)| a.0 & (1 << i) != 0)
        .fold(w::ActionType::empty(), |acc, (_, f)| acc | *f)
}

fn actions_from_wit(f: w::ActionType) -> berth_sdk::ActionType {
    let bits = ACTION_FLAGS
        .iter()
        .enumerate()
        .filter(|(_, flag)| f.contains(**flag))
        .fold(0u32, |acc, (i, _)| acc | (1 << i));
    berth_sdk::ActionType(bits)
}
