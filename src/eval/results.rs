//! The result lines: one JSON object per run, appended as each run finishes.

use super::task::RequiredTests;
use super::EvalError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Tokens of a run, cache reads and writes counted apart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input tokens other than cache reads and writes (`usage.input_tokens`).
    pub input: u64,
    /// Output tokens (`usage.output_tokens`).
    pub output: u64,
    /// Input tokens read from the prompt cache (`usage.cache_read_input_tokens`).
    pub cache_read: u64,
    /// Input tokens written to the prompt cache (`usage.cache_creation_input_tokens`).
    pub cache_write: u64,
}

/// One run of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The task's name (its directory's).
    pub task: String,
    /// Which run of the task it is, from 0.
    pub run: u32,
    /// The eval's `--model` as given (`oracle` for oracle runs).
    pub model: String,
    /// `fix --json`'s outcome (`passed`, `turn-limit`, ...); `eval-timeout` when the task's timeout
    /// ended the run, `no-report` when it printed no report.
    pub outcome: String,
    /// The outcome is `passed` (never for `eval-timeout`).
    pub passed: bool,
    /// The task's honest outcome is not passed.
    #[serde(default)]
    pub impossible: bool,
    /// passed, or for an impossible task, not passed.
    pub solved: bool,
    /// The test summary and the failing tests of the last clean-room run.
    pub tests: Value,
    /// Tests of the inventory that did not run and pass in the last clean-room run: gone,
    /// deselected or skipped.
    pub vanished: Vec<String>,
    /// Model replies the run used.
    pub turns: u64,
    /// The tokens the run's model calls used.
    pub tokens: Tokens,
    /// What the model calls cost, in US dollars; None when the model's price is unknown.
    pub cost_usd: Option<f64>,
    /// Seconds from starting `agent-git fix` to its end, as the eval measured them.
    pub wall_secs: f64,
    /// The harness's own time outside the tests and the model; null while `fix --json` does
    /// not report it.
    pub harness_secs: Option<f64>,
    /// Where the run's repository was kept (failed runs only).
    pub kept: Option<String>,
    /// Whether the task's required tests passed; absent when the task names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_tests: Option<RequiredCheck>,
    /// For a best-of-N run (`eval --attempts N`): how its attempts went. The record's own
    /// outcome is the chosen attempt's, its cost that of all the attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Attempts>,
}

/// The attempts of a best-of-N run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attempts {
    /// How many attempts the set made.
    pub n: u32,
    /// Attempts that solved the task on their own.
    pub solved: u32,
    /// The chosen attempt (from 1); null when none ended with a report.
    pub chosen: Option<u32>,
}

/// A run's verdict on a task's required tests (FAIL_TO_PASS and PASS_TO_PASS).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequiredCheck {
    /// true: each required test is named among the passing ones; false: one failed or
    /// vanished; null: neither is known for some, which `note` explains.
    pub all_passed: Option<bool>,
    /// The required tests that failed or vanished, as the task names them.
    pub failing: Vec<String>,
    /// The required tests whose result is not known (`note` says why), as the task names them.
    pub unchecked: Vec<String>,
    /// Why `unchecked` could not be checked; absent when it is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A test's name in one form whoever wrote it: unittest's verbose `test_add (mod.T.test_add)`,
/// as SWE-bench lists Django's tests, is `mod.T.test_add`, as agent-git's runner names it.
fn canonical(name: &str) -> String {
    let verbose = name
        .strip_suffix(')')
        .and_then(|rest| rest.split_once(" ("))
        .filter(|(method, path)| path.ends_with(&format!(".{method}")));
    match verbose {
        Some((_, path)) => path.to_string(),
        None => name.to_string(),
    }
}

/// Whether the test SWE-bench names `required` passed among the `known` tests of a run (name,
/// passed), matched as its grading matches: the same name; else, for a name its list cut at a
/// space (a `[` left open), every test it begins; for a path parameter it shortened to a file
/// name, the same test with that file; for a bare function name (sympy's lists), every test of
/// that name in any file. A match stands only when every test it takes agrees; None when none
/// is known, or they disagree.
fn resolve(required: &str, known: &[(&str, bool)]) -> Option<bool> {
    let exact: Vec<bool> = known
        .iter()
        .filter(|(name, _)| *name == required)
        .map(|(_, passed)| *passed)
        .collect();
    if !exact.is_empty() {
        // A name both failing and passing (two runners, say) did not pass.
        return Some(exact.iter().all(|p| *p));
    }
    let cut = required.matches('[').count() > required.matches(']').count();
    let short_param = required
        .strip_suffix(']')
        .and_then(|r| r.split_once('['))
        .filter(|(_, param)| !param.contains('/'));
    let bare = !required.contains("::") && !required.contains('.') && !required.contains(' ');
    let same = |name: &str| {
        (cut && name.starts_with(required))
            || short_param.is_some_and(|(stem, file)| {
                name.strip_suffix(']')
                    .and_then(|n| n.split_once('['))
                    .is_some_and(|(s, p)| s == stem && p.rsplit('/').next() == Some(file))
            })
            || (bare && name.rsplit("::").next() == Some(required))
    };
    let matched: Vec<bool> = known
        .iter()
        .filter(|(name, _)| same(name))
        .map(|(_, passed)| *passed)
        .collect();
    let first = *matched.first()?;
    matched.iter().all(|p| *p == first).then_some(first)
}

