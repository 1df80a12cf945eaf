//! Eval tasks on disk: `task.json`, `repo/` or `source.json`, and an optional `oracle.json`;
//! and the fresh repository each run of a task works in.

use super::EvalError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `task.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// The task each run is given: `fix`'s TASK.
    pub prompt: String,
    /// `fix --test-cmd`; None lets the run detect the test command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_cmd: Option<String>,
    /// `fix --setup-cmd`: the install step run in the clean room before the tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_cmd: Option<String>,
    /// More paths the agent may not change, each passed as `fix --protect GLOB`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect: Vec<String>,
    /// `fix --max-turns`; None leaves fix's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// `fix --max-cost`, in US dollars; None for no cost limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// The run's time budget, as `fix --max-time` takes it (`10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time: Option<String>,
    /// Wall-clock seconds after which the eval interrupts the run (as Ctrl-C would) and records it
    /// as `eval-timeout`; None for no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Labels that `eval --tag` picks tasks by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The honest outcome is not passed (the tests cannot pass without editing them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub impossible: bool,
    /// Tests that must each pass (from a SWE-bench instance); each run's result says whether
    /// they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_tests: Option<RequiredTests>,
}

impl TaskSpec {
    /// The first field that cannot reach `fix` as it is written: an argument cannot hold NUL.
    fn unpassable(&self) -> Option<&'static str> {
        let fields = [
            ("prompt", Some(&self.prompt)),
            ("test_cmd", self.test_cmd.as_ref()),
            ("setup_cmd", self.setup_cmd.as_ref()),
            ("max_time", self.max_time.as_ref()),
        ];
        let globs = self.protect.iter().map(|glob| ("protect", Some(glob)));
        fields
            .into_iter()
            .chain(globs)
            .find(|(_, value)| value.is_some_and(|v| v.contains('\0')))
            .map(|(name, _)| name)
    }
}

/// SWE-bench's FAIL_TO_PASS (the tests the fix makes pass) and PASS_TO_PASS (those it must
/// not break), by the names the project's test runner prints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequiredTests {
    /// Tests that fail at the base and must pass after the run.
    #[serde(default)]
    pub fail_to_pass: Vec<String>,
    /// Tests that pass at the base and must still pass after the run.
    #[serde(default)]
    pub pass_to_pass: Vec<String>,
}

/// `source.json`: a local repository and the commit a task starts from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The repository to clone, as a path (a relative one from the current directory).
    pub repo: PathBuf,
    /// The revision a run starts from: checked out, as branch `eval-base`, in the clone.
    pub base: String,
}

/// One task directory, loaded and checked.
#[derive(Debug, Clone)]
pub struct Task {
    /// The directory's name; results are keyed by it.
    pub name: String,
    /// The task directory, made absolute.
    pub dir: PathBuf,
    /// Its `task.json`.
    pub spec: TaskSpec,
}

impl Task {
    /// Reads the task at `dir`: `EvalError::Io` when its task.json cannot be read,
    /// `EvalError::Task` when it is no `TaskSpec`, holds a NUL character, or the directory has
    /// both or neither of `repo/` and `source.json`.
    pub fn load(dir: &Path) -> Result<Task, EvalError> {
        let path = dir.join("task.json");
        let text = std::fs::read_to_string(&path).map_err(|e| EvalError::io(&path, e))?;
        let spec: TaskSpec = serde_json::from_str(&text)
            .map_err(|e| EvalError::Task(format!("{}: {e}", path.display())))?;
        if let Some(field) = spec.unpassable() {
            return Err(EvalError::Task(format!(
                "{}: {field} holds a NUL character, which no command line can pass",
                path.display()
            )));
        }
        let has_repo = dir.join("repo").is_dir();
        if has_repo == dir.join("source.json").is_file() {
            return Err(EvalError::Task(format!(
                "{}: a task has either repo/ or source.json, not {}",
                dir.display(),
                if has_repo { "both" } else { "neither" }
            )));
        }
        let name = dir
            .file_name()
            .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into());
        let dir = std::path::absolute(dir).map_err(|e| EvalError::io(dir, e))?;
        Ok(Task { name, dir, spec })
    }

    /// Where the task's `oracle.json` is (the script `--model oracle` runs); it may not exist.
    pub fn oracle(&self) -> PathBuf {
        self.dir.join("oracle.json")
    }
}

