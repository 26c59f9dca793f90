//! Small building blocks that several plugins share, as upstream's
//! `framework/plugins/helper` package.

use crate::args::ResourceSpec;
use crate::types::{CPU, EPHEMERAL_STORAGE, MEMORY, NodeInfo};
use crate::validation::{invalid, is_scalar_resource_name};
use serde::Deserialize;

/// Rescales scores from `[0, max(scores)]` to `[0, max]` in place, as upstream's
/// `DefaultNormalizeScore`; with `reverse`, each scaled score becomes `max - score`,
/// so the node with the lowest raw score gets the most.
///
/// When every score is 0 (or there are none) the scores stay 0, or all become `max`
/// when reversed. Scores are assumed non-negative; integer division rounds down.
///
/// ```
/// use berth_sdk::helpers::default_normalize_score;
///
/// let mut scores = [1, 2, 3, 4];
/// default_normalize_score(100, true, &mut scores);
/// assert_eq!(scores, [75, 50, 25, 0]);
/// ```
pub fn default_normalize_score(max: i64, reverse: bool, scores: &mut [i64]) {
    // Upstream's running maximum starts at 0, so negative scores never raise it.
    let highest = scores.iter().copied().fold(0, i64::max);
    if highest == 0 {
        if reverse {
            scores.fill(max);
        }
        return;
    }
    for score in scores.iter_mut() {
        // Widened when a large raw score would overflow the product.
        let scaled = mul_div(max, *score, highest);
        *score = if reverse { max - scaled } else { scaled };
    }
}

/// A resource Score reads from nodes, its name resolved once (when the plugin is
/// configured) instead of matched for every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeResource {
    /// `cpu`, in millicores.
    Cpu,
    /// `memory`.
    Memory,
    /// `ephemeral-storage`.
    EphemeralStorage,
    /// An extended, hugepages or other scalar resource, by name.
    Scalar(String),
    /// Another native resource (e.g. `pods`): never scored.
    Other,
}

impl NodeResource {
    /// The resource named `name`.
    pub fn new(name: &str) -> Self {
        match name {
            CPU => NodeResource::Cpu,
            MEMORY => NodeResource::Memory,
            EPHEMERAL_STORAGE => NodeResource::EphemeralStorage,
            _ if is_scalar_resource_name(name) => NodeResource::Scalar(name.to_owned()),
            _ => NodeResource::Other,
        }
    }

    /// The resources that scoring args name, in order.
    pub fn of_specs(specs: &[ResourceSpec]) -> Vec<Self> {
        specs.iter().map(|r| NodeResource::new(&r.name)).collect()
    }
}

/// Upstream's `calculateResourceAllocatableRequest`: the node's allocatable quantity
/// of resource `name` and what its pods plus the incoming one (`pod_request`) request;
/// `(0, 0)` leaves the resource out of the score. Score, once per node, calls
/// [`allocatable_and_requested_of`] with the name resolved once.
///
/// CPU and memory count the node's non-zero requests (a container that requests
/// none counts as 100m / 200 MiB), or its plain requests with `use_requested`;
/// ephemeral storage and scalar resources always count plain requests. A scalar
/// resource the pod does not request, and native resources other than these (e.g.
/// `pods`), are left out.
pub fn allocatable_and_requested(
    node: &NodeInfo,
    name: &str,
    pod_request: i64,
    use_requested: bool,
) -> (i64, i64) {
    allocatable_and_requested_of(node, &NodeResource::new(name), pod_request, use_requested)
}

/// [`allocatable_and_requested`] of a resolved resource.
#[inline]
pub fn allocatable_and_requested_of(
    node: &NodeInfo,
    resource: &NodeResource,
    pod_request: i64,
    use_requested: bool,
) -> (i64, i64) {
    let alloc = &node.node.allocatable;
    let cpu_and_memory = if use_requested {
        &node.requested
    } else {
        &node.non_zero_requested
    };
    match resource {
        NodeResource::Cpu => (alloc.milli_cpu, cpu_and_memory.milli_cpu + pod_request),
        NodeResource::Memory => (alloc.memory, cpu_and_memory.memory + pod_request),
        NodeResource::EphemeralStorage => (
            alloc.ephemeral_storage,
            node.requested.ephemeral_storage + pod_request,
        ),
        // A scalar resource the pod does not ask for does not count, or every node
        // offering it would look emptier (or less balanced).
        NodeResource::Scalar(_) if pod_request == 0 => (0, 0),
        NodeResource::Scalar(name) => match alloc.scalar.get(name) {
            Some(&a) => {
                let used = node.requested.scalar.get(name).copied().unwrap_or(0);
                (a, used + pod_request)
            }
            None => (0, 0),
        },
        NodeResource::Other => (0, 0),
    }
}

