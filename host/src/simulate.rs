//! `berth simulate`: apply manifest files to the embedded cluster as a timeline of
//! events and report where each pending pod landed, or why it did not.
//!
//! The documents are applied in order. The first document for an object adds it;
//! a later document for the same object (same kind, namespace and name) updates it;
//! a document annotated `berth.dev/simulate: delete` deletes it. Between two
//! documents the scheduler runs until nothing more can happen, on a virtual clock, so
//! backoffs and Permit waits cost no wall time.

use crate::clock::VirtualClock;
use crate::cluster::Change;
use crate::cluster::dra::DraChange;
use crate::cluster::kube::ClusterSnapshot;
use crate::cluster::manifest::pod_group::PodGroupObject;
use crate::cluster::manifest::{
    self, Document, Location, ManifestError, Object, PriorityAdmission, PriorityClass, Workload,
    WorkloadPod,
};
use crate::cluster::memory::MemoryCluster;
use crate::config::{ConfigError, Configuration};
use crate::framework::{DeviceReport, Explanation, ShadowStats};
use crate::metrics::Metrics;
use crate::page::{Eviction, Page, PageOptions, Pending, Placement, Step};
use crate::scheduler::{ExplainError, PodError, Scheduler, SchedulerError, SchedulerOptions};
use crate::wasm::Runtime;
use berth_sdk::Pod;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What to simulate.
#[derive(Clone, Debug, Default)]
pub struct SimulateOptions {
    /// Manifest files (YAML or JSON; multi-document; `v1 List`), applied in order.
    pub files: Vec<PathBuf>,
    /// A `BerthConfiguration` file; the default profile when absent.
    pub config: Option<PathBuf>,
    /// A cluster read before the files are applied (`--from-cluster`): its nodes and
    /// pods and everything else the scheduler reads are the timeline's start.
    pub cluster: Option<ClusterSnapshot>,
    /// How the scheduler runs.
    pub scheduler: SchedulerOptions,
}

/// Why a simulation (or an explanation) could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The configuration file was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A manifest file could not be read, or a document in it is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The scheduler could not be built (a module or a plugin's args refused).
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// A document cannot be applied where it stands in the timeline.
    #[error("{location}: {problem}")]
    Document {
        /// The document.
        location: Location,
        /// What is wrong with it.
        problem: DocumentProblem,
    },
    /// The pod to explain names a PriorityClass the files do not hold.
    #[error(transparent)]
    PriorityClass(#[from] UnknownPriorityClass),
    /// The pod to explain is not a pending pod of the files (or of the cluster).
    #[error(
        "no pending pod {pod} in {place} (give it as NAMESPACE/NAME; pods with spec.nodeName are already placed)"
    )]
    NoPendingPod {
        /// The pod, as given.
        pod: String,
        /// Where it was looked for: "the files", "the cluster at URL", or both.
        place: String,
    },
    /// The pod could not be explained.
    #[error(transparent)]
    Explain(#[from] ExplainError),
}

/// What is wrong with a document of the timeline.
#[derive(Debug, thiserror::Error)]
pub enum DocumentProblem {
    /// A second PriorityClass with `globalDefault: true`.
    #[error("PriorityClass {name} is a global default, and so is {other}: only one may be")]
    SecondGlobalDefault {
        /// The PriorityClass of this document.
        name: String,
        /// The global default PriorityClass already there.
        other: String,
    },
    /// A deleted node that does not exist.
    #[error("cannot delete node {0}: it does not exist")]
    NoSuchNode(String),
    /// A deleted pod (`namespace/name`) that does not exist.
    #[error("cannot delete pod {0}: it does not exist")]
    NoSuchPod(String),
    /// The pod names a PriorityClass that does not exist (yet).
    #[error(transparent)]
    PriorityClass(#[from] UnknownPriorityClass),
    /// The pod (`namespace/name`) was seen before with another UID.
    #[error("pod: pod {0} appears again with another UID; delete it first")]
    PodAgain(String),
    /// The scheduler refused the pod.
    // Part of the message, not a `source`: shown once in a chain.
    #[error("pod: {0}")]
    Pod(PodError),
}

/// A pod (or a PodGroup) names a PriorityClass that does not exist (the priority
/// admission plugin's refusal).
#[derive(Debug, thiserror::Error)]
#[error("{kind} {pod}: spec.priorityClassName: no PriorityClass with name {class} was found")]
pub struct UnknownPriorityClass {
    /// `pod` or `podgroup`.
    pub kind: &'static str,
    /// The object, as `namespace/name`.
    pub pod: String,
    /// The PriorityClass it names.
    pub class: String,
}

/// One pod's line of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PodReport {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node, or null.
    pub node: Option<String>,
    /// The event message.
    pub message: String,
    /// Scheduling attempts.
    pub attempts: u32,
    /// Placed from the batch of an earlier cycle (opportunistic batching): filtered
    /// on that node alone, not scored. Absent from JSON when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub batched: bool,
}

/// A pod group at the end of the run, as a whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupReport {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `gang` or `basic`; null while the cluster has no such PodGroup.
    pub policy: Option<&'static str>,
    /// The gang's `minCount`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// Its members.
    pub members: usize,
    /// Its members bound.
    pub bound: usize,
    /// `placed`, `partly placed` (basic), `waiting for members`, `waiting for its
    /// PodGroup` or `unschedulable`.
    pub state: &'static str,
    /// The Workload template its PodGroup was made from, when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<crate::framework::GroupWorkloadExplanation>,
}

impl GroupReport {
    /// The group's report from its members' count.
    pub fn of(g: &crate::cluster::pod_groups::GroupSummary) -> Self {
        let members = g.pending + g.assumed + g.bound;
        let min_count = g.object.as_ref().and_then(|o| o.min_count());
        let state = match (&g.object, min_count) {
            (None, _) => "waiting for its PodGroup",
            (Some(_), Some(min)) if g.bound >= min as usize => "placed",
            (Some(_), Some(min)) if members < min as usize => "waiting for members",
            (Some(_), Some(_)) => "unschedulable",
            (Some(_), None) if members > 0 && g.bound == members => "placed",
            (Some(_), None) if g.bound > 0 => "partly placed",
            (Some(_), None) => "unschedulable",
        };
        GroupReport {
            namespace: g.namespace.clone(),
            name: g.name.clone(),
            policy: g.object.as_ref().map(|o| {
                if o.min_count().is_some() {
                    "gang"
                } else {
                    "basic"
                }
            }),
            min_count,
            members,
            bound: g.bound,
            state,
            workload: g.template.clone().map(Into::into),
        }
    }

    /// One line of the text report.
    fn to_text(&self) -> String {
        let policy = match (self.policy, self.min_count) {
            (Some("gang"), Some(min)) => format!("gang, minCount {min}"),
            (Some(p), _) => p.to_owned(),
            (None, _) => "no PodGroup".to_owned(),
        };
        let policy = match &self.workload {
            None => policy,
            Some(w) => format!(
                "{policy}; Workload {}, template {}{}",
                w.workload,
                w.template,
                if w.known { "" } else { ", not known" }
            ),
        };
        format!(
            "pod group {}/{} ({policy}): {} of {} member(s) bound: {}\n",
            self.namespace, self.name, self.bound, self.members, self.state
        )
    }
}

/// Totals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Pods bound.
    pub scheduled: usize,
    /// Pods left pending.
    pub unschedulable: usize,
    /// Of the pods bound, those placed from a batch (opportunistic batching).
    pub batched: usize,
    /// Wall time of the scheduling (not of loading).
    pub seconds: f64,
}

/// A pod preemption evicted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EvictionReport {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node it ran on.
    pub node: String,
    /// The pod it made room for, `namespace/name`.
    pub preemptor: String,
}

/// A claim the run bound to a volume (through VolumeBinding's PreBind and the
/// embedded cluster's PersistentVolume controller and provisioner).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClaimReport {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The volume it is bound to.
    pub volume: String,
    /// For a volume provisioned for it: the node it was provisioned for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioned_for: Option<String>,
}

/// The report, as `--output json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// One entry per pending pod of Berth's profiles (still there at the end), in
    /// the order the pods first appeared.
    pub pods: Vec<PodReport>,
    /// The pods preemption evicted, in order (absent from JSON when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evicted: Vec<EvictionReport>,
    /// The claims the run bound, in order (absent from JSON when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimReport>,
    /// The devices the run's ResourceClaims were given, by claim (absent from JSON
    /// when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceReport>,
    /// What each shadow run of the configuration saw (absent from JSON when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shadows: Vec<ShadowStats>,
    /// The pod groups, each as a whole (absent from JSON when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupReport>,
    /// Totals.
    pub summary: Summary,
}

