//! Converts a Pod's affinity and topology spread constraints from the Kubernetes API
//! types into the SDK's, refusing operators and policies Kubernetes would refuse.

use berth_sdk::affinity as sdk;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// A bad field: its path and what was wrong.
pub type FieldResult<T> = Result<T, (String, String)>;

fn node_term(t: &k8s::NodeSelectorTerm, path: &str) -> FieldResult<sdk::NodeSelectorTerm> {
    let reqs = |list: &Option<Vec<k8s::NodeSelectorRequirement>>,
                field: &str|
     -> FieldResult<Vec<sdk::NodeSelectorRequirement>> {
        list.iter()
            .flatten()
            .enumerate()
            .map(|(i, r)| {
                use sdk::NodeSelectorOperator as Op;
                let operator = match r.operator.as_str() {
                    "In" => Op::In,
                    "NotIn" => Op::NotIn,
                    "Exists" => Op::Exists,
                    "DoesNotExist" => Op::DoesNotExist,
                    "Gt" => Op::Gt,
                    "Lt" => Op::Lt,
                    other => {
                        return Err((
                            format!("{path}.{field}[{i}].operator"),
                            format!("unsupported operator {other:?} (In, NotIn, Exists, DoesNotExist, Gt, Lt)"),
                        ));
                    }
                };
                Ok(sdk::NodeSelectorRequirement {
                    key: r.key.clone(),
                    operator,
                    values: r.values.clone().unwrap_or_default(),
                })
            })
            .collect()
    };
    Ok(sdk::NodeSelectorTerm {
        match_expressions: reqs(&t.match_expressions, "matchExpressions")?,
        match_fields: reqs(&t.match_fields, "matchFields")?,
    })
}

/// The terms of a `v1.NodeSelector` found at `path` (a PersistentVolume's
/// `spec.nodeAffinity.required.nodeSelectorTerms`).
pub fn node_terms(
    terms: &[k8s::NodeSelectorTerm],
    path: &str,
) -> FieldResult<Vec<sdk::NodeSelectorTerm>> {
    terms
        .iter()
        .enumerate()
        .map(|(i, t)| node_term(t, &format!("{path}[{i}]")))
        .collect()
}

/// A `metav1.LabelSelector`.
pub fn label_selector(s: &meta::LabelSelector, path: &str) -> FieldResult<sdk::LabelSelector> {
    let match_expressions = s
        .match_expressions
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            use sdk::LabelSelectorOperator as Op;
            let operator = match r.operator.as_str() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => {
                    return Err((
                        format!("{path}.matchExpressions[{i}].operator"),
                        format!("unsupported operator {other:?} (In, NotIn, Exists, DoesNotExist)"),
                    ));
                }
            };
            Ok(sdk::LabelSelectorRequirement {
                key: r.key.clone(),
                operator,
                values: r.values.clone().unwrap_or_default(),
            })
        })
        .collect::<FieldResult<Vec<_>>>()?;
    Ok(sdk::LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions,
    })
}

fn pod_term(t: &k8s::PodAffinityTerm, path: &str) -> FieldResult<sdk::PodAffinityTerm> {
    Ok(sdk::PodAffinityTerm {
        label_selector: t
            .label_selector
            .as_ref()
            .map(|s| label_selector(s, &format!("{path}.labelSelector")))
            .transpose()?,
        namespaces: t.namespaces.clone().unwrap_or_default(),
        namespace_selector: t
            .namespace_selector
            .as_ref()
            .map(|s| label_selector(s, &format!("{path}.namespaceSelector")))
            .transpose()?,
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone().unwrap_or_default(),
        mismatch_label_keys: t.mismatch_label_keys.clone().unwrap_or_default(),
    })
}

fn pod_affinity(
    required: &Option<Vec<k8s::PodAffinityTerm>>,
    preferred: &Option<Vec<k8s::WeightedPodAffinityTerm>>,
    path: &str,
) -> FieldResult<sdk::PodAffinity> {
    Ok(sdk::PodAffinity {
        required: required
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| {
                pod_term(
                    t,
                    &format!("{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
                )
            })
            .collect::<FieldResult<_>>()?,
        preferred: preferred
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, w)| {
                let p = format!("{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
                Ok(sdk::WeightedPodAffinityTerm {
                    weight: w.weight,
                    term: pod_term(&w.pod_affinity_term, &format!("{p}.podAffinityTerm"))?,
                })
            })
            .collect::<FieldResult<_>>()?,
    })
}

