//! The pre-push helper: `agent-git hook install`, then real pushes to real (bare) remotes.

use crate::common::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A repository whose pushes are tested: the calc example (test_add fails), a bare remote
/// `origin`, and a test command that also counts its runs in a file outside the repository
/// (a directory the sandbox is told to leave writable).
struct Pushing {
    env: TestEnv,
    repo: PathBuf,
    remote: PathBuf,
    counter: PathBuf,
}

impl Pushing {
    fn new() -> Self {
        let env = TestEnv::new();
        let repo = env.calc_repo();
        let remote = env.path().join("remote.git");
        env.git(
            env.path(),
            &["init", "-q", "--bare", remote.to_str().unwrap()],
        );
        env.git(
            &repo,
            &["remote", "add", "origin", remote.to_str().unwrap()],
        );
        let counter = env.path().join("counter");
        std::fs::create_dir(&counter).unwrap();
        let test_cmd = format!(
            "echo run >> {}/runs; python3 -c 'import test_calc as t; t.test_add(); \
             t.test_multiply()'",
            counter.display()
        );
        env.git(&repo, &["config", "agent-git.testCmd", &test_cmd]);
        env.git(
            &repo,
            &[
                "config",
                "agent-git.sandbox.allowWrite",
                counter.to_str().unwrap(),
            ],
        );
        Pushing {
            env,
            repo,
            remote,
            counter,
        }
    }

    /// The same, with add() fixed in a second commit: the tests pass.
    fn passing() -> Self {
        let p = Pushing::new();
        std::fs::write(p.repo.join("calc.py"), CALC_FIXED).unwrap();
        p.git(&["commit", "-q", "-am", "Fix add"]);
        p
    }

    fn git(&self, args: &[&str]) -> String {
        self.env.git(&self.repo, args)
    }

    fn agent(&self, args: &[&str]) -> Output {
        self.env.agent(&self.repo, args)
    }

    fn install(&self) -> String {
        let out = self.agent(&["hook", "install"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        stdout(&out)
    }

    /// How many times the test command ran.
    fn test_runs(&self) -> usize {
        std::fs::read_to_string(self.counter.join("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// `git push ARGS` as a user runs it: agent-git on PATH, no global config, no model.
    fn push_with(&self, args: &[&str], adjust: impl FnOnce(&mut Command)) -> Output {
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_agent-git")).parent().unwrap();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
        let mut cmd = Command::new("git");
        cmd.arg("push")
            .args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.env.path().join("home"))
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_SYSTEM", "/dev/null");
        adjust(&mut cmd);
        cmd.output().unwrap()
    }

    fn push(&self, args: &[&str]) -> Output {
        self.push_with(args, |_| {})
    }

    /// The commit the remote's `branch` is at, or "" when it has none.
    fn remote_at(&self, branch: &str) -> String {
        self.env
            .git(
                &self.remote,
                &["branch", "--list", branch, "--format=%(objectname)"],
            )
            .trim()
            .to_string()
    }

    fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_string()
    }
}

fn hook_script() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks/pre-push")).unwrap()
}

#[test]
fn install_chains_the_hook_that_was_there_and_uninstall_restores_it_byte_for_byte() {
    let p = Pushing::passing();
    let hooks = p.repo.join(".git/hooks");
    let theirs = hooks.join("pre-push");
    let seen = p.env.path().join("their-hook-saw");
    let script = format!(
        "#!/bin/sh\n# the user's own hook\necho \"$@\" > {0}\ncat >> {0}\n",
        seen.display()
    );
    std::fs::write(&theirs, &script).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o750)).unwrap();
    let before = UserState::capture(&p.env, &p.repo);