impl Report {
    /// Pods per second of scheduling time.
    pub fn pods_per_second(&self) -> f64 {
        if self.summary.seconds > 0.0 {
            self.pods.len() as f64 / self.summary.seconds
        } else {
            0.0
        }
    }

    /// The human-readable report: one line per pod, then the summary.
    pub fn to_text(&self) -> String {
        let width = self
            .pods
            .iter()
            .map(|p| p.namespace.len() + p.name.len() + 1)
            .max()
            .unwrap_or(0);
        let node_width = self
            .pods
            .iter()
            .map(|p| p.node.as_ref().map_or(9, String::len))
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for p in &self.pods {
            let key = format!("{}/{}", p.namespace, p.name);
            let attempts = if p.attempts == 1 {
                "1 attempt ".to_owned()
            } else {
                format!("{} attempts", p.attempts)
            };
            match &p.node {
                Some(n) => {
                    let line = format!("{key:<width$}  {n:<node_width$}  {attempts}");
                    out.push_str(line.trim_end());
                    out.push('\n');
                }
                None => out.push_str(&format!(
                    "{key:<width$}  {:<node_width$}  {attempts}  {}\n",
                    "<pending>", p.message
                )),
            }
        }
        for e in &self.evicted {
            out.push_str(&format!(
                "{}/{}  evicted from {}: preempted by {}\n",
                e.namespace, e.name, e.node, e.preemptor
            ));
        }
        for c in &self.claims {
            out.push_str(&format!(
                "{}/{}  bound to volume {}",
                c.namespace, c.name, c.volume
            ));
            if let Some(n) = &c.provisioned_for {
                out.push_str(&format!(" (provisioned for {n})"));
            }
            out.push('\n');
        }
        for d in &self.devices {
            out.push_str(&d.to_text());
        }
        for s in &self.shadows {
            out.push_str(&shadow_text(s));
        }
        for g in &self.groups {
            out.push_str(&g.to_text());
        }
        let evicted = if self.evicted.is_empty() {
            String::new()
        } else {
            format!(", {} evicted", self.evicted.len())
        };
        let batched = if self.summary.batched == 0 {
            String::new()
        } else {
            format!(" ({} from a batch)", self.summary.batched)
        };
        out.push_str(&format!(
            "{} scheduled{batched}, {} unschedulable{evicted}, {} pods in {:.3} s ({:.0} pods/s)\n",
            self.summary.scheduled,
            self.summary.unschedulable,
            self.pods.len(),
            self.summary.seconds,
            self.pods_per_second()
        ));
        out
    }
}

/// How many of a shadow's disagreements the text report lists.
const LISTED_DISAGREEMENTS: usize = 20;

/// A shadow run in the text report: its totals, then its latest disagreements.
fn shadow_text(s: &ShadowStats) -> String {
    let kinds: Vec<String> = s.by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let mut out = format!(
        "shadow of {} (profile {}, candidate {}): compared on {} cycle(s), disagreed on {}{}\n",
        s.plugin,
        s.profile,
        s.candidate,
        s.cycles,
        s.disagreeing_cycles,
        if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        }
    );
    let shown = s.recent.len().min(LISTED_DISAGREEMENTS);
    for d in s.recent.iter().rev().take(shown).rev() {
        out.push_str(&format!(
            "  {}  {}  {}\n",
            d.pod,
            d.kinds.join(","),
            d.detail
        ));
    }
    let more = s.disagreeing_cycles.saturating_sub(shown as u64);
    if more > 0 {
        out.push_str(&format!("  and {more} earlier\n"));
    }
    out
}

/// A scheduler loaded with a configuration, and the documents to apply.
struct Loaded {
    scheduler: Scheduler,
    cluster: Arc<MemoryCluster>,
    docs: Vec<Document>,
}

/// Reads the configuration and every file (all of them before anything happens: a
/// bad file changes nothing) and builds the scheduler.
fn load(runtime: &Arc<Runtime>, opts: &SimulateOptions) -> Result<Loaded, SimulateError> {
    let (config, config_name) = match &opts.config {
        Some(p) => (Configuration::load(p)?, p.display().to_string()),
        None => (
            Configuration::default(),
            "<default configuration>".to_owned(),
        ),
    };
    let cluster = Arc::new(MemoryCluster::new());
    let clock = Arc::new(VirtualClock::default());
    // The plugins read every feature gate, set or not.
    let mut scheduler_options = opts.scheduler.clone();
    crate::features::complete(&mut scheduler_options.framework);
    // The files are read while the profiles' modules load: two cores, one each.
    let (docs, scheduler) = std::thread::scope(|scope| {
        let reading = scope.spawn(|| {
            let mut docs = Vec::new();
            for f in &opts.files {
                docs.extend(manifest::load_file(f)?);
            }
            Ok::<_, SimulateError>(docs)
        });
        let scheduler = Scheduler::new(
            runtime,
            &config,
            &config_name,
            &scheduler_options,
            cluster.clone(),
            clock,
        );
        let docs = reading
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        // A file's error is the one to tell first, as when the files were read first.
        (docs, scheduler)
    });
    let docs = docs?;
    let scheduler = scheduler?;
    if let Some(warning) = manifest::ignored_kinds_warning(&docs) {
        tracing::warn!("{warning}");
    }
    let groups = docs
        .iter()
        .filter(|d| matches!(d.object, Object::PodGroup(_)))
        .count();
    if groups > 0 && !scheduler.generic_workload() {
        tracing::warn!(
            "{groups} PodGroup(s) not scheduled as groups: GenericWorkload is off (kube-scheduler \
             1.37's default), so their pods are scheduled one by one; \
             `--feature-gates GenericWorkload=true` schedules them as groups"
        );
    }
    Ok(Loaded {
        scheduler,
        cluster,
        docs,
    })
}

/// The timeline's bookkeeping: which objects exist, which pods to report.
#[derive(Default)]
struct Timeline {
    /// Pods by `namespace/name`: their UID.
    pods: HashMap<String, String>,
    /// Pods' labels by `namespace/name`, for a ReplicaSet's adoption count.
    labels: HashMap<String, berth_sdk::Labels>,
    /// The workload controllers, by kind, namespace and name (ordered: controllers
    /// create their next pods in this order).
    workloads: std::collections::BTreeMap<(String, String, String), Controlled>,
    nodes: std::collections::HashSet<String>,
    /// Pending pods of Berth's profiles, by UID, in order of first appearance.
    reported: Vec<String>,
    /// PriorityClasses by name, for the priority admission of later pods.
    classes: HashMap<String, PriorityClass>,
    /// Pods naming a ResourceClaimTemplate that did not exist when they came, by
    /// `namespace/name`: their claims are made when it appears, as the resourceclaim
    /// controller makes them (ordered: their updates reach the queue in this order).
    awaiting_templates: std::collections::BTreeMap<String, Pod>,
}

/// What a workload controller of the timeline has done and has yet to do.
struct Controlled {
    /// The pods it created (`namespace/name`), oldest first.
    created: Vec<String>,
    /// An ordered StatefulSet's pods not created yet: the next once the ones before
    /// it are bound.
    waiting: std::collections::VecDeque<WorkloadPod>,
    /// Its selector object, removed with it.
    selector: Option<(String, String, String)>,
    /// Its latest document, named in the errors of the pods it creates later.
    source: Location,
}

impl Controlled {
    fn new(source: Location) -> Self {
        Controlled {
            created: Vec::new(),
            waiting: std::collections::VecDeque::new(),
            selector: None,
            source,
        }
    }
}

