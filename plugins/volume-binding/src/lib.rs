//! VolumeBinding: as upstream's `volumebinding` plugin, places a pod where the
//! PersistentVolumeClaims it uses can be bound, and binds them before the pod.
//!
//! - **PreFilter** sorts the pod's claims (PersistentVolumeClaim volumes and generic
//!   ephemeral volumes' claims): fully bound ones, unbound ones of a
//!   `WaitForFirstConsumer` class (the scheduler picks their volume), and unbound
//!   ones of an immediate class (the pod waits for the PersistentVolume controller:
//!   unresolvable). A missing, lost or terminating claim is unresolvable. Bound local
//!   volumes narrow the nodes to those their node affinity names by hostname.
//! - **Filter** checks, per node, that every bound volume's node affinity admits the
//!   node, and that every unbound claim either matches an available volume the node
//!   reaches (the smallest that fits) or can be provisioned there (its class has a
//!   provisioner, `allowedTopologies` admits the node, and, when the provisioner's
//!   CSIDriver publishes its storage capacity, a CSIStorageCapacity of the class
//!   that the node reaches is big enough).
//! - **Score** (StorageCapacityScoring, on by default since 1.37): the utilization,
//!   per class, of the pre-provisioned volumes the pod would bind on the node; when
//!   it would bind none, of the node's storage capacity by the claims to provision
//!   there (their requests over the capacity of the CSIStorageCapacity that admitted
//!   them); through the `shape` (by default the emptier the better), averaged over
//!   the classes.
//! - **Reserve** assumes the choices in the host (a volume's `claimRef`, a claim's
//!   selected node), so other cycles do not take them; **Unreserve** drops them.
//! - **PreBind** writes them through the cluster and waits, up to
//!   `bindTimeoutSeconds`, until the PersistentVolume controller has bound every
//!   claim.
//!
//! A bound in-tree volume (GCE PD, AWS EBS, Azure Disk, Cinder) is checked against a
//! node whose CSINode lists its plugin as migrated as its CSI driver would publish it
//! ([`migration`]).

use berth_sdk::helpers::{MAX_CUSTOM_PRIORITY_SCORE, MAX_UTILIZATION, ShapePoint, broken_linear};
use berth_sdk::{
    ANNOTATION_BIND_COMPLETED, ActionType, ClaimRef, ClusterEvent, Code, CycleState,
    EnqueueExtensions, EventRegistration, EventResource, Filter, Labels, NO_PROVISIONER, NodeInfo,
    Object, PersistentVolume, PersistentVolumeClaim, Plugin, Pod, PreBind, PreFilter,
    PreFilterResult, PreScore, QueueingHint, Reserve, Score, Sign, SignFragment, Status,
    VolumeBindingMode, VolumeMode, VolumePhase, VolumeSource, sign,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub mod migration;

/// The CycleState key of PreFilter's state (upstream's key, the plugin's name).
pub const STATE_KEY: &str = "VolumeBinding";
/// Where Reserve records whether every claim was already bound.
const ALL_BOUND_KEY: &str = "VolumeBinding/allBound";

/// Upstream's `ErrReasonBindConflict`.
pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
/// Upstream's `ErrReasonNodeConflict`.
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// Upstream's `ErrReasonPVNotExist`.
pub const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// Upstream's `ErrReasonNotEnoughSpace`.
pub const ERR_REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// PreFilter's reason when a claim of an immediate class is not bound yet.
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// `bindTimeoutSeconds` when the args give none (upstream's default).
pub const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;

/// The label whose values a local volume's node affinity names nodes by.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The plugin.
pub struct VolumeBinding {
    args: Args,
}

/// The validated args, as upstream's `VolumeBindingArgs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// How long PreBind waits for the claims to be bound.
    pub bind_timeout_seconds: i64,
    /// The Score shape, scores scaled to 0..=100 ([`default_shape`] when the args
    /// give none).
    pub shape: Vec<ShapePoint>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    #[allow(dead_code)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    bind_timeout_seconds: Option<i64>,
    #[serde(default)]
    shape: Option<Vec<ShapePoint>>,
}

impl Args {
    /// Parses, defaults and validates the args (`Null` means none); errors name the
    /// field, as upstream's `ValidateVolumeBindingArgs` does.
    pub fn from_json(args: berth_sdk::serde_json::Value) -> Result<Args, String> {
        let raw: RawArgs = berth_sdk::args::parse(args)?;
        berth_sdk::args::check_kind(raw.kind.as_deref(), "VolumeBindingArgs")?;
        let bind_timeout_seconds = raw
            .bind_timeout_seconds
            .unwrap_or(DEFAULT_BIND_TIMEOUT_SECONDS);
        let mut errs = Vec::new();
        if bind_timeout_seconds < 0 {
            errs.push(berth_sdk::validation::invalid(
                "bindTimeoutSeconds",
                bind_timeout_seconds,
                "invalid BindTimeoutSeconds, should not be a negative value",
            ));
        }
        let mut shape = raw.shape.unwrap_or_default();
        if shape.is_empty() {
            shape = default_shape();
        } else {
            errs.extend(berth_sdk::helpers::shape_errors(&shape, "shape"));
        }
        if let Some(e) = berth_sdk::validation::aggregate(errs) {
            return Err(e);
        }
        for p in &mut shape {
            p.score *= berth_sdk::MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE;
        }
        Ok(Args {
            bind_timeout_seconds,
            shape,
        })
    }
}

