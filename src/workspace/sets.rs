//! The summaries of attempt sets (`fix --attempts N`), kept in git: one commit per set, with
//! no parent and the empty tree, under `refs/agent-git/sets/<set id>`. Its message is the
//! summary as printed, with trailers that name the chosen run and every attempt's run. It
//! points at no run, so discarding a run never has to rewrite it.

use super::{dates, WorkspaceError, AGENT_EMAIL, AGENT_NAME};
use git2::{Oid, Repository};

/// Where the summaries are.
pub const SETS_REF_PREFIX: &str = "refs/agent-git/sets/";

/// One stored summary.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSet {
    /// The set's id: `s` and hex digits, the last part of its ref.
    pub id: String,
    /// The summary's commit.
    pub commit: Oid,
    /// The whole message: the summary and its trailers.
    pub message: String,
    /// When it was written, in seconds since the epoch.
    pub time: i64,
}

/// Whether `id` can name a set's ref: `s` and hex digits, as `attempts::new_set_id` makes them.
pub fn is_set_id(id: &str) -> bool {
    id.len() > 1 && id.starts_with('s') && id[1..].chars().all(|c| c.is_ascii_hexdigit())
}

/// Stores the summary of set `id`; a set's summary is written once.
pub fn store_set(repo: &Repository, id: &str, message: &str) -> Result<Oid, WorkspaceError> {
    if !is_set_id(id) {
        return Err(WorkspaceError::Unsafe(format!("`{id}` is not a set id")));
    }
    let sig = dates::signature(AGENT_NAME, AGENT_EMAIL, "GIT_COMMITTER_DATE")?;
    let empty = repo.treebuilder(None)?.write()?;
    let tree = repo.find_tree(empty)?;
    let commit = repo.commit(None, &sig, &sig, message, &tree, &[])?;
    let refname = format!("{SETS_REF_PREFIX}{id}");
    repo.reference(&refname, commit, false, "agent-git: attempt set summary")?;
    Ok(commit)
}

/// Every stored summary, newest first.
pub fn stored_sets(repo: &Repository) -> Result<Vec<StoredSet>, WorkspaceError> {
    let mut sets = Vec::new();
    for reference in repo.references_glob(&format!("{SETS_REF_PREFIX}*"))? {
        let reference = reference?;
        let Some(id) = reference
            .name()
            .ok()
            .and_then(|name| name.strip_prefix(SETS_REF_PREFIX))
            .filter(|id| is_set_id(id))
            .map(str::to_string)
        else {
            continue;
        };
        let commit = reference.peel_to_commit()?;
        sets.push(StoredSet {
            id,
            commit: commit.id(),
            message: String::from_utf8_lossy(commit.message_bytes()).into_owned(),
            time: commit.time().seconds(),
        });
    }
    sets.sort_by(|a, b| b.time.cmp(&a.time).then(b.id.cmp(&a.id)));
    Ok(sets)
}

/// Deletes the summary of set `id`; the runs it names stay.
pub fn remove_set(repo: &Repository, id: &str) -> Result<(), WorkspaceError> {
    let mut reference = repo.find_reference(&format!("{SETS_REF_PREFIX}{id}"))?;
    reference.delete()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_stored_once_read_back_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let message = "agent-git: 2 attempts\n\nAgent-Set: s0a1b2c3\n";
        let commit = store_set(&repo, "s0a1b2c3", message).unwrap();
        let stored = stored_sets(&repo).unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(
            (
                stored[0].id.as_str(),
                stored[0].commit,
                stored[0].message.as_str()
            ),
            ("s0a1b2c3", commit, message)
        );
        assert!(repo.find_commit(commit).unwrap().parent_count() == 0);
        assert!(
            store_set(&repo, "s0a1b2c3", message).is_err(),
            "written once"
        );
        assert!(store_set(&repo, "../x", message).is_err());
        remove_set(&repo, "s0a1b2c3").unwrap();
        assert!(stored_sets(&repo).unwrap().is_empty());
    }
}
