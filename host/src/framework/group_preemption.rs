//! PodGroupPostFilter (kube-scheduler's workload-aware preemption) and the what-if it
//! may ask the host for: the whole cluster with pods removed and added back, the pod
//! group's cycle run on what is left, and its proposed assignments checked again.
//!
//! The what-if needs the scheduler itself (its cache, its snapshot, the profile's
//! plugins on every worker), which the plugin's call cannot borrow. So the call runs
//! on a thread of its own, on an instance set kept for it, while the scheduler's
//! thread answers the what-if's questions one at a time (`serve`), then undoes
//! whatever the what-if left removed. The plugin's end of the what-if is lent to
//! that thread only ([`lend`]): its host calls (`workload.simulate-group` for a
//! component, the SDK's `simulate_group` for a native twin) find it there, and a
//! plugin called on any other thread, or after its call returned, is told no.

use super::{Framework, InstanceSet, PluginError, lock};
use crate::cache::Snapshot;
use crate::plugin::CycleState;
use berth_sdk::{
    Code, ExtensionPoint, PodDisruptionBudget, PodGroup, PodGroupPostFilterResult,
    ProposedAssignment, Status,
};
use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};

/// A question of the what-if, asked of the scheduler's thread.
#[derive(Debug)]
pub enum GroupAsk {
    /// Remove a pod (by UID) from the cluster of the what-if.
    Remove(String),
    /// Add back a pod `Remove` removed.
    Add(String),
    /// Run the group's cycle on the what-if.
    Schedule,
    /// Check that each member still fits its proposed node, in order.
    Fits(Vec<ProposedAssignment>),
}

/// The scheduler's answer.
#[derive(Debug)]
pub enum GroupAnswer {
    /// To `Remove`, `Add` and `Fits`.
    Status(Status),
    /// To `Schedule`: the node of each member placed, or why the group is not
    /// feasible.
    Placed(Result<Vec<ProposedAssignment>, Status>),
}

/// The plugin's end of the what-if.
struct Lent {
    asks: Sender<GroupAsk>,
    answers: Receiver<GroupAnswer>,
    budgets: Vec<PodDisruptionBudget>,
}

thread_local! {
    static LENT: RefCell<Option<Lent>> = const { RefCell::new(None) };
}

/// A component's handle on the what-if (the `group-simulation` resource): the
/// what-if itself is the one lent to the calling thread.
#[derive(Debug)]
pub struct GroupSimulationHandle;

/// Why a what-if question got no answer.
fn over() -> Status {
    Status::error("the what-if is over: only a PodGroupPostFilter call may ask it")
}

/// Whether a what-if is lent to this thread (a PodGroupPostFilter call is under way
/// on it).
pub(crate) fn lent() -> bool {
    LENT.with(|l| l.borrow().is_some())
}

/// Asks the what-if lent to this thread; an error when none is.
pub(crate) fn ask(question: GroupAsk) -> Result<GroupAnswer, Status> {
    LENT.with(|l| {
        let l = l.borrow();
        let lent = l.as_ref().ok_or_else(over)?;
        lent.asks.send(question).map_err(|_| over())?;
        lent.answers.recv().map_err(|_| over())
    })
}

/// The PodDisruptionBudgets of the what-if lent to this thread.
pub(crate) fn budgets() -> Vec<PodDisruptionBudget> {
    LENT.with(|l| {
        l.borrow()
            .as_ref()
            .map(|lent| lent.budgets.clone())
            .unwrap_or_default()
    })
}

/// A status answer, or the status that says the answer was of the wrong kind.
pub(crate) fn status_of(a: Result<GroupAnswer, Status>) -> Status {
    match a {
        Ok(GroupAnswer::Status(s)) => s,
        Ok(GroupAnswer::Placed(_)) => Status::error("the what-if answered out of turn"),
        Err(s) => s,
    }
}

/// A schedule answer, likewise.
pub(crate) fn placed_of(a: Result<GroupAnswer, Status>) -> Result<Vec<ProposedAssignment>, Status> {
    match a {
        Ok(GroupAnswer::Placed(p)) => p,
        Ok(GroupAnswer::Status(_)) => Err(Status::error("the what-if answered out of turn")),
        Err(s) => Err(s),
    }
}

/// Lends the what-if to this thread while `f` runs.
fn lend<R>(lent: Lent, f: impl FnOnce() -> R) -> R {
    struct Take;
    impl Drop for Take {
        fn drop(&mut self) {
            LENT.with(|l| l.borrow_mut().take());
        }
    }
    LENT.with(|l| *l.borrow_mut() = Some(lent));
    let _take = Take;
    f()
}

/// What a PodGroupPostFilter plugin decided, for the scheduler to carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPostFilterVerdict {
    /// The plugin that answered last.
    pub plugin: String,
    /// Its status: Success when it found room.
    pub status: Status,
    /// The node each member is nominated to.
    pub nominations: Vec<ProposedAssignment>,
    /// The pods to evict (UIDs).
    pub victims: Vec<String>,
}

