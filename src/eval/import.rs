//! `eval import`: a task from a real fix commit. The base is the fix's parent tree plus the
//! fix's changed test files; the oracle replays the fix's other changes as tool calls. The
//! task's tests must fail on the base and pass with the oracle's changes, else it is refused.

use super::task::{fixed_signature, TaskSpec};
use super::EvalError;
use crate::check::{Checker, Verdict};
use git2::{Delta, Oid, Repository};
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a fix's test files are found when `--tests` is not given.
pub const DEFAULT_TEST_GLOBS: &[&str] = &[
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/*_test.go",
    "**/tests/**",
    "**/test/**",
    "**/__tests__/**",
    "**/*.test.js",
    "**/*.test.ts",
    "**/*.spec.js",
    "**/*.spec.ts",
];

/// `agent-git eval import`: make a task of a fix commit of a repository.
pub struct ImportRequest {
    /// The repository holding the fix.
    pub repo: PathBuf,
    /// The fix commit, as a revision; its parent is the task's start.
    pub fix: String,
    /// Globs of the test files; empty for the default patterns.
    pub tests: Vec<String>,
    /// The test command, when detection should not choose it.
    pub test_cmd: Option<String>,
    /// The task directory to write: missing or empty, else the import is refused.
    pub out: PathBuf,
}

/// A file's content in a tree: bytes and git's file mode, or gone.
pub(super) type Files = BTreeMap<String, Option<(Vec<u8>, i32)>>;

/// Makes the task, or refuses with the reason and writes nothing.
pub fn import(req: &ImportRequest, progress: &mut dyn FnMut(&str)) -> Result<String, EvalError> {
    let git = |e: git2::Error| EvalError::Git(e.to_string());
    refuse_nonempty(&req.out)?;
    let repo = Repository::open(&req.repo).map_err(git)?;
    let fix = repo
        .revparse_single(&req.fix)
        .and_then(|o| o.peel_to_commit())
        .map_err(git)?;
    let parent = fix.parent(0).map_err(|_| {
        EvalError::Refused(format!("{} has no parent commit to start from", req.fix))
    })?;
    let is_test = test_globs(&req.tests)?;
    let (tests, code) = changes(&repo, parent.tree_id(), fix.tree_id(), &is_test)?;
    if tests.is_empty() || code.is_empty() {
        let (what, globs) = (
            if tests.is_empty() { "test" } else { "non-test" },
            req.tests.join(" "),
        );
        return Err(EvalError::Refused(format!(
            "the fix changes no {what} files (test files: {}); a task needs both",
            if globs.is_empty() {
                "the default patterns".into()
            } else {
                globs
            }
        )));
    }
    let mut base = tree_files(&repo, parent.tree_id())?;
    merge(&mut base, &tests);
    let oracle = oracle_script(&code)?;
    let mut fixed = base.clone();
    merge(&mut fixed, &code);
    verify(req.test_cmd.as_deref(), &base, &fixed, progress)?;
    let subject = fix
        .summary()
        .ok()
        .flatten()
        .unwrap_or("Fix the bug")
        .to_string();
    let spec = TaskSpec {
        prompt: format!("{subject}\n\nThe failing tests show what is expected."),
        test_cmd: req.test_cmd.clone(),
        tags: vec!["imported".into()],
        ..TaskSpec::default()
    };
    write_task(&req.out, &spec, &base, &oracle)?;
    Ok(subject)
}

/// The task directory must not exist, or be empty: an import never overwrites.
pub(super) fn refuse_nonempty(out: &Path) -> Result<(), EvalError> {
    if out.exists() && std::fs::read_dir(out).map_or(true, |mut d| d.next().is_some()) {
        return Err(EvalError::Refused(format!(
            "{} exists and is not empty",
            out.display()
        )));
    }
    Ok(())
}

fn test_globs(given: &[String]) -> Result<GlobSet, EvalError> {
    let mut set = GlobSetBuilder::new();
    let defaults: Vec<String> = DEFAULT_TEST_GLOBS.iter().map(|g| g.to_string()).collect();
    for glob in if given.is_empty() { &defaults } else { given } {
        let glob =
            Glob::new(glob).map_err(|e| EvalError::Refused(format!("--tests {glob}: {e}")))?;
        set.add(glob);
    }
    set.build().map_err(|e| EvalError::Refused(e.to_string()))
}

