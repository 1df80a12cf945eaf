//! Renders the end of a run: the report commit's message (also printed to stdout) and the
//! `--json` object. Pure functions of the run's facts.

use crate::agent::{Action, Outcome};
use crate::model::Usage;
use crate::testrun::{Checked, TestResult};
use crate::text::{count, truncate};
use crate::workspace::FileStat;
use serde_json::{json, Value};

const SUBJECT_MAX: usize = 72;
const TAIL_IN_REPORT: usize = 15;

/// The facts of one finished run, borrowed from it; every rendering of its end is built from
/// these alone.
pub struct Report<'a> {
    /// The `Agent-Run` trailer.
    pub run_id: &'a str,
    /// As the user wrote it: its first line goes into the subject, the rest indented below.
    pub task: &'a str,
    /// The model's label (`anthropic:claude-sonnet-4-5`).
    pub model: &'a str,
    /// The base commit's full id; the review commands show it short.
    pub base: &'a str,
    /// The base commit's subject line.
    pub base_summary: &'a str,
    /// Named in the review commands and the trailer only when the outcome keeps the branch.
    pub branch: &'a str,
    /// How the run ended; it alone decides the subject's "tests pass".
    pub outcome: &'a Outcome,
    /// Model calls made.
    pub turns: u32,
    /// The turn budget.
    pub max_turns: u32,
    /// What was tried, in order.
    pub actions: &'a [Action],
    /// The last test run, in the clean room.
    pub tests: &'a TestResult,
    /// The diffstat of the branch against the base.
    pub files: &'a [FileStat],
    /// Tokens over the whole run.
    pub usage: &'a Usage,
    /// Dollars; None when no price is known for the model.
    pub cost: Option<f64>,
    /// The cost budget in dollars, if any; named when it was spent.
    pub max_cost: Option<f64>,
    /// The time budget, if any; named when it was spent.
    pub max_time: Option<std::time::Duration>,
    /// How hard the model was asked to think.
    pub reasoning: crate::model::Reasoning,
    /// Which of the changes the tests require.
    pub proof: &'a crate::verify::Proof,
    /// What the model adapter wants said (a replay's divergences).
    pub notes: &'a [String],
    /// How commands and tests were confined.
    pub sandbox: &'a str,
    /// For a `passed` run whose conversation stopped short: how it stopped.
    pub ended_early: Option<&'a str>,
    /// The rules that chose the test command and its environment.
    pub test_rules: &'a [String],
    /// Which attempt of a set the run is.
    pub attempt: Option<&'a crate::attempts::AttemptOf>,
    /// How each layer of the sandbox held, in full, where known.
    pub sandbox_details: Option<&'a str>,
}

