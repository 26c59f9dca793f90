//! Conversions between the SDK's types and the host-side WIT records.

use super::bindings::berth::scheduler::types as w;
use super::bindings::berth::scheduler::workload as wl;
use super::bindings::exports::berth::scheduler as ex;
use super::bindings::exports::berth::scheduler::replica::NodePodsChange;
use berth_sdk::types as sdk;
use berth_sdk::volumes as v;
use dra::node_term_to_wit;

/// The resource.k8s.io records and node selector terms, both ways (the SDK writes
/// them once for the guest's bindings and the host's).
#[allow(
    dead_code,
    reason = "the shared conversions include the guest's direction of each kind"
)]
pub(crate) mod dra {
    use super::w;
    berth_sdk::dra_wit_conversions!();
}

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
        allocated: c.allocated.as_ref().map(list_to_wit),
        actuated: c.actuated.as_ref().map(list_to_wit),
        restart_policy_rule_actions: c.restart_policy_rule_actions.clone(),
        volume_mounts: c
            .volume_mounts
            .iter()
            .map(|m| w::VolumeMount {
                name: m.name.clone(),
                bind_mount_options: m.bind_mount_options.clone(),
            })
            .collect(),
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
        preemption_policy: preemption_policy_to_wit(p.preemption_policy),
        start_time_ms: p.start_time_ms,
        affinity: affinity_to_wit(&p.affinity),
        topology_spread_constraints: p
            .topology_spread_constraints
            .iter()
            .map(spread_to_wit)
            .collect(),
        default_selector: p.default_selector.as_ref().map(selector_to_wit),
        volumes: p.volumes.iter().map(pod_volume_to_wit).collect(),
        resources: p.resources.as_ref().map(|r| w::ResourceRequirements {
            requests: list_to_wit(&r.requests),
            limits: list_to_wit(&r.limits),
        }),
        resize_infeasible: p.resize_infeasible,
        resource_claims: p
            .resource_claims
            .iter()
            .map(|c| w::PodResourceClaim {
                name: c.name.clone(),
                source: match &c.source {
                    sdk::ClaimSource::ClaimName(n) => w::ClaimSource::ClaimName(n.clone()),
                    sdk::ClaimSource::TemplateName(n) => w::ClaimSource::TemplateName(n.clone()),
                },
            })
            .collect(),
        resource_claim_statuses: p
            .resource_claim_statuses
            .iter()
            .map(|c| w::PodResourceClaimStatus {
                name: c.name.clone(),
                resource_claim_name: c.resource_claim_name.clone(),
            })
            .collect(),
        scheduling_group: p.scheduling_group.clone(),
        host_network: p.host_network,
        host_users: p.host_users,
        ephemeral_containers: p
            .ephemeral_containers
            .iter()
            .map(container_to_wit)
            .collect(),
        extended_resource_claim_status: p.extended_resource_claim_status.as_ref().map(|s| {
            w::PodExtendedResourceClaimStatus {
                resource_claim_name: s.resource_claim_name.clone(),
                request_mappings: s
                    .request_mappings
                    .iter()
                    .map(|m| w::ContainerExtendedResourceRequest {
                        container_name: m.container_name.clone(),
                        resource_name: m.resource_name.clone(),
                        request_name: m.request_name.clone(),
                    })
                    .collect(),
            }
        }),
    }
}

fn access_modes_to_wit(modes: &[v::AccessMode]) -> Vec<w::AccessMode> {
    modes
        .iter()
        .map(|m| match m {
            v::AccessMode::ReadWriteOnce => w::AccessMode::ReadWriteOnce,
            v::AccessMode::ReadOnlyMany => w::AccessMode::ReadOnlyMany,
            v::AccessMode::ReadWriteMany => w::AccessMode::ReadWriteMany,
            v::AccessMode::ReadWriteOncePod => w::AccessMode::ReadWriteOncePod,
        })
        .collect()
}

fn volume_mode_to_wit(m: v::VolumeMode) -> w::VolumeMode {
    match m {
        v::VolumeMode::Filesystem => w::VolumeMode::Filesystem,
        v::VolumeMode::Block => w::VolumeMode::Block,
    }
}