/// The fix's changes, split into test files and the rest.
pub(super) fn changes(
    repo: &Repository,
    from: Oid,
    to: Oid,
    is_test: &GlobSet,
) -> Result<(Files, Files), EvalError> {
    let git = |e: git2::Error| EvalError::Git(e.to_string());
    let (old, new) = (
        repo.find_tree(from).map_err(git)?,
        repo.find_tree(to).map_err(git)?,
    );
    let diff = crate::workspace::trees::diff(repo, Some(&old), Some(&new), None).map_err(git)?;
    let (mut tests, mut code) = (Files::new(), Files::new());
    for delta in diff.deltas() {
        let file = delta.new_file();
        let Some(path) = file.path().map(|p| p.to_string_lossy().into_owned()) else {
            continue;
        };
        let content = if delta.status() == Delta::Deleted {
            None
        } else {
            let blob = repo.find_blob(file.id()).map_err(git)?;
            Some((blob.content().to_vec(), i32::from(file.mode())))
        };
        let side = if is_test.is_match(&path) {
            &mut tests
        } else {
            &mut code
        };
        side.insert(path, content);
    }
    Ok((tests, code))
}

/// Every blob of a tree (submodules are left out).
pub(super) fn tree_files(repo: &Repository, tree: Oid) -> Result<Files, EvalError> {
    let git = |e: git2::Error| EvalError::Git(e.to_string());
    let tree = repo.find_tree(tree).map_err(git)?;
    let mut files = Files::new();
    let mut failed = None;
    crate::workspace::entries::each_entry(repo, &tree, &mut |dir, entry| {
        if entry.kind() != Some(git2::ObjectType::Blob) || failed.is_some() {
            return failed.is_none();
        }
        let path = crate::workspace::entries::entry_path(dir, entry);
        let Some(name) = path.to_str() else {
            failed = Some(EvalError::Task(format!(
                "{} is not a UTF-8 path, which a task cannot hold; rename it in the \
                 repository first",
                path.display()
            )));
            return false;
        };
        match repo.find_blob(entry.id()) {
            Ok(blob) => {
                files.insert(
                    name.to_string(),
                    Some((blob.content().to_vec(), entry.filemode())),
                );
            }
            Err(e) => failed = Some(git(e)),
        }
        true
    })
    .map_err(git)?;
    failed.map_or(Ok(files), Err)
}

fn merge(files: &mut Files, changes: &Files) {
    for (path, content) in changes {
        files.insert(path.clone(), content.clone());
    }
}

/// The oracle: one write_file or delete_file call per changed file, then end_turn.
pub(super) fn oracle_script(code: &Files) -> Result<Value, EvalError> {
    let mut calls = Vec::new();
    for (i, (path, content)) in code.iter().enumerate() {
        let id = format!("t{}", i + 1);
        let call = match content {
            None => {
                json!({"type": "tool_use", "id": id, "name": "delete_file", "input": {"path": path}})
            }
            Some((bytes, _)) => {
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    EvalError::Refused(format!("the fix changes {path}, which is not text"))
                })?;
                json!({"type": "tool_use", "id": id, "name": "write_file",
                       "input": {"path": path, "content": text}})
            }
        };
        calls.push(call);
    }
    let mut content = vec![json!({"type": "text", "text": "Apply the fix."})];
    content.extend(calls);
    Ok(json!([
        {"stop_reason": "tool_use", "content": content},
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": "Done."}]}
    ]))
}

