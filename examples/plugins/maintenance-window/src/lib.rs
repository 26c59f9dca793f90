//! MaintenanceWindow: a Filter plugin that keeps new pods off nodes in a maintenance
//! window.
//!
//! Operators (or their automation) label a node `berth.dev/maintenance-window` (the
//! `label` arg) while a window is announced or under way; the value says which
//! window, e.g. `2026-05-02T0200Z`. New pods are not placed there, so the node
//! drains naturally instead of taking work that will be evicted within the hour.
//! Cordoning would do the same but also stops DaemonSet-like helpers and erases who
//! cordoned the node and why; this keeps `spec.unschedulable` for humans.
//!
//! Pods labelled `berth.dev/maintenance-tolerant: "true"` (the `tolerantPodLabel`
//! arg: upgrade agents, short batch jobs) go anywhere: PreFilter answers Skip for
//! them and Filter is not called. When the label leaves a node (the window is
//! over), pods this plugin rejected are retried at once.
//!
//! ```yaml
//! pluginConfig:
//! - name: MaintenanceWindow
//!   args: {label: berth.dev/maintenance-window, tolerantPodLabel: berth.dev/maintenance-tolerant}
//! ```

use berth_sdk::events::node_change;
use berth_sdk::serde_json::Value;
use berth_sdk::{
    ActionType, ClusterEvent, CycleState, EnqueueExtensions, EventRegistration, EventResource,
    Filter, NodeInfo, Object, Plugin, Pod, PreFilter, PreFilterResult, QueueingHint, Status, args,
};
use serde::Deserialize;

/// The node label that marks a maintenance window unless the args name another.
pub const DEFAULT_LABEL: &str = "berth.dev/maintenance-window";
/// The pod label that lets a pod onto such nodes unless the args name another.
pub const DEFAULT_TOLERANT_POD_LABEL: &str = "berth.dev/maintenance-tolerant";
/// The reason of a rejection, as `0/N nodes are available: ...` counts it.
pub const REASON: &str = "node(s) in a maintenance window";

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    tolerant_pod_label: Option<String>,
}

/// The plugin, configured from its args.
#[derive(Debug)]
pub struct MaintenanceWindow {
    label: String,
    tolerant_pod_label: String,
}

impl Plugin for MaintenanceWindow {
    const NAME: &'static str = "MaintenanceWindow";

    fn new(args: Value) -> Result<Self, String> {
        let raw: RawArgs = args::parse(args)?;
        args::check_kind(raw.kind.as_deref(), "MaintenanceWindowArgs")?;
        let _ = raw.api_version;
        let label = |l: Option<String>, field: &str, default: &str| match l {
            None => Ok(default.to_owned()),
            Some(l) if !l.is_empty() => Ok(l),
            Some(_) => Err(format!("{field}: must not be empty")),
        };
        Ok(MaintenanceWindow {
            label: label(raw.label, "label", DEFAULT_LABEL)?,
            tolerant_pod_label: label(
                raw.tolerant_pod_label,
                "tolerantPodLabel",
                DEFAULT_TOLERANT_POD_LABEL,
            )?,
        })
    }

    /// A node added, or its labels changed: the window may be over.
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![EventRegistration::with_hint(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
        )])
    }
}

impl MaintenanceWindow {
    fn tolerant(&self, pod: &Pod) -> bool {
        pod.labels.get(&self.tolerant_pod_label).map(String::as_str) == Some("true")
    }
}

impl PreFilter for MaintenanceWindow {
    /// Skip for pods that tolerate maintenance, so Filter is not called for them.
    fn pre_filter(&self, _state: &CycleState, pod: &Pod, _nodes: &[&NodeInfo]) -> PreFilterResult {
        if self.tolerant(pod) {
            Status::skip().into()
        } else {
            Status::success().into()
        }
    }
}

impl Filter for MaintenanceWindow {
    /// UnschedulableAndUnresolvable on a node in a window: evicting its pods would
    /// not make room, so preemption is not tried.
    fn filter(&self, _state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        if node.node.labels.contains_key(&self.label) {
            Status::unresolvable(REASON)
        } else {
            Status::success()
        }
    }
}

impl EnqueueExtensions for MaintenanceWindow {
    /// Queue when a node outside any window appears: added without the label, or
    /// the label removed.
    fn queueing_hint(
        &self,
        _event: &ClusterEvent,
        _pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let (old, new) = node_change(old, new)?;
        let was_in = old.is_none_or(|o| o.labels.contains_key(&self.label));
        Ok(if was_in && !new.labels.contains_key(&self.label) {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        })
    }
}

berth_sdk::export_plugin!(MaintenanceWindow: queueing_hint, pre_filter, filter);

#[cfg(test)]
mod cases;

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::Node;

    #[test]
    fn cases_pass_natively() {
        berth_sdk::testing::check_all::<MaintenanceWindow>(&cases::cases());
    }

    #[test]
    fn the_end_of_a_window_requeues_rejected_pods() {
        let p = MaintenanceWindow::new(Value::Null).unwrap();
        let node = |labelled: bool| {
            let mut n = Node {
                name: "n".into(),
                ..Node::default()
            };
            if labelled {
                n.labels.insert(DEFAULT_LABEL.into(), "w1".into());
            }
            Object::Node(n)
        };
        let ev = ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_LABEL);
        let pod = Pod::default();
        let hint = |old: Option<&Object>, new: &Object| {
            p.queueing_hint(&ev, &pod, old, Some(new)).unwrap()
        };
        assert_eq!(hint(Some(&node(true)), &node(false)), QueueingHint::Queue);
        assert_eq!(hint(None, &node(false)), QueueingHint::Queue);
        assert_eq!(
            hint(Some(&node(false)), &node(true)),
            QueueingHint::QueueSkip
        );
        assert_eq!(
            hint(Some(&node(false)), &node(false)),
            QueueingHint::QueueSkip
        );
        assert_eq!(hint(None, &node(true)), QueueingHint::QueueSkip);
        assert!(p.queueing_hint(&ev, &pod, None, None).is_err());
    }

    #[test]
    fn bad_args_are_refused_with_the_field() {
        let e = MaintenanceWindow::new(berth_sdk::serde_json::json!({"label": ""})).unwrap_err();
        assert_eq!(e, "label: must not be empty");
        let e = MaintenanceWindow::new(berth_sdk::serde_json::json!({"kind": "NodeCostArgs"}))
            .unwrap_err();
        assert!(e.contains("MaintenanceWindowArgs"), "{e}");
    }
}
