//! The summary of a set: one line per attempt (outcome, tests, diff, cost), the choice and
//! why. The same text is printed and stored as the set's commit message; `--json` has it all
//! as values.

use super::choose::{choose, Standing};
use git2::{Oid, Repository};
use serde_json::{json, Value};

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptEnd {
    /// Which attempt, from 1.
    pub index: u32,
    /// The run, when the attempt ended with a report.
    pub run_id: Option<String>,
    /// The run's branch, when it kept one.
    pub branch: Option<String>,
    /// The run's outcome, or `not-started` / `no-report`.
    pub outcome: String,
    /// The outcome was `passed`.
    pub passed: bool,
    /// The last test run's summary from the attempt's `--json` (`3 passed, 1 failed`); empty
    /// without a report.
    pub tests: String,
    /// Failing and vanished tests; None when the last test run named none.
    pub failing: Option<usize>,
    /// Lines the branch adds to the base.
    pub added: usize,
    /// Lines the branch removes from the base.
    pub removed: usize,
    /// Dollars; None when no price is known or it has no report.
    pub cost: Option<f64>,
    /// The attempt's process's exit code; None when it did not start or a signal ended it.
    pub exit_code: Option<i32>,
    /// Why an attempt has no report: not started, or its last words.
    pub note: Option<String>,
    /// The attempt's own `fix --json` object (Null without one).
    pub report: Value,
}

impl AttemptEnd {
    /// An attempt whose process never started, and `why`.
    pub fn not_started(index: u32, why: &str) -> AttemptEnd {
        AttemptEnd {
            index,
            run_id: None,
            branch: None,
            outcome: "not-started".into(),
            passed: false,
            tests: String::new(),
            failing: None,
            added: 0,
            removed: 0,
            cost: None,
            exit_code: None,
            note: Some(why.to_string()),
            report: Value::Null,
        }
    }

    /// An attempt whose process ended with `code`, having printed `report` (its `--json`).
    pub fn of_run(
        repo: &Repository,
        index: u32,
        code: Option<i32>,
        report: Value,
        last_line: String,
    ) -> AttemptEnd {
        let Some(run_id) = report["run_id"].as_str().map(str::to_string) else {
            let note = match last_line.trim().is_empty() {
                true => match code {
                    Some(code) => format!("exited {code} before its run began"),
                    None => "killed before its run began".to_string(),
                },
                false => last_line,
            };
            return AttemptEnd {
                outcome: "no-report".into(),
                exit_code: code,
                note: Some(note),
                ..AttemptEnd::not_started(index, "")
            };
        };
        let tests = &report["tests"];
        let passed = report["outcome"] == "passed";
        let listed = |key: &str| tests[key].as_array().map_or(0, Vec::len);
        let uncounted = tests["vanished_uncounted"].as_u64().unwrap_or(0) as usize;
        let counted = listed("failing") + listed("vanished") + uncounted;
        // A run that failed naming no test (a timeout, an exit code alone) has failures nobody
        // counted: they are not known, not one.
        let named = !tests["passing"].is_null() || counted > 0;
        let failing = (passed || named).then_some(counted);
        let (added, removed) = diff_size(repo, &report).unwrap_or((0, 0));
        AttemptEnd {
            index,
            run_id: Some(run_id),
            branch: report["branch"].as_str().map(str::to_string),
            outcome: report["outcome"].as_str().unwrap_or("unknown").to_string(),
            passed,
            tests: tests["summary"].as_str().unwrap_or("").to_string(),
            failing,
            added,
            removed,
            cost: report["cost_usd"].as_f64(),
            exit_code: code,
            note: None,
            report,
        }
    }

    /// How it ended, in a line.
    pub fn line(&self) -> String {
        match &self.run_id {
            Some(run) => format!(
                "{} (run {run}, {}, +{} -{}, {})",
                self.outcome,
                self.tests,
                self.added,
                self.removed,
                cost_text(self.cost)
            ),
            None => format!(
                "{}: {}",
                self.outcome,
                self.note.as_deref().unwrap_or_default()
            ),
        }
    }