impl Timeline {
    /// A workload controller's document: its selector and claims, then the pods it
    /// is missing (a ReplicaSet counts the pods its selector matches, a StatefulSet
    /// its ordinals); the pods a later document no longer wants are deleted, and an
    /// ordered StatefulSet creates its next pod only once the ones before are bound
    /// ([`Timeline::advance`]).
    fn apply_workload(
        &mut self,
        scheduler: &mut Scheduler,
        w: Workload,
        loc: &Location,
    ) -> Result<(), DocumentProblem> {
        let id = (w.kind.clone(), w.namespace.clone(), w.name.clone());
        let mut state = self
            .workloads
            .remove(&id)
            .unwrap_or_else(|| Controlled::new(loc.clone()));
        state.source = loc.clone();
        if let Some(sel) = &w.selector {
            state.selector = Some((sel.kind.clone(), sel.namespace.clone(), sel.name.clone()));
            scheduler.add_or_update_selector(sel.clone());
        }
        for c in w.claims {
            if scheduler.storage().claim(&c.namespace, &c.name).is_none() {
                self.add_claim(scheduler, c);
            }
        }
        let wanted: std::collections::HashSet<String> =
            w.pods.iter().map(|p| p.pod.key()).collect();
        // Pods it made that the document no longer wants (scaled down, or a new
        // template): deleted, as its controller would.
        let (keep, drop): (Vec<String>, Vec<String>) =
            state.created.into_iter().partition(|k| wanted.contains(k));
        state.created = keep;
        for key in drop {
            self.delete_pod(scheduler, &key);
        }
        let mut missing: Vec<WorkloadPod> = w
            .pods
            .into_iter()
            .filter(|p| !self.pods.contains_key(&p.pod.key()))
            .collect();
        if let Some(sel) = &w.adopts {
            let prefix = format!("{}/", w.namespace);
            let matching = self
                .labels
                .iter()
                .filter(|(k, l)| k.starts_with(&prefix) && sel.matches(l))
                .count();
            missing.truncate(wanted.len().saturating_sub(matching));
        }
        state.waiting.clear();
        if w.ordered {
            state.waiting.extend(missing);
            self.workloads.insert(id.clone(), state);
            self.advance_one(scheduler, &id)?;
        } else {
            for p in missing {
                state.created.push(p.pod.key());
                self.create_pod(scheduler, p)?;
            }
            self.workloads.insert(id, state);
        }
        Ok(())
    }

    /// Creates the next pod of every ordered StatefulSet whose created pods are all
    /// bound; whether any was created.
    fn advance(&mut self, scheduler: &mut Scheduler) -> Result<bool, SimulateError> {
        let ids: Vec<_> = self
            .workloads
            .iter()
            .filter(|(_, s)| !s.waiting.is_empty())
            .map(|(id, s)| (id.clone(), s.source.clone()))
            .collect();
        let mut any = false;
        for (id, source) in ids {
            any |= self
                .advance_one(scheduler, &id)
                .map_err(|problem| SimulateError::Document {
                    location: source,
                    problem,
                })?;
        }
        Ok(any)
    }

    fn advance_one(
        &mut self,
        scheduler: &mut Scheduler,
        id: &(String, String, String),
    ) -> Result<bool, DocumentProblem> {
        let Some(state) = self.workloads.get_mut(id) else {
            return Ok(false);
        };
        let ready = state.created.iter().all(|key| {
            self.pods.get(key).is_some_and(|uid| {
                scheduler
                    .cache()
                    .pod(uid)
                    .is_some_and(|p| !p.node_name.is_empty())
            })
        });
        if !ready {
            return Ok(false);
        }
        let Some(next) = state.waiting.pop_front() else {
            return Ok(false);
        };
        state.created.push(next.pod.key());
        self.create_pod(scheduler, next)?;
        Ok(true)
    }

    /// A pod a controller creates: admitted as a document's pod is.
    fn create_pod(
        &mut self,
        scheduler: &mut Scheduler,
        p: WorkloadPod,
    ) -> Result<(), DocumentProblem> {
        let mut pod = p.pod;
        if let Some(a) = &p.admission {
            self.admit(&mut pod, a)?;
        }
        self.apply_pod(scheduler, pod)
    }

    /// Deletes a pod by `namespace/name`, if it exists.
    fn delete_pod(&mut self, scheduler: &mut Scheduler, key: &str) -> bool {
        self.labels.remove(key);
        self.awaiting_templates.remove(key);
        let Some(uid) = self.pods.remove(key) else {
            return false;
        };
        self.reported.retain(|u| u != &uid);
        scheduler.delete_pod(&uid);
        scheduler.release_claims_of(&uid);
        true
    }

    /// Makes the claims of the pods that waited for a template, now that one appeared.
    fn make_awaited_claims(&mut self, scheduler: &mut Scheduler) -> Result<(), DocumentProblem> {
        let keys: Vec<String> = self.awaiting_templates.keys().cloned().collect();
        for key in keys {
            let Some(mut pod) = self.awaiting_templates.remove(&key) else {
                continue;
            };
            if scheduler.make_claims_from_templates(&mut pod) {
                scheduler.update_pod(pod).map_err(DocumentProblem::Pod)?;
            } else {
                self.awaiting_templates.insert(key, pod);
            }
        }
        Ok(())
    }

    /// A claim, with the DefaultStorageClass admission plugin's default: a new claim
    /// that names no class gets the default one.
    fn add_claim(&mut self, scheduler: &mut Scheduler, mut c: berth_sdk::PersistentVolumeClaim) {
        if c.storage_class_name.is_none()
            && scheduler.storage().claim(&c.namespace, &c.name).is_none()
            && let Some(class) = scheduler.storage().default_class()
        {
            c.storage_class_name = Some(class.name);
        }
        scheduler.add_or_update_claim(c)
    }

    /// Deletes a workload controller and, as the garbage collector would, its pods.
    fn delete_workload(
        &mut self,
        scheduler: &mut Scheduler,
        kind: &str,
        namespace: &str,
        name: &str,
    ) {
        let id = (kind.to_owned(), namespace.to_owned(), name.to_owned());
        let Some(state) = self.workloads.remove(&id) else {
            scheduler.remove_selector(kind, namespace, name);
            return;
        };
        for key in &state.created {
            self.delete_pod(scheduler, key);
        }
        if let Some((k, ns, n)) = state.selector {
            scheduler.remove_selector(&k, &ns, &n);
        }
    }

    /// Starts the timeline from a cluster's objects: they exist before the first
    /// document, and its pending pods are reported as the files' are. A pod the
    /// scheduler refuses is left out with a warning, as `berth run` leaves it.
    fn start_from(&mut self, scheduler: &mut Scheduler, snapshot: &ClusterSnapshot) {
        for c in &snapshot.priority_classes {
            self.classes.insert(c.name.clone(), c.clone());
        }
        for change in snapshot.changes.iter().cloned() {
            let applied = match change {
                // As a document's pod: tracked, and reported when pending here.
                Change::Pod(p) => self.apply_pod(scheduler, p).map_err(|e| e.to_string()),
                other => {
                    if let Change::Node(n) = &other {
                        self.nodes.insert(n.name.clone());
                    }
                    scheduler.apply(other).map_err(|e| format!("{e:#}"))
                }
            };
            if let Err(e) = applied {
                tracing::warn!("{}: cluster object not applied: {e}", snapshot.server);
            }
        }
    }

    fn apply(&mut self, scheduler: &mut Scheduler, doc: Document) -> Result<(), SimulateError> {
        let location = doc.source.clone();
        self.apply_document(scheduler, doc)
            .map_err(|problem| SimulateError::Document { location, problem })
    }