fn pod_volume_to_wit(vol: &v::Volume) -> w::Volume {
    let source = match &vol.source {
        v::VolumeSource::PersistentVolumeClaim {
            claim_name,
            read_only,
        } => w::VolumeSource::PersistentVolumeClaim((claim_name.clone(), *read_only)),
        v::VolumeSource::Ephemeral => w::VolumeSource::Ephemeral,
        v::VolumeSource::Csi { driver } => w::VolumeSource::Csi(driver.clone()),
        v::VolumeSource::GcePersistentDisk { pd_name, read_only } => {
            w::VolumeSource::GcePersistentDisk((pd_name.clone(), *read_only))
        }
        v::VolumeSource::AwsElasticBlockStore {
            volume_id,
            read_only,
        } => w::VolumeSource::AwsElasticBlockStore((volume_id.clone(), *read_only)),
        v::VolumeSource::Iscsi { iqn, read_only } => {
            w::VolumeSource::Iscsi((iqn.clone(), *read_only))
        }
        v::VolumeSource::Rbd {
            monitors,
            pool,
            image,
            read_only,
        } => w::VolumeSource::Rbd(w::RbdVolume {
            monitors: monitors.clone(),
            pool: pool.clone(),
            image: image.clone(),
            read_only: *read_only,
        }),
        v::VolumeSource::Other => w::VolumeSource::Other,
    };
    w::Volume {
        name: vol.name.clone(),
        source,
    }
}

pub(crate) fn claim_to_wit(c: &v::PersistentVolumeClaim) -> w::PersistentVolumeClaim {
    w::PersistentVolumeClaim {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
        uid: c.uid.clone(),
        annotations: labels_to_wit(&c.annotations),
        controller_uid: c.controller_uid.clone(),
        storage_class_name: c.storage_class_name.clone(),
        volume_name: c.volume_name.clone(),
        access_modes: access_modes_to_wit(&c.access_modes),
        requested_storage: c.requested_storage,
        selector: c.selector.as_ref().map(selector_to_wit),
        volume_mode: volume_mode_to_wit(c.volume_mode),
        phase: match c.phase {
            v::ClaimPhase::Pending => w::ClaimPhase::Pending,
            v::ClaimPhase::Bound => w::ClaimPhase::Bound,
            v::ClaimPhase::Lost => w::ClaimPhase::Lost,
        },
        terminating: c.terminating,
    }
}

pub(crate) fn claim_ref_from_wit(r: w::ClaimRef) -> v::ClaimRef {
    v::ClaimRef {
        namespace: r.namespace,
        name: r.name,
        uid: r.uid,
    }
}

pub(crate) fn volume_to_wit(pv: &v::PersistentVolume) -> w::PersistentVolume {
    w::PersistentVolume {
        name: pv.name.clone(),
        labels: labels_to_wit(&pv.labels),
        annotations: labels_to_wit(&pv.annotations),
        storage_class_name: pv.storage_class_name.clone(),
        capacity_storage: pv.capacity_storage,
        access_modes: access_modes_to_wit(&pv.access_modes),
        volume_mode: volume_mode_to_wit(pv.volume_mode),
        claim_ref: pv.claim_ref.as_ref().map(|r| w::ClaimRef {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        }),
        node_affinity: pv
            .node_affinity
            .as_ref()
            .map(|terms| terms.iter().map(node_term_to_wit).collect()),
        phase: match pv.phase {
            v::VolumePhase::Pending => w::VolumePhase::Pending,
            v::VolumePhase::Available => w::VolumePhase::Available,
            v::VolumePhase::Bound => w::VolumePhase::Bound,
            v::VolumePhase::Released => w::VolumePhase::Released,
            v::VolumePhase::Failed => w::VolumePhase::Failed,
        },
        source: match &pv.source {
            v::PersistentVolumeSource::Csi {
                driver,
                volume_handle,
            } => w::PersistentVolumeSource::Csi((driver.clone(), volume_handle.clone())),
            v::PersistentVolumeSource::GcePersistentDisk { pd_name } => {
                w::PersistentVolumeSource::GcePersistentDisk(pd_name.clone())
            }
            v::PersistentVolumeSource::AwsElasticBlockStore { volume_id } => {
                w::PersistentVolumeSource::AwsElasticBlockStore(volume_id.clone())
            }
            v::PersistentVolumeSource::AzureDisk { disk_uri } => {
                w::PersistentVolumeSource::AzureDisk(disk_uri.clone())
            }
            v::PersistentVolumeSource::Cinder { volume_id } => {
                w::PersistentVolumeSource::Cinder(volume_id.clone())
            }
            v::PersistentVolumeSource::Other => w::PersistentVolumeSource::Other,
        },
        terminating: pv.terminating,
    }
}

