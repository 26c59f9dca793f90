//! NodeCost: a Score plugin that puts pods on the cheapest nodes first.
//!
//! A node's price is the decimal in its price label (default
//! `berth.dev/hourly-price`, e.g. `"0.192"` for $0.192 an hour); a node without one
//! is priced by its capacity type (default label `karpenter.sh/capacity-type`,
//! `spot` or `on-demand`) from the `capacityTypePrices` arg, if given. After
//! NormalizeScore the cheapest priced node scores 100, the dearest 0, the rest
//! in proportion; a node with no price scores 0.
//!
//! A pod labelled `berth.dev/spot: avoid` (work that must not be interrupted) gives
//! spot nodes no score, so it goes to on-demand capacity when there is room.
//!
//! Upstream kube-scheduler has no notion of price: clusters mixing spot and
//! on-demand nodes fork the scheduler or lean on node affinity weights.
//!
//! ```yaml
//! pluginConfig:
//! - name: NodeCost
//!   args:
//!     priceLabel: berth.dev/hourly-price
//!     capacityTypeLabel: karpenter.sh/capacity-type
//!     capacityTypePrices: {spot: "0.12", on-demand: "0.40"}
//! ```

use berth_sdk::serde_json::Value;
use berth_sdk::{
    CycleState, MAX_NODE_SCORE, NodeInfo, NormalizeScore, Plugin, Pod, Score, Status, args,
};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The label that carries a node's hourly price unless the args name another.
pub const DEFAULT_PRICE_LABEL: &str = "berth.dev/hourly-price";
/// The label that says whether a node is spot or on-demand capacity.
pub const DEFAULT_CAPACITY_TYPE_LABEL: &str = "karpenter.sh/capacity-type";
/// A pod with this label set to `avoid` gets no score on spot nodes.
pub const SPOT_POD_LABEL: &str = "berth.dev/spot";
/// The raw score of a node with no known price (or a spot node for a pod that
/// avoids spot): NormalizeScore gives it 0.
const UNPRICED: i64 = -1;

/// The args, as written in the profile's `pluginConfig`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    price_label: Option<String>,
    #[serde(default)]
    capacity_type_label: Option<String>,
    /// Prices by capacity type, for nodes without a price label, as decimal strings.
    #[serde(default)]
    capacity_type_prices: BTreeMap<String, String>,
}

/// The plugin, configured from its args.
#[derive(Debug)]
pub struct NodeCost {
    price_label: String,
    capacity_type_label: String,
    /// Millionths of a currency unit an hour, by capacity type (lower case).
    capacity_type_prices: BTreeMap<String, i64>,
}

/// Reads a decimal price (`"0.192"`, `"3"`) as millionths; `None` when it is not a
/// non-negative decimal with at most six digits after the point.
pub fn parse_price(text: &str) -> Option<i64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && frac.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 6
        || whole.len() > 12
    {
        return None;
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let frac: i64 = format!("{frac:0<6}").parse().ok()?;
    Some(whole * 1_000_000 + frac)
}

impl Plugin for NodeCost {
    const NAME: &'static str = "NodeCost";

    fn new(args: Value) -> Result<Self, String> {
        let raw: RawArgs = args::parse(args)?;
        args::check_kind(raw.kind.as_deref(), "NodeCostArgs")?;
        let _ = raw.api_version;
        let mut capacity_type_prices = BTreeMap::new();
        for (kind, price) in raw.capacity_type_prices {
            let micros = parse_price(&price).ok_or_else(|| {
                format!(
                    "capacityTypePrices.{kind}: {price:?} is not a price (a decimal such as \"0.12\")"
                )
            })?;
            capacity_type_prices.insert(kind.to_ascii_lowercase(), micros);
        }
        let label = |l: Option<String>, field: &str, default: &str| match l {
            None => Ok(default.to_owned()),
            Some(l) if !l.is_empty() => Ok(l),
            Some(_) => Err(format!("{field}: must not be empty")),
        };
        Ok(NodeCost {
            price_label: label(raw.price_label, "priceLabel", DEFAULT_PRICE_LABEL)?,
            capacity_type_label: label(
                raw.capacity_type_label,
                "capacityTypeLabel",
                DEFAULT_CAPACITY_TYPE_LABEL,
            )?,
            capacity_type_prices,
        })
    }
}

impl NodeCost {
    /// The node's capacity type, lower case (`spot`, `on-demand`), if labelled.
    fn capacity_type(&self, node: &NodeInfo) -> Option<String> {
        node.node
            .labels
            .get(&self.capacity_type_label)
            .map(|v| v.to_ascii_lowercase())
    }

    /// The node's hourly price in millionths, if known.
    pub fn price(&self, node: &NodeInfo) -> Option<i64> {
        if let Some(text) = node.node.labels.get(&self.price_label) {
            return parse_price(text);
        }
        self.capacity_type(node)
            .and_then(|t| self.capacity_type_prices.get(&t).copied())
    }
}

impl Score for NodeCost {
    /// The node's price (lower is better), or -1 when it has none or the pod avoids
    /// spot and the node is spot.
    fn score(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let avoids_spot = pod.labels.get(SPOT_POD_LABEL).map(String::as_str) == Some("avoid");
        if avoids_spot && self.capacity_type(node).as_deref() == Some("spot") {
            return Ok(UNPRICED);
        }
        Ok(self.price(node).unwrap_or(UNPRICED))
    }
}

impl NormalizeScore for NodeCost {
    /// Cheapest 100, dearest 0, linear between; unpriced 0; every priced node 100
    /// when all cost the same.
    fn normalize_score(&self, _state: &CycleState, _pod: &Pod, scores: &mut [i64]) -> Status {
        let priced = scores.iter().copied().filter(|s| *s >= 0);
        let (Some(lo), Some(hi)) = (priced.clone().min(), priced.max()) else {
            scores.fill(0);
            return Status::success();
        };
        for s in scores.iter_mut() {
            *s = if *s < 0 {
                0
            } else if hi == lo {
                MAX_NODE_SCORE
            } else {
                // Widened: prices in millionths times 100 stay far inside i128.
                (i128::from(MAX_NODE_SCORE) * i128::from(hi - *s) / i128::from(hi - lo)) as i64
            };
        }
        Status::success()
    }
}

berth_sdk::export_plugin!(NodeCost: score, normalize_score);

#[cfg(test)]
mod cases;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_pass_natively() {
        berth_sdk::testing::check_all::<NodeCost>(&cases::cases());
    }

    #[test]
    fn prices_are_decimals() {
        assert_eq!(parse_price("0.192"), Some(192_000));
        assert_eq!(parse_price("3"), Some(3_000_000));
        assert_eq!(parse_price(".5"), Some(500_000));
        assert_eq!(parse_price("1.000001"), Some(1_000_001));
        for bad in ["", ".", "-1", "1.2.3", "0.1234567", "1e3", "cheap"] {
            assert_eq!(parse_price(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_args_are_refused_with_the_field() {
        let e = NodeCost::new(berth_sdk::serde_json::json!({
            "capacityTypePrices": {"spot": "free"}
        }))
        .unwrap_err();
        assert_eq!(
            e,
            "capacityTypePrices.spot: \"free\" is not a price (a decimal such as \"0.12\")"
        );
        let e = NodeCost::new(berth_sdk::serde_json::json!({"priceLable": "x"})).unwrap_err();
        assert!(e.contains("unknown field `priceLable`"), "{e}");
        let e = NodeCost::new(berth_sdk::serde_json::json!({"priceLabel": ""})).unwrap_err();
        assert_eq!(e, "priceLabel: must not be empty");
    }
}
