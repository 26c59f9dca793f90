//! `scheduling.k8s.io` PodGroup (workload-aware scheduling, kube-scheduler 1.36 and
//! later): the object a pod names in `spec.schedulingGroup.podGroupName`. The API
//! kinds are newer than k8s-openapi's, so their shape is declared here, as the API
//! server serves them; fields scheduling does not read are accepted and ignored.

use super::{DEFAULT_NAMESPACE, FieldError};
use crate::cluster::pod_groups::{PodGroupObject, PodGroupPolicy};
use serde::Deserialize;

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
    Ok(PodGroupObject {
        namespace,
        name,
        policy,
    })
}