/// The shape when the args give none, as upstream defaults it with
/// StorageCapacityScoring on (1.37's default): utilization 0 scores 10, 100 scores 0,
/// so the node with the most room left wins.
pub fn default_shape() -> Vec<ShapePoint> {
    vec![
        ShapePoint {
            utilization: 0,
            score: MAX_CUSTOM_PRIORITY_SCORE,
        },
        ShapePoint {
            utilization: MAX_UTILIZATION,
            score: 0,
        },
    ]
}

/// The pod's claims as PreFilter sorted them (upstream's `PodVolumeClaims`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PodVolumeClaims {
    /// Fully bound claims.
    pub bound: Vec<PersistentVolumeClaim>,
    /// Unbound claims of a `WaitForFirstConsumer` class.
    pub to_bind: Vec<PersistentVolumeClaim>,
    /// The volumes of the classes of `to_bind`, by class.
    pub volumes_by_class: BTreeMap<String, Vec<PersistentVolume>>,
}

/// What Filter found for a node (upstream's `PodVolumes`), and the node's labels then.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PodVolumes {
    /// Pre-provisioned volumes to bind, with the claim each is for.
    pub static_bindings: Vec<(PersistentVolume, PersistentVolumeClaim)>,
    /// Claims to provision a volume for on this node.
    pub dynamic_provisions: Vec<PersistentVolumeClaim>,
    /// For each of `dynamic_provisions`, the capacity of the CSIStorageCapacity
    /// that admitted it here (upstream's `NodeCapacity`); none when its provisioner
    /// does not publish capacity (or the claim requests nothing).
    #[serde(default)]
    pub provision_capacities: Vec<Option<i64>>,
    /// The node's labels (PreBind checks the volumes' node affinity against them).
    pub node_labels: Labels,
}

fn node_key(node: &str) -> String {
    format!("{STATE_KEY}/node/{node}")
}

/// The class a claim asks for (`None` and empty alike: no class).
fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    claim.storage_class_name.as_deref().unwrap_or_default()
}

/// A claim the PersistentVolume controller has finished binding.
pub fn fully_bound(claim: &PersistentVolumeClaim) -> bool {
    !claim.volume_name.is_empty() && claim.annotations.contains_key(ANNOTATION_BIND_COMPLETED)
}

/// Whether the claim's class binds only once a pod uses it (upstream's
/// `IsDelayBindingMode`: no class, or a class not found, is immediate).
fn delay_binding(claim: &PersistentVolumeClaim) -> bool {
    let class = claim_class(claim);
    !class.is_empty()
        && berth_sdk::storage_class(class)
            .is_some_and(|c| c.volume_binding_mode == VolumeBindingMode::WaitForFirstConsumer)
}

/// The pod's claims, in the order of its volumes, or why it cannot be placed
/// (upstream's `podHasPVCs`): a missing claim, a lost or terminating one, or an
/// ephemeral volume's claim that another object owns.
pub fn pod_claims(pod: &Pod) -> Result<Vec<PersistentVolumeClaim>, String> {
    let mut claims = Vec::new();
    for (name, ephemeral) in pod.volume_claims() {
        let Some(claim) = berth_sdk::persistent_volume_claim(&pod.namespace, &name) else {
            return Err(if ephemeral {
                format!(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}"
                )
            } else {
                format!("persistentvolumeclaim {name:?} not found")
            });
        };
        if claim.phase == berth_sdk::ClaimPhase::Lost {
            return Err(format!(
                "persistentvolumeclaim {:?} bound to non-existent persistentvolume {:?}",
                claim.name, claim.volume_name
            ));
        }
        if claim.terminating {
            return Err(format!(
                "persistentvolumeclaim {:?} is being deleted",
                claim.name
            ));
        }
        if ephemeral && claim.controller_uid.as_deref() != Some(pod.uid.as_str()) {
            return Err(format!(
                "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
                claim.namespace, claim.name, pod.namespace, pod.name
            ));
        }
        claims.push(claim);
    }
    Ok(claims)
}

/// Sorts the claims (upstream's `GetPodVolumeClaims`): an `Err` carries the unbound
/// claims of immediate classes.
pub fn sort_claims(
    claims: Vec<PersistentVolumeClaim>,
) -> Result<PodVolumeClaims, Vec<PersistentVolumeClaim>> {
    let mut out = PodVolumeClaims::default();
    let mut immediate = Vec::new();
    for claim in claims {
        if fully_bound(&claim) {
            out.bound.push(claim);
        } else if delay_binding(&claim) && claim.volume_name.is_empty() {
            out.to_bind.push(claim);
        } else {
            // Pre-bound claims are waiting for the controller too.
            immediate.push(claim);
        }
    }
    if !immediate.is_empty() {
        return Err(immediate);
    }
    for claim in &out.to_bind {
        let class = claim_class(claim).to_owned();
        if let std::collections::btree_map::Entry::Vacant(e) = out.volumes_by_class.entry(class) {
            let volumes = berth_sdk::persistent_volumes_of_class(e.key());
            e.insert(volumes);
        }
    }
    Ok(out)
}

