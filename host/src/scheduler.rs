//! The scheduling loop: pop a pod, schedule it against a fresh snapshot, assume it,
//! run Reserve and Permit, bind it, and account for every outcome so no pod is lost.

use crate::cache::{Cache, Snapshot};
use crate::cluster::{Binder, Namespaces};
use crate::config::{Configuration, ModuleSource};
use crate::framework::{
    ExplainOptions, Explanation, Framework, FrameworkOptions, ScheduleOutcome, registry,
};
use crate::queue::{QueuedPod, SchedulingQueue};
use crate::wasm::{Runtime, module::pod_to_wit};
use berth_sdk::{Node, Pod};
use std::collections::HashMap;
use std::sync::Arc;

/// What happened to a pod this scheduler is responsible for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodOutcome {
    /// `namespace`.
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// The node it was bound to, if any.
    pub node: Option<String>,
    /// The event message: "Successfully assigned ..." or why it is pending.
    pub message: String,
    /// Scheduling attempts so far.
    pub attempts: u32,
}

/// The scheduler: its profiles, the cache, the queue.
pub struct Scheduler {
    frameworks: Vec<Framework>,
    cache: Cache,
    queue: SchedulingQueue,
    snapshot: Snapshot,
    outcomes: HashMap<String, PodOutcome>,
    namespaces: Namespaces,
}

impl Scheduler {
    /// Builds a scheduler for a configuration; `file` names the configuration in
    /// errors. Modules are loaded (and compiled or taken from the cache) here.
    pub fn new(
        runtime: &Arc<Runtime>,
        config: &Configuration,
        file: &str,
        options: &FrameworkOptions,
        binder: Arc<dyn Binder>,
    ) -> anyhow::Result<Self> {
        let profiles = config.resolve_profiles(file)?;
        let mut names: Vec<String> = Vec::new();
        for p in &profiles {
            for n in p.plugin_names() {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        let modules = registry::load_modules(runtime, &config.modules, &names)?;
        let mut options = options.clone();
        if let Some(p) = config.parallelism {
            options.parallelism = p;
        }
        if let Some(p) = config.percentage_of_nodes_to_score {
            options.percentage_of_nodes_to_score = p;
        }
        let namespaces = Namespaces::new();
        let frameworks = profiles
            .iter()
            .map(|p| Framework::new(p, &modules, &options, binder.clone(), &namespaces))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scheduler {
            frameworks,
            cache: Cache::new(),
            queue: SchedulingQueue::new(),
            snapshot: Snapshot::default(),
            outcomes: HashMap::new(),
            namespaces,
        })
    }

    /// The modules named in a configuration, for display.
    pub fn module_sources(config: &Configuration) -> &[ModuleSource] {
        &config.modules
    }

    /// The cache (read-only).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    fn framework_for(&self, scheduler_name: &str) -> Option<&Framework> {
        self.frameworks
            .iter()
            .find(|f| f.scheduler_name() == scheduler_name)
    }

    /// Whether one of the profiles serves this scheduler name.
    pub fn serves(&self, scheduler_name: &str) -> bool {
        self.framework_for(scheduler_name).is_some()
    }

    /// A namespace appeared or changed (its labels feed namespace selectors).
    pub fn add_or_update_namespace(&mut self, name: &str, labels: berth_sdk::Labels) {
        self.namespaces.set(name, labels);
        self.queue.move_all_to_active();
    }

    /// A node appeared or changed.
    pub fn add_or_update_node(&mut self, node: Node) {
        self.cache.add_or_update_node(node);
        // A new or changed node may fit pods that fit nowhere before.
        self.queue.move_all_to_active();
    }

