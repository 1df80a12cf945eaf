//! `agent-git tests`: what a fix run would find before it spends anything on a model. The
//! detected test command and why, the environment rules, how the inventory will be checked,
//! the test run of the commit in a clean room and whether the tests fail, pass or cannot run.
//! The answer is kept by tree and set-up, so asking again about the same tree costs nothing.

use super::tester::identity;
use super::Checker;
use crate::prepare::{plan_at, settings_at, tests_with_plan};
use crate::sandbox::Mode;
use crate::settings::Layer;
use crate::testrun::{Inventory, TestResult};
use crate::workspace::{record_tested, recorded, Tested};
use git2::Oid;
use serde_json::{json, Value};

/// The verdict of a dry run, as its exit code tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DryVerdict {
    /// Some tests fail and the tests can run: a fix run would start (exit 0).
    Fails,
    /// The tests already pass: nothing to fix (exit 1).
    Passes,
    /// The tests cannot run as they are: a fix run would stop before the model (exit 4).
    CannotRun,
}

impl DryVerdict {
    /// As `--json` spells it: `fails`, `passes`, `cannot-run`.
    pub fn name(self) -> &'static str {
        match self {
            DryVerdict::Fails => "fails",
            DryVerdict::Passes => "passes",
            DryVerdict::CannotRun => "cannot-run",
        }
    }

    /// The exit code of `agent-git tests`: 0 when a fix run has work, as each variant says.
    pub fn exit_code(self) -> u8 {
        match self {
            DryVerdict::Fails => 0,
            DryVerdict::Passes => 1,
            DryVerdict::CannotRun => 4,
        }
    }

    fn of_name(name: &str) -> Option<Self> {
        [DryVerdict::Fails, DryVerdict::Passes, DryVerdict::CannotRun]
            .into_iter()
            .find(|v| v.name() == name)
    }
}

/// What `agent-git tests` found: the `--json` object, and its verdict.
pub struct DryRun {
    /// Whether a fix run would have work.
    pub verdict: DryVerdict,
    /// The `--json` object.
    pub json: Value,
}

impl Checker<'_> {
    /// The dry run of `commit` with the settings `flags` add; `fresh` ignores what an earlier
    /// one of the same tree and set-up recorded. An error says why nothing could be tested.
    pub fn dry_run(
        &mut self,
        commit: Oid,
        flags: Layer,
        fresh: bool,
        progress: &mut dyn FnMut(&str),
    ) -> Result<DryRun, String> {
        let repo = self.repo;
        let tree = repo
            .find_commit(commit)
            .map_err(|e| format!("cannot read commit {commit}: {e}"))?
            .tree_id();
        let settings = settings_at(repo, commit, flags).map_err(|e| e.to_string())?;
        let plan = plan_at(repo, commit, &settings, &mut self.python).map_err(|e| e.to_string())?;
        let identity = identity(&plan, &settings, Mode::On);
        if let Some(earlier) = recorded(repo, tree, &identity).filter(|_| !fresh) {
            if let Some(found) = earlier_answer(earlier) {
                progress("this tree was tested before with the same set-up; nothing runs");
                return Ok(found);
            }
        }
        progress(&format!("tests: {}", plan.describe()));
        let tests =
            tests_with_plan(repo, commit, &settings, &[], plan).map_err(|e| e.to_string())?;
        let result = self
            .tester(&tests)?
            .test(tree, Some(commit))
            .map_err(|e| format!("the tests could not run: {e}"))?;
        let inventory = Inventory::of(&result);
        let not_run: Vec<&str> = inventory.as_ref().map_or(Vec::new(), |i| {
            i.python_files_not_run(&tests.plan.facts.python_test_files)
        });
        let protected = |path: &str| tests.protection.is_protected(std::path::Path::new(path));
        let reason = tests.plan.cannot_run(&result, &protected);
        let verdict = match (&reason, result.passed) {
            (Some(_), _) => DryVerdict::CannotRun,
            (None, true) => DryVerdict::Passes,
            (None, false) => DryVerdict::Fails,
        };
        let json = json!({
            "commit": commit.to_string(),
            "tree": tree.to_string(),
            "command": tests.plan.label,
            "rules": tests.plan.rules,
            "setup": tests.plan.setup,
            "verdict": verdict.name(),
            "reason": reason,
            "inventory": inventory_json(inventory.as_ref()),
            "protected_not_run": not_run,
            "tests": result_json(&result),
            "cached": false,
        });
        // A stop for the environment is not kept: its fix is to change the environment.
        if verdict != DryVerdict::CannotRun {
            let entry = Tested {
                identity,
                verdict: if result.passed { "passed" } else { "failed" }.into(),
                command: tests.plan.label.clone(),
                summary: result.summary(),
                commit: commit.to_string(),
                detail: Some(json.clone()),
            };
            if let Err(e) = record_tested(repo, tree, entry) {
                progress(&format!("could not keep what the tests found: {e}"));
            }
        }
        Ok(DryRun { verdict, json })
    }
}

