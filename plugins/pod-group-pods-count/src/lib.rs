//! PodGroupPodsCount: among the placements a pod group's cycle found feasible, the
//! one that takes the most members scores highest, as kube-scheduler's plugin of the
//! same name (workload-aware scheduling): a placement scores the members already
//! scheduled plus the ones it places, normalized by the best placement's count.

use berth_sdk::{
    CycleState, MAX_NODE_SCORE, MIN_NODE_SCORE, NormalizePlacementScore, PlacementScore, Plugin,
    PodGroup, PodGroupAssignments, Status,
};

/// The plugin.
pub struct PodGroupPodsCount;

impl Plugin for PodGroupPodsCount {
    const NAME: &'static str = "PodGroupPodsCount";

    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(PodGroupPodsCount)
    }
}

impl PlacementScore for PodGroupPodsCount {
    fn score_placement(
        &self,
        _state: &CycleState,
        group: &PodGroup,
        assignments: &PodGroupAssignments,
    ) -> Result<i64, Status> {
        Ok(i64::from(group.scheduled_count) + assignments.assignments.len() as i64)
    }
}

impl NormalizePlacementScore for PodGroupPodsCount {
    fn normalize_placement_score(
        &self,
        _state: &CycleState,
        _group: &PodGroup,
        scores: &mut [i64],
    ) -> Status {
        let most = scores.iter().copied().max().unwrap_or(0);
        if most <= 0 {
            return Status::error(
                "no pods from pod group are assigned to any of the candidate placements",
            );
        }
        for s in scores.iter_mut() {
            *s = MIN_NODE_SCORE + *s * (MAX_NODE_SCORE - MIN_NODE_SCORE) / most;
        }
        Status::success()
    }
}

berth_sdk::export_plugin!(PodGroupPodsCount: placement_score, normalize_placement_score);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{MemoryState, Placement, ProposedAssignment};

    fn placed(n: usize) -> PodGroupAssignments {
        PodGroupAssignments {
            placement: Placement::default(),
            assignments: (0..n)
                .map(|i| ProposedAssignment {
                    pod_uid: format!("p{i}"),
                    node: "n".into(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_placement_taking_the_most_members_scores_highest() {
        let state = MemoryState::default();
        let cs = CycleState::new(&state);
        let group = PodGroup {
            scheduled_count: 1,
            ..PodGroup::default()
        };
        let mut scores: Vec<i64> = [3, 1, 0]
            .iter()
            .map(|n| {
                PodGroupPodsCount
                    .score_placement(&cs, &group, &placed(*n))
                    .unwrap()
            })
            .collect();
        assert_eq!(scores, [4, 2, 1]);
        assert!(
            PodGroupPodsCount
                .normalize_placement_score(&cs, &group, &mut scores)
                .is_success()
        );
        assert_eq!(scores, [100, 50, 25]);
        let mut none = vec![0, 0];
        let s = PodGroupPodsCount.normalize_placement_score(&cs, &PodGroup::default(), &mut none);
        assert_eq!(s.code, berth_sdk::Code::Error);
    }
}
