//! Workload controllers of a manifest — Deployments, ReplicaSets,
//! ReplicationControllers, StatefulSets and Jobs — as the pods (and, for a
//! StatefulSet, the claims) their controllers would create, so that `simulate` and
//! `explain` place what applying the manifest would put in the queue.
//!
//! Names follow the controllers' patterns: a Deployment's pods
//! `NAME-HASH-XXXXX` (its ReplicaSet `NAME-HASH`, HASH a stable hash of the pod
//! template), a ReplicaSet's or ReplicationController's `NAME-XXXXX`, a StatefulSet's
//! `NAME-0`, `NAME-1`, ... (its claims `TEMPLATE-NAME-0`, ...), a Job's `NAME-XXXXX`
//! (Indexed: `NAME-INDEX-XXXXX`). Upstream's five-character suffixes are random; here
//! they are derived from the name and the ordinal, so a run is repeatable. The
//! controllers' labels are added as theirs are (`pod-template-hash`,
//! `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index`,
//! `batch.kubernetes.io/job-name`, `batch.kubernetes.io/controller-uid`, ...).

use super::{
    FieldError, PodSelector, PriorityAdmission, convert_pod, derived_uid, namespace_of,
    priority_admission, storage,
};
use berth_sdk::affinity::LabelSelector;
use berth_sdk::{Labels, Pod};
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The characters of upstream's random name suffixes (no vowels, no look-alikes).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A workload controller's object, with what its controller would create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// `Deployment`, `ReplicaSet`, `ReplicationController`, `StatefulSet` or `Job`.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Every pod it wants to exist, in the order its controller creates them.
    pub pods: Vec<WorkloadPod>,
    /// The claims it creates before its pods (a StatefulSet's volumeClaimTemplates),
    /// in order.
    pub claims: Vec<berth_sdk::PersistentVolumeClaim>,
    /// A StatefulSet with `podManagementPolicy: OrderedReady` (the default): each pod
    /// is created once the one before it runs (here: is bound).
    pub ordered: bool,
    /// The pods that count towards its replicas when they exist already (a
    /// ReplicaSet's adoption by selector); `None`: its own pods, by name.
    pub adopts: Option<LabelSelector>,
    /// The object whose selector PodTopologySpread's default constraints use (the
    /// ReplicaSet of a Deployment; none for a Job).
    pub selector: Option<PodSelector>,
}

/// One pod a workload wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadPod {
    /// The pod, as the API server would have admitted it.
    pub pod: Pod,
    /// Its priority admission, when its class is not built in.
    pub admission: Option<PriorityAdmission>,
}

/// A name suffix of five characters from upstream's alphabet, derived from `seed`.
fn suffix(seed: &str) -> String {
    let mut h = fnv1a(seed.as_bytes());
    (0..5)
        .map(|_| {
            let c = SUFFIX_ALPHABET[(h % SUFFIX_ALPHABET.len() as u32) as usize] as char;
            h = h.rotate_right(5) ^ 0x9e37_79b9;
            c
        })
        .collect()
}

/// FNV-1a, 32 bits (the hash family upstream's pod-template-hash uses).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// A Deployment's pod-template-hash: a stable hash of its template, written with the
/// suffix alphabet as upstream writes it.
fn template_hash(template: &k8s::PodTemplateSpec) -> String {
    let text = serde_json::to_string(template).unwrap_or_default();
    let mut h = fnv1a(text.as_bytes());
    let mut out = String::new();
    loop {
        out.push(SUFFIX_ALPHABET[(h % SUFFIX_ALPHABET.len() as u32) as usize] as char);
        h /= SUFFIX_ALPHABET.len() as u32;
        if h == 0 {
            break;
        }
    }
    out
}

/// A count field: absent is `default`, negative is refused.
fn count(value: Option<i32>, default: i32, path: &str) -> Result<usize, FieldError> {
    let v = value.unwrap_or(default);
    usize::try_from(v)
        .map_err(|_| FieldError::new(path, format!("must be greater than or equal to 0, got {v}")))
}