/// The node names a local volume's node affinity allows (upstream's
/// `GetLocalPersistentVolumeNodeNames`): per term, the hostnames every `In`
/// requirement on `kubernetes.io/hostname` allows; the union over terms. Empty when
/// the affinity names no hostnames.
pub fn local_volume_node_names(volume: &PersistentVolume) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for term in volume.node_affinity.iter().flatten() {
        let mut term_names: Option<BTreeSet<String>> = None;
        for r in &term.match_expressions {
            if r.key == HOSTNAME_LABEL
                && r.operator == berth_sdk::affinity::NodeSelectorOperator::In
            {
                let values: BTreeSet<String> = r.values.iter().cloned().collect();
                term_names = Some(match term_names {
                    None => values,
                    Some(t) => t.intersection(&values).cloned().collect(),
                });
            }
        }
        names.extend(term_names.unwrap_or_default());
    }
    names
}

/// The nodes the bound claims' local volumes allow (upstream's `GetEligibleNodes`):
/// `None` when they do not narrow the nodes (or a volume cannot be found).
pub fn eligible_nodes(bound: &[PersistentVolumeClaim]) -> Option<BTreeSet<String>> {
    let mut eligible: Option<BTreeSet<String>> = None;
    for claim in bound {
        let volume = berth_sdk::persistent_volume(&claim.volume_name)?;
        let names = local_volume_node_names(&volume);
        if names.is_empty() {
            continue;
        }
        eligible = Some(match eligible {
            None => names,
            Some(e) => e.intersection(&names).cloned().collect(),
        });
    }
    eligible
}

/// Whether the node's labels satisfy the volume's node affinity (upstream's
/// `CheckNodeAffinity`: labels only).
pub fn node_affinity_allows(volume: &PersistentVolume, labels: &Labels) -> bool {
    volume
        .node_affinity
        .as_ref()
        .is_none_or(|terms| terms.iter().any(|t| t.matches(labels, "")))
}

fn bound_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    volume.claim_ref.as_ref().is_some_and(|r| {
        r.namespace == claim.namespace
            && r.name == claim.name
            && (r.uid.is_empty() || r.uid == claim.uid)
    })
}

/// The volume an unbound claim would get on a node with these labels (upstream's
/// `FindMatchingVolume` on the scheduler's path): one pre-bound to the claim if the
/// node reaches it, else the smallest available one of its class that is big enough,
/// of its volume mode, selected by its selector, with its access modes, that the node
/// reaches.
pub fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &'a [PersistentVolume],
    labels: &Labels,
    excluded: &BTreeSet<String>,
) -> Option<&'a PersistentVolume> {
    let mut smallest: Option<&PersistentVolume> = None;
    for volume in volumes {
        if excluded.contains(&volume.name) {
            continue;
        }
        if volume.claim_ref.is_some() && !bound_to_claim(volume, claim) {
            continue;
        }
        if volume.capacity_storage < claim.requested_storage {
            continue;
        }
        if volume_mode_mismatch(claim, volume) || volume.terminating {
            continue;
        }
        let reachable = node_affinity_allows(volume, labels);
        if bound_to_claim(volume, claim) {
            return reachable.then_some(volume);
        }
        if volume.phase != VolumePhase::Available
            || claim
                .selector
                .as_ref()
                .is_some_and(|s| !s.matches(&volume.labels))
            || volume.storage_class_name != claim_class(claim)
            || !reachable
            || !claim
                .access_modes
                .iter()
                .all(|m| volume.access_modes.contains(m))
        {
            continue;
        }
        if smallest.is_none_or(|s| s.capacity_storage > volume.capacity_storage) {
            smallest = Some(volume);
        }
    }
    smallest
}

fn volume_mode_mismatch(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let block = |m: VolumeMode| m == VolumeMode::Block;
    block(claim.volume_mode) != block(volume.volume_mode)
}

/// Whether the node's labels satisfy a StorageClass's `allowedTopologies` (upstream's
/// `MatchTopologySelectorTerms`: none allows every node; an empty term allows none).
pub fn topology_allows(terms: &[berth_sdk::TopologySelectorTerm], labels: &Labels) -> bool {
    terms.is_empty()
        || terms.iter().any(|t| {
            !t.match_label_expressions.is_empty()
                && t.match_label_expressions
                    .iter()
                    .all(|(k, values)| labels.get(k).is_some_and(|v| values.contains(v)))
        })
}