    fn standing(&self) -> Option<Standing> {
        Some(Standing {
            run_id: self.run_id.clone()?,
            passed: self.passed,
            failing: self.failing,
            changed_lines: self.added + self.removed,
            cost: self.cost,
        })
    }

    fn json(&self) -> Value {
        json!({
            "index": self.index,
            "run_id": self.run_id,
            "branch": self.branch,
            "outcome": self.outcome,
            "passed": self.passed,
            "tests": self.tests,
            "failing": self.failing,
            "changed_lines": {"added": self.added, "removed": self.removed},
            "cost_usd": self.cost,
            "exit_code": self.exit_code,
            "note": self.note,
            "report": self.report,
        })
    }
}

/// Lines added and removed from the run's base to its last edit (the report commit's parent).
fn diff_size(repo: &Repository, report: &Value) -> Option<(usize, usize)> {
    let base = Oid::from_str(report["base"].as_str()?).ok()?;
    let Some(tip) = report["report_commit"].as_str() else {
        return Some((0, 0));
    };
    let last_edit = repo
        .find_commit(Oid::from_str(tip).ok()?)
        .ok()?
        .parent_id(0)
        .ok()?;
    let old = repo.find_commit(base).ok()?.tree().ok()?;
    let new = repo.find_commit(last_edit).ok()?.tree().ok()?;
    let files = crate::workspace::diffstat(repo, &old, &new).ok()?;
    Some(files.iter().fold((0, 0), |(a, r), f| {
        // A binary file counts as one changed line.
        let binary = usize::from(f.binary);
        (a + f.added + binary, r + f.removed)
    }))
}

/// The widest an attempt's note is in the table.
const NOTE_WIDTH: usize = 60;

fn cost_text(cost: Option<f64>) -> String {
    cost.map_or("cost unknown".to_string(), |c| format!("${c:.4}"))
}

/// A whole set: its attempts and the choice.
#[derive(Debug, Clone, PartialEq)]
pub struct SetSummary {
    /// The set's id.
    pub set: String,
    /// The base commit every attempt started from, in full.
    pub base: String,
    /// The set's cost budget in dollars, shared by its attempts.
    pub max_cost: Option<f64>,
    /// Every attempt, in attempt order.
    pub attempts: Vec<AttemptEnd>,
    /// The index in `attempts` of the chosen one, and why it won.
    pub chosen: Option<(usize, String)>,
}

impl SetSummary {
    /// The summary of these attempts, the choice made among those that ended with a report.
    pub fn new(
        set: String,
        base: String,
        max_cost: Option<f64>,
        attempts: Vec<AttemptEnd>,
    ) -> SetSummary {
        let ranked: Vec<(usize, Standing)> = attempts
            .iter()
            .enumerate()
            .filter_map(|(i, a)| Some((i, a.standing()?)))
            .collect();
        let standings: Vec<Standing> = ranked.iter().map(|(_, s)| s.clone()).collect();
        let chosen = choose(&standings).map(|(i, why)| (ranked[i].0, why));
        SetSummary {
            set,
            base,
            max_cost,
            attempts,
            chosen,
        }
    }

    /// What every attempt spent together (0, never -0, when none did).
    pub fn spent(&self) -> f64 {
        self.attempts.iter().filter_map(|a| a.cost).sum::<f64>() + 0.0
    }

    /// The attempt that won; None when no attempt ended with a report.
    pub fn chosen(&self) -> Option<&AttemptEnd> {
        self.chosen.as_ref().map(|(i, _)| &self.attempts[*i])
    }

    /// The exit code of the chosen attempt; without one, 130 when interrupted, 2 when every
    /// attempt was refused as a usage error, else 4.
    pub fn exit_code(&self, interrupted: bool) -> u8 {
        if let Some(code) = self.chosen().and_then(|a| a.exit_code) {
            return u8::try_from(code).unwrap_or(4);
        }
        if interrupted {
            return 130;
        }
        // Refused as a usage error, or not started at all (budgets too small for one).
        let refused = |a: &AttemptEnd| a.exit_code == Some(2) || a.outcome == "not-started";
        match !self.attempts.is_empty() && self.attempts.iter().all(refused) {
            true => 2,
            false => 4,
        }
    }