impl Report<'_> {
    /// The subject says what the outcome says: "tests pass" only for `passed`.
    pub fn subject(&self) -> String {
        let task = self.task.lines().next().unwrap_or("").trim();
        let turns = self.turns;
        let head = match self.outcome {
            Outcome::Passed => "tests pass".to_string(),
            Outcome::AlreadyPassing => "tests already pass".to_string(),
            Outcome::Interrupted => format!("interrupted after {}", count(turns, "turn")),
            Outcome::HarnessError(_) => format!("harness error after {}", count(turns, "turn")),
            Outcome::TestsCannotRun(_) => "the tests cannot run".to_string(),
            _ => format!("tests still fail after {}", count(turns, "turn")),
        };
        truncate(&format!("agent-git: {head}: {task}"), SUBJECT_MAX)
    }

    /// The trailer value for the tests: `3 passed, 1 failed`, or `passed` / `failed`.
    pub fn tests_trailer(&self) -> String {
        let vanished = self.tests.vanished_note();
        match self.tests.counts {
            Some(c) => format!("{}{vanished}", c.describe()),
            None if self.tests.passed => "passed".to_string(),
            None => format!("failed{vanished}"),
        }
    }

    fn outcome_line(&self) -> String {
        let why = match self.outcome {
            Outcome::Passed => match self.ended_early {
                Some(how) => {
                    format!("the final test run passes; the conversation ended early: {how}")
                }
                None => "the tests pass".to_string(),
            },
            Outcome::TestsCannotRun(why) => format!(
                "before any change, {why}; the model was not called. Fix the test command \
                 (--test-cmd or git config agent-git.testCmd), add an install step \
                 (--setup-cmd), or make a cache writable (--allow-write DIR)"
            ),
            Outcome::AlreadyPassing => "the tests passed before any change".to_string(),
            Outcome::TurnLimit => format!("the turn budget of {} was spent", self.max_turns),
            Outcome::Stuck => {
                "the same tool call gave the same result 5 times in a row".to_string()
            }
            Outcome::CostLimit => match self.max_cost {
                Some(max) => format!("the cost budget of ${max:.2} was spent"),
                None => "the cost budget was spent".to_string(),
            },
            Outcome::TimeLimit => match self.max_time {
                Some(max) => format!(
                    "the time budget of {} was spent",
                    humantime::format_duration(max)
                ),
                None => "the time budget was spent".to_string(),
            },
            Outcome::Refused(why) if why.trim().is_empty() => {
                "the model refused the task".to_string()
            }
            Outcome::Refused(why) => format!("the model refused: {}", first_line(why)),
            Outcome::ModelError(e) => format!("the model failed: {e}"),
            Outcome::Interrupted => "interrupted by the user".to_string(),
            Outcome::HarnessError(e) => format!("the harness failed: {e}"),
        };
        format!("{} ({why})", self.outcome.name())
    }

    /// The whole commit message: subject, body, trailers.
    pub fn message(&self) -> String {
        let mut out = vec![self.subject(), String::new()];
        // A task's later lines are indented: no line of it can pass for a field of the report.
        let mut task = self.task.trim().lines();
        out.push(format!("Task: {}", task.next().unwrap_or("")));
        out.extend(task.map(|line| format!("  {line}")));
        out.push(format!("Model: {}", self.model));
        if self.reasoning != crate::model::Reasoning::Off {
            out.push(format!("Reasoning: {}", self.reasoning_line()));
        }
        out.push(format!("Base: {} ({})", self.base, self.base_summary));
        out.push(format!("Outcome: {}", self.outcome_line()));
        out.push(format!("Turns: {} of {}", self.turns, self.max_turns));
        out.push(format!("Tokens: {}", self.tokens_line()));
        out.push(format!("Cost: {}", self.cost_text()));
        out.push(format!("Sandbox: {}", self.sandbox));
        out.push(String::new());
        out.push("What was tried:".to_string());
        if self.actions.is_empty() {
            out.push("  nothing".to_string());
        }
        for action in self.actions {
            out.push(format!(
                "  [{}] {} -> {}",
                action.turn, action.label, action.result
            ));
        }
        out.push(String::new());
        out.extend(self.tests_section());
        out.push(String::new());
        out.push("Files changed since base:".to_string());
        if self.files.is_empty() {
            out.push("  none".to_string());
        }
        for file in self.files {
            if file.binary {
                out.push(format!("  {} (binary)", file.path));
            } else {
                out.push(format!("  {} +{} -{}", file.path, file.added, file.removed));
            }
        }
        out.extend(self.proof_section());
        if self.outcome.keeps_branch() {
            out.push(String::new());
            out.push("Review:".to_string());
            out.push(format!(
                "  git log -p {}..{}",
                short(self.base),
                self.branch
            ));
            out.push(format!("  git diff {}..{}", short(self.base), self.branch));
            out.push(format!("  agent-git apply {}", self.branch));
        }
        if !self.notes.is_empty() {
            out.push(String::new());
            out.push("Notes:".to_string());
            out.extend(self.notes.iter().map(|n| format!("  {n}")));
        }
        out.push(String::new());
        out.push(format!("Agent-Run: {}", self.run_id));
        out.push(format!("Agent-Outcome: {}", self.outcome.name()));
        out.push(format!("Agent-Tests: {}", self.tests_trailer()));
        out.push(format!("Agent-Turns: {}", self.turns));
        out.push(format!("Agent-Model: {}", self.model));
        out.push(format!("Agent-Tokens: {}", self.tokens_trailer()));
        out.push(format!("Agent-Cost: {}", self.cost_trailer()));
        out.push(format!("Agent-Base: {}", self.base));
        // A run that keeps no branch names none: the one it made is gone.
        if self.outcome.keeps_branch() {
            out.push(format!("Agent-Branch: {}", self.branch));
        }
        if let Some(unrequired) = self.unrequired() {
            out.push(format!("Agent-Unrequired: {unrequired}"));
        }
        if let crate::verify::Proof::Proven { tree, .. } = self.proof {
            out.push(format!("Agent-Proven-Tree: {tree}"));
        }
        if let Some(attempt) = self.attempt {
            out.push(format!("Agent-Attempt: {}", attempt.trailer()));
        }
        // Each line is one line: a file name, a test's name or output, the model's words and
        // a configured model name are written with their newlines and control characters
        // escaped, so none of them adds a line (a trailer, a field) or drives a terminal.
        let lines: Vec<String> = out.iter().map(|line| crate::text::one_line(line)).collect();
        lines.join("\n") + "\n"
    }

    /// Which changes the tests require, when that was proven or why it was not.
    fn proof_section(&self) -> Vec<String> {
        use crate::verify::Proof;
        match self.proof {
            Proof::NotRun => Vec::new(),
            Proof::Skipped { why } => vec![
                String::new(),
                format!("Changes the tests require: not proven ({why})"),
            ],
            // The times are in --json: a report says the same of the same run.
            Proof::Proven { changes, .. } => {
                let mut lines = vec![
                    String::new(),
                    "Changes the tests require (each left out alone and the tests run again):"
                        .to_string(),
                ];
                lines.extend(changes.iter().map(|proven| {
                    let c = &proven.change;
                    let verdict = match proven.required {
                        true => "required",
                        false => "not required by the tests",
                    };
                    format!(
                        "  {} {} (+{} -{}): {verdict}",
                        c.file, c.header, c.added, c.removed
                    )
                }));
                lines
            }
        }
    }

    /// The places (in diff order, from 0) of the changes the tests do not require, for
    /// `apply --required-only`; None unless proven.
    fn unrequired(&self) -> Option<String> {
        let crate::verify::Proof::Proven { changes, .. } = self.proof else {
            return None;
        };
        let places: Vec<String> = changes
            .iter()
            .enumerate()
            .filter(|(_, proven)| !proven.required)
            .map(|(i, _)| i.to_string())
            .collect();
        Some(if places.is_empty() {
            "none".to_string()
        } else {
            places.join(",")
        })
    }

    /// The reasoning asked, and its tokens where the API counts them apart.
    fn reasoning_line(&self) -> String {
        let mut line = self.reasoning.describe();
        match (self.reasoning, self.usage.reasoning_tokens) {
            (crate::model::Reasoning::Effort(_), tokens) => {
                line.push_str(&format!(" ({tokens} reasoning tokens, of the output)"));
            }
            _ => line.push_str(" (its tokens are counted in the output)"),
        }
        line
    }

    fn tokens_line(&self) -> String {
        let u = self.usage;
        let mut line = format!(
            "{} input, {} output, {} cache write, {} cache read",
            u.input_tokens,
            u.output_tokens,
            u.cache_creation_input_tokens,
            u.cache_read_input_tokens
        );
        if let Some(share) = u.cache_read_percent() {
            line.push_str(&format!(" ({share}% of input read from the cache)"));
        }
        line
    }

    fn tokens_trailer(&self) -> String {
        let u = self.usage;
        format!(
            "{} in, {} out, {} cache write, {} cache read",
            u.input_tokens,
            u.output_tokens,
            u.cache_creation_input_tokens,
            u.cache_read_input_tokens
        )
    }

    fn cost_text(&self) -> String {
        match self.cost {
            Some(cost) => format!("${cost:.4}"),
            None => "unknown (no price known for this model; set git config agent-git.price)"
                .to_string(),
        }
    }

    fn cost_trailer(&self) -> String {
        match self.cost {
            Some(cost) => format!("{cost:.4} USD"),
            None => "unknown".to_string(),
        }
    }

    fn tests_section(&self) -> Vec<String> {
        let mut out = vec![format!(
            "Tests ({}): {}",
            self.tests.command,
            self.tests.summary()
        )];
        for rule in self.test_rules {
            out.push(format!("  {rule}"));
        }
        if self.tests.cached {
            out.push(
                "  the branch's tree was tested earlier in the run: that result stands, the \
                 tests were not run again"
                    .to_string(),
            );
        }
        match self.tests.checked {
            Checked::ByExitCode => out.push(
                "  no test names or counts could be read before any change, so the verdict \
                 rests on the exit code alone"
                    .to_string(),
            ),
            Checked::ByCount => out.push(
                "  the output names only failing tests, so the inventory was checked by count: \
                 as many tests ran, and no more were skipped, as before any change"
                    .to_string(),
            ),
            Checked::ByName => {}
        }
        if !self.tests.matched_by_count.is_empty() {
            out.push(format!(
                "  ids that change from run to run, matched by count: {}",
                self.tests.matched_by_count.join(", ")
            ));
        }
        if self.tests.vanished_uncounted > 0 {
            out.push(format!(
                "Vanished: {} counted before any change did not run, or were skipped, now",
                count(self.tests.vanished_uncounted, "test")
            ));
        }
        if !self.tests.vanished.is_empty() {
            out.push(
                "Vanished (named before any change, or in a file that did not load then; not \
                 run and passed now):"
                    .to_string(),
            );
            out.extend(
                self.tests
                    .vanished
                    .iter()
                    .map(|n| format!("  vanished: {n}")),
            );
        }
        if self.tests.passed {
            return out;
        }
        if self.tests.failing.is_empty() {
            out.push("  no failing test could be named; the output ended with:".to_string());
            let lines: Vec<&str> = self.tests.tail.lines().collect();
            let from = lines.len().saturating_sub(TAIL_IN_REPORT);
            out.extend(lines[from..].iter().map(|l| format!("    {l}")));
            return out;
        }
        out.push("Still failing:".to_string());
        for failure in &self.tests.failing {
            match &failure.detail {
                Some(detail) => out.push(format!("  {}: {detail}", failure.name)),
                None => out.push(format!("  {}", failure.name)),
            }
        }
        out
    }

    /// The `--json` object of every outcome; `report_commit` is None when no branch was kept.
    pub fn json(
        &self,
        commits: &[String],
        report_commit: Option<&str>,
        worktree: Option<&str>,
    ) -> Value {
        json!({
            "run_id": self.run_id,
            "branch": report_commit.map(|_| self.branch),
            "base": self.base,
            "outcome": self.outcome.name(),
            "reason": self.outcome.reason(),
            // As `Agent-Model` says it: for OpenAI, the API too (`openai-responses:`).
            "model": self.model,
            "turns": self.turns,
            "tests": {
                "command": self.tests.command,
                "rules": self.test_rules,
                "passed": self.tests.passed,
                "summary": self.tests.summary(),
                "failing": self.tests.failing.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
                // Null when no test names could be read from the runner.
                "passing": self.tests.cases.as_ref().map(|cases| {
                    cases
                        .iter()
                        .filter(|c| c.status == crate::testrun::Status::Passed)
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                }),
                "vanished": self.tests.vanished,
                "vanished_uncounted": self.tests.vanished_uncounted,
                "exit_code_only": self.tests.exit_code_only(),
                "inventory_checked": self.tests.checked.label(),
                "matched_by_count": self.tests.matched_by_count,
                "cached": self.tests.cached,
            },
            "commits": commits,
            "report_commit": report_commit,
            "worktree": worktree,
            "usage": usage_json(self.usage),
            "changes": self.proof,
            "reasoning": {
                "setting": self.reasoning.describe(),
                "reasoning_tokens": matches!(self.reasoning, crate::model::Reasoning::Effort(_))
                    .then_some(self.usage.reasoning_tokens),
            },
            "cost_usd": self.cost,
            // What the report's Notes say: a model server's own words on a failure, say.
            "notes": self.notes,
            "attempt": self.attempt,
            "sandbox": {"summary": self.sandbox, "details": self.sandbox_details},
        })
    }
}

