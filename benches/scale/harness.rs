//! The harness's own time around what a run does most: a test run in the clean room, a
//! `run_command`, and the commit of one edit, each beside what git pays on the same tree.

use crate::common::{compare, git_command, time, Options, Repo};
use agent_git::guard::Protection;
use agent_git::sandbox::{Limits, Mode, Sandbox};
use agent_git::testrun::TestPlan;
use agent_git::verify::{TestSetup, Unreadable, Verifier};
use agent_git::workspace::{Changed, NoHooks, Workspace};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// One run's workspace, sandbox and protection on `repo`, torn down at the end.
struct Run {
    workspace: Workspace,
    sandbox: Sandbox,
    protection: Protection,
}

impl Run {
    fn start(repo: &Repo, name: &str) -> Run {
        let git = git2::Repository::open(&repo.path).expect("open");
        let workspace = Workspace::create(&git, repo.base(), &format!("bench/{name}"), name)
            .expect("workspace");
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
        let protection = Protection::new(&[], &[]).expect("protection");
        Run {
            workspace,
            sandbox,
            protection,
        }
    }

    /// Writes a new text into calc.py: a one-file edit.
    fn edit(&self, n: usize) {
        let text = format!("{}# edit {n}\n", crate::common::CALC);
        std::fs::write(self.workspace.path().join("calc.py"), text).expect("edit");
    }

    /// Commits the edit as `edit_file` does: only the path it wrote is looked at.
    fn commit(&self) {
        let paths = [std::path::PathBuf::from("calc.py")];
        self.workspace
            .commit(
                Changed::Paths(&paths),
                "edit",
                "",
                &self.protection,
                &NoHooks,
            )
            .expect("commit");
    }

    /// What the sandbox's processes took so far.
    fn busy(&self) -> Duration {
        self.sandbox.busy()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.workspace.remove_worktree();
    }
}

/// `git status --porcelain` in `dir`: the floor of looking at a tree.
fn git_status(dir: &Path) -> Duration {
    time(&mut || {
        let out = git_command(dir, &["status", "--porcelain"])
            .output()
            .expect("git status");
        assert!(out.status.success());
    })
}

pub fn test_run(repo: &Repo, options: &Options) {
    let run = Run::start(repo, "bench-test-run");
    let plan = TestPlan::shell("true".to_string(), Duration::from_secs(60));
    let interrupt = AtomicBool::new(false);
    let quiet = |_: &str, _: Duration| {};
    let setup = TestSetup {
        protection: &run.protection,
        plan: &plan,
        sandbox: &run.sandbox,
        interrupt: &interrupt,
        waiting: &quiet,
    };
    let unreadable = Unreadable {
        user_workdir: Some(&repo.path),
        private_files: &[],
    };
    let verifier = Verifier::new(&run.workspace, setup, unreadable, None).expect("verifier");
    let first = time(&mut || assert!(verifier.baseline().expect("baseline").passed));
    println!(
        "  first test run (clean room checkout)      {:>8.1} ms",
        first.as_secs_f64() * 1e3
    );
    let mut n = 0;
    // A real run asks the model between two test runs; the clean room is put back meanwhile.
    for (label, pause) in [
        ("test run after an edit (harness time)", Duration::ZERO),
        ("the same, after a 1 s model reply", Duration::from_secs(1)),
    ] {
        compare(
            label,
            options.runs,
            1.5,
            &mut || {
                n += 1;
                run.edit(n);
                run.commit();
                std::thread::sleep(pause);
                let busy = run.busy();
                let wall = time(&mut || assert!(verifier.run().expect("run").passed));
                wall.saturating_sub(run.busy() - busy)
            },
            "git status --porcelain",
            &mut || git_status(&repo.path),
        );
    }
}

pub fn run_command(repo: &Repo, options: &Options) {
    let run = Run::start(repo, "bench-run-command");
    let interrupt = AtomicBool::new(false);
    let jail = run.sandbox.model_jail();
    compare(
        "run_command `true` (harness time)",
        options.runs,
        1.5,
        &mut || {
            let busy = run.busy();
            let wall = time(&mut || {
                // As `run_command` takes it: confined, the command cannot write the index.
                let before = run
                    .workspace
                    .snapshot()
                    .expect("snapshot")
                    .git_dir_sealed(run.sandbox.confines());
                let raw = run
                    .sandbox
                    .run(
                        &jail,
                        "true",
                        Duration::from_secs(60),
                        &interrupt,
                        &mut |_| {},
                    )
                    .expect("run");
                assert_eq!(raw.exit_code, Some(0));
                run.workspace
                    .absorb_command("run true", "", &run.protection, &before, &NoHooks)
                    .expect("absorb");
            });
            wall.saturating_sub(run.busy() - busy)
        },
        "git status --porcelain",
        &mut || git_status(&repo.path),
    );
}

pub fn commit(repo: &Repo, options: &Options) {
    let run = Run::start(repo, "bench-commit");
    // The floor commits in a checkout of its own, so the user's stays as it was made.
    let floor = tempfile::tempdir().expect("temp dir");
    let floor_tree = floor.path().join("tree");
    let spec = floor_tree.display().to_string();
    crate::common::git(
        &repo.path,
        &["worktree", "add", "-q", "-b", "bench-floor", &spec],
    );
    let mut n = 0;
    let mut m = 0;
    compare(
        "edit + its commit",
        options.runs,
        1.0,
        &mut || {
            n += 1;
            time(&mut || {
                run.edit(n);
                run.commit();
            })
        },
        "git commit -q of one changed file",
        &mut || {
            m += 1;
            time(&mut || {
                let text = format!("{}# edit {m}\n", crate::common::CALC);
                std::fs::write(floor_tree.join("calc.py"), text).expect("edit");
                let out = git_command(&floor_tree, &["commit", "-qam", "edit"])
                    .output()
                    .expect("git commit");
                assert!(out.status.success());
            })
        },
    );
    crate::common::git(&repo.path, &["worktree", "remove", "--force", &spec]);
}
