//! Node and Pod manifests, read as `kubectl apply -f` reads them.
//!
//! A manifest is multi-document YAML (documents separated by `---` lines, as
//! kubectl splits them) or a stream of JSON objects (when the text starts with `{`).
//! Each document is an object of a kind scheduling reads (`v1` `Node` and `Pod`, the
//! storage kinds, ...; see [`ACCEPTED_KINDS`]), or a `v1` `List` (also `PodList`,
//! `NodeList`, ...) whose `items` are such objects or further lists. Objects of other
//! kinds are loaded as [`Object::Ignored`], for the caller to name in a warning. Empty documents and
//! documents holding only comments are skipped.
//!
//! Objects go through the typed Kubernetes structs of `k8s-openapi`, so a wrong type
//! is reported with its field path, and are then converted into the SDK's plain
//! types, applying the defaults the API server would (namespace, scheduler name,
//! requests from limits, host ports of host-network pods, ...).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use berth_sdk::{
    ClaimSource, Container, HostPort, ImageState, Node, Pod, PodResourceClaim,
    PodResourceClaimStatus, ResourceList, ResourceRequirements, Resources, Taint, TaintEffect,
    Toleration, TolerationOperator,
};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::quantity;

pub mod dra;
pub mod pod_group;
pub mod scheduling_workload;
mod storage;
mod workload;

pub use workload::{Workload, WorkloadPod};

/// The namespace of a pod that names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The scheduler of a pod that names none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// Allocatable pods of a node that states none: the kubelet's default `--max-pods`.
pub const DEFAULT_MAX_PODS: i64 = 110;

/// The kind of kube-scheduler's configuration file (a manifest may carry one).
pub const UPSTREAM_KIND: &str = "KubeSchedulerConfiguration";
/// Its API version.
pub const UPSTREAM_API_VERSION: &str = "kubescheduler.config.k8s.io/v1";

/// Built-in priority classes, which exist in every cluster: a pod naming one of them
/// without a `spec.priority` gets its value, as the priority admission plugin does.
const BUILT_IN_PRIORITY_CLASSES: [(&str, i32); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

const TAINT_EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "PreferNoSchedule"];
const TOLERATION_OPERATORS: [&str; 2] = ["Equal", "Exists"];

/// An object loaded from a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "loaded once per manifest; boxing would only burden the callers"
)]
pub enum Object {
    /// A `v1` Node.
    Node(Node),
    /// A `v1` Pod.
    Pod(Pod),
    /// A `scheduling.k8s.io/v1` PriorityClass.
    PriorityClass(PriorityClass),
    /// A `policy/v1` PodDisruptionBudget. Berth runs no disruption controller: its
    /// `status.disruptionsAllowed` (0 when absent) and `status.disruptedPods` are
    /// taken as written.
    Budget(berth_sdk::PodDisruptionBudget),
    /// A `v1` Namespace: its name and labels.
    Namespace(String, berth_sdk::Labels),
    /// A `v1` Service: only its pod selector matters to scheduling (it makes the
    /// default selector of PodTopologySpread's default constraints).
    Selector(PodSelector),
    /// An `apps/v1` Deployment, ReplicaSet or StatefulSet, a `v1`
    /// ReplicationController or a `batch/v1` Job: the pods (and claims) its controller
    /// would create, and its selector.
    Workload(Workload),
    /// A `v1` PersistentVolumeClaim.
    Claim(berth_sdk::PersistentVolumeClaim),
    /// A `v1` PersistentVolume.
    Volume(berth_sdk::PersistentVolume),
    /// A `storage.k8s.io/v1` StorageClass.
    StorageClass(berth_sdk::StorageClass),
    /// A `storage.k8s.io/v1` CSINode.
    CsiNode(berth_sdk::CsiNode),
    /// A `storage.k8s.io/v1` CSIDriver.
    CsiDriver(berth_sdk::CsiDriver),
    /// A `storage.k8s.io/v1` CSIStorageCapacity.
    CsiStorageCapacity(berth_sdk::CsiStorageCapacity),
    /// A `resource.k8s.io/v1` DeviceClass.
    DeviceClass(berth_sdk::dra::DeviceClass),
    /// A `resource.k8s.io/v1` ResourceClaim.
    ResourceClaim(berth_sdk::dra::ResourceClaim),
    /// A `resource.k8s.io/v1` ResourceClaimTemplate.
    ResourceClaimTemplate(berth_sdk::dra::ResourceClaimTemplate),
    /// A `resource.k8s.io/v1` ResourceSlice.
    ResourceSlice(berth_sdk::dra::ResourceSlice),
    /// A `resource.k8s.io/v1` DeviceTaintRule.
    DeviceTaintRule(berth_sdk::dra::DeviceTaintRule),
    /// A `scheduling.k8s.io/v1beta1` PodGroup (workload-aware scheduling).
    PodGroup(pod_group::PodGroupObject),
    /// A `scheduling.k8s.io/v1beta1` Workload: the templates PodGroups are made from
    /// (not the workload controllers of [`Object::Workload`]).
    SchedulingWorkload(scheduling_workload::WorkloadObject),
    /// A `kubescheduler.config.k8s.io/v1` KubeSchedulerConfiguration, as YAML text:
    /// `berth simulate` reloads it at that point of the timeline, as `berth run`
    /// reloads an edited configuration file (module paths are relative to the
    /// manifest's file).
    Configuration(String),
    /// An object of a kind scheduling does not read (a Deployment, a Secret, ...):
    /// `simulate` and `explain` skip it and say so in a warning.
    Ignored {
        /// Its `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
    /// A document annotated `berth.dev/simulate: delete`: the object of that kind,
    /// namespace (empty for cluster-scoped kinds) and name is deleted.
    Delete {
        /// `Pod`, `Node`, `Namespace`, a storage kind (`PersistentVolumeClaim`,
        /// `PersistentVolume`, `StorageClass`, `CSINode`, `CSIDriver`,
        /// `CSIStorageCapacity`), or the kind of a
        /// [`PodSelector`].
        kind: String,
        /// The namespace (pods only).
        namespace: String,
        /// The name.
        name: String,
    },
}

/// An object that selects pods by label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSelector {
    /// `Service`, `ReplicationController`, `ReplicaSet` or `StatefulSet`.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Which pods it selects; an empty selector selects none (as upstream's listers).
    pub selector: berth_sdk::affinity::LabelSelector,
}

/// The annotation that turns a document into a deletion in `berth simulate`'s
/// timeline: `berth.dev/simulate: delete`.
pub const SIMULATE_ANNOTATION: &str = "berth.dev/simulate";

/// Where a document starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file name as given (or the source name passed to [`load_str`]).
    pub file: String,
    /// The document's number in the file, from 1; empty documents are not counted.
    pub document: usize,
    /// The document's first line with content, from 1.
    pub line: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: document {} (line {})",
            self.file, self.document, self.line
        )
    }
}

/// An object and the document it came from (the items of a List share its document).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// The object.
    pub object: Object,
    /// Where it came from.
    pub source: Location,
    /// For a pod whose priority the priority admission plugin still has to resolve
    /// (it names a PriorityClass that is not built in, or none and no priority).
    pub admission: Option<PriorityAdmission>,
}

/// What the priority admission plugin does for a pod once the PriorityClasses are
/// known: give it its class's value (or the global default's) and the class's
/// preemption policy unless the pod states one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorityAdmission {
    /// `spec.priorityClassName`; empty: the global default class, if any.
    pub class: String,
    /// The pod states `spec.preemptionPolicy`.
    pub policy_given: bool,
}

/// A `scheduling.k8s.io/v1` PriorityClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorityClass {
    /// The name.
    pub name: String,
    /// `value`.
    pub value: i32,
    /// `globalDefault`.
    pub global_default: bool,
    /// `preemptionPolicy`.
    pub preemption_policy: berth_sdk::PreemptionPolicy,
}

/// The admission of a pod's priority, if its class is not built in.
fn priority_admission(pod: &k8s::Pod) -> Option<PriorityAdmission> {
    let spec = pod.spec.as_ref()?;
    if spec.priority.is_some() {
        return None;
    }
    let class = spec.priority_class_name.clone().unwrap_or_default();
    if BUILT_IN_PRIORITY_CLASSES.iter().any(|(n, _)| *n == class) {
        return None;
    }
    Some(PriorityAdmission {
        class,
        policy_given: spec.preemption_policy.is_some(),
    })
}

/// Why a manifest could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("{file}: {error}")]
    Read {
        /// The file.
        file: String,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// The text is not well-formed YAML or JSON (or has a bad `---` separator line),
    /// or the YAML reader refuses something at that place (a duplicate key, `.inf`:
    /// see [`crate::yaml`]).
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The line, from 1.
        line: usize,
        /// The column, from 1.
        column: usize,
        /// What the parser found wrong, after the field's path when there is one
        /// (`metadata.labels: duplicate entry with key "app"`).
        message: String,
    },
    /// A field is missing, has the wrong type or holds an invalid value.
    #[error("{location}: {}{message}", prefix(.path))]
    Invalid {
        /// The document.
        location: Location,
        /// The field, like `spec.containers[0].resources.requests.cpu` (empty when the
        /// document as a whole is wrong).
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// `"path: "`, or nothing for an empty path.
fn prefix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// Joins two field paths (`items[0]` and `spec.x` make `items[0].spec.x`).
fn join(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_owned()
    } else if child.is_empty() {
        parent.to_owned()
    } else if child.starts_with('[') {
        format!("{parent}{child}")
    } else {
        format!("{parent}.{child}")
    }
}

/// A bad field found while converting an object: where (a path such as
/// `spec.tolerations[0].operator`; empty for the object as a whole) and what was
/// wrong. Displayed as `path: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    path: String,
    message: String,
}

impl std::error::Error for FieldError {}

impl From<(String, String)> for FieldError {
    /// From the `(path, message)` of the affinity and selector converters.
    fn from((path, message): (String, String)) -> Self {
        FieldError { path, message }
    }
}

impl FieldError {
    /// The path of the bad field; empty when the object as a whole was bad.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What was wrong with it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error, its path under `prefix` (`spec.template` + `spec.containers`).
    pub(crate) fn under(self, prefix: &str) -> Self {
        FieldError {
            path: join(prefix, &self.path),
            message: self.message,
        }
    }

    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }

    /// A value outside an enumeration, worded as the API server's validation.
    fn unsupported(path: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError::new(
            path,
            format!(
                "unsupported value {value:?}: supported values: {}",
                supported.join(", ")
            ),
        )
    }

    fn into_manifest_error(self, location: &Location, parent: &str) -> ManifestError {
        ManifestError::Invalid {
            location: location.clone(),
            path: join(parent, &self.path),
            message: self.message,
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", prefix(&self.path), self.message)
    }
}

/// Reads and loads a manifest file (see [`load_str`]).
pub fn load_file(path: &Path) -> Result<Vec<Document>, ManifestError> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => load_str(&file, &text),
        Err(error) => Err(ManifestError::Read { file, error }),
    }
}

/// Loads the Nodes and Pods of a manifest, in order; `file` names it in errors.
pub fn load_str(file: &str, text: &str) -> Result<Vec<Document>, ManifestError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // kubectl decodes JSON when the text starts with a brace, YAML otherwise.
    let documents = if text
        .trim_start_matches([' ', '\t', '\r', '\n'])
        .starts_with('{')
    {
        json_documents(file, text)?
    } else {
        yaml_documents(file, text)?
    };
    let mut out = Vec::new();
    for (location, value) in documents {
        if !value.is_null() {
            collect(value, "", None, &location, &mut out)?;
        }
    }
    Ok(out)
}

