//! What the pre-push hook costs: `git push` of a passing commit to a local bare remote with
//! agent-git's hook installed (a new tree each time, so the tests run), beside the same push
//! without the hook and the test command run once in the checkout; and a push whose tree
//! passed before (a tag), which runs no test. Target: a push costs little more than the test
//! command once.
//!
//!     cargo bench --bench pre_push
// A benchmark, like a test, stops at the first thing that goes wrong.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 11;
const TEST_CMD: &str = "python3 -m unittest -q";
const CALC: &str = "def add(a, b):\n    return a + b\n";
const TEST_CALC: &str = "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";

fn git(dir: &Path, args: &[&str]) {
    let out = git_cmd(dir).args(args).output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// git with agent-git on PATH and no global config, as a user's push runs.
fn git_cmd(dir: &Path) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_agent-git")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("PATH", path)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com");
    cmd
}

fn time(f: &mut dyn FnMut()) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A new commit (a new tree: the tests must run) pushed to origin; its time.
fn push_new_commit(dir: &Path, i: usize) -> Duration {
    std::fs::write(dir.join("counter.txt"), format!("{i}\n")).expect("write");
    git(dir, &["add", "counter.txt"]);
    git(dir, &["commit", "-q", "-m", &format!("commit {i}")]);
    time(&mut || git(dir, &["push", "-q", "origin", "main"]))
}

fn main() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("repo");
    let remote = tmp.path().join("remote.git");
    std::fs::create_dir(&dir).expect("mkdir");
    git(
        tmp.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    git(&dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("calc.py"), CALC).expect("write");
    std::fs::write(dir.join("test_calc.py"), TEST_CALC).expect("write");
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "base"]);
    git(&dir, &["remote", "add", "origin", remote.to_str().unwrap()]);
    git(&dir, &["config", "agent-git.testCmd", TEST_CMD]);
    git(&dir, &["push", "-q", "origin", "main"]);

    let direct = median(
        (0..RUNS)
            .map(|_| {
                time(&mut || {
                    let out = Command::new("sh")
                        .args(["-c", TEST_CMD])
                        .current_dir(&dir)
                        .env("PYTHONDONTWRITEBYTECODE", "1")
                        .output()
                        .expect("run");
                    assert!(out.status.success());
                })
            })
            .collect(),
    );
    let plain = median((0..RUNS).map(|i| push_new_commit(&dir, i)).collect());
    let installed = Command::new(env!("CARGO_BIN_EXE_agent-git"))
        .args(["hook", "install"])
        .current_dir(&dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("install");
    assert!(installed.success());
    let hooked = median((0..RUNS).map(|i| push_new_commit(&dir, RUNS + i)).collect());
    let tags = median(
        (0..RUNS)
            .map(|i| {
                let tag = format!("t{i}");
                git(&dir, &["tag", &tag]);
                time(&mut || git(&dir, &["push", "-q", "origin", &tag]))
            })
            .collect(),
    );

    let hook_cost = hooked.saturating_sub(plain);
    println!("{RUNS} runs each, median; `{TEST_CMD}` on the calc example");
    println!(
        "  the test command once, in the checkout   {:>7.1} ms",
        ms(direct)
    );
    println!(
        "  git push without the hook                {:>7.1} ms",
        ms(plain)
    );
    println!(
        "  git push with the hook (tests run)       {:>7.1} ms",
        ms(hooked)
    );
    println!(
        "  the hook's share                         {:>7.1} ms   = {:.2}x the test command \
         ({:+.1} ms)",
        ms(hook_cost),
        hook_cost.as_secs_f64() / direct.as_secs_f64(),
        ms(hook_cost) - ms(direct)
    );
    println!(
        "  git push of a tag (tree passed before)   {:>7.1} ms   (hook: {:.1} ms)",
        ms(tags),
        ms(tags.saturating_sub(plain))
    );
}
