//! The tables of `eval` and `eval report`: pure functions of the result records.

use super::results::RunRecord;
use super::stats::{beyond_noise, median, pass_at_k, pass_hat_k, wilson};
use std::collections::BTreeMap;
use std::fmt::Write;

/// What the table says of one task (or of all of them).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub runs: u64,
    pub solved: u64,
    pub impossible: bool,
    pub median_turns: Option<f64>,
    pub median_cost: Option<f64>,
    pub total_cost: f64,
    pub median_wall: Option<f64>,
    /// The harness's own time (outside the model and the confined processes), where known.
    pub median_harness: Option<f64>,
}

impl Summary {
    pub fn of(records: &[&RunRecord]) -> Summary {
        let costs: Vec<f64> = records.iter().filter_map(|r| r.cost_usd).collect();
        let pick = |f: fn(&RunRecord) -> f64| records.iter().map(|r| f(r)).collect::<Vec<_>>();
        Summary {
            runs: records.len() as u64,
            solved: records.iter().filter(|r| r.solved).count() as u64,
            impossible: records.iter().any(|r| r.impossible),
            median_turns: median(&pick(|r| r.turns as f64)),
            median_cost: median(&costs),
            total_cost: costs.iter().sum(),
            median_wall: median(&pick(|r| r.wall_secs)),
            median_harness: median(
                &records
                    .iter()
                    .filter_map(|r| r.harness_secs)
                    .collect::<Vec<_>>(),
            ),
        }
    }

    pub fn rate(&self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            self.solved as f64 / self.runs as f64
        }
    }

    /// Total cost over solved runs; None when nothing was solved.
    pub fn cost_per_solved(&self) -> Option<f64> {
        (self.solved > 0).then(|| self.total_cost / self.solved as f64)
    }
}

/// The records grouped by task name, in name order.
pub fn by_task(records: &[RunRecord]) -> BTreeMap<&str, Vec<&RunRecord>> {
    let mut tasks: BTreeMap<&str, Vec<&RunRecord>> = BTreeMap::new();
    for record in records {
        tasks.entry(record.task.as_str()).or_default().push(record);
    }
    tasks
}

fn opt(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

fn money(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("${v:.4}"))
}

/// The table per task and the totals, as `eval` and `eval report` print them.
pub fn table(records: &[RunRecord]) -> String {
    let mut out = String::new();
    let width = records
        .iter()
        .map(|r| r.task.len() + if r.impossible { 4 } else { 0 })
        .max()
        .unwrap_or(0)
        .max(28);
    let _ = writeln!(
        out,
        "{:<width$} {:>4} {:>6} {:>6} {:>7} {:>7} {:>6} {:>9} {:>10} {:>7} {:>9}",
        "task",
        "runs",
        "solved",
        "rate",
        "pass@n",
        "pass^n",
        "turns",
        "cost",
        "$/solved",
        "wall s",
        "harness s"
    );
    for (name, runs) in by_task(records) {
        let s = Summary::of(&runs);
        let label = if s.impossible {
            format!("{name} (i)")
        } else {
            name.to_string()
        };
        let _ = writeln!(
            out,
            "{:<width$} {:>4} {:>6} {:>6.2} {:>7} {:>7} {:>6} {:>9} {:>10} {:>7} {:>9}",
            label,
            s.runs,
            s.solved,
            s.rate(),
            opt(pass_at_k(s.runs, s.solved, s.runs), 2),
            opt(pass_hat_k(s.runs, s.solved, s.runs), 2),
            opt(s.median_turns, 1),
            money(s.median_cost),
            money(s.cost_per_solved()),
            opt(s.median_wall, 1),
            opt(s.median_harness, 2),
        );
    }
    out.push_str(&totals(records));
    out
}

/// For best-of-N runs: the rate of the chosen attempts beside that of one attempt alone.
fn best_of(records: &[RunRecord], s: &Summary) -> String {
    let sets: Vec<_> = records.iter().filter_map(|r| r.attempts.as_ref()).collect();
    let Some(n) = sets.iter().map(|a| a.n).max() else {
        return String::new();
    };
    let tried: u64 = sets.iter().map(|a| u64::from(a.n)).sum();
    let alone: u64 = sets.iter().map(|a| u64::from(a.solved)).sum();
    let one = if tried == 0 {
        0.0
    } else {
        alone as f64 / tried as f64
    };
    format!(
        "best of {n}: {} of {} runs solved by the chosen attempt, rate {:.3}; pass@1 (one \
         attempt alone) {one:.3}, {alone} of {tried} attempts; cost counts every attempt\n",
        s.solved,
        s.runs,
        s.rate()
    )
}

