//! The reading tools on a large tree: `search` beside `rg`, `list_files` beside `git ls-files`.

use crate::common::{self, Options, Repo};
use agent_git::guard::{Guard, Protection};
use agent_git::tools::{list, search};
use std::path::PathBuf;
use std::process::Command;

/// Our search for the one rare string, beside ripgrep's over the same directory.
pub fn search(repo: &Repo, options: &Options) {
    let guard = guard(repo);
    let found = search::search(&guard, common::RARE, ".");
    assert!(found.content.contains(common::RARE), "{}", found.content);
    let Some(rg) = ripgrep() else {
        println!("  search: skipped, rg is not on PATH nor at /tmp/rg/bin/rg");
        return;
    };
    let mut rg_command = || {
        let out = Command::new(&rg)
            .args([common::RARE, "."])
            .current_dir(&repo.path)
            .output()
            .expect("rg runs");
        assert!(out.status.success(), "rg found nothing");
    };
    common::compare(
        "search RARE (library call)",
        options.runs,
        1.2,
        &mut || common::time(&mut || drop(search::search(&guard, common::RARE, "."))),
        "rg RARE .",
        &mut || common::time(&mut rg_command),
    );
}

/// Our listing of the root (the first call of a run, and a later one that remembers the
/// counts), beside git's list of what it tracks and ripgrep's walk.
pub fn list_files(repo: &Repo, options: &Options) {
    let guard = guard(repo);
    let git = git2::Repository::open(&repo.path).expect("open");
    let counts = list::FileCounts::default();
    let listed = list::list(&guard, &git, &counts, ".", 0).expect("list");
    let expected = format!(
        "pkg/ ({} files)\n.gitignore\ncalc.py\ntest_calc.py\n",
        repo.files
    );
    assert_eq!(listed.content, expected);
    let mut ls_files = || {
        let out = common::git_command(&repo.path, &["ls-files"])
            .output()
            .expect("git runs");
        assert!(out.status.success());
    };
    let mut ours = || {
        let fresh = list::FileCounts::default();
        common::time(&mut || drop(list::list(&guard, &git, &fresh, ".", 0)))
    };
    common::compare(
        "list_files . (library call)",
        options.runs,
        1.5,
        &mut ours,
        "git ls-files",
        &mut || common::time(&mut ls_files),
    );
    let mut again = || common::time(&mut || drop(list::list(&guard, &git, &counts, ".", 0)));
    common::compare(
        "list_files . again (counts known)",
        options.runs,
        1.5,
        &mut again,
        "git ls-files",
        &mut || common::time(&mut ls_files),
    );
    // What a walk of the work tree costs, as list_files did before it read HEAD's tree.
    let Some(rg) = ripgrep() else {
        println!("  list_files: the walk floor skipped, rg is not on PATH nor at /tmp/rg/bin/rg");
        return;
    };
    let mut rg_files = || {
        let out = Command::new(&rg)
            .args(["--files", "--hidden", "--glob", "!.git"])
            .current_dir(&repo.path)
            .output()
            .expect("rg runs");
        assert!(out.status.success());
    };
    common::compare(
        "list_files . (library call)",
        options.runs,
        1.2,
        &mut ours,
        "rg --files --hidden",
        &mut || common::time(&mut rg_files),
    );
}

fn guard(repo: &Repo) -> Guard {
    let protection = Protection::new(&[], &[]).expect("protection");
    Guard::new(&repo.path, protection).expect("guard")
}

/// ripgrep, on PATH or where the bench machine installs it.
fn ripgrep() -> Option<PathBuf> {
    let installed = PathBuf::from("/tmp/rg/bin/rg");
    if common::on_path("rg") {
        Some(PathBuf::from("rg"))
    } else if installed.is_file() {
        Some(installed)
    } else {
        None
    }
}