    /// The summary as printed and stored: the choice, a line per attempt, what to do next,
    /// and the trailers `runs`, `show` and `apply` read.
    pub fn message(&self) -> String {
        let n = self.attempts.len();
        let mut out = Vec::new();
        out.push(match self.chosen() {
            Some(a) => format!(
                "agent-git: best of {n} attempts: run {} {}",
                a.run_id.as_deref().unwrap_or("-"),
                a.outcome
            ),
            None => format!("agent-git: {n} attempts, none ended with a report"),
        });
        out.push(String::new());
        out.push(format!(
            "Set: {}, {n} attempts from {}",
            self.set,
            &self.base[..self.base.len().min(7)]
        ));
        if let Some(max) = self.max_cost {
            let spent = self.spent();
            out.push(format!("Cost: ${spent:.4} of the set's ${max:.4}"));
        }
        if let (Some(a), Some((_, why))) = (self.chosen(), &self.chosen) {
            out.push(format!(
                "Chosen: attempt {}, run {} ({}): {why}",
                a.index,
                a.run_id.as_deref().unwrap_or("-"),
                a.branch.as_deref().unwrap_or("no branch kept")
            ));
        }
        out.push(String::new());
        out.extend(self.table());
        let chosen_run = self.chosen().and_then(|a| a.run_id.clone());
        let kept = self.chosen().is_some_and(|a| a.branch.is_some());
        if let Some(run) = chosen_run.as_ref().filter(|_| kept) {
            out.push(String::new());
            out.push(format!("Review: agent-git show {run}"));
            out.push(format!("Land:   agent-git apply {}", self.set));
            let others: Vec<&str> = self
                .attempts
                .iter()
                .filter(|a| a.branch.is_some() && a.run_id.as_ref() != Some(run))
                .filter_map(|a| a.run_id.as_deref())
                .collect();
            if !others.is_empty() {
                out.push(format!(
                    "Others: agent-git discard RUN ({})",
                    others.join(", ")
                ));
            }
        }
        out.push(String::new());
        out.push(format!("Agent-Set: {}", self.set));
        out.push(format!("Agent-Attempts: {n}"));
        out.push(format!("Agent-Base: {}", self.base));
        if let Some(run) = chosen_run {
            out.push(format!("Agent-Chosen: {run}"));
        }
        let runs: Vec<&str> = self
            .attempts
            .iter()
            .filter_map(|a| a.run_id.as_deref())
            .collect();
        out.push(format!(
            "Agent-Attempt-Runs: {}",
            if runs.is_empty() {
                "none".to_string()
            } else {
                runs.join(", ")
            }
        ));
        let lines: Vec<String> = out.iter().map(|l| crate::text::one_line(l)).collect();
        lines.join("\n") + "\n"
    }