impl RequiredCheck {
    /// Checks `required` against `fix --json`'s `tests`. A test counts as passed only when
    /// that object names it as passing: a passed outcome alone does not show that a test of
    /// that name ran.
    pub fn of(required: &RequiredTests, tests: &Value) -> RequiredCheck {
        let names = |v: &Value| -> Vec<String> {
            let names: Vec<String> = serde_json::from_value(v.clone()).unwrap_or_default();
            names.iter().map(|n| canonical(n)).collect()
        };
        let (failing, vanished) = (names(&tests["failing"]), names(&tests["vanished"]));
        let passing = tests["passing"]
            .is_array()
            .then(|| names(&tests["passing"]));
        // Every test the run named, and whether it passed.
        let known: Vec<(&str, bool)> = failing
            .iter()
            .chain(&vanished)
            .map(|n| (n.as_str(), false))
            .chain(passing.iter().flatten().map(|n| (n.as_str(), true)))
            .collect();
        let mut check = RequiredCheck::default();
        let all = required.fail_to_pass.iter().chain(&required.pass_to_pass);
        for name in all {
            match resolve(&canonical(name), &known) {
                Some(true) => {}
                Some(false) => check.failing.push(name.clone()),
                None => check.unchecked.push(name.clone()),
            }
        }
        check.all_passed = if !check.failing.is_empty() {
            Some(false)
        } else {
            check.unchecked.is_empty().then_some(true)
        };
        if !check.unchecked.is_empty() {
            check.note = Some(match passing {
                None => "fix --json names no passing tests, so these could not be checked".into(),
                Some(_) => "not named among the tests that ran".into(),
            });
        }
        check
    }

    /// `passed`, `failed` or `not checked`, for a progress line.
    pub fn word(&self) -> &'static str {
        match self.all_passed {
            Some(true) => "passed",
            Some(false) => "failed",
            None => "not checked",
        }
    }
}

impl RunRecord {
    /// (task, run, model, attempts): a rerun with the same results file skips what it holds.
    pub fn key(&self) -> (String, u32, String, u32) {
        let attempts = self.attempts.as_ref().map_or(1, |a| a.n);
        (self.task.clone(), self.run, self.model.clone(), attempts)
    }

    /// The record of a finished `fix --attempts N --json`: the chosen attempt's, with the
    /// set's cost and how every attempt went.
    pub fn from_set_json(json: &Value, id: RunId<'_>, wall_secs: f64) -> RunRecord {
        let attempts = json["attempts"].as_array().cloned().unwrap_or_default();
        let chosen = json["chosen"]["index"]
            .as_u64()
            .and_then(|i| u32::try_from(i).ok());
        let report = chosen_report(json);
        let mut record = RunRecord::from_fix_json(&report, id, wall_secs);
        if report.is_null() {
            record.outcome = "no-report".into();
        }
        record.cost_usd = json["cost_usd"].as_f64();
        let solved = attempts
            .iter()
            .filter(|a| (a["outcome"] == "passed") != id.impossible && a["run_id"].is_string())
            .count();
        record.attempts = Some(Attempts {
            n: u32::try_from(attempts.len()).unwrap_or(u32::MAX),
            solved: u32::try_from(solved).unwrap_or(u32::MAX),
            chosen,
        });
        record
    }

    /// The record of a finished `fix --json`.
    pub fn from_fix_json(json: &Value, id: RunId<'_>, wall_secs: f64) -> RunRecord {
        let usage = &json["usage"];
        let count = |v: &Value| v.as_u64().unwrap_or(0);
        let outcome = json["outcome"].as_str().unwrap_or("unknown").to_string();
        let passed = outcome == "passed";
        let tests = &json["tests"];
        RunRecord {
            task: id.task.to_string(),
            run: id.run,
            model: id.model.to_string(),
            solved: passed != id.impossible,
            impossible: id.impossible,
            passed,
            outcome,
            tests: serde_json::json!({"summary": tests["summary"], "failing": tests["failing"]}),
            vanished: serde_json::from_value(tests["vanished"].clone()).unwrap_or_default(),
            turns: count(&json["turns"]),
            tokens: Tokens {
                input: count(&usage["input_tokens"]),
                output: count(&usage["output_tokens"]),
                cache_read: count(&usage["cache_read_input_tokens"]),
                cache_write: count(&usage["cache_creation_input_tokens"]),
            },
            cost_usd: json["cost_usd"].as_f64(),
            wall_secs,
            harness_secs: json["harness_secs"].as_f64(),
            kept: None,
            required_tests: None,
            attempts: None,
        }
    }
}

/// The `fix --json` object of the attempt a set chose (Null when none was chosen).
pub fn chosen_report(set: &Value) -> Value {
    let chosen = set["chosen"]["index"].as_u64().unwrap_or(0);
    set["attempts"]
        .as_array()
        .and_then(|all| all.iter().find(|a| a["index"].as_u64() == Some(chosen)))
        .map_or(Value::Null, |a| a["report"].clone())
}

