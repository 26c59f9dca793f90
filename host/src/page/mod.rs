//! The page: one self-contained HTML document (inline CSS, no script, no external
//! URL) that shows the nodes with their pods and free room, each pending pod's
//! explanation as a node × plugin table, and the timeline of a `berth simulate` run.
//!
//! The page is rendered on the server from a [`Page`], which is also served as JSON
//! (`/page.json`): what the page shows and what the JSON says are the same model.
//! [`Page::of`] builds it from a [`Scheduler`] (its cache's nodes and pods, its queue's
//! pending pods, [`Scheduler::explain`] for each): any holder of the scheduler can
//! call it, the simulation once its timeline has run, the live loop between two
//! rounds. [`Page::render`] turns it into the bytes an endpoint serves, and a
//! [`PageView`] holds them for the endpoints (`server`).

mod html;

use crate::framework::{ExplainOptions, Explanation};
use crate::queue::QueueName;
use crate::scheduler::Scheduler;
use berth_sdk::{NodeInfo, Resources};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// How many pending pods [`Page::of`] explains by default. Each explanation runs every
/// Filter plugin on every node and every Score plugin on the feasible ones, as
/// `berth explain` does: on a large cluster with many pending pods the page would
/// otherwise cost many scheduling cycles.
pub const DEFAULT_EXPLAINED: usize = 20;

/// What [`Page::of`] puts on the page.
#[derive(Clone, Debug)]
pub struct PageOptions {
    /// The page's title.
    pub title: String,
    /// How many pending pods get an explanation (the first ones in `namespace/name`
    /// order); the others are listed without one.
    pub explained: usize,
}

impl Default for PageOptions {
    fn default() -> Self {
        PageOptions {
            title: "Berth".to_owned(),
            explained: DEFAULT_EXPLAINED,
        }
    }
}

/// Everything the page shows, as `/page.json` serves it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Page {
    /// The page's title.
    pub title: String,
    /// Every node, by name.
    pub nodes: Vec<NodeView>,
    /// Every pod waiting in the scheduler's queue, by `namespace/name`.
    pub pending: Vec<PendingView>,
    /// The documents a simulation applied, in order, with what each brought about;
    /// empty for a live scheduler.
    pub timeline: Vec<Step>,
}

/// A node, what is free on it, and its pods.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeView {
    /// The node's name.
    pub name: String,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its taints, as `key=value:Effect` (`key:Effect` without a value).
    pub taints: Vec<String>,
    /// cpu, memory, ephemeral-storage (when the node has any), pods, then every
    /// other resource the node offers or its pods request, by name.
    pub resources: Vec<Room>,
    /// The pods the scheduler counts on the node (bound and assumed), by
    /// `namespace/name`.
    pub pods: Vec<PodView>,
}

/// One resource of a node: allocatable, requested by its pods, and the difference.
/// Quantities are in the resource's base unit: millicores for cpu, bytes for memory,
/// storage and hugepages, a count for pods and other resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Room {
    /// The resource's name (`cpu`, `memory`, `nvidia.com/gpu`, ...).
    pub resource: String,
    /// `status.allocatable`.
    pub allocatable: i64,
    /// What the node's pods request (for `pods`: how many pods there are).
    pub requested: i64,
    /// `allocatable - requested`: negative when the pods ask for more than there is
    /// (pods placed by `spec.nodeName` are counted without a check).
    pub free: i64,
}

/// A pod on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PodView {
    /// `namespace/name`.
    pub pod: String,
    /// Its effective cpu request, in millicores.
    pub cpu: i64,
    /// Its effective memory request, in bytes.
    pub memory: i64,
    /// Its priority.
    pub priority: i32,
    /// Placed by this scheduler and not yet confirmed by the cluster.
    pub assumed: bool,
}

/// A pod waiting to be scheduled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingView {
    /// `namespace/name`.
    pub pod: String,
    /// The queue it waits in: `active`, `backoff`, `unschedulable` or `gated`.
    pub queue: String,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// Why it is pending: the last attempt's message, or the gate's.
    pub message: String,
    /// The PreEnqueue plugin that keeps it out of the queue, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gated_by: Option<String>,
    /// How its profile sees it on every node (`berth explain`); absent for gated
    /// pods, for pods past [`PageOptions::explained`], and when explaining failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Explanation>,
    /// Why there is no explanation, when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unexplained: Option<String>,
}

