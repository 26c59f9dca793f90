//! `scheduling.k8s.io` Workload (KEP-4671, kube-scheduler 1.36 and later): the
//! templates a workload controller makes its PodGroups from. Not to be confused with
//! the workload *controllers* `simulate` emulates (`workload.rs`: Deployments, Jobs,
//! ...). The scheduler needs no Workload to schedule: a PodGroup carries its own
//! policy, copied from its template. Berth keeps the Workloads it is told of so
//! that `explain` and `simulate` can say which template a group was made from, and
//! whether the cluster has it.

use super::FieldError;
use super::pod_group::{
    DisruptionMode, PodGroupPolicy, SchedulingConstraints, SchedulingPolicy, disruption_all_from,
    from_json, policy_from, topology_keys_from,
};
use serde::Deserialize;

/// The API versions of Workload Berth reads (1.37 serves `v1beta1`; `v1alpha3`
/// has the same fields).
pub const WORKLOAD_API_VERSIONS: [&str; 2] =
    ["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"];

/// The most templates a Workload may have (upstream's `WorkloadMaxPodGroupTemplates`).
pub const MAX_POD_GROUP_TEMPLATES: usize = 8;

/// A Workload object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadObject {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.controllerRef`: the object (a Job, a JobSet, ...) the Workload belongs
    /// to, for tools to link back to it.
    pub controller_ref: Option<ControllerRef>,
    /// `spec.podGroupTemplates`, in their order (1 to [`MAX_POD_GROUP_TEMPLATES`],
    /// names unique).
    pub templates: Vec<PodGroupTemplate>,
}

impl WorkloadObject {
    /// The template named `name`.
    pub fn template(&self, name: &str) -> Option<&PodGroupTemplate> {
        self.templates.iter().find(|t| t.name == name)
    }
}

/// `spec.controllerRef` of a Workload (a `TypedLocalObjectReference`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerRef {
    /// `apiGroup` (empty: the core group).
    pub api_group: String,
    /// `kind`.
    pub kind: String,
    /// `name`.
    pub name: String,
}

/// One of `spec.podGroupTemplates`: what a PodGroup made from it copies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodGroupTemplate {
    /// `name`: a DNS label, unique within the Workload.
    pub name: String,
    /// `schedulingPolicy`.
    pub policy: PodGroupPolicy,
    /// The keys of `schedulingConstraints.topology`.
    pub topology_keys: Vec<String>,
    /// `disruptionMode` is `all: {}`.
    pub disruption_all: bool,
    /// `priorityClassName`, if set.
    pub priority_class_name: Option<String>,
    /// `priority`, if set.
    pub priority: Option<i32>,
}

/// A Workload as the API server serves it (the parts Berth reads).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadManifest {
    /// `metadata`.
    #[serde(default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: Option<WorkloadSpec>,
}

/// `spec` of a Workload.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// `controllerRef`.
    #[serde(default)]
    pub controller_ref: Option<ControllerRefManifest>,
    /// `podGroupTemplates`.
    #[serde(default)]
    pub pod_group_templates: Option<Vec<PodGroupTemplateManifest>>,
}

/// `spec.controllerRef`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerRefManifest {
    /// `apiGroup`.
    #[serde(default)]
    pub api_group: Option<String>,
    /// `kind`.
    #[serde(default)]
    pub kind: String,
    /// `name`.
    #[serde(default)]
    pub name: String,
}

/// One of `spec.podGroupTemplates`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupTemplateManifest {
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `schedulingPolicy`: exactly one of `basic` and `gang`.
    #[serde(default)]
    pub scheduling_policy: Option<SchedulingPolicy>,
    /// `schedulingConstraints`.
    #[serde(default)]
    pub scheduling_constraints: Option<SchedulingConstraints>,
    /// `disruptionMode`: exactly one of `single` and `all`.
    #[serde(default)]
    pub disruption_mode: Option<DisruptionMode>,
    /// `priorityClassName`.
    #[serde(default)]
    pub priority_class_name: Option<String>,
    /// `priority`.
    #[serde(default)]
    pub priority: Option<i32>,
}

