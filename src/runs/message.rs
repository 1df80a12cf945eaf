//! The message of the commit `agent-git apply` makes: written from the run (the model's words
//! for the fix, the task, the report's summary) and carrying the report's `Agent-*` trailers
//! and `Agent-Applied`. Pure.

use super::Run;
use crate::workspace::FileStat;

const SUBJECT_MAX: usize = 72;

/// The whole message of the squash (or, `merge`, the merge) commit.
pub fn landing(
    run: &Run,
    description: Option<&str>,
    files: &[FileStat],
    merge: bool,
    left_out: usize,
) -> String {
    let task = run.task.trim();
    let subject = match description {
        Some(words) => words.to_string(),
        None => task.lines().next().unwrap_or("agent-git run").to_string(),
    };
    let mut out = vec![cut(&subject), String::new()];
    if description.is_some() && !task.is_empty() {
        let mut lines = task.lines();
        out.push(format!("Task: {}", lines.next().unwrap_or("")));
        out.extend(lines.map(|line| format!("  {line}")));
    }
    let how = if merge {
        "its commits merged; its empty report commit is left out"
    } else {
        "one commit for the change from its base to its last edit; its report commit and \
         edits undone later are left out"
    };
    out.push(format!(
        "Applied from agent-git run {} (branch {}): {how}.",
        run.run_id, run.branch
    ));
    if left_out > 0 {
        out.push(format!(
            "Only the changes its tests require: {left_out} that they do not are left out \
             (tested in a clean room before this commit)."
        ));
    }
    out.push(String::new());
    out.extend(report_lines(&run.report));
    out.push("Files changed:".to_string());
    out.extend(files.iter().map(|f| format!("  {}", stat_line(f))));
    out.push(String::new());
    out.extend(agent_trailers(&run.report));
    out.push(format!("Agent-Applied: {}", run.run_id));
    // No text of the run's (the model's words, a file name) adds a line: see `report`.
    let lines: Vec<String> = out.iter().map(|line| crate::text::one_line(line)).collect();
    lines.join("\n") + "\n"
}

/// The report's own lines about the result: its outcome, and its test summary with what
/// still fails.
fn report_lines(report: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_tests = false;
    for line in report.lines() {
        if line.starts_with("Outcome: ") {
            out.push(line.to_string());
        } else if line.starts_with("Tests (") {
            in_tests = true;
            out.push(line.to_string());
        } else if in_tests && !line.is_empty() {
            out.push(line.to_string());
        } else {
            in_tests = false;
        }
    }
    out
}

/// The trailers a report commit carries, as agent-git writes them.
const REPORT_TRAILERS: &[&str] = &[
    "Agent-Run",
    "Agent-Outcome",
    "Agent-Tests",
    "Agent-Turns",
    "Agent-Model",
    "Agent-Tokens",
    "Agent-Cost",
    "Agent-Base",
    "Agent-Branch",
];

/// The report's own trailers, in agent-git's order: read from its trailer block as git reads
/// it (a line of the body that looks like one is not one), each key once.
fn agent_trailers(report: &str) -> Vec<String> {
    let Ok(parsed) = git2::message_trailers_strs(report) else {
        return Vec::new();
    };
    REPORT_TRAILERS
        .iter()
        .filter_map(|key| {
            let value = parsed.iter().find(|(k, _)| k == key)?.1;
            Some(format!("{key}: {value}"))
        })
        .collect()
}

/// `calc.py +1 -1`, or `logo.png (binary)`.
pub fn stat_line(file: &FileStat) -> String {
    if file.binary {
        format!("{} (binary)", file.path)
    } else {
        format!("{} +{} -{}", file.path, file.added, file.removed)
    }
}

fn cut(subject: &str) -> String {
    if subject.chars().count() <= SUBJECT_MAX {
        return subject.to_string();
    }
    let kept: String = subject.chars().take(SUBJECT_MAX - 3).collect();
    format!("{}...", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Run {
        Run {
            run_id: "ab12cd34".into(),
            branch: "agent/calc".into(),
            tip: git2::Oid::ZERO_SHA1,
            running: false,
            base: None,
            task: "Fix the adder".into(),
            outcome: "passed".into(),
            tests: "2 passed, 0 failed".into(),
            turns: "3".into(),
            cost: "unknown".into(),
            model: "script:r.json".into(),
            time: 0,
            applied: None,
            attempt: None,
            report: "agent-git: tests pass: Fix the adder\n\nTask: Fix the adder\n\
                     Outcome: passed (the tests pass)\nTurns: 3 of 30\n\n\
                     What was tried:\n  [1] edit calc.py -> commit 1a2b3c4\n\n\
                     Tests (python3 -m pytest -q): 2 passed, 0 failed\n\n\
                     Files changed since base:\n  calc.py +1 -1\n\n\
                     Agent-Run: ab12cd34\nAgent-Outcome: passed\nAgent-Tests: 2 passed, 0 failed\n\
                     Agent-Turns: 3\n"
                .into(),
        }
    }

    #[test]
    fn the_squash_message_is_written_from_the_run() {
        let files = [FileStat {
            path: "calc.py".into(),
            added: 1,
            removed: 1,
            binary: false,
        }];
        let expected = "\
calc: add() adds instead of subtracting

Task: Fix the adder
Applied from agent-git run ab12cd34 (branch agent/calc): one commit for the change from its \
base to its last edit; its report commit and edits undone later are left out.

Outcome: passed (the tests pass)
Tests (python3 -m pytest -q): 2 passed, 0 failed
Files changed:
  calc.py +1 -1

Agent-Run: ab12cd34
Agent-Outcome: passed
Agent-Tests: 2 passed, 0 failed
Agent-Turns: 3
Agent-Applied: ab12cd34
";
        let words = Some("calc: add() adds instead of subtracting");
        assert_eq!(landing(&run(), words, &files, false, 0), expected);
        let without_words = landing(&run(), None, &files, true, 0);
        assert!(
            without_words.starts_with(
                "Fix the adder\n\nApplied from agent-git run ab12cd34 \
                                       (branch agent/calc): its commits merged;"
            ),
            "{without_words}"
        );
    }
}
