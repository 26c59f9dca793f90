//! What must agree between Berth and the oracle, and how a divergence is named.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One disagreement: `what` names its kind (no node, no values: stable while a
/// case shrinks), `node` where, and `detail` what each side answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The kind: e.g. `filter NodeAffinity`.
    pub what: String,
    /// The node, for a per-node answer.
    pub node: Option<String>,
    /// Berth's answer and the oracle's.
    pub detail: String,
    /// When the divergence is one the book lists (upstream is wrong, or Berth
    /// differs on purpose): which.
    pub explained: Option<&'static Explained>,
}

/// A divergence the book lists (docs/src/operators/differences.md), with the reason.
#[derive(Debug, PartialEq, Eq)]
pub struct Explained {
    /// Its name in the book's list.
    pub id: &'static str,
    /// Why Berth answers otherwise.
    pub why: &'static str,
}

/// Upstream 1.37.2's NodeResourcesFit builds its scorer without the PodLevelResources
/// gate (`NewFit` never passes it on; NodeResourcesBalancedAllocation does), so its
/// score counts the containers' requests of a pod with pod-level resources.
pub const FIT_SCORE_IGNORES_POD_LEVEL: Explained = Explained {
    id: "fit-score-ignores-pod-level-resources",
    why: "upstream's NodeResourcesFit score ignores pod-level resources; Berth scores the pod-level requests, as its Filter and BalancedAllocation do",
};

/// When a PreFilter before DynamicResources' rejects the pod, DynamicResources'
/// PostFilter finds no state of its own and answers Error "not found", which ends
/// upstream's PostFilter phase (no preemption is tried) and its FailedScheduling
/// message.
pub const DRA_POST_FILTER_NOT_FOUND: Explained = Explained {
    id: "dra-postfilter-not-found",
    why: "upstream's DynamicResources PostFilter errors when an earlier PreFilter rejected the pod, so its message ends in \"not found\" and preemption is skipped; Berth's DynamicResources has nothing to do there and preemption runs",
};

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.node {
            Some(n) => write!(f, "{} on {n}: {}", self.what, self.detail),
            None => write!(f, "{}: {}", self.what, self.detail),
        }
    }
}

/// What Berth's scheduling cycle did with the pod (`berth simulate` of the case).
#[derive(Clone, Debug)]
pub struct CycleOutcome {
    /// The node it was bound to.
    pub node: Option<String>,
    /// The pod's last event message.
    pub message: String,
}

fn statuses(v: &Value) -> BTreeMap<String, (String, Vec<String>)> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let reasons = s["reasons"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| r.as_str().unwrap_or_default().to_owned())
                .collect();
            (
                s["plugin"].as_str().unwrap_or_default().to_owned(),
                (s["code"].as_str().unwrap_or_default().to_owned(), reasons),
            )
        })
        .collect()
}

fn show(s: Option<&(String, Vec<String>)>) -> String {
    match s {
        None => "(not run)".to_owned(),
        Some((code, r)) if r.is_empty() => code.clone(),
        Some((code, r)) => format!("{code} {r:?}"),
    }
}

fn nodes(v: &Value) -> BTreeMap<String, &Value> {
    v["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| (n["node"].as_str().unwrap_or_default().to_owned(), n))
        .collect()
}

/// Compares one explanation (Berth's, as `berth explain --output json` prints it)
/// with the oracle's, for the pod `pod` (its manifest).
pub fn explanations(berth: &Value, oracle: &Value, pod: &Value) -> Vec<Divergence> {
    let mut out = Vec::new();
    let mut diff = |what: String, node: Option<&String>, b: String, o: String| {
        out.push(Divergence {
            what,
            node: node.cloned(),
            detail: format!("berth {b}, upstream {o}"),
            explained: None,
        });
    };
    let (bp, op) = (
        statuses(&berth["prefilter"]),
        statuses(&oracle["prefilter"]),
    );
    let plugins: BTreeSet<&String> = bp.keys().chain(op.keys()).collect();
    for p in plugins {
        // Success and "not a PreFilter plugin" mean the same to the cycle.
        let norm = |s: Option<&(String, Vec<String>)>| {
            s.cloned()
                .filter(|(c, r)| !(c == "Success" && r.is_empty()))
        };
        if norm(bp.get(p)) != norm(op.get(p)) {
            diff(
                format!("prefilter {p}"),
                None,
                show(bp.get(p)),
                show(op.get(p)),
            );
        }
    }
    let (bn, on) = (nodes(berth), nodes(oracle));
    let names: BTreeSet<&String> = bn.keys().chain(on.keys()).collect();
    for n in names {
        let (Some(b), Some(o)) = (bn.get(n), on.get(n)) else {
            diff(
                "node".into(),
                Some(n),
                bn.contains_key(n).to_string(),
                on.contains_key(n).to_string(),
            );
            continue;
        };
        let (bf, of) = (statuses(&b["filters"]), statuses(&o["filters"]));
        let plugins: BTreeSet<&String> = bf.keys().chain(of.keys()).collect();
        for p in plugins {
            let norm =
                |s: Option<&(String, Vec<String>)>| s.cloned().filter(|(c, _)| c != "Success");
            if norm(bf.get(p)) != norm(of.get(p)) {
                diff(
                    format!("filter {p}"),
                    Some(n),
                    show(bf.get(p)),
                    show(of.get(p)),
                );
            }
        }
        if b["feasible"] != o["feasible"] {
            diff(
                "feasible".into(),
                Some(n),
                b["feasible"].to_string(),
                o["feasible"].to_string(),
            );
            continue;
        }
        // One field of every score entry, by plugin.
        let field = |v: &Value, name: &str| -> BTreeMap<String, i64> {
            v["scores"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    (
                        s["plugin"].as_str().unwrap_or_default().to_owned(),
                        s[name].as_i64().unwrap_or(i64::MIN),
                    )
                })
                .collect()
        };
        let (bs, os) = (field(b, "normalized"), field(o, "normalized"));
        let (bw, ow) = (field(b, "weighted"), field(o, "weighted"));
        let plugins: BTreeSet<&String> = bs.keys().chain(os.keys()).collect();
        for p in plugins {
            if bs.get(p) != os.get(p) {
                diff(
                    format!("score {p}"),
                    Some(n),
                    format!("{:?}", bs.get(p)),
                    format!("{:?}", os.get(p)),
                );
            } else if bw.get(p) != ow.get(p) {
                diff(
                    format!("weight {p}"),
                    Some(n),
                    format!("{:?}", bw.get(p)),
                    format!("{:?}", ow.get(p)),
                );
            }
        }
    }
    let pod_level = pod["spec"]["resources"]["requests"].is_object()
        || pod["spec"]["resources"]["limits"].is_object();
    for d in &mut out {
        if pod_level && d.what == "score NodeResourcesFit" {
            d.explained = Some(&FIT_SCORE_IGNORES_POD_LEVEL);
        }
    }
    dedup(out)
}