    /// A line per attempt, in columns.
    fn table(&self) -> Vec<String> {
        let header = ["#", "RUN", "OUTCOME", "TESTS", "DIFF", "COST", ""];
        let chosen = self.chosen.as_ref().map(|(i, _)| *i);
        let rows: Vec<[String; 7]> = self
            .attempts
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let ran = a.run_id.is_some();
                [
                    a.index.to_string(),
                    a.run_id.clone().unwrap_or_else(|| "-".into()),
                    a.outcome.clone(),
                    match ran {
                        true => a.tests.clone(),
                        // In full in --json.
                        false => {
                            crate::text::truncate(a.note.as_deref().unwrap_or_default(), NOTE_WIDTH)
                        }
                    },
                    match ran {
                        true => format!("+{} -{}", a.added, a.removed),
                        false => "-".into(),
                    },
                    match ran {
                        true => cost_text(a.cost),
                        false => "-".into(),
                    },
                    if chosen == Some(i) { "chosen" } else { "" }.to_string(),
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[&str]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:w$}"))
                .collect();
            format!("  {}", padded.join("  ").trim_end())
        };
        let mut out = vec![line(&header)];
        for row in &rows {
            out.push(line(&row.iter().map(String::as_str).collect::<Vec<_>>()));
        }
        out
    }

    /// The `fix --attempts --json` object.
    pub fn json(&self) -> Value {
        json!({
            "set": self.set,
            "base": self.base,
            "max_cost_usd": self.max_cost,
            "cost_usd": self.spent(),
            "attempts": self.attempts.iter().map(AttemptEnd::json).collect::<Vec<_>>(),
            "chosen": self.chosen.as_ref().map(|(i, why)| {
                let a = &self.attempts[*i];
                json!({"index": a.index, "run_id": a.run_id, "branch": a.branch, "why": why})
            }),
            "summary_ref": format!("{}{}", crate::workspace::sets::SETS_REF_PREFIX, self.set),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(index: u32, run: &str, outcome: &str, lines: (usize, usize)) -> AttemptEnd {
        let passed = outcome == "passed";
        AttemptEnd {
            index,
            run_id: Some(run.into()),
            branch: Some(format!("agent/fix-{run}")),
            outcome: outcome.into(),
            passed,
            tests: if passed {
                "4 passed"
            } else {
                "3 passed, 1 failed"
            }
            .into(),
            failing: Some(usize::from(!passed)),
            added: lines.0,
            removed: lines.1,
            cost: Some(0.0),
            exit_code: Some(if passed { 0 } else { 1 }),
            note: None,
            report: Value::Null,
        }
    }

    #[test]
    fn the_summary_lists_every_attempt_and_says_why_the_chosen_one_won() {
        let summary = SetSummary::new(
            "s0a1b2c3".into(),
            "0123456789abcdef0123456789abcdef01234567".into(),
            Some(0.5),
            vec![
                ran(1, "aa000001", "turn-limit", (3, 1)),
                ran(2, "bb000002", "passed", (4, 2)),
                ran(3, "cc000003", "passed", (1, 1)),
                AttemptEnd::not_started(4, "not started: the set's time budget is spent"),
            ],
        );
        assert_eq!(summary.exit_code(false), 0);
        assert_eq!(
            summary.message(),
            "\
agent-git: best of 4 attempts: run cc000003 passed

Set: s0a1b2c3, 4 attempts from 0123456
Cost: $0.0000 of the set's $0.5000
Chosen: attempt 3, run cc000003 (agent/fix-cc000003): it passed, as did run bb000002; its diff is smaller (2 changed lines against 6 in run bb000002)

  #  RUN       OUTCOME      TESTS                                        DIFF   COST
  1  aa000001  turn-limit   3 passed, 1 failed                           +3 -1  $0.0000
  2  bb000002  passed       4 passed                                     +4 -2  $0.0000
  3  cc000003  passed       4 passed                                     +1 -1  $0.0000  chosen
  4  -         not-started  not started: the set's time budget is spent  -      -

Review: agent-git show cc000003
Land:   agent-git apply s0a1b2c3
Others: agent-git discard RUN (aa000001, bb000002)

Agent-Set: s0a1b2c3
Agent-Attempts: 4
Agent-Base: 0123456789abcdef0123456789abcdef01234567
Agent-Chosen: cc000003
Agent-Attempt-Runs: aa000001, bb000002, cc000003
"
        );
        let json = summary.json();
        assert_eq!(json["chosen"]["run_id"], "cc000003");
        assert_eq!(json["attempts"][3]["outcome"], "not-started");
        assert_eq!(json["summary_ref"], "refs/agent-git/sets/s0a1b2c3");
    }

    #[test]
    fn a_set_without_reports_exits_as_its_attempts_did() {
        let refused = AttemptEnd {
            exit_code: Some(2),
            outcome: "no-report".into(),
            ..AttemptEnd::not_started(1, "agent-git: error: no model given")
        };
        let summary = SetSummary::new(
            "s1".into(),
            "ab".into(),
            None,
            vec![refused.clone(), refused],
        );
        assert_eq!(summary.chosen, None);
        assert_eq!(summary.exit_code(false), 2);
        assert_eq!(summary.exit_code(true), 130);
        assert!(summary
            .message()
            .starts_with("agent-git: 2 attempts, none ended with a report\n"));
    }
}
