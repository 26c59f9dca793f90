//! # One example per extension point
//!
//! Each extension point is a trait; a plugin implements the ones it serves and
//! names them in [`export_plugin!`](crate::export_plugin). The framework calls them
//! in kube-scheduler's order: PreEnqueue when a pod enters the queue, QueueSort's
//! key once per pod, then per scheduling cycle PreFilter, Filter (per node),
//! PreScore, Score (per feasible node) and NormalizeScore, then Reserve and Permit
//! for the chosen node, and in the binding cycle PreBind, Bind and PostBind.
//! EnqueueExtensions tells the queue which cluster events may help a pod the plugin
//! rejected; for a pod group, PlacementGenerate proposes sets of nodes to place it
//! in, PlacementScore ranks them, PlacementFeasible says whether its cycle can
//! still place it, and PodGroupPostFilter may make room for a group that does not
//! fit. Every example below is a complete plugin and runs as a doctest.
//!
//! Each status code means what it means upstream: Unschedulable lets preemption
//! try; UnschedulableAndUnresolvable says evicting pods cannot help; Error retries
//! the pod with backoff; Skip at PreFilter or PreScore means the plugin's Filter or
//! Score is not called for this pod.
//!
//! ## PreEnqueue: hold pods back
//!
//! ```
//! use berth_sdk::{Plugin, Pod, PreEnqueue, Status};
//!
//! /// Pods labelled `hold=true` wait outside the active queue.
//! struct Hold;
//! impl Plugin for Hold {
//!     const NAME: &'static str = "Hold";
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(Hold) }
//! }
//! impl PreEnqueue for Hold {
//!     fn pre_enqueue(&self, pod: &Pod) -> Status {
//!         match pod.labels.get("hold").map(String::as_str) {
//!             Some("true") => Status::new(berth_sdk::Code::UnschedulableAndUnresolvable,
//!                                         vec!["pod is on hold".into()]),
//!             _ => Status::success(),
//!         }
//!     }
//! }
//! berth_sdk::export_plugin!(Hold: pre_enqueue);
//! # fn main() {}
//! ```
//!
//! ## QueueSort: order the queue with a key
//!
//! ```
//! use berth_sdk::{Plugin, Pod, QueueSort};
//!
//! /// Higher priority first, then pods of the `batch` namespace last.
//! struct PriorityThenBatch;
//! impl Plugin for PriorityThenBatch {
//!     const NAME: &'static str = "PriorityThenBatch";
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(PriorityThenBatch) }
//! }
//! impl QueueSort for PriorityThenBatch {
//!     fn sort_key(&self, pod: &Pod) -> Vec<i64> {
//!         vec![-i64::from(pod.priority), i64::from(pod.namespace == "batch")]
//!     }
//! }
//! berth_sdk::export_plugin!(PriorityThenBatch: queue_sort);
//! # fn main() {}
//! ```
//!
//! ## PreFilter: once per cycle, state for Filter
//!
//! ```
//! use berth_sdk::{
//!     CycleState, Filter, NodeInfo, Plugin, Pod, PreFilter, PreFilterResult, StateKey, Status,
//! };
//!
//! /// A pod labelled `team=X` runs only on nodes labelled `team=X`; PreFilter
//! /// reads the label once and narrows the nodes, Filter checks each one.
//! struct TeamNodes;
//! /// What PreFilter leaves for Filter: a key and the type of its value.
//! static TEAM: StateKey<String> = StateKey::new("TeamNodes/team");
//! impl Plugin for TeamNodes {
//!     const NAME: &'static str = "TeamNodes";
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(TeamNodes) }
//! }
//! impl PreFilter for TeamNodes {
//!     fn pre_filter(&self, state: &CycleState, pod: &Pod, nodes: &[&NodeInfo]) -> PreFilterResult {
//!         let Some(team) = pod.labels.get("team") else {
//!             return Status::skip().into(); // Filter is not called for this pod
//!         };
//!         state.set(&TEAM, team);
//!         let names = nodes
//!             .iter()
//!             .filter(|n| n.node.labels.get("team") == Some(team))
//!             .map(|n| n.name().to_owned())
//!             .collect();
//!         PreFilterResult { status: Status::success(), node_names: Some(names) }
//!     }
//! }
//! impl Filter for TeamNodes {
//!     fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
//!         // `value` decodes the value once per batch of nodes and shares it; for
//!         // the other nodes of the batch it finds it by the key's address. The
//!         // way to read PreFilter's state in Filter (and PreScore's in Score).
//!         let team = state.value(&TEAM);
//!         if node.node.labels.get("team") == team.as_deref() {
//!             Status::success()
//!         } else {
//!             Status::unresolvable("node(s) belong to another team")
//!         }
//!     }
//! }
//! berth_sdk::export_plugin!(TeamNodes: pre_filter, filter);
//! # fn main() {}
//! ```
//!
//! ## Filter: can the pod run on this node?
//!
//! ```
//! use berth_sdk::{CycleState, Filter, NodeInfo, Plugin, Pod, Status};
//!
//! /// At most `maxPods` pods per node, whatever the node's capacity.
//! struct PodCap { max: u32 }
//! impl Plugin for PodCap {
//!     const NAME: &'static str = "PodCap";
//!     fn new(args: serde_json::Value) -> Result<Self, String> {
//!         let max = args.get("maxPods").and_then(|v| v.as_u64()).unwrap_or(30);
//!         Ok(PodCap { max: max as u32 })
//!     }
//! }
//! impl Filter for PodCap {
//!     fn filter(&self, _: &CycleState, _: &Pod, node: &NodeInfo) -> Status {
//!         if node.pod_count < self.max {
//!             Status::success()
//!         } else {
//!             // Evicting a pod would make room: preemption may help.
//!             Status::unschedulable("node(s) reached the pod cap")
//!         }
//!     }
//! }
//! berth_sdk::export_plugin!(PodCap: filter);
//! # fn main() {}
//! ```
//!
//! ## PreScore, Score and NormalizeScore: rank the feasible nodes
//!
//! ```
//! use berth_sdk::helpers::default_normalize_score;
//! use berth_sdk::{CycleState, MAX_NODE_SCORE, NodeInfo, NormalizeScore, Plugin, Pod, PreScore,
//!                 Score, Status};
//!
//! /// Prefers the nodes with the most free CPU, relative to the emptiest feasible
//! /// node; PreScore skips pods that request no CPU.
//! struct FreeCpu;
//! impl Plugin for FreeCpu {
//!     const NAME: &'static str = "FreeCpu";
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(FreeCpu) }
//! }
//! impl PreScore for FreeCpu {
//!     fn pre_score(&self, _: &CycleState, pod: &Pod, _feasible: &[&NodeInfo],
//!                  _all: &[&NodeInfo]) -> Status {
//!         if pod.requests().milli_cpu == 0 { Status::skip() } else { Status::success() }
//!     }
//! }
//! impl Score for FreeCpu {
//!     fn score(&self, _: &CycleState, _: &Pod, node: &NodeInfo) -> Result<i64, Status> {
//!         Ok((node.node.allocatable.milli_cpu - node.requested.milli_cpu).max(0))
//!     }
//! }
//! impl NormalizeScore for FreeCpu {
//!     fn normalize_score(&self, _: &CycleState, _: &Pod, scores: &mut [i64]) -> Status {
//!         default_normalize_score(MAX_NODE_SCORE, false, scores);
//!         Status::success()
//!     }
//! }
//! berth_sdk::export_plugin!(FreeCpu: pre_score, score, normalize_score);
//! # fn main() {}
//! ```
//!
//! ## Counts over the whole cluster, kept across cycles
//!
//! A PreFilter or PreScore that counts something over every node (pods by zone, say)
//! need not walk the whole cluster in every cycle. A [`DomainMemo`](crate::DomainMemo)
//! keeps what each node added, under the node's [`stamp`](crate::NodeInfo::stamp),
//! which changes whenever the node or its pods change, and under a key you give. The
//! key must describe everything of the incoming pod that the counts depend on. While
//! the key stays the same, only the nodes whose stamp moved are walked again.
//!
//! If a count depends on anything else that can change without a node changing
//! (a namespace's labels, say), call [`NodePart::volatile`](crate::NodePart::volatile)
//! and nothing is kept.
//!
//! ```
//! use berth_sdk::{CycleState, DomainMemo, NodeInfo, Plugin, Pod, PreScore, Score, StateKey,
//!                 Status};
//!
//! const ZONE: &str = "topology.kubernetes.io/zone";
//! static BY_ZONE: StateKey<Vec<(String, i64)>> = StateKey::new("FewestOfMyApp/byZone");
//!
//! /// Prefers the zones with the fewest pods of the incoming pod's `app`.
//! struct FewestOfMyApp { counts: DomainMemo<String> }
//! impl Plugin for FewestOfMyApp {
//!     const NAME: &'static str = "FewestOfMyApp";
//!     // Counting pods needs the nodes' pods in the plugin's replica.
//!     const WANTS_PODS: bool = true;
//!     fn new(_: serde_json::Value) -> Result<Self, String> {
//!         Ok(FewestOfMyApp { counts: DomainMemo::new() })
//!     }
//! }
//! impl PreScore for FewestOfMyApp {
//!     fn pre_score(&self, state: &CycleState, pod: &Pod, _feasible: &[&NodeInfo],
//!                  all: &[&NodeInfo]) -> Status {
//!         let Some(app) = pod.labels.get("app") else { return Status::skip() };
//!         // The counts depend on the pod's app label only: that is the key.
//!         let by_zone = self.counts.count(
//!             app.clone(),
//!             all,
//!             |node, part| {
//!                 let Some(zone) = node.node.labels.get(ZONE) else { return };
//!                 let mine = node.pods.iter().filter(|p| p.labels.get("app") == Some(app));
//!                 part.add(0, ZONE, zone, mine.count() as i64);
//!             },
//!             |totals| totals.domains(0).map(|(_, zone, n)| (zone.to_owned(), n)).collect(),
//!         );
//!         state.set(&BY_ZONE, &by_zone);
//!         Status::success()
//!     }
//! }
//! impl Score for FewestOfMyApp {
//!     fn score(&self, state: &CycleState, _: &Pod, node: &NodeInfo) -> Result<i64, Status> {
//!         let by_zone = state.value(&BY_ZONE).ok_or_else(|| Status::error("no PreScore"))?;
//!         let zone = node.node.labels.get(ZONE);
//!         let n = by_zone.iter().find(|(z, _)| Some(z) == zone).map_or(0, |(_, n)| *n);
//!         Ok((100 - n).max(0))
//!     }
//! }
//! berth_sdk::export_plugin!(FewestOfMyApp: pre_score, score);
//! # fn main() {}
//! ```
//!
//! ## Reserve and Permit: claim the node, gate the binding
//!
//! ```
//! use berth_sdk::{Code, CycleState, Permit, Plugin, Pod, Reserve, Status};
//! use std::time::Duration;
//!
//! /// Pods labelled `approval=required` wait at Permit (another plugin, or an
//! /// operator's tool through `allow_waiting_pod`, lets them go) for up to a minute.
//! /// Reserve records the node in the cycle state; Unreserve forgets it.
//! struct Approval;
//! impl Plugin for Approval {
//!     const NAME: &'static str = "Approval";
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(Approval) }
//! }
//! impl Reserve for Approval {
//!     fn reserve(&self, state: &CycleState, _: &Pod, node: &str) -> Status {
//!         state.write("Approval/node", &node.to_owned());
//!         Status::success()
//!     }
//!     fn unreserve(&self, state: &CycleState, _: &Pod, _: &str) {
//!         state.delete("Approval/node");
//!     }
//! }
//! impl Permit for Approval {
//!     fn permit(&self, _: &CycleState, pod: &Pod, _: &str) -> (Status, Duration) {
//!         match pod.labels.get("approval").map(String::as_str) {
//!             Some("required") => (Status::new(Code::Wait, vec![]), Duration::from_secs(60)),
//!             _ => (Status::success(), Duration::ZERO),
//!         }
//!     }
//! }
//! berth_sdk::export_plugin!(Approval: reserve, permit);
//! # fn main() {}
//! ```
//!
//! ## PreBind, Bind and PostBind: the binding cycle
//!
//! ```
//! use berth_sdk::{Bind, CycleState, Plugin, Pod, PostBind, PreBind, Status, LogLevel};
//!
//! /// Binds through the cluster's binding API and logs around it.
//! struct LoggedBinder;
//! impl Plugin for LoggedBinder {
//!     const NAME: &'static str = "LoggedBinder";
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(LoggedBinder) }
//! }
//! impl PreBind for LoggedBinder {
//!     fn pre_bind(&self, _: &CycleState, pod: &Pod, node: &str) -> Status {
//!         berth_sdk::log(LogLevel::Debug, &format!("binding {} to {node}", pod.key()));
//!         Status::success()
//!     }
//! }
//! impl Bind for LoggedBinder {
//!     fn bind(&self, _: &CycleState, pod: &Pod, node: &str) -> Status {
//!         match berth_sdk::bind_pod(pod, node) {
//!             Ok(()) => Status::success(),
//!             Err(e) => Status::error(e),
//!         }
//!     }
//! }
//! impl PostBind for LoggedBinder {
//!     fn post_bind(&self, _: &CycleState, pod: &Pod, node: &str) {
//!         berth_sdk::log(LogLevel::Info, &format!("{} bound to {node}", pod.key()));
//!     }
//! }
//! berth_sdk::export_plugin!(LoggedBinder: pre_bind, bind, post_bind);
//! # fn main() {}
//! ```
//!
//! ## EnqueueExtensions: which events may help a rejected pod
//!
//! ```
//! use berth_sdk::events::node_change;
//! use berth_sdk::{ActionType, ClusterEvent, CycleState, EnqueueExtensions, EventRegistration,
//!                 EventResource, Filter, NodeInfo, Object, Plugin, Pod, QueueingHint, Status};
//!
//! /// Refuses nodes labelled `retired`; a pod it refused is retried when a node is
//! /// added without the label, or loses it, and not on any other event.
//! struct NotRetired;
//! impl Plugin for NotRetired {
//!     const NAME: &'static str = "NotRetired";
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(NotRetired) }
//!     fn events() -> Option<Vec<EventRegistration>> {
//!         Some(vec![EventRegistration::with_hint(
//!             EventResource::Node,
//!             ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
//!         )])
//!     }
//! }
//! impl Filter for NotRetired {
//!     fn filter(&self, _: &CycleState, _: &Pod, node: &NodeInfo) -> Status {
//!         if node.node.labels.contains_key("retired") {
//!             Status::unresolvable("node(s) were retired")
//!         } else {
//!             Status::success()
//!         }
//!     }
//! }
//! impl EnqueueExtensions for NotRetired {
//!     fn queueing_hint(&self, _: &ClusterEvent, _: &Pod, old: Option<&Object>,
//!                      new: Option<&Object>) -> Result<QueueingHint, String> {
//!         let (_, new) = node_change(old, new)?;
//!         Ok(if new.labels.contains_key("retired") {
//!             QueueingHint::QueueSkip
//!         } else {
//!             QueueingHint::Queue
//!         })
//!     }
//! }
//! berth_sdk::export_plugin!(NotRetired: queueing_hint, filter);
//! # fn main() {}
//! ```
//!
//! ## PlacementScore and NormalizePlacementScore: rank a pod group's placements
//!
//! Workload-aware scheduling (WIT feature `workload-scheduling`, unstable) places a
//! pod group as a whole: its cycle tries the group's members within each candidate
//! placement (a rack, a zone) and asks the PlacementScore plugins to rank the
//! placements that can take enough of them. A plugin sees the group, the placement
//! and the node proposed for each member; with NormalizePlacementScore it rescales
//! its scores of all placements into [0, 100], which the profile's weight
//! (`plugins.placementScore.enabled[].weight`) then multiplies.
//!
//! ```
//! use berth_sdk::{CycleState, MAX_NODE_SCORE, NormalizePlacementScore, PlacementScore,
//!                 Plugin, PodGroup, PodGroupAssignments, Status};
//!
//! /// Prefers the placement that spreads the group over the fewest nodes.
//! struct FewestNodes;
//! impl Plugin for FewestNodes {
//!     const NAME: &'static str = "FewestNodes";
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(FewestNodes) }
//! }
//! impl PlacementScore for FewestNodes {
//!     fn score_placement(&self, _: &CycleState, _: &PodGroup, a: &PodGroupAssignments)
//!         -> Result<i64, Status> {
//!         let mut nodes: Vec<&str> = a.assignments.iter().map(|p| p.node.as_str()).collect();
//!         nodes.sort_unstable();
//!         nodes.dedup();
//!         Ok(nodes.len() as i64)
//!     }
//! }
//! impl NormalizePlacementScore for FewestNodes {
//!     fn normalize_placement_score(&self, _: &CycleState, _: &PodGroup, scores: &mut [i64])
//!         -> Status {
//!         // Fewer nodes is better: the fewest scores 100, twice as many 50.
//!         let fewest = scores.iter().copied().min().unwrap_or(1).max(1);
//!         for s in scores.iter_mut() {
//!             *s = MAX_NODE_SCORE * fewest / (*s).max(1);
//!         }
//!         Status::success()
//!     }
//! }
//! berth_sdk::export_plugin!(FewestNodes: placement_score, normalize_placement_score);
//! # fn main() {}
//! ```
//!
//! ## PlacementGenerate: the sets of nodes to try a pod group in
//!
//! A profile with PlacementGenerate plugins tries each pod group within every
//! placement they generate (each plugin refining the placements of the one before,
//! starting from one of every node) and keeps the feasible one PlacementScore ranks
//! best. The plugin gets the parent placement's nodes from its replica, with their
//! labels and pods.
//!
//! ```
//! use berth_sdk::{CycleState, NodeInfo, Placement, PlacementGenerate, Plugin, PodGroup,
//!                 Status};
//!
//! /// One placement per rack (the `rack` label); nodes without one are left out.
//! struct ByRack;
//! impl Plugin for ByRack {
//!     const NAME: &'static str = "ByRack";
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(ByRack) }
//! }
//! impl PlacementGenerate for ByRack {
//!     fn generate_placements(&self, _: &CycleState, _: &PodGroup, _: &Placement,
//!                            nodes: &[&NodeInfo]) -> Result<Vec<Placement>, Status> {
//!         let mut racks: Vec<Placement> = Vec::new();
//!         for n in nodes {
//!             let Some(rack) = n.node.labels.get("rack") else { continue };
//!             match racks.iter_mut().find(|p| &p.name == rack) {
//!                 Some(p) => p.nodes.push(n.node.name.clone()),
//!                 None => racks.push(Placement { name: rack.clone(),
//!                                                nodes: vec![n.node.name.clone()] }),
//!             }
//!         }
//!         Ok(racks)
//!     }
//! }
//! berth_sdk::export_plugin!(ByRack: placement_generate);
//! # fn main() {}
//! ```
//!
//! ## PlacementFeasible: say when a pod group may bind
//!
//! A pod group's cycle tries its waiting members one after another, each on the
//! room the ones before it left, and asks the PlacementFeasible plugins before the
//! first member and after each. Success lets the group bind as placed so far (the
//! cycle still tries the rest); Wait says not yet, go on (a cycle that ends waiting
//! binds nothing); Unschedulable stops the cycle and nothing binds; Error fails it.
//! [`PlacementProgress`](crate::PlacementProgress) counts the members scheduled
//! (bound before the cycle, or placed in it) and those not tried yet; the group's
//! `unscheduled_pods` are not sent here. GangScheduling is this point's built-in
//! plugin (a gang binds once `minCount` members are placed); the one below asks for
//! a number set in its args instead.
//!
//! ```
//! use berth_sdk::{Code, CycleState, PlacementFeasible, PlacementProgress, Plugin,
//!                 PodGroup, Status};
//!
//!
//! /// A group may bind once `members` of it are placed, whatever its policy.
//! struct AtLeast { members: u32 }
//! impl Plugin for AtLeast {
//!     const NAME: &'static str = "AtLeast";
//!     fn new(args: serde_json::Value) -> Result<Self, String> {
//!         match args.get("members").and_then(|m| m.as_u64()) {
//!             Some(n @ 1..=100_000) => Ok(AtLeast { members: n as u32 }),
//!             Some(n) => Err(format!("members: {n} is not in 1..=100000")),
//!             None => Err("members: required".into()),
//!         }
//!     }
//! }
//! impl PlacementFeasible for AtLeast {
//!     fn placement_feasible(&self, _: &CycleState, group: &PodGroup,
//!                           p: &PlacementProgress) -> Status {
//!         let needed = self.members;
//!         if p.scheduled >= needed {
//!             Status::success()
//!         } else if p.scheduled + p.remaining < needed {
//!             Status::unschedulable(format!(
//!                 "{}/{}: {needed} members cannot be placed", group.namespace, group.name))
//!         } else {
//!             Status::new(Code::Wait, vec![format!("{} of {needed} placed", p.scheduled)])
//!         }
//!     }
//! }
//! berth_sdk::export_plugin!(AtLeast: placement_feasible);
//! # fn main() {}
//! ```
//!
//! ## PodGroupPostFilter: make room for a pod group
//!
//! When a pod group's cycle ends unschedulable, the PodGroupPostFilter plugins run
//! in order until one answers Success (or an error). The group's `unscheduled_pods`
//! are the members its cycle tried, and [`simulate_group`](crate::simulate_group)
//! starts a what-if on the whole cluster: pods removed and added back
//! ([`GroupSimulation`](crate::GroupSimulation)), the group's cycle run on what is
//! left (`schedule`: the node of each member placed, or why not), and those
//! assignments checked again (`fits`). Nothing of it reaches the cluster; the host
//! refuses to remove a pod that is not of lower priority than the group (by
//! [`get_pod_group_preemption`](crate::get_pod_group_preemption)), and checks the
//! answer before it evicts anything. DefaultPreemption is this point's built-in
//! plugin (every unit of lower priority out, then given back most important
//! first); the one below preempts only pods of one namespace, and only all of them
//! or none.
//!
//! ```
//! use berth_sdk::{CycleState, NodeInfo, Plugin, PodGroup, PodGroupPostFilter,
//!                 PodGroupPostFilterResult, Status, get_pod_group_preemption,
//!                 simulate_group};
//!
//! /// Evicts the whole `scratch` namespace's lower pods, or nothing.
//! struct ClearScratch;
//! impl Plugin for ClearScratch {
//!     const NAME: &'static str = "ClearScratch";
//!     /// Victims are found among the nodes' pods.
//!     const WANTS_PODS: bool = true;
//!     fn new(_: serde_json::Value) -> Result<Self, String> { Ok(ClearScratch) }
//! }
//! impl PodGroupPostFilter for ClearScratch {
//!     fn pod_group_post_filter(&self, _: &CycleState, group: &PodGroup,
//!                              nodes: &[&NodeInfo]) -> PodGroupPostFilterResult {
//!         let Some(me) = get_pod_group_preemption(&group.namespace, &group.name) else {
//!             return Status::unresolvable("no such PodGroup").into();
//!         };
//!         let victims: Vec<String> = nodes.iter()
//!             .flat_map(|n| n.pods.iter())
//!             .filter(|p| p.namespace == "scratch" && p.priority < me.priority
//!                         && p.scheduling_group.is_none())
//!             .map(|p| p.uid.clone())
//!             .collect();
//!         if victims.is_empty() {
//!             return Status::unresolvable("nothing in scratch to preempt").into();
//!         }
//!         let mut sim = match simulate_group() {
//!             Ok(sim) => sim,
//!             Err(s) => return s.into(),
//!         };
//!         for uid in &victims {
//!             let s = sim.remove_pod(uid);
//!             if !s.is_success() {
//!                 return s.into();
//!             }
//!         }
//!         match sim.schedule() {
//!             Ok(nominations) => PodGroupPostFilterResult {
//!                 status: Status::success(),
//!                 nominations,
//!                 victims,
//!             },
//!             Err(why) => why.into(),
//!         }
//!     }
//! }
//! berth_sdk::export_plugin!(ClearScratch: pod_group_post_filter);
//! # fn main() {}
//! ```
