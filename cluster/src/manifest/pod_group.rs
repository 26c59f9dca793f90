//! `scheduling.k8s.io` PodGroup (workload-aware scheduling, kube-scheduler 1.36 and
//! later): the object a pod names in `spec.schedulingGroup.podGroupName`. The API
//! kinds are newer than k8s-openapi's, so their shape is declared here, as the API
//! server serves them; fields scheduling does not read are accepted and ignored.

use super::{BUILT_IN_PRIORITY_CLASSES, FieldError, PriorityAdmission};
use berth_sdk::PreemptionPolicy;
use serde::Deserialize;

/// A PodGroup's scheduling policy (`spec.schedulingPolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodGroupPolicy {
    /// `basic: {}`: members are scheduled as they come; the group only batches them.
    #[default]
    Basic,
    /// `gang: {minCount}`: nothing binds until `min_count` members can.
    Gang {
        /// `minCount`.
        min_count: u32,
    },
}

/// A PodGroup object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// `spec.priority`: the group's priority as a preemptor and as a victim (its
    /// members' own priorities do not count in workload-aware preemption); 0 when
    /// unset, as upstream's `PodGroupPriority`.
    pub priority: i32,
    /// `spec.preemptionPolicy` (`PreemptLowerPriority` when unset).
    pub preemption_policy: PreemptionPolicy,
    /// `spec.disruptionMode` is `all: {}`: the members are preempted together or
    /// not at all (`single`, the default, lets each go alone).
    pub disruption_all: bool,
    /// `spec.workloadRef`: the Workload and the template within it the group was
    /// made from.
    pub template_ref: Option<WorkloadTemplateRef>,
    /// The priority admission still to be done when `spec.priority` is unset (a
    /// manifest's PodGroup naming a class): `simulate` does it as the API server's
    /// admission would; a cluster's PodGroups were admitted already.
    pub admission: Option<PriorityAdmission>,
}

/// `spec.workloadRef` of a PodGroup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadTemplateRef {
    /// `workloadName`.
    pub workload_name: String,
    /// `templateName`: one of the Workload's `spec.podGroupTemplates`.
    pub template_name: String,
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
    /// `priorityClassName`.
    #[serde(default)]
    pub priority_class_name: Option<String>,
    /// `priority`.
    #[serde(default)]
    pub priority: Option<i32>,
    /// `preemptionPolicy`: `PreemptLowerPriority` or `Never`.
    #[serde(default)]
    pub preemption_policy: Option<String>,
    /// `disruptionMode`: exactly one of `single` and `all`.
    #[serde(default)]
    pub disruption_mode: Option<DisruptionMode>,
    /// `workloadRef`.
    #[serde(default)]
    pub workload_ref: Option<WorkloadRefManifest>,
    /// `podGroupTemplateRef`: not a field of 1.37's PodGroup (it names its Workload
    /// in `workloadRef`); kept to say so rather than drop it unread.
    #[serde(default)]
    pub pod_group_template_ref: Option<serde_json::Value>,
}

/// `spec.disruptionMode`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionMode {
    /// `single: {}`.
    #[serde(default)]
    pub single: Option<serde_json::Value>,
    /// `all: {}`.
    #[serde(default)]
    pub all: Option<serde_json::Value>,
}

/// `spec.workloadRef`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRefManifest {
    /// `workloadName`.
    #[serde(default)]
    pub workload_name: String,
    /// `templateName`.
    #[serde(default)]
    pub template_name: String,
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

/// The PodGroup scheduling reads from an object as the API server serves it (a list
/// item or a watch event's object, in any of [`POD_GROUP_API_VERSIONS`]): a field of
/// the wrong type is named by its path, as [`pod_group_from`] names a bad value.
pub fn pod_group_from_json(value: serde_json::Value) -> Result<PodGroupObject, FieldError> {
    let pg: PodGroupManifest = from_json(value)?;
    // The API server's priority admission ran before it stored the object: an
    // unset priority stays 0, as upstream reads it.
    let mut g = pod_group_from(&pg)?;
    g.admission = None;
    Ok(g)
}

/// An object as the API server serves it, read as `T`; a field of the wrong type is
/// named by its path.
pub(super) fn from_json<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        // serde_path_to_error writes the empty path as ".".
        let path = if path == "." { String::new() } else { path };
        FieldError::new(path, e.inner().to_string())
    })
}