pub(crate) fn class_to_wit(c: &v::StorageClass) -> w::StorageClass {
    w::StorageClass {
        name: c.name.clone(),
        provisioner: c.provisioner.clone(),
        volume_binding_mode: match c.volume_binding_mode {
            v::VolumeBindingMode::Immediate => w::VolumeBindingMode::Immediate,
            v::VolumeBindingMode::WaitForFirstConsumer => {
                w::VolumeBindingMode::WaitForFirstConsumer
            }
        },
        allowed_topologies: c
            .allowed_topologies
            .iter()
            .map(|t| w::TopologySelectorTerm {
                match_label_expressions: t.match_label_expressions.clone(),
            })
            .collect(),
        is_default: c.is_default,
    }
}

pub(crate) fn csi_node_to_wit(n: &v::CsiNode) -> w::CsiNode {
    w::CsiNode {
        name: n.name.clone(),
        drivers: n
            .drivers
            .iter()
            .map(|d| w::CsiNodeDriver {
                name: d.name.clone(),
                node_id: d.node_id.clone(),
                topology_keys: d.topology_keys.clone(),
                allocatable_count: d.allocatable_count,
            })
            .collect(),
        migrated_plugins: n.migrated_plugins.clone(),
    }
}

pub(crate) fn csi_driver_to_wit(d: &v::CsiDriver) -> w::CsiDriver {
    w::CsiDriver {
        name: d.name.clone(),
        attach_required: d.attach_required,
        storage_capacity: d.storage_capacity,
    }
}

pub(crate) fn selector_to_wit(s: &sdk::LabelSelector) -> w::LabelSelector {
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
        declared_features: node.declared_features.clone(),
    }
}

pub(crate) fn object_to_wit(o: &berth_sdk::Object) -> w::Object {
    match o {
        berth_sdk::Object::Pod(p) => w::Object::Pod(pod_to_wit(p)),
        berth_sdk::Object::Node(n) => w::Object::Node(node_to_wit(n)),
        berth_sdk::Object::PersistentVolumeClaim(c) => {
            w::Object::PersistentVolumeClaim(claim_to_wit(c))
        }
        berth_sdk::Object::PersistentVolume(v) => w::Object::PersistentVolume(volume_to_wit(v)),
        berth_sdk::Object::StorageClass(c) => w::Object::StorageClass(class_to_wit(c)),
        berth_sdk::Object::CsiNode(n) => w::Object::CsiNode(csi_node_to_wit(n)),
        berth_sdk::Object::CsiDriver(d) => w::Object::CsiDriver(csi_driver_to_wit(d)),
        berth_sdk::Object::CsiStorageCapacity(c) => {
            w::Object::CsiStorageCapacity(storage_capacity_to_wit(c))
        }
        berth_sdk::Object::ResourceClaim(c) => w::Object::ResourceClaim(dra::claim_to_wit(c)),
        berth_sdk::Object::ResourceSlice(s) => w::Object::ResourceSlice(dra::slice_to_wit(s)),
        berth_sdk::Object::DeviceClass(c) => w::Object::DeviceClass(dra::class_to_wit(c)),
    }
}

pub(crate) fn storage_capacity_to_wit(c: &v::CsiStorageCapacity) -> w::CsiStorageCapacity {
    dra::storage_capacity_to_wit(c, selector_to_wit)
}

