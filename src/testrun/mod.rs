//! What the tests are and what their output says: detect the test command, read the results
//! and the names of the tests, keep the inventory of tests that must not vanish. Pure: the
//! processes run elsewhere (the sandbox), the files are read elsewhere (the verifier).

mod cases;
mod detect;
mod environment;
mod inventory;
mod parse;

pub use cases::{
    cases_from_junit, cases_from_output, cases_from_results_json, Case, Runner, Status,
};
pub use detect::{collected, detect, guess_runner, Collected, Detected, Python};
pub use environment::TreeFacts;
pub use inventory::{Inventory, Unstable};
pub use parse::{node_dot_counts, parse_output, pytest_summary, Counts, Failure, Parsed};

/// Compiles the patterns that reading a test run's output needs (tens of milliseconds), so
/// that the first read does not wait for them: for a thread of its own while tests run.
pub fn warm_up() {
    parse::warm_up();
    cases::warm_up();
    environment::warm_up();
}

use std::time::Duration;

/// The built-in runner for Python projects: standard library only.
pub const BUILTIN_PYTHON_RUNNER: &str = include_str!("runner.py");

/// How many lines of output a result keeps for the model and the report.
const TAIL_LINES: usize = 60;
const TAIL_BYTES: usize = 6_000;

/// What runs the tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestCommand {
    /// A shell command, run with `sh -c` in the tree under test.
    Shell(String),
    /// agent-git's own Python runner; with `unittest`, unittest's discovery and loader.
    BuiltinPython {
        /// Collect with unittest's discovery and loader rather than the runner's own.
        unittest: bool,
    },
}

/// The test command of a run, and how to read what it prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestPlan {
    /// What runs.
    pub command: TestCommand,
    /// How reports name the command.
    pub label: String,
    /// The longest one test run may take; it is killed then and reported as timed out.
    pub timeout: Duration,
    /// Whose output the results are read from.
    pub runner: Runner,
    /// An install step (`npm ci`, ...) run in the clean room before the tests, again only when
    /// the files it depends on change.
    pub setup: Option<String>,
    /// Folders of the tree put first on PYTHONPATH for the tests (a src layout's `src`), as an
    /// editable install would put them on the path.
    pub python_path: Vec<String>,
    /// The user's installed `node_modules` (outside the tree the tests run in), which they may
    /// read: resolved through NODE_PATH, its tools on PATH.
    pub node_modules: Option<std::path::PathBuf>,
    /// The virtualenv of the user's checkout, not active here: its bin first on PATH.
    pub venv: Option<std::path::PathBuf>,
    /// The rules that chose the command and its environment, in words: said at the start of
    /// every run and in the report.
    pub rules: Vec<String>,
    /// What the tree says that tells a broken environment from broken code.
    pub facts: TreeFacts,
}

impl TestPlan {
    /// A command the user gave; its runner is guessed from its words.
    pub fn shell(command: String, timeout: Duration) -> Self {
        TestPlan {
            label: command.clone(),
            runner: guess_runner(&command),
            command: TestCommand::Shell(command),
            timeout,
            setup: None,
            python_path: Vec::new(),
            node_modules: None,
            venv: None,
            rules: Vec::new(),
            facts: TreeFacts::default(),
        }
    }

    /// A command detection found in the tree, with its runner.
    pub fn from_detected(detected: Detected, timeout: Duration) -> Self {
        TestPlan {
            label: detected.label,
            command: detected.command,
            timeout,
            runner: detected.runner,
            setup: None,
            python_path: Vec::new(),
            node_modules: None,
            venv: None,
            rules: std::iter::once(format!("test command from {}", detected.source))
                .chain(detected.passed_over)
                .collect(),
            facts: TreeFacts::default(),
        }
    }

    /// The command and the rules that chose it, in one line: `python3 -m pytest -q` (test
    /// command from tox.ini; src layout: ...).
    pub fn describe(&self) -> String {
        match self.rules.as_slice() {
            [] => format!("`{}`", self.label),
            rules => format!("`{}` ({})", self.label, rules.join("; ")),
        }
    }

    /// Why `result`, the run before any change, shows that the tests cannot run as they are:
    /// the model is not called. None when they run (and some fail).
    /// `protected` says which files the model may not change.
    pub fn cannot_run(
        &self,
        result: &TestResult,
        protected: &dyn Fn(&str) -> bool,
    ) -> Option<String> {
        environment::cannot_run(result, &self.facts, protected)
    }