/// `spec.affinity`.
pub fn affinity(a: Option<&k8s::Affinity>, path: &str) -> FieldResult<sdk::Affinity> {
    let Some(a) = a else {
        return Ok(sdk::Affinity::default());
    };
    let node_affinity = match &a.node_affinity {
        None => None,
        Some(n) => {
            let p = format!("{path}.nodeAffinity");
            let required = n
                .required_during_scheduling_ignored_during_execution
                .as_ref()
                .map(|sel| {
                    sel.node_selector_terms
                        .iter()
                        .enumerate()
                        .map(|(i, t)| node_term(t, &format!("{p}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]")))
                        .collect::<FieldResult<Vec<_>>>()
                })
                .transpose()?;
            let preferred = n
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, t)| {
                    Ok(sdk::PreferredSchedulingTerm {
                        weight: t.weight,
                        preference: node_term(&t.preference, &format!("{p}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"))?,
                    })
                })
                .collect::<FieldResult<Vec<_>>>()?;
            Some(sdk::NodeAffinity {
                required,
                preferred,
            })
        }
    };
    let (pa_req, pa_pref) = a
        .pod_affinity
        .as_ref()
        .map(|p| {
            (
                p.required_during_scheduling_ignored_during_execution
                    .clone(),
                p.preferred_during_scheduling_ignored_during_execution
                    .clone(),
            )
        })
        .unwrap_or_default();
    let (anti_req, anti_pref) = a
        .pod_anti_affinity
        .as_ref()
        .map(|p| {
            (
                p.required_during_scheduling_ignored_during_execution
                    .clone(),
                p.preferred_during_scheduling_ignored_during_execution
                    .clone(),
            )
        })
        .unwrap_or_default();
    Ok(sdk::Affinity {
        node_affinity,
        pod_affinity: pod_affinity(&pa_req, &pa_pref, &format!("{path}.podAffinity"))?,
        pod_anti_affinity: pod_affinity(&anti_req, &anti_pref, &format!("{path}.podAntiAffinity"))?,
    })
}

fn policy(p: &Option<String>, path: String) -> FieldResult<Option<sdk::NodeInclusionPolicy>> {
    match p.as_deref() {
        None => Ok(None),
        Some("Honor") => Ok(Some(sdk::NodeInclusionPolicy::Honor)),
        Some("Ignore") => Ok(Some(sdk::NodeInclusionPolicy::Ignore)),
        Some(other) => Err((
            path,
            format!("unsupported policy {other:?} (Honor, Ignore)"),
        )),
    }
}

/// `spec.topologySpreadConstraints`.
pub fn spread_constraints(
    list: Option<&Vec<k8s::TopologySpreadConstraint>>,
    path: &str,
) -> FieldResult<Vec<sdk::TopologySpreadConstraint>> {
    list.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let p = format!("{path}[{i}]");
            let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
                "DoNotSchedule" => sdk::WhenUnsatisfiable::DoNotSchedule,
                "ScheduleAnyway" => sdk::WhenUnsatisfiable::ScheduleAnyway,
                other => {
                    return Err((
                        format!("{p}.whenUnsatisfiable"),
                        format!("unsupported value {other:?} (DoNotSchedule, ScheduleAnyway)"),
                    ));
                }
            };
            if c.max_skew <= 0 {
                return Err((
                    format!("{p}.maxSkew"),
                    format!("{} must be greater than zero", c.max_skew),
                ));
            }
            if c.topology_key.is_empty() {
                return Err((format!("{p}.topologyKey"), "can not be empty".into()));
            }
            if let Some(m) = c.min_domains {
                if m <= 0 {
                    return Err((
                        format!("{p}.minDomains"),
                        format!("{m} must be greater than zero"),
                    ));
                }
                if when_unsatisfiable != sdk::WhenUnsatisfiable::DoNotSchedule {
                    return Err((
                        format!("{p}.minDomains"),
                        "can only be set with whenUnsatisfiable: DoNotSchedule".into(),
                    ));
                }
            }
            Ok(sdk::TopologySpreadConstraint {
                max_skew: c.max_skew,
                topology_key: c.topology_key.clone(),
                when_unsatisfiable,
                label_selector: c
                    .label_selector
                    .as_ref()
                    .map(|s| label_selector(s, &format!("{p}.labelSelector")))
                    .transpose()?,
                min_domains: c.min_domains,
                node_affinity_policy: policy(
                    &c.node_affinity_policy,
                    format!("{p}.nodeAffinityPolicy"),
                )?,
                node_taints_policy: policy(&c.node_taints_policy, format!("{p}.nodeTaintsPolicy"))?,
                match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
            })
        })
        .collect()
}