/// The Workload from an object as the API server serves it (a list item or a watch
/// event's object, in any of [`WORKLOAD_API_VERSIONS`]); a field of the wrong type
/// is named by its path, as [`workload_from`] names a bad value.
pub fn workload_from_json(value: serde_json::Value) -> Result<WorkloadObject, FieldError> {
    workload_from(&from_json(value)?)
}

/// The Workload Berth reads; the error names the bad field as the API server's
/// validation would.
pub fn workload_from(w: &WorkloadManifest) -> Result<WorkloadObject, FieldError> {
    let name = super::required_name(&w.metadata)?;
    let namespace = super::namespace_of(&w.metadata);
    let spec = w.spec.clone().unwrap_or_default();
    let controller_ref = spec
        .controller_ref
        .as_ref()
        .map(|r| controller_ref_from(r, "spec.controllerRef"))
        .transpose()?;
    let listed = spec.pod_group_templates.unwrap_or_default();
    if listed.is_empty() {
        return Err(FieldError::new(
            "spec.podGroupTemplates",
            "required value: must have at least one item",
        ));
    }
    if listed.len() > MAX_POD_GROUP_TEMPLATES {
        return Err(FieldError::new(
            "spec.podGroupTemplates",
            format!(
                "too many: {}: must have at most {MAX_POD_GROUP_TEMPLATES} items",
                listed.len()
            ),
        ));
    }
    let mut templates: Vec<PodGroupTemplate> = Vec::with_capacity(listed.len());
    for (i, t) in listed.iter().enumerate() {
        let path = format!("spec.podGroupTemplates[{i}]");
        let template = template_from(t, &path)?;
        if templates.iter().any(|o| o.name == template.name) {
            return Err(FieldError::new(
                path,
                format!("duplicate value: name {:?}", template.name),
            ));
        }
        templates.push(template);
    }
    Ok(WorkloadObject {
        namespace,
        name,
        controller_ref,
        templates,
    })
}

/// One template at `path` (`spec.podGroupTemplates[i]`).
fn template_from(t: &PodGroupTemplateManifest, path: &str) -> Result<PodGroupTemplate, FieldError> {
    if t.name.is_empty() {
        return Err(FieldError::new(format!("{path}.name"), "required value"));
    }
    if !berth_sdk::validation::is_dns1123_label(&t.name) {
        return Err(FieldError::new(
            format!("{path}.name"),
            format!(
                "invalid value {:?}: a lowercase RFC 1123 label must consist of lower case \
                 alphanumeric characters or '-', start and end with an alphanumeric \
                 character, and be at most 63 characters",
                t.name
            ),
        ));
    }
    Ok(PodGroupTemplate {
        name: t.name.clone(),
        policy: policy_from(
            t.scheduling_policy.as_ref(),
            &format!("{path}.schedulingPolicy"),
        )?,
        topology_keys: topology_keys_from(
            t.scheduling_constraints.as_ref(),
            &format!("{path}.schedulingConstraints"),
        )?,
        disruption_all: disruption_all_from(
            t.disruption_mode.as_ref(),
            &format!("{path}.disruptionMode"),
        )?,
        priority_class_name: t.priority_class_name.clone().filter(|c| !c.is_empty()),
        priority: t.priority,
    })
}

/// `spec.controllerRef` at `path`: `kind` and `name` required path segment names,
/// `apiGroup` a DNS subdomain when set.
fn controller_ref_from(r: &ControllerRefManifest, path: &str) -> Result<ControllerRef, FieldError> {
    let api_group = r.api_group.clone().unwrap_or_default();
    if !api_group.is_empty() && !berth_sdk::validation::is_dns1123_subdomain(&api_group) {
        return Err(FieldError::new(
            format!("{path}.apiGroup"),
            format!("invalid value {api_group:?}: must be a lowercase RFC 1123 subdomain"),
        ));
    }
    for (field, value) in [("kind", &r.kind), ("name", &r.name)] {
        if value.is_empty() {
            return Err(FieldError::new(format!("{path}.{field}"), "required value"));
        }
        // apimachinery's IsPathSegmentName.
        if value == "." || value == ".." || value.contains('/') || value.contains('%') {
            return Err(FieldError::new(
                format!("{path}.{field}"),
                format!("invalid value {value:?}: may not be '.' or '..' or contain '/' or '%'"),
            ));
        }
    }
    Ok(ControllerRef {
        api_group,
        kind: r.kind.clone(),
        name: r.name.clone(),
    })
}

