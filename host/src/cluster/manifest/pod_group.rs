//! `scheduling.k8s.io` PodGroup (workload-aware scheduling, kube-scheduler 1.36 and
//! later): the object a pod names in `spec.schedulingGroup.podGroupName`. The API
//! kinds are newer than k8s-openapi's, so their shape is declared here, as the API
//! server serves them; fields scheduling does not read are accepted and ignored.

use super::{DEFAULT_NAMESPACE, FieldError};
use serde::Deserialize;

/// A PodGroup's scheduling policy (`spec.schedulingPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodGroupPolicy {
    /// `basic: {}`: members are scheduled as they come; the group only batches them.
    Basic,
    /// `gang: {minCount}`: nothing binds until `min_count` members can.
    Gang {
        /// `minCount`.
        min_count: u32,
    },
}

/// A PodGroup object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodGroupObject {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.schedulingPolicy`.
    pub policy: PodGroupPolicy,
    /// The keys of `spec.schedulingConstraints.topology` (a group placed within one
    /// domain of the first, by TopologyPlacementGenerator).
    pub topology_keys: Vec<String>,
}

impl PodGroupObject {
    /// The gang's `minCount`; `None` for the basic policy.
    pub fn min_count(&self) -> Option<u32> {
        match self.policy {
            PodGroupPolicy::Basic => None,
            PodGroupPolicy::Gang { min_count } => Some(min_count),
        }
    }
}

/// The API versions of PodGroup Berth reads (1.37 serves `v1beta1`; `v1alpha3`
/// has the same fields).
pub const POD_GROUP_API_VERSIONS: [&str; 2] =
    ["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"];

/// A PodGroup as the API server serves it (the parts scheduling reads).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupManifest {
    /// `metadata`.
    #[serde(default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: Option<PodGroupSpec>,
}

/// `spec` of a PodGroup.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// `schedulingPolicy`: exactly one of `basic` and `gang`.
    #[serde(default)]
    pub scheduling_policy: Option<SchedulingPolicy>,
    /// `schedulingConstraints`.
    #[serde(default)]
    pub scheduling_constraints: Option<SchedulingConstraints>,
}

/// `spec.schedulingConstraints`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingConstraints {
    /// `topology`: the domains the group is placed within (upstream serves one).
    #[serde(default)]
    pub topology: Vec<TopologyConstraint>,
}

/// One entry of `spec.schedulingConstraints.topology`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyConstraint {
    /// `key`: a node label.
    #[serde(default)]
    pub key: String,
}

/// `spec.schedulingPolicy`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    /// `basic: {}`.
    #[serde(default)]
    pub basic: Option<serde_json::Value>,
    /// `gang: {minCount}`.
    #[serde(default)]
    pub gang: Option<GangPolicy>,
}

/// `spec.schedulingPolicy.gang`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GangPolicy {
    /// `minCount`: at least 1.
    #[serde(default)]
    pub min_count: Option<i64>,
}

/// The PodGroup scheduling reads; the error names the bad field, as the API
/// server's validation would.
pub fn pod_group_from(pg: &PodGroupManifest) -> Result<PodGroupObject, FieldError> {
    let name = pg.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(FieldError::new("metadata.name", "required value"));
    }
    let namespace = pg
        .metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    let policy = pg
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_policy.as_ref())
        .ok_or_else(|| FieldError::new("spec.schedulingPolicy", "required value"))?;
    let policy = match (&policy.basic, &policy.gang) {
        (Some(_), None) => PodGroupPolicy::Basic,
        (None, Some(gang)) => {
            let min_count = gang.min_count.ok_or_else(|| {
                FieldError::new("spec.schedulingPolicy.gang.minCount", "required value")
            })?;
            let min_count = u32::try_from(min_count)
                .ok()
                .filter(|m| *m >= 1)
                .ok_or_else(|| {
                    FieldError::new(
                        "spec.schedulingPolicy.gang.minCount",
                        format!("invalid value {min_count}: must be greater than or equal to 1"),
                    )
                })?;
            PodGroupPolicy::Gang { min_count }
        }
        (None, None) => {
            return Err(FieldError::new(
                "spec.schedulingPolicy",
                "must specify one of: `basic`, `gang`",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(FieldError::new(
                "spec.schedulingPolicy",
                "may specify only one of: `basic`, `gang`",
            ));
        }
    };
    let mut topology_keys = Vec::new();
    let topology = pg
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_constraints.as_ref())
        .map_or(&[][..], |c| c.topology.as_slice());
    for (i, t) in topology.iter().enumerate() {
        if t.key.is_empty() {
            return Err(FieldError::new(
                format!("spec.schedulingConstraints.topology[{i}].key"),
                "required value",
            ));
        }
        topology_keys.push(t.key.clone());
    }
    Ok(PodGroupObject {
        namespace,
        name,
        policy,
        topology_keys,
    })
}