/// `a * b` without overflow; in 64 bits when it fits (128-bit multiplication is a
/// library call in wasm, and Score runs once per node).
#[inline]
pub fn wide_mul(a: i64, b: i64) -> i128 {
    // Below 2^63 when the magnitudes have 65 leading zero bits between them. Not
    // `checked_mul`: in wasm its overflow test is itself a 128-bit library call.
    if a.unsigned_abs().leading_zeros() + b.unsigned_abs().leading_zeros() >= 65 {
        i128::from(a * b)
    } else {
        wide_mul_slow(a, b)
    }
}

/// The 128-bit product, out of line: inlined, the compiler computed it alongside the
/// 64-bit one and selected (with a constant factor, as the scores' 100), so every
/// call paid the library call.
#[cold]
#[inline(never)]
fn wide_mul_slow(a: i64, b: i64) -> i128 {
    i128::from(a) * i128::from(b)
}

/// `a / b` truncated towards zero, in 64 bits when both fit (128-bit division is a
/// library call in wasm). `b` must not be 0.
#[inline]
pub fn wide_div(a: i128, b: i128) -> i64 {
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(a), Ok(b)) => a.wrapping_div(b),
        _ => (a / b) as i64,
    }
}

/// `a * b / c` truncated towards zero, without overflow in the product: what the
/// scoring plugins compute in 128 bits, in 64 when it fits. `c` must not be 0.
#[inline]
pub fn mul_div(a: i64, b: i64, c: i64) -> i64 {
    wide_div(wide_mul(a, b), i128::from(c))
}

/// A hasher for maps a plugin fills and reads once per node, keyed by short strings
/// (label values, node names) or integers: a word at a time, a multiply and a
/// rotate per word. Not resistant to chosen keys, which plugins' maps need not be
/// (their keys come from the cluster's objects, their cost only from their number).
#[derive(Clone, Copy, Debug, Default)]
pub struct WordHasher(u64);

impl WordHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl std::hash::Hasher for WordHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }
}

/// A `HashMap` with [`WordHasher`]: for the per-cycle maps of plugins.
pub type FastHashMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<WordHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_NODE_SCORE;

    #[test]
    fn wide_products_and_quotients_are_exact_at_the_edges() {
        let edges = [
            0,
            1,
            -1,
            100,
            -100,
            i64::from(i32::MAX),
            i64::from(i32::MIN),
            1 << 31,
            3_037_000_499, // the largest square below 2^63 is its square
            3_037_000_500,
            (1 << 62) - 1,
            1 << 62,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ];
        for &a in &edges {
            for &b in &edges {
                assert_eq!(wide_mul(a, b), i128::from(a) * i128::from(b), "{a} * {b}");
                if b != 0 {
                    let exact = i128::from(a) * i128::from(b) / i128::from(b);
                    assert_eq!(i128::from(mul_div(a, b, b)), exact, "{a} * {b} / {b}");
                }
            }
        }
    }

    fn normalized(reverse: bool, scores: &[i64]) -> Vec<i64> {
        let mut scores = scores.to_vec();
        default_normalize_score(MAX_NODE_SCORE, reverse, &mut scores);
        scores
    }

    // The cases of upstream's TestDefaultNormalizeScore.
    #[test]
    fn scales_to_the_highest_score() {
        assert_eq!(normalized(false, &[1, 2, 3, 4]), [25, 50, 75, 100]);
        assert_eq!(normalized(false, &[1000, 10, 20, 30]), [100, 1, 2, 3]);
        assert_eq!(normalized(false, &[1, 1, 1, 1]), [100, 100, 100, 100]);
        assert_eq!(normalized(false, &[1000, 1, 1, 1]), [100, 0, 0, 0]);
    }

    #[test]
    fn reverse_favours_the_lowest_score() {
        assert_eq!(normalized(true, &[1, 2, 3, 4]), [75, 50, 25, 0]);
        assert_eq!(normalized(true, &[1000, 10, 20, 30]), [0, 99, 98, 97]);
        assert_eq!(normalized(true, &[0, 1, 1, 1]), [100, 0, 0, 0]);
    }

    #[test]
    fn all_zero_scores() {
        assert_eq!(normalized(false, &[0, 0, 0]), [0, 0, 0]);
        assert_eq!(normalized(true, &[0, 0, 0]), [100, 100, 100]);
        assert_eq!(normalized(true, &[]), Vec::<i64>::new());
    }

    #[test]
    fn allocatable_and_requested_resources() {
        let mut node = NodeInfo::default();
        node.node.allocatable.milli_cpu = 4000;
        node.node.allocatable.ephemeral_storage = 50;
        node.node
            .allocatable
            .scalar
            .insert("example.com/gpu".into(), 8);
        node.requested.milli_cpu = 1000;
        node.requested.ephemeral_storage = 5;
        node.requested.scalar.insert("example.com/gpu".into(), 2);
        node.non_zero_requested.milli_cpu = 1100;
        let f =
            |name, req, use_requested| allocatable_and_requested(&node, name, req, use_requested);
        assert_eq!(f(CPU, 500, false), (4000, 1600));
        assert_eq!(f(CPU, 500, true), (4000, 1500));
        assert_eq!(f(EPHEMERAL_STORAGE, 1, false), (50, 6));
        assert_eq!(f("example.com/gpu", 1, false), (8, 3));
        assert_eq!(f("example.com/gpu", 0, true), (0, 0));
        assert_eq!(f("example.com/tpu", 1, true), (0, 0));
        assert_eq!(f("pods", 1, true), (0, 0));
    }

    #[test]
    fn huge_scores_do_not_overflow() {
        assert_eq!(normalized(false, &[i64::MAX, i64::MAX / 2]), [100, 49]);
    }

    #[test]
    fn word_hasher_tells_short_keys_apart() {
        use std::hash::BuildHasher;
        let build = std::hash::BuildHasherDefault::<WordHasher>::default();
        let keys = [
            "",
            "a",
            "b",
            "ab",
            "ba",
            "zone-1",
            "zone-2",
            "node-00001",
            "node-00010",
        ];
        let hashes: std::collections::HashSet<u64> =
            keys.iter().map(|k| build.hash_one(k)).collect();
        assert_eq!(hashes.len(), keys.len());
        let mut m: FastHashMap<String, i64> = FastHashMap::default();
        for (i, k) in keys.iter().enumerate() {
            m.insert((*k).to_owned(), i as i64);
        }
        assert_eq!(m.get("zone-2"), Some(&6));
        assert_eq!(m.len(), keys.len());
    }
}