/// One document of a simulation's timeline and what happened after it was applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// Where the document is: `file: document N (line L)`.
    pub document: String,
    /// `add`, `update`, `delete`, or `apply` (kinds added and updated alike).
    pub action: String,
    /// The object's kind.
    pub kind: String,
    /// The object's `namespace/name`, or name for cluster-scoped kinds.
    pub object: String,
    /// Pods bound while the scheduler ran after it, in order.
    pub bound: Vec<Placement>,
    /// Pods evicted by preemption meanwhile, in order.
    pub evicted: Vec<Eviction>,
    /// Pods tried meanwhile and left pending.
    pub pending: Vec<Pending>,
}

/// A pod bound to a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// `namespace/name`.
    pub pod: String,
    /// The node.
    pub node: String,
    /// Placed from the batch of an earlier cycle (OpportunisticBatching); absent
    /// when its own cycle filtered and scored the nodes.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub batched: bool,
}

/// A pod preemption evicted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Eviction {
    /// `namespace/name`.
    pub pod: String,
    /// The node it ran on.
    pub node: String,
    /// The pod it made room for, `namespace/name`.
    pub preemptor: String,
}

/// A pod left pending, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pending {
    /// `namespace/name`.
    pub pod: String,
    /// The last attempt's message.
    pub message: String,
}

impl Page {
    /// The page of a scheduler as it is now: its cache's nodes and their pods, and its
    /// queue's pending pods, the first `options.explained` of them explained (which
    /// runs their profile's plugins: call it where the scheduler's plugins may run,
    /// on the thread that owns the scheduler, between two scheduling cycles). The
    /// timeline is empty: a simulation fills it in.
    pub fn of(scheduler: &mut Scheduler, options: &PageOptions) -> Page {
        let view: &Scheduler = scheduler;
        let mut nodes: Vec<NodeView> = view
            .cache()
            .nodes()
            .map(|info| node_view(view, info))
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));

        let mut waiting: Vec<_> = scheduler
            .queue()
            .waiting()
            .map(|q| (q.pod.key(), q.pod.clone(), q.attempts, q.gated_by.clone()))
            .collect();
        waiting.sort_by(|a, b| a.0.cmp(&b.0));
        let mut pending = Vec::with_capacity(waiting.len());
        for (k, (key, pod, attempts, gated_by)) in waiting.into_iter().enumerate() {
            let queue = scheduler
                .queue_of(&pod.uid)
                .map_or("in flight", QueueName::as_str)
                .to_owned();
            let message = scheduler
                .queue()
                .get(&pod.uid)
                .and_then(|q| q.last_failure.clone())
                .or_else(|| scheduler.outcome(&pod.uid).map(|o| o.message.clone()))
                .unwrap_or_default();
            let (explanation, unexplained) = if let Some(gate) = &gated_by {
                (None, Some(format!("gated by {gate}: not tried yet")))
            } else if k >= options.explained {
                (
                    None,
                    Some(format!(
                        "only the first {} pending pods are explained",
                        options.explained
                    )),
                )
            } else {
                match scheduler.explain(&pod, &ExplainOptions::default()) {
                    Ok(e) => (Some(e), None),
                    Err(e) => (None, Some(format!("cannot explain: {e}"))),
                }
            };
            pending.push(PendingView {
                pod: key,
                queue,
                attempts,
                message,
                gated_by,
                explanation,
                unexplained,
            });
        }
        Page {
            title: options.title.clone(),
            nodes,
            pending,
            timeline: Vec::new(),
        }
    }

    /// The HTML document and the JSON, as the endpoints serve them.
    pub fn render(&self) -> Rendered {
        Rendered {
            html: html::render(self),
            json: serde_json::to_string_pretty(self).expect("the page serializes") + "\n",
        }
    }
}

/// A page rendered: what `/` and `/page.json` serve.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The HTML document.
    pub html: String,
    /// The model, as JSON.
    pub json: String,
}

/// The page the endpoints serve, replaced whole by whoever renders a new one.
pub type PageView = Arc<RwLock<Rendered>>;

fn node_view(scheduler: &Scheduler, info: &NodeInfo) -> NodeView {
    let node = &info.node;
    let mut pods: Vec<PodView> = info
        .pods
        .iter()
        .map(|p| {
            let r = p.requests();
            PodView {
                pod: p.key(),
                cpu: r.milli_cpu,
                memory: r.memory,
                priority: p.priority,
                assumed: scheduler.cache().is_assumed(&p.uid),
            }
        })
        .collect();
    pods.sort_by(|a, b| a.pod.cmp(&b.pod));
    NodeView {
        name: node.name.clone(),
        unschedulable: node.unschedulable,
        labels: node
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        taints: node
            .taints
            .iter()
            .map(|t| {
                if t.value.is_empty() {
                    format!("{}:{}", t.key, t.effect.as_str())
                } else {
                    format!("{}={}:{}", t.key, t.value, t.effect.as_str())
                }
            })
            .collect(),
        resources: rooms(&node.allocatable, &info.requested, info.pod_count),
        pods,
    }
}