impl Framework {
    /// Whether the profile has PodGroupPostFilter plugins.
    pub fn has_pod_group_post_filter(&self) -> bool {
        !self.at(ExtensionPoint::PodGroupPostFilter).is_empty()
    }

    /// Runs the profile's PodGroupPostFilter plugins on `group` (its
    /// `unscheduled_pods` the members its cycle tried) in order until one answers
    /// Success or an error (upstream's `RunPodGroupPostFilterPlugins`); `None` when
    /// the profile has none. Each runs on a thread of its own while this thread
    /// answers its what-if through `serve`. `snapshot` is the plugins' copy (the
    /// scheduler changes its own while it answers). A plugin's Error or trap fails
    /// the run, naming it.
    pub fn pod_group_post_filter(
        &self,
        state: &CycleState,
        group: &PodGroup,
        snapshot: Snapshot,
        serve: &mut dyn FnMut(GroupAsk) -> GroupAnswer,
    ) -> Result<Option<GroupPostFilterVerdict>, PluginError> {
        let points = self.at(ExtensionPoint::PodGroupPostFilter);
        if points.is_empty() {
            return Ok(None);
        }
        let mut timer = self.time_point("PodGroupPostFilter");
        let budgets = self.budgets.list();
        let (ask_tx, ask_rx) = channel::<GroupAsk>();
        let (answer_tx, answer_rx) = channel::<GroupAnswer>();
        let answers = Mutex::new(Some(answer_rx));
        let run = std::thread::scope(|scope| {
            let plugin_thread = std::thread::Builder::new()
                .name("berth-podgroup-postfilter".into())
                .spawn_scoped(scope, || {
                    let ask_tx = ask_tx;
                    let answers = lock(&answers).take().expect("taken once");
                    self.run_pod_group_post_filter(
                        state, group, &snapshot, budgets, ask_tx, answers,
                    )
                });
            let plugin_thread = match plugin_thread {
                Ok(t) => t,
                Err(e) => {
                    return Err(PluginError {
                        plugin: "PodGroupPostFilter".into(),
                        message: format!("cannot start the call's thread: {e}"),
                    });
                }
            };
            // Every question is answered until the plugins are done (their end of
            // the channel dropped).
            while let Ok(question) = ask_rx.recv() {
                if answer_tx.send(serve(question)).is_err() {
                    break;
                }
            }
            plugin_thread.join().unwrap_or_else(|_| {
                Err(PluginError {
                    plugin: "PodGroupPostFilter".into(),
                    message: "the call's thread panicked".into(),
                })
            })
        });
        match &run {
            Ok(Some(v)) => timer.status = v.status.code.as_str(),
            Ok(None) => {}
            Err(_) => timer.status = "Error",
        }
        run
    }

    /// The plugins' side of [`Framework::pod_group_post_filter`], on their thread.
    fn run_pod_group_post_filter(
        &self,
        state: &CycleState,
        group: &PodGroup,
        snapshot: &Snapshot,
        budgets: Vec<PodDisruptionBudget>,
        asks: Sender<GroupAsk>,
        answers: Receiver<GroupAnswer>,
    ) -> Result<Option<GroupPostFilterVerdict>, PluginError> {
        let mut set = lock(&self.group_post_filter);
        let mut lent = Some(Lent {
            asks,
            answers,
            budgets,
        });
        let mut verdict = None;
        for &(i, _) in self.at(ExtensionPoint::PodGroupPostFilter) {
            let inst = set.get(i, &self.plugins)?;
            inst.sync(snapshot).map_err(PluginError::from)?;
            let t = self.plugin_clock(state);
            // Lent for this call only; taken back for the next plugin's.
            let l = lent.take().expect("lent once per call");
            let (r, back) = lend(l, || {
                let r = inst.pod_group_post_filter(state, group);
                (r, LENT.with(|l| l.borrow_mut().take()))
            });
            lent = back;
            let r: PodGroupPostFilterResult = r?;
            self.observe_plugin(i, "PodGroupPostFilter", r.status.code.as_str(), t);
            let code = r.status.code;
            let plugin = self.plugins[i].name.clone();
            if code == Code::Error {
                return Err(PluginError {
                    plugin,
                    message: format!(
                        "PodGroupPostFilter of pod group {}/{}: {}",
                        group.namespace,
                        group.name,
                        r.status.message()
                    ),
                });
            }
            verdict = Some(GroupPostFilterVerdict {
                plugin,
                status: r.status,
                nominations: r.nominations,
                victims: r.victims,
            });
            if code == Code::Success {
                break;
            }
        }
        Ok(verdict)
    }
}

/// A set of instances for PodGroupPostFilter calls, apart from the scheduling
/// thread's and the workers' (which the what-if runs on meanwhile).
pub(super) fn instance_set(n: usize, services: crate::wasm::module::HostServices) -> InstanceSet {
    InstanceSet::new(n, services)
}