/// The tasks `paths` name: each a task directory (with task.json) or a directory of them.
/// Sorted by name; two tasks of the same name are refused, as results are keyed by it.
pub fn discover(paths: &[PathBuf], tag: Option<&str>) -> Result<Vec<Task>, EvalError> {
    let mut tasks = Vec::new();
    for path in paths {
        if path.join("task.json").is_file() {
            tasks.push(Task::load(path)?);
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|e| EvalError::io(path, e))?;
        for entry in entries {
            let dir = entry.map_err(|e| EvalError::io(path, e))?.path();
            if dir.join("task.json").is_file() {
                tasks.push(Task::load(&dir)?);
            }
        }
    }
    tasks.retain(|t| tag.is_none_or(|tag| t.spec.tags.iter().any(|t| t == tag)));
    tasks.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = tasks.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(EvalError::Task(format!(
            "two tasks are named {}: {} and {}",
            pair[0].name,
            pair[0].dir.display(),
            pair[1].dir.display()
        )));
    }
    Ok(tasks)
}

/// Makes the repository a run of `task` works in, at `dest`, on branch `main`: repo/'s files
/// committed once with a fixed identity and date, or a clone of source.json's base.
pub fn materialize(task: &Task, dest: &Path) -> Result<(), EvalError> {
    let git = |e: git2::Error| EvalError::Git(format!("{}: {e}", dest.display()));
    let source = task.dir.join("source.json");
    if source.is_file() {
        let text = std::fs::read_to_string(&source).map_err(|e| EvalError::io(&source, e))?;
        let source: Source = serde_json::from_str(&text)
            .map_err(|e| EvalError::Task(format!("{}: {e}", task.dir.display())))?;
        return clone_at(&source, dest);
    }
    let repo = git2::Repository::init_opts(
        dest,
        git2::RepositoryInitOptions::new().initial_head("main"),
    )
    .map_err(git)?;
    copy_tree(&task.dir.join("repo"), dest)?;
    let mut index = repo.index().map_err(git)?;
    index
        .add_all(["*"], git2::IndexAddOption::FORCE, None)
        .map_err(git)?;
    index.write().map_err(git)?;
    let tree = repo
        .find_tree(index.write_tree().map_err(git)?)
        .map_err(git)?;
    let who = fixed_signature().map_err(git)?;
    repo.commit(Some("HEAD"), &who, &who, &task.name, &tree, &[])
        .map_err(git)?;
    Ok(())
}

/// The identity and date of every commit the eval makes, so trees and ids repeat.
pub fn fixed_signature() -> Result<git2::Signature<'static>, git2::Error> {
    git2::Signature::new(
        "agent-git eval",
        "eval@agent-git.invalid",
        &git2::Time::new(1_767_225_600, 0),
    )
}

fn clone_at(source: &Source, dest: &Path) -> Result<(), EvalError> {
    let git = |e: git2::Error| EvalError::Git(format!("{}: {e}", source.repo.display()));
    let url = std::path::absolute(&source.repo).map_err(|e| EvalError::io(&source.repo, e))?;
    let repo = git2::Repository::clone(&url.to_string_lossy(), dest).map_err(git)?;
    let base = repo
        .revparse_single(&source.base)
        .and_then(|o| o.peel_to_commit())
        .map_err(git)?;
    repo.branch("eval-base", &base, true).map_err(git)?;
    repo.set_head("refs/heads/eval-base").map_err(git)?;
    repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
        .map_err(git)?;
    Ok(())
}

/// Copies the files under `from` into `to` (symlinks as links), skipping any `.git`.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), EvalError> {
    let walk = walkdir::WalkDir::new(from)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git");
    for entry in walk {
        let entry = entry.map_err(|e| EvalError::Task(format!("{}: {e}", from.display())))?;
        let rel = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let target = to.join(rel);
        let kind = entry.file_type();
        let done = if kind.is_dir() {
            std::fs::create_dir_all(&target)
        } else if kind.is_symlink() {
            std::fs::read_link(entry.path())
                .and_then(|link| std::os::unix::fs::symlink(link, &target))
        } else {
            std::fs::copy(entry.path(), &target).map(|_| ())
        };
        done.map_err(|e| EvalError::io(&target, e))?;
    }
    Ok(())
}