/// The pod of `template` named `name` with `labels` added (and, given, `volumes`
/// appended), converted as an admitted pod would be. Errors name the template's
/// fields (`spec.template.spec.containers[0]...`).
fn instance(
    template: &k8s::PodTemplateSpec,
    namespace: &str,
    name: &str,
    labels: &[(&str, String)],
    volumes: Vec<k8s::Volume>,
) -> Result<WorkloadPod, FieldError> {
    let mut meta = template.metadata.clone().unwrap_or_default();
    meta.name = Some(name.to_owned());
    meta.namespace = Some(namespace.to_owned());
    meta.uid = None;
    meta.generate_name = None;
    let all = meta.labels.get_or_insert_with(Default::default);
    for (k, v) in labels {
        all.insert((*k).to_owned(), v.clone());
    }
    let mut spec = template.spec.clone().unwrap_or_default();
    if !volumes.is_empty() {
        spec.volumes.get_or_insert_with(Vec::new).extend(volumes);
    }
    let pod = k8s::Pod {
        metadata: meta,
        spec: Some(spec),
        status: None,
    };
    let converted = convert_pod(&pod).map_err(|e| e.under("spec.template"))?;
    Ok(WorkloadPod {
        admission: priority_admission(&pod),
        pod: converted,
    })
}

/// The template of a workload: required, with labels its selector matches.
fn template<'a>(
    template: Option<&'a k8s::PodTemplateSpec>,
    selector: &LabelSelector,
) -> Result<&'a k8s::PodTemplateSpec, FieldError> {
    let t = template.ok_or_else(|| FieldError::new("spec.template", "required value"))?;
    let labels: Labels = t
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    if !selector.matches(&labels) {
        return Err(FieldError::new(
            "spec.template.metadata.labels",
            "`selector` does not match template `labels`",
        ));
    }
    Ok(t)
}