    fn apply_document(
        &mut self,
        scheduler: &mut Scheduler,
        doc: Document,
    ) -> Result<(), DocumentProblem> {
        let loc = doc.source;
        match doc.object {
            Object::PriorityClass(pc) => {
                if pc.global_default
                    && let Some(other) = self
                        .classes
                        .values()
                        .find(|c| c.global_default && c.name != pc.name)
                {
                    return Err(DocumentProblem::SecondGlobalDefault {
                        name: pc.name,
                        other: other.name.clone(),
                    });
                }
                self.classes.insert(pc.name.clone(), pc);
            }
            Object::Configuration(text) => {
                // As `berth run` takes an edited file: swapped in, or refused with a
                // warning while the running version goes on.
                let _ = scheduler.reload(crate::reload::ReloadSource::Text {
                    text,
                    file: format!("{} (document {})", loc.file, loc.document),
                    base: std::path::Path::new(&loc.file)
                        .parent()
                        .unwrap_or(std::path::Path::new("."))
                        .to_path_buf(),
                });
            }
            Object::Budget(b) => scheduler.add_or_update_budget(b),
            Object::Claim(c) => self.add_claim(scheduler, c),
            Object::Workload(w) => self.apply_workload(scheduler, w, &loc)?,
            Object::Volume(v) => scheduler.add_or_update_volume(v),
            Object::StorageClass(c) => scheduler.add_or_update_storage_class(c),
            Object::CsiNode(n) => scheduler.add_or_update_csi_node(n),
            Object::CsiDriver(d) => scheduler.add_or_update_csi_driver(d),
            Object::CsiStorageCapacity(c) => scheduler.add_or_update_storage_capacity(c),
            Object::PodGroup(mut g) => {
                self.admit_group(&mut g)?;
                scheduler.add_or_update_pod_group(g)
            }
            Object::SchedulingWorkload(w) => scheduler.add_or_update_workload(w),
            Object::DeviceClass(c) => scheduler.apply_dra(DraChange::Class(c)),
            Object::ResourceClaim(c) => scheduler.apply_dra(DraChange::Claim(c)),
            Object::ResourceClaimTemplate(t) => {
                scheduler.apply_dra(DraChange::Template(t));
                self.make_awaited_claims(scheduler)?;
            }
            Object::ResourceSlice(s) => scheduler.apply_dra(DraChange::Slice(s)),
            Object::DeviceTaintRule(r) => scheduler.apply_dra(DraChange::TaintRule(r)),
            // Named in a warning when loaded.
            Object::Ignored { .. } => {}
            Object::Namespace(name, labels) => scheduler.add_or_update_namespace(&name, labels),
            Object::Selector(s) => scheduler.add_or_update_selector(s),
            Object::Node(node) => {
                self.nodes.insert(node.name.clone());
                scheduler.add_or_update_node(node);
            }
            Object::Pod(mut pod) => {
                if let Some(a) = &doc.admission {
                    self.admit(&mut pod, a)?;
                }
                self.apply_pod(scheduler, pod)?
            }
            Object::Delete {
                kind,
                namespace,
                name,
            } => match kind.as_str() {
                "Node" => {
                    if !self.nodes.remove(&name) {
                        return Err(DocumentProblem::NoSuchNode(name));
                    }
                    scheduler.remove_node(&name);
                }
                "Pod" => {
                    let key = format!("{namespace}/{name}");
                    if !self.delete_pod(scheduler, &key) {
                        return Err(DocumentProblem::NoSuchPod(key));
                    }
                }
                "Deployment" | "ReplicaSet" | "StatefulSet" | "Job" | "ReplicationController" => {
                    self.delete_workload(scheduler, &kind, &namespace, &name)
                }
                "Namespace" => {}
                "PersistentVolumeClaim" => scheduler.remove_claim(&namespace, &name),
                "PersistentVolume" => scheduler.remove_volume(&name),
                "StorageClass" => scheduler.remove_storage_class(&name),
                "CSINode" => scheduler.remove_csi_node(&name),
                "CSIDriver" => scheduler.remove_csi_driver(&name),
                "CSIStorageCapacity" => scheduler.remove_storage_capacity(&namespace, &name),
                "PodGroup" => scheduler.remove_pod_group(&namespace, &name),
                "Workload" => scheduler.remove_workload(&namespace, &name),
                "DeviceClass" => scheduler.apply_dra(DraChange::ClassDeleted(name)),
                "ResourceClaim" => scheduler.apply_dra(DraChange::ClaimDeleted { namespace, name }),
                "ResourceClaimTemplate" => {
                    scheduler.apply_dra(DraChange::TemplateDeleted { namespace, name })
                }
                "ResourceSlice" => scheduler.apply_dra(DraChange::SliceDeleted(name)),
                "DeviceTaintRule" => scheduler.apply_dra(DraChange::TaintRuleDeleted(name)),
                other => scheduler.remove_selector(other, &namespace, &name),
            },
        }
        Ok(())
    }

    /// The priority admission plugin: the pod's class (or the global default class)
    /// gives its priority and, unless the pod states one, its preemption policy.
    fn admit(&self, pod: &mut Pod, a: &PriorityAdmission) -> Result<(), UnknownPriorityClass> {
        let key = pod.key();
        self.admitted("pod", key, a, &mut pod.priority, &mut pod.preemption_policy)
    }

    /// The same admission for a PodGroup (upstream's priority admission admits
    /// PodGroups as it admits pods).
    fn admit_group(&self, g: &mut PodGroupObject) -> Result<(), UnknownPriorityClass> {
        let Some(a) = g.admission.take() else {
            return Ok(());
        };
        let key = format!("{}/{}", g.namespace, g.name);
        self.admitted(
            "podgroup",
            key,
            &a,
            &mut g.priority,
            &mut g.preemption_policy,
        )
    }

    /// Gives `priority` (and `policy`, unless stated) from the class `a` names, or
    /// from the global default class when it names none.
    fn admitted(
        &self,
        kind: &'static str,
        key: String,
        a: &PriorityAdmission,
        priority: &mut i32,
        policy: &mut berth_sdk::PreemptionPolicy,
    ) -> Result<(), UnknownPriorityClass> {
        let class = if a.class.is_empty() {
            match self.classes.values().find(|c| c.global_default) {
                Some(c) => c,
                None => return Ok(()),
            }
        } else {
            self.classes
                .get(&a.class)
                .ok_or_else(|| UnknownPriorityClass {
                    kind,
                    pod: key,
                    class: a.class.clone(),
                })?
        };
        *priority = class.value;
        if !a.policy_given {
            *policy = class.preemption_policy;
        }
        Ok(())
    }

    fn apply_pod(
        &mut self,
        scheduler: &mut Scheduler,
        mut pod: Pod,
    ) -> Result<(), DocumentProblem> {
        let key = pod.key();
        if pod.node_name.is_empty() && !scheduler.make_claims_from_templates(&mut pod) {
            self.awaiting_templates.insert(key.clone(), pod.clone());
        }
        self.labels.insert(key.clone(), pod.labels.clone());
        let pending_here = pod.node_name.is_empty() && scheduler.serves(&pod.scheduler_name);
        match self.pods.get(&key) {
            Some(uid) if uid == &pod.uid => {
                scheduler.update_pod(pod).map_err(DocumentProblem::Pod)?
            }
            Some(_) => return Err(DocumentProblem::PodAgain(key)),
            None => {
                self.pods.insert(key, pod.uid.clone());
                if pending_here {
                    self.reported.push(pod.uid.clone());
                }
                scheduler.add_pod(pod).map_err(DocumentProblem::Pod)?;
            }
        }
        Ok(())
    }
}

/// What each document of the timeline brought about, found by comparing the pods'
/// outcomes and the cluster's evictions before and after the scheduler ran.
#[derive(Default)]
struct Steps {
    steps: Vec<Step>,
    /// By UID: the node and the attempts of each reported pod after the last step.
    last: HashMap<String, (Option<String>, u32)>,
    /// Evictions already reported.
    evictions: usize,
}

impl Steps {
    /// Records the step of `doc` (described before it is applied), once the scheduler
    /// has run after it.
    fn record(
        &mut self,
        (document, action, kind, object): (String, String, String, String),
        timeline: &Timeline,
        scheduler: &Scheduler,
        cluster: &MemoryCluster,
    ) {
        let mut bound = Vec::new();
        let mut pending = Vec::new();
        for uid in &timeline.reported {
            let Some(o) = scheduler.outcome(uid) else {
                continue;
            };
            let (node_before, attempts_before) = self.last.get(uid).cloned().unwrap_or((None, 0));
            let key = format!("{}/{}", o.namespace, o.name);
            match &o.node {
                Some(node) if node_before.as_ref() != Some(node) => bound.push(Placement {
                    pod: key,
                    node: node.clone(),
                    batched: o.batched,
                }),
                None if o.attempts > attempts_before => pending.push(Pending {
                    pod: key,
                    message: o.message.clone(),
                }),
                _ => {}
            }
            self.last.insert(uid.clone(), (o.node.clone(), o.attempts));
        }
        let evictions = cluster.evictions();
        let evicted = evictions[self.evictions.min(evictions.len())..]
            .iter()
            .map(|e| Eviction {
                pod: e.key.clone(),
                node: e.node.clone(),
                preemptor: e.preemptor.clone(),
            })
            .collect();
        self.evictions = evictions.len();
        self.steps.push(Step {
            document,
            action,
            kind,
            object,
            bound,
            evicted,
            pending,
        });
    }
}

