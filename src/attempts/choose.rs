//! Which attempt of a set wins, and why: pure, so the rule is tested by whole values.

use std::cmp::Ordering;

/// What the choice looks at of one finished attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// The attempt's run, named in the reason for the choice.
    pub run_id: String,
    /// Its outcome was `passed`; a pass beats any failure.
    pub passed: bool,
    /// Failing tests and tests that vanished; None when the run's last test result named no
    /// test (it timed out, or only its exit code was read): then nothing is known of them.
    pub failing: Option<usize>,
    /// Lines added and removed from the base to the last edit (a binary file counts one).
    pub changed_lines: usize,
    /// Dollars; None when no price is known (it then counts as no cost).
    pub cost: Option<f64>,
}

/// The rule, in order: passed beats not passed, then fewer failing tests (a run whose count
/// is not known after every one whose count is), then the smaller diff, then the lower cost;
/// a tie on all of these goes to the lower run id.
fn rank(a: &Standing, b: &Standing) -> Ordering {
    let failing = |s: &Standing| (s.failing.is_none(), s.failing.unwrap_or(0));
    b.passed
        .cmp(&a.passed)
        .then(failing(a).cmp(&failing(b)))
        .then(a.changed_lines.cmp(&b.changed_lines))
        .then(
            a.cost
                .unwrap_or(0.0)
                .partial_cmp(&b.cost.unwrap_or(0.0))
                .unwrap_or(Ordering::Equal),
        )
        .then(a.run_id.cmp(&b.run_id))
}

/// The index of the winner among `standings` and the sentence that says why it won over the
/// runner-up; None when there is nothing to choose from.
pub fn choose(standings: &[Standing]) -> Option<(usize, String)> {
    let mut order: Vec<usize> = (0..standings.len()).collect();
    order.sort_by(|&a, &b| rank(&standings[a], &standings[b]));
    let winner = *order.first()?;
    let Some(&second) = order.get(1) else {
        return Some((winner, "it is the only attempt that ended".to_string()));
    };
    Some((winner, why(&standings[winner], &standings[second])))
}

/// The first rule that tells `won` from `next`, in words.
fn why(won: &Standing, next: &Standing) -> String {
    if won.passed != next.passed {
        return format!("it passed, and the next best (run {}) did not", next.run_id);
    }
    let head = match won.passed {
        true => format!("it passed, as did run {}; ", next.run_id),
        false => String::new(),
    };
    match (won.failing, next.failing) {
        (Some(a), Some(b)) if a != b => {
            return format!(
                "{head}fewer tests fail ({a} against {b} in run {})",
                next.run_id
            )
        }
        (Some(a), None) => {
            return format!(
                "{head}{a} tests fail, where run {}'s last test run named none (it timed out, \
                 or only its exit code could be read)",
                next.run_id
            )
        }
        _ => {}
    }
    if won.changed_lines != next.changed_lines {
        return format!(
            "{head}its diff is smaller ({} changed lines against {} in run {})",
            won.changed_lines, next.changed_lines, next.run_id
        );
    }
    let (a, b) = (won.cost.unwrap_or(0.0), next.cost.unwrap_or(0.0));
    if a != b {
        return format!(
            "{head}as many failing tests and changed lines as run {}, at a lower cost \
             (${a:.4} against ${b:.4})",
            next.run_id
        );
    }
    format!(
        "{head}a tie with run {} on failing tests, changed lines and cost: the lower run id wins",
        next.run_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing(run_id: &str, passed: bool, failing: usize, lines: usize, cost: f64) -> Standing {
        Standing {
            run_id: run_id.into(),
            passed,
            failing: Some(failing),
            changed_lines: lines,
            cost: Some(cost),
        }
    }

    #[test]
    fn passed_beats_failing_then_fewer_failures_then_smaller_diff_then_cost_then_id() {
        let set = [
            standing("c3", false, 0, 1, 0.0),
            standing("b2", true, 0, 9, 0.5),
            standing("a1", false, 2, 1, 0.0),
        ];
        assert_eq!(
            choose(&set),
            Some((
                1,
                "it passed, and the next best (run c3) did not".to_string()
            ))
        );
        let set = [
            standing("a1", false, 3, 1, 0.0),
            standing("b2", false, 1, 9, 0.5),
        ];
        assert_eq!(
            choose(&set),
            Some((1, "fewer tests fail (1 against 3 in run a1)".to_string()))
        );
        let set = [
            standing("a1", true, 0, 6, 0.0),
            standing("b2", true, 0, 2, 0.5),
        ];
        assert_eq!(
            choose(&set),
            Some((
                1,
                "it passed, as did run a1; its diff is smaller (2 changed lines against 6 in \
                 run a1)"
                    .to_string()
            ))
        );
        let set = [
            standing("a1", true, 0, 2, 0.02),
            standing("b2", true, 0, 2, 0.01),
        ];
        assert_eq!(choose(&set).map(|(i, _)| i), Some(1), "the lower cost wins");
        let set = [
            standing("b2", true, 0, 2, 0.01),
            standing("a1", true, 0, 2, 0.01),
        ];
        assert_eq!(
            choose(&set),
            Some((
                1,
                "it passed, as did run b2; a tie with run b2 on failing tests, changed lines \
                 and cost: the lower run id wins"
                    .to_string()
            ))
        );
    }

    #[test]
    fn a_run_whose_failures_are_not_known_comes_after_every_known_count() {
        let timed_out = Standing {
            failing: None,
            ..standing("a1", false, 0, 1, 0.0)
        };
        let set = [timed_out, standing("b2", false, 7, 9, 0.5)];
        assert_eq!(
            choose(&set),
            Some((
                1,
                "7 tests fail, where run a1's last test run named none (it timed out, or only \
                 its exit code could be read)"
                    .to_string()
            ))
        );
    }

    #[test]
    fn one_attempt_wins_alone_and_none_chooses_nothing() {
        assert_eq!(
            choose(&[standing("a1", false, 1, 0, 0.0)]),
            Some((0, "it is the only attempt that ended".to_string()))
        );
        assert_eq!(choose(&[]), None);
    }

    #[test]
    fn an_unknown_cost_counts_as_none() {
        let mut priced = standing("a1", true, 0, 2, 0.01);
        let unpriced = Standing {
            cost: None,
            ..standing("b2", true, 0, 2, 0.0)
        };
        assert_eq!(
            choose(&[priced.clone(), unpriced.clone()]).map(|(i, _)| i),
            Some(1)
        );
        priced.cost = Some(0.0);
        assert_eq!(choose(&[priced, unpriced]).map(|(i, _)| i), Some(0));
    }
}