/// What the pod's claims need of a node (upstream's `FindPodVolumes`): the choices, or
/// the reasons the node does not do; an `Err` is an error (a claim with no class to
/// provision from, a class that does not exist).
pub fn find_pod_volumes(
    claims: &PodVolumeClaims,
    node: &NodeInfo,
) -> Result<(PodVolumes, Vec<&'static str>), String> {
    let labels = &node.node.labels;
    let mut found = PodVolumes {
        node_labels: labels.clone(),
        ..PodVolumes::default()
    };
    let mut bound_satisfied = true;
    let mut bound_found = true;
    let mut unbound_satisfied = true;
    let mut sufficient_storage = true;
    let reasons = |bound_satisfied: bool,
                   unbound_satisfied: bool,
                   sufficient_storage: bool,
                   bound_found: bool| {
        let mut r = Vec::new();
        if !bound_satisfied {
            r.push(ERR_REASON_NODE_CONFLICT);
        }
        if !unbound_satisfied {
            r.push(ERR_REASON_BIND_CONFLICT);
        }
        if !sufficient_storage {
            r.push(ERR_REASON_NOT_ENOUGH_SPACE);
        }
        if !bound_found {
            r.push(ERR_REASON_PV_NOT_EXIST);
        }
        r
    };
    if !claims.bound.is_empty() {
        let csi_node = berth_sdk::csi_node(&node.node.name);
        for claim in &claims.bound {
            let Some(volume) = berth_sdk::persistent_volume(&claim.volume_name) else {
                bound_found = false;
                break;
            };
            let volume = migration::for_node(&volume, csi_node.as_ref())?;
            if !node_affinity_allows(&volume, labels) {
                bound_satisfied = false;
                break;
            }
        }
    }
    if claims.to_bind.is_empty() {
        return Ok((found, reasons(bound_satisfied, true, true, bound_found)));
    }
    let mut to_match = Vec::new();
    let mut to_provision = Vec::new();
    for claim in &claims.to_bind {
        match claim.selected_node() {
            Some(selected) if selected != node.node.name => {
                // Already being provisioned for another node.
                return Ok((found, reasons(bound_satisfied, false, true, bound_found)));
            }
            Some(_) => to_provision.push(claim.clone()),
            None => to_match.push(claim.clone()),
        }
    }
    if !to_match.is_empty() {
        // The smallest requests first, so they get the smallest volumes.
        to_match.sort_by_key(|c| c.requested_storage);
        let mut chosen = BTreeSet::new();
        for claim in to_match {
            let volumes = claims
                .volumes_by_class
                .get(claim_class(&claim))
                .map(Vec::as_slice)
                .unwrap_or_default();
            match find_matching_volume(&claim, volumes, labels, &chosen) {
                Some(volume) => {
                    chosen.insert(volume.name.clone());
                    found.static_bindings.push((volume.clone(), claim));
                }
                None => {
                    unbound_satisfied = false;
                    to_provision.push(claim);
                }
            }
        }
    }
    if !to_provision.is_empty() {
        // Provisioning decides for the unmatched claims (upstream's
        // `checkVolumeProvisions`).
        unbound_satisfied = true;
        for claim in to_provision {
            let class_name = claim_class(&claim);
            if class_name.is_empty() {
                return Err(format!("no class for claim {:?}", claim.key()));
            }
            let class = berth_sdk::storage_class(class_name)
                .ok_or_else(|| format!("failed to find storage class {class_name:?}"))?;
            if class.provisioner.is_empty()
                || class.provisioner == NO_PROVISIONER
                || !topology_allows(&class.allowed_topologies, labels)
            {
                unbound_satisfied = false;
                found.dynamic_provisions.clear();
                found.provision_capacities.clear();
                break;
            }
            let Some(capacity) = node_capacity(&class.provisioner, &claim, class_name, labels)
            else {
                // Upstream answers only "not enough space" here: provisioning would
                // do, but not on this node.
                sufficient_storage = false;
                found.dynamic_provisions.clear();
                found.provision_capacities.clear();
                break;
            };
            found.dynamic_provisions.push(claim);
            found.provision_capacities.push(capacity);
        }
    }
    Ok((
        found,
        reasons(
            bound_satisfied,
            unbound_satisfied,
            sufficient_storage,
            bound_found,
        ),
    ))
}

/// Whether the provisioner can make the claim's volume where the node reaches it
/// (upstream's `hasEnoughCapacity`), and what Score needs of it: only a CSIDriver
/// with `storageCapacity` is checked; then some CSIStorageCapacity of the class whose
/// `nodeTopology` selects the node's labels must have room for the request. A claim
/// that requests nothing (0: the API server requires a request, so only a test makes
/// one) is not checked. `None` when there is not enough; `Some(None)` when capacity is
/// not checked for the claim; `Some(Some(c))` with the `capacity` of the first
/// CSIStorageCapacity that admits it (upstream's `NodeCapacity`; one that sets only
/// `maximumVolumeSize` counts as 0, full).
pub fn node_capacity(
    provisioner: &str,
    claim: &PersistentVolumeClaim,
    class: &str,
    labels: &Labels,
) -> Option<Option<i64>> {
    if claim.requested_storage == 0 {
        return Some(None);
    }
    if !berth_sdk::csi_driver(provisioner).is_some_and(|d| d.storage_capacity) {
        return Some(None);
    }
    berth_sdk::csi_storage_capacities_of_class(class)
        .iter()
        .find(|c| {
            c.storage_class_name == class
                && volume_limit(c).is_some_and(|limit| limit >= claim.requested_storage)
                && c.node_topology.as_ref().is_some_and(|t| t.matches(labels))
        })
        .map(|c| Some(c.capacity.unwrap_or(0)))
}

/// The largest volume a CSIStorageCapacity admits (upstream's `volumeLimit`):
/// `maximumVolumeSize`, the more precise, else `capacity`; `None` when neither is set.
pub fn volume_limit(capacity: &berth_sdk::CsiStorageCapacity) -> Option<i64> {
    capacity.maximum_volume_size.or(capacity.capacity)
}

/// Whether every claim of the pod is fully bound now (upstream's
/// `arePodVolumesBound`).
fn pod_volumes_bound(pod: &Pod) -> bool {
    pod.claim_names().all(|name| {
        berth_sdk::persistent_volume_claim(&pod.namespace, &name).is_some_and(|c| fully_bound(&c))
    })
}

fn claim_ref(claim: &PersistentVolumeClaim) -> ClaimRef {
    ClaimRef {
        namespace: claim.namespace.clone(),
        name: claim.name.clone(),
        uid: claim.uid.clone(),
    }
}