    /// Why `result` shows that these tests cannot be run here, for a check that tests a
    /// commit rather than changes it: the environment's reasons only (a test file that does
    /// not compile is the commit's failure).
    pub fn cannot_run_here(&self, result: &TestResult) -> Option<String> {
        environment::cannot_run_here(result, &self.facts)
    }

    /// The shell command line, given where the built-in runner's script was written.
    pub fn command_line(&self, runner_script: &std::path::Path) -> String {
        match &self.command {
            TestCommand::Shell(command) => command.clone(),
            TestCommand::BuiltinPython { unittest } => {
                let mode = if *unittest { " --unittest" } else { "" };
                format!("python3 '{}'{mode}", runner_script.display())
            }
        }
    }
}

/// How a test run was held to the inventory, from what its output can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Every test is named: none of the inventory may be missing or newly skipped.
    ByName,
    /// Only failures are named (unittest without -v, cargo test -q, node's dot reporter): as
    /// many tests must run, and no more be skipped, as before any change.
    ByCount,
    /// The output names and counts no tests: the exit code decides.
    ByExitCode,
}

impl serde::Serialize for Checked {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.label())
    }
}

impl Checked {
    /// `by name`, `by count` or `by exit code`: how the report and `--json` say it.
    pub fn label(self) -> &'static str {
        match self {
            Checked::ByName => "by name",
            Checked::ByCount => "by count",
            Checked::ByExitCode => "by exit code",
        }
    }
}

/// How a test process ended, as the sandbox saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// None when a signal ended it.
    pub exit_code: Option<i32>,
    /// It was killed at the plan's timeout.
    pub timed_out: bool,
    /// It was stopped because the run was interrupted.
    pub interrupted: bool,
}

/// One test run, held to the inventory: the verdict and what the report says of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TestResult {
    /// The plan's label for the command.
    pub command: String,
    /// False when the command could not be run at all (the harness failed, not the code).
    pub ran: bool,
    /// The verdict: the command succeeded and every test of the inventory ran and passed.
    pub passed: bool,
    /// None when a signal ended it, or it did not run.
    pub exit_code: Option<i32>,
    /// Set when the run was killed at its time limit: the limit, in seconds.
    pub timed_out_after: Option<u64>,
    /// Stopped because the run was interrupted.
    pub interrupted: bool,
    /// What the output counted; None when it counted nothing agent-git can read.
    pub counts: Option<Counts>,
    /// The failing tests the output named, each once.
    pub failing: Vec<Failure>,
    /// Every test the runner named, with how it ended; None when no names could be read.
    #[serde(skip)]
    pub cases: Option<Vec<Case>>,
    /// Tests of the inventory that did not run and pass: gone, deselected or skipped.
    pub vanished: Vec<String>,
    /// How many tests of the inventory the counts show did not run, or were skipped, when
    /// the output does not name them (checked by count).
    pub vanished_uncounted: u32,
    /// Tests whose ids differ from run to run (a parameter id made from the time, say),
    /// matched by how many of them ran under the same test function: those functions.
    pub matched_by_count: Vec<String>,
    /// How this run was held to the inventory.
    pub checked: Checked,
    /// Whether `cases` came from a report file the runner wrote, not from its output.
    #[serde(skip)]
    pub named_by_report: bool,
    /// Whose output this is: a known runner prints its counts on every run.
    #[serde(skip)]
    pub runner: Runner,
    /// The counts the output itself printed (`counts` may come from a report file instead).
    #[serde(skip)]
    pub printed_counts: Option<Counts>,
    /// Whether the output shows pytest's progress line (`..F.s [100%]`): pytest ran tests.
    #[serde(skip)]
    pub printed_progress: bool,
    /// The last lines of the output, capped.
    pub tail: String,
    /// The same tree was tested earlier in the run: this is that result, not a new run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// Tracked entries the protection covers that the run changed while it ran: where there
    /// are any, it does not pass, whatever its tests said.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_protected: Vec<String>,
}

