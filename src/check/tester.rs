//! Tests commits for `check`: each tree once, in a clean room, with the set-up `fix` would
//! use; a pass is kept in git by tree, so the same tree is never tested twice.

use super::Verdict;
use crate::prepare::{plan_at, settings_at, tests_with_plan, AskedPython, TestsAt};
use crate::sandbox::{Limits, Mode, Sandbox};
use crate::settings::{Layer, Settings};
use crate::testrun::{TestPlan, TestResult};
use crate::verify::{TestSetup, TreeTester, Unreadable};
use crate::workspace::{config_with_credentials, record_tested, tested, Tested};
use git2::{Oid, Repository};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

/// Tests commits of a repository in a clean room, each tree once, with no model: for the
/// pre-push hook and `agent-git tests`.
pub struct Checker<'r> {
    pub(super) repo: &'r Repository,
    pub(super) python: AskedPython,
    /// Started at the first tree that must be tested, with the directory its probe runs in.
    sandbox: Option<(Sandbox, tempfile::TempDir)>,
    /// Never set: a Ctrl-C during a push ends the hook, and the sandbox with it.
    interrupt: AtomicBool,
    /// What each tree came to in this check (a failure is not kept beyond it).
    seen: HashMap<Oid, Verdict>,
}

impl<'r> Checker<'r> {
    /// Starts nothing yet: the sandbox starts at the first tree that must be tested.
    pub fn new(repo: &'r Repository) -> Self {
        Checker {
            repo,
            python: AskedPython::default(),
            sandbox: None,
            interrupt: AtomicBool::new(false),
            seen: HashMap::new(),
        }
    }

    /// Tests `commit`, unless its tree passed before with the same set-up. `progress` hears a
    /// line when a test run starts.
    pub fn check(&mut self, commit: Oid, progress: &mut dyn FnMut(&str)) -> Verdict {
        let tree = match self.repo.find_commit(commit) {
            Ok(found) => found.tree_id(),
            Err(e) => return Verdict::CannotRun(format!("cannot read commit {commit}: {e}")),
        };
        if let Some(verdict) = self.seen.get(&tree) {
            return verdict.clone();
        }
        let verdict = self.check_tree(commit, tree, progress);
        self.seen.insert(tree, verdict.clone());
        verdict
    }

    fn check_tree(&mut self, commit: Oid, tree: Oid, progress: &mut dyn FnMut(&str)) -> Verdict {
        let settings = match settings_at(self.repo, commit, Layer::default()) {
            Ok(settings) => settings,
            Err(e) => return Verdict::CannotRun(e.to_string()),
        };
        let plan = match plan_at(self.repo, commit, &settings, &mut self.python) {
            Ok(plan) => plan,
            Err(e) => return Verdict::CannotRun(e.to_string()),
        };
        let identity = identity(&plan, &settings, Mode::On);
        if let Some(found) = tested(self.repo, tree, &identity) {
            return Verdict::Passed {
                summary: found.summary,
                cached: true,
            };
        }
        // A check commits nothing, so no new module can appear: python3's modules (which
        // take it a while to list) are not needed.
        let tests = match tests_with_plan(self.repo, commit, &settings, &[], plan) {
            Ok(tests) => tests,
            Err(e) => return Verdict::CannotRun(e.to_string()),
        };
        let short = &commit.to_string()[..7];
        progress(&format!(
            "testing {short} with `{}` in a clean room",
            tests.plan.label
        ));
        let result = match self.run(tree, commit, &tests) {
            Ok(result) => result,
            Err(why) => return Verdict::CannotRun(why),
        };
        let verdict = verdict_of(&tests.plan, result);
        if let Verdict::Passed { summary, .. } = &verdict {
            let entry = Tested {
                detail: None,
                identity,
                verdict: "passed".into(),
                command: tests.plan.label.clone(),
                summary: summary.clone(),
                commit: commit.to_string(),
            };
            if let Err(e) = record_tested(self.repo, tree, entry) {
                progress(&format!("could not keep the pass of {short}: {e}"));
            }
        }
        verdict
    }