/// Drops what was assumed for these choices.
fn revert(
    bindings: &[(PersistentVolume, PersistentVolumeClaim)],
    provisions: &[PersistentVolumeClaim],
) {
    for (volume, _) in bindings {
        berth_sdk::restore_volume(&volume.name);
    }
    for claim in provisions {
        berth_sdk::restore_claim(&claim.namespace, &claim.name);
    }
}

/// Whether the written bindings are complete (upstream's `checkBindings`): `Ok(false)`
/// to wait on, an `Err` when they cannot complete (a volume's claimRef was dropped,
/// provisioning failed, a volume the node cannot reach).
pub fn check_bindings(volumes: &PodVolumes, node: &str) -> Result<bool, String> {
    let csi_node = berth_sdk::csi_node(node);
    for (volume, claim) in &volumes.static_bindings {
        let volume = berth_sdk::persistent_volume(&volume.name).ok_or_else(|| {
            format!(
                "failed to check binding: persistentvolume {:?} not found",
                volume.name
            )
        })?;
        let claim =
            berth_sdk::persistent_volume_claim(&claim.namespace, &claim.name).ok_or_else(|| {
                format!(
                    "failed to check binding: persistentvolumeclaim {:?} not found",
                    claim.key()
                )
            })?;
        let volume = migration::for_node(&volume, csi_node.as_ref())
            .map_err(|e| format!("failed to translate pv to csi: {e}"))?;
        if !node_affinity_allows(&volume, &volumes.node_labels) {
            return Err(format!(
                "pv {:?} node affinity doesn't match node {node:?}: no matching NodeSelectorTerms",
                volume.name
            ));
        }
        if volume.claim_ref.as_ref().is_none_or(|r| r.uid.is_empty()) {
            return Err(format!("ClaimRef got reset for pv {:?}", volume.name));
        }
        if !fully_bound(&claim) {
            return Ok(false);
        }
    }
    for claim in &volumes.dynamic_provisions {
        let claim =
            berth_sdk::persistent_volume_claim(&claim.namespace, &claim.name).ok_or_else(|| {
                format!(
                    "failed to check provisioning pvc: persistentvolumeclaim {:?} not found",
                    claim.key()
                )
            })?;
        if claim.selected_node() != Some(node) {
            // A provisioner that fails drops the annotation to tell the scheduler.
            return Err(format!("provisioning failed for PVC {:?}", claim.name));
        }
        if !claim.volume_name.is_empty() {
            let Some(volume) = berth_sdk::persistent_volume(&claim.volume_name) else {
                // Not seen yet.
                return Ok(false);
            };
            let volume = migration::for_node(&volume, csi_node.as_ref())?;
            if !node_affinity_allows(&volume, &volumes.node_labels) {
                return Err(format!(
                    "pv {:?} node affinity doesn't match node {node:?}: no matching NodeSelectorTerms",
                    volume.name
                ));
            }
        }
        if !fully_bound(&claim) {
            return Ok(false);
        }
    }
    Ok(true)
}

impl VolumeBinding {
    /// Writes the choices through the cluster and waits until the claims are bound
    /// (upstream's `BindPodVolumes`).
    fn bind_pod_volumes(&self, volumes: &PodVolumes, node: &str) -> Result<(), String> {
        for (i, (volume, claim)) in volumes.static_bindings.iter().enumerate() {
            if let Err(e) = berth_sdk::bind_volume(&volume.name, &claim_ref(claim)) {
                // Only what was not written is dropped; the rest is the cluster's now.
                revert(&volumes.static_bindings[i..], &volumes.dynamic_provisions);
                return Err(e);
            }
        }
        for (i, claim) in volumes.dynamic_provisions.iter().enumerate() {
            if let Err(e) = berth_sdk::select_node_for_claim(&claim.namespace, &claim.name, node) {
                revert(&[], &volumes.dynamic_provisions[i..]);
                return Err(e);
            }
        }
        let mut left_ms = u64::try_from(self.args.bind_timeout_seconds)
            .unwrap_or_default()
            .saturating_mul(1000);
        let mut generation = berth_sdk::storage_generation();
        loop {
            match check_bindings(volumes, node) {
                Ok(true) => return Ok(()),
                Err(e) => return Err(format!("binding volumes: {e}")),
                Ok(false) if left_ms == 0 => {
                    return Err("binding volumes: context deadline exceeded".into());
                }
                Ok(false) => {
                    let (now, waited) =
                        berth_sdk::wait_storage_change(generation, left_ms.min(1000));
                    generation = now;
                    left_ms = left_ms.saturating_sub(waited.max(1));
                }
            }
        }
    }

    /// Upstream's `isSchedulableAfterPersistentVolumeClaimChange`: Queue when the claim
    /// is one the pod uses.
    fn after_claim_change(&self, pod: &Pod, new: Option<&Object>) -> Result<QueueingHint, String> {
        let claim = berth_sdk::events::required(
            new,
            Object::as_persistent_volume_claim,
            "persistentvolumeclaim",
            "new",
        )?;
        Ok(if pod.uses_claim(claim) {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        })
    }

    /// Upstream's `isSchedulableAfterStorageClassChange`: a new class, or a change of
    /// `allowedTopologies`.
    fn after_class_change(
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let new =
            berth_sdk::events::required(new, Object::as_storage_class, "storageclass", "new")?;
        Ok(match old.and_then(Object::as_storage_class) {
            Some(old) if old.allowed_topologies == new.allowed_topologies => {
                QueueingHint::QueueSkip
            }
            _ => QueueingHint::Queue,
        })
    }