/// The tests must fail on `base` and pass on `fixed`, each tested in a clean room.
pub(super) fn verify(
    test_cmd: Option<&str>,
    base: &Files,
    fixed: &Files,
    progress: &mut dyn FnMut(&str),
) -> Result<(), EvalError> {
    let dir = tempfile::tempdir().map_err(|e| EvalError::io(&std::env::temp_dir(), e))?;
    let repo = Repository::init(dir.path()).map_err(|e| EvalError::Git(e.to_string()))?;
    if let Some(cmd) = test_cmd {
        let set = repo
            .config()
            .and_then(|mut c| c.set_str("agent-git.testCmd", cmd));
        set.map_err(|e| EvalError::Git(e.to_string()))?;
    }
    let base_commit = commit_files(&repo, base, None)?;
    let fixed_commit = commit_files(&repo, fixed, Some(base_commit))?;
    let mut checker = Checker::new(&repo);
    progress("testing the base (the tests must fail)");
    match checker.check(base_commit, progress) {
        Verdict::Failed(_) => {}
        Verdict::Passed { summary, .. } => {
            return Err(EvalError::Refused(format!(
                "the tests already pass before the fix ({summary}); the fix's test files do not \
                 catch the bug"
            )))
        }
        Verdict::CannotRun(why) => return Err(EvalError::Refused(format!("on the base: {why}"))),
    }
    progress("testing the oracle's changes (the tests must pass)");
    match checker.check(fixed_commit, progress) {
        Verdict::Passed { .. } => Ok(()),
        Verdict::Failed(result) => Err(EvalError::Refused(format!(
            "the tests still fail with the fix applied: {}",
            result.summary()
        ))),
        Verdict::CannotRun(why) => Err(EvalError::Refused(format!("with the fix: {why}"))),
    }
}

/// A commit of exactly `files`, with the eval's fixed identity and date.
fn commit_files(repo: &Repository, files: &Files, parent: Option<Oid>) -> Result<Oid, EvalError> {
    let git = |e: git2::Error| EvalError::Git(e.to_string());
    let mut index = git2::Index::new().map_err(git)?;
    for (path, content) in files {
        let Some((bytes, mode)) = content else {
            continue;
        };
        let id = repo.blob(bytes).map_err(git)?;
        let entry = crate::workspace::blob_entry(path.as_bytes(), id, *mode as u32);
        index.add(&entry).map_err(git)?;
    }
    let tree = repo
        .find_tree(index.write_tree_to(repo).map_err(git)?)
        .map_err(git)?;
    let who = fixed_signature().map_err(git)?;
    let parents = match parent {
        Some(id) => vec![repo.find_commit(id).map_err(git)?],
        None => Vec::new(),
    };
    let parents: Vec<&git2::Commit> = parents.iter().collect();
    repo.commit(Some("HEAD"), &who, &who, "eval import", &tree, &parents)
        .map_err(git)
}

/// Writes task.json, oracle.json and repo/ (modes and symlinks kept).
pub(super) fn write_task(
    out: &Path,
    spec: &TaskSpec,
    base: &Files,
    oracle: &Value,
) -> Result<(), EvalError> {
    let write = |path: &Path, bytes: &[u8]| {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| EvalError::io(parent, e))?;
        }
        std::fs::write(path, bytes).map_err(|e| EvalError::io(path, e))
    };
    let pretty = |v: &Value| serde_json::to_vec_pretty(v).unwrap_or_default();
    let spec = serde_json::to_value(spec).map_err(|e| EvalError::Task(e.to_string()))?;
    write(&out.join("task.json"), &pretty(&spec))?;
    write(&out.join("oracle.json"), &pretty(oracle))?;
    for (path, content) in base {
        let Some((bytes, mode)) = content else {
            continue;
        };
        let target = out.join("repo").join(path);
        if *mode == 0o120000 {
            write(&target, b"")?;
            std::fs::remove_file(&target).map_err(|e| EvalError::io(&target, e))?;
            let link = String::from_utf8_lossy(bytes).into_owned();
            std::os::unix::fs::symlink(link, &target).map_err(|e| EvalError::io(&target, e))?;
            continue;
        }
        write(&target, bytes)?;
        if *mode == 0o100755 {
            use std::os::unix::fs::PermissionsExt;
            let perms = std::fs::Permissions::from_mode(0o755);
            std::fs::set_permissions(&target, perms).map_err(|e| EvalError::io(&target, e))?;
        }
    }
    Ok(())
}