    /// A pod appeared: a bound pod is counted on its node; a pending pod for one of
    /// the profiles is queued; others are ignored. Errors if a plugin fails on it.
    pub fn add_pod(&mut self, pod: Pod) -> anyhow::Result<()> {
        if !pod.node_name.is_empty() {
            self.cache.add_pod(&pod)?;
            return Ok(());
        }
        let Some(fw) = self.framework_for(&pod.scheduler_name) else {
            return Ok(());
        };
        let wpod = pod_to_wit(&pod);
        let key = fw.sort_key(&wpod)?;
        if let Some((plugin, status)) = fw.pre_enqueue(&wpod)? {
            self.outcomes.insert(
                pod.uid.clone(),
                PodOutcome {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                    node: None,
                    message: format!("waiting at PreEnqueue: {plugin}: {}", status.message()),
                    attempts: 0,
                },
            );
            return Ok(());
        }
        self.outcomes.insert(
            pod.uid.clone(),
            PodOutcome {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                node: None,
                message: "pending".into(),
                attempts: 0,
            },
        );
        self.queue.add(pod, key);
        Ok(())
    }

    /// The outcome of a pod by UID.
    pub fn outcome(&self, uid: &str) -> Option<&PodOutcome> {
        self.outcomes.get(uid)
    }

    /// Explains how the pod's profile sees it on every node (see
    /// [`Framework::explain`]).
    pub fn explain(&mut self, pod: &Pod, options: &ExplainOptions) -> anyhow::Result<Explanation> {
        let fw = self
            .frameworks
            .iter()
            .find(|f| f.scheduler_name() == pod.scheduler_name)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no profile serves scheduler name {:?} of pod {}",
                    pod.scheduler_name,
                    pod.key()
                )
            })?;
        self.cache.update_snapshot(&mut self.snapshot);
        Ok(fw.explain(&pod_to_wit(pod), &self.snapshot, options)?)
    }

    /// Schedules until activeQ is empty. Returns how many attempts were made.
    pub fn run_until_idle(&mut self) -> usize {
        let mut attempts = 0;
        while self.schedule_one() {
            attempts += 1;
        }
        attempts
    }

    /// Pops one pod and runs a scheduling attempt and its binding cycle; false when
    /// activeQ is empty.
    pub fn schedule_one(&mut self) -> bool {
        let Some(qp) = self.queue.pop() else {
            return false;
        };
        let name = &qp.pod.scheduler_name;
        let Some(fw) = self.frameworks.iter().find(|f| f.scheduler_name() == name) else {
            // The profile is gone; nothing can schedule it.
            return true;
        };
        self.cache.update_snapshot(&mut self.snapshot);
        let wpod = pod_to_wit(&qp.pod);
        let result = match fw.schedule_pod(&wpod, &self.snapshot) {
            ScheduleOutcome::Scheduled { node, state, .. } => {
                let mut assumed = qp.pod.clone();
                assumed.node_name = node.clone();
                let wassumed = pod_to_wit(&assumed);
                match self.cache.assume_pod(&assumed) {
                    Err(e) => Err(format!("cannot assume pod: {e}")),
                    Ok(()) => {
                        let r = fw
                            .reserve(&state, &wassumed, &node)
                            .and_then(|()| fw.permit(&state, &wassumed, &node))
                            .and_then(|()| fw.bind(&state, &wassumed, &node));
                        match r {
                            Ok(()) => {
                                // The cluster confirms the binding (an informer event
                                // in a real cluster).
                                let _ = self.cache.finish_binding(&assumed.uid);
                                let _ = self.cache.add_pod(&assumed);
                                Ok(node)
                            }
                            Err(e) => {
                                fw.unreserve(&state, &wassumed, &node);
                                let _ = self.cache.forget_pod(&assumed.uid);
                                Err(e.to_string())
                            }
                        }
                    }
                }
            }
            ScheduleOutcome::Unschedulable(fit) => Err(fit.to_string()),
            ScheduleOutcome::Error(e) => Err(e.to_string()),
        };
        self.record(qp, result);
        true
    }

    fn record(&mut self, mut qp: QueuedPod, result: Result<String, String>) {
        let outcome = PodOutcome {
            namespace: qp.pod.namespace.clone(),
            name: qp.pod.name.clone(),
            node: result.as_ref().ok().cloned(),
            message: match &result {
                Ok(node) => format!("Successfully assigned {} to {node}", qp.pod.key()),
                Err(m) => m.clone(),
            },
            attempts: qp.attempts,
        };
        self.outcomes.insert(qp.pod.uid.clone(), outcome);
        if let Err(m) = result {
            qp.last_failure = Some(m);
            self.queue.add_unschedulable(qp);
        }
    }
}