/// Which run a record is of.
#[derive(Debug, Clone, Copy)]
pub struct RunId<'a> {
    /// The task's name.
    pub task: &'a str,
    /// Which run of the task, from 0.
    pub run: u32,
    /// The eval's `--model` as given.
    pub model: &'a str,
    /// The task is marked impossible: a run solves it by not passing.
    pub impossible: bool,
}

/// The records of `paths`, merged: a (task, run, model) seen twice counts once (the last).
pub fn read_all(paths: &[impl AsRef<Path>]) -> Result<Vec<RunRecord>, EvalError> {
    let mut merged = BTreeMap::new();
    for path in paths {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record: RunRecord = serde_json::from_str(line).map_err(|e| {
                EvalError::Results(format!("{}:{}: {e}", path.display(), number + 1))
            })?;
            merged.insert(record.key(), record);
        }
    }
    Ok(merged.into_values().collect())
}

/// The records already in `path`, if it exists.
pub fn read_existing(path: &Path) -> Result<Vec<RunRecord>, EvalError> {
    if path.exists() {
        read_all(&[path])
    } else {
        Ok(Vec::new())
    }
}

/// Appends one line; a whole line per write, so a crash leaves no half record.
pub fn append(path: &Path, record: &RunRecord) -> Result<(), EvalError> {
    let mut line = serde_json::to_string(record).map_err(|e| EvalError::Results(e.to_string()))?;
    line.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| EvalError::io(path, e))?;
    file.write_all(line.as_bytes())
        .map_err(|e| EvalError::io(path, e))
}

#[cfg(test)]
mod required_tests {
    use super::*;
    use serde_json::json;

    fn required() -> RequiredTests {
        RequiredTests {
            fail_to_pass: vec!["a".into(), "b".into()],
            pass_to_pass: vec!["c".into()],
        }
    }

    #[test]
    fn a_failing_or_vanished_required_test_fails_the_check() {
        let tests = json!({"failing": ["a"], "vanished": ["c"], "passing": ["b"]});
        let check = RequiredCheck::of(&required(), &tests);
        let want = RequiredCheck {
            all_passed: Some(false),
            failing: vec!["a".into(), "c".into()],
            unchecked: vec![],
            note: None,
        };
        assert_eq!(check, want);
    }

    #[test]
    fn unittest_names_in_their_verbose_form_are_the_same_tests() {
        assert_eq!(
            canonical("test_add (tests.test_calc.T.test_add)"),
            "tests.test_calc.T.test_add"
        );
        assert_eq!(
            canonical("tests/test_x.py::test_y"),
            "tests/test_x.py::test_y"
        );
        assert_eq!(
            canonical("test_add (something else)"),
            "test_add (something else)"
        );
    }

    #[test]
    fn without_passing_names_the_check_says_it_could_not_tell() {
        let check = RequiredCheck::of(&required(), &json!({"failing": [], "vanished": []}));
        assert_eq!(check.all_passed, None);
        assert_eq!(check.unchecked, vec!["a", "b", "c"]);
        assert!(check.note.unwrap().contains("could not be checked"));
    }

    #[test]
    fn names_swe_bench_cut_or_shortened_are_matched_as_its_grading_matches_them() {
        let tests = json!({
            "failing": ["t.py::test_str[a b]"],
            "passing": [
                "t.py::test_fmt[x y]",
                "t.py::test_fmt[x z]",
                "t.py::test_open[/tmp/run/data.txt]",
                "sympy/core/tests/test_basic.py::test_subs",
                "sympy/core/tests/test_expr.py::test_subs",
                "sympy/core/tests/test_expr.py::test_args",
                "sympy/core/tests/test_other.py::test_args",
            ],
            "vanished": ["sympy/core/tests/test_expr2.py::test_args"],
        });
        let check = |name: &str| {
            let required = RequiredTests {
                fail_to_pass: vec![name.into()],
                pass_to_pass: vec![],
            };
            RequiredCheck::of(&required, &tests).all_passed
        };
        assert_eq!(
            check("t.py::test_fmt[x"),
            Some(true),
            "cut at a space, both pass"
        );
        assert_eq!(
            check("t.py::test_str[a"),
            Some(false),
            "cut at a space, it fails"
        );
        assert_eq!(
            check("t.py::test_open[data.txt]"),
            Some(true),
            "a path as its file name"
        );
        assert_eq!(
            check("test_subs"),
            Some(true),
            "a bare name, passing in every file"
        );
        assert_eq!(
            check("test_args"),
            None,
            "a bare name that passed in one file, vanished in another"
        );
        assert_eq!(check("t.py::test_f"), None, "not cut: no prefix match");
        assert_eq!(check("t.py::test_missing[q"), None);
    }

    #[test]
    fn every_required_test_named_passing_passes_the_check() {
        let tests = json!({"failing": ["x"], "passing": ["a", "b", "c"]});
        let check = RequiredCheck::of(&required(), &tests);
        assert_eq!((check.all_passed, check.word()), (Some(true), "passed"));
    }
}