/// Splits YAML into documents as kubectl does: at lines starting with `---` that
/// carry nothing else but a comment.
fn yaml_documents(file: &str, text: &str) -> Result<Vec<(Location, Value)>, ManifestError> {
    let mut documents = Vec::new();
    let mut chunk_start = 0; // byte offset of the current document
    let mut chunk_line = 1; // its first line
    let mut content_line = None; // its first line with content
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let number = index + 1;
        let bare = line.trim_end_matches(['\n', '\r']);
        if let Some(rest) = bare.strip_prefix("---") {
            let trimmed = rest.trim();
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                return Err(ManifestError::Syntax {
                    file: file.to_owned(),
                    line: number,
                    column: 4 + rest.len() - rest.trim_start().len(),
                    message: format!("invalid YAML document separator: {trimmed}"),
                });
            }
            yaml_document(
                file,
                &text[chunk_start..offset],
                chunk_line,
                content_line,
                &mut documents,
            )?;
            chunk_start = offset + line.len();
            chunk_line = number + 1;
            content_line = None;
        } else if content_line.is_none() {
            let content = bare.trim();
            if !content.is_empty() && !content.starts_with('#') {
                content_line = Some(number);
            }
        }
        offset += line.len();
    }
    yaml_document(
        file,
        &text[chunk_start..],
        chunk_line,
        content_line,
        &mut documents,
    )?;
    Ok(documents)
}

/// Parses one YAML document (skipped when it has no content); `first_line` is the
/// line of its first byte, to report syntax errors at their place in the file.
fn yaml_document(
    file: &str,
    text: &str,
    first_line: usize,
    content_line: Option<usize>,
    documents: &mut Vec<(Location, Value)>,
) -> Result<(), ManifestError> {
    let Some(line) = content_line else {
        return Ok(());
    };
    let location = Location {
        file: file.to_owned(),
        document: documents.len() + 1,
        line,
    };
    // Anchors, aliases and (as kubectl's reader) `<<` merge keys are expanded here.
    let value: Value = crate::yaml::from_str(text).map_err(|e| {
        if e.line == 0 {
            return ManifestError::Invalid {
                location: location.clone(),
                path: e.path,
                message: e.message,
            };
        }
        // The position is relative to this document: reported in the file's.
        ManifestError::Syntax {
            file: file.to_owned(),
            line: first_line + e.line - 1,
            column: e.column,
            message: format!("{}{}", prefix(&e.path), e.message),
        }
    })?;
    documents.push((location, value));
    Ok(())
}

/// Splits a stream of JSON values into documents.
fn json_documents(file: &str, text: &str) -> Result<Vec<(Location, Value)>, ManifestError> {
    let mut documents = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    let (mut counted, mut line) = (0, 1);
    loop {
        let start = stream.byte_offset();
        let json = match stream.next() {
            None => break,
            Some(Ok(json)) => json,
            Some(Err(e)) => {
                let message = e.to_string();
                let suffix = format!(" at line {} column {}", e.line(), e.column());
                return Err(ManifestError::Syntax {
                    file: file.to_owned(),
                    line: e.line(),
                    column: e.column(),
                    message: message.strip_suffix(&suffix).unwrap_or(&message).to_owned(),
                });
            }
        };
        let rest = &text[start..];
        let begin = start + rest.len() - rest.trim_start().len();
        line += text[counted..begin].matches('\n').count();
        counted = begin;
        let location = Location {
            file: file.to_owned(),
            document: documents.len() + 1,
            line,
        };
        documents.push((location, json));
    }
    Ok(documents)
}

/// A word for the type of a YAML value, for error messages.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// A string field of an object's top level (`apiVersion`, `kind`), if present.
fn string_field(
    map: &serde_json::Map<String, Value>,
    name: &str,
    path: &str,
    location: &Location,
) -> Result<Option<String>, ManifestError> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ManifestError::Invalid {
            location: location.clone(),
            path: join(path, name),
            message: format!("invalid type: {}, expected a string", describe(other)),
        }),
    }
}

/// Converts one object (or the items of a List) found at `path` of a document.
/// `item_kind` is the kind of the items of a typed list (`PodList`), which may omit
/// their `apiVersion` and `kind`.
fn collect(
    value: Value,
    path: &str,
    item_kind: Option<&str>,
    location: &Location,
    out: &mut Vec<Document>,
) -> Result<(), ManifestError> {
    let invalid = |field: &str, message: String| ManifestError::Invalid {
        location: location.clone(),
        path: join(path, field),
        message,
    };
    let mut map = match value {
        Value::Object(map) => map,
        other => {
            return Err(invalid(
                "",
                format!(
                    "expected an object with apiVersion and kind, found {}",
                    describe(&other)
                ),
            ));
        }
    };
    let api_version = string_field(&map, "apiVersion", path, location)?;
    let kind = string_field(&map, "kind", path, location)?;
    let (api_version, kind) = match (api_version, kind, item_kind) {
        (a, k, Some(default)) => (
            a.unwrap_or_else(|| "v1".into()),
            k.unwrap_or_else(|| default.into()),
        ),
        (Some(a), Some(k), None) => (a, k),
        (None, _, None) => return Err(invalid("apiVersion", "required value".into())),
        (_, None, None) => return Err(invalid("kind", "required value".into())),
    };
    if let Some(deleted) = deletion(&map, &api_version, &kind, path, location)? {
        out.push(deleted);
        return Ok(());
    }
    let mut admission = None;
    let object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Service") => {
            Object::Selector(pod_selector(&kind, Value::Object(map), path, location)?)
        }
        ("v1", "ReplicationController") => {
            Object::Workload(read(map, path, location, workload::replication_controller)?)
        }
        ("apps/v1", "ReplicaSet") => {
            Object::Workload(read(map, path, location, workload::replica_set_of)?)
        }
        ("apps/v1", "StatefulSet") => {
            Object::Workload(read(map, path, location, workload::stateful_set)?)
        }
        ("apps/v1", "Deployment") => {
            Object::Workload(read(map, path, location, workload::deployment)?)
        }
        ("batch/v1", "Job") => Object::Workload(read(map, path, location, workload::job)?),
        ("v1", "Namespace") => read(map, path, location, namespace_object)?,
        ("v1", "Pod") => {
            let pod: k8s::Pod = deserialize(Value::Object(map), path, location)?;
            admission = priority_admission(&pod);
            Object::Pod(convert_pod(&pod).map_err(|e| e.into_manifest_error(location, path))?)
        }
        ("scheduling.k8s.io/v1", "PriorityClass") => {
            Object::PriorityClass(read(map, path, location, priority_class_from_k8s)?)
        }
        (UPSTREAM_API_VERSION, UPSTREAM_KIND) => {
            let text = crate::yaml::to_string(&Value::Object(map))
                .map_err(|e| invalid("", e.to_string()))?;
            Object::Configuration(text)
        }
        ("policy/v1", "PodDisruptionBudget") => {
            Object::Budget(read(map, path, location, budget_from_k8s)?)
        }
        ("v1", "PersistentVolumeClaim") => {
            Object::Claim(read(map, path, location, storage::convert_claim)?)
        }
        ("v1", "PersistentVolume") => {
            Object::Volume(read(map, path, location, storage::convert_volume)?)
        }
        ("storage.k8s.io/v1", "StorageClass") => {
            Object::StorageClass(read(map, path, location, storage::convert_storage_class)?)
        }
        ("storage.k8s.io/v1", "CSINode") => {
            Object::CsiNode(read(map, path, location, storage::convert_csi_node)?)
        }
        ("storage.k8s.io/v1", "CSIDriver") => {
            Object::CsiDriver(read(map, path, location, storage::convert_csi_driver)?)
        }
        ("storage.k8s.io/v1", "CSIStorageCapacity") => Object::CsiStorageCapacity(read(
            map,
            path,
            location,
            storage::convert_csi_storage_capacity,
        )?),
        (dra::API_VERSION, "DeviceClass") => {
            Object::DeviceClass(read(map, path, location, dra::device_class)?)
        }
        (dra::API_VERSION, "ResourceClaim") => {
            Object::ResourceClaim(read(map, path, location, dra::resource_claim)?)
        }
        (dra::API_VERSION, "ResourceClaimTemplate") => {
            Object::ResourceClaimTemplate(read(map, path, location, dra::claim_template)?)
        }
        (dra::API_VERSION, "ResourceSlice") => {
            Object::ResourceSlice(read(map, path, location, dra::resource_slice)?)
        }
        (dra::API_VERSION, "DeviceTaintRule") => {
            Object::DeviceTaintRule(read(map, path, location, dra::device_taint_rule)?)
        }
        (v, "PodGroup") if pod_group::POD_GROUP_API_VERSIONS.contains(&v) => {
            Object::PodGroup(read(map, path, location, pod_group::pod_group_from)?)
        }
        (v, "Workload") if scheduling_workload::WORKLOAD_API_VERSIONS.contains(&v) => {
            Object::SchedulingWorkload(read(
                map,
                path,
                location,
                scheduling_workload::workload_from,
            )?)
        }
        ("v1", "Node") => Object::Node(read(map, path, location, convert_node)?),
        (
            "v1",
            "List"
            | "PodList"
            | "NodeList"
            | "NamespaceList"
            | "ServiceList"
            | "PersistentVolumeClaimList"
            | "PersistentVolumeList",
        ) => {
            let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
            return collect_items(map.remove("items"), path, item_kind, location, out);
        }
        _ => Object::Ignored { api_version, kind },
    };
    out.push(Document {
        object,
        source: location.clone(),
        admission,
    });
    Ok(())
}

/// The deletion an object stands for when it carries the simulate annotation
/// `delete` (of a kind Berth reads); an error for any other value of it.
fn deletion(
    map: &serde_json::Map<String, Value>,
    api_version: &str,
    kind: &str,
    path: &str,
    location: &Location,
) -> Result<Option<Document>, ManifestError> {
    let invalid = |field: &str, message: String| ManifestError::Invalid {
        location: location.clone(),
        path: join(path, field),
        message,
    };
    let Some(Value::Object(meta)) = map.get("metadata") else {
        return Ok(None);
    };
    let annotation = meta
        .get("annotations")
        .and_then(|a| a.get(SIMULATE_ANNOTATION))
        .and_then(Value::as_str);
    match annotation {
        None => Ok(None),
        Some("delete") if deletable(api_version, kind) => {
            let name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                return Err(invalid("metadata.name", "required value".into()));
            }
            let cluster_scoped = CLUSTER_SCOPED.contains(&kind)
                || (api_version == dra::API_VERSION && dra::CLUSTER_SCOPED.contains(&kind));
            let namespace = if !cluster_scoped {
                meta.get("namespace")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .unwrap_or(DEFAULT_NAMESPACE)
                    .to_owned()
            } else {
                String::new()
            };
            Ok(Some(Document {
                object: Object::Delete {
                    kind: kind.to_owned(),
                    namespace,
                    name: name.to_owned(),
                },
                source: location.clone(),
                admission: None,
            }))
        }
        Some(other) => Err(invalid(
            &format!("metadata.annotations.{SIMULATE_ANNOTATION}"),
            format!("unsupported value {other:?}: only \"delete\" (of an object Berth reads)"),
        )),
    }
}

/// The items of a List at `path` (none when absent or null), each collected.
fn collect_items(
    items: Option<Value>,
    path: &str,
    item_kind: Option<&str>,
    location: &Location,
    out: &mut Vec<Document>,
) -> Result<(), ManifestError> {
    match items {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(items)) => {
            for (i, item) in items.into_iter().enumerate() {
                let item_path = join(path, &format!("items[{i}]"));
                collect(item, &item_path, item_kind, location, out)?;
            }
            Ok(())
        }
        Some(other) => Err(ManifestError::Invalid {
            location: location.clone(),
            path: join(path, "items"),
            message: format!("invalid type: {}, expected a sequence", describe(&other)),
        }),
    }
}

/// A Namespace: its name (required) and labels.
fn namespace_object(ns: &k8s::Namespace) -> Result<Object, FieldError> {
    let name = ns.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(FieldError::new("metadata.name", "required value"));
    }
    Ok(Object::Namespace(
        name,
        ns.metadata.labels.clone().unwrap_or_default(),
    ))
}