/// Scores of a user-given shape (NodeResourcesFit's `requestedToCapacityRatio`,
/// VolumeBinding's `shape`) run from 0 to this (upstream's `MaxCustomPriorityScore`);
/// they are scaled to the 0..100 node score range.
pub const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;
/// Largest utilization of a shape point, in percent.
pub const MAX_UTILIZATION: i64 = 100;

/// A point of a scoring shape: a utilization and the score there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapePoint {
    /// Utilization in percent, 0..=100.
    #[serde(default)]
    pub utilization: i64,
    /// Score at that utilization, 0..=10 as written; 0..=100 once validated.
    #[serde(default)]
    pub score: i64,
}

/// Upstream's `validateFunctionShape`: what is wrong with a shape, each message
/// naming `path`.
pub fn shape_errors(shape: &[ShapePoint], path: &str) -> Vec<String> {
    if shape.is_empty() {
        return vec![format!(
            "{path}: Required value: at least one point must be specified"
        )];
    }
    let mut errs = Vec::new();
    // Only the first out-of-order point is reported.
    if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
        errs.push(invalid(
            &format!("{path}[{i}].utilization"),
            shape[i].utilization,
            "values must be sorted in increasing order",
        ));
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=MAX_UTILIZATION).contains(&p.utilization) {
            errs.push(invalid(
                &format!("{path}[{i}].utilization"),
                p.utilization,
                &format!("not in valid range [0, {MAX_UTILIZATION}]"),
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&p.score) {
            errs.push(invalid(
                &format!("{path}[{i}].score"),
                p.score,
                &format!("not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"),
            ));
        }
    }
    errs
}

/// Upstream's `BuildBrokenLinearFunction`: the first point's score up to its
/// utilization, linear between points (integer division), the last point's score
/// beyond. `shape` must be non-empty with increasing utilizations.
pub fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
    for (i, point) in shape.iter().enumerate() {
        if p <= point.utilization {
            let Some(prev) = i.checked_sub(1).map(|j| shape[j]) else {
                return point.score;
            };
            return prev.score
                + (point.score - prev.score) * (p - prev.utilization)
                    / (point.utilization - prev.utilization);
        }
    }
    shape.last().map_or(0, |p| p.score)
}