impl TestResult {
    /// Reads a finished run. `cases` come from result files when the runner wrote them; else
    /// from the output, as far as `runner`'s output names them.
    pub fn read(plan: &TestPlan, output: &str, ended: Ended, cases: Option<Vec<Case>>) -> Self {
        let mut parsed = parse_output(output);
        if parsed.counts.is_none() && plan.runner == Runner::Node {
            parsed.counts = node_dot_counts(output);
        }
        let named_by_report = cases.is_some();
        let cases = cases.or_else(|| {
            // Names read from the output count only if they are all of them: the runner's own
            // totals must agree (pytest -q names failures alone, say).
            let found = cases_from_output(plan.runner, output);
            let complete = parsed.counts.is_none_or(|c| {
                let named = Counts::of(&found);
                (named.passed, named.failed) == (c.passed, c.failed)
            });
            (!found.is_empty() && complete).then_some(found)
        });
        let mut failing = parsed.failing;
        let mut counts = parsed.counts;
        if let Some(cases) = &cases {
            counts = Some(Counts::of(cases));
            for case in cases.iter().filter(|c| c.status.is_failure()) {
                if !failing.iter().any(|f| f.name == case.name) {
                    failing.push(Failure {
                        name: case.name.clone(),
                        detail: None,
                    });
                }
            }
        }
        let failed_case = cases.iter().flatten().any(|c| c.status.is_failure());
        TestResult {
            command: plan.label.clone(),
            ran: true,
            passed: ended.exit_code == Some(0)
                && !ended.timed_out
                && !ended.interrupted
                && !failed_case,
            exit_code: ended.exit_code,
            timed_out_after: ended.timed_out.then_some(plan.timeout.as_secs()),
            interrupted: ended.interrupted,
            counts,
            failing,
            cases,
            vanished: Vec::new(),
            vanished_uncounted: 0,
            matched_by_count: Vec::new(),
            checked: Checked::ByExitCode,
            named_by_report,
            runner: plan.runner,
            printed_counts: match plan.runner {
                Runner::Pytest => pytest_summary(output),
                _ => parsed.counts,
            },
            printed_progress: output.lines().any(parse::is_pytest_progress),
            tail: tail(output, TAIL_LINES, TAIL_BYTES),
            cached: false,
            changed_protected: Vec::new(),
        }
    }

    /// This failing run of the plain command, told as the verdict on a pass that its report
    /// file alone claimed.
    pub fn disputed(self) -> Self {
        self.disputed_by("run as anyone runs them, they failed")
    }

    /// This run of the plain command, which exited 0 but whose output does not back the
    /// pass a report file claimed (`why`): not a pass.
    pub fn disputed_by(mut self, why: &str) -> Self {
        self.passed = false;
        self.tail = format!(
            "[harness: the tests passed only in the run whose runner was asked for a report \
             file; {why}]\n{}",
            self.tail
        );
        self
    }

    /// A result for tests that could not be run; `why` stands in for the output.
    pub fn not_run(label: &str, why: &str) -> Self {
        TestResult {
            command: label.to_string(),
            ran: false,
            passed: false,
            exit_code: None,
            timed_out_after: None,
            interrupted: false,
            counts: None,
            failing: Vec::new(),
            cases: None,
            vanished: Vec::new(),
            vanished_uncounted: 0,
            matched_by_count: Vec::new(),
            checked: Checked::ByExitCode,
            named_by_report: false,
            runner: Runner::Other,
            printed_counts: None,
            printed_progress: false,
            tail: why.to_string(),
            cached: false,
            changed_protected: Vec::new(),
        }
    }

    /// One line: `3 passed, 1 failed`, or `passed` / `failed (exit 2)` when counts are unknown.
    pub fn summary(&self) -> String {
        if !self.ran {
            return "not run".to_string();
        }
        if let Some(secs) = self.timed_out_after {
            return format!("timed out after {secs} s");
        }
        if self.interrupted {
            return "interrupted".to_string();
        }
        if let Some(first) = self.changed_protected.first() {
            let n = self.changed_protected.len();
            let what = if n == 1 { "entry" } else { "entries" };
            return format!("failed (the run changed {n} protected {what}, e.g. {first})");
        }
        let vanished = self.vanished_note();
        let counted = self
            .counts
            .filter(|c| self.passed || c.failed > 0 || !vanished.is_empty());
        match counted {
            Some(c) => format!("{}{vanished}", c.describe()),
            None if self.passed => "passed".to_string(),
            None => match self.exit_code {
                Some(code) => format!("failed (exit {code}){vanished}"),
                None => format!("failed (killed by a signal){vanished}"),
            },
        }
    }

