//! The what-if a PodGroupPostFilter call may ask the host for, as the plugin's side
//! sees it: questions sent to the scheduler's thread over a channel lent to the
//! thread the call runs on, and only while it runs. A component's
//! `workload.group-simulation` resource and a native twin's
//! [`berth_sdk::GroupSimulation`] both reach it here; a call on any other thread
//! (a Filter plugin the what-if itself runs, say) finds nothing lent and is told so.

use berth_sdk::{PodDisruptionBudget, ProposedAssignment, Status};
use std::cell::RefCell;
use std::sync::mpsc::{Receiver, Sender};

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
pub struct Lent {
    /// Where questions go.
    pub asks: Sender<GroupAsk>,
    /// Where answers come from.
    pub answers: Receiver<GroupAnswer>,
    /// The cluster's PodDisruptionBudgets.
    pub budgets: Vec<PodDisruptionBudget>,
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

/// Takes back what is lent to this thread, if anything.
pub fn take_back() -> Option<Lent> {
    LENT.with(|l| l.borrow_mut().take())
}

/// Lends the what-if to this thread while `f` runs.
pub fn lend<R>(lent: Lent, f: impl FnOnce() -> R) -> R {
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