/// A node's resources, in the page's order.
fn rooms(allocatable: &Resources, requested: &Resources, pod_count: u32) -> Vec<Room> {
    let room = |resource: &str, allocatable: i64, requested: i64| Room {
        resource: resource.to_owned(),
        allocatable,
        requested,
        free: allocatable - requested,
    };
    let mut out = vec![
        room(berth_sdk::CPU, allocatable.milli_cpu, requested.milli_cpu),
        room(berth_sdk::MEMORY, allocatable.memory, requested.memory),
    ];
    if allocatable.ephemeral_storage != 0 || requested.ephemeral_storage != 0 {
        out.push(room(
            berth_sdk::EPHEMERAL_STORAGE,
            allocatable.ephemeral_storage,
            requested.ephemeral_storage,
        ));
    }
    out.push(room(
        berth_sdk::PODS,
        allocatable.allowed_pod_number,
        i64::from(pod_count),
    ));
    let mut others: Vec<&String> = allocatable
        .scalar
        .keys()
        .chain(requested.scalar.keys())
        .collect();
    others.sort();
    others.dedup();
    for name in others {
        out.push(room(name, allocatable.get(name), requested.get(name)));
    }
    out
}

/// A quantity in the resource's own spelling, exactly (no rounding): cpu as cores or
/// millicores (`2`, `500m`), byte quantities with the largest binary suffix that
/// divides them (`4Gi`, `512Mi`, `1000`), counts as numbers.
pub fn quantity(resource: &str, q: i64) -> String {
    let sign = if q < 0 { "-" } else { "" };
    let n = q.unsigned_abs();
    if resource == berth_sdk::CPU {
        return if n.is_multiple_of(1000) {
            format!("{sign}{}", n / 1000)
        } else {
            format!("{sign}{n}m")
        };
    }
    let bytes = resource == berth_sdk::MEMORY
        || resource == berth_sdk::EPHEMERAL_STORAGE
        || resource.starts_with("hugepages-");
    if bytes && n != 0 {
        for (suffix, shift) in [
            ("Ei", 60),
            ("Pi", 50),
            ("Ti", 40),
            ("Gi", 30),
            ("Mi", 20),
            ("Ki", 10),
        ] {
            if n.is_multiple_of(1u64 << shift) {
                return format!("{sign}{}{suffix}", n >> shift);
            }
        }
    }
    format!("{sign}{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_spelled_exactly_in_their_resources_units() {
        assert_eq!(quantity("cpu", 2000), "2");
        assert_eq!(quantity("cpu", 500), "500m");
        assert_eq!(quantity("cpu", 2500), "2500m");
        assert_eq!(quantity("cpu", -500), "-500m");
        assert_eq!(quantity("memory", 4 << 30), "4Gi");
        assert_eq!(quantity("memory", 512 << 20), "512Mi");
        assert_eq!(quantity("memory", (1 << 30) + (512 << 20)), "1536Mi");
        assert_eq!(quantity("memory", 1000), "1000");
        assert_eq!(quantity("memory", 0), "0");
        assert_eq!(quantity("memory", -(2 << 30)), "-2Gi");
        assert_eq!(quantity("hugepages-2Mi", 4 << 20), "4Mi");
        assert_eq!(quantity("pods", 110), "110");
        assert_eq!(quantity("nvidia.com/gpu", 1024), "1024");
    }

    #[test]
    fn a_nodes_rooms_list_the_main_resources_then_every_other_by_name() {
        let mut alloc = Resources::default();
        alloc.set("cpu", 4000);
        alloc.set("memory", 8 << 30);
        alloc.set("pods", 110);
        alloc.set("nvidia.com/gpu", 4);
        let mut req = Resources::default();
        req.set("cpu", 5000);
        req.set("example.com/widget", 1);
        let r = rooms(&alloc, &req, 3);
        let names: Vec<&str> = r.iter().map(|r| r.resource.as_str()).collect();
        assert_eq!(
            names,
            [
                "cpu",
                "memory",
                "pods",
                "example.com/widget",
                "nvidia.com/gpu"
            ]
        );
        assert_eq!(
            (r[0].allocatable, r[0].requested, r[0].free),
            (4000, 5000, -1000)
        );
        assert_eq!((r[2].allocatable, r[2].requested, r[2].free), (110, 3, 107));
        assert_eq!((r[3].allocatable, r[3].free), (0, -1));
        assert_eq!((r[4].allocatable, r[4].requested, r[4].free), (4, 0, 4));
    }
}