    assert!(p.install().contains("runs first"));
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), hook_script());
    assert!(
        p.install().contains("is installed"),
        "installing twice changes nothing"
    );
    let out = p.push(&["-q", "origin", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(p.remote_at("main"), p.head());
    assert_eq!(p.test_runs(), 1);
    let remote = p.remote.display().to_string();
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        format!(
            "origin {remote}\nrefs/heads/main {} refs/heads/main {}\n",
            p.head(),
            "0".repeat(40)
        ),
        "their hook ran first, with git's arguments and input"
    );

    let out = p.agent(&["hook", "uninstall"]);
    assert!(stdout(&out).contains("put back"), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), script);
    let mode = std::fs::metadata(&theirs).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o750);
    // What the push itself changed is git's doing.
    p.git(&["update-ref", "-d", "refs/remotes/origin/main"]);
    assert_eq!(UserState::capture(&p.env, &p.repo), before);
    let out = p.agent(&["hook", "uninstall"]);
    assert!(stdout(&out).contains("not installed"), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), script);
}

#[test]
fn install_respects_core_hooks_path() {
    let p = Pushing::passing();
    p.git(&["config", "core.hooksPath", ".githooks"]);
    assert!(p.install().contains(".githooks/pre-push"));
    assert!(!p.repo.join(".git/hooks/pre-push").exists());
    let out = p.push(&["-q", "origin", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(p.test_runs(), 1, "git ran the hook from core.hooksPath");
    let out = p.agent(&["hook", "uninstall"]);
    assert!(stdout(&out).contains("removed"), "{}", stdout(&out));
    assert!(!p.repo.join(".githooks/pre-push").exists());
}

#[test]
fn a_failing_push_goes_on_in_warn_mode_and_is_refused_in_block_mode() {
    let p = Pushing::new();
    p.install();
    p.git(&["config", "agent-git.prePush", "warn"]);
    let out = p.push(&["-q", "origin", "main"]);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("the tests fail") && said.contains("assert add(2, 3) == 5"),
        "{said}"
    );
    assert!(
        said.contains("agent-git.prePush is warn: the push goes on"),
        "{said}"
    );
    assert_eq!(p.remote_at("main"), p.head());

    // block is the default.
    p.git(&["config", "--unset", "agent-git.prePush"]);
    std::fs::write(p.repo.join("notes.txt"), "more\n").unwrap();
    p.git(&["add", "notes.txt"]);
    p.git(&["commit", "-q", "-m", "More notes"]);
    let pushed_before = p.remote_at("main");
    let before = UserState::capture(&p.env, &p.repo);
    let out = p.push(&["-q", "origin", "main"]);
    let said = stderr(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("push refused: the tests fail"), "{said}");
    assert_eq!(
        p.remote_at("main"),
        pushed_before,
        "nothing new reached the remote"
    );
    assert_eq!(p.test_runs(), 2);
    assert_eq!(UserState::capture(&p.env, &p.repo), before);
    assert_eq!(
        p.git(&["branch", "--list", "agent/*"]),
        "",
        "no fix in block mode"
    );
}

#[test]
fn fix_mode_refuses_and_a_background_run_fixes_the_failing_commit() {
    let p = Pushing::new();
    p.install();
    let script = p.env.script(
        "r.json",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
    );
    p.git(&["config", "agent-git.prePush", "fix"]);
    p.git(&[
        "config",
        "agent-git.model",
        &format!("script:{}", script.display()),
    ]);
    let before = UserState::capture(&p.env, &p.repo);
    let out = p.push(&["-q", "origin", "main"]);
    let said = stderr(&out);
    assert!(!out.status.success(), "{said}");
    let short = &p.head()[..7];
    let branch = format!("agent/prepush-{short}");
    assert!(
        said.contains(&format!("in the background on branch {branch}")),
        "{said}"
    );
    assert!(said.contains(&format!("agent-git show {branch}")), "{said}");
    assert_eq!(p.remote_at("main"), "", "nothing reached the remote");

    let outcome = wait_for_outcome(&p, &branch);
    let log = p
        .repo
        .join(format!(".git/agent-git/logs/agent-prepush-{short}.log"));
    let log = std::fs::read_to_string(log).unwrap_or_default();
    assert_eq!(outcome, "passed", "{log}");
    assert_eq!(
        p.env.show(&p.repo, &format!("{branch}:calc.py")),
        CALC_FIXED
    );
    assert_eq!(UserState::capture(&p.env, &p.repo), before);
}

/// The Agent-Outcome of the run on `branch`, once its report commit is there (at most 120 s).
fn wait_for_outcome(p: &Pushing, branch: &str) -> String {
    for _ in 0..240 {
        let out = Command::new("git")
            .args([
                "log",
                "-1",
                "--format=%(trailers:key=Agent-Outcome,valueonly)",
                branch,
            ])
            .current_dir(&p.repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        let outcome = stdout(&out).trim().to_string();
        if !outcome.is_empty() {
            return outcome;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    panic!("the background run on {branch} did not finish in 120 s");
}

#[test]
fn a_tree_that_passed_is_not_tested_again_until_the_test_command_changes() {
    let p = Pushing::passing();
    p.install();
    let second = p.env.path().join("second.git");
    p.env.git(
        p.env.path(),
        &["init", "-q", "--bare", second.to_str().unwrap()],
    );
    p.git(&["remote", "add", "second", second.to_str().unwrap()]);
    let out = p.push(&["-q", "origin", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(p.test_runs(), 1);
    let tree = p.git(&["rev-parse", "HEAD^{tree}"]);
    let kept = p
        .repo
        .join(".git/agent-git/tested")
        .join(format!("{}.json", tree.trim()));
    let note = std::fs::read_to_string(&kept).unwrap();
    assert!(note.contains("\"verdict\": \"passed\""), "{note}");
    assert_eq!(
        p.git(&["for-each-ref", "refs/notes/"]),
        "",
        "no pass is kept in a ref, which could be fetched from elsewhere"
    );

    // A tag, an annotated tag, a second remote, a commit with the same tree: nothing runs.
    p.git(&["tag", "v1"]);
    p.git(&["tag", "-a", "-m", "Release", "v1.0"]);
    for args in [
        &["origin", "v1"][..],
        &["origin", "v1.0"],
        &["second", "main"],
    ] {
        let out = p.push(args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stderr(&out).contains("this tree passed before, nothing ran"));
    }
    p.git(&["commit", "-q", "--amend", "-m", "Fix add (reworded)"]);
    let out = p.push(&["-f", "origin", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = p.agent(&["check"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("passed before"), "{}", stdout(&out));
    assert_eq!(p.test_runs(), 1, "no test run for a tree that passed");

    // Another test command is another question.
    let cmd = p.git(&["config", "agent-git.testCmd"]);
    p.git(&[
        "config",
        "agent-git.testCmd",
        &format!("true; {}", cmd.trim()),
    ]);
    let out = p.push(&["second", "v1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(p.test_runs(), 2);
}

#[test]
fn without_a_model_fix_mode_refuses_a_failing_push_and_says_why_no_fix_started() {
    let p = Pushing::new();
    p.install();
    p.git(&["config", "agent-git.prePush", "fix"]);
    let out = p.push(&["-q", "origin", "main"]);
    let said = stderr(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("push refused: the tests fail"), "{said}");
    assert!(
        said.contains("no fix was started") && said.contains("git config agent-git.model"),
        "{said}"
    );
    assert_eq!(p.git(&["branch", "--list", "agent/*"]), "");
    assert_eq!(p.remote_at("main"), "");
}

#[test]
fn tests_that_cannot_run_let_the_push_go_unless_strict() {
    let p = Pushing::new();
    p.install();
    p.git(&["config", "agent-git.testCmd", "no-such-test-runner"]);
    let out = p.push(&["-q", "origin", "main"]);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("the tests could not be run: the test command was not found"),
        "{said}"
    );
    assert!(said.contains("agent-git.prePush.strict true"), "{said}");
    assert_eq!(p.remote_at("main"), p.head());

    p.git(&["config", "agent-git.prePush.strict", "true"]);
    p.git(&["commit", "-q", "--allow-empty", "-m", "More"]);
    let out = p.push(&["-q", "origin", "main"]);
    let said = stderr(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("could not be run, and agent-git.prePush.strict is true"),
        "{said}"
    );
}

#[test]
fn deleted_refs_and_agent_git_skip_run_no_tests() {
    let p = Pushing::new();
    p.install();
    let skip = |cmd: &mut Command| {
        cmd.env("AGENT_GIT_SKIP", "1");
    };
    p.git(&["branch", "topic"]);
    let out = p.push_with(&["-q", "origin", "main", "topic"], skip);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("AGENT_GIT_SKIP=1: this push is not tested"));
    assert_eq!(p.remote_at("topic"), p.head());

    let out = p.push(&["-q", "origin", "--delete", "topic"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(p.remote_at("topic"), "");
    assert_eq!(p.test_runs(), 0, "a deletion has nothing to test");
}

#[test]
fn every_new_commit_is_tested_with_commits_all_and_only_the_tip_by_default() {
    // The first commit fails, the second (the tip) passes.
    let p = Pushing::passing();
    p.install();
    p.git(&["config", "agent-git.prePush.commits", "all"]);
    let out = p.push(&["-q", "origin", "main"]);
    let said = stderr(&out);
    assert!(!out.status.success(), "{said}");
    let first = p.git(&["rev-parse", "--short=7", "HEAD~1"]);
    assert!(
        said.contains(&format!("{} (main): the tests fail", first.trim())),
        "{said}"
    );
    assert_eq!(p.test_runs(), 2);

    p.git(&["config", "--unset", "agent-git.prePush.commits"]);
    let out = p.push(&["-q", "origin", "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(p.test_runs(), 2, "the tip passed before");
}

#[test]
fn install_from_a_linked_worktree_uses_the_common_hooks_directory() {
    let p = Pushing::passing();
    let linked = p.env.path().join("linked");
    p.git(&["worktree", "add", "-q", linked.to_str().unwrap()]);
    let out = p.env.agent(&linked, &["hook", "install"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.repo.join(".git/hooks/pre-push")).unwrap(),
        hook_script()
    );
}

/// A remote whose name reads like a flag is a remote: the hook passes git's arguments after
/// `--`, and a failing push to it is refused like any other.
#[test]
fn a_remote_named_like_a_flag_is_checked_like_any_other() {
    let p = Pushing::new();
    p.install();
    let url = p.remote.to_str().unwrap().to_string();
    p.git(&["remote", "add", "--", "--help", &url]);
    let out = p.push(&["-q", "--", "--help", "main"]);
    let said = stderr(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("push refused: the tests fail"), "{said}");
}

/// `check --json`: the verdict as one object, named as `fix --json` names the same things.
#[test]
fn check_json_names_the_verdict_as_fix_json_does() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let out = env.agent(&repo, &["check", "--json"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let head = env.git(&repo, &["rev-parse", "HEAD"]);
    assert_eq!(v["commit"], head.trim());
    assert_eq!(v["ref"], "HEAD");
    assert_eq!(v["outcome"], "failed");
    assert_eq!(v["reason"], serde_json::Value::Null);
    assert_eq!(v["tests"]["passed"], false);
    assert_eq!(v["tests"]["summary"], "1 passed, 1 failed");
    assert_eq!(v["tests"]["failing"], json!(["test_calc.py::test_add"]));
    assert_eq!(v["tests"]["cached"], false);

    std::fs::write(repo.join("calc.py"), CALC_FIXED).unwrap();
    env.git(&repo, &["commit", "-qam", "Fix add"]);
    let out = env.agent(&repo, &["check", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["outcome"], "passed");
    assert_eq!(v["tests"]["summary"], "2 passed, 0 failed");
    let again: serde_json::Value =
        serde_json::from_str(&stdout(&env.agent(&repo, &["check", "--json"]))).unwrap();
    assert_eq!(again["tests"]["cached"], true, "found passed before");
    let out = env.agent(&repo, &["check", "--json", "--pre-push", "origin", "url"]);
    assert_eq!(code(&out), 2, "--json is for one commit");
}
