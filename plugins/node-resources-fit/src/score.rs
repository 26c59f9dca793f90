//! Scoring, as upstream's `resourceAllocationScorer` with the `LeastAllocated`,
//! `MostAllocated` and `RequestedToCapacityRatio` scorers.
//!
//! CPU and memory use non-zero requests (a container that requests none counts as
//! 100m / 200 MiB) for the pod and the node's pods alike, so best-effort pods still
//! spread; other resources use plain requests.

use berth_sdk::types::{CPU, EPHEMERAL_STORAGE, MEMORY};
use berth_sdk::{MAX_NODE_SCORE, NodeInfo, Pod};

use crate::args::{FitArgs, MAX_UTILIZATION, ResourceSpec, ScoringStrategyType, ShapePoint};
use berth_sdk::helpers::{NodeResource, allocatable_and_requested_of, mul_div, wide_div, wide_mul};

/// The pod's non-zero requests of each scored resource, in the order of `resources`.
pub fn pod_requests(pod: &Pod, resources: &[ResourceSpec]) -> Vec<i64> {
    let requests = pod.non_zero_requests();
    resources
        .iter()
        .map(|r| match r.name.as_str() {
            CPU => requests.milli_cpu,
            MEMORY => requests.memory,
            EPHEMERAL_STORAGE => requests.ephemeral_storage,
            name => requests.scalar.get(name).copied().unwrap_or(0),
        })
        .collect()
}

/// The node's score in `0..=100` for a pod whose requests of the scored resources
/// are `pod_requests` (from [`pod_requests`]); `scored` is `args.resources` resolved
/// ([`NodeResource::of_specs`]).
pub fn score(
    args: &FitArgs,
    scored: &[NodeResource],
    node: &NodeInfo,
    pod_requests: &[i64],
) -> i64 {
    // (weight, requested, allocatable) of each resource the node has.
    let scored = args
        .resources
        .iter()
        .zip(scored)
        .zip(pod_requests)
        .map(|((r, resource), &req)| {
            let (alloc, requested) = allocatable_and_requested_of(node, resource, req, false);
            (r.weight, requested, alloc)
        })
        .filter(|&(_, _, alloc)| alloc != 0);
    match args.strategy {
        ScoringStrategyType::LeastAllocated => {
            weighted_floor(scored.map(|(w, req, cap)| (w, least_requested_score(req, cap))))
        }
        ScoringStrategyType::MostAllocated => {
            weighted_floor(scored.map(|(w, req, cap)| (w, most_requested_score(req, cap))))
        }
        ScoringStrategyType::RequestedToCapacityRatio => {
            let (mut total, mut weights) = (0i128, 0i128);
            for (w, req, cap) in scored {
                let s = ratio_score(&args.shape, req, cap);
                // Upstream leaves resources that score 0 out of the average.
                if s > 0 {
                    total += wide_mul(s, w);
                    weights += i128::from(w);
                }
            }
            if weights == 0 {
                return 0;
            }
            // math.Round of a non-negative quotient: half rounds up.
            wide_div(2 * total + weights, 2 * weights)
        }
    }
}

/// The weighted average of per-resource scores, rounded down.
fn weighted_floor(scores: impl Iterator<Item = (i64, i64)>) -> i64 {
    let (mut total, mut weights) = (0i128, 0i128);
    for (w, s) in scores {
        total += wide_mul(s, w);
        weights += i128::from(w);
    }
    if weights == 0 {
        0
    } else {
        wide_div(total, weights)
    }
}

/// Unused capacity on `0..=100`: more free room scores higher.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    mul_div(capacity - requested, MAX_NODE_SCORE, capacity)
}

/// Used capacity on `0..=100`: fuller nodes score higher.
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    // Non-zero defaults can push requests past capacity.
    let requested = requested.min(capacity);
    mul_div(requested, MAX_NODE_SCORE, capacity)
}