    /// One clean-room run of `tree`; an error says why the tests could not be run.
    fn run(&mut self, tree: Oid, commit: Oid, tests: &TestsAt) -> Result<TestResult, String> {
        self.tester(tests)?
            .test_as_anyone(tree, Some(commit))
            .map_err(|e| format!("the tests could not run: {e}"))
    }

    /// A clean room for `tests`, in the sandbox started the first time one is needed.
    pub(super) fn tester<'t>(&'t mut self, tests: &'t TestsAt) -> Result<TreeTester<'t>, String> {
        let repo = self.repo;
        self.start_sandbox(&tests.allow_write, &tests.allow_read)?;
        let Some((sandbox, _)) = &self.sandbox else {
            return Err("cannot set up the sandbox".to_string());
        };
        let setup = TestSetup {
            protection: &tests.protection,
            plan: &tests.plan,
            sandbox,
            interrupt: &self.interrupt,
            waiting: &|_: &str, _: std::time::Duration| {},
        };
        let unreadable = Unreadable {
            user_workdir: repo.workdir(),
            private_files: &[],
        };
        let objects = repo.commondir().join("objects");
        TreeTester::new(&objects, None, setup, unreadable, None)
            .map_err(|e| format!("cannot set up the clean room: {e}"))
    }

    /// Starts the sandbox the first time it is needed.
    fn start_sandbox(
        &mut self,
        allow_write: &[PathBuf],
        allow_read: &[PathBuf],
    ) -> Result<(), String> {
        if self.sandbox.is_none() {
            let helper = std::env::current_exe()
                .map_err(|e| format!("cannot find agent-git's own binary: {e}"))?;
            let work = tempfile::Builder::new()
                .prefix("agent-git-check-")
                .tempdir()
                .map_err(|e| format!("cannot make a temp dir: {e}"))?;
            let sandbox = Sandbox::start(
                Mode::On,
                helper,
                work.path(),
                Limits::default(),
                crate::sandbox::Reach {
                    allow_write: allow_write.to_vec(),
                    allow_read: allow_read.to_vec(),
                    readable: Vec::new(),
                    hidden: config_with_credentials(self.repo.commondir()),
                },
            )
            .map_err(|e| format!("cannot set up the sandbox: {e}"))?;
            self.sandbox = Some((sandbox, work));
        }
        Ok(())
    }
}

/// A run that could not start or could not test anything says so; only a run that tested
/// something and failed is a failure.
fn verdict_of(plan: &TestPlan, result: TestResult) -> Verdict {
    if result.passed {
        return Verdict::Passed {
            summary: result.summary(),
            cached: false,
        };
    }
    match plan.cannot_run_here(&result) {
        Some(why) => Verdict::CannotRun(format!("{why} (test command `{}`)", result.command)),
        None => Verdict::Failed(Box::new(result)),
    }
}

/// A digest of everything besides the tree that decides a test result: a change to any of it
/// makes an earlier pass say nothing. `fix` keys its passes the same way, so a pass of the
/// pre-push check answers `fix --if-failing` and the other way round.
pub fn identity(plan: &TestPlan, settings: &Settings, sandbox: Mode) -> String {
    let mut text = format!(
        "agent-git {}\ncommand: {:?}\nrunner: {:?}\nsetup: {:?}\ntimeout: {}\nprotect: {:?}\n\
         allow-write: {:?}\nallow-read: {:?}\npython-path: {:?}\nnode-modules: {:?}\nvenv: {:?}\n",
        env!("CARGO_PKG_VERSION"),
        plan.command,
        plan.runner,
        plan.setup,
        plan.timeout.as_secs(),
        settings.protect,
        settings.allow_write,
        settings.allow_read,
        plan.python_path,
        plan.node_modules,
        plan.venv,
    );
    // Unconfined tests may pass where confined ones fail (a network call, say).
    if sandbox == Mode::Off {
        text.push_str("sandbox: off\n");
    }
    match Oid::hash_object(git2::ObjectType::Blob, text.as_bytes()) {
        Ok(id) => id.to_string(),
        Err(_) => text,
    }
}