/// The answer recorded earlier, marked as such; None when the record is a bare pass (of the
/// pre-push check, say) that does not say enough.
fn earlier_answer(earlier: Tested) -> Option<DryRun> {
    let mut json = earlier.detail?;
    let verdict = DryVerdict::of_name(json["verdict"].as_str()?)?;
    json["cached"] = json!(true);
    Some(DryRun { verdict, json })
}

fn inventory_json(inventory: Option<&Inventory>) -> Value {
    match inventory {
        Some(inventory) => json!({
            "checked": inventory.method().label(),
            "size": inventory.len(),
        }),
        None => json!({"checked": "by exit code", "size": 0}),
    }
}

fn result_json(result: &TestResult) -> Value {
    json!({
        "summary": result.summary(),
        "passed": result.passed,
        "exit_code": result.exit_code,
        "counts": result.counts,
        "failing": result.failing,
        "tail": result.tail,
    })
}

/// The dry run as the terminal shows it.
pub fn describe_dry_run(json: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut out = vec![format!(
        "Tests of {} ({}): `{}`",
        &text(&json["commit"]).chars().take(7).collect::<String>(),
        text(&json["verdict"]),
        text(&json["command"])
    )];
    for rule in json["rules"].as_array().into_iter().flatten() {
        out.push(format!("  {}", text(rule)));
    }
    if let Some(setup) = json["setup"].as_str() {
        out.push(format!("  setup: `{setup}`"));
    }
    out.push(format!(
        "Inventory: {} tests, checked {}",
        json["inventory"]["size"],
        text(&json["inventory"]["checked"])
    ));
    let cached = if json["cached"] == json!(true) {
        " (recorded earlier for this tree and set-up)"
    } else {
        ""
    };
    out.push(format!(
        "Before any change: {}{cached}",
        text(&json["tests"]["summary"])
    ));
    let failing = json["tests"]["failing"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !failing.is_empty() {
        out.push("Failing:".to_string());
        for failure in failing {
            match failure["detail"].as_str() {
                Some(detail) => out.push(format!("  {}: {detail}", text(&failure["name"]))),
                None => out.push(format!("  {}", text(&failure["name"]))),
            }
        }
    }
    let not_run: Vec<String> = json["protected_not_run"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    if !not_run.is_empty() {
        out.push(format!(
            "Protected, not run by the command: {}",
            not_run.join(", ")
        ));
    }
    out.push(match json["verdict"].as_str() {
        Some("fails") => "A fix run would start: the tests run, and some fail.".to_string(),
        Some("passes") => "The tests already pass: a fix run has nothing to do.".to_string(),
        _ => format!(
            "The tests cannot run, so a fix run would stop before the model: {}",
            text(&json["reason"])
        ),
    });
    out.join("\n") + "\n"
}