    /// Upstream's `isSchedulableAfterCSINodeChange`: a new CSINode, or a change of the
    /// plugins it lists as migrated (which changes how in-tree volumes are checked).
    fn after_csi_node_change(
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let Some(old) = old else {
            return Ok(QueueingHint::Queue);
        };
        let old = berth_sdk::events::required(Some(old), Object::as_csi_node, "csinode", "old")?;
        let new = berth_sdk::events::required(new, Object::as_csi_node, "csinode", "new")?;
        Ok(if old.migrated_plugins != new.migrated_plugins {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        })
    }

    /// Upstream's `isSchedulableAfterCSIStorageCapacityChange`: a capacity of a class
    /// one of the pod's claims asks for that is new, or whose volume limit grew (its
    /// class and topology cannot change). A claim of the pod that is missing is an
    /// error (the pod is queued).
    fn after_capacity_change(
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let new = berth_sdk::events::required(
            new,
            Object::as_csi_storage_capacity,
            "csistoragecapacity",
            "new",
        )?;
        let mut uses_class = false;
        for name in pod.claim_names() {
            let claim = berth_sdk::persistent_volume_claim(&pod.namespace, &name)
                .ok_or_else(|| format!("persistentvolumeclaim \"{name}\" not found"))?;
            uses_class |=
                !new.storage_class_name.is_empty() && claim_class(&claim) == new.storage_class_name;
        }
        if !uses_class {
            return Ok(QueueingHint::QueueSkip);
        }
        let Some(old) = old.and_then(Object::as_csi_storage_capacity) else {
            return Ok(QueueingHint::Queue);
        };
        Ok(match (volume_limit(old), volume_limit(new)) {
            (_, None) => QueueingHint::QueueSkip,
            (None, Some(_)) => QueueingHint::Queue,
            (Some(o), Some(n)) if n > o => QueueingHint::Queue,
            _ => QueueingHint::QueueSkip,
        })
    }

    /// Upstream's `isSchedulableAfterCSIDriverChange`: a driver of one of the pod's
    /// inline volumes stopped asking for storage capacity.
    fn after_driver_change(
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let new = berth_sdk::events::required(new, Object::as_csi_driver, "csidriver", "new")?;
        let old = berth_sdk::events::required(old, Object::as_csi_driver, "csidriver", "old")?;
        let uses = pod
            .volumes
            .iter()
            .any(|v| matches!(&v.source, VolumeSource::Csi { driver } if *driver == new.name));
        Ok(if uses && old.storage_capacity && !new.storage_capacity {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        })
    }
}

impl Plugin for VolumeBinding {
    const NAME: &'static str = "VolumeBinding";
    // PreFilter answers Skip and nothing else acts: a pod without volumes has no claims to bind.
    fn only_for_pods_with(&self) -> &[berth_sdk::PodFeature] {
        &[berth_sdk::PodFeature::Volumes]
    }

    fn new(args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(VolumeBinding {
            args: Args::from_json(args)?,
        })
    }

    /// As upstream with queueing hints: a StorageClass added or updated (hint), a
    /// claim added or updated (hint), a volume added or updated, a node added or
    /// relabelled, a CSINode added or updated (hint), a CSIDriver updated (hint), a
    /// CSIStorageCapacity added or updated (hint).
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![
            EventRegistration::with_hint(
                EventResource::StorageClass,
                ActionType::ADD | ActionType::UPDATE,
            ),
            EventRegistration::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD | ActionType::UPDATE,
            ),
            EventRegistration::without_hint(
                EventResource::PersistentVolume,
                ActionType::ADD | ActionType::UPDATE,
            ),
            EventRegistration::without_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_TAINT,
            ),
            EventRegistration::with_hint(
                EventResource::CsiNode,
                ActionType::ADD | ActionType::UPDATE,
            ),
            EventRegistration::with_hint(EventResource::CsiDriver, ActionType::UPDATE),
            EventRegistration::with_hint(
                EventResource::CsiStorageCapacity,
                ActionType::ADD | ActionType::UPDATE,
            ),
        ])
    }
}

impl EnqueueExtensions for VolumeBinding {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::PersistentVolumeClaim => self.after_claim_change(pod, new),
            EventResource::StorageClass => Self::after_class_change(old, new),
            EventResource::CsiNode => Self::after_csi_node_change(old, new),
            EventResource::CsiDriver => Self::after_driver_change(pod, old, new),
            EventResource::CsiStorageCapacity => Self::after_capacity_change(pod, old, new),
            _ => Ok(QueueingHint::Queue),
        }
    }
}

impl PreFilter for VolumeBinding {
    fn pre_filter(&self, state: &CycleState, pod: &Pod, _nodes: &[&NodeInfo]) -> PreFilterResult {
        let claims = match pod_claims(pod) {
            Ok(c) => c,
            Err(reason) => return Status::unresolvable(reason).into(),
        };
        if claims.is_empty() {
            return Status::skip().into();
        }
        let claims = match sort_claims(claims) {
            Ok(c) => c,
            Err(_) => return Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE).into(),
        };
        let node_names = eligible_nodes(&claims.bound).map(|n| n.into_iter().collect());
        state.write(STATE_KEY, &claims);
        PreFilterResult {
            status: Status::success(),
            node_names,
        }
    }
}

