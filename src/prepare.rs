//! What a run (`fix`) and a check (`check`, the pre-push hook) both prepare from a commit and
//! the settings: the test plan, the protected paths and the directories left writable.

use crate::guard::Protection;
use crate::settings::{config_layers, merge, Layer, Settings};
use crate::testrun::{collected, detect, TestPlan};
use crate::workspace::{read_blob, tree_files, SetupError};
use git2::{Oid, Repository};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(
        "cannot tell how to run this repository's tests; pass --test-cmd CMD or run \
         `git config agent-git.testCmd CMD`"
    )]
    NoTestCommand,
    /// A setting that cannot be used; the text says which and how to fix it.
    #[error("{0}")]
    Invalid(String),
}

/// The settings for `commit`: `flags` over git config over the commit's `.agentgit`.
pub fn settings_at(repo: &Repository, commit: Oid, flags: Layer) -> Result<Settings, PrepareError> {
    let mut layers = vec![flags];
    layers.extend(config_layers(repo, commit).map_err(PrepareError::Invalid)?);
    Ok(merge(&layers))
}

/// How the tests of a commit are run and what they stand on.
pub struct TestsAt {
    pub plan: TestPlan,
    pub protection: Protection,
    /// Directories the sandbox leaves writable on the user's request.
    pub allow_write: Vec<PathBuf>,
}

/// The test plan of `commit` (configured, else detected from its files), the protection its
/// runner calls for, and the writable directories the settings name. `python` is asked of
/// the `python3` on PATH at most once, and only when the commit holds Python files.
pub fn tests_at(
    repo: &Repository,
    commit: Oid,
    settings: &Settings,
    python: &mut Option<PythonFacts>,
) -> Result<TestsAt, PrepareError> {
    let plan = plan_at(repo, commit, settings, python)?;
    tests_for_plan(repo, commit, settings, python, plan)
}

/// What `plan` needs to run at `commit`: the protection of its runner (python3 asked for its
/// modules when the commit holds Python files) and the writable directories.
pub fn tests_for_plan(
    repo: &Repository,
    commit: Oid,
    settings: &Settings,
    python: &mut Option<PythonFacts>,
    plan: TestPlan,
) -> Result<TestsAt, PrepareError> {
    let files = tree_files(repo, commit)?;
    let modules = &facts(&files, python).modules;
    tests_with_files(repo, commit, &files, settings, modules, plan)
}

/// The test plan alone. `python3` is asked only when detection needs to know whether it has
/// pytest.
pub fn plan_at(
    repo: &Repository,
    commit: Oid,
    settings: &Settings,
    python: &mut Option<PythonFacts>,
) -> Result<TestPlan, PrepareError> {
    let files = tree_files(repo, commit)?;
    let read =
        |p: &str| read_blob(repo, commit, p).map(|b| String::from_utf8_lossy(&b).into_owned());
    let pytest = settings.test_cmd.is_none() && facts(&files, python).pytest;
    test_plan(&files, &read, settings, pytest)
}

/// What `plan` calls for: the protection of its runner and the writable directories.
/// `python_modules` (what python3 imports from outside the tree) only keep new modules from
/// shadowing those; which existing paths are protected does not depend on them.
pub fn tests_with_plan(
    repo: &Repository,
    commit: Oid,
    settings: &Settings,
    python_modules: &[String],
    plan: TestPlan,
) -> Result<TestsAt, PrepareError> {
    let files = tree_files(repo, commit)?;
    tests_with_files(repo, commit, &files, settings, python_modules, plan)
}

/// `tests_with_plan` for the commit's `files`, walked once.
fn tests_with_files(
    repo: &Repository,
    commit: Oid,
    files: &[String],
    settings: &Settings,
    python_modules: &[String],
    plan: TestPlan,
) -> Result<TestsAt, PrepareError> {
    let read =
        |p: &str| read_blob(repo, commit, p).map(|b| String::from_utf8_lossy(&b).into_owned());
    let found = collected(plan.runner, &plan.command, files, &read, python_modules);
    let protection = Protection::with_no_new(
        &found.protected,
        &found.no_new,
        found.shadows,
        &settings.protect,
    )
    .map_err(PrepareError::Invalid)?;
    let allow_write = writable_dirs(&settings.allow_write)?;
    Ok(TestsAt {
        plan,
        protection,
        allow_write,
    })
}

/// What python3 brings, asked once; nothing for a tree without Python files.
fn facts<'p>(files: &[String], python: &'p mut Option<PythonFacts>) -> &'p PythonFacts {
    static NONE: PythonFacts = PythonFacts {
        pytest: false,
        modules: Vec::new(),
    };
    if files.iter().any(|p| p.ends_with(".py")) {
        python.get_or_insert_with(python_facts)
    } else {
        &NONE
    }
}

/// The configured test command, or the one the commit's files point to.
fn test_plan(
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    settings: &Settings,
    pytest_available: bool,
) -> Result<TestPlan, PrepareError> {
    let timeout = Duration::from_secs(settings.test_timeout);
    let mut plan = match &settings.test_cmd {
        Some(cmd) => TestPlan::shell(cmd.clone(), timeout),
        None => {
            let detected =
                detect(files, read, pytest_available).ok_or(PrepareError::NoTestCommand)?;
            TestPlan::from_detected(detected, timeout)
        }
    };
    plan.setup = settings.setup_cmd.clone();
    Ok(plan)
}

/// The directories the user made writable: they must exist, and are named by their real path.
fn writable_dirs(dirs: &[String]) -> Result<Vec<PathBuf>, PrepareError> {
    dirs.iter()
        .map(|dir| {
            std::fs::canonicalize(dir)
                .ok()
                .filter(|p| p.is_dir())
                .ok_or_else(|| {
                    PrepareError::Invalid(format!(
                        "--allow-write {dir}: no such directory; create it first, or fix \
                         agent-git.sandbox.allowWrite"
                    ))
                })
        })
        .collect()
}

/// What the `python3` on PATH brings: whether `python3 -m pytest` works, and the names it
/// imports from outside a project (its standard library and installed packages).
#[derive(Debug, Default)]
pub struct PythonFacts {
    pub pytest: bool,
    pub modules: Vec<String>,
}

const PYTHON_FACTS: &str = "\
import sys
names = set(getattr(sys, 'stdlib_module_names', ())) | set(sys.builtin_module_names)
try:
    import importlib.metadata as metadata
    names |= set(metadata.packages_distributions())
except Exception:
    pass
try:
    import pytest
    print('pytest')
except Exception:
    print('no pytest')
print('\\n'.join(sorted(n for n in names if n.isidentifier())))
";

/// Asks the `python3` on PATH; nothing when there is none.
pub fn python_facts() -> PythonFacts {
    let out = std::process::Command::new("python3")
        .args(["-c", PYTHON_FACTS])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        return PythonFacts::default();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    PythonFacts {
        pytest: lines.next() == Some("pytest"),
        modules: lines.map(String::from).collect(),
    }
}
