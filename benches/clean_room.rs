//! What the clean room costs: a test run through the verifier (reset the clean room to the
//! branch, start the sandbox, run, read the results) beside the same command run directly in a
//! checkout, on the calc example and on a 10,000-file repository; the difference is the
//! harness's share. Target: at most 0.3 s extra per test run on 10,000 files.
//!
//!     cargo bench --bench clean_room
// A benchmark, like a test, stops at the first thing that goes wrong.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use agent_git::guard::Protection;
use agent_git::sandbox::{Limits, Mode, Sandbox};
use agent_git::testrun::TestPlan;
use agent_git::verify::{TestSetup, Unreadable, Verifier};
use agent_git::workspace::Workspace;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

const RUNS: usize = 15;
const TEST_CMD: &str = "python3 -m unittest -q";
const CALC: &str = "def add(a, b):\n    return a + b\n";
const TEST_CALC: &str = "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";

fn main() {
    println!("{RUNS} runs each, median (min-max); `{TEST_CMD}`");
    for (name, files) in [("calc example", 0), ("10,000 files", 10_000)] {
        bench(name, files);
    }
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// A repository with the calc example and `files` more small files, committed.
fn repository(dir: &Path, files: usize) {
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("calc.py"), CALC).expect("write");
    std::fs::write(dir.join("test_calc.py"), TEST_CALC).expect("write");
    for i in 0..files {
        let sub = dir.join(format!("data/d{:03}", i / 100));
        std::fs::create_dir_all(&sub).expect("mkdir");
        std::fs::write(sub.join(format!("f{i:05}.txt")), format!("line {i}\n")).expect("write");
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);
}

fn time(f: &mut dyn FnMut()) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

fn stats(mut samples: Vec<Duration>) -> (Duration, String) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let text = format!(
        "{:>7.1} ms ({:.1}-{:.1})",
        median.as_secs_f64() * 1e3,
        samples[0].as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
    (median, text)
}

fn bench(name: &str, files: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    repository(dir.path(), files);
    let repo = git2::Repository::open(dir.path()).expect("open");
    let base = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .expect("head")
        .id();
    let workspace = Workspace::create(&repo, base, "bench/run", "bench001").expect("workspace");
    let protection = Protection::new(&[], &[]).expect("protection");
    let plan = TestPlan::shell(TEST_CMD.to_string(), Duration::from_secs(60));
    let helper = Path::new(env!("CARGO_BIN_EXE_agent-git")).to_path_buf();
    let sandbox = Sandbox::start(
        Mode::On,
        helper,
        workspace.path(),
        Limits::default(),
        agent_git::sandbox::Reach {
            readable: vec![workspace.git_dir().to_path_buf()],
            ..Default::default()
        },
    )
    .expect("sandbox");
    let interrupt = AtomicBool::new(false);
    let quiet = |_: &str, _: Duration| {};
    let setup = TestSetup {
        protection: &protection,
        plan: &plan,
        sandbox: &sandbox,
        interrupt: &interrupt,
        waiting: &quiet,
    };
    let unreadable = Unreadable {
        user_workdir: repo.workdir(),
        private_files: &[],
    };
    let verifier = Verifier::new(&workspace, setup, unreadable, None).expect("verifier");

    let first = time(&mut || {
        verifier.baseline().expect("first run");
    });
    let unchanged: Vec<Duration> = (0..RUNS)
        .map(|_| time(&mut || assert!(verifier.run().expect("run").passed)))
        .collect();
    let protection_ref = &protection;
    let edited: Vec<Duration> = (0..RUNS)
        .map(|i| {
            let text = format!("{CALC}\n# edit {i}\n");
            std::fs::write(workspace.path().join("calc.py"), text).expect("edit");
            workspace
                .commit_changes("edit", "", protection_ref, &agent_git::workspace::NoHooks)
                .expect("commit");
            time(&mut || assert!(verifier.run().expect("run").passed))
        })
        .collect();
    let direct: Vec<Duration> = (0..RUNS)
        .map(|_| {
            time(&mut || {
                let out = Command::new("sh")
                    .args(["-c", TEST_CMD])
                    .current_dir(dir.path())
                    .env("PYTHONDONTWRITEBYTECODE", "1")
                    .output()
                    .expect("run");
                assert!(out.status.success());
            })
        })
        .collect();
    let worktree = dir.path().join("floor");
    let floor = time(&mut || {
        let spec = worktree.display().to_string();
        git(
            dir.path(),
            &["worktree", "add", "-q", "--detach", &spec, "main"],
        );
    });
    let (direct_median, direct_text) = stats(direct);
    println!("\n{name}");
    println!("  directly in the checkout            {direct_text}");
    println!(
        "  first clean-room run (checkout)    {:>7.1} ms   (`git worktree add`: {:.1} ms)",
        first.as_secs_f64() * 1e3,
        floor.as_secs_f64() * 1e3
    );
    for (label, samples) in [
        ("clean room, branch unchanged", unchanged),
        ("clean room, one file committed", edited),
    ] {
        let (median, text) = stats(samples);
        let extra = median.saturating_sub(direct_median);
        println!(
            "  {label:<34} {text}   extra {:.1} ms",
            extra.as_secs_f64() * 1e3
        );
    }
    drop(verifier);
    let _ = workspace.remove_worktree();
}