/// A document as a step of the timeline names it: where it is, and what it does to
/// which object (`add`/`update` for nodes and pods, as the timeline knows them).
fn describe(doc: &Document, timeline: &Timeline) -> (String, String, String, String) {
    let scoped = |ns: &str, name: &str| {
        if ns.is_empty() {
            name.to_owned()
        } else {
            format!("{ns}/{name}")
        }
    };
    let added = |known: bool| if known { "update" } else { "add" };
    let (action, kind, object) = match &doc.object {
        Object::Node(n) => (
            added(timeline.nodes.contains(&n.name)),
            "Node".to_owned(),
            n.name.clone(),
        ),
        Object::Pod(p) => (
            added(timeline.pods.contains_key(&p.key())),
            "Pod".to_owned(),
            p.key(),
        ),
        Object::PriorityClass(c) => ("apply", "PriorityClass".to_owned(), c.name.clone()),
        Object::Budget(b) => (
            "apply",
            "PodDisruptionBudget".to_owned(),
            scoped(&b.namespace, &b.name),
        ),
        Object::Namespace(name, _) => ("apply", "Namespace".to_owned(), name.clone()),
        Object::Selector(s) => ("apply", s.kind.clone(), scoped(&s.namespace, &s.name)),
        Object::Workload(w) => ("apply", w.kind.clone(), scoped(&w.namespace, &w.name)),
        Object::Claim(c) => (
            "apply",
            "PersistentVolumeClaim".to_owned(),
            scoped(&c.namespace, &c.name),
        ),
        Object::Volume(v) => ("apply", "PersistentVolume".to_owned(), v.name.clone()),
        Object::StorageClass(c) => ("apply", "StorageClass".to_owned(), c.name.clone()),
        Object::CsiNode(n) => ("apply", "CSINode".to_owned(), n.name.clone()),
        Object::CsiDriver(d) => ("apply", "CSIDriver".to_owned(), d.name.clone()),
        Object::CsiStorageCapacity(c) => (
            "apply",
            "CSIStorageCapacity".to_owned(),
            scoped(&c.namespace, &c.name),
        ),
        Object::PodGroup(g) => (
            "apply",
            "PodGroup".to_owned(),
            scoped(&g.namespace, &g.name),
        ),
        Object::SchedulingWorkload(w) => (
            "apply",
            "Workload".to_owned(),
            scoped(&w.namespace, &w.name),
        ),
        Object::DeviceClass(c) => ("apply", "DeviceClass".to_owned(), c.name.clone()),
        Object::ResourceClaim(c) => (
            "apply",
            "ResourceClaim".to_owned(),
            scoped(&c.namespace, &c.name),
        ),
        Object::ResourceClaimTemplate(t) => (
            "apply",
            "ResourceClaimTemplate".to_owned(),
            scoped(&t.namespace, &t.name),
        ),
        Object::ResourceSlice(r) => ("apply", "ResourceSlice".to_owned(), r.name.clone()),
        Object::DeviceTaintRule(r) => ("apply", "DeviceTaintRule".to_owned(), r.name.clone()),
        Object::Configuration(_) => (
            "apply",
            "KubeSchedulerConfiguration".to_owned(),
            String::new(),
        ),
        Object::Ignored { kind, .. } => ("ignore", kind.clone(), String::new()),
        Object::Delete {
            kind,
            namespace,
            name,
        } => ("delete", kind.clone(), scoped(namespace, name)),
    };
    (doc.source.to_string(), action.to_owned(), kind, object)
}

/// A simulation run: its report, the scheduler as the run left it, and (when asked
/// for) what each document brought about.
struct Ran {
    report: Report,
    scheduler: Scheduler,
    steps: Vec<Step>,
}

/// Loads the files and runs them as a timeline; reports every pending pod.
pub fn simulate(runtime: &Arc<Runtime>, opts: &SimulateOptions) -> Result<Report, SimulateError> {
    let Ran {
        report, scheduler, ..
    } = run(runtime, opts, false)?;
    // Freeing every pod, node and plugin instance of a large run takes a while, and
    // nothing waits for it: the report is ready now.
    std::thread::spawn(move || drop(scheduler));
    Ok(report)
}

/// What `berth simulate --serve` serves.
#[derive(Debug)]
pub struct PageRun {
    /// The report, as `simulate` makes it.
    pub report: Report,
    /// The page of the run: the cluster and pending pods as the timeline left them,
    /// pending pods explained, and what each document brought about.
    pub page: Page,
    /// The scheduler's metrics at the end of the run.
    pub metrics: Metrics,
}

/// `berth simulate --serve`: the report, the page of the run and its metrics.
pub fn simulate_page(
    runtime: &Arc<Runtime>,
    opts: &SimulateOptions,
    page: &PageOptions,
) -> Result<PageRun, SimulateError> {
    let Ran {
        report,
        mut scheduler,
        steps,
    } = run(runtime, opts, true)?;
    let mut page = Page::of(&mut scheduler, page);
    page.timeline = steps;
    Ok(PageRun {
        report,
        page,
        metrics: scheduler.metrics().clone(),
    })
}

fn run(runtime: &Arc<Runtime>, opts: &SimulateOptions, record: bool) -> Result<Ran, SimulateError> {
    let Loaded {
        mut scheduler,
        cluster,
        docs,
    } = load(runtime, opts)?;
    let mut timeline = Timeline::default();
    let mut steps = Steps::default();
    let start = Instant::now();
    if let Some(snapshot) = &opts.cluster {
        timeline.start_from(&mut scheduler, snapshot);
        scheduler.run_until_idle();
    }
    for doc in docs {
        let described = record.then(|| describe(&doc, &timeline));
        timeline.apply(&mut scheduler, doc)?;
        scheduler.run_until_idle();
        // Ordered StatefulSets create their next pod once the one before is bound.
        while timeline.advance(&mut scheduler)? {
            scheduler.run_until_idle();
        }
        if let Some(d) = described {
            steps.record(d, &timeline, &scheduler, &cluster);
        }
    }
    let seconds = start.elapsed().as_secs_f64();

    let mut pods = Vec::new();
    for uid in &timeline.reported {
        let Some(o) = scheduler.outcome(uid) else {
            continue;
        };
        pods.push(PodReport {
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            node: o.node.clone(),
            message: o.message.clone(),
            attempts: o.attempts,
            batched: o.batched,
        });
    }
    let scheduled = pods.iter().filter(|p| p.node.is_some()).count();
    let evicted = cluster
        .evictions()
        .into_iter()
        .map(|e| {
            let (namespace, name) = e.key.split_once('/').unwrap_or(("", &e.key));
            EvictionReport {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                node: e.node,
                preemptor: e.preemptor,
            }
        })
        .collect();
    let claims = cluster
        .volume_bindings()
        .into_iter()
        .map(|b| {
            let (namespace, name) = b.claim.split_once('/').unwrap_or(("", &b.claim));
            ClaimReport {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                volume: b.volume,
                provisioned_for: b.provisioned_for,
            }
        })
        .collect();
    let groups = scheduler
        .pod_groups()
        .summaries()
        .iter()
        .map(GroupReport::of)
        .collect();
    let devices = DeviceReport::of(&scheduler.dra().claims());
    let report = Report {
        evicted,
        claims,
        devices,
        shadows: scheduler.shadow_reports(),
        groups,
        summary: Summary {
            scheduled,
            batched: pods.iter().filter(|p| p.batched).count(),
            unschedulable: pods.len() - scheduled,
            seconds,
        },
        pods,
    };
    Ok(Ran {
        report,
        scheduler,
        steps: steps.steps,
    })
}

