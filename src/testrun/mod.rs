//! Detect the test command, run it with a timeout, and read which tests fail.

mod detect;
mod parse;
mod run;

pub use detect::{detect, pytest_available, Detected};
pub use parse::{parse_output, Counts, Failure, Parsed};
pub use run::{run_prepared, RawRun};

use crate::sandbox::Sandbox;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The built-in runner for Python projects without pytest: standard library only.
pub const BUILTIN_PYTHON_RUNNER: &str = include_str!("runner.py");

/// How many lines of output a result keeps for the model and the report.
const TAIL_LINES: usize = 60;
const TAIL_BYTES: usize = 6_000;

/// The test command of a run. Owns the directory holding the built-in runner, when used.
pub struct TestPlan {
    pub command: String,
    /// How reports name the command (the built-in runner's temp path means nothing to a reader).
    pub label: String,
    pub timeout: Duration,
    runner_dir: Option<tempfile::TempDir>,
}

impl TestPlan {
    pub fn shell(command: String, timeout: Duration) -> Self {
        TestPlan {
            label: command.clone(),
            command,
            timeout,
            runner_dir: None,
        }
    }

    /// Writes the built-in Python runner to a private temp dir, outside the work tree.
    pub fn builtin_python(timeout: Duration) -> std::io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("agent-git-runner-")
            .tempdir()?;
        let script = dir.path().join("agent_git_runner.py");
        std::fs::write(&script, BUILTIN_PYTHON_RUNNER)?;
        Ok(TestPlan {
            command: format!("python3 '{}'", script.display()),
            label: "built-in Python runner".to_string(),
            timeout,
            runner_dir: Some(dir),
        })
    }

    pub fn from_detected(detected: Detected, timeout: Duration) -> std::io::Result<Self> {
        match detected {
            Detected::Command(command) => Ok(Self::shell(command, timeout)),
            Detected::BuiltinPython => Self::builtin_python(timeout),
        }
    }

    /// Runs the tests in `dir` and reads the result. An I/O error here means the command could
    /// not even be started, which is the harness's failure, not the code's.
    pub fn run(&self, sandbox: &Sandbox, interrupt: &AtomicBool) -> std::io::Result<TestResult> {
        let dir = sandbox.work_dir();
        let mut raw = sandbox.run(&self.command, self.timeout, interrupt)?;
        raw.output = self.relative_paths(&raw.output, dir);
        Ok(TestResult::from_raw(&self.label, raw, self.timeout))
    }

    /// Paths in the output made relative to the work tree, and the runner's temp path named
    /// plainly: the run's own folders mean nothing to the model, and would make every
    /// conversation differ from the last (and every replay diverge).
    fn relative_paths(&self, output: &str, dir: &Path) -> String {
        let mut text = output.to_string();
        if let Some(runner) = &self.runner_dir {
            text = text.replace(&runner.path().display().to_string(), "agent-git-runner");
        }
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        for root in [canonical.as_path(), dir] {
            text = text.replace(&format!("{}/", root.display()), "");
        }
        text
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TestResult {
    pub command: String,
    /// False when the command could not be run at all (the harness failed, not the code).
    pub ran: bool,
    pub passed: bool,
    pub exit_code: Option<i32>,
    /// Set when the run was killed at its time limit.
    pub timed_out_after: Option<u64>,
    pub interrupted: bool,
    pub counts: Option<Counts>,
    pub failing: Vec<Failure>,
    /// The last lines of the output, capped.
    pub tail: String,
}

impl TestResult {
    pub fn from_raw(label: &str, raw: RawRun, timeout: Duration) -> Self {
        let parsed = parse_output(&raw.output);
        TestResult {
            command: label.to_string(),
            ran: true,
            passed: raw.exit_code == Some(0) && !raw.timed_out && !raw.interrupted,
            exit_code: raw.exit_code,
            timed_out_after: raw.timed_out.then_some(timeout.as_secs()),
            interrupted: raw.interrupted,
            counts: parsed.counts,
            failing: parsed.failing,
            tail: tail(&raw.output, TAIL_LINES, TAIL_BYTES),
        }
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
            tail: why.to_string(),
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
        match self.counts {
            Some(c) if self.passed || c.failed > 0 => {
                format!("{} passed, {} failed", c.passed, c.failed)
            }
            _ if self.passed => "passed".to_string(),
            _ => match self.exit_code {
                Some(code) => format!("failed (exit {code})"),
                None => "failed (killed by a signal)".to_string(),
            },
        }
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

    fn raw(output: &str, exit_code: Option<i32>, timed_out: bool) -> RawRun {
        RawRun {
            output: output.to_string(),
            pid: 0,
            exit_code,
            timed_out,
            interrupted: false,
        }
    }

    #[test]
    fn summary_prefers_counts_and_says_timeouts() {
        let t = Duration::from_secs(7);
        let failing = TestResult::from_raw(
            "x",
            raw(
                "FAILED a.py::t - boom\n2 passed, 1 failed\n",
                Some(1),
                false,
            ),
            t,
        );
        assert_eq!(failing.summary(), "2 passed, 1 failed");
        assert!(!failing.passed);
        let passing = TestResult::from_raw("x", raw("3 passed, 0 failed\n", Some(0), false), t);
        assert_eq!(passing.summary(), "3 passed, 0 failed");
        assert!(passing.passed);
        let opaque = TestResult::from_raw("x", raw("boom\n", Some(2), false), t);
        assert_eq!(opaque.summary(), "failed (exit 2)");
        let slow = TestResult::from_raw("x", raw("", None, true), t);
        assert_eq!(slow.summary(), "timed out after 7 s");
        assert!(!slow.passed);
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
