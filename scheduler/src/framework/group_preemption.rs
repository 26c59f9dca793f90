//! PodGroupPostFilter (kube-scheduler's workload-aware preemption) and the what-if it
//! may ask the host for: the whole cluster with pods removed and added back, the pod
//! group's cycle run on what is left, and its proposed assignments checked again.
//!
//! The what-if needs the scheduler itself (its cache, its snapshot, the profile's
//! plugins on every worker), which the plugin's call cannot borrow. So the call runs
//! on a thread of its own, on an instance set kept for it, while the scheduler's
//! thread answers the what-if's questions one at a time (`serve`), then undoes
//! whatever the what-if left removed. The plugin's end of the what-if is lent to
//! that thread only ([`berth_runtime::plugin::group_what_if`]).

use super::{Framework, InstanceSet, PluginError, lock};
use berth_runtime::cache::Snapshot;
use berth_runtime::plugin::CycleState;
use berth_runtime::plugin::group_what_if::{GroupAnswer, GroupAsk, Lent, lend, take_back};
use berth_sdk::{
    Code, ExtensionPoint, PodDisruptionBudget, PodGroup, PodGroupPostFilterResult,
    ProposedAssignment, Status,
};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};

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
        let mut set = lock(&self.instances.group_post_filter);
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
                (r, take_back())
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
pub(super) fn instance_set(
    n: usize,
    services: berth_runtime::wasm::module::HostServices,
) -> InstanceSet {
    InstanceSet::new(n, services)
}