/// The counts as the API gave them, and the share of all input read from the cache (0 to 1;
/// null before any input), which says whether prompt caching works.
fn usage_json(usage: &Usage) -> Value {
    let mut value = json!(usage);
    value["cache_read_share"] = json!(usage.cache_read_share());
    value
}

fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or("")
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testrun::{Counts, Failure};

    fn failing_tests() -> TestResult {
        TestResult {
            command: "python3 -m pytest -q".into(),
            ran: true,
            passed: false,
            exit_code: Some(1),
            timed_out_after: None,
            interrupted: false,
            counts: Some(Counts {
                passed: 3,
                failed: 1,
                skipped: 0,
            }),
            failing: vec![Failure {
                name: "test_calc.py::test_add".into(),
                detail: Some("assert -1 == 5".into()),
            }],
            cases: None,
            vanished: vec!["test_calc.py::test_sub".into()],
            vanished_uncounted: 0,
            matched_by_count: Vec::new(),
            checked: Checked::ByName,
            named_by_report: true,
            runner: crate::testrun::Runner::Pytest,
            printed_counts: None,
            printed_progress: false,
            tail: "...".into(),
            cached: false,
            changed_protected: Vec::new(),
        }
    }

    #[test]
    fn message_states_everything_a_reviewer_needs() {
        let tests = failing_tests();
        let actions = vec![
            Action {
                turn: 1,
                label: "edit calc.py".into(),
                result: "commit 1a2b3c4".into(),
            },
            Action {
                turn: 2,
                label: "write tests/test_calc.py".into(),
                result: "refused: protected".into(),
            },
        ];
        let files = vec![FileStat {
            path: "calc.py".into(),
            added: 1,
            removed: 1,
            binary: false,
        }];
        let report = Report {
            run_id: "ab12cd34",
            task: "Fix the adder",
            model: "script:r.json",
            base: "0123456789abcdef0123456789abcdef01234567",
            base_summary: "init",
            branch: "agent/fix-the-adder-ab12cd34",
            outcome: &Outcome::TurnLimit,
            turns: 2,
            max_turns: 2,
            actions: &actions,
            tests: &tests,
            files: &files,
            usage: &Usage {
                input_tokens: 1200,
                output_tokens: 300,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 3600,
                reasoning_tokens: 0,
            },
            cost: Some(0.0123),
            max_cost: None,
            max_time: None,
            reasoning: Default::default(),
            proof: &crate::verify::Proof::NotRun,
            notes: &[],
            sandbox: "no network",
            ended_early: None,
            test_rules: &[],
            attempt: None,
            sandbox_details: None,
        };
        let expected = "\
agent-git: tests still fail after 2 turns: Fix the adder

Task: Fix the adder
Model: script:r.json
Base: 0123456789abcdef0123456789abcdef01234567 (init)
Outcome: turn-limit (the turn budget of 2 was spent)
Turns: 2 of 2
Tokens: 1200 input, 300 output, 0 cache write, 3600 cache read (75% of input read from the cache)
Cost: $0.0123
Sandbox: no network

What was tried:
  [1] edit calc.py -> commit 1a2b3c4
  [2] write tests/test_calc.py -> refused: protected

Tests (python3 -m pytest -q): 3 passed, 1 failed, 1 vanished
Vanished (named before any change, or in a file that did not load then; not run and passed now):
  vanished: test_calc.py::test_sub
Still failing:
  test_calc.py::test_add: assert -1 == 5

Files changed since base:
  calc.py +1 -1

Review:
  git log -p 0123456..agent/fix-the-adder-ab12cd34
  git diff 0123456..agent/fix-the-adder-ab12cd34
  agent-git apply agent/fix-the-adder-ab12cd34

Agent-Run: ab12cd34
Agent-Outcome: turn-limit
Agent-Tests: 3 passed, 1 failed, 1 vanished
Agent-Turns: 2
Agent-Model: script:r.json
Agent-Tokens: 1200 in, 300 out, 0 cache write, 3600 cache read
Agent-Cost: 0.0123 USD
Agent-Base: 0123456789abcdef0123456789abcdef01234567
Agent-Branch: agent/fix-the-adder-ab12cd34
";
        assert_eq!(report.message(), expected);
        let json = report.json(&["c1".into()], Some("r1"), None);
        assert_eq!(
            json,
            json!({
                "run_id": "ab12cd34",
                "branch": "agent/fix-the-adder-ab12cd34",
                "base": "0123456789abcdef0123456789abcdef01234567",
                "outcome": "turn-limit",
                "reason": null,
                "model": "script:r.json",
                "notes": [],
                "turns": 2,
                "tests": {
                    "command": "python3 -m pytest -q",
                    "rules": [],
                    "passed": false,
                    "summary": "3 passed, 1 failed, 1 vanished",
                    "failing": ["test_calc.py::test_add"],
                    "passing": null,
                    "vanished": ["test_calc.py::test_sub"],
                    "vanished_uncounted": 0,
                    "exit_code_only": false,
                    "inventory_checked": "by name",
                    "matched_by_count": [],
                    "cached": false
                },
                "commits": ["c1"],
                "report_commit": "r1",
                "worktree": null,
                "attempt": null,
                "sandbox": {"summary": "no network", "details": null},
                "usage": {"input_tokens": 1200, "output_tokens": 300, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 3600, "reasoning_tokens": 0, "cache_read_share": 0.75},
                "reasoning": {"setting": "off", "reasoning_tokens": null},
                "changes": {"status": "not_run"},
                "cost_usd": 0.0123
            })
        );
    }

    #[test]
    fn subject_fits_in_72_characters() {
        let long = "x".repeat(200);
        assert_eq!(truncate(&long, 72).chars().count(), 72);
        assert!(truncate(&long, 72).ends_with("..."));
        assert_eq!(truncate("short", 72), "short");
    }
}