    /// `, 2 vanished` when tests of the inventory vanished, else nothing: what summaries and
    /// trailers add to their counts.
    pub fn vanished_note(&self) -> String {
        match self.vanished_count() {
            0 => String::new(),
            n => format!(", {n} vanished"),
        }
    }

    /// How many tests of the inventory vanished, named or counted.
    pub fn vanished_count(&self) -> usize {
        self.vanished.len() + self.vanished_uncounted as usize
    }

    /// Whether the verdict rests on the exit code alone: the output named and counted no
    /// tests before any change.
    pub fn exit_code_only(&self) -> bool {
        self.checked == Checked::ByExitCode
    }
}

impl Status {
    /// Failed, or could not be collected.
    pub fn is_failure(self) -> bool {
        matches!(self, Status::Failed | Status::Error)
    }
}

impl Counts {
    fn of(cases: &[Case]) -> Counts {
        let count =
            |f: &dyn Fn(Status) -> bool| cases.iter().filter(|c| f(c.status)).count() as u32;
        Counts {
            passed: count(&|s| s == Status::Passed),
            failed: count(&|s| s.is_failure()),
            skipped: count(&|s| s == Status::Skipped),
        }
    }

    /// `3 passed, 1 failed`, with `, 2 skipped` when any were.
    pub fn describe(&self) -> String {
        let mut line = format!("{} passed, {} failed", self.passed, self.failed);
        if self.skipped > 0 {
            line.push_str(&format!(", {} skipped", self.skipped));
        }
        line
    }
}

/// The last `max_lines` lines of `text`, at most `max_bytes`, with a note of what was cut.
pub fn tail(text: &str, max_lines: usize, max_bytes: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let mut start = lines.len().saturating_sub(max_lines);
    let mut size: usize = lines[start..].iter().map(|l| l.len() + 1).sum();
    while size > max_bytes && start < lines.len() {
        size -= lines[start].len() + 1;
        start += 1;
    }
    let kept = lines[start..].join("\n");
    if start > 0 {
        format!("[{start} earlier lines cut]\n{kept}")
    } else {
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(output: &str, exit_code: Option<i32>, timed_out: bool) -> TestResult {
        let plan = TestPlan::shell("x".into(), Duration::from_secs(7));
        let ended = Ended {
            exit_code,
            timed_out,
            interrupted: false,
        };
        TestResult::read(&plan, output, ended, None)
    }

    #[test]
    fn summary_prefers_counts_and_says_timeouts() {
        let failing = read(
            "FAILED a.py::t - boom\n2 passed, 1 failed\n",
            Some(1),
            false,
        );
        assert_eq!(failing.summary(), "2 passed, 1 failed");
        assert!(!failing.passed);
        let passing = read("3 passed, 0 failed\n", Some(0), false);
        assert_eq!(passing.summary(), "3 passed, 0 failed");
        assert!(passing.passed);
        let opaque = read("boom\n", Some(2), false);
        assert_eq!(opaque.summary(), "failed (exit 2)");
        let slow = read("", None, true);
        assert_eq!(slow.summary(), "timed out after 7 s");
        assert!(!slow.passed);
    }

    #[test]
    fn named_cases_decide_counts_and_a_failed_case_fails_the_run() {
        let plan = TestPlan::shell("pytest".into(), Duration::from_secs(7));
        let ok = Ended {
            exit_code: Some(0),
            timed_out: false,
            interrupted: false,
        };
        let case = |name: &str, status| Case {
            name: name.into(),
            status,
        };
        let cases = vec![
            case("t.py::a", Status::Passed),
            case("t.py::b", Status::Skipped),
            case("t.py::c", Status::Failed),
        ];
        let result = TestResult::read(&plan, "", ok, Some(cases));
        assert!(!result.passed, "exit 0 does not hide a failed test");
        assert_eq!(result.summary(), "1 passed, 1 failed, 1 skipped");
        assert_eq!(result.failing.len(), 1);
    }

    #[test]
    fn tail_keeps_the_end_and_says_what_was_cut() {
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        assert_eq!(
            tail(&text, 3, 1000),
            "[7 earlier lines cut]\nline 8\nline 9\nline 10"
        );
        assert_eq!(tail("a\nb\n", 5, 1000), "a\nb");
        assert_eq!(
            tail(&text, 10, 16),
            "[8 earlier lines cut]\nline 9\nline 10"
        );
    }
}