/// An object of type `T` read from `map` at `path`, converted to Berth's by
/// `convert`; an error names the field of either.
fn read<T: serde::de::DeserializeOwned, U>(
    map: serde_json::Map<String, Value>,
    path: &str,
    location: &Location,
    convert: impl FnOnce(&T) -> Result<U, FieldError>,
) -> Result<U, ManifestError> {
    let object: T = deserialize(Value::Object(map), path, location)?;
    convert(&object).map_err(|e| e.into_manifest_error(location, path))
}

/// The kinds a manifest may hold that scheduling reads.
pub const ACCEPTED_KINDS: &str = "v1 Node, Pod, Namespace, Service, ReplicationController, PersistentVolumeClaim, PersistentVolume, List, apps/v1 Deployment, ReplicaSet, StatefulSet, batch/v1 Job, storage.k8s.io/v1 StorageClass, CSINode, CSIDriver, CSIStorageCapacity, scheduling.k8s.io/v1 PriorityClass, scheduling.k8s.io/v1beta1 PodGroup, Workload, resource.k8s.io/v1 DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice, DeviceTaintRule, policy/v1 PodDisruptionBudget and kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration";

/// A warning naming the kinds of the ignored objects among `docs` (how many of
/// each), or `None` when there are none.
pub fn ignored_kinds_warning(docs: &[Document]) -> Option<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for d in docs {
        if let Object::Ignored { api_version, kind } = &d.object {
            *counts.entry(format!("{api_version} {kind}")).or_default() += 1;
        }
    }
    if counts.is_empty() {
        return None;
    }
    let list: Vec<String> = counts
        .into_iter()
        .map(|(k, n)| format!("{k} ({n})"))
        .collect();
    Some(format!(
        "ignoring objects of kinds scheduling does not read: {}; only {ACCEPTED_KINDS} are read",
        list.join(", ")
    ))
}

/// The kinds whose objects have no namespace.
const CLUSTER_SCOPED: [&str; 6] = [
    "Node",
    "Namespace",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
];

/// Whether `berth.dev/simulate: delete` may delete objects of this kind.
fn deletable(api_version: &str, kind: &str) -> bool {
    match api_version {
        "v1" => matches!(
            kind,
            "Pod"
                | "Node"
                | "Namespace"
                | "PersistentVolumeClaim"
                | "PersistentVolume"
                | "Service"
                | "ReplicationController"
        ),
        "storage.k8s.io/v1" => matches!(
            kind,
            "StorageClass" | "CSINode" | "CSIDriver" | "CSIStorageCapacity"
        ),
        "apps/v1" => matches!(kind, "Deployment" | "ReplicaSet" | "StatefulSet"),
        "batch/v1" => kind == "Job",
        v if pod_group::POD_GROUP_API_VERSIONS.contains(&v) => {
            matches!(kind, "PodGroup" | "Workload")
        }
        dra::API_VERSION => dra::KINDS.contains(&kind),
        _ => false,
    }
}

/// Converts a PersistentVolumeClaim, applying the API server's defaults; the error
/// names the bad field.
pub fn claim_from_k8s(
    c: &k8s::PersistentVolumeClaim,
) -> Result<berth_sdk::PersistentVolumeClaim, FieldError> {
    storage::convert_claim(c)
}

/// Converts a PersistentVolume; the error names the bad field.
pub fn volume_from_k8s(
    v: &k8s::PersistentVolume,
) -> Result<berth_sdk::PersistentVolume, FieldError> {
    storage::convert_volume(v)
}

/// Converts a StorageClass; the error names the bad field.
pub fn storage_class_from_k8s(
    c: &k8s_openapi::api::storage::v1::StorageClass,
) -> Result<berth_sdk::StorageClass, FieldError> {
    storage::convert_storage_class(c)
}

/// Converts a CSINode; the error names the bad field.
pub fn csi_node_from_k8s(
    n: &k8s_openapi::api::storage::v1::CSINode,
) -> Result<berth_sdk::CsiNode, FieldError> {
    storage::convert_csi_node(n)
}

/// Converts a CSIDriver; the error names the bad field.
pub fn csi_driver_from_k8s(
    d: &k8s_openapi::api::storage::v1::CSIDriver,
) -> Result<berth_sdk::CsiDriver, FieldError> {
    storage::convert_csi_driver(d)
}

/// Converts a CSIStorageCapacity (its quantities in bytes); the error names the bad
/// field.
pub fn csi_storage_capacity_from_k8s(
    c: &k8s_openapi::api::storage::v1::CSIStorageCapacity,
) -> Result<berth_sdk::CsiStorageCapacity, FieldError> {
    storage::convert_csi_storage_capacity(c)
}

/// A PodDisruptionBudget as preemption reads it; the error names the bad field.
pub fn budget_from_k8s(
    pdb: &k8s_openapi::api::policy::v1::PodDisruptionBudget,
) -> Result<berth_sdk::PodDisruptionBudget, FieldError> {
    let name = required_name(&pdb.metadata)?;
    let namespace = namespace_of(&pdb.metadata);
    let selector = match pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(sel) => Some(super::affinity::label_selector(sel, "spec.selector")?),
        None => None,
    };
    let status = pdb.status.as_ref();
    Ok(berth_sdk::PodDisruptionBudget {
        namespace,
        name,
        selector,
        disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
        disrupted_pods: status
            .and_then(|s| s.disrupted_pods.as_ref())
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default(),
    })
}

/// The pod selector of a typed Service, ReplicationController, ReplicaSet or
/// StatefulSet read from the API server (`kind` names which); the error names the
/// bad field.
pub fn selector_from_k8s<T: serde::Serialize>(
    kind: &str,
    object: &T,
) -> Result<PodSelector, FieldError> {
    let location = Location {
        file: "api".into(),
        document: 1,
        line: 1,
    };
    let value = serde_json::to_value(object).map_err(|e| FieldError::new("", e.to_string()))?;
    match pod_selector(kind, value, "", &location) {
        Ok(s) => Ok(s),
        Err(ManifestError::Invalid { path, message, .. }) => Err(FieldError { path, message }),
        Err(e) => Err(FieldError::new("", e.to_string())),
    }
}

/// The pod selector of a Service, ReplicationController (label maps) or ReplicaSet,
/// StatefulSet (`metav1.LabelSelector`).
fn pod_selector(
    kind: &str,
    value: Value,
    path: &str,
    location: &Location,
) -> Result<PodSelector, ManifestError> {
    use k8s_openapi::api::apps::v1 as apps;
    let invalid = |field: &str, message: String| ManifestError::Invalid {
        location: location.clone(),
        path: join(path, field),
        message,
    };
    let (meta, selector) = match kind {
        "Service" => {
            let s: k8s::Service = deserialize(value, path, location)?;
            let labels = s.spec.and_then(|s| s.selector).unwrap_or_default();
            (
                s.metadata,
                berth_sdk::affinity::LabelSelector {
                    match_labels: labels,
                    match_expressions: Vec::new(),
                },
            )
        }
        "ReplicationController" => {
            let s: k8s::ReplicationController = deserialize(value, path, location)?;
            let labels = s.spec.and_then(|s| s.selector).unwrap_or_default();
            (
                s.metadata,
                berth_sdk::affinity::LabelSelector {
                    match_labels: labels,
                    match_expressions: Vec::new(),
                },
            )
        }
        "ReplicaSet" | "StatefulSet" => {
            let (meta, sel) = if kind == "ReplicaSet" {
                let s: apps::ReplicaSet = deserialize(value, path, location)?;
                (s.metadata, Some(s.spec.selector))
            } else {
                let s: apps::StatefulSet = deserialize(value, path, location)?;
                (s.metadata, Some(s.spec.selector))
            };
            let selector = match sel {
                Some(sel) => super::affinity::label_selector(&sel, "spec.selector")
                    .map_err(|(p, m)| invalid(&p, m))?,
                None => berth_sdk::affinity::LabelSelector::default(),
            };
            (meta, selector)
        }
        _ => unreachable!("dispatched on these kinds"),
    };
    let name = meta.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(invalid("metadata.name", "required value".into()));
    }
    Ok(PodSelector {
        kind: kind.to_owned(),
        namespace: meta
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()),
        name,
        selector,
    })
}

/// Deserializes a typed object, naming the field path of a type error.
fn deserialize<T: serde::de::DeserializeOwned>(
    value: Value,
    path: &str,
    location: &Location,
) -> Result<T, ManifestError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        // serde_path_to_error writes the empty path as ".".
        let field = if field == "." { "" } else { &field };
        ManifestError::Invalid {
            location: location.clone(),
            path: join(path, field),
            message: e.inner().to_string(),
        }
    })
}

/// A typed `scheduling.k8s.io/v1` PriorityClass, as a manifest's or the API server's.
pub fn priority_class_from_k8s(
    pc: &k8s_openapi::api::scheduling::v1::PriorityClass,
) -> Result<PriorityClass, FieldError> {
    let name = pc.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(FieldError::new("metadata.name", "required value"));
    }
    let preemption_policy = match pc.preemption_policy.as_deref() {
        None | Some("PreemptLowerPriority") => berth_sdk::PreemptionPolicy::PreemptLowerPriority,
        Some("Never") => berth_sdk::PreemptionPolicy::Never,
        Some(other) => {
            return Err(FieldError::new(
                "preemptionPolicy",
                format!(
                    "unsupported value {other:?}: supported values: \"Never\", \"PreemptLowerPriority\""
                ),
            ));
        }
    };
    let Some(value) = pc.value else {
        return Err(FieldError::new("value", "required value"));
    };
    Ok(PriorityClass {
        name,
        value,
        global_default: pc.global_default.unwrap_or(false),
        preemption_policy,
    })
}

/// Converts a Kubernetes Pod, applying the API server's defaults: namespace
/// `default`, scheduler `default-scheduler`, requests from limits, the host ports of
/// a host-network pod, the priority of the built-in priority classes. A pod without a
/// UID gets one derived from its namespace and name.
///
/// The error names the bad field, as `spec.tolerations[0].operator: ...`.
pub fn pod_from_k8s(pod: &k8s::Pod) -> Result<Pod, FieldError> {
    convert_pod(pod)
}

/// Converts a Kubernetes Node. A node whose allocatable (or, without allocatable,
/// capacity) states no `pods` may hold [`DEFAULT_MAX_PODS`] (110, the kubelet's
/// default), as a kubelet would report.
///
/// The error names the bad field, as `spec.taints[0].effect: ...`.
pub fn node_from_k8s(node: &k8s::Node) -> Result<Node, FieldError> {
    convert_node(node)
}

fn required_name(meta: &ObjectMeta) -> Result<String, FieldError> {
    match meta.name.as_deref() {
        Some(name) if !name.is_empty() => Ok(name.to_owned()),
        _ => Err(FieldError::new("metadata.name", "required value")),
    }
}

/// An object's namespace: `default` when unset or empty, as the API server defaults it.
fn namespace_of(meta: &ObjectMeta) -> String {
    non_empty(&meta.namespace).unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
}

fn non_empty(s: &Option<String>) -> Option<String> {
    s.clone().filter(|s| !s.is_empty())
}