/// A `schedulingPolicy` (of a PodGroup, or of a Workload's template), `path` being
/// its own path: exactly one of `basic` and `gang`, a gang's `minCount` at least 1.
pub(super) fn policy_from(
    policy: Option<&SchedulingPolicy>,
    path: &str,
) -> Result<PodGroupPolicy, FieldError> {
    let policy = policy.ok_or_else(|| FieldError::new(path, "required value"))?;
    match (&policy.basic, &policy.gang) {
        (Some(_), None) => Ok(PodGroupPolicy::Basic),
        (None, Some(gang)) => {
            let field = format!("{path}.gang.minCount");
            let min_count = gang
                .min_count
                .ok_or_else(|| FieldError::new(field.clone(), "required value"))?;
            let min_count = u32::try_from(min_count)
                .ok()
                .filter(|m| *m >= 1)
                .ok_or_else(|| {
                    FieldError::new(
                        field,
                        format!("invalid value {min_count}: must be greater than or equal to 1"),
                    )
                })?;
            Ok(PodGroupPolicy::Gang { min_count })
        }
        (None, None) => Err(FieldError::new(
            path,
            "must specify one of: `basic`, `gang`",
        )),
        (Some(_), Some(_)) => Err(FieldError::new(
            path,
            "may specify only one of: `basic`, `gang`",
        )),
    }
}

/// The topology keys of a `schedulingConstraints` at `path` (none when absent); each
/// key is required.
pub(super) fn topology_keys_from(
    constraints: Option<&SchedulingConstraints>,
    path: &str,
) -> Result<Vec<String>, FieldError> {
    let topology = constraints.map_or(&[][..], |c| c.topology.as_slice());
    topology
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if t.key.is_empty() {
                Err(FieldError::new(
                    format!("{path}.topology[{i}].key"),
                    "required value",
                ))
            } else {
                Ok(t.key.clone())
            }
        })
        .collect()
}

/// Whether a `disruptionMode` at `path` is `all: {}` (`single: {}`, the default,
/// when absent); exactly one of the two when present.
pub(super) fn disruption_all_from(
    mode: Option<&DisruptionMode>,
    path: &str,
) -> Result<bool, FieldError> {
    match mode {
        None => Ok(false),
        Some(DisruptionMode {
            single: Some(_),
            all: None,
        }) => Ok(false),
        Some(DisruptionMode {
            single: None,
            all: Some(_),
        }) => Ok(true),
        Some(DisruptionMode {
            single: None,
            all: None,
        }) => Err(FieldError::new(
            path,
            "must specify one of: `single`, `all`",
        )),
        Some(_) => Err(FieldError::new(
            path,
            "may specify only one of: `single`, `all`",
        )),
    }
}

/// The PodGroup scheduling reads; the error names the bad field, as the API
/// server's validation would.
pub fn pod_group_from(pg: &PodGroupManifest) -> Result<PodGroupObject, FieldError> {
    let name = super::required_name(&pg.metadata)?;
    let namespace = super::namespace_of(&pg.metadata);
    let spec = pg.spec.clone().unwrap_or_default();
    let policy = policy_from(spec.scheduling_policy.as_ref(), "spec.schedulingPolicy")?;
    let topology_keys = topology_keys_from(
        spec.scheduling_constraints.as_ref(),
        "spec.schedulingConstraints",
    )?;
    let preemption_policy = match spec.preemption_policy.as_deref() {
        None | Some("PreemptLowerPriority") => PreemptionPolicy::PreemptLowerPriority,
        Some("Never") => PreemptionPolicy::Never,
        Some(other) => {
            return Err(FieldError::new(
                "spec.preemptionPolicy",
                format!(
                    "unsupported value {other:?}: supported values: \"Never\", \"PreemptLowerPriority\""
                ),
            ));
        }
    };
    let disruption_all = disruption_all_from(spec.disruption_mode.as_ref(), "spec.disruptionMode")?;
    if spec.pod_group_template_ref.is_some() {
        return Err(FieldError::new(
            "spec.podGroupTemplateRef",
            "unknown field: a 1.37 PodGroup names its Workload in `spec.workloadRef` \
             (`workloadName`, `templateName`)",
        ));
    }
    let template_ref = match spec.workload_ref.as_ref() {
        None => None,
        Some(w) => {
            if w.workload_name.is_empty() {
                return Err(FieldError::new(
                    "spec.workloadRef.workloadName",
                    "required value",
                ));
            }
            if w.template_name.is_empty() {
                return Err(FieldError::new(
                    "spec.workloadRef.templateName",
                    "required value",
                ));
            }
            Some(WorkloadTemplateRef {
                workload_name: w.workload_name.clone(),
                template_name: w.template_name.clone(),
            })
        }
    };
    // As for pods: a stated priority stands, a built-in class gives its value;
    // otherwise the class (or the global default class) is admitted later.
    let class = spec.priority_class_name.clone().unwrap_or_default();
    let built_in = BUILT_IN_PRIORITY_CLASSES
        .iter()
        .find(|(n, _)| *n == class)
        .map(|(_, v)| *v);
    let admission = (spec.priority.is_none() && built_in.is_none()).then(|| PriorityAdmission {
        class,
        policy_given: spec.preemption_policy.is_some(),
    });
    Ok(PodGroupObject {
        namespace,
        name,
        policy,
        topology_keys,
        priority: spec.priority.or(built_in).unwrap_or(0),
        preemption_policy,
        disruption_all,
        template_ref,
        admission,
    })
}

