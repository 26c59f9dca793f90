//! NodeCost's table of cases: run natively by the unit test in src/lib.rs and
//! through the compiled component by tests/component.rs.

use berth_sdk::serde_json::json;
use berth_sdk::testing::{Case, node, pod};

const PRICE: &str = "berth.dev/hourly-price";
const CAPACITY: &str = "karpenter.sh/capacity-type";

/// Every case.
pub fn cases() -> Vec<Case> {
    vec![
        Case::new("cheapest first, dearest last, linear between")
            .pod(pod("web").cpu(500))
            .node(node("a").label(PRICE, "0.40"))
            .node(node("b").label(PRICE, "0.10"))
            .node(node("c").label(PRICE, "0.25"))
            .scores([("b", 100), ("c", 50), ("a", 0)]),
        Case::new("a node with no price scores 0")
            .node(node("priced").label(PRICE, "0.2"))
            .node(node("unknown"))
            .node(node("garbled").label(PRICE, "cheap"))
            .scores([("priced", 100), ("unknown", 0), ("garbled", 0)]),
        Case::new("capacity types price unlabelled nodes")
            .args(json!({"capacityTypePrices": {"spot": "0.12", "on-demand": "0.40"}}))
            .node(node("od").label(CAPACITY, "on-demand"))
            .node(node("spot").label(CAPACITY, "spot"))
            .node(node("listed").label(CAPACITY, "spot").label(PRICE, "0.26"))
            .scores([("spot", 100), ("listed", 50), ("od", 0)]),
        Case::new("a pod that avoids spot gives spot nodes nothing")
            .args(json!({"capacityTypePrices": {"spot": "0.12", "on-demand": "0.40"}}))
            .pod(pod("db").label("berth.dev/spot", "avoid"))
            .node(node("od").label(CAPACITY, "on-demand"))
            .node(node("spot").label(CAPACITY, "SPOT"))
            .scores([("od", 100), ("spot", 0)]),
        Case::new("equal prices all score 100")
            .node(node("a").label(PRICE, "1"))
            .node(node("b").label(PRICE, "1.0"))
            .scores([("a", 100), ("b", 100)]),
        Case::new("the args rename the labels")
            .args(
                json!({"priceLabel": "cost", "capacityTypeLabel": "lifecycle",
                         "capacityTypePrices": {"spot": "1"}}),
            )
            .node(node("a").label("cost", "3"))
            .node(node("b").label("lifecycle", "spot").label(PRICE, "9"))
            .scores([("b", 100), ("a", 0)]),
    ]
}