/// A stable UID for a pod that has none, so that loading the same manifest twice
/// gives the same pod: a UUID (version 8, "custom") made of a SHA-256 of its key.
pub(crate) fn derived_uid(namespace: &str, name: &str) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(format!("{namespace}/{name}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&hash[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Converts a resource map found at `path` (see [`quantity::resource_list`]).
fn resources(
    map: Option<&BTreeMap<String, Quantity>>,
    path: &str,
) -> Result<ResourceList, FieldError> {
    let Some(map) = map else {
        return Ok(ResourceList::new());
    };
    quantity::resource_list(map)
        .map_err(|e| FieldError::new(format!("{path}.{}", e.resource), e.error.to_string()))
}

fn taint_effect(effect: &str) -> Option<TaintEffect> {
    match effect {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

fn convert_pod(pod: &k8s::Pod) -> Result<Pod, FieldError> {
    let meta = &pod.metadata;
    let name = required_name(meta)?;
    let namespace = non_empty(&meta.namespace).unwrap_or_else(|| DEFAULT_NAMESPACE.into());
    let uid = non_empty(&meta.uid).unwrap_or_else(|| derived_uid(&namespace, &name));
    let default_spec = k8s::PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&default_spec);
    let host_network = spec.host_network.unwrap_or(false);

    let status = pod.status.as_ref();
    let (containers, init_containers) = pod_containers(spec, status, host_network)?;
    let resource_claims = spec
        .resource_claims
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| pod_resource_claim(c, &format!("spec.resourceClaims[{i}]")))
        .collect::<Result<_, _>>()?;
    let tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| toleration(t, &format!("spec.tolerations[{i}]")))
        .collect::<Result<_, _>>()?;

    let priority = spec.priority.unwrap_or_else(|| {
        let class = spec.priority_class_name.as_deref().unwrap_or("");
        BUILT_IN_PRIORITY_CLASSES
            .iter()
            .find(|(name, _)| *name == class)
            .map_or(0, |(_, value)| *value)
    });

    let mut converted = Pod {
        uid,
        namespace,
        name,
        labels: meta.labels.clone().unwrap_or_default(),
        priority,
        scheduler_name: non_empty(&spec.scheduler_name)
            .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.into()),
        node_name: spec.node_name.clone().unwrap_or_default(),
        nominated_node_name: pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            .unwrap_or_default(),
        containers,
        init_containers,
        overhead: resources(spec.overhead.as_ref(), "spec.overhead")?,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        tolerations,
        scheduling_gates: spec
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect(),
        terminating: meta.deletion_timestamp.is_some(),
        preempted: pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "DisruptionTarget"))
            .is_some_and(|c| {
                c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler")
            }),
        preemption_policy: match spec.preemption_policy.as_deref() {
            Some("Never") => berth_sdk::PreemptionPolicy::Never,
            None | Some("PreemptLowerPriority") => {
                berth_sdk::PreemptionPolicy::PreemptLowerPriority
            }
            Some(other) => {
                return Err(FieldError::new(
                    "spec.preemptionPolicy",
                    format!(
                        "unsupported value {other:?}: supported values: \"Never\", \"PreemptLowerPriority\""
                    ),
                ));
            }
        },
        start_time_ms: pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_millisecond()),
        affinity: super::affinity::affinity(spec.affinity.as_ref(), "spec.affinity")
            .map_err(|(p, m)| FieldError::new(p, m))?,
        topology_spread_constraints: super::affinity::spread_constraints(
            spec.topology_spread_constraints.as_ref(),
            "spec.topologySpreadConstraints",
        )
        .map_err(|(p, m)| FieldError::new(p, m))?,
        // Filled in by the scheduler from the Services and controllers it knows.
        default_selector: None,
        volumes: storage::pod_volumes(spec.volumes.as_ref()),
        resources: None,
        resize_infeasible: status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodResizePending"))
            .is_some_and(|c| c.reason.as_deref() == Some("Infeasible")),
        resource_claims,
        resource_claim_statuses: status
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| PodResourceClaimStatus {
                name: c.name.clone(),
                resource_claim_name: c.resource_claim_name.clone(),
            })
            .collect(),
        scheduling_group: spec
            .scheduling_group
            .as_ref()
            .and_then(|g| non_empty(&g.pod_group_name)),
        host_network,
        host_users: spec.host_users,
        ephemeral_containers: ephemeral_containers(spec),
        extended_resource_claim_status: extended_resource_claim_status(status),
    };
    converted.resources = pod_level_resources(spec.resources.as_ref(), &converted)?;
    Ok(converted)
}

/// A pod's containers and init containers, each with its status (by name, from
/// either list of statuses).
fn pod_containers(
    spec: &k8s::PodSpec,
    status: Option<&k8s::PodStatus>,
    host_network: bool,
) -> Result<(Vec<Container>, Vec<Container>), FieldError> {
    let statuses = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .chain(
            status
                .and_then(|s| s.init_container_statuses.as_ref())
                .into_iter()
                .flatten(),
        )
        .collect::<Vec<_>>();
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            container(
                c,
                &format!("spec.containers[{i}]"),
                false,
                host_network,
                &statuses,
            )
        })
        .collect::<Result<_, _>>()?;
    let init_containers = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            container(
                c,
                &format!("spec.initContainers[{i}]"),
                true,
                host_network,
                &statuses,
            )
        })
        .collect::<Result<_, _>>()?;
    Ok((containers, init_containers))
}

/// A pod's ephemeral containers: what scheduling reads of them (name, image,
/// restart rules, volume mounts).
fn ephemeral_containers(spec: &k8s::PodSpec) -> Vec<Container> {
    spec.ephemeral_containers
        .iter()
        .flatten()
        .map(|c| Container {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            restart_policy_rule_actions: restart_rule_actions(c.restart_policy_rules.as_ref()),
            volume_mounts: volume_mounts(c.volume_mounts.as_ref()),
            ..Container::default()
        })
        .collect()
}

/// `status.extendedResourceClaimStatus`: the claim made for a pod's extended
/// resources backed by DRA, and which request serves which container's resource.
fn extended_resource_claim_status(
    status: Option<&k8s::PodStatus>,
) -> Option<berth_sdk::PodExtendedResourceClaimStatus> {
    status
        .and_then(|s| s.extended_resource_claim_status.as_ref())
        .map(|s| berth_sdk::PodExtendedResourceClaimStatus {
            resource_claim_name: s.resource_claim_name.clone(),
            request_mappings: s
                .request_mappings
                .iter()
                .map(|m| berth_sdk::ContainerExtendedResourceRequest {
                    container_name: m.container_name.clone(),
                    resource_name: m.resource_name.clone(),
                    request_name: m.request_name.clone(),
                })
                .collect(),
        })
}

/// Converts `spec.resources` (pod-level resources), with the API server's defaults
/// for a pod that sets pod-level limits (upstream's `defaultPodRequests`): a request
/// missing for CPU or memory is what the containers request together when any of
/// them requests it, and the limit otherwise; a missing request of another
/// resource pod-level resources support is its limit. Pod-level resources support
/// only CPU, memory and hugepages, as the API server's validation.
fn pod_level_resources(
    r: Option<&k8s::ResourceRequirements>,
    pod: &Pod,
) -> Result<Option<ResourceRequirements>, FieldError> {
    let Some(r) = r else {
        return Ok(None);
    };
    let mut requests = resources(r.requests.as_ref(), "spec.resources.requests")?;
    let limits = resources(r.limits.as_ref(), "spec.resources.limits")?;
    for (field, list) in [("requests", &requests), ("limits", &limits)] {
        if let Some(name) = list.keys().find(|n| !berth_sdk::is_pod_level_resource(n)) {
            return Err(FieldError::new(
                format!("spec.resources.{field}.{name}"),
                "unsupported pod-level resource: supported are cpu, memory and hugepages-*",
            ));
        }
    }
    if !limits.is_empty() {
        let together = pod.container_requests();
        for name in [berth_sdk::CPU, berth_sdk::MEMORY] {
            let requested = pod
                .containers
                .iter()
                .chain(&pod.init_containers)
                .any(|c| c.requests.contains_key(name));
            if requested && !requests.contains_key(name) {
                requests.insert(name.to_owned(), together.get(name));
            }
        }
        for (name, &limit) in &limits {
            requests.entry(name.clone()).or_insert(limit);
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return Ok(None);
    }
    Ok(Some(ResourceRequirements { requests, limits }))
}

/// Converts an entry of `spec.resourceClaims` found at `path`.
fn pod_resource_claim(
    c: &k8s::PodResourceClaim,
    path: &str,
) -> Result<PodResourceClaim, FieldError> {
    if c.name.is_empty() {
        return Err(FieldError::new(format!("{path}.name"), "required value"));
    }
    let source = match (
        non_empty(&c.resource_claim_name),
        non_empty(&c.resource_claim_template_name),
    ) {
        (Some(claim), None) => ClaimSource::ClaimName(claim),
        (None, Some(template)) => ClaimSource::TemplateName(template),
        (Some(_), Some(_)) => {
            return Err(FieldError::new(
                path,
                "resourceClaimName and resourceClaimTemplateName are mutually exclusive",
            ));
        }
        (None, None) => {
            return Err(FieldError::new(
                path,
                "one of resourceClaimName or resourceClaimTemplateName is required",
            ));
        }
    };
    Ok(PodResourceClaim {
        name: c.name.clone(),
        source,
    })
}

/// Converts a container found at `path`.
fn container(
    c: &k8s::Container,
    path: &str,
    init: bool,
    host_network: bool,
    statuses: &[&k8s::ContainerStatus],
) -> Result<Container, FieldError> {
    let res = c.resources.as_ref();
    let mut requests = resources(
        res.and_then(|r| r.requests.as_ref()),
        &format!("{path}.resources.requests"),
    )?;
    let limits = resources(
        res.and_then(|r| r.limits.as_ref()),
        &format!("{path}.resources.limits"),
    )?;
    // The API server defaults each request that is missing to its limit.
    for (name, limit) in limits {
        requests.entry(name).or_insert(limit);
    }
    let ports = c
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            // The API server gives a host-network pod's ports their container port
            // as host port.
            let port = match p.host_port.unwrap_or(0) {
                0 if host_network => p.container_port,
                port => port,
            };
            (port > 0).then(|| HostPort {
                host_ip: p.host_ip.clone().unwrap_or_default(),
                protocol: non_empty(&p.protocol).unwrap_or_else(|| "TCP".into()),
                port,
            })
        })
        .collect();
    if c.name.is_empty() {
        return Err(FieldError::new(format!("{path}.name"), "required value"));
    }
    // Its status, where in-place resize shows what the kubelet allocated and what
    // the container runs with.
    let status = statuses.iter().find(|s| s.name == c.name);
    let statuses_field = if init {
        "initContainerStatuses"
    } else {
        "containerStatuses"
    };
    let status_path = format!("status.{statuses_field}[name={}]", c.name);
    Ok(Container {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        requests,
        ports,
        restartable: init && c.restart_policy.as_deref() == Some("Always"),
        allocated: status
            .and_then(|st| st.allocated_resources.as_ref())
            .map(|m| resources(Some(m), &format!("{status_path}.allocatedResources")))
            .transpose()?,
        actuated: status
            .and_then(|st| st.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .map(|m| resources(Some(m), &format!("{status_path}.resources.requests")))
            .transpose()?,
        restart_policy_rule_actions: restart_rule_actions(c.restart_policy_rules.as_ref()),
        volume_mounts: volume_mounts(c.volume_mounts.as_ref()),
    })
}

/// The `action` of each of a container's `restartPolicyRules`, in order.
fn restart_rule_actions(rules: Option<&Vec<k8s::ContainerRestartRule>>) -> Vec<String> {
    rules
        .into_iter()
        .flatten()
        .map(|r| r.action.clone())
        .collect()
}

/// A container's `volumeMounts`, as far as scheduling reads them.
fn volume_mounts(mounts: Option<&Vec<k8s::VolumeMount>>) -> Vec<berth_sdk::VolumeMount> {
    mounts
        .into_iter()
        .flatten()
        .map(|m| berth_sdk::VolumeMount {
            name: m.name.clone(),
            bind_mount_options: m.bind_mount_options.clone().unwrap_or_default(),
        })
        .collect()
}

/// Converts a toleration found at `path`.
fn toleration(t: &k8s::Toleration, path: &str) -> Result<Toleration, FieldError> {
    let operator = match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => TolerationOperator::Equal,
        "Exists" => TolerationOperator::Exists,
        other => {
            return Err(FieldError::unsupported(
                format!("{path}.operator"),
                other,
                &TOLERATION_OPERATORS,
            ));
        }
    };
    let effect = match t.effect.as_deref().unwrap_or("") {
        "" => None,
        other => Some(taint_effect(other).ok_or_else(|| {
            FieldError::unsupported(format!("{path}.effect"), other, &TAINT_EFFECTS)
        })?),
    };
    Ok(Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator,
        value: t.value.clone().unwrap_or_default(),
        effect,
        toleration_seconds: t.toleration_seconds,
    })
}