impl Filter for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let Some(claims) = state.read::<PodVolumeClaims>(STATE_KEY) else {
            return Status::error(format!("reading {STATE_KEY:?} from cycleState: not found"));
        };
        match find_pod_volumes(&claims, node) {
            Err(e) => Status::error(e),
            Ok((_, reasons)) if !reasons.is_empty() => Status::new(
                Code::UnschedulableAndUnresolvable,
                reasons.into_iter().map(str::to_owned).collect(),
            ),
            Ok((volumes, _)) => {
                state.write(&node_key(&node.node.name), &volumes);
                Status::success()
            }
        }
    }
}

impl PreScore for VolumeBinding {
    fn pre_score(
        &self,
        _state: &CycleState,
        pod: &Pod,
        _nodes: &[&NodeInfo],
        _all: &[&NodeInfo],
    ) -> Status {
        // With StorageCapacityScoring every pod with claims is scored (the nodes it
        // would provision on by their storage capacity). A pod without claims would
        // score 0 everywhere, as upstream scores it: skipped, to the same effect.
        if pod.claim_names().next().is_some() {
            Status::success()
        } else {
            Status::skip()
        }
    }
}

impl Score for VolumeBinding {
    /// The utilization per class (requested over capacity) of the pre-provisioned
    /// volumes the pod would bind on the node or, when it would bind none, of the
    /// node's storage capacity by the claims it would provision there; through the
    /// shape, averaged over the classes.
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let Some(volumes) = state.read::<PodVolumes>(&node_key(&node.node.name)) else {
            return Ok(0);
        };
        let mut by_class: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for (volume, claim) in &volumes.static_bindings {
            let e = by_class
                .entry(volume.storage_class_name.as_str())
                .or_default();
            e.0 += claim.requested_storage;
            e.1 += volume.capacity_storage;
        }
        if volumes.static_bindings.is_empty() {
            for (claim, capacity) in volumes
                .dynamic_provisions
                .iter()
                .zip(&volumes.provision_capacities)
            {
                let Some(capacity) = *capacity else {
                    continue;
                };
                // The class's capacity on the node is one figure, however many of
                // its claims go there: set, not summed.
                let e = by_class.entry(claim_class(claim)).or_default();
                e.0 += claim.requested_storage;
                e.1 = capacity;
            }
        }
        if by_class.is_empty() {
            return Ok(0);
        }
        let total: i64 = by_class
            .values()
            .map(|&(requested, capacity)| {
                let utilization = if capacity == 0 || requested > capacity {
                    MAX_UTILIZATION
                } else {
                    requested * MAX_UTILIZATION / capacity
                };
                broken_linear(&self.args.shape, utilization)
            })
            .sum();
        let n = by_class.len() as f64;
        Ok((total as f64 / n).round() as i64)
    }
}

impl Reserve for VolumeBinding {
    /// Assumes the node's choices in the host (upstream's `AssumePodVolumes`), unless
    /// every claim is bound already.
    fn reserve(&self, state: &CycleState, pod: &Pod, node: &str) -> Status {
        let Some(volumes) = state.read::<PodVolumes>(&node_key(node)) else {
            // The pod has no claims.
            state.write(ALL_BOUND_KEY, &true);
            return Status::success();
        };
        if pod_volumes_bound(pod) {
            state.write(ALL_BOUND_KEY, &true);
            return Status::success();
        }
        for (i, (volume, claim)) in volumes.static_bindings.iter().enumerate() {
            let already = bound_to_claim(volume, claim)
                && volume
                    .annotations
                    .contains_key(berth_sdk::ANNOTATION_BOUND_BY_CONTROLLER);
            if already {
                continue;
            }
            if let Err(e) = berth_sdk::assume_volume_bound(&volume.name, &claim_ref(claim)) {
                revert(&volumes.static_bindings[..i], &[]);
                return Status::error(e);
            }
        }
        for (i, claim) in volumes.dynamic_provisions.iter().enumerate() {
            if let Err(e) = berth_sdk::assume_claim_provisioned(&claim.namespace, &claim.name, node)
            {
                revert(&volumes.static_bindings, &volumes.dynamic_provisions[..i]);
                return Status::error(e);
            }
        }
        state.write(ALL_BOUND_KEY, &false);
        Status::success()
    }

    /// Drops what Reserve assumed (upstream's `RevertAssumedPodVolumes`).
    fn unreserve(&self, state: &CycleState, _pod: &Pod, node: &str) {
        if let Some(volumes) = state.read::<PodVolumes>(&node_key(node)) {
            revert(&volumes.static_bindings, &volumes.dynamic_provisions);
        }
    }
}

impl PreBind for VolumeBinding {
    fn pre_bind(&self, state: &CycleState, _pod: &Pod, node: &str) -> Status {
        match state.read::<bool>(ALL_BOUND_KEY) {
            Some(true) => return Status::success(),
            Some(false) => {}
            None => {
                return Status::error(format!(
                    "reading {ALL_BOUND_KEY:?} from cycleState: not found"
                ));
            }
        }
        let Some(volumes) = state.read::<PodVolumes>(&node_key(node)) else {
            return Status::error(format!("no pod volumes found for node {node:?}"));
        };
        match self.bind_pod_volumes(&volumes, node) {
            Ok(()) => Status::success(),
            Err(e) => Status::error(e),
        }
    }
}