/// `requested / capacity` in percent, clamped to `0..=100`, exact in integers.
fn utilization(requested: i64, capacity: i64) -> i64 {
    if capacity <= 0 || requested <= 0 {
        return 0;
    }
    if requested >= capacity {
        return MAX_UTILIZATION;
    }
    mul_div(requested, MAX_UTILIZATION, capacity)
}

/// One resource's `RequestedToCapacityRatio` score: the shape at its utilization,
/// full utilization when the node has none of it or too little.
fn ratio_score(shape: &[ShapePoint], requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return broken_linear(shape, MAX_UTILIZATION);
    }
    broken_linear(shape, utilization(requested, capacity))
}

pub use berth_sdk::helpers::broken_linear;

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::serde_json::json;
    use berth_sdk::{Container, Node, ResourceList, Resources};

    const EXT: &str = "intel.com/foo";

    fn list(items: &[(&str, i64)]) -> ResourceList {
        items.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    /// A pod with one container per request list, as upstream's `st.MakePod().Req(..)`.
    fn pod(containers: &[&[(&str, i64)]]) -> Pod {
        Pod {
            containers: containers
                .iter()
                .map(|c| Container {
                    requests: list(c),
                    ..Container::default()
                })
                .collect(),
            ..Pod::default()
        }
    }

    fn node(allocatable: &[(&str, i64)], pods: &[&Pod]) -> NodeInfo {
        let mut info = NodeInfo::new(Node {
            allocatable: Resources::from_list(&list(allocatable)),
            ..Node::default()
        });
        for p in pods {
            info.add_pod(p);
        }
        info
    }

    fn args(strategy: &str, resources: &[(&str, i64)]) -> FitArgs {
        let resources: Vec<_> = resources
            .iter()
            .map(|(n, w)| json!({"name": n, "weight": w}))
            .collect();
        FitArgs::from_json(json!({
            "scoringStrategy": {"type": strategy, "resources": resources}
        }))
        .unwrap()
    }

    fn ratio_args(resources: &[(&str, i64)], shape: &[(i64, i64)]) -> FitArgs {
        let resources: Vec<_> = resources
            .iter()
            .map(|(n, w)| json!({"name": n, "weight": w}))
            .collect();
        let shape: Vec<_> = shape
            .iter()
            .map(|(u, s)| json!({"utilization": u, "score": s}))
            .collect();
        FitArgs::from_json(json!({
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "resources": resources,
                "requestedToCapacityRatio": {"shape": shape},
            }
        }))
        .unwrap()
    }

    fn scores(args: &FitArgs, p: &Pod, nodes: &[NodeInfo]) -> Vec<i64> {
        let requests = pod_requests(p, &args.resources);
        let scored = NodeResource::of_specs(&args.resources);
        nodes
            .iter()
            .map(|n| score(args, &scored, n, &requests))
            .collect()
    }

    const DEFAULT: &[(&str, i64)] = &[("cpu", 1), ("memory", 1)];
    const EXTENDED_SET: &[(&str, i64)] = &[("cpu", 1), ("memory", 1), ("example.com/gpu", 1)];

    fn requested_pod() -> Pod {
        pod(&[
            &[("cpu", 1000), ("memory", 2000)],
            &[("cpu", 2000), ("memory", 3000)],
        ])
    }

    // The cases of upstream's TestLeastAllocatedScoringStrategy.
    #[test]
    fn least_allocated() {
        let la = args("LeastAllocated", DEFAULT);
        let n = |cpu, mem, pods: &[&Pod]| node(&[("cpu", cpu), ("memory", mem)], pods);

        // Nothing scheduled, nothing requested.
        let nodes = [n(4000, 10000, &[]), n(4000, 10000, &[])];
        assert_eq!(scores(&la, &Pod::default(), &nodes), [100, 100]);

        // Nothing scheduled, differently sized nodes: (25+50)/2, (50+50)/2.
        let nodes = [n(4000, 10000, &[]), n(6000, 10000, &[])];
        assert_eq!(scores(&la, &requested_pod(), &nodes), [37, 50]);

        // No resources requested, pods without containers scheduled.
        let nodes = [
            n(4000, 10000, &[&Pod::default(), &Pod::default()]),
            n(4000, 10000, &[&Pod::default(), &Pod::default()]),
        ];
        assert_eq!(scores(&la, &Pod::default(), &nodes), [100, 100]);

        // No resources requested, pods with resources scheduled: (40+100)/2, (40+75)/2.
        let c3 = pod(&[&[("cpu", 3000), ("memory", 0)]]);
        let c3m5 = pod(&[&[("cpu", 3000), ("memory", 5000)]]);
        let nodes = [n(10000, 20000, &[&c3, &c3]), n(10000, 20000, &[&c3, &c3m5])];
        assert_eq!(scores(&la, &Pod::default(), &nodes), [70, 57]);

        // Resources requested, pods scheduled: (40+75)/2, (40+50)/2.
        let nodes = [n(10000, 20000, &[&c3]), n(10000, 20000, &[&c3m5])];
        assert_eq!(scores(&la, &requested_pod(), &nodes), [57, 45]);

        // Differently sized nodes: (40+75)/2, (40+80)/2.
        let nodes = [n(10000, 20000, &[&c3]), n(10000, 50000, &[&c3m5])];
        assert_eq!(scores(&la, &requested_pod(), &nodes), [57, 60]);

        // Requests past capacity score 0 for that resource: (0+100)/2, (0+50)/2.
        let nodes = [n(4000, 10000, &[&c3]), n(4000, 10000, &[&c3m5])];
        let p = pod(&[&[("cpu", 3000), ("memory", 0)]]);
        assert_eq!(scores(&la, &p, &nodes), [50, 25]);

        // Nodes without resources score 0.
        let nodes = [node(&[], &[&c3]), node(&[], &[&c3m5])];
        assert_eq!(scores(&la, &Pod::default(), &nodes), [0, 0]);
    }

    #[test]
    fn least_allocated_weights_and_extended_resources() {
        let n = |items: &[(&str, i64)]| node(items, &[]);
        // (25*1 + 50*2)/3, (50*1 + 50*2)/3.
        let weighted = args("LeastAllocated", &[("memory", 2), ("cpu", 1)]);
        let nodes = [
            n(&[("cpu", 4000), ("memory", 10000)]),
            n(&[("cpu", 6000), ("memory", 10000)]),
        ];
        assert_eq!(scores(&weighted, &requested_pod(), &nodes), [41, 50]);

        // An extended resource the pod does not request is left out.
        let la = args("LeastAllocated", EXTENDED_SET);
        let nodes = [
            n(&[("cpu", 6000), ("memory", 10000)]),
            n(&[("cpu", 6000), ("memory", 10000), ("example.com/gpu", 4)]),
        ];
        assert_eq!(scores(&la, &requested_pod(), &nodes), [50, 50]);

        // Requested: (50+50+50)/3 and (50+50+80)/3.
        let p = pod(&[&[("cpu", 3000), ("memory", 5000), ("example.com/gpu", 2)]]);
        let nodes = [
            n(&[("cpu", 6000), ("memory", 10000), ("example.com/gpu", 4)]),
            n(&[("cpu", 6000), ("memory", 10000), ("example.com/gpu", 10)]),
        ];
        assert_eq!(scores(&la, &p, &nodes), [50, 60]);

        // A node without the resource: (50+60)/2 either way.
        let la = args(
            "LeastAllocated",
            &[("example.com/gpu", 2), ("cpu", 1), ("memory", 1)],
        );
        let p = pod(&[&[("cpu", 3000), ("memory", 4000)]]);
        let nodes = [
            n(&[("cpu", 6000), ("memory", 10000)]),
            n(&[("cpu", 6000), ("memory", 10000), ("example.com/gpu", 4)]),
        ];
        assert_eq!(scores(&la, &p, &nodes), [55, 55]);
    }

    // The cases of upstream's TestMostAllocatedScoringStrategy.
    #[test]
    fn most_allocated() {
        let ma = args("MostAllocated", DEFAULT);
        let n = |cpu, mem, pods: &[&Pod]| node(&[("cpu", cpu), ("memory", mem)], pods);

        let nodes = [n(4000, 10000, &[]), n(4000, 10000, &[])];
        assert_eq!(scores(&ma, &Pod::default(), &nodes), [0, 0]);

        // (75+50)/2, (50+50)/2.
        let nodes = [n(4000, 10000, &[]), n(6000, 10000, &[])];
        assert_eq!(scores(&ma, &requested_pod(), &nodes), [62, 50]);

        // (60+0)/2, (60+25)/2.
        let c3 = pod(&[&[("cpu", 3000), ("memory", 0)]]);
        let c3m5 = pod(&[&[("cpu", 3000), ("memory", 5000)]]);
        let nodes = [n(10000, 20000, &[&c3, &c3]), n(10000, 20000, &[&c3, &c3m5])];
        assert_eq!(scores(&ma, &Pod::default(), &nodes), [30, 42]);

        // (60+25)/2, (60+50)/2.
        let nodes = [n(10000, 20000, &[&c3]), n(10000, 20000, &[&c3m5])];
        assert_eq!(scores(&ma, &requested_pod(), &nodes), [42, 55]);

        // Requests equal to capacity: (100+90)/2, (50+100)/2.
        let p = pod(&[
            &[("cpu", 2000), ("memory", 4000)],
            &[("cpu", 3000), ("memory", 5000)],
        ]);
        let nodes = [n(5000, 10000, &[]), n(10000, 9000, &[])];
        assert_eq!(scores(&ma, &p, &nodes), [95, 75]);

        // (75*1 + 50*2)/3, (50*1 + 50*2)/3.
        let weighted = args("MostAllocated", &[("memory", 2), ("cpu", 1)]);
        let nodes = [n(4000, 10000, &[]), n(6000, 10000, &[])];
        assert_eq!(scores(&weighted, &requested_pod(), &nodes), [58, 50]);
    }

    #[test]
    fn most_allocated_counts_non_zero_requests() {
        // Containers without requests count as 100m and 200 MiB. Node 1: cpu
        // 300/250 clamps to 100%, memory 600/1000 MiB = 60%; node 2: 40% and 20%.
        let ma = args("MostAllocated", DEFAULT);
        let mib = 1024 * 1024;
        let empty = || pod(&[&[]]);
        let nodes = [
            node(
                &[("cpu", 250), ("memory", 1000 * mib)],
                &[&empty(), &empty()],
            ),
            node(&[("cpu", 250), ("memory", 1000 * mib)], &[]),
        ];
        assert_eq!(scores(&ma, &empty(), &nodes), [80, 30]);
    }

    #[test]
    fn most_allocated_extended_resources() {
        let n = |items: &[(&str, i64)]| node(items, &[]);
        let ma = args("MostAllocated", EXTENDED_SET);
        let nodes = [
            n(&[("cpu", 6000), ("memory", 10000)]),
            n(&[("cpu", 6000), ("memory", 10000), ("example.com/gpu", 4)]),
        ];
        assert_eq!(scores(&ma, &requested_pod(), &nodes), [50, 50]);

        // (50+50+50)/3, (50+50+20)/3.
        let p = pod(&[&[("cpu", 3000), ("memory", 5000), ("example.com/gpu", 2)]]);
        let nodes = [
            n(&[("cpu", 6000), ("memory", 10000), ("example.com/gpu", 4)]),
            n(&[("cpu", 6000), ("memory", 10000), ("example.com/gpu", 10)]),
        ];
        assert_eq!(scores(&ma, &p, &nodes), [50, 40]);

        // (50+40)/2.
        let ma = args(
            "MostAllocated",
            &[("example.com/gpu", 2), ("cpu", 1), ("memory", 1)],
        );
        let p = pod(&[&[("cpu", 3000), ("memory", 4000)]]);
        let nodes = [
            n(&[("cpu", 6000), ("memory", 10000)]),
            n(&[("cpu", 6000), ("memory", 10000), ("example.com/gpu", 4)]),
        ];
        assert_eq!(scores(&ma, &p, &nodes), [45, 45]);
    }

    // The cases of upstream's TestRequestedToCapacityRatioScoringStrategy.
    #[test]
    fn requested_to_capacity_ratio_default_shape_prefers_least_requested() {
        let rtcr = ratio_args(DEFAULT, &[(0, 10), (100, 0)]);
        let n = |cpu, pods: &[&Pod]| node(&[("cpu", cpu), ("memory", 10000)], pods);

        let nodes = [n(4000, &[&Pod::default(), &Pod::default()]), n(4000, &[])];
        assert_eq!(scores(&rtcr, &Pod::default(), &nodes), [100, 100]);

        // Node 1: cpu 75% -> 25, memory 50% -> 50, round(37.5) = 38.
        let nodes = [n(4000, &[&Pod::default(), &Pod::default()]), n(6000, &[])];
        assert_eq!(scores(&rtcr, &requested_pod(), &nodes), [38, 50]);

        let c3m5 = pod(&[&[("cpu", 3000), ("memory", 5000)]]);
        let nodes = [n(4000, &[&c3m5]), n(6000, &[&c3m5])];
        assert_eq!(scores(&rtcr, &Pod::default(), &nodes), [38, 50]);
    }

    // The cases of upstream's TestResourceBinPackingSingleExtended.
    #[test]
    fn bin_packing_single_extended_resource() {
        let rtcr = ratio_args(&[(EXT, 1)], &[(0, 0), (100, 1)]);
        let gib = 1024 * 1024 * 1024;
        let n = |foo, pods: &[&Pod]| node(&[("cpu", 4000), ("memory", 10 * gib), (EXT, foo)], pods);

        // The pod does not request the resource: nothing is scored.
        assert_eq!(
            scores(&rtcr, &Pod::default(), &[n(8, &[]), n(4, &[])]),
            [0, 0]
        );

        // 2/8 = 25% -> 2, 2/4 = 50% -> 5.
        let want2 = pod(&[&[(EXT, 2)]]);
        assert_eq!(
            scores(&rtcr, &want2, &[n(8, &[]), n(4, &[&Pod::default()])]),
            [2, 5]
        );

        // Node 2 already has 2 of 4 in use: 100% -> 10.
        assert_eq!(
            scores(&rtcr, &want2, &[n(8, &[]), n(4, &[&want2])]),
            [2, 10]
        );

        // 4/8 -> 5, 4/4 -> 10.
        let want4 = pod(&[&[(EXT, 4)]]);
        assert_eq!(scores(&rtcr, &want4, &[n(8, &[]), n(4, &[])]), [5, 10]);
    }

    // The cases of upstream's TestResourceBinPackingMultipleExtended.
    #[test]
    fn bin_packing_multiple_extended_resources() {
        const BAR: &str = "intel.com/bar";
        let rtcr = ratio_args(&[(EXT, 3), (BAR, 5)], &[(0, 0), (100, 1)]);
        let gib = 1024 * 1024 * 1024;
        let n = |foo, bar, pods: &[&Pod]| {
            node(
                &[("cpu", 4000), ("memory", 10 * gib), (EXT, foo), (BAR, bar)],
                pods,
            )
        };

        assert_eq!(
            scores(&rtcr, &Pod::default(), &[n(8, 4, &[]), n(4, 8, &[])]),
            [0, 0]
        );

        // Node 1: foo 25% -> 2, bar 50% -> 5: round((6+25)/8) = 4.
        // Node 2: foo 50% -> 5, bar 25% -> 2: round((15+10)/8) = 3.
        let p1 = pod(&[&[(EXT, 2), (BAR, 2)]]);
        assert_eq!(scores(&rtcr, &p1, &[n(8, 4, &[]), n(4, 8, &[])]), [4, 3]);

        // Node 2 runs a pod with foo 4, bar 2: foo over capacity -> 10, bar 50% -> 5:
        // round((30+25)/8) = 7.
        let p2 = pod(&[&[(EXT, 4), (BAR, 2)]]);
        assert_eq!(scores(&rtcr, &p1, &[n(8, 4, &[]), n(4, 8, &[&p2])]), [4, 7]);

        // Node 1: 50% -> 5 each: 5. Node 2: foo 100% -> 10, bar 25% -> 2:
        // round((30+10)/8) = 5.
        assert_eq!(scores(&rtcr, &p2, &[n(8, 4, &[]), n(4, 8, &[])]), [5, 5]);
    }

    // The cases of upstream's TestBrokenLinearFunction.
    #[test]
    fn broken_linear_function() {
        let shape = |points: &[(i64, i64)]| -> Vec<ShapePoint> {
            points
                .iter()
                .map(|&(utilization, score)| ShapePoint { utilization, score })
                .collect()
        };
        let check = |points: &[(i64, i64)], cases: &[(i64, i64)]| {
            let s = shape(points);
            for &(p, want) in cases {
                assert_eq!(broken_linear(&s, p), want, "shape {points:?} at {p}");
            }
        };
        check(
            &[(10, 1), (90, 9)],
            &[
                (-10, 1),
                (0, 1),
                (9, 1),
                (10, 1),
                (15, 1),
                (19, 1),
                (20, 2),
                (89, 8),
                (90, 9),
                (99, 9),
                (100, 9),
                (110, 9),
            ],
        );
        check(
            &[(0, 2), (40, 10), (100, 0)],
            &[
                (-10, 2),
                (0, 2),
                (20, 6),
                (30, 8),
                (40, 10),
                (70, 5),
                (100, 0),
                (110, 0),
            ],
        );
        check(
            &[(0, 2), (40, 2), (100, 2)],
            &[
                (-10, 2),
                (0, 2),
                (20, 2),
                (30, 2),
                (40, 2),
                (70, 2),
                (100, 2),
                (110, 2),
            ],
        );
    }

    #[test]
    fn per_resource_scores() {
        assert_eq!(least_requested_score(0, 0), 0);
        assert_eq!(least_requested_score(5, 4), 0);
        assert_eq!(least_requested_score(1, 4), 75);
        assert_eq!(most_requested_score(5, 4), 100);
        assert_eq!(most_requested_score(1, 4), 25);
        assert_eq!(most_requested_score(1, 0), 0);
        // Memory in bytes of a huge node does not overflow.
        let big = i64::MAX / 10;
        assert_eq!(least_requested_score(big / 2, big), 50);
        assert_eq!(utilization(big / 4, big), 25);
    }

    #[test]
    fn ephemeral_storage_uses_plain_requests() {
        let la = args("LeastAllocated", &[("ephemeral-storage", 1)]);
        // The node's pod asks for no storage; the pod for 5 of 20: 75.
        let nodes = [node(&[("ephemeral-storage", 20)], &[&pod(&[&[]])])];
        let p = pod(&[&[("ephemeral-storage", 5)]]);
        assert_eq!(scores(&la, &p, &nodes), [75]);
    }

    #[test]
    fn score_uses_pre_score_state_or_computes_it() {
        use crate::NodeResourcesFit;
        use berth_sdk::{CycleState, MemoryState, PreScore, Score};
        let plugin = NodeResourcesFit::with_args(args("LeastAllocated", DEFAULT));
        let n = node(&[("cpu", 4000), ("memory", 10000)], &[]);
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        assert_eq!(plugin.score(&state, &requested_pod(), &n), Ok(37));
        assert!(
            plugin
                .pre_score(&state, &requested_pod(), &[&n], &[&n])
                .is_success()
        );
        // Score reads what PreScore stored, not the pod passed to it.
        assert_eq!(plugin.score(&state, &Pod::default(), &n), Ok(37));
    }
}