fn convert_node(node: &k8s::Node) -> Result<Node, FieldError> {
    let name = required_name(&node.metadata)?;
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            if t.key.is_empty() {
                return Err(FieldError::new(
                    format!("spec.taints[{i}].key"),
                    "required value",
                ));
            }
            let effect = taint_effect(&t.effect).ok_or_else(|| {
                FieldError::unsupported(
                    format!("spec.taints[{i}].effect"),
                    &t.effect,
                    &TAINT_EFFECTS,
                )
            })?;
            Ok(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect::<Result<_, FieldError>>()?;
    let mut allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
        Some(map) => resources(Some(map), "status.allocatable")?,
        None => resources(status.and_then(|s| s.capacity.as_ref()), "status.capacity")?,
    };
    allocatable
        .entry(berth_sdk::PODS.to_owned())
        .or_insert(DEFAULT_MAX_PODS);
    let images = status
        .and_then(|s| s.images.as_ref())
        .into_iter()
        .flatten()
        .map(|i| ImageState {
            names: i.names.clone().unwrap_or_default(),
            size_bytes: i.size_bytes.unwrap_or(0),
            // Counted over the whole cluster by the host, not known per node.
            num_nodes: 0,
        })
        .collect();
    Ok(Node {
        name,
        labels: node.metadata.labels.clone().unwrap_or_default(),
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        allocatable: Resources::from_list(&allocatable),
        images,
        declared_features: status
            .and_then(|s| s.declared_features.clone())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Vec<Document> {
        load_str("t.yaml", text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(text: &str) -> String {
        load_str("t.yaml", text).unwrap_err().to_string()
    }

    fn pods(text: &str) -> Vec<Pod> {
        load(text)
            .into_iter()
            .map(|d| match d.object {
                Object::Pod(p) => p,
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    fn pod(text: &str) -> Pod {
        let mut all = pods(text);
        assert_eq!(all.len(), 1);
        all.remove(0)
    }

    fn node(text: &str) -> Node {
        match load(text).remove(0).object {
            Object::Node(n) => n,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn names(docs: &[Document]) -> Vec<String> {
        docs.iter()
            .map(|d| match &d.object {
                Object::Node(n) => format!("node/{}", n.name),
                Object::Pod(p) => format!("pod/{}", p.name),
                Object::Namespace(n, _) => format!("namespace/{n}"),
                Object::Selector(s) => format!("{}/{}", s.kind.to_lowercase(), s.name),
                Object::Workload(w) => format!("{}/{}", w.kind.to_lowercase(), w.name),
                Object::PriorityClass(c) => format!("priorityclass/{}", c.name),
                Object::Budget(b) => format!("poddisruptionbudget/{}", b.name),
                Object::Configuration(_) => "kubeschedulerconfiguration".to_owned(),
                Object::Claim(c) => format!("persistentvolumeclaim/{}", c.key()),
                Object::Volume(v) => format!("persistentvolume/{}", v.name),
                Object::StorageClass(c) => format!("storageclass/{}", c.name),
                Object::CsiNode(n) => format!("csinode/{}", n.name),
                Object::CsiDriver(d) => format!("csidriver/{}", d.name),
                Object::CsiStorageCapacity(c) => {
                    format!("csistoragecapacity/{}/{}", c.namespace, c.name)
                }
                Object::PodGroup(g) => format!("podgroup/{}/{}", g.namespace, g.name),
                Object::SchedulingWorkload(w) => {
                    format!("workload.scheduling/{}/{}", w.namespace, w.name)
                }
                Object::DeviceClass(c) => format!("deviceclass/{}", c.name),
                Object::ResourceClaim(c) => format!("resourceclaim/{}", c.key()),
                Object::ResourceClaimTemplate(t) => {
                    format!("resourceclaimtemplate/{}/{}", t.namespace, t.name)
                }
                Object::ResourceSlice(s) => format!("resourceslice/{}", s.name),
                Object::DeviceTaintRule(r) => format!("devicetaintrule/{}", r.name),
                Object::Ignored { api_version, kind } => format!("ignored {api_version} {kind}"),
                Object::Delete {
                    kind,
                    namespace,
                    name,
                } => format!("delete {kind}/{namespace}/{name}"),
            })
            .collect()
    }

    #[test]
    fn namespaces_and_simulate_deletes() {
        let docs = load_str(
            "t.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {a: b}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {berth.dev/simulate: delete}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n, annotations: {berth.dev/simulate: delete}}\n",
        )
        .unwrap();
        assert_eq!(
            names(&docs),
            ["namespace/team", "delete Pod/default/p", "delete Node//n"]
        );
        let e = load_str(
            "t.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {berth.dev/simulate: explode}}\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.yaml: document 1 (line 1): metadata.annotations.berth.dev/simulate: unsupported value \"explode\": only \"delete\" (of an object Berth reads)"
        );
    }

    fn at(document: usize, line: usize) -> Location {
        Location {
            file: "t.yaml".into(),
            document,
            line,
        }
    }

    const MINIMAL_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n";

    #[test]
    fn multi_document_yaml_keeps_order_and_positions() {
        let text = "\
# A small cluster.
---
apiVersion: v1
kind: Node
metadata:
  name: n1
--- # the pods
# only a comment here
---

---
apiVersion: v1
kind: Pod
metadata:
  name: p1
---
~
---
  # indented comment
apiVersion: v1
kind: Pod
metadata: {name: p2}
";
        let docs = load(text);
        assert_eq!(names(&docs), ["node/n1", "pod/p1", "pod/p2"]);
        assert_eq!(docs[0].source, at(1, 3));
        assert_eq!(docs[1].source, at(2, 12));
        // The null document counts (it has content) but yields nothing.
        assert_eq!(docs[2].source, at(4, 20));
    }

    #[test]
    fn empty_texts_have_no_documents() {
        assert!(load("").is_empty());
        assert!(load("# nothing\n---\n---\n").is_empty());
        assert!(load("null\n").is_empty());
    }

    #[test]
    fn windows_line_endings_and_byte_order_mark() {
        let text = "\u{feff}apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\n---\r\napiVersion: v1\r\nkind: Node\r\nmetadata:\r\n  name: n\r\n";
        let docs = load(text);
        assert_eq!(names(&docs), ["pod/p", "node/n"]);
        assert_eq!(docs[1].source, at(2, 6));
    }

    #[test]
    fn json_objects_and_streams() {
        let one =
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}"#;
        assert_eq!(pod(one).key(), "ns/p");
        let stream = "\n\n{\"apiVersion\": \"v1\", \"kind\": \"Node\",\n \"metadata\": {\"name\": \"n\"}}\n\n  {\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"p\"}}\nnull\n";
        let docs = load(stream);
        assert_eq!(names(&docs), ["node/n", "pod/p"]);
        assert_eq!(docs[0].source, at(1, 3));
        assert_eq!(docs[1].source, at(2, 6));
    }

    #[test]
    fn lists_and_nested_lists() {
        let text = "\
apiVersion: v1
kind: Node
metadata: {name: first}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a}
- apiVersion: v1
  kind: List
  items:
  - apiVersion: v1
    kind: Node
    metadata: {name: b}
  - apiVersion: v1
    kind: List
- apiVersion: v1
  kind: Pod
  metadata: {name: c}
";
        let docs = load(text);
        assert_eq!(names(&docs), ["node/first", "pod/a", "node/b", "pod/c"]);
        assert!(docs[1..].iter().all(|d| d.source == at(2, 5)));

        let json = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}]}"#;
        assert_eq!(names(&load(json)), ["pod/x"]);
    }

    #[test]
    fn typed_lists_let_items_omit_their_kind() {
        let text = "\
apiVersion: v1
kind: PodList
items:
- metadata: {name: a}
- metadata: {name: b}
---
apiVersion: v1
kind: NodeList
items:
- metadata: {name: n}
";
        assert_eq!(names(&load(text)), ["pod/a", "pod/b", "node/n"]);
    }

    #[test]
    fn yaml_merge_keys_are_applied() {
        let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: p
  labels:
    <<: {app: web, tier: front}
    tier: back
";
        let labels = pod(text).labels;
        assert_eq!(labels["app"], "web");
        assert_eq!(labels["tier"], "back");
    }

    /// Scalars read as they always have (YAML 1.2's core schema): a quantity may be
    /// a number or a string, `08` and `yes` stay strings.
    #[test]
    fn yaml_scalars_keep_their_reading() {
        let requests = |cpu: &str| {
            let text = format!(
                "{MINIMAL_POD}spec:\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: {cpu}}}}}\n"
            );
            pod(&text).containers[0].requests["cpu"]
        };
        assert_eq!(requests("2"), 2000);
        assert_eq!(requests("\"2\""), 2000);
        assert_eq!(requests("0.5"), 500);
        assert_eq!(requests("1e3"), 1_000_000);
        assert_eq!(requests("0x10"), 16_000);
        assert_eq!(requests("08"), 8000);
        assert_eq!(requests("'250m'"), 250);
        let labels = pod(&format!(
            "{MINIMAL_POD}  labels: {{a: yes, b: on, c: '1', d: 08, e: 1_000, f: 2001-12-14}}\n"
        ))
        .labels;
        let labels: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                ("a", "yes"),
                ("b", "on"),
                ("c", "1"),
                ("d", "08"),
                ("e", "1_000"),
                ("f", "2001-12-14")
            ]
        );
        assert_eq!(
            error(&format!("{MINIMAL_POD}  labels: {{a: true}}\n")),
            "t.yaml: document 1 (line 1): metadata.labels.a: invalid type: boolean `true`, expected a string"
        );
        assert_eq!(
            error("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {unschedulable: yes}\n"),
            "t.yaml: document 1 (line 1): spec.unschedulable: invalid type: string \"yes\", expected a boolean"
        );
        // Null, `~` and nothing are all null.
        for none in ["null", "~", ""] {
            let p = pod(&format!("{MINIMAL_POD}  labels: {none}\nspec: {none}\n"));
            assert!(p.labels.is_empty());
        }
    }

    /// What the YAML reader refuses is reported at its line and column, with the
    /// field's path.
    #[test]
    fn yaml_reader_refusals_name_the_place() {
        let text = format!("{MINIMAL_POD}  labels:\n    app: web\n    tier: a\n    app: db\n");
        assert_eq!(
            error(&text),
            "t.yaml:8:5: metadata.labels: duplicate entry with key \"app\""
        );
        assert_eq!(
            error(&format!(
                "{MINIMAL_POD}spec:\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: .inf}}}}\n"
            )),
            "t.yaml:8:33: spec.containers[0].resources.requests.cpu: .inf is not a finite number (quote it to make it a string)"
        );
        assert_eq!(
            error(&format!("---\n{MINIMAL_POD}  labels: !custom {{a: b}}\n")),
            "t.yaml:6:19: metadata: unsupported tag `!custom`"
        );
    }

    #[test]
    fn yaml_anchors_and_aliases_are_expanded() {
        let text = "\
apiVersion: v1
kind: Pod
metadata: {name: p, labels: &labels {app: web}}
spec:
  nodeSelector: *labels
  containers:
  - name: a
    resources: &resources {requests: {cpu: 100m}}
  - name: b
    resources: *resources
";
        let p = pod(text);
        assert_eq!(p.node_selector["app"], "web");
        assert_eq!(p.containers[1].requests["cpu"], 100);
        assert_eq!(p.requests().milli_cpu, 200);
    }

    #[test]
    fn pod_defaults() {
        let p = pod(MINIMAL_POD);
        assert_eq!(p.name, "p");
        assert_eq!(p.namespace, "default");
        assert_eq!(p.scheduler_name, "default-scheduler");
        assert_eq!(p.priority, 0);
        assert_eq!(p.node_name, "");
        assert_eq!(p.nominated_node_name, "");
        assert!(p.containers.is_empty() && p.init_containers.is_empty());
        assert!(p.labels.is_empty() && p.node_selector.is_empty());
        assert!(p.overhead.is_empty() && p.tolerations.is_empty());
        assert!(p.scheduling_gates.is_empty());
        assert!(!p.terminating);
    }

    #[test]
    fn derived_uids_are_stable_uuids() {
        let uid = pod(MINIMAL_POD).uid;
        assert_eq!(uid, pod(MINIMAL_POD).uid);
        assert_eq!(uid, derived_uid("default", "p"));
        assert_ne!(uid, derived_uid("other", "p"));
        assert_ne!(uid, derived_uid("default", "q"));
        let groups: Vec<usize> = uid.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert!(uid.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
        assert_eq!(&uid[14..15], "8");
        assert!("89ab".contains(&uid[19..20]));
        let given = pod(&format!("{MINIMAL_POD}  uid: 1234-abcd\n"));
        assert_eq!(given.uid, "1234-abcd");
    }

    #[test]
    fn pod_fields() {
        let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
  labels: {app: web}
  deletionTimestamp: \"2024-05-01T10:00:00Z\"
spec:
  priority: 7
  priorityClassName: system-node-critical
  schedulerName: my-scheduler
  nodeName: n1
  nodeSelector: {disk: ssd}
  overhead: {cpu: 250m, memory: 120Mi}
  schedulingGates:
  - name: example.com/wait
  tolerations:
  - key: dedicated
    value: gpu
    effect: NoSchedule
  - operator: Exists
  - key: unreachable
    operator: Exists
    effect: NoExecute
    tolerationSeconds: 300
  initContainers:
  - name: setup
    image: busybox
    resources:
      requests: {cpu: '1', memory: 1Gi}
  - name: proxy
    image: envoy
    restartPolicy: Always
    resources:
      requests: {cpu: 100m}
  containers:
  - name: app
    image: nginx:1.27
    resources:
      requests: {cpu: 0.5, memory: 256Mi, example.com/gpu: 2}
    ports:
    - containerPort: 8080
    - containerPort: 80
      hostPort: 8080
    - containerPort: 53
      hostPort: 5353
      hostIP: 10.0.0.1
      protocol: UDP
status:
  nominatedNodeName: n2
";
        let p = pod(text);
        assert_eq!(p.key(), "shop/web");
        assert_eq!(p.labels["app"], "web");
        assert!(p.terminating);
        // An explicit priority wins over the class.
        assert_eq!(p.priority, 7);
        assert_eq!(p.scheduler_name, "my-scheduler");
        assert_eq!(p.node_name, "n1");
        assert_eq!(p.nominated_node_name, "n2");
        assert_eq!(p.node_selector["disk"], "ssd");
        assert_eq!(
            p.overhead,
            ResourceList::from([("cpu".into(), 250), ("memory".into(), 120 << 20)])
        );
        assert_eq!(p.scheduling_gates, ["example.com/wait"]);

        assert_eq!(
            p.tolerations,
            [
                Toleration {
                    key: "dedicated".into(),
                    operator: TolerationOperator::Equal,
                    value: "gpu".into(),
                    effect: Some(TaintEffect::NoSchedule),
                    toleration_seconds: None,
                },
                Toleration {
                    key: String::new(),
                    operator: TolerationOperator::Exists,
                    value: String::new(),
                    effect: None,
                    toleration_seconds: None,
                },
                Toleration {
                    key: "unreachable".into(),
                    operator: TolerationOperator::Exists,
                    value: String::new(),
                    effect: Some(TaintEffect::NoExecute),
                    toleration_seconds: Some(300),
                },
            ]
        );

        let [setup, proxy] = &p.init_containers[..] else {
            panic!("two init containers expected");
        };
        assert_eq!(
            (setup.name.as_str(), setup.image.as_str()),
            ("setup", "busybox")
        );
        assert!(!setup.restartable);
        assert_eq!(setup.requests["memory"], 1 << 30);
        assert!(proxy.restartable);

        let app = &p.containers[0];
        assert_eq!(app.name, "app");
        assert_eq!(app.image, "nginx:1.27");
        assert_eq!(
            app.requests,
            ResourceList::from([
                ("cpu".into(), 500),
                ("memory".into(), 256 << 20),
                ("example.com/gpu".into(), 2),
            ])
        );
        assert_eq!(
            app.ports,
            [
                HostPort {
                    host_ip: String::new(),
                    protocol: "TCP".into(),
                    port: 8080,
                },
                HostPort {
                    host_ip: "10.0.0.1".into(),
                    protocol: "UDP".into(),
                    port: 5353,
                },
            ]
        );
        // The plain init container runs before the sidecar starts and is the largest.
        assert_eq!(p.requests().milli_cpu, 1000 + 250);
    }

    #[test]
    fn priority_of_built_in_classes() {
        let with_class = |class: &str| {
            pod(&format!(
                "{MINIMAL_POD}spec:\n  priorityClassName: {class}\n  containers: []\n"
            ))
            .priority
        };
        assert_eq!(with_class("system-cluster-critical"), 2_000_000_000);
        assert_eq!(with_class("system-node-critical"), 2_000_001_000);
        assert_eq!(with_class("high"), 0);
    }

    #[test]
    fn requests_default_to_limits_per_resource() {
        let text = "\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: limits-only
    resources:
      limits: {cpu: '2', memory: 1Gi}
  - name: mixed
    resources:
      requests: {cpu: 500m}
      limits: {cpu: '1', memory: 2Gi}
  initContainers:
  - name: init
    resources:
      limits: {cpu: 3}
";
        let p = pod(text);
        assert_eq!(
            p.containers[0].requests,
            ResourceList::from([("cpu".into(), 2000), ("memory".into(), 1 << 30)])
        );
        assert_eq!(
            p.containers[1].requests,
            ResourceList::from([("cpu".into(), 500), ("memory".into(), 2 << 30)])
        );
        assert_eq!(p.init_containers[0].requests["cpu"], 3000);
    }

    #[test]
    fn host_network_ports_default_to_container_ports() {
        let text = "\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  hostNetwork: true
  containers:
  - name: c
    ports:
    - containerPort: 9100
    - containerPort: 53
      protocol: UDP
";
        let ports: Vec<i32> = pod(text).containers[0]
            .ports
            .iter()
            .map(|p| p.port)
            .collect();
        assert_eq!(ports, [9100, 53]);
    }

    #[test]
    fn node_fields() {
        let text = "\
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {kubernetes.io/hostname: n1, zone: a}
spec:
  unschedulable: true
  taints:
  - key: dedicated
    value: gpu
    effect: NoSchedule
  - key: node.kubernetes.io/unreachable
    effect: NoExecute
status:
  capacity: {cpu: '8', memory: 32Gi, pods: '250'}
  allocatable: {cpu: 7800m, memory: 30Gi, ephemeral-storage: 100G, nvidia.com/gpu: '4'}
  images:
  - names: [nginx:1.27, nginx@sha256:abc]
    sizeBytes: 70000000
  - names: [pause:3.10]
";
        let n = node(text);
        assert_eq!(n.name, "n1");
        assert_eq!(n.labels["zone"], "a");
        assert!(n.unschedulable);
        assert_eq!(
            n.taints,
            [
                Taint {
                    key: "dedicated".into(),
                    value: "gpu".into(),
                    effect: TaintEffect::NoSchedule,
                },
                Taint {
                    key: "node.kubernetes.io/unreachable".into(),
                    value: String::new(),
                    effect: TaintEffect::NoExecute,
                },
            ]
        );
        // Allocatable wins over capacity, as a whole; pods default to 110.
        assert_eq!(n.allocatable.milli_cpu, 7800);
        assert_eq!(n.allocatable.memory, 30 << 30);
        assert_eq!(n.allocatable.ephemeral_storage, 100_000_000_000);
        assert_eq!(n.allocatable.allowed_pod_number, 110);
        assert_eq!(n.allocatable.scalar["nvidia.com/gpu"], 4);
        assert_eq!(
            n.images,
            [
                ImageState {
                    names: vec!["nginx:1.27".into(), "nginx@sha256:abc".into()],
                    size_bytes: 70_000_000,
                    num_nodes: 0,
                },
                ImageState {
                    names: vec!["pause:3.10".into()],
                    size_bytes: 0,
                    num_nodes: 0,
                },
            ]
        );
    }

    #[test]
    fn node_allocatable_falls_back_to_capacity() {
        let n = node(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus:\n  capacity: {cpu: 4, memory: 8Gi, pods: 30}\n",
        );
        assert_eq!(n.allocatable.milli_cpu, 4000);
        assert_eq!(n.allocatable.memory, 8 << 30);
        assert_eq!(n.allocatable.allowed_pod_number, 30);
        let bare = node("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n");
        assert_eq!(
            bare.allocatable,
            Resources {
                allowed_pod_number: 110,
                ..Resources::default()
            }
        );
        assert!(!bare.unschedulable && bare.taints.is_empty() && bare.images.is_empty());
    }

    #[test]
    fn syntax_errors_give_file_line_and_column() {
        let text = "\
apiVersion: v1
kind: Node
metadata:
  name: n
---
apiVersion: v1
kind: Pod
metadata:
  name: p
 labels: x
";
        assert_eq!(
            error(text),
            "t.yaml:10:2: while parsing a block mapping, did not find expected key"
        );
        assert_eq!(
            error("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  - b\n"),
            "t.yaml:5:5: while parsing a block mapping, did not find expected key"
        );
        // Where the bracket that is never closed opens.
        assert_eq!(error("a: [1, 2\n"), "t.yaml:1:4: unclosed bracket '['");
        assert_eq!(
            error("{\"apiVersion\": \"v1\",\n \"kind\": \"Pod\",\n}"),
            "t.yaml:3:1: trailing comma"
        );
        assert_eq!(
            error("{\"kind\": \"Pod\"} {\"kind\""),
            "t.yaml:1:23: EOF while parsing an object"
        );
        assert_eq!(
            error("a: 1\na: 2\n"),
            "t.yaml:2:1: duplicate entry with key \"a\""
        );
        assert_eq!(
            error("apiVersion: v1\n--- |\n  text\n"),
            "t.yaml:2:5: invalid YAML document separator: |"
        );
        assert_eq!(
            error("apiVersion: v1\n----\n"),
            "t.yaml:2:4: invalid YAML document separator: -"
        );
    }

    #[test]
    fn kinds_scheduling_does_not_read_are_ignored_and_named() {
        let text = format!(
            "{MINIMAL_POD}---\n# a cron job\napiVersion: batch/v1\nkind: CronJob\nmetadata: {{name: d}}\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - {{apiVersion: v1, kind: Secret}}\n  - {{apiVersion: batch/v1, kind: CronJob}}\n---\napiVersion: v2\nkind: Pod\nmetadata: {{name: p}}\n"
        );
        let docs = load(&text);
        assert_eq!(
            names(&docs),
            [
                "pod/p",
                "ignored batch/v1 CronJob",
                "ignored v1 Secret",
                "ignored batch/v1 CronJob",
                "ignored v2 Pod"
            ]
        );
        assert_eq!(docs[1].source, at(2, 7));
        assert_eq!(
            ignored_kinds_warning(&docs).unwrap(),
            format!(
                "ignoring objects of kinds scheduling does not read: batch/v1 CronJob (2), v1 Secret (1), v2 Pod (1); only {ACCEPTED_KINDS} are read"
            )
        );
        assert_eq!(ignored_kinds_warning(&docs[..1]), None);
    }

    #[test]
    fn malformed_objects_are_reported() {
        assert_eq!(
            error("kind: Pod\nmetadata: {name: p}\n"),
            "t.yaml: document 1 (line 1): apiVersion: required value"
        );
        assert_eq!(
            error("apiVersion: v1\nmetadata: {name: p}\n"),
            "t.yaml: document 1 (line 1): kind: required value"
        );
        assert_eq!(
            error("apiVersion: v1\nkind: 3\n"),
            "t.yaml: document 1 (line 1): kind: invalid type: a number, expected a string"
        );
        assert_eq!(
            error("- a\n- b\n"),
            "t.yaml: document 1 (line 1): expected an object with apiVersion and kind, found a sequence"
        );
        assert_eq!(
            error("apiVersion: v1\nkind: List\nitems: {a: 1}\n"),
            "t.yaml: document 1 (line 1): items: invalid type: a mapping, expected a sequence"
        );
        assert_eq!(
            error("apiVersion: v1\nkind: List\nitems: [null]\n"),
            "t.yaml: document 1 (line 1): items[0]: expected an object with apiVersion and kind, found null"
        );
    }

    #[test]
    fn type_errors_name_the_field_path() {
        let text = "\
apiVersion: v1
kind: Node
metadata: {name: n}
---
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: c
    ports:
    - containerPort: 80
      hostPort: \"80\"
";
        assert_eq!(
            error(text),
            "t.yaml: document 2 (line 5): spec.containers[0].ports[0].hostPort: invalid type: string \"80\", expected i32"
        );
        assert_eq!(
            error(&format!("{MINIMAL_POD}  labels: {{version: 1}}\n")),
            "t.yaml: document 1 (line 1): metadata.labels.version: invalid type: integer `1`, expected a string"
        );
        assert_eq!(
            error(
                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n}\n  spec: {unschedulable: maybe}\n"
            ),
            "t.yaml: document 1 (line 1): items[0].spec.unschedulable: invalid type: string \"maybe\", expected a boolean"
        );
    }

    #[test]
    fn quantity_errors_name_the_field_path() {
        let pod_with = |resources: &str| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n    resources: {resources}\n"
            )
        };
        let err = load_str("examples/bad.yaml", &pod_with("{requests: {cpu: 1x}}")).unwrap_err();
        let ManifestError::Invalid { path, .. } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(path, "spec.containers[0].resources.requests.cpu");
        assert_eq!(
            err.to_string(),
            "examples/bad.yaml: document 1 (line 1): spec.containers[0].resources.requests.cpu: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            error(&pod_with("{limits: {memory: 1K}}")),
            "t.yaml: document 1 (line 1): spec.containers[0].resources.limits.memory: unable to parse quantity's suffix"
        );
        assert_eq!(
            error(&pod_with("{requests: {cpu: '-1'}}")),
            "t.yaml: document 1 (line 1): spec.containers[0].resources.requests.cpu: must be greater than or equal to 0"
        );
        assert_eq!(
            error(&pod_with("{requests: {memory: 8Ei}}")),
            "t.yaml: document 1 (line 1): spec.containers[0].resources.requests.memory: quantity is too large: it does not fit in a signed 64-bit integer"
        );
        assert_eq!(
            error(&format!(
                "{MINIMAL_POD}spec:\n  containers: []\n  overhead: {{cpu: --1}}\n"
            )),
            "t.yaml: document 1 (line 1): spec.overhead.cpu: unable to parse quantity's suffix"
        );
        assert_eq!(
            error(
                "apiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: n}\n  status: {capacity: {pods: Ei}}\n"
            ),
            "t.yaml: document 1 (line 1): items[0].status.capacity.pods: unable to parse numeric part of quantity"
        );
    }

    #[test]
    fn storage_kinds() {
        use berth_sdk::volumes::*;
        let docs = load(
            r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  annotations: {volume.kubernetes.io/selected-node: n1}
  ownerReferences:
  - {apiVersion: v1, kind: Pod, name: web, uid: pod-uid, controller: true}
spec:
  storageClassName: fast
  accessModes: [ReadWriteOncePod]
  resources: {requests: {storage: 1Gi}}
  selector: {matchLabels: {tier: gold}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1, labels: {topology.kubernetes.io/zone: us-east-1a}}
spec:
  storageClassName: fast
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  claimRef: {namespace: default, name: data, uid: claim-uid}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n1]}]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
status: {phase: Bound}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-east-1a, us-east-1b]}]
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: n1}
spec:
  drivers:
  - {name: ebs.csi.aws.com, nodeID: i-1, topologyKeys: [topology.kubernetes.io/zone], allocatable: {count: 25}}
  - {name: other.csi, nodeID: n1}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: ebs.csi.aws.com}