/// One entry per `what` (a weight differs on every node alike).
fn dedup(v: Vec<Divergence>) -> Vec<Divergence> {
    let mut seen = BTreeSet::new();
    v.into_iter()
        .filter(|d| seen.insert(d.what.clone()))
        .collect()
}

/// The nodes the oracle ranks highest (upstream picks one of them at random).
pub fn best_nodes(oracle: &Value) -> BTreeSet<String> {
    let feasible: Vec<(&str, i64)> = oracle["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["feasible"].as_bool() == Some(true))
        .map(|n| {
            (
                n["node"].as_str().unwrap_or_default(),
                n["total"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    let max = feasible.iter().map(|&(_, t)| t).max();
    feasible
        .iter()
        .filter(|&&(_, t)| Some(t) == max)
        .map(|&(n, _)| n.to_owned())
        .collect()
}

/// Compares what Berth's cycle did with the oracle: the node it chose is one the
/// oracle ranks highest; a pod that fits nowhere (and preempts nothing) waits with
/// kube-scheduler's FailedScheduling message, word for word. `scores_explained`: the
/// explanations differed only where the book says they do, which may move the
/// best node.
pub fn cycle(
    outcome: &CycleOutcome,
    oracle: &Value,
    scores_explained: Option<&'static Explained>,
) -> Vec<Divergence> {
    let mut out = Vec::new();
    let best = best_nodes(oracle);
    let nominated = oracle["post_filter"]["nominated_node"]
        .as_str()
        .filter(|n| !n.is_empty());
    match (&outcome.node, best.is_empty()) {
        (Some(n), false) if !best.contains(n) => out.push(Divergence {
            what: "selected node".into(),
            node: None,
            detail: format!("berth {n}, upstream one of {best:?}"),
            explained: scores_explained,
        }),
        (Some(n), true) if nominated.is_none() => out.push(Divergence {
            what: "selected node".into(),
            node: None,
            detail: format!(
                "berth bound to {n}, upstream: no node fits and preemption nominates none"
            ),
            explained: None,
        }),
        (None, false) => out.push(Divergence {
            what: "selected node".into(),
            node: None,
            detail: format!(
                "berth left the pod pending ({}), upstream one of {best:?}",
                outcome.message
            ),
            explained: None,
        }),
        (None, true) => {
            let want = oracle["message"].as_str().unwrap_or_default();
            if outcome.message != want {
                // Upstream's "<filters>. not found" where Berth goes on to preemption.
                let explained = want
                    .strip_suffix(" not found")
                    .filter(|head| outcome.message.starts_with(head))
                    .map(|_| &DRA_POST_FILTER_NOT_FOUND);
                out.push(Divergence {
                    what: "FailedScheduling message".into(),
                    node: None,
                    detail: format!("berth {:?}, upstream {want:?}", outcome.message),
                    explained,
                });
            }
            if let Some(n) = nominated {
                out.push(Divergence {
                    what: "preemption".into(),
                    node: None,
                    detail: format!("berth preempted nothing, upstream nominates {n}"),
                    explained: None,
                });
            }
        }
        _ => {}
    }
    out
}