/// Upstream-shaped objects the tests of the manifest readers and of the kube
/// backend share.
#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::{Value, json};

    /// The gang PodGroup `ml/trainer` (minCount 4) exactly as a 1.37 API server
    /// returns it from a GET, at resourceVersion `rv` with these status conditions (a
    /// list's items are the same without apiVersion and kind).
    pub(crate) fn served_pod_group(rv: u64, conditions: Vec<Value>) -> Value {
        json!({
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": "trainer",
                "namespace": "ml",
                "uid": "0f6f3c2e-3d0c-4a4e-9a57-6a1d1c7c2b10",
                "resourceVersion": rv.to_string(),
                "generation": 2,
                "creationTimestamp": "2026-11-20T08:14:03Z",
                "labels": {"app": "trainer"},
                "managedFields": [
                    {
                        "manager": "kubectl-client-side-apply",
                        "operation": "Update",
                        "apiVersion": "scheduling.k8s.io/v1beta1",
                        "time": "2026-11-20T08:14:03Z",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:spec": {"f:schedulingPolicy": {"f:gang": {"f:minCount": {}}}}}
                    },
                    {
                        "manager": "kube-scheduler",
                        "operation": "Update",
                        "apiVersion": "scheduling.k8s.io/v1beta1",
                        "time": "2026-11-20T08:14:05Z",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:status": {"f:conditions": {}}},
                        "subresource": "status"
                    }
                ]
            },
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 4}},
                "disruptionMode": {"single": {}},
                "priority": 0
            },
            "status": {"conditions": conditions}
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn served_gang() -> serde_json::Value {
        fixtures::served_pod_group(
            48213,
            vec![json!({
                "type": "PodGroupInitiallyScheduled",
                "status": "False",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-11-20T08:14:05Z",
                "reason": "Unschedulable",
                "message": "pod group ml/trainer cannot be placed: 2 of 4 pods fit"
            })],
        )
    }

    #[test]
    fn a_pod_group_as_the_api_server_serves_it_is_read() {
        let g = pod_group_from_json(served_gang()).unwrap();
        assert_eq!(
            g,
            PodGroupObject {
                namespace: "ml".into(),
                name: "trainer".into(),
                policy: PodGroupPolicy::Gang { min_count: 4 },
                topology_keys: Vec::new(),
                priority: 0,
                preemption_policy: PreemptionPolicy::PreemptLowerPriority,
                disruption_all: false,
                template_ref: None,
                admission: None,
            }
        );
        let mut basic = served_gang();
        basic["apiVersion"] = "scheduling.k8s.io/v1alpha3".into();
        basic["spec"] =
            json!({"schedulingPolicy": {"basic": {}}, "disruptionMode": {"single": {}}});
        basic["status"] = json!({});
        assert_eq!(
            pod_group_from_json(basic).unwrap().policy,
            PodGroupPolicy::Basic
        );
    }

    #[test]
    fn a_bad_pod_group_names_its_field() {
        let bad = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v = served_gang();
            edit(&mut v);
            let e = pod_group_from_json(v).unwrap_err();
            format!("{e}")
        };
        assert_eq!(
            bad(&|v| v["spec"]["schedulingPolicy"]["gang"]["minCount"] = 0.into()),
            "spec.schedulingPolicy.gang.minCount: invalid value 0: must be greater than or equal to 1"
        );
        let wrong_type = bad(&|v| v["spec"]["schedulingPolicy"]["gang"]["minCount"] = "4".into());
        assert!(
            wrong_type.starts_with("spec.schedulingPolicy.gang.minCount: invalid type: string"),
            "{wrong_type}"
        );
        assert_eq!(
            bad(&|v| v["spec"]["schedulingPolicy"] = json!({})),
            "spec.schedulingPolicy: must specify one of: `basic`, `gang`"
        );
        assert_eq!(
            bad(&|v| v["spec"]["schedulingPolicy"]["basic"] = json!({})),
            "spec.schedulingPolicy: may specify only one of: `basic`, `gang`"
        );
        let name = bad(&|v| v["metadata"]["name"] = 7.into());
        assert!(name.starts_with("metadata.name: invalid type"), "{name}");
        assert_eq!(
            bad(&|v| v["spec"]["preemptionPolicy"] = "Sometimes".into()),
            "spec.preemptionPolicy: unsupported value \"Sometimes\": supported values: \"Never\", \"PreemptLowerPriority\""
        );
        assert_eq!(
            bad(&|v| v["spec"]["disruptionMode"] = json!({"single": {}, "all": {}})),
            "spec.disruptionMode: may specify only one of: `single`, `all`"
        );
        assert_eq!(
            bad(&|v| v["spec"]["disruptionMode"] = json!({})),
            "spec.disruptionMode: must specify one of: `single`, `all`"
        );
        assert_eq!(
            bad(&|v| v["spec"]["workloadRef"] = json!({"workloadName": "job-1"})),
            "spec.workloadRef.templateName: required value"
        );
        let old = bad(&|v| {
            v["spec"]["podGroupTemplateRef"] =
                json!({"workload": {"workloadName": "job-1", "podGroupTemplateName": "w"}})
        });
        assert!(
            old.starts_with("spec.podGroupTemplateRef: unknown field")
                && old.contains("spec.workloadRef"),
            "{old}"
        );
    }

    #[test]
    fn priority_preemption_and_disruption_are_read() {
        let mut v = served_gang();
        v["spec"]["priority"] = 1000.into();
        v["spec"]["preemptionPolicy"] = "Never".into();
        v["spec"]["disruptionMode"] = json!({"all": {}});
        v["spec"]["workloadRef"] = json!({"workloadName": "job-1", "templateName": "workers"});
        let g = pod_group_from_json(v).unwrap();
        assert_eq!(g.priority, 1000);
        assert_eq!(g.preemption_policy, PreemptionPolicy::Never);
        assert!(g.disruption_all);
        assert_eq!(g.admission, None);
        assert_eq!(
            g.template_ref,
            Some(WorkloadTemplateRef {
                workload_name: "job-1".into(),
                template_name: "workers".into(),
            })
        );
        // In a manifest, a class and no value: admitted later (by `simulate`); a
        // built-in class gives its value at once. From the API server: as stored.
        let mut v = served_gang();
        v["spec"] = json!({"schedulingPolicy": {"basic": {}}, "priorityClassName": "batch"});
        assert_eq!(pod_group_from_json(v.clone()).unwrap().admission, None);
        let g = pod_group_from(&serde_json::from_value(v).unwrap()).unwrap();
        assert_eq!((g.priority, g.disruption_all), (0, false));
        assert_eq!(
            g.admission,
            Some(PriorityAdmission {
                class: "batch".into(),
                policy_given: false
            })
        );
        let mut v = served_gang();
        v["spec"]["priorityClassName"] = "system-cluster-critical".into();
        v["spec"].as_object_mut().unwrap().remove("priority");
        let g = pod_group_from(&serde_json::from_value(v).unwrap()).unwrap();
        assert_eq!((g.priority, g.admission), (2_000_000_000, None));
    }
}
