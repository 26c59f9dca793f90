//! Small building blocks that several plugins share, as upstream's
//! `framework/plugins/helper` package.

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
        // Widened so a large raw score cannot overflow the product.
        let scaled = (i128::from(max) * i128::from(*score) / i128::from(highest)) as i64;
        *score = if reverse { max - scaled } else { scaled };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_NODE_SCORE;

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
    fn huge_scores_do_not_overflow() {
        assert_eq!(normalized(false, &[i64::MAX, i64::MAX / 2]), [100, 49]);
    }
}
