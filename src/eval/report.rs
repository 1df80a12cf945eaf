//! The tables of `eval` and `eval report`: pure functions of the result records.

use super::results::RunRecord;
use super::stats::{beyond_noise, median, pass_at_k, pass_hat_k, wilson};
use std::collections::BTreeMap;
use std::fmt::Write;

/// What the table says of one task (or of all of them).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Runs recorded.
    pub runs: u64,
    /// Runs that solved the task: passed, or for an impossible task did not.
    pub solved: u64,
    /// Some run's task is marked impossible.
    pub impossible: bool,
    /// Median model replies per run; None for no runs.
    pub median_turns: Option<f64>,
    /// Median cost per run in US dollars, of the runs whose cost is known; None when none is.
    pub median_cost: Option<f64>,
    /// Cost of all runs in US dollars, counting only known costs.
    pub total_cost: f64,
    /// Median wall-clock seconds per run; None for no runs.
    pub median_wall: Option<f64>,
    /// The harness's own time (outside the model and the confined processes), where known.
    pub median_harness: Option<f64>,
}

impl Summary {
    /// The summary of `records`, all of one task or of the whole table.
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

    /// The share of runs that solved the task, from 0 to 1; 0 for no runs.
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

/// The columns of the table, the task's name first.
pub const COLUMNS: [&str; 11] = [
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
    "harness s",
];

/// The width of each column but the first in the text table.
const WIDTHS: [usize; 10] = [4, 6, 6, 7, 7, 6, 9, 10, 7, 9];

/// A task's cells of the table but its name, as the text and the HTML table show them;
/// pass@n and pass^n with n = the task's runs.
pub fn cells(s: &Summary) -> Vec<String> {
    vec![
        s.runs.to_string(),
        s.solved.to_string(),
        format!("{:.2}", s.rate()),
        opt(pass_at_k(s.runs, s.solved, s.runs), 2),
        opt(pass_hat_k(s.runs, s.solved, s.runs), 2),
        opt(s.median_turns, 1),
        money(s.median_cost),
        money(s.cost_per_solved()),
        opt(s.median_wall, 1),
        opt(s.median_harness, 2),
    ]
}

/// A task's name as the tables show it: `(i)` marks an impossible task.
pub fn label(name: &str, impossible: bool) -> String {
    if impossible {
        format!("{name} (i)")
    } else {
        name.to_string()
    }
}

fn text_line(out: &mut String, width: usize, label: &str, cells: &[String]) {
    let _ = write!(out, "{label:<width$}");
    for (cell, w) in cells.iter().zip(WIDTHS) {
        let _ = write!(out, " {cell:>w$}");
    }
    out.push('\n');
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
    let header: Vec<String> = COLUMNS[1..].iter().map(|c| c.to_string()).collect();
    text_line(&mut out, width, COLUMNS[0], &header);
    for (name, runs) in by_task(records) {
        let s = Summary::of(&runs);
        text_line(&mut out, width, &label(name, s.impossible), &cells(&s));
    }
    out.push_str(&totals(records));
    out
}

/// How the attempts of best-of-N runs went, for the rate of one attempt alone (pass@1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BestOf {
    /// The most attempts of any run.
    pub n: u32,
    /// Attempts that solved the task on their own, of all `tried`.
    pub alone: u64,
    /// All attempts of all best-of-N runs.
    pub tried: u64,
}

impl BestOf {
    /// None when no record is of a best-of-N run.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a RunRecord>) -> Option<BestOf> {
        let sets: Vec<_> = records
            .into_iter()
            .filter_map(|r| r.attempts.as_ref())
            .collect();
        Some(BestOf {
            n: sets.iter().map(|a| a.n).max()?,
            alone: sets.iter().map(|a| u64::from(a.solved)).sum(),
            tried: sets.iter().map(|a| u64::from(a.n)).sum(),
        })
    }

    /// pass@1: of the attempts, the share that solved the task alone.
    pub fn one_alone(&self) -> f64 {
        if self.tried == 0 {
            0.0
        } else {
            self.alone as f64 / self.tried as f64
        }
    }
}

/// For best-of-N runs: the rate of the chosen attempts beside that of one attempt alone.
fn best_of(records: &[RunRecord], s: &Summary) -> String {
    let Some(best) = BestOf::of(records) else {
        return String::new();
    };
    format!(
        "best of {}: {} of {} runs solved by the chosen attempt, rate {:.3}; pass@1 (one \
         attempt alone) {:.3}, {} of {} attempts; cost counts every attempt\n",
        best.n,
        s.solved,
        s.runs,
        s.rate(),
        best.one_alone(),
        best.alone,
        best.tried
    )
}

