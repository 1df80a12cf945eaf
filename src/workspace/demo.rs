//! The demo's throwaway repository, and a plain `git log --stat` of a branch.

use git2::{Oid, Repository, Signature};
use std::fmt::Write as _;
use std::path::Path;

const CALC: &str = "\
def add(a, b):
    \"\"\"Return the sum of a and b.\"\"\"
    return a - b


def multiply(a, b):
    \"\"\"Return the product of a and b.\"\"\"
    return a * b
";

const TEST_CALC: &str = "\
from calc import add, multiply


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-1, 1) == 0


def test_multiply():
    assert multiply(4, 5) == 20
";

/// A small Python project whose add() subtracts, committed once. Returns that commit.
pub fn create_calc_repo(dir: &Path) -> Result<Oid, git2::Error> {
    let repo = Repository::init(dir)?;
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text)
            .map_err(|e| git2::Error::from_str(&format!("cannot write {name}: {e}")))
    };
    write("calc.py", CALC)?;
    write("test_calc.py", TEST_CALC)?;
    write(
        "README.md",
        "# calc\n\nA tiny calculator, used by `agent-git demo`.\n",
    )?;
    let mut index = repo.index()?;
    for name in ["README.md", "calc.py", "test_calc.py"] {
        index.add_path(Path::new(name))?;
    }
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = Signature::now("agent-git demo", "demo@agent-git.invalid")?;
    repo.commit(
        Some("HEAD"),
        &sig,
        &sig,
        "calc: add and multiply, with tests",
        &tree,
        &[],
    )
}

/// `git log --stat base..branch`, newest first.
pub fn branch_log(dir: &Path, base: Oid, branch: &str) -> Result<String, git2::Error> {
    let repo = Repository::open(dir)?;
    let mut walk = repo.revwalk()?;
    walk.push_ref(&format!("refs/heads/{branch}"))?;
    walk.hide(base)?;
    let mut out = String::new();
    for oid in walk {
        let commit = repo.find_commit(oid?)?;
        let author = commit.author();
        let _ = writeln!(out, "commit {}", commit.id());
        let _ = writeln!(
            out,
            "Author: {} <{}>\n",
            author.name().unwrap_or(""),
            author.email().unwrap_or("")
        );
        for line in String::from_utf8_lossy(commit.message_bytes())
            .trim_end()
            .lines()
        {
            let _ = writeln!(out, "    {line}");
        }
        let parent_tree = commit.parent(0).ok().map(|p| p.tree()).transpose()?;
        let diff = super::trees::diff(&repo, parent_tree.as_ref(), Some(&commit.tree()?), None)?;
        let stats = diff.stats()?;
        if stats.files_changed() > 0 {
            let text = stats.to_buf(git2::DiffStatsFormat::FULL, 72)?;
            let _ = write!(out, "\n{}", text.as_str().unwrap_or(""));
        }
        out.push('\n');
    }
    Ok(out)
}