fn selector_of(
    s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Result<LabelSelector, FieldError> {
    let selector =
        super::super::affinity::label_selector(s, "spec.selector").map_err(FieldError::from)?;
    if selector.match_labels.is_empty() && selector.match_expressions.is_empty() {
        return Err(FieldError::new(
            "spec.selector",
            "empty selector is invalid for a workload",
        ));
    }
    Ok(selector)
}

/// What an `apps/v1` Deployment's controller would create: one ReplicaSet
/// `NAME-HASH` and its `spec.replicas` pods.
pub fn deployment(d: &apps::Deployment) -> Result<Workload, FieldError> {
    let name = super::required_name(&d.metadata)?;
    let namespace = namespace_of(&d.metadata);
    let spec = &d.spec;
    let mut selector = selector_of(&spec.selector)?;
    let t = template(Some(&spec.template), &selector)?;
    let hash = template_hash(t);
    let rs = format!("{name}-{hash}");
    let replicas = count(spec.replicas, 1, "spec.replicas")?;
    // Pods the Deployment's own selector matches count towards its replicas, whatever
    // their ReplicaSet: a Deployment applied over a cluster that runs it creates only
    // what a scale-up adds (the cluster's pods of an older template are not rolled).
    let adopts = selector.clone();
    selector
        .match_labels
        .insert("pod-template-hash".to_owned(), hash.clone());
    let pods = (0..replicas)
        .map(|i| {
            let pod = format!("{rs}-{}", suffix(&format!("{namespace}/{rs}/{i}")));
            instance(
                t,
                &namespace,
                &pod,
                &[("pod-template-hash", hash.clone())],
                Vec::new(),
            )
        })
        .collect::<Result<_, _>>()?;
    Ok(Workload {
        kind: "Deployment".into(),
        namespace: namespace.clone(),
        name,
        pods,
        claims: Vec::new(),
        ordered: false,
        adopts: Some(adopts),
        selector: Some(PodSelector {
            kind: "ReplicaSet".into(),
            namespace,
            name: rs,
            selector,
        }),
    })
}

/// What an `apps/v1` ReplicaSet's (or a `v1` ReplicationController's) controller
/// would create: `spec.replicas` pods `NAME-XXXXX`, counting the pods its selector
/// matches that exist already.
pub fn replica_set(
    kind: &str,
    meta: &ObjectMeta,
    replicas: Option<i32>,
    selector: LabelSelector,
    tmpl: Option<&k8s::PodTemplateSpec>,
) -> Result<Workload, FieldError> {
    let name = super::required_name(meta)?;
    let namespace = namespace_of(meta);
    let t = template(tmpl, &selector)?;
    let replicas = count(replicas, 1, "spec.replicas")?;
    let pods = (0..replicas)
        .map(|i| {
            let pod = format!("{name}-{}", suffix(&format!("{namespace}/{name}/{i}")));
            instance(t, &namespace, &pod, &[], Vec::new())
        })
        .collect::<Result<_, _>>()?;
    Ok(Workload {
        kind: kind.to_owned(),
        namespace: namespace.clone(),
        name: name.clone(),
        pods,
        claims: Vec::new(),
        ordered: false,
        adopts: Some(selector.clone()),
        selector: Some(PodSelector {
            kind: kind.to_owned(),
            namespace,
            name,
            selector,
        }),
    })
}

/// A `v1` ReplicationController (its selector defaults to its template's labels).
pub fn replication_controller(rc: &k8s::ReplicationController) -> Result<Workload, FieldError> {
    let spec = rc.spec.clone().unwrap_or_default();
    let labels = spec
        .selector
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            spec.template
                .as_ref()
                .and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.labels.clone())
                .unwrap_or_default()
        });
    if labels.is_empty() {
        return Err(FieldError::new(
            "spec.selector",
            "empty selector is invalid for a workload",
        ));
    }
    let selector = LabelSelector {
        match_labels: labels,
        match_expressions: Vec::new(),
    };
    replica_set(
        "ReplicationController",
        &rc.metadata,
        spec.replicas,
        selector,
        spec.template.as_ref(),
    )
}

/// An `apps/v1` ReplicaSet.
pub fn replica_set_of(rs: &apps::ReplicaSet) -> Result<Workload, FieldError> {
    let spec = &rs.spec;
    replica_set(
        "ReplicaSet",
        &rs.metadata,
        spec.replicas,
        selector_of(&spec.selector)?,
        spec.template.as_ref(),
    )
}