impl Sign for VolumeBinding {
    /// PreFilter reads the claims (each found in the pod's namespace; an ephemeral
    /// volume's by the pod's name, and owned by its UID), Filter and Score only what
    /// PreFilter stored: the volume signer covers them, and refuses ephemeral volumes.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        Ok(vec![sign::volumes(pod)?])
    }
}

berth_sdk::export_plugin!(VolumeBinding: queueing_hint, pre_filter, filter, pre_score, score, reserve, pre_bind, sign_pod);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::affinity::{NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm};
    use berth_sdk::serde_json::json;

    fn hostnames(terms: &[&[&str]]) -> PersistentVolume {
        PersistentVolume {
            node_affinity: Some(
                terms
                    .iter()
                    .map(|names| NodeSelectorTerm {
                        match_expressions: vec![NodeSelectorRequirement {
                            key: HOSTNAME_LABEL.into(),
                            operator: NodeSelectorOperator::In,
                            values: names.iter().map(|n| (*n).to_owned()).collect(),
                        }],
                        match_fields: vec![],
                    })
                    .collect(),
            ),
            ..PersistentVolume::default()
        }
    }

    #[test]
    fn local_volumes_name_their_nodes_by_hostname() {
        let v = hostnames(&[&["a", "b"], &["c"]]);
        assert_eq!(
            local_volume_node_names(&v).into_iter().collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert!(local_volume_node_names(&PersistentVolume::default()).is_empty());
    }

    #[test]
    fn args_default_validate_and_scale() {
        let a = Args::from_json(berth_sdk::serde_json::Value::Null).unwrap();
        assert_eq!(a.bind_timeout_seconds, 600);
        // StorageCapacityScoring's default shape (1.37): the emptier the better.
        let emptier_is_better = [(0, 100), (100, 0)];
        let points = |a: &Args| -> Vec<(i64, i64)> {
            a.shape.iter().map(|p| (p.utilization, p.score)).collect()
        };
        assert_eq!(points(&a), emptier_is_better);
        // An empty shape is no shape, as upstream's defaulting has it.
        let a = Args::from_json(json!({"shape": []})).unwrap();
        assert_eq!(points(&a), emptier_is_better);
        let a = Args::from_json(
            json!({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}),
        )
        .unwrap();
        assert_eq!(a.shape[1].score, 100);
        assert_eq!(
            Args::from_json(json!({"bindTimeoutSeconds": -1})).unwrap_err(),
            "bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"
        );
        assert!(
            Args::from_json(
                json!({"shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]})
            )
            .unwrap_err()
            .starts_with("shape[1].utilization: Invalid value: 10")
        );
        assert!(
            Args::from_json(json!({"bogus": 1}))
                .unwrap_err()
                .contains("bogus")
        );
    }

    #[test]
    fn allowed_topologies_need_one_whole_term() {
        let labels: Labels = [("zone".to_owned(), "a".to_owned())].into_iter().collect();
        let term = |k: &str, v: &str| berth_sdk::TopologySelectorTerm {
            match_label_expressions: vec![(k.to_owned(), vec![v.to_owned()])],
        };
        assert!(topology_allows(&[], &labels));
        assert!(topology_allows(
            &[term("zone", "b"), term("zone", "a")],
            &labels
        ));
        assert!(!topology_allows(&[term("zone", "b")], &labels));
        assert!(!topology_allows(
            &[berth_sdk::TopologySelectorTerm::default()],
            &labels
        ));
    }

    #[test]
    fn the_smallest_fitting_volume_is_matched_and_a_pre_bound_one_first() {
        let claim = PersistentVolumeClaim {
            namespace: "ns".into(),
            name: "c".into(),
            uid: "cu".into(),
            storage_class_name: Some("local".into()),
            requested_storage: 10,
            access_modes: vec![berth_sdk::AccessMode::ReadWriteOnce],
            ..PersistentVolumeClaim::default()
        };
        let pv = |name: &str, size: i64| PersistentVolume {
            name: name.into(),
            storage_class_name: "local".into(),
            capacity_storage: size,
            access_modes: vec![berth_sdk::AccessMode::ReadWriteOnce],
            ..PersistentVolume::default()
        };
        let labels = Labels::new();
        let none = BTreeSet::new();
        let vols = vec![pv("big", 100), pv("small", 20), pv("tiny", 5)];
        assert_eq!(
            find_matching_volume(&claim, &vols, &labels, &none)
                .unwrap()
                .name,
            "small"
        );
        let taken: BTreeSet<String> = ["small".to_owned()].into();
        assert_eq!(
            find_matching_volume(&claim, &vols, &labels, &taken)
                .unwrap()
                .name,
            "big"
        );
        let mut prebound = pv("pre", 1000);
        prebound.claim_ref = Some(claim_ref(&claim));
        let vols = vec![pv("small", 20), prebound];
        assert_eq!(
            find_matching_volume(&claim, &vols, &labels, &none)
                .unwrap()
                .name,
            "pre"
        );
    }

    #[test]
    fn signs_pods_by_their_volumes() {
        use berth_sdk::Sign;
        let plugin = VolumeBinding::new(berth_sdk::serde_json::Value::Null).unwrap();
        berth_sdk::testing::check_signs_by_volumes(|p| plugin.sign_pod(p));
    }
}