/// `berth explain`: how the profile sees one pending pod of the files on every node,
/// with the cluster as it is once every document is applied (pending pods are not
/// scheduled: only pods with `spec.nodeName` are on nodes).
pub fn explain(
    runtime: &Arc<Runtime>,
    opts: &SimulateOptions,
    pod: &str,
) -> Result<Explanation, SimulateError> {
    let Loaded {
        mut scheduler,
        docs,
        ..
    } = load(runtime, opts)?;
    let mut timeline = Timeline::default();
    let mut target: Option<Pod> = None;
    if let Some(snapshot) = &opts.cluster {
        target = snapshot.changes.iter().find_map(|c| match c {
            Change::Pod(p) if p.node_name.is_empty() && p.key() == pod => Some(p.clone()),
            _ => None,
        });
        timeline.start_from(&mut scheduler, snapshot);
    }
    for doc in docs {
        if let Object::Pod(p) = &doc.object
            && p.node_name.is_empty()
            && p.key() == pod
        {
            let mut p = p.clone();
            if let Some(a) = &doc.admission {
                timeline.admit(&mut p, a)?;
            }
            target = Some(p);
        }
        timeline.apply(&mut scheduler, doc)?;
    }
    // As the embedded cluster has it: admitted, with the claims made from its
    // templates.
    let target = match timeline.pods.get(pod).and_then(|uid| scheduler.pod(uid)) {
        Some(applied) if target.is_some() => Some(applied.clone()),
        _ => target,
    };
    let Some(target) = target else {
        let place = match (&opts.cluster, opts.files.is_empty()) {
            (Some(c), true) => format!("the cluster at {}", c.server),
            (Some(c), false) => format!("the cluster at {} or the files", c.server),
            (None, _) => "the files".to_owned(),
        };
        return Err(SimulateError::NoPendingPod {
            pod: pod.to_owned(),
            place,
        });
    };
    Ok(scheduler.explain(&target, &crate::framework::ExplainOptions::default())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::manifest::load_str;

    fn runtime() -> &'static Arc<Runtime> {
        crate::wasm::test_runtime()
    }

    /// The native scheduler and the documents of `text`, not applied yet.
    fn loaded(text: &str) -> (Scheduler, Vec<Document>) {
        let Loaded {
            scheduler, docs, ..
        } = loaded_natively(text);
        (scheduler, docs)
    }

    /// The documents of `text` loaded for the native twins, not applied yet.
    fn loaded_natively(text: &str) -> Loaded {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cluster.yaml");
        std::fs::write(&file, text).unwrap();
        let mut opts = SimulateOptions {
            files: vec![file],
            ..SimulateOptions::default()
        };
        opts.scheduler.framework.native = true;
        load(runtime(), &opts).unwrap()
    }

    /// Runs the documents of `text` natively and answers the scheduler and timeline.
    fn timeline_of(text: &str) -> (Scheduler, Timeline) {
        let (mut scheduler, docs) = loaded(text);
        let mut timeline = Timeline::default();
        for doc in docs {
            timeline.apply(&mut scheduler, doc).unwrap();
            scheduler.run_until_idle();
        }
        (scheduler, timeline)
    }

    /// A generated cluster for `explain_is_the_cycle_observed`: nodes in three
    /// zones, some tainted, some full of low-priority pods; pending pods in groups
    /// of identical replicas (so that the cycle batches), some with selectors,
    /// tolerations, anti-affinity, spread constraints, and a priority high enough to
    /// preempt (so that later cycles count nominated pods).
    fn generated_cluster(seed: u64) -> String {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut out = String::new();
        let nodes = rng.random_range(2..12);
        for n in 0..nodes {
            let taint = if rng.random_range(0..5) == 0 {
                "\n  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]"
            } else {
                ""
            };
            out.push_str(&format!(
                "apiVersion: v1\nkind: Node\nmetadata: {{name: n{n}, labels: {{topology.kubernetes.io/zone: z{}, kubernetes.io/hostname: n{n}, disk: {}}}}}\nspec:{}\nstatus: {{allocatable: {{cpu: '{}', memory: {}Gi, pods: '110'}}}}\n---\n",
                n % 3,
                ["ssd", "hdd"][rng.random_range(0..2)],
                if taint.is_empty() { " {}" } else { taint },
                rng.random_range(1..9),
                rng.random_range(2..17),
            ));
            for p in 0..rng.random_range(0..4) {
                out.push_str(&format!(
                    "apiVersion: v1\nkind: Pod\nmetadata: {{name: old-{n}-{p}, labels: {{app: a{}}}}}\nspec:\n  nodeName: n{n}\n  priority: {}\n  containers: [{{name: c, resources: {{requests: {{cpu: {}m, memory: {}Mi}}}}}}]\n---\n",
                    rng.random_range(0..4),
                    rng.random_range(0..3),
                    rng.random_range(1..8) * 250,
                    rng.random_range(1..8) * 512,
                ));
            }
        }
        for g in 0..rng.random_range(1..5) {
            let mut spec = String::new();
            match rng.random_range(0..6) {
                0 => spec.push_str(&format!(
                    "  nodeSelector: {{topology.kubernetes.io/zone: z{}}}\n",
                    rng.random_range(0..3)
                )),
                1 => spec.push_str(
                    "  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n",
                ),
                2 => spec.push_str(&format!(
                    "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - labelSelector: {{matchLabels: {{app: g{g}}}}}\n        topologyKey: kubernetes.io/hostname\n"
                )),
                3 => spec.push_str(&format!(
                    "  topologySpreadConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: {}\n    labelSelector: {{matchLabels: {{app: g{g}}}}}\n",
                    ["DoNotSchedule", "ScheduleAnyway"][rng.random_range(0..2)]
                )),
                4 => spec.push_str(
                    "  affinity:\n    nodeAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n      - {weight: 50, preference: {matchExpressions: [{key: disk, operator: In, values: [ssd]}]}}\n",
                ),
                _ => {}
            }
            let priority = [0, 0, 10, 100][rng.random_range(0..4)];
            let (cpu, memory) = (rng.random_range(1..12) * 250, rng.random_range(1..12) * 512);
            for r in 0..rng.random_range(1..6) {
                out.push_str(&format!(
                    "apiVersion: v1\nkind: Pod\nmetadata: {{name: g{g}-{r}, labels: {{app: g{g}}}}}\nspec:\n  priority: {priority}\n{spec}  containers: [{{name: c, resources: {{requests: {{cpu: {cpu}m, memory: {memory}Mi}}}}}}]\n---\n"
                ));
            }
        }
        out
    }

    /// What `explain` tells of a pod is what the cycle decides: on generated
    /// clusters, before each cycle of the scheduler's own loop (batching on,
    /// preemption nominating pods), the explanation is compared with the attempt's
    /// own record (each node's first rejection, the feasible nodes, every plugin's
    /// normalized score, the totals, the chosen node), and then with the cycle the
    /// loop runs (the node it binds is one the explanation ranks best; a pod that
    /// fits nowhere gets the attempt's message).
    #[test]
    fn explain_is_the_cycle_observed() {
        use crate::framework::{ExplainOptions, ScheduleOutcome};
        let (mut cycles, mut placed, mut batched, mut unschedulable, mut nominated) =
            (0, 0, 0, 0, 0);
        for seed in 0..40u64 {
            let text = generated_cluster(seed);
            let (mut scheduler, docs) = loaded(&text);
            let mut timeline = Timeline::default();
            for doc in docs {
                timeline.apply(&mut scheduler, doc).unwrap();
            }
            let mut steps = 0;
            while let Some(qp) = scheduler.queue().peek() {
                steps += 1;
                assert!(steps < 200, "seed {seed}: the queue does not drain");
                let pod = qp.pod.clone();
                let case = format!("seed {seed}, pod {}:\n{text}", pod.key());
                nominated += usize::from(!scheduler.nominated().is_empty());
                let e = scheduler
                    .explain(&pod, &ExplainOptions::default())
                    .unwrap_or_else(|err| panic!("{case}: explain: {err}"));
                let again = scheduler.explain(&pod, &ExplainOptions::default()).unwrap();
                assert_eq!(e, again, "{case}: explain changed what it explains");
                let (fw, outcome, rec) = scheduler.attempt_recorded(&pod).unwrap();
                let node = |name: &str| e.nodes.iter().find(|n| n.node == name).unwrap();
                for (&slot, first) in &rec.filtered {
                    let n = node(&scheduler.node_at(slot));
                    let shown = n.filters.iter().find(|f| f.code != "Success");
                    assert_eq!(
                        shown.map(|f| f.plugin.as_str()),
                        first.map(|i| fw.plugin_name(i)),
                        "{case}: first rejection on {}",
                        n.node
                    );
                    assert_eq!(n.feasible, first.is_none(), "{case}: {}", n.node);
                }
                if rec.scored {
                    for (k, &slot) in rec.feasible.iter().enumerate() {
                        let n = node(&scheduler.node_at(slot));
                        for (&i, scores) in &rec.scores {
                            let shown = n
                                .scores
                                .iter()
                                .find(|s| s.plugin == fw.plugin_name(i))
                                .map(|s| s.normalized);
                            assert_eq!(shown, Some(scores[k]), "{case}: score on {}", n.node);
                        }
                        assert_eq!(n.total, rec.totals[k], "{case}: total on {}", n.node);
                    }
                }
                let picked = rec.picked.map(|s| scheduler.node_at(s));
                assert_eq!(e.chosen, picked, "{case}: chosen node");
                let fit = match &outcome {
                    ScheduleOutcome::Scheduled { node, .. } => {
                        assert_eq!(e.chosen.as_ref(), Some(node), "{case}");
                        None
                    }
                    ScheduleOutcome::Unschedulable(fit, _) => {
                        assert_eq!(e.chosen, None, "{case}");
                        Some(fit.to_string())
                    }
                    ScheduleOutcome::Error(err) => panic!("{case}: {err}"),
                };

                // The loop's own cycle of the pod (it may batch).
                let attempts = scheduler.outcome(&pod.uid).map_or(0, |o| o.attempts);
                assert!(scheduler.schedule_one());
                scheduler.finish_bindings();
                cycles += 1;
                let out = scheduler.outcome(&pod.uid).unwrap();
                assert_eq!(out.attempts, attempts + 1, "{case}: another pod was popped");
                match (&out.node, fit) {
                    (Some(bound), None) => {
                        placed += 1;
                        batched += usize::from(out.batched);
                        let best = e
                            .nodes
                            .iter()
                            .filter(|n| n.feasible && !n.scores.is_empty())
                            .map(|n| n.total)
                            .max();
                        let bound_node = node(bound);
                        assert!(bound_node.feasible, "{case}: bound to {bound}");
                        if !bound_node.scores.is_empty() {
                            assert_eq!(Some(bound_node.total), best, "{case}: bound to {bound}");
                        } else {
                            assert_eq!(e.chosen.as_ref(), Some(bound), "{case}");
                        }
                    }
                    (None, Some(message)) => {
                        unschedulable += 1;
                        assert!(
                            out.message.starts_with(&message),
                            "{case}: {} / {message}",
                            out.message
                        );
                    }
                    (node, fit) => panic!("{case}: bound to {node:?}, the attempt said {fit:?}"),
                }
            }
        }
        eprintln!(
            "{cycles} cycles: {placed} placed ({batched} from a batch), {unschedulable} not, {nominated} with nominated pods"
        );
        // The generated cases reach what the comparison is about.
        assert!(cycles > 100, "{cycles} cycles");
        assert!(
            placed > 50 && unschedulable > 10,
            "{placed} placed, {unschedulable} not"
        );
        assert!(batched > 0, "no cycle batched");
        assert!(nominated > 0, "no cycle counted a nominated pod");
    }

    const TEMPLATE: &str = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: one-gpu}\nspec:\n  metadata: {annotations: {team: ml}}\n  spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}\n";
    const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer}\nspec:\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}, {name: nic, resourceClaimName: shared-nic}]\n  containers: [{name: c}]\n";

    #[test]
    fn the_embedded_cluster_makes_a_pod_s_claims_from_templates() {
        let (scheduler, timeline) = timeline_of(&format!("{TEMPLATE}---\n{POD}"));
        let claims = scheduler.dra().claims();
        assert_eq!(claims.len(), 1, "{claims:?}");
        let claim = &claims[0];
        assert!(
            claim.name.starts_with("trainer-gpu-") && claim.name.len() == "trainer-gpu-".len() + 5
        );
        assert_eq!(claim.annotations["team"], "ml");
        assert_eq!(
            claim.annotations["resource.kubernetes.io/pod-claim-name"],
            "gpu"
        );
        assert_eq!(claim.spec.requests[0].name(), "gpu");
        let uid = &timeline.pods["default/trainer"];
        assert!(claim.is_for_pod(uid));
        let pod = scheduler.pod(uid).unwrap();
        assert_eq!(
            pod.resource_claim_statuses,
            [berth_sdk::PodResourceClaimStatus {
                name: "gpu".into(),
                resource_claim_name: Some(claim.name.clone()),
            }]
        );
        assert!(timeline.awaiting_templates.is_empty());
    }

    #[test]
    fn a_pod_waits_for_its_template_and_its_claims_go_with_it() {
        let deleted_pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer, annotations: {berth.dev/simulate: delete}}\n";
        // The template comes after the pod: the claim is made then.
        let (scheduler, timeline) = timeline_of(&format!("{POD}---\n{TEMPLATE}"));
        assert_eq!(scheduler.dra().claims().len(), 1);
        let uid = &timeline.pods["default/trainer"];
        assert_eq!(scheduler.pod(uid).unwrap().resource_claim_statuses.len(), 1);
        // Without the template the pod waits, with no claim; applied again, it does
        // not get a second claim; deleted, its claims are deleted with it.
        let (scheduler, timeline) = timeline_of(POD);
        assert!(scheduler.dra().claims().is_empty());
        assert!(timeline.awaiting_templates.contains_key("default/trainer"));
        let (scheduler, _) = timeline_of(&format!("{TEMPLATE}---\n{POD}---\n{POD}"));
        assert_eq!(scheduler.dra().claims().len(), 1);
        let (scheduler, timeline) = timeline_of(&format!("{TEMPLATE}---\n{POD}---\n{deleted_pod}"));
        assert!(scheduler.dra().claims().is_empty());
        assert!(timeline.pods.is_empty());
    }

    #[test]
    fn a_deleted_pod_s_last_shared_claim_gives_its_device_back() {
        // One GPU in the cluster, first given to the claim `shared` of `holder`;
        // `waiter`'s own claim cannot have it until `holder` is gone.
        let cluster = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi}}\n---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\nspec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpus}\nspec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: shared}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: holder}\nspec: {resourceClaims: [{name: gpu, resourceClaimName: shared}], containers: [{name: c}]}\n---\n";
        let waiter = "apiVersion: v1\nkind: Pod\nmetadata: {name: waiter}\nspec: {resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}], containers: [{name: c}]}\n";
        let gone = "apiVersion: v1\nkind: Pod\nmetadata: {name: holder, annotations: {berth.dev/simulate: delete}}\n";
        let node_of = |s: &Scheduler, t: &Timeline, pod: &str| {
            s.pod(&t.pods[&format!("default/{pod}")])
                .map(|p| p.node_name.clone())
        };

        let (scheduler, timeline) = timeline_of(&format!("{cluster}{TEMPLATE}---\n{waiter}"));
        assert_eq!(node_of(&scheduler, &timeline, "holder").unwrap(), "n1");
        assert_eq!(node_of(&scheduler, &timeline, "waiter").unwrap(), "");
        let shared = scheduler.dra().claim("default", "shared").unwrap();
        assert!(shared.status.allocation.is_some());

        let (scheduler, timeline) =
            timeline_of(&format!("{cluster}{TEMPLATE}---\n{waiter}---\n{gone}"));
        // Its last consumer gone, the claim is deallocated, as kube-controller-manager's
        // resourceclaim controller does; the waiter, retried on the claim's change,
        // gets the GPU.
        let shared = scheduler.dra().claim("default", "shared").unwrap();
        assert!(shared.status.reserved_for.is_empty(), "{shared:?}");
        assert!(shared.status.allocation.is_none(), "{shared:?}");
        assert_eq!(node_of(&scheduler, &timeline, "waiter").unwrap(), "n1");
        let made = scheduler
            .dra()
            .claims()
            .into_iter()
            .find(|c| c.name.starts_with("waiter-gpu-"))
            .unwrap();
        let result = &made.status.allocation.as_ref().unwrap().devices[0];
        assert_eq!(result.device, "gpu-0");
    }

    #[test]
    fn a_claim_allocated_on_a_gone_node_is_deallocated_and_allocated_again() {
        // `stale` was allocated a GPU of node `old`, which is gone; `n1` has the only
        // GPU now. PostFilter deallocates the claim, its update brings the pod back,
        // and the next attempt allocates n1's GPU.
        let text = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi}}\n---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\nspec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpus}\nspec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: stale, resourceVersion: '7'}\nspec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}\nstatus:\n  allocation:\n    devices: {results: [{request: gpu, driver: gpu.example.com, pool: old, device: gpu-0}]}\n    nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [old]}]}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {resourceClaims: [{name: gpu, resourceClaimName: stale}], containers: [{name: c}]}\n";
        let (scheduler, timeline) = timeline_of(text);
        let pod = scheduler.pod(&timeline.pods["default/p"]).unwrap();
        assert_eq!(pod.node_name, "n1");
        let claim = scheduler.dra().claim("default", "stale").unwrap();
        let allocation = claim.status.allocation.as_ref().unwrap();
        assert_eq!(allocation.devices[0].pool, "n1");
        assert_eq!(allocation.devices[0].device, "gpu-0");
        assert!(claim.is_reserved_for(&pod.uid));
        // Written twice: the deallocation, then the allocation at PreBind.
        assert_eq!(claim.resource_version, "9");
    }

    #[test]
    fn explain_shows_the_devices_reserve_would_assume_and_leaves_nothing_assumed() {
        let waiter = "apiVersion: v1\nkind: Pod\nmetadata: {name: waiter}\nspec: {resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}], containers: [{name: c}]}\n";
        let cluster = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi}}\n---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\nspec: {selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpus}\nspec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}\n---\n";
        let (mut scheduler, docs) = loaded(&format!("{cluster}{TEMPLATE}---\n{waiter}"));
        let mut timeline = Timeline::default();
        for doc in docs {
            timeline.apply(&mut scheduler, doc).unwrap();
        }
        let uid = timeline.pods["default/waiter"].clone();
        let pod = scheduler.pod(&uid).unwrap().clone();
        let e = scheduler
            .explain(&pod, &crate::framework::ExplainOptions::default())
            .unwrap();
        let devices = e.devices.expect("a pod with claims that fits has devices");
        assert_eq!(devices.node, "n1");
        assert_eq!(devices.reserve_failure, None);
        assert_eq!(devices.devices.len(), 1);
        assert_eq!(devices.devices[0].request, "gpu");
        assert_eq!(devices.devices[0].device, "gpu.example.com/n1/gpu-0");
        assert_eq!(devices.devices[0].reserved_for, ["waiter"]);
        assert!(devices.devices[0].claim.starts_with("waiter-gpu-"));
        // Unreserve ran: the claim is as the cluster has it, nothing assumed.
        let claim = scheduler
            .dra()
            .claim("default", &devices.devices[0].claim)
            .unwrap();
        assert!(claim.status.allocation.is_none());
        assert!(claim.status.reserved_for.is_empty());
        assert!(!scheduler.dra().allocation_pending("default", &claim.name));
        // And the pod is then scheduled onto the device the explanation showed.
        scheduler.run_until_idle();
        assert_eq!(scheduler.pod(&uid).unwrap().node_name, "n1");
    }

    #[test]
    fn a_scheduling_workload_s_steps_name_it_by_its_kind() {
        let docs = load_str(
            "w.yaml",
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {name: train, namespace: ml}\nspec:\n  podGroupTemplates: [{name: workers, schedulingPolicy: {basic: {}}}]\n---\napiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\nmetadata: {name: train, namespace: ml, annotations: {berth.dev/simulate: delete}}\n",
        )
        .unwrap();
        let timeline = Timeline::default();
        let steps: Vec<(String, String, String)> = docs
            .iter()
            .map(|d| {
                let (_, action, kind, object) = describe(d, &timeline);
                (action, kind, object)
            })
            .collect();
        let step = |a: &str, k: &str, o: &str| (a.to_owned(), k.to_owned(), o.to_owned());
        assert_eq!(
            steps,
            [
                step("apply", "Workload", "ml/train"),
                step("delete", "Workload", "ml/train"),
            ]
        );
    }

    /// Runs the documents of `text` natively and answers the scheduler, the timeline
    /// and the embedded cluster.
    fn run_natively(text: &str) -> (Scheduler, Timeline, Arc<MemoryCluster>) {
        let Loaded {
            mut scheduler,
            cluster,
            docs,
        } = loaded_natively(text);
        let mut timeline = Timeline::default();
        for doc in docs {
            timeline.apply(&mut scheduler, doc).unwrap();
            scheduler.run_until_idle();
        }
        (scheduler, timeline, cluster)
    }

    const EXTENDED: &str = include_str!("../../examples/dra/extended-resources.yaml");

    #[test]
    fn extended_resources_backed_by_dra_get_devices_through_a_claim_made_for_the_pod() {
        let (scheduler, timeline, cluster) = run_natively(EXTENDED);
        let pod = |name: &str| {
            scheduler
                .pod(&timeline.pods[&format!("default/{name}")])
                .unwrap()
        };
        // Two GPUs only on dra-node, as devices; one on dp-node, by its device plugin.
        assert_eq!(pod("trainer").node_name, "dra-node");
        assert_eq!(pod("inference").node_name, "dp-node");
        assert_eq!(pod("batch").node_name, "");
        assert_eq!(pod("fpga-job").node_name, "fpga-node");

        let trainer = pod("trainer");
        let claim = scheduler
            .dra()
            .extended_claim("default", &trainer.uid)
            .unwrap();
        assert!(
            claim.name.starts_with("trainer-extended-resources-"),
            "{claim:?}"
        );
        assert_eq!(
            claim.annotations["resource.kubernetes.io/extended-resource-claim"],
            "true"
        );
        assert!(claim.is_for_pod(&trainer.uid) && claim.is_reserved_for(&trainer.uid));
        let allocation = claim.status.allocation.as_ref().unwrap();
        let mut devices: Vec<&str> = allocation
            .devices
            .iter()
            .map(|d| d.device.as_str())
            .collect();
        devices.sort();
        assert_eq!(devices, ["gpu-0", "gpu-1"]);
        assert!(
            allocation
                .devices
                .iter()
                .all(|d| d.request == "container-0-request-1")
        );
        // The pod's status names the claim and which request serves its container.
        let statuses = cluster.extended_resource_claim_statuses();
        let status = &statuses[&trainer.uid];
        assert_eq!(status.resource_claim_name, claim.name);
        assert_eq!(
            status.request_mappings,
            [berth_sdk::ContainerExtendedResourceRequest {
                container_name: "trainer".into(),
                resource_name: "example.com/gpu".into(),
                request_name: "container-0-request-1".into(),
            }]
        );
        // The device plugin's GPU needs no claim; the implicit resource gets one.
        assert!(
            scheduler
                .dra()
                .extended_claim("default", &pod("inference").uid)
                .is_none()
        );
        assert!(!statuses.contains_key(&pod("inference").uid));
        assert!(
            scheduler
                .dra()
                .extended_claim("default", &pod("fpga-job").uid)
                .is_some()
        );
        // Nothing is left assumed under the name of the cycle's claim.
        assert!(
            scheduler
                .dra()
                .claims()
                .iter()
                .all(|c| !berth_sdk::dra::is_in_memory_extended_claim_name(&c.name))
        );
    }

    #[test]
    fn a_gone_pod_s_extended_resource_claim_is_deleted_and_its_devices_go_to_the_next() {
        let gone = "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer, namespace: default, annotations: {berth.dev/simulate: delete}}\n";
        let (scheduler, timeline, _) = run_natively(&format!("{EXTENDED}---\n{gone}"));
        let batch = scheduler.pod(&timeline.pods["default/batch"]).unwrap();
        assert_eq!(batch.node_name, "dra-node");
        let claims: Vec<String> = scheduler
            .dra()
            .claims()
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert!(
            !claims.iter().any(|c| c.starts_with("trainer-")),
            "{claims:?}"
        );
        assert!(
            claims
                .iter()
                .any(|c| c.starts_with("batch-extended-resources-")),
            "{claims:?}"
        );
    }

    #[test]
    fn a_claim_an_earlier_attempt_made_for_the_pod_s_extended_resources_is_deleted_first() {
        // The claim was made for `p` by an attempt whose binding failed: its requests
        // were for the node that attempt chose. PostFilter deletes it, and the next
        // attempt makes the pod a new one.
        let text = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', memory: 8Gi}}\n---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\nspec: {extendedResourceName: example.com/gpu, selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpus}\nspec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, generation: 1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: p-extended-resources-old\n  annotations: {resource.kubernetes.io/extended-resource-claim: 'true'}\n  ownerReferences: [{apiVersion: v1, kind: Pod, name: p, uid: 4e1f0c2a-0000-4000-8000-000000000001, controller: true}]\nspec: {devices: {requests: [{name: container-0-request-0, exactly: {deviceClassName: gpu.example.com}}]}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, uid: 4e1f0c2a-0000-4000-8000-000000000001}\nspec: {containers: [{name: c, resources: {requests: {example.com/gpu: '1'}, limits: {example.com/gpu: '1'}}}]}\n";
        let (mut scheduler, timeline, _) = run_natively(text);
        let uid = timeline.pods["default/p"].clone();
        assert!(
            scheduler
                .dra()
                .claim("default", "p-extended-resources-old")
                .is_none()
        );
        assert_eq!(scheduler.pod(&uid).unwrap().node_name, "");
        // As upstream, no event registered brings the pod back (a claim's deletion is
        // none): the unschedulable pods' flush does.
        scheduler.flush_unschedulable_leftover(std::time::Duration::from_secs(3600));
        scheduler.run_until_idle();
        let pod = scheduler.pod(&uid).unwrap();
        assert_eq!(pod.node_name, "n1");
        let claim = scheduler.dra().extended_claim("default", &pod.uid).unwrap();
        assert_ne!(claim.name, "p-extended-resources-old");
        assert_eq!(
            claim.status.allocation.as_ref().unwrap().devices[0].device,
            "gpu-0"
        );
        let outcome = scheduler.outcome(&pod.uid).unwrap();
        assert_eq!(outcome.attempts, 2, "{outcome:?}");
    }
}