/// The totals line and the legend.
fn totals(records: &[RunRecord]) -> String {
    let all: Vec<&RunRecord> = records.iter().collect();
    let s = Summary::of(&all);
    let (lo, hi) = wilson(s.solved, s.runs);
    let best = best_of(records, &s);
    let rate = match best.is_empty() {
        true => "rate = pass@1 = pass^1",
        false => "rate: of the runs, each the chosen one of its attempts",
    };
    best + &format!(
        "total: {} tasks, {} runs, {} solved, pass rate {:.3} (95% Wilson interval {:.3}-{:.3}), \
         cost ${:.4}, {} per solved run, median wall {} s, median harness {} s\n\
         {rate}; pass@n and pass^n with n = that task's runs (unbiased \
         estimators); turns, cost, wall and harness (agent-git's own time, outside the model \
         and the tests and commands) are medians; (i) an impossible task: solved = NOT \
         passed\n",
        by_task(records).len(),
        s.runs,
        s.solved,
        s.rate(),
        lo,
        hi,
        s.total_cost,
        money(s.cost_per_solved()),
        opt(s.median_wall, 1),
        opt(s.median_harness, 2),
    )
}

/// Two configurations task by task: the pass rates, their difference and whether it is beyond
/// noise (the two 95% Wilson intervals do not overlap).
pub fn compare(a: &[RunRecord], b: &[RunRecord]) -> String {
    let (ta, tb) = (by_task(a), by_task(b));
    let mut names: Vec<&str> = ta.keys().chain(tb.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    let mut out = format!(
        "{:<28} {:>12} {:>12} {:>7}  beyond noise\n",
        "task", "A solved", "B solved", "B - A"
    );
    let count = |runs: Option<&Vec<&RunRecord>>| {
        runs.map_or((0, 0), |r| {
            let s = Summary::of(r);
            (s.solved, s.runs)
        })
    };
    for name in names {
        let _ = writeln!(
            out,
            "{}",
            compare_line(name, count(ta.get(name)), count(tb.get(name)))
        );
    }
    let all = |r: &[RunRecord]| (r.iter().filter(|r| r.solved).count() as u64, r.len() as u64);
    let _ = writeln!(out, "{}", compare_line("total", all(a), all(b)));
    out.push_str(
        "A = the results files, B = --vs; beyond noise: the two 95% Wilson intervals do not \
         overlap\n",
    );
    out
}

fn compare_line(name: &str, a: (u64, u64), b: (u64, u64)) -> String {
    let rate = |(c, n): (u64, u64)| if n == 0 { 0.0 } else { c as f64 / n as f64 };
    let cell = |(c, n): (u64, u64)| format!("{c}/{n} {:.2}", rate((c, n)));
    let verdict = if beyond_noise(a, b) { "yes" } else { "no" };
    format!(
        "{:<28} {:>12} {:>12} {:>+7.2}  {verdict}",
        name,
        cell(a),
        cell(b),
        rate(b) - rate(a)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::results::Tokens;

    fn record(task: &str, run: u32, solved: bool, cost: f64) -> RunRecord {
        RunRecord {
            task: task.into(),
            run,
            model: "m".into(),
            outcome: if solved { "passed" } else { "turn-limit" }.into(),
            passed: solved,
            impossible: false,
            solved,
            tests: serde_json::Value::Null,
            vanished: Vec::new(),
            turns: u64::from(run) + 1,
            tokens: Tokens::default(),
            cost_usd: Some(cost),
            wall_secs: 2.0,
            harness_secs: None,
            required_tests: None,
            attempts: None,
            kept: None,
        }
    }

    #[test]
    fn a_task_summary_counts_solved_runs_and_cost_per_solved() {
        let runs = [record("a", 0, true, 0.5), record("a", 1, false, 1.5)];
        let s = Summary::of(&runs.iter().collect::<Vec<_>>());
        assert_eq!(
            s,
            Summary {
                runs: 2,
                solved: 1,
                impossible: false,
                median_turns: Some(1.5),
                median_cost: Some(1.0),
                total_cost: 2.0,
                median_wall: Some(2.0),
                median_harness: None,
            }
        );
        assert_eq!(s.cost_per_solved(), Some(2.0));
    }

    #[test]
    fn the_table_has_a_line_per_task_and_totals() {
        let runs = [
            record("b", 0, true, 0.0),
            record("a", 0, false, 0.0),
            record("a", 1, true, 0.0),
        ];
        let text = table(&runs);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("a ") && lines[2].starts_with("b "));
        assert!(lines[1].contains(" 0.50 ") && lines[1].contains(" 1.00 "));
        assert!(lines[3].starts_with("total: 2 tasks, 3 runs, 2 solved"));
    }

    #[test]
    fn a_comparison_says_whether_the_difference_is_beyond_noise() {
        assert_eq!(
            compare_line("t", (0, 20), (20, 20)),
            format!(
                "{:<28} {:>12} {:>12} {:>7}  yes",
                "t", "0/20 0.00", "20/20 1.00", "+1.00"
            )
        );
        assert!(compare_line("t", (1, 2), (2, 2)).ends_with("no"));
    }
}
