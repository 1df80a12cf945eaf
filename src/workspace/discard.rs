//! Deleting finished runs (`agent-git discard`, `agent-git gc --failed/--older-than`): the
//! branch, the run's own work tree if it was kept, and its transcript note. A branch checked
//! out anywhere, or a run still going, is never touched.

use git2::{BranchType, Oid, Repository};
use std::path::{Path, PathBuf};

/// The run to delete, as `runs` found it.
pub struct Doomed<'a> {
    /// The run's branch, without `refs/heads/`.
    pub branch: &'a str,
    /// The run's id: names its own work tree (`agent-git-RUN`) and its lease.
    pub run_id: &'a str,
    /// The report commit the branch must still point at.
    pub report: Oid,
}

/// Why a run was not deleted, or not wholly.
#[derive(Debug, thiserror::Error)]
pub enum DiscardError {
    /// The branch is checked out in a work tree other than the run's own; nothing was deleted.
    #[error(
        "branch {branch} is checked out in {place}; switch that checkout to another branch \
         first (nothing was deleted)"
    )]
    CheckedOut {
        /// The run's branch.
        branch: String,
        /// Where it is checked out, for the user: the checkout's folder where it is known.
        place: String,
    },
    /// A live run holds the run's lease; nothing was deleted.
    #[error("run {0} is still going; wait for it to end (nothing was deleted)")]
    Running(String),
    /// The branch no longer points at the report commit it was listed with; nothing was deleted.
    #[error("branch {0} moved since it was listed; run the command again (nothing was deleted)")]
    Moved(String),
    /// git failed finding or deleting the branch (the run's kept work tree may be gone already).
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// The branch is deleted, but removing the run's transcript note failed.
    #[error("the branch is deleted, but its transcript note is not: {0}")]
    Note(#[from] super::WorkspaceError),
}

/// Deletes one run: its work tree (if kept), its branch, then its transcript.
pub fn discard(repo: &Repository, run: &Doomed) -> Result<(), DiscardError> {
    let refname = format!("refs/heads/{}", run.branch);
    let own = format!("agent-git-{}", run.run_id);
    if let Some(place) = checked_out(repo, &refname)
        .into_iter()
        .find(|(worktree, _)| worktree.as_deref() != Some(own.as_str()))
        .map(|(_, place)| place)
    {
        return Err(DiscardError::CheckedOut {
            branch: run.branch.to_string(),
            place,
        });
    }
    if is_running(repo, run.run_id) {
        return Err(DiscardError::Running(run.run_id.to_string()));
    }
    let mut branch = repo.find_branch(run.branch, BranchType::Local)?;
    if branch.get().target() != Some(run.report) {
        return Err(DiscardError::Moved(run.branch.to_string()));
    }
    remove_run_worktree(repo, run.run_id);
    branch.delete()?;
    forget_unreported(repo.commondir(), run.run_id);
    super::notes::remove_transcripts(repo, &[run.report])?;
    Ok(())
}

/// A run whose branch was made and whose report was not written (yet): what `runs`,
/// `discard` and `gc` know it by when it ended without one (killed, interrupted past its
/// grace, the machine went down). The record goes when the report is committed or the branch
/// deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreported {
    /// The run's id: the record's file name.
    pub run_id: String,
    /// The branch the run made, without `refs/heads/`.
    pub branch: String,
    /// The commit the run started from; None when the record does not hold a valid one.
    pub base: Option<Oid>,
    /// When the run started (the record's time), in seconds since the epoch.
    pub started: i64,
}

fn unreported_dir(common_dir: &Path) -> PathBuf {
    common_dir.join("agent-git").join("unreported")
}

/// Notes that run `run_id` made `branch` at `base`.
pub(crate) fn note_unreported(
    common_dir: &Path,
    run_id: &str,
    branch: &str,
    base: Oid,
) -> std::io::Result<()> {
    let dir = unreported_dir(common_dir);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(run_id), format!("{branch}\n{base}\n"))
}

/// The run's report is written, or its branch is gone.
pub(crate) fn forget_unreported(common_dir: &Path, run_id: &str) {
    let _ = std::fs::remove_file(unreported_dir(common_dir).join(run_id));
}

/// Every run noted and not yet forgotten, whatever its branch is now.
pub fn unreported(repo: &Repository) -> Vec<Unreported> {
    let Ok(entries) = std::fs::read_dir(unreported_dir(repo.commondir())) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let run_id = entry.file_name().to_string_lossy().into_owned();
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let mut lines = text.lines();
        let Some(branch) = lines.next().filter(|b| !b.is_empty()) else {
            continue;
        };
        let started = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0));
        found.push(Unreported {
            run_id,
            branch: branch.to_string(),
            base: lines.next().and_then(|b| Oid::from_str(b).ok()),
            started,
        });
    }
    found
}

/// Whether a live run holds the lease of `run_id`.
pub fn is_running(repo: &Repository, run_id: &str) -> bool {
    let lease = lease_path(repo, run_id);
    lease.exists() && !crate::leftovers::is_abandoned(&lease)
}

pub(crate) fn lease_path(repo: &Repository, run_id: &str) -> PathBuf {
    repo.commondir()
        .join("agent-git")
        .join(format!("{run_id}.lease"))
}

/// Removes the run's own linked work tree and lease, whatever state they are in.
pub(crate) fn remove_run_worktree(repo: &Repository, run_id: &str) -> bool {
    if let Ok(worktree) = repo.find_worktree(&format!("agent-git-{run_id}")) {
        let mut prune = git2::WorktreePruneOptions::new();
        prune.valid(true).locked(true).working_tree(true);
        let _ = worktree.prune(Some(&mut prune));
    }
    let dir = repo.commondir().join("agent-git").join(run_id);
    let lease = lease_path(repo, run_id);
    let removed = crate::leftovers::remove_forcibly(&dir).is_ok();
    removed && (std::fs::remove_file(&lease).is_ok() || !lease.exists())
}

/// Where `refname` is checked out: (the linked work tree's name, or None for the main one;
/// a description for the user). The HEAD files are read directly, since a linked work tree
/// whose folder is gone still holds its branch for git until it is pruned, and git2 cannot
/// open it.
pub fn checked_out(repo: &Repository, refname: &str) -> Vec<(Option<String>, String)> {
    let common = repo.commondir();
    let holds = |head: PathBuf| {
        std::fs::read_to_string(head)
            .is_ok_and(|text| text.trim().strip_prefix("ref: ") == Some(refname))
    };
    let mut places = Vec::new();
    if holds(common.join("HEAD")) {
        let place = match repo.workdir() {
            Some(dir) if !repo.is_worktree() => dir.display().to_string(),
            _ => "the main checkout".to_string(),
        };
        places.push((None, place));
    }
    let Ok(names) = repo.worktrees() else {
        return places;
    };
    for name in names.iter().flatten().flatten() {
        if holds(common.join("worktrees").join(name).join("HEAD")) {
            let place = repo
                .find_worktree(name)
                .map(|w| w.path().display().to_string())
                .unwrap_or_else(|_| format!("work tree {name}"));
            places.push((Some(name.to_string()), place));
        }
    }
    places
}
