//! Run set-up: the branch and the work tree a run works in, beside `git worktree add` and
//! `remove` of the same tree; and `fix --if-failing` on a passing repository, beside the test
//! command itself.

use crate::common::{self, time, Options, Repo};
use agent_git::workspace::{pool, sweep, Workspace};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub fn run(repo: &Repo, options: &Options) {
    let git_repo = git2::Repository::open(&repo.path).expect("open");
    let base = repo.base();
    let mut n = 0;
    let mut floor = || floor_worktree(&repo.path);
    sweep::empty_pool(&git_repo);
    common::compare(
        "run set-up + end, empty pool",
        options.runs,
        1.0,
        &mut || {
            n += 1;
            let took = time(&mut || take_and_give_back(&git_repo, base, n));
            sweep::empty_pool(&git_repo);
            took
        },
        "git worktree add + remove",
        &mut floor,
    );
    take_and_give_back(&git_repo, base, 0);
    common::compare(
        "run set-up + end, from the pool",
        options.runs,
        0.1,
        &mut || {
            n += 1;
            time(&mut || take_and_give_back(&git_repo, base, n))
        },
        "git worktree add + remove",
        &mut floor,
    );
    sweep::empty_pool(&git_repo);
    if_failing(repo, options);
}

/// What a run does with its work tree: take one (from the pool if it can) on a new branch,
/// and hand it back at the end.
fn take_and_give_back(repo: &git2::Repository, base: git2::Oid, n: usize) {
    let branch = format!("agent/bench-{n}");
    let run_id = format!("bench{n:04}");
    let (workspace, slot) = Workspace::take(repo, base, &branch, &run_id, true).expect("take");
    pool::finish(workspace, slot).expect("give back");
}

fn floor_worktree(repo: &Path) -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let tree = dir.path().join("wt");
    let tree = tree.to_str().expect("utf-8 path");
    time(&mut || {
        common::git(repo, &["worktree", "add", "-q", "--detach", tree]);
        common::git(repo, &["worktree", "remove", "--force", tree]);
    })
}

/// `fix --if-failing` on a repository whose tests pass: from the pass cache, and without it
/// (the tests run once in the clean room), beside the test command run in the checkout.
fn if_failing(repo: &Repo, options: &Options) {
    let script = repo.path.parent().expect("parent").join("script.json");
    common::write(&script, "[]");
    let fix = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agent-git"));
        command
            .args([
                "fix",
                "--if-failing",
                "--test-cmd",
                "python3 -m unittest -q",
            ])
            .arg("--model")
            .arg(format!("script:{}", script.display()))
            .current_dir(&repo.path)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1");
        let out = command.output().expect("agent-git runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let tested = repo.path.join(".git/agent-git/tested");
    let mut tests = || {
        time(&mut || {
            let status = Command::new("python3")
                .args(["-m", "unittest", "-q"])
                .current_dir(&repo.path)
                .output()
                .expect("python3 runs");
            assert!(status.status.success());
        })
    };
    common::compare(
        "fix --if-failing, passing, not cached",
        options.runs,
        2.0,
        &mut || {
            let _ = std::fs::remove_dir_all(&tested);
            time(&mut || fix())
        },
        "python3 -m unittest",
        &mut tests,
    );
    fix();
    common::compare(
        "fix --if-failing, passing, cached",
        options.runs,
        1.0,
        &mut || time(&mut || fix()),
        "python3 -m unittest",
        &mut tests,
    );
}