/// The totals line and the legend.
pub fn totals(records: &[RunRecord]) -> String {
    let all: Vec<&RunRecord> = records.iter().collect();
    let s = Summary::of(&all);
    let (lo, hi) = wilson(s.solved, s.runs);
    let best = best_of(records, &s);
    let rate = match best.is_empty() {
        true => "rate = pass@1 = pass^1",
        false => "rate: of the runs, each the chosen one of its attempts",
    };
    best + &format!(
        "total: {}, {}, {} solved, pass rate {:.3} (95% Wilson interval {:.3}-{:.3}), \
         cost ${:.4}, {} per solved run, median wall {} s, median harness {} s\n\
         {rate}; pass@n and pass^n with n = that task's runs (unbiased \
         estimators); turns, cost, wall and harness (agent-git's own time, outside the model \
         and the tests and commands) are medians; (i) an impossible task: solved = NOT \
         passed\n",
        crate::text::count(by_task(records).len() as u64, "task"),
        crate::text::count(s.runs, "run"),
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

/// One line of a comparison: a task's (solved, runs) in A and in B.
#[derive(Debug, Clone, PartialEq)]
pub struct Versus<'a> {
    /// The task's name; `total` for the line of all tasks.
    pub task: &'a str,
    /// (solved, runs) in the results files (A); (0, 0) when the task is not among them.
    pub a: (u64, u64),
    /// (solved, runs) in the `--vs` files (B); (0, 0) when the task is not among them.
    pub b: (u64, u64),
}

fn rate_of((solved, runs): (u64, u64)) -> f64 {
    if runs == 0 {
        0.0
    } else {
        solved as f64 / runs as f64
    }
}

impl Versus<'_> {
    /// `solved/runs rate` of one side.
    pub fn cell(side: (u64, u64)) -> String {
        format!("{}/{} {:.2}", side.0, side.1, rate_of(side))
    }

    /// B's pass rate less A's.
    pub fn difference(&self) -> f64 {
        rate_of(self.b) - rate_of(self.a)
    }

    /// The two 95% Wilson intervals do not overlap.
    pub fn beyond_noise(&self) -> bool {
        beyond_noise(self.a, self.b)
    }
}

/// Two configurations task by task, in name order, and then the totals (task `total`).
pub fn versus<'a>(a: &'a [RunRecord], b: &'a [RunRecord]) -> Vec<Versus<'a>> {
    let (ta, tb) = (by_task(a), by_task(b));
    let mut names: Vec<&str> = ta.keys().chain(tb.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    let count = |runs: Option<&Vec<&RunRecord>>| {
        runs.map_or((0, 0), |r| {
            let s = Summary::of(r);
            (s.solved, s.runs)
        })
    };
    let all = |r: &[RunRecord]| (r.iter().filter(|r| r.solved).count() as u64, r.len() as u64);
    let mut rows: Vec<Versus> = names
        .into_iter()
        .map(|task| Versus {
            task,
            a: count(ta.get(task)),
            b: count(tb.get(task)),
        })
        .collect();
    rows.push(Versus {
        task: "total",
        a: all(a),
        b: all(b),
    });
    rows
}

/// What the comparison's columns mean.
pub const VERSUS_NOTE: &str = "A = the results files, B = --vs; beyond noise: the two 95% \
                               Wilson intervals do not overlap";

/// Two configurations task by task: the pass rates, their difference and whether it is beyond
/// noise (the two 95% Wilson intervals do not overlap).
pub fn compare(a: &[RunRecord], b: &[RunRecord]) -> String {
    let mut out = format!(
        "{:<28} {:>12} {:>12} {:>7}  beyond noise\n",
        "task", "A solved", "B solved", "B - A"
    );
    for row in versus(a, b) {
        let _ = writeln!(out, "{}", compare_line(&row));
    }
    out.push_str(VERSUS_NOTE);
    out.push('\n');
    out
}

fn compare_line(row: &Versus) -> String {
    let verdict = if row.beyond_noise() { "yes" } else { "no" };
    format!(
        "{:<28} {:>12} {:>12} {:>+7.2}  {verdict}",
        row.task,
        Versus::cell(row.a),
        Versus::cell(row.b),
        row.difference()
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
            compare_line(&Versus {
                task: "t",
                a: (0, 20),
                b: (20, 20)
            }),
            format!(
                "{:<28} {:>12} {:>12} {:>7}  yes",
                "t", "0/20 0.00", "20/20 1.00", "+1.00"
            )
        );
        let close = Versus {
            task: "t",
            a: (1, 2),
            b: (2, 2),
        };
        assert!(compare_line(&close).ends_with("no"));
    }
}