/// Upstream-shaped Workloads the tests of the manifest reader and of the kube
/// backend share.
#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::{Value, json};

    /// The Workload `ml/<name>` of a JobSet as a 1.37 API server returns it from a
    /// GET, at resourceVersion `rv`: two templates, a gang of 4 `workers` placed
    /// within one rack, and a basic `driver` (a list's items are the same without
    /// apiVersion and kind).
    pub(crate) fn served_workload(name: &str, rv: u64) -> Value {
        json!({
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": "ml",
                "uid": format!("{name}-7d1e5c3a-52b8-4f0e-8d2c"),
                "resourceVersion": rv.to_string(),
                "generation": 1,
                "creationTimestamp": "2026-11-20T08:13:58Z",
                "ownerReferences": [{
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": name,
                    "uid": "b3c0a7e2-1f4d-4c55-9e0b-2a8f6d3c1e77",
                    "controller": true,
                    "blockOwnerDeletion": true
                }],
                "managedFields": [{
                    "manager": "jobset-controller",
                    "operation": "Update",
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "time": "2026-11-20T08:13:58Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:controllerRef": {}, "f:podGroupTemplates": {}}}
                }]
            },
            "spec": {
                "controllerRef": {"apiGroup": "jobset.x-k8s.io", "kind": "JobSet", "name": name},
                "podGroupTemplates": [
                    {
                        "name": "workers",
                        "schedulingPolicy": {"gang": {"minCount": 4}},
                        "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
                        "disruptionMode": {"all": {}},
                        "priorityClassName": "training"
                    },
                    {
                        "name": "driver",
                        "schedulingPolicy": {"basic": {}},
                        "disruptionMode": {"single": {}},
                        "priority": 100
                    }
                ]
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_workload_as_the_api_server_serves_it_is_read() {
        let w = workload_from_json(fixtures::served_workload("train", 48200)).unwrap();
        assert_eq!(
            w,
            WorkloadObject {
                namespace: "ml".into(),
                name: "train".into(),
                controller_ref: Some(ControllerRef {
                    api_group: "jobset.x-k8s.io".into(),
                    kind: "JobSet".into(),
                    name: "train".into(),
                }),
                templates: vec![
                    PodGroupTemplate {
                        name: "workers".into(),
                        policy: PodGroupPolicy::Gang { min_count: 4 },
                        topology_keys: vec!["topology.kubernetes.io/rack".into()],
                        disruption_all: true,
                        priority_class_name: Some("training".into()),
                        priority: None,
                    },
                    PodGroupTemplate {
                        name: "driver".into(),
                        policy: PodGroupPolicy::Basic,
                        topology_keys: Vec::new(),
                        disruption_all: false,
                        priority_class_name: None,
                        priority: Some(100),
                    },
                ],
            }
        );
        assert_eq!(
            w.template("driver").map(|t| t.policy),
            Some(PodGroupPolicy::Basic)
        );
        assert!(w.template("eval").is_none());
        // v1alpha3 has the same fields; no controllerRef is fine.
        let mut v = fixtures::served_workload("train", 1);
        v["apiVersion"] = "scheduling.k8s.io/v1alpha3".into();
        v["spec"].as_object_mut().unwrap().remove("controllerRef");
        let w = workload_from_json(v).unwrap();
        assert_eq!((w.controller_ref, w.templates.len()), (None, 2));
    }

    #[test]
    fn a_bad_workload_names_its_field() {
        let bad = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v = fixtures::served_workload("train", 1);
            edit(&mut v);
            format!("{}", workload_from_json(v).unwrap_err())
        };
        let template =
            |i: usize| json!({"name": format!("t{i}"), "schedulingPolicy": {"basic": {}}});
        assert_eq!(
            bad(&|v| v["spec"]["podGroupTemplates"][1]["schedulingPolicy"] =
                json!({"gang": {"minCount": 0}})),
            "spec.podGroupTemplates[1].schedulingPolicy.gang.minCount: invalid value 0: must be greater than or equal to 1"
        );
        assert_eq!(
            bad(&|v| v["spec"]["podGroupTemplates"][0]["schedulingPolicy"] = json!({"gang": {}})),
            "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: required value"
        );
        assert_eq!(
            bad(&|v| v["spec"]["podGroupTemplates"][1]["schedulingPolicy"] =
                json!({"basic": {}, "gang": {"minCount": 2}})),
            "spec.podGroupTemplates[1].schedulingPolicy: may specify only one of: `basic`, `gang`"
        );
        assert_eq!(
            bad(&|v| v["spec"]["podGroupTemplates"][1]["schedulingPolicy"] = json!({})),
            "spec.podGroupTemplates[1].schedulingPolicy: must specify one of: `basic`, `gang`"
        );
        assert_eq!(
            bad(&|v| {
                v["spec"]["podGroupTemplates"][1]
                    .as_object_mut()
                    .unwrap()
                    .remove("schedulingPolicy");
            }),
            "spec.podGroupTemplates[1].schedulingPolicy: required value"
        );
        assert_eq!(
            bad(&|v| v["spec"]["podGroupTemplates"][0]["disruptionMode"] =
                json!({"single": {}, "all": {}})),
            "spec.podGroupTemplates[0].disruptionMode: may specify only one of: `single`, `all`"
        );
        assert_eq!(
            bad(
                &|v| v["spec"]["podGroupTemplates"][0]["schedulingConstraints"] =
                    json!({"topology": [{"key": ""}]})
            ),
            "spec.podGroupTemplates[0].schedulingConstraints.topology[0].key: required value"
        );
        assert_eq!(
            bad(&|v| v["spec"]["podGroupTemplates"][1]["name"] = "workers".into()),
            "spec.podGroupTemplates[1]: duplicate value: name \"workers\""
        );
        assert_eq!(
            bad(&|v| v["spec"]["podGroupTemplates"][1]["name"] = "".into()),
            "spec.podGroupTemplates[1].name: required value"
        );
        let name = bad(&|v| v["spec"]["podGroupTemplates"][1]["name"] = "Driver_0".into());
        assert!(
            name.starts_with(
                "spec.podGroupTemplates[1].name: invalid value \"Driver_0\": a lowercase RFC 1123 label"
            ),
            "{name}"
        );
        assert_eq!(
            bad(&|v| v["spec"]["podGroupTemplates"] = json!([])),
            "spec.podGroupTemplates: required value: must have at least one item"
        );
        assert_eq!(
            bad(&|v| {
                v["spec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("podGroupTemplates");
            }),
            "spec.podGroupTemplates: required value: must have at least one item"
        );
        assert_eq!(
            bad(&|v| v["spec"]["podGroupTemplates"] = (0..9).map(template).collect()),
            "spec.podGroupTemplates: too many: 9: must have at most 8 items"
        );
        // Eight is the most, and fine.
        let mut v = fixtures::served_workload("train", 1);
        v["spec"]["podGroupTemplates"] = (0..8).map(template).collect();
        assert_eq!(workload_from_json(v).unwrap().templates.len(), 8);
        assert_eq!(
            bad(&|v| v["spec"]["controllerRef"]["kind"] = "".into()),
            "spec.controllerRef.kind: required value"
        );
        assert_eq!(
            bad(&|v| v["spec"]["controllerRef"]["name"] = "a/b".into()),
            "spec.controllerRef.name: invalid value \"a/b\": may not be '.' or '..' or contain '/' or '%'"
        );
        assert_eq!(
            bad(&|v| v["spec"]["controllerRef"]["apiGroup"] = "JobSet.io".into()),
            "spec.controllerRef.apiGroup: invalid value \"JobSet.io\": must be a lowercase RFC 1123 subdomain"
        );
        assert_eq!(
            bad(&|v| {
                v["metadata"].as_object_mut().unwrap().remove("name");
            }),
            "metadata.name: required value"
        );
        let wrong_type = bad(&|v| {
            v["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = "4".into()
        });
        assert!(
            wrong_type.starts_with(
                "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: invalid type: string"
            ),
            "{wrong_type}"
        );
    }
}