/// What an `apps/v1` StatefulSet's controller would create: for each ordinal from
/// `spec.ordinals.start`, the claims of its volumeClaimTemplates and the pod
/// `NAME-ORDINAL` using them.
pub fn stateful_set(s: &apps::StatefulSet) -> Result<Workload, FieldError> {
    let name = super::required_name(&s.metadata)?;
    let namespace = namespace_of(&s.metadata);
    let spec = &s.spec;
    let selector = selector_of(&spec.selector)?;
    let t = template(Some(&spec.template), &selector)?;
    let replicas = count(spec.replicas, 1, "spec.replicas")?;
    let start = count(
        spec.ordinals.as_ref().and_then(|o| o.start),
        0,
        "spec.ordinals.start",
    )?;
    let ordered = match spec.pod_management_policy.as_deref() {
        None | Some("OrderedReady") => true,
        Some("Parallel") => false,
        Some(other) => {
            return Err(FieldError::new(
                "spec.podManagementPolicy",
                format!(
                    "unsupported value {other:?}: supported values: \"OrderedReady\", \"Parallel\""
                ),
            ));
        }
    };
    let mut pods = Vec::new();
    let mut claims = Vec::new();
    for ordinal in start..start + replicas {
        let pod_name = format!("{name}-{ordinal}");
        let mut volumes = Vec::new();
        for (i, vct) in spec.volume_claim_templates.iter().flatten().enumerate() {
            let path = format!("spec.volumeClaimTemplates[{i}]");
            let template_name = vct
                .metadata
                .name
                .clone()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| {
                    FieldError::new(format!("{path}.metadata.name"), "required value")
                })?;
            let claim_name = format!("{template_name}-{pod_name}");
            let mut claim = vct.clone();
            claim.metadata.name = Some(claim_name.clone());
            claim.metadata.namespace = Some(namespace.clone());
            claims.push(storage::convert_claim(&claim).map_err(|e| e.under(&path))?);
            // The template's own volume of that name, if any, gives way to the claim.
            volumes.push(k8s::Volume {
                name: template_name,
                persistent_volume_claim: Some(k8s::PersistentVolumeClaimVolumeSource {
                    claim_name,
                    read_only: None,
                }),
                ..Default::default()
            });
        }
        let mut t = t.clone();
        if let Some(spec) = t.spec.as_mut()
            && let Some(vs) = spec.volumes.as_mut()
        {
            vs.retain(|v| !volumes.iter().any(|c| c.name == v.name));
        }
        pods.push(instance(
            &t,
            &namespace,
            &pod_name,
            &[
                ("statefulset.kubernetes.io/pod-name", pod_name.clone()),
                ("apps.kubernetes.io/pod-index", ordinal.to_string()),
            ],
            volumes,
        )?);
    }
    Ok(Workload {
        kind: "StatefulSet".into(),
        namespace: namespace.clone(),
        name: name.clone(),
        pods,
        claims,
        ordered,
        adopts: None,
        selector: Some(PodSelector {
            kind: "StatefulSet".into(),
            namespace,
            name,
            selector,
        }),
    })
}