spec: {}
"#,
        );
        assert_eq!(
            names(&docs),
            [
                "persistentvolumeclaim/default/data",
                "persistentvolume/pv1",
                "storageclass/fast",
                "csinode/n1",
                "csidriver/ebs.csi.aws.com"
            ]
        );
        let Object::Claim(c) = &docs[0].object else {
            unreachable!()
        };
        assert_eq!(c.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(c.access_modes, [AccessMode::ReadWriteOncePod]);
        assert_eq!(c.requested_storage, 1 << 30);
        assert_eq!(c.selected_node(), Some("n1"));
        assert_eq!(c.controller_uid.as_deref(), Some("pod-uid"));
        assert_eq!(c.phase, ClaimPhase::Pending);
        assert!(c.selector.is_some());
        assert!(c.volume_name.is_empty());
        let Object::Volume(v) = &docs[1].object else {
            unreachable!()
        };
        assert_eq!(v.capacity_storage, 2 << 30);
        assert_eq!(v.volume_mode, VolumeMode::Block);
        assert_eq!(v.phase, VolumePhase::Bound);
        assert_eq!(
            v.claim_ref.as_ref().map(|r| r.uid.as_str()),
            Some("claim-uid")
        );
        assert_eq!(v.node_affinity.as_ref().map(Vec::len), Some(1));
        assert_eq!(
            v.source,
            PersistentVolumeSource::Csi {
                driver: "ebs.csi.aws.com".into(),
                volume_handle: "vol-1".into()
            }
        );
        let Object::StorageClass(sc) = &docs[2].object else {
            unreachable!()
        };
        assert_eq!(
            sc.volume_binding_mode,
            VolumeBindingMode::WaitForFirstConsumer
        );
        assert!(sc.is_default);
        assert_eq!(
            sc.allowed_topologies[0].match_label_expressions,
            [(
                "topology.kubernetes.io/zone".to_owned(),
                vec!["us-east-1a".to_owned(), "us-east-1b".to_owned()]
            )]
        );
        let Object::CsiNode(n) = &docs[3].object else {
            unreachable!()
        };
        assert_eq!(n.drivers[0].allocatable_count, Some(25));
        assert_eq!(n.drivers[1].allocatable_count, None);
        let Object::CsiDriver(d) = &docs[4].object else {
            unreachable!()
        };
        // The API server's defaults.
        assert!(d.attach_required && !d.storage_capacity);
    }

    #[test]
    fn csi_storage_capacities_in_bytes_and_bad_fields_named() {
        let docs = load(
            "apiVersion: storage.k8s.io/v1\nkind: CSIStorageCapacity\nmetadata: {name: csisc-1, namespace: kube-system}\nstorageClassName: fast\nnodeTopology: {matchLabels: {topology.hostpath.csi/node: n1}}\ncapacity: 1.5Gi\nmaximumVolumeSize: 100M\n---\napiVersion: storage.k8s.io/v1\nkind: CSIStorageCapacity\nmetadata: {name: unknown}\nstorageClassName: fast\n",
        );
        let Object::CsiStorageCapacity(c) = &docs[0].object else {
            panic!("{:?}", docs[0].object)
        };
        assert_eq!(
            (
                c.namespace.as_str(),
                c.name.as_str(),
                c.storage_class_name.as_str()
            ),
            ("kube-system", "csisc-1", "fast")
        );
        assert_eq!(c.capacity, Some(3 << 29));
        assert_eq!(c.maximum_volume_size, Some(100_000_000));
        assert_eq!(
            c.node_topology.as_ref().map(|t| t.match_labels.clone()),
            Some(
                [("topology.hostpath.csi/node".to_owned(), "n1".to_owned())]
                    .into_iter()
                    .collect()
            )
        );
        // Unset quantities are unknown, no topology matches no node.
        let Object::CsiStorageCapacity(c) = &docs[1].object else {
            panic!("{:?}", docs[1].object)
        };
        assert_eq!(c.namespace, "default");
        assert!(c.capacity.is_none() && c.maximum_volume_size.is_none());
        assert!(c.node_topology.is_none());

        let capacity = |body: &str| {
            error(&format!(
                "apiVersion: storage.k8s.io/v1\nkind: CSIStorageCapacity\nmetadata: {{name: c}}\n{body}\n"
            ))
        };
        assert_eq!(
            capacity("storageClassName: fast\ncapacity: 1x"),
            "t.yaml: document 1 (line 1): capacity: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            capacity("storageClassName: fast\nmaximumVolumeSize: '-1'"),
            "t.yaml: document 1 (line 1): maximumVolumeSize: must be greater than or equal to 0"
        );
        assert_eq!(
            capacity("capacity: 1Gi"),
            "t.yaml: document 1 (line 1): storageClassName: required value"
        );
        assert_eq!(
            capacity(
                "storageClassName: fast\nnodeTopology: {matchExpressions: [{key: k, operator: Has}]}"
            ),
            "t.yaml: document 1 (line 1): nodeTopology.matchExpressions[0].operator: unsupported operator \"Has\" (In, NotIn, Exists, DoesNotExist)"
        );
    }

    #[test]
    fn storage_defaults_and_beta_class_annotation() {
        use berth_sdk::volumes::*;
        let docs = load(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: c\n  annotations: {volume.beta.kubernetes.io/storage-class: old}\nspec: {storageClassName: new}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: none, namespace: ns}\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\nspec: {hostPath: {path: /x}}\n---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: sc}\nprovisioner: p\n",
        );
        let Object::Claim(c) = &docs[0].object else {
            unreachable!()
        };
        // Upstream reads the beta annotation before the field.
        assert_eq!(c.storage_class_name.as_deref(), Some("old"));
        let Object::Claim(c) = &docs[1].object else {
            unreachable!()
        };
        assert_eq!(
            (c.namespace.as_str(), c.storage_class_name.as_deref()),
            ("ns", None)
        );
        let Object::Volume(v) = &docs[2].object else {
            unreachable!()
        };
        assert_eq!(v.source, PersistentVolumeSource::Other);
        assert_eq!(v.phase, VolumePhase::Available);
        assert!(v.node_affinity.is_none() && v.storage_class_name.is_empty());
        let Object::StorageClass(sc) = &docs[3].object else {
            unreachable!()
        };
        assert_eq!(sc.volume_binding_mode, VolumeBindingMode::Immediate);
        assert!(!sc.is_default && sc.allowed_topologies.is_empty());
    }

    #[test]
    fn storage_errors_name_the_field() {
        assert_eq!(
            error(
                "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: {accessModes: [ReadWriteOnce, WriteSometimes]}\n"
            ),
            "t.yaml: document 1 (line 1): spec.accessModes[1]: unsupported value \"WriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\""
        );
        assert_eq!(
            error(
                "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: {resources: {requests: {storage: lots}}}\n"
            ),
            "t.yaml: document 1 (line 1): spec.resources.requests.storage: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            error(
                "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: v}\nspec:\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{key: k, operator: Near}]\n"
            ),
            "t.yaml: document 1 (line 1): spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator: unsupported operator \"Near\" (In, NotIn, Exists, DoesNotExist, Gt, Lt)"
        );
        assert_eq!(
            error(
                "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: sc}\nprovisioner: p\nvolumeBindingMode: Later\n"
            ),
            "t.yaml: document 1 (line 1): volumeBindingMode: unsupported value \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\""
        );
        assert_eq!(
            error("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: sc}\n"),
            "t.yaml: document 1 (line 1): provisioner: required value"
        );
        assert_eq!(
            error(
                "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n}\nspec:\n  drivers:\n  - {name: d, nodeID: x, allocatable: {count: many}}\n"
            ),
            "t.yaml: document 1 (line 1): spec.drivers[0].allocatable.count: invalid type: string \"many\", expected i32"
        );
        assert_eq!(
            error("apiVersion: v1\nkind: PersistentVolume\nmetadata: {}\n"),
            "t.yaml: document 1 (line 1): metadata.name: required value"
        );
    }

    #[test]
    fn pod_volumes() {
        use berth_sdk::volumes::VolumeSource;
        let p = pod(&format!(
            "{MINIMAL_POD}spec:\n  containers: []\n  volumes:\n  - {{name: a, persistentVolumeClaim: {{claimName: data, readOnly: true}}}}\n  - {{name: b, ephemeral: {{volumeClaimTemplate: {{spec: {{accessModes: [ReadWriteOnce]}}}}}}}}\n  - {{name: c, csi: {{driver: d.csi}}}}\n  - {{name: d, gcePersistentDisk: {{pdName: pd}}}}\n  - {{name: e, awsElasticBlockStore: {{volumeID: vol}}}}\n  - {{name: f, iscsi: {{targetPortal: 'p:3260', iqn: iqn.x, lun: 0, readOnly: true}}}}\n  - {{name: g, rbd: {{monitors: [m1], image: img}}}}\n  - {{name: h, emptyDir: {{}}}}\n"
        ));
        let sources: Vec<&VolumeSource> = p.volumes.iter().map(|v| &v.source).collect();
        assert_eq!(
            sources,
            [
                &VolumeSource::PersistentVolumeClaim {
                    claim_name: "data".into(),
                    read_only: true
                },
                &VolumeSource::Ephemeral,
                &VolumeSource::Csi {
                    driver: "d.csi".into()
                },
                &VolumeSource::GcePersistentDisk {
                    pd_name: "pd".into(),
                    read_only: false
                },
                &VolumeSource::AwsElasticBlockStore {
                    volume_id: "vol".into(),
                    read_only: false
                },
                &VolumeSource::Iscsi {
                    iqn: "iqn.x".into(),
                    read_only: true
                },
                &VolumeSource::Rbd {
                    monitors: vec!["m1".into()],
                    pool: "rbd".into(),
                    image: "img".into(),
                    read_only: false
                },
                &VolumeSource::Other,
            ]
        );
        assert_eq!(p.claim_names().collect::<Vec<_>>(), ["data", "p-b"]);
    }

    #[test]
    fn storage_objects_can_be_deleted_in_a_timeline() {
        let docs = load(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c, namespace: ns, annotations: {berth.dev/simulate: delete}}\n---\napiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n1, annotations: {berth.dev/simulate: delete}}\n",
        );
        assert_eq!(
            names(&docs),
            ["delete PersistentVolumeClaim/ns/c", "delete CSINode//n1"]
        );
    }

    #[test]
    fn invalid_values_name_the_field() {
        let tolerations = |t: &str| {
            error(&format!(
                "{MINIMAL_POD}spec:\n  containers: []\n  tolerations:\n  - key: a\n  - {t}\n"
            ))
        };
        assert_eq!(
            tolerations("{operator: Maybe}"),
            "t.yaml: document 1 (line 1): spec.tolerations[1].operator: unsupported value \"Maybe\": supported values: \"Equal\", \"Exists\""
        );
        assert_eq!(
            tolerations("{effect: NoRun}"),
            "t.yaml: document 1 (line 1): spec.tolerations[1].effect: unsupported value \"NoRun\": supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\""
        );
        assert_eq!(
            error(
                "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec:\n  taints:\n  - {key: a, effect: Never}\n"
            ),
            "t.yaml: document 1 (line 1): spec.taints[0].effect: unsupported value \"Never\": supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\""
        );
        assert_eq!(
            error(
                "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec:\n  taints:\n  - {effect: NoSchedule}\n"
            ),
            "t.yaml: document 1 (line 1): spec.taints[0].key: required value"
        );
        assert_eq!(
            error(&format!(
                "{MINIMAL_POD}spec:\n  containers:\n  - image: nginx\n"
            )),
            "t.yaml: document 1 (line 1): spec.containers[0].name: required value"
        );
    }

    #[test]
    fn objects_need_a_name() {
        assert_eq!(
            error("apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\n"),
            "t.yaml: document 1 (line 1): metadata.name: required value"
        );
        assert_eq!(
            error("---\n\napiVersion: v1\nkind: Node\n"),
            "t.yaml: document 1 (line 3): metadata.name: required value"
        );
        assert_eq!(
            error(
                "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: ''}}\n"
            ),
            "t.yaml: document 1 (line 1): items[0].metadata.name: required value"
        );
    }

    #[test]
    fn conversions_of_typed_objects() {
        let mut k8s_pod = k8s::Pod::default();
        assert_eq!(
            pod_from_k8s(&k8s_pod).unwrap_err().to_string(),
            "metadata.name: required value"
        );
        k8s_pod.metadata.name = Some("p".into());
        k8s_pod.spec = Some(k8s::PodSpec {
            tolerations: Some(vec![k8s::Toleration {
                operator: Some("Sometimes".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert_eq!(
            pod_from_k8s(&k8s_pod).unwrap_err().to_string(),
            "spec.tolerations[0].operator: unsupported value \"Sometimes\": supported values: \"Equal\", \"Exists\""
        );
        k8s_pod.spec = None;
        assert_eq!(pod_from_k8s(&k8s_pod).unwrap().key(), "default/p");

        let mut k8s_node = k8s::Node::default();
        k8s_node.metadata.name = Some("n".into());
        k8s_node.status = Some(k8s::NodeStatus {
            allocatable: Some(BTreeMap::from([("cpu".into(), Quantity("2x".into()))])),
            ..Default::default()
        });
        assert_eq!(
            node_from_k8s(&k8s_node).unwrap_err().to_string(),
            "status.allocatable.cpu: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        k8s_node.status = None;
        assert_eq!(
            node_from_k8s(&k8s_node)
                .unwrap()
                .allocatable
                .allowed_pod_number,
            110
        );
    }

    #[test]
    fn files_are_read_and_named_in_errors() {
        let dir = std::env::temp_dir().join(format!("berth-manifest-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.yaml");
        std::fs::write(&good, MINIMAL_POD).unwrap();
        let docs = load_file(&good).unwrap();
        assert_eq!(docs[0].source.file, good.display().to_string());
        let bad = dir.join("bad.yaml");
        std::fs::write(
            &bad,
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 5}\n",
        )
        .unwrap();
        let err = load_file(&bad).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{}: document 1 (line 1): spec.containers: invalid type",
                bad.display()
            )),
            "{err}"
        );
        let missing = dir.join("missing.yaml");
        let err = load_file(&missing).unwrap_err();
        assert!(matches!(err, ManifestError::Read { .. }));
        assert_eq!(
            err.to_string(),
            format!(
                "{}: No such file or directory (os error 2)",
                missing.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pod_level_resources_get_the_api_server_s_defaults() {
        let p = &pods(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: whole}
spec:
  resources:
    requests: {memory: 1Gi}
    limits: {cpu: "2", memory: 2Gi}
  containers:
  - name: a
    resources: {requests: {cpu: 250m}}
  - name: b
    resources: {requests: {cpu: 250m}}
"#,
        )[0];
        let r = p.resources.as_ref().unwrap();
        // CPU: the containers request it, so the pod's request is theirs together;
        // memory was given.
        assert_eq!(r.requests.get("cpu"), Some(&500));
        assert_eq!(r.requests.get("memory"), Some(&(1 << 30)));
        assert_eq!(r.limits.get("cpu"), Some(&2000));
        assert_eq!(p.requests().milli_cpu, 500);
        assert_eq!(p.requests().memory, 1 << 30);

        // No container requests CPU: the pod's request is its limit.
        let p = &pods(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: limited}
spec:
  resources: {limits: {cpu: "3"}}
  containers: [{name: a}]
"#,
        )[0];
        assert_eq!(p.requests().milli_cpu, 3000);
        // No pod-level resources: none.
        let p = &pods(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\nspec:\n  containers: [{name: a}]\n",
        )[0];
        assert_eq!(p.resources, None);
    }

    #[test]
    fn pod_level_resources_support_cpu_memory_and_hugepages_only() {
        let e = error(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: gpu}
spec:
  resources: {requests: {example.com/gpu: "1"}}
  containers: [{name: a}]
"#,
        );
        assert!(
            e.contains("spec.resources.requests.example.com/gpu")
                && e.contains("unsupported pod-level resource"),
            "{e}"
        );
    }

    #[test]
    fn a_resize_in_the_status_reaches_the_containers() {
        let p = &pods(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: resizing}
spec:
  nodeName: n1
  containers:
  - name: app
    resources: {requests: {cpu: "2"}}
  - name: side
    resources: {requests: {cpu: 100m}}
status:
  conditions:
  - {type: PodResizePending, status: "True", reason: Infeasible}
  containerStatuses:
  - name: app
    image: app
    imageID: ""
    ready: true
    restartCount: 0
    allocatedResources: {cpu: "1"}
    resources: {requests: {cpu: 500m}}
"#,
        )[0];
        assert!(p.resize_infeasible);
        let app = &p.containers[0];
        assert_eq!(
            app.allocated,
            Some(ResourceList::from([("cpu".into(), 1000)]))
        );
        assert_eq!(
            app.actuated,
            Some(ResourceList::from([("cpu".into(), 500)]))
        );
        assert_eq!(p.containers[1].allocated, None);
        // Infeasible: what was admitted counts, not the spec; `side` has no status.
        assert_eq!(p.requests().milli_cpu, 1000);
    }

    #[test]
    fn a_scheduling_workload_is_read_named_in_its_errors_and_deletable() {
        let text = "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {name: train}\nspec:\n  podGroupTemplates:\n  - {name: workers, schedulingPolicy: {gang: {minCount: 4}}}\n---\napiVersion: scheduling.k8s.io/v1alpha3\nkind: Workload\nmetadata: {name: train, annotations: {berth.dev/simulate: delete}}\n";
        let docs = load_str("t.yaml", text).unwrap();
        assert_eq!(
            names(&docs),
            [
                "workload.scheduling/default/train",
                "delete Workload/default/train"
            ]
        );
        let Object::SchedulingWorkload(w) = &docs[0].object else {
            panic!("not a Workload: {:?}", docs[0].object)
        };
        assert_eq!(
            w.template("workers").map(|t| t.policy),
            Some(pod_group::PodGroupPolicy::Gang { min_count: 4 })
        );
        let e = error(
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {name: train}\nspec:\n  podGroupTemplates:\n  - {name: workers, schedulingPolicy: {basic: {}}}\n  - {name: eval, schedulingPolicy: {gang: {minCount: 0}}}\n",
        );
        assert!(
            e.starts_with("t.yaml")
                && e.contains(
                    "spec.podGroupTemplates[1].schedulingPolicy.gang.minCount: invalid value 0: must be greater than or equal to 1"
                ),
            "{e}"
        );
        // A kind of the same name in another group is not one.
        let docs = load("apiVersion: example.com/v1\nkind: Workload\nmetadata: {name: w}\n");
        assert_eq!(names(&docs), ["ignored example.com/v1 Workload"]);
    }

    #[test]
    fn resource_claims_the_pod_group_and_declared_features_are_read() {
        let p = &pods(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: trainer-0}
spec:
  schedulingGroup: {podGroupName: trainers}
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-gpu}
  - {name: shared, resourceClaimName: shared-nic}
  containers: [{name: a}]
status:
  resourceClaimStatuses:
  - {name: gpu, resourceClaimName: trainer-0-gpu-x7k2}
"#,
        )[0];
        assert_eq!(p.scheduling_group.as_deref(), Some("trainers"));
        assert_eq!(
            p.resource_claims,
            [
                PodResourceClaim {
                    name: "gpu".into(),
                    source: ClaimSource::TemplateName("one-gpu".into()),
                },
                PodResourceClaim {
                    name: "shared".into(),
                    source: ClaimSource::ClaimName("shared-nic".into()),
                },
            ]
        );
        assert_eq!(
            p.resource_claim_statuses[0].resource_claim_name.as_deref(),
            Some("trainer-0-gpu-x7k2")
        );
        let e = error(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resourceClaims: [{name: gpu}]\n  containers: [{name: a}]\n",
        );
        assert!(
            e.contains("spec.resourceClaims[0]")
                && e.contains("one of resourceClaimName or resourceClaimTemplateName is required"),
            "{e}"
        );

        let docs = load(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  declaredFeatures: [GuaranteedQoSPodCPUResize]\n",
        );
        let Object::Node(n) = &docs[0].object else {
            panic!("not a node")
        };
        assert_eq!(n.declared_features, ["GuaranteedQoSPodCPUResize"]);
    }
}
