//! MaintenanceWindow's table of cases: run natively by the unit test in src/lib.rs
//! and through the compiled component by tests/component.rs.

use berth_sdk::Code;
use berth_sdk::serde_json::json;
use berth_sdk::testing::{Case, node, pod};

const WINDOW: &str = "berth.dev/maintenance-window";

/// Every case.
pub fn cases() -> Vec<Case> {
    vec![
        Case::new("nodes in a window take no new pods")
            .pod(pod("web").cpu(500))
            .node(node("a").cpu(4000))
            .node(node("b").cpu(4000).label(WINDOW, "2026-05-02T0200Z"))
            .node(node("c").cpu(4000))
            .pre_filter_code(Code::Success)
            .feasible(["a", "c"])
            .rejects(
                "b",
                Code::UnschedulableAndUnresolvable,
                "node(s) in a maintenance window",
            ),
        Case::new("a tolerant pod goes anywhere, Filter is skipped")
            .pod(pod("upgrader").label("berth.dev/maintenance-tolerant", "true"))
            .node(node("a"))
            .node(node("b").label(WINDOW, "now"))
            .pre_filter_code(Code::Skip)
            .feasible(["a", "b"]),
        Case::new("only \"true\" makes a pod tolerant")
            .pod(pod("web").label("berth.dev/maintenance-tolerant", "yes"))
            .node(node("b").label(WINDOW, "now"))
            .pre_filter_code(Code::Success)
            .feasible(Vec::<String>::new()),
        Case::new("the args name both labels")
            .args(json!({"label": "ops/window", "tolerantPodLabel": "ops/tolerant"}))
            .pod(pod("web"))
            .node(node("a").label(WINDOW, "ignored now"))
            .node(node("b").label("ops/window", "w7"))
            .feasible(["a"])
            .rejects("b", Code::UnschedulableAndUnresolvable, ""),
        Case::new("every node in a window: nothing fits")
            .node(node("a").label(WINDOW, "w1"))
            .node(node("b").label(WINDOW, "w1"))
            .feasible(Vec::<String>::new()),
    ]
}
