//! The trees whose tests passed, kept in git: a note on the tree object in
//! `refs/notes/agent-git-tests`, so a tag, a rebase that keeps the tree or a push to a second
//! remote costs no test run. A note holds one entry per test set-up (command and settings), so
//! a changed test command is a new question, never answered by an old pass.

use super::{WorkspaceError, AGENT_EMAIL, AGENT_NAME};
use git2::{Oid, Repository, Signature};
use serde::{Deserialize, Serialize};

pub const TESTED_NOTES: &str = "refs/notes/agent-git-tests";

/// How many set-ups one tree keeps passes for (the newest ones).
const KEPT_PER_TREE: usize = 4;

/// One passing test run of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tested {
    /// A digest of everything besides the tree that decides the result (see `check`).
    pub identity: String,
    pub verdict: String,
    /// The test command, as reports name it.
    pub command: String,
    pub summary: String,
    /// The commit that was tested (one of those with this tree).
    pub commit: String,
}

/// The pass recorded for `tree` under `identity`, if there is one.
pub fn tested(repo: &Repository, tree: Oid, identity: &str) -> Option<Tested> {
    entries(repo, tree)
        .into_iter()
        .find(|t| t.identity == identity && t.verdict == "passed")
}

/// Records a pass of `tree`, replacing an older one of the same set-up.
pub fn record_tested(repo: &Repository, tree: Oid, entry: Tested) -> Result<(), WorkspaceError> {
    let mut all = entries(repo, tree);
    all.retain(|t| t.identity != entry.identity);
    all.push(entry);
    let skip = all.len().saturating_sub(KEPT_PER_TREE);
    let kept: Vec<&Tested> = all.iter().skip(skip).collect();
    let text = serde_json::to_string_pretty(&kept)
        .map_err(|e| WorkspaceError::Unsafe(format!("cannot write the test note: {e}")))?;
    let signature = Signature::now(AGENT_NAME, AGENT_EMAIL)?;
    repo.note(
        &signature,
        &signature,
        Some(TESTED_NOTES),
        tree,
        &format!("{text}\n"),
        true,
    )?;
    Ok(())
}

/// The entries of a tree's note; none when there is no note or it is not ours to read.
fn entries(repo: &Repository, tree: Oid) -> Vec<Tested> {
    repo.find_note(Some(TESTED_NOTES), tree)
        .ok()
        .and_then(|note| note.message().ok().map(str::to_string))
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(identity: &str) -> Tested {
        Tested {
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