pub(crate) fn event_to_wit(e: &berth_sdk::ClusterEvent) -> w::ClusterEvent {
    use berth_sdk::EventResource as R;
    w::ClusterEvent {
        resource: match e.resource {
            R::AssignedPod => w::EventResource::AssignedPod,
            R::UnscheduledPod => w::EventResource::UnscheduledPod,
            R::Node => w::EventResource::Node,
            R::Namespace => w::EventResource::Namespace,
            R::PersistentVolumeClaim => w::EventResource::PersistentVolumeClaim,
            R::PersistentVolume => w::EventResource::PersistentVolume,
            R::StorageClass => w::EventResource::StorageClass,
            R::CsiNode => w::EventResource::CsiNode,
            R::CsiDriver => w::EventResource::CsiDriver,
            R::CsiStorageCapacity => w::EventResource::CsiStorageCapacity,
            R::ResourceClaim => w::EventResource::ResourceClaim,
            R::ResourceSlice => w::EventResource::ResourceSlice,
            R::DeviceClass => w::EventResource::DeviceClass,
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
                w::EventResource::PersistentVolumeClaim => R::PersistentVolumeClaim,
                w::EventResource::PersistentVolume => R::PersistentVolume,
                w::EventResource::StorageClass => R::StorageClass,
                w::EventResource::CsiNode => R::CsiNode,
                w::EventResource::CsiDriver => R::CsiDriver,
                w::EventResource::CsiStorageCapacity => R::CsiStorageCapacity,
                w::EventResource::ResourceClaim => R::ResourceClaim,
                w::EventResource::ResourceSlice => R::ResourceSlice,
                w::EventResource::DeviceClass => R::DeviceClass,
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

/// The change of a node's pods from `old` (what the replica holds) to `new`, with
/// the pods themselves only `with_pods`.
pub(crate) fn node_pods_change_to_wit(
    slot: u32,
    old: &sdk::NodeInfo,
    new: &sdk::NodeInfo,
    with_pods: bool,
) -> NodePodsChange {
    let (removed_pods, added_pods) = if with_pods {
        let (removed, added) = new.pods_change_since(old);
        (
            removed.into_iter().map(str::to_owned).collect(),
            added.iter().map(pod_to_wit).collect(),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    NodePodsChange {
        slot,
        requested: resources_to_wit(&new.requested),
        non_zero_requested: resources_to_wit(&new.non_zero_requested),
        pod_count: new.pod_count,
        used_ports: new.used_ports.iter().map(port_to_wit).collect(),
        removed_pods,
        added_pods,
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

macro_rules! point_from_wit {
    ( ()
      $( $gen:ident interface $iface:ident {
            points: [ $( $P:ident $pf:ident $pname:literal $pdoc:literal ),* ],
            also: [ $( $A:ident $af:ident $aname:literal $adoc:literal ),* ],
            calls: [ $( $kind:ident $body:tt ),* $(,)? ],
      } )*
    ) => {
        /// An extension point of WIT 0.7.0's `extension-point` enum (`plugin.info`'s
        /// list) as the SDK names it. The points of optional interfaces are not in
        /// the enum: their `implemented` names them.
        pub(crate) fn point_from_wit(p: w::ExtensionPoint) -> sdk::ExtensionPoint {
            $( point_from_wit!(@row $gen p [ $( $P )* $( $A )* ]); )*
            unreachable!("every case of the frozen enum is a row of the table")
        }
    };
    (@row optional $p:ident [ $( $P:ident )* ]) => {};
    (@row $gen:ident $p:ident [ $( $P:ident )* ]) => {
        $( if $p == w::ExtensionPoint::$P {
            return sdk::ExtensionPoint::$P;
        } )*
    };
}

berth_sdk::for_each_extension_point!(point_from_wit);

/// An answer of the component in the SDK's types.
pub(crate) trait FromWit<W> {
    /// Converts.
    fn from_wit(w: W) -> Self;
}

impl FromWit<w::Status> for sdk::Status {
    fn from_wit(s: w::Status) -> Self {
        status_from_wit(s)
    }
}

impl FromWit<()> for () {
    fn from_wit(_: ()) {}
}

impl FromWit<Vec<i64>> for Vec<i64> {
    fn from_wit(v: Vec<i64>) -> Self {
        v
    }
}

impl FromWit<Result<Vec<i64>, w::Status>> for Result<Vec<i64>, sdk::Status> {
    fn from_wit(r: Result<Vec<i64>, w::Status>) -> Self {
        r.map_err(status_from_wit)
    }
}

impl FromWit<Result<Vec<ex::sign::SignFragment>, w::Status>>
    for Result<Vec<berth_sdk::SignFragment>, sdk::Status>
{
    fn from_wit(r: Result<Vec<ex::sign::SignFragment>, w::Status>) -> Self {
        r.map(|fragments| {
            fragments
                .into_iter()
                .map(|f| berth_sdk::SignFragment {
                    key: f.key,
                    value: f.value,
                })
                .collect()
        })
        .map_err(status_from_wit)
    }
}

impl FromWit<Result<super::bindings::berth::scheduler::dry_run::Victims, w::Status>>
    for Result<berth_sdk::NodeVictims, sdk::Status>
{
    fn from_wit(r: Result<super::bindings::berth::scheduler::dry_run::Victims, w::Status>) -> Self {
        r.map(|v| berth_sdk::NodeVictims {
            pods: v.pods,
            pdb_violations: v.pdb_violations,
        })
        .map_err(status_from_wit)
    }
}

impl FromWit<Result<i64, w::Status>> for Result<i64, sdk::Status> {
    fn from_wit(r: Result<i64, w::Status>) -> Self {
        r.map_err(status_from_wit)
    }
}

/// An argument of a `group` call as the WIT value passed (by reference) to the
/// component.
pub(crate) trait ToWitArg {
    /// The WIT value.
    type Wit;
    /// How the bindings take it: by reference, or by value for a record of plain
    /// numbers (which `bindgen!` passes as a `Copy` value).
    type Passed<'a>
    where
        Self::Wit: 'a;
    /// Converts.
    fn to_wit_arg(&self) -> Self::Wit;
    /// The converted value as the bindings take it.
    fn passed(w: &Self::Wit) -> Self::Passed<'_>;
}

/// The usual case: the bindings take the WIT value by reference.
macro_rules! passed_by_reference {
    ($wit:ty) => {
        type Passed<'a> = &'a $wit;
        fn passed(w: &$wit) -> &$wit {
            w
        }
    };
}

impl ToWitArg for berth_sdk::PodGroup {
    type Wit = wl::PodGroup;
    passed_by_reference!(wl::PodGroup);
    fn to_wit_arg(&self) -> wl::PodGroup {
        wl::PodGroup {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            min_count: self.min_count,
            scheduled_count: self.scheduled_count,
            unscheduled_pods: self.unscheduled_pods.iter().map(pod_to_wit).collect(),
            topology_keys: self.topology_keys.clone(),
            scheduled_nodes: self.scheduled_nodes.clone(),
        }
    }
}

impl ToWitArg for berth_sdk::PlacementProgress {
    type Wit = wl::PlacementProgress;
    type Passed<'a> = wl::PlacementProgress;
    fn passed(w: &wl::PlacementProgress) -> wl::PlacementProgress {
        *w
    }
    fn to_wit_arg(&self) -> wl::PlacementProgress {
        wl::PlacementProgress {
            scheduled: self.scheduled,
            remaining: self.remaining,
        }
    }
}

impl ToWitArg for berth_sdk::Placement {
    type Wit = wl::Placement;
    passed_by_reference!(wl::Placement);
    fn to_wit_arg(&self) -> wl::Placement {
        wl::Placement {
            name: self.name.clone(),
            nodes: self.nodes.clone(),
        }
    }
}

impl FromWit<Result<Vec<wl::Placement>, w::Status>>
    for Result<Vec<berth_sdk::Placement>, berth_sdk::Status>
{
    fn from_wit(r: Result<Vec<wl::Placement>, w::Status>) -> Self {
        r.map(|ps| {
            ps.into_iter()
                .map(|p| berth_sdk::Placement {
                    name: p.name,
                    nodes: p.nodes,
                })
                .collect()
        })
        .map_err(status_from_wit)
    }
}

impl ToWitArg for [i64] {
    type Wit = Vec<i64>;
    type Passed<'a> = &'a [i64];
    fn passed(w: &Vec<i64>) -> &[i64] {
        w
    }
    fn to_wit_arg(&self) -> Vec<i64> {
        self.to_vec()
    }
}

impl ToWitArg for berth_sdk::PodGroupAssignments {
    type Wit = wl::PodGroupAssignments;
    passed_by_reference!(wl::PodGroupAssignments);
    fn to_wit_arg(&self) -> wl::PodGroupAssignments {
        wl::PodGroupAssignments {
            placement: wl::Placement {
                name: self.placement.name.clone(),
                nodes: self.placement.nodes.clone(),
            },
            assignments: assignments_to_wit(&self.assignments),
        }
    }
}

/// A preemption policy as the WIT has it.
pub fn preemption_policy_to_wit(p: sdk::PreemptionPolicy) -> w::PreemptionPolicy {
    match p {
        sdk::PreemptionPolicy::PreemptLowerPriority => w::PreemptionPolicy::PreemptLowerPriority,
        sdk::PreemptionPolicy::Never => w::PreemptionPolicy::Never,
    }
}

/// Proposed assignments as the WIT has them.
pub fn assignments_to_wit(a: &[berth_sdk::ProposedAssignment]) -> Vec<wl::ProposedAssignment> {
    a.iter()
        .map(|a| wl::ProposedAssignment {
            pod_uid: a.pod_uid.clone(),
            node: a.node.clone(),
        })
        .collect()
}

/// Proposed assignments from the WIT.
pub fn assignments_from_wit(a: Vec<wl::ProposedAssignment>) -> Vec<berth_sdk::ProposedAssignment> {
    a.into_iter()
        .map(|a| berth_sdk::ProposedAssignment {
            pod_uid: a.pod_uid,
            node: a.node,
        })
        .collect()
}

impl FromWit<ex::pod_group_post_filter::PodGroupPostFilterResult>
    for berth_sdk::PodGroupPostFilterResult
{
    fn from_wit(r: ex::pod_group_post_filter::PodGroupPostFilterResult) -> Self {
        berth_sdk::PodGroupPostFilterResult {
            status: status_from_wit(r.status),
            nominations: assignments_from_wit(r.nominations),
            victims: r.victims,
        }
    }
}

impl FromWit<ex::pre_filter::PreFilterResult> for berth_sdk::PreFilterResult {
    fn from_wit(r: ex::pre_filter::PreFilterResult) -> Self {
        berth_sdk::PreFilterResult {
            status: status_from_wit(r.status),
            node_names: r.node_names,
        }
    }
}

impl FromWit<Vec<ex::filter::NodeStatus>> for Vec<(u32, sdk::Status)> {
    fn from_wit(r: Vec<ex::filter::NodeStatus>) -> Self {
        r.into_iter()
            .map(|n| (n.slot, status_from_wit(n.status)))
            .collect()
    }
}

impl FromWit<ex::permit::PermitResult> for (sdk::Status, std::time::Duration) {
    fn from_wit(r: ex::permit::PermitResult) -> Self {
        (
            status_from_wit(r.status),
            std::time::Duration::from_millis(r.timeout_ms),
        )
    }
}

pub(crate) fn pod_feature_from_wit(f: w::PodFeature) -> sdk::PodFeature {
    use sdk::PodFeature as F;
    match f {
        w::PodFeature::Volumes => F::Volumes,
        w::PodFeature::HostPorts => F::HostPorts,
        w::PodFeature::NodeAffinity => F::NodeAffinity,
        w::PodFeature::PodAffinity => F::PodAffinity,
        w::PodFeature::TopologySpread => F::TopologySpread,
        w::PodFeature::DefaultSelector => F::DefaultSelector,
        w::PodFeature::ResourceClaims => F::ResourceClaims,
    }
}

/// Bit `i` of the SDK's `ActionType` is flag `i` of the WIT's, in declaration order.
fn actions_to_wit(a: berth_sdk::ActionType) -> w::ActionType {
    w::ActionType::ALL_IN_ORDER
        .iter()
        .enumerate()
        .filter(|(i, _)| a.0 & (1 << i) != 0)
        .fold(w::ActionType::empty(), |acc, (_, (f, _))| acc | *f)
}

fn actions_from_wit(f: w::ActionType) -> berth_sdk::ActionType {
    let bits = w::ActionType::ALL_IN_ORDER
        .iter()
        .enumerate()
        .filter(|(_, (flag, _))| f.contains(*flag))
        .fold(0u32, |acc, (i, _)| acc | (1 << i));
    berth_sdk::ActionType(bits)
}
