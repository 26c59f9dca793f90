//! The table of src/cases.rs through the compiled component: builds this crate for
//! wasm32-wasip2, plays every case with `berth plugin test`, and checks that the
//! component answers exactly what the native code answers. Needs the `berth`
//! command ($BERTH, or on PATH); without it, it says so and checks natively only.

#[path = "../src/cases.rs"]
mod cases;

#[test]
fn native_and_component_agree() {
    berth_sdk::check_component!(node_cost::NodeCost, cases::cases());
}