/// What a `batch/v1` Job's controller would create at once: `spec.parallelism` pods
/// (at most the completions left; none while suspended), `NAME-XXXXX`, or for an
/// Indexed Job `NAME-INDEX-XXXXX` for the lowest indexes.
pub fn job(j: &batch::Job) -> Result<Workload, FieldError> {
    let name = super::required_name(&j.metadata)?;
    let namespace = namespace_of(&j.metadata);
    let spec = j
        .spec
        .as_ref()
        .ok_or_else(|| FieldError::new("spec", "required value"))?;
    let uid = j
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| derived_uid(&namespace, &format!("job/{name}")));
    let indexed = match spec.completion_mode.as_deref() {
        None | Some("NonIndexed") => false,
        Some("Indexed") => true,
        Some(other) => {
            return Err(FieldError::new(
                "spec.completionMode",
                format!(
                    "unsupported value {other:?}: supported values: \"Indexed\", \"NonIndexed\""
                ),
            ));
        }
    };
    let parallelism = count(spec.parallelism, 1, "spec.parallelism")?;
    let completions = match spec.completions {
        Some(c) => Some(count(Some(c), 0, "spec.completions")?),
        None if indexed => {
            return Err(FieldError::new(
                "spec.completions",
                "required value when completionMode is Indexed",
            ));
        }
        None => None,
    };
    let active = if spec.suspend == Some(true) {
        0
    } else {
        completions.map_or(parallelism, |c| c.min(parallelism))
    };
    let mut labels = vec![
        ("batch.kubernetes.io/controller-uid", uid.clone()),
        ("batch.kubernetes.io/job-name", name.clone()),
        ("controller-uid", uid.clone()),
        ("job-name", name.clone()),
    ];
    // The selector the Job controller generates (manualSelector aside).
    let selector = LabelSelector {
        match_labels: [("batch.kubernetes.io/controller-uid".to_owned(), uid.clone())].into(),
        match_expressions: Vec::new(),
    };
    let t = &spec.template;
    let mut pods = Vec::new();
    for i in 0..active {
        let pod = if indexed {
            labels.retain(|(k, _)| *k != "batch.kubernetes.io/job-completion-index");
            labels.push(("batch.kubernetes.io/job-completion-index", i.to_string()));
            format!("{name}-{i}-{}", suffix(&format!("{namespace}/{name}/{i}")))
        } else {
            format!("{name}-{}", suffix(&format!("{namespace}/{name}/{i}")))
        };
        pods.push(instance(t, &namespace, &pod, &labels, Vec::new())?);
    }
    Ok(Workload {
        kind: "Job".into(),
        namespace,
        name,
        pods,
        claims: Vec::new(),
        ordered: false,
        adopts: Some(selector),
        selector: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Object, load_str};

    fn workload(text: &str) -> Workload {
        let docs = load_str("t.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        match docs.into_iter().next().map(|d| d.object) {
            Some(Object::Workload(w)) => w,
            other => panic!("not a workload: {other:?}"),
        }
    }

    #[test]
    fn a_stateful_set_makes_a_claim_per_template_and_ordinal_and_mounts_it() {
        let w = workload(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: kafka, namespace: q}\nspec:\n  replicas: 2\n  ordinals: {start: 3}\n  selector: {matchLabels: {app: kafka}}\n  template:\n    metadata: {labels: {app: kafka}}\n    spec:\n      containers: [{name: c, image: kafka}]\n      volumes: [{name: data, emptyDir: {}}]\n  volumeClaimTemplates:\n  - metadata: {name: data}\n    spec: {accessModes: [ReadWriteOnce], storageClassName: local, resources: {requests: {storage: 1Gi}}}\n",
        );
        assert!(w.ordered);
        let names: Vec<String> = w.pods.iter().map(|p| p.pod.key()).collect();
        assert_eq!(names, ["q/kafka-3", "q/kafka-4"]);
        let claims: Vec<String> = w.claims.iter().map(|c| c.key()).collect();
        assert_eq!(claims, ["q/data-kafka-3", "q/data-kafka-4"]);
        let p = &w.pods[1].pod;
        assert_eq!(p.labels["statefulset.kubernetes.io/pod-name"], "kafka-4");
        assert_eq!(p.labels["apps.kubernetes.io/pod-index"], "4");
        // The claim replaces the template's volume of the same name.
        assert_eq!(p.volumes.len(), 1, "{:?}", p.volumes);
        assert!(
            format!("{:?}", p.volumes[0]).contains("data-kafka-4"),
            "{:?}",
            p.volumes
        );
    }

    #[test]
    fn a_job_runs_its_parallelism_unless_suspended_and_checks_its_fields() {
        let job = |extra: &str| {
            format!(
                "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: pi}}\nspec:\n{extra}  template:\n    spec:\n      restartPolicy: Never\n      containers: [{{name: c, image: pi}}]\n"
            )
        };
        let w = workload(&job("  parallelism: 3\n  completions: 2\n"));
        assert_eq!(w.pods.len(), 2);
        assert_eq!(w.pods[0].pod.labels["batch.kubernetes.io/job-name"], "pi");
        assert!(w.pods[0].pod.name.starts_with("pi-"));
        assert!(
            workload(&job("  parallelism: 3\n  suspend: true\n"))
                .pods
                .is_empty()
        );
        let err = load_str("t.yaml", &job("  completionMode: Indexed\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("spec.completions: required value when completionMode is Indexed"),
            "{err}"
        );
        let err = load_str("t.yaml", &job("  parallelism: -1\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("spec.parallelism: must be greater than or equal to 0, got -1"),
            "{err}"
        );
    }

    #[test]
    fn suffixes_are_five_characters_of_the_alphabet_and_stable() {
        let s = suffix("default/web/0");
        assert_eq!(s.len(), 5);
        assert!(s.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)), "{s}");
        assert_eq!(s, suffix("default/web/0"));
        assert_ne!(s, suffix("default/web/1"));
    }
}
