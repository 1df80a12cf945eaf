//! The trees whose tests passed, kept where only this clone's user writes: a file per tree
//! under the git dir's `agent-git/tested/`, never a ref (a ref can be fetched, pushed or
//! copied with a mirror, and a pass must not come from anywhere but a test run here). A tag, a
//! rebase that keeps the tree or a push to a second remote then costs no test run. A file
//! holds one entry per test set-up (command and settings), so a changed test command is a new
//! question, never answered by an old pass.

use super::WorkspaceError;
use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where the passes are kept, inside the common git dir.
pub const TESTED_DIR: &str = "agent-git/tested";

/// How many set-ups one tree keeps passes for (the newest ones).
const KEPT_PER_TREE: usize = 4;

/// One passing test run of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tested {
    /// A digest of everything besides the tree that decides the result (see `check`).
    pub identity: String,
    /// `passed`, or for what `agent-git tests` found, `failed`; only a `passed` entry counts as a
    /// pass.
    pub verdict: String,
    /// The test command, as reports name it.
    pub command: String,
    /// The test run's summary, as reports show it.
    pub summary: String,
    /// The commit that was tested (one of those with this tree).
    pub commit: String,
    /// What `agent-git tests` found, as its `--json` prints it: a later call on the same tree
    /// and set-up prints it again instead of testing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
}

fn file_of(repo: &Repository, tree: Oid) -> PathBuf {
    repo.commondir()
        .join(TESTED_DIR)
        .join(format!("{tree}.json"))
}

/// The pass recorded for `tree` under `identity`, if there is one.
pub fn tested(repo: &Repository, tree: Oid, identity: &str) -> Option<Tested> {
    entries(repo, tree)
        .into_iter()
        .find(|t| t.identity == identity && t.verdict == "passed")
}

/// What was recorded for `tree` under `identity`, whatever the verdict.
pub fn recorded(repo: &Repository, tree: Oid, identity: &str) -> Option<Tested> {
    entries(repo, tree)
        .into_iter()
        .find(|t| t.identity == identity)
}

/// Records a pass of `tree`, replacing an older one of the same set-up. The file is written
/// whole or not at all.
pub fn record_tested(repo: &Repository, tree: Oid, entry: Tested) -> Result<(), WorkspaceError> {
    let mut all = entries(repo, tree);
    all.retain(|t| t.identity != entry.identity);
    all.push(entry);
    let skip = all.len().saturating_sub(KEPT_PER_TREE);
    let kept: Vec<&Tested> = all.iter().skip(skip).collect();
    let text = serde_json::to_string_pretty(&kept)
        .map_err(|e| WorkspaceError::Unsafe(format!("cannot write the record of a pass: {e}")))?;
    let path = file_of(repo, tree);
    let dir = repo.commondir().join(TESTED_DIR);
    let io = |e| WorkspaceError::io("record a pass in", &dir, e);
    std::fs::create_dir_all(&dir).map_err(io)?;
    let temp = tempfile::NamedTempFile::new_in(&dir).map_err(io)?;
    std::fs::write(temp.path(), format!("{text}\n")).map_err(io)?;
    temp.persist(&path).map_err(|e| io(e.error))?;
    Ok(())
}

/// The entries kept for a tree; none when there are none or they cannot be read.
fn entries(repo: &Repository, tree: Oid) -> Vec<Tested> {
    crate::files::read_regular(&file_of(repo, tree), 1 << 20)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(identity: &str) -> Tested {
        Tested {
            detail: None,
            identity: identity.into(),
            verdict: "passed".into(),
            command: "make test".into(),
            summary: "2 passed, 0 failed".into(),
            commit: "c0ffee".into(),
        }
    }

    #[test]
    fn a_pass_is_found_by_tree_and_set_up_only() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        assert_eq!(tested(&repo, tree, "a"), None);
        record_tested(&repo, tree, entry("a")).unwrap();
        record_tested(&repo, tree, entry("b")).unwrap();
        assert_eq!(tested(&repo, tree, "a"), Some(entry("a")));
        assert_eq!(tested(&repo, tree, "c"), None, "another set-up is a miss");
        for id in ["c", "d", "e"] {
            record_tested(&repo, tree, entry(id)).unwrap();
        }
        assert_eq!(
            tested(&repo, tree, "a"),
            None,
            "the oldest set-up is dropped"
        );
        assert_eq!(tested(&repo, tree, "e"), Some(entry("e")));
    }
}
