//! The only code that writes git: the run's branch, its linked worktree, one commit per
//! accepted change, the report commit. The user's HEAD, index and working tree are never
//! opened for writing.

pub mod demo;
mod setup;

pub use setup::{
    check_branch_free, open_user_repo, read_blob, resolve_base, tree_files, BaseInfo, SetupError,
};

use crate::guard::Protection;
use git2::build::CheckoutBuilder;
use git2::{
    DiffOptions, IndexAddOption, Oid, Repository, ResetType, Signature, StatusOptions,
    WorktreePruneOptions,
};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub const AGENT_NAME: &str = "agent-git";
pub const AGENT_EMAIL: &str = "agent-git@localhost";

#[derive(Debug, thiserror::Error)]
#[error("git: {0}")]
pub struct WorkspaceError(#[from] git2::Error);

/// What happened to a change the agent made in the work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    Committed(Oid),
    /// The work tree already matched the branch: nothing to commit.
    NoChange,
    /// The change touched protected paths; it was rolled back whole.
    Refused(Vec<String>),
}

/// The state a shell command must leave as it found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    head: Oid,
    dot_git: Vec<u8>,
}

/// What the harness did with a shell command's effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Absorbed {
    /// Protected paths the command changed, now as they were.
    pub reverted: Vec<String>,
    /// Git state the command moved, now put back.
    pub restored: Vec<String>,
    pub commit: CommitOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileStat {
    pub path: String,
    pub added: usize,
    pub removed: usize,
    pub binary: bool,
}

pub struct Workspace {
    repo: Repository,
    pub run_id: String,
    pub branch: String,
    pub base: Oid,
    pub worktree_path: PathBuf,
    worktree_name: String,
    common_dir: PathBuf,
}

impl Workspace {
    pub fn path(&self) -> &Path {
        &self.worktree_path
    }

    pub fn head(&self) -> Result<Oid, WorkspaceError> {
        Ok(self.repo.head()?.peel_to_commit()?.id())
    }

    /// Whether git ignores `rel` and does not track it: a change there could never be committed.
    pub fn is_ignored_untracked(&self, rel: &Path) -> Result<bool, WorkspaceError> {
        if !self.repo.is_path_ignored(rel)? {
            return Ok(false);
        }
        let tree = self.repo.head()?.peel_to_tree()?;
        Ok(tree.get_path(rel).is_err())
    }

    /// Commits whatever the work tree now holds (tracked changes and new files that are not
    /// ignored) as one commit, unless it adds, changes, deletes or renames a protected path:
    /// then the whole change is rolled back, whatever produced it.
    pub fn commit_changes(
        &self,
        subject: &str,
        body: &str,
        protection: &Protection,
    ) -> Result<CommitOutcome, WorkspaceError> {
        let head = self.repo.head()?.peel_to_commit()?;
        let head_tree = head.tree()?;
        let mut index = self.repo.index()?;
        index.read_tree(&head_tree)?;
        index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
        index.update_all(["*"], None)?;
        let tree_id = index.write_tree()?;
        if tree_id == head_tree.id() {
            return Ok(CommitOutcome::NoChange);
        }
        let tree = self.repo.find_tree(tree_id)?;
        let touched = protected_paths_in_diff(&self.repo, &head_tree, &tree, protection)?;
        if !touched.is_empty() {
            self.discard_changes()?;
            return Ok(CommitOutcome::Refused(touched));
        }
        index.write()?;
        let message = commit_message(subject, body, &self.run_id);
        let author = Signature::now(AGENT_NAME, AGENT_EMAIL)?;
        let committer = self.committer()?;
        let oid = self
            .repo
            .commit(Some("HEAD"), &author, &committer, &message, &tree, &[&head])?;
        Ok(CommitOutcome::Committed(oid))
    }

    /// The report: an empty commit on top of the branch.
    pub fn commit_report(&self, message: &str) -> Result<Oid, WorkspaceError> {
        let head = self.repo.head()?.peel_to_commit()?;
        let author = Signature::now(AGENT_NAME, AGENT_EMAIL)?;
        let committer = self.committer()?;
        Ok(self.repo.commit(
            Some("HEAD"),
            &author,
            &committer,
            message,
            &head.tree()?,
            &[&head],
        )?)
    }

    /// The user's identity when git knows it, else agent-git's own.
    fn committer(&self) -> Result<Signature<'static>, WorkspaceError> {
        match self.repo.signature() {
            Ok(sig) => Ok(sig),
            Err(_) => Ok(Signature::now(AGENT_NAME, AGENT_EMAIL)?),
        }
    }

    /// Puts the work tree back to the branch's last commit: tracked files restored, new
    /// (not ignored) files removed.
    pub fn discard_changes(&self) -> Result<(), WorkspaceError> {
        let head = self.repo.head()?.peel_to_commit()?;
        let mut checkout = CheckoutBuilder::new();
        checkout.force();
        self.repo
            .reset(head.as_object(), ResetType::Hard, Some(&mut checkout))?;
        self.remove_untracked()
    }

    /// Deletes files git does not track and does not ignore, and the folders they leave empty.
    /// (libgit2's reset does not do this even when asked to.)
    fn remove_untracked(&self) -> Result<(), WorkspaceError> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(true);
        let statuses = self.repo.statuses(Some(&mut opts))?;
        let mut dirs = Vec::new();
        for entry in statuses.iter().filter(|e| e.status().is_wt_new()) {
            let path = Path::new(std::ffi::OsStr::from_bytes(entry.path_bytes()));
            let full = self.worktree_path.join(path);
            if let Err(e) = std::fs::remove_file(&full) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    let message =
                        format!("cannot remove the untracked file {}: {e}", path.display());
                    return Err(git2::Error::from_str(&message).into());
                }
            }
            dirs.extend(
                full.ancestors()
                    .skip(1)
                    .take_while(|d| *d != self.worktree_path)
                    .map(Path::to_path_buf),
            );
        }
        // Deepest first; a folder that still holds anything (ignored files) stays.
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        dirs.dedup();
        for dir in dirs {
            let _ = std::fs::remove_dir(dir);
        }
        Ok(())
    }

    /// Makes every protected path exactly as in the base commit: changed or deleted ones are
    /// checked out again, new ones are removed. Run before every verification.
    pub fn restore_protected(
        &self,
        protection: &Protection,
    ) -> Result<Vec<String>, WorkspaceError> {
        let base_tree = self.repo.find_commit(self.base)?.tree()?;
        self.restore_protected_to(&base_tree, protection)
    }

    /// What a command must not have moved: the branch tip, HEAD, the work tree's `.git` file.
    pub fn snapshot(&self) -> Result<Snapshot, WorkspaceError> {
        Ok(Snapshot {
            head: self.head()?,
            dot_git: std::fs::read(self.worktree_path.join(".git")).unwrap_or_default(),
        })
    }

    /// After a shell command: puts back a moved HEAD or branch and a rewritten `.git` file,
    /// reverts changes to protected paths, and commits everything else as one commit.
    pub fn absorb_command(
        &self,
        subject: &str,
        body: &str,
        protection: &Protection,
        before: &Snapshot,
    ) -> Result<Absorbed, WorkspaceError> {
        let mut restored = Vec::new();
        let dot_git = self.worktree_path.join(".git");
        if std::fs::read(&dot_git).unwrap_or_default() != before.dot_git {
            std::fs::write(&dot_git, &before.dot_git)
                .map_err(|e| git2::Error::from_str(&format!("cannot restore .git: {e}")))?;
            restored.push("the work tree's .git file".to_string());
        }
        let branch_ref = format!("refs/heads/{}", self.branch);
        let head_target = self
            .repo
            .find_reference("HEAD")?
            .symbolic_target_bytes()
            .map(|t| String::from_utf8_lossy(t).into_owned());
        let tip = self.repo.refname_to_id(&branch_ref).ok();
        if tip != Some(before.head) {
            self.repo.reference(
                &branch_ref,
                before.head,
                true,
                "agent-git: restore the run's branch",
            )?;
            restored.push(format!("branch {}", self.branch));
        }
        if head_target.as_deref() != Some(branch_ref.as_str()) {
            self.repo.set_head(&branch_ref)?;
            restored.push("HEAD".to_string());
        }
        if !restored.is_empty() {
            // The index may name another commit's tree now; rebuild it from the branch.
            let mut index = self.repo.index()?;
            index.read_tree(&self.repo.find_commit(before.head)?.tree()?)?;
            index.write()?;
        }
        let head_tree = self.repo.find_commit(before.head)?.tree()?;
        let reverted = self.restore_protected_to(&head_tree, protection)?;
        let commit = self.commit_changes(subject, body, protection)?;
        Ok(Absorbed {
            reverted,
            restored,
            commit,
        })
    }

    fn restore_protected_to(
        &self,
        base_tree: &git2::Tree,
        protection: &Protection,
    ) -> Result<Vec<String>, WorkspaceError> {
        // Ignored files count too (a model may ignore a conftest.py it plants), but ignored
        // directories are not entered: node_modules holds test files that are not ours.
        let mut opts = DiffOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(true)
            .recurse_ignored_dirs(false);
        let diff = self
            .repo
            .diff_tree_to_workdir(Some(base_tree), Some(&mut opts))?;
        let mut restored = Vec::new();
        let mut from_base = 0;
        let mut checkout = CheckoutBuilder::new();
        checkout.force().update_index(false);
        for delta in diff.deltas() {
            let Some(path) = delta.new_file().path().or(delta.old_file().path()) else {
                continue;
            };
            let full = self.worktree_path.join(path);
            let is_dir = std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir());
            if is_dir || !protection.is_protected(path) {
                continue;
            }
            if base_tree.get_path(path).is_ok() {
                checkout.path(path);
                from_base += 1;
            } else if let Err(e) = std::fs::remove_file(&full) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(git2::Error::from_str(&format!(
                        "cannot remove {}: {e}",
                        path.display()
                    ))
                    .into());
                }
            }
            restored.push(path.to_string_lossy().into_owned());
        }
        // With no paths named, a checkout would reset the whole tree: only check out if needed.
        if from_base > 0 {
            self.repo
                .checkout_tree(base_tree.as_object(), Some(&mut checkout))?;
        }
        Ok(restored)
    }

    /// Files changed between the base and the branch, with added and removed line counts.
    pub fn diffstat(&self) -> Result<Vec<FileStat>, WorkspaceError> {
        let base_tree = self.repo.find_commit(self.base)?.tree()?;
        let head_tree = self.repo.head()?.peel_to_tree()?;
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&base_tree), Some(&head_tree), None)?;
        let mut stats = Vec::new();
        for (i, delta) in diff.deltas().enumerate() {
            let path = delta
                .new_file()
                .path()
                .or(delta.old_file().path())
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let patch = git2::Patch::from_diff(&diff, i)?;
            let (added, removed, binary) = match patch {
                Some(p) => {
                    let (_, added, removed) = p.line_stats()?;
                    (added, removed, delta.flags().is_binary())
                }
                None => (0, 0, true),
            };
            stats.push(FileStat {
                path,
                added,
                removed,
                binary,
            });
        }
        Ok(stats)
    }

    /// Removes the worktree and the branch: for a run that made nothing worth keeping.
    pub fn discard(self) -> Result<(), WorkspaceError> {
        self.remove_worktree()?;
        let main = Repository::open(&self.common_dir)?;
        main.find_branch(&self.branch, git2::BranchType::Local)?
            .delete()?;
        Ok(())
    }

    /// Removes the linked worktree; the branch stays.
    pub fn remove_worktree(&self) -> Result<(), WorkspaceError> {
        let main = Repository::open(&self.common_dir)?;
        let worktree = main.find_worktree(&self.worktree_name)?;
        worktree.prune(Some(
            WorktreePruneOptions::new()
                .valid(true)
                .locked(true)
                .working_tree(true),
        ))?;
        // prune removes the checkout; the folder that held it may stay behind.
        let _ = std::fs::remove_dir_all(&self.worktree_path);
        if let Some(parent) = self.worktree_path.parent() {
            let _ = std::fs::remove_dir(parent);
        }
        Ok(())
    }
}

fn protected_paths_in_diff(
    repo: &Repository,
    old: &git2::Tree,
    new: &git2::Tree,
    protection: &Protection,
) -> Result<Vec<String>, git2::Error> {
    let diff = repo.diff_tree_to_tree(Some(old), Some(new), None)?;
    let mut touched = Vec::new();
    for delta in diff.deltas() {
        for path in [delta.old_file().path(), delta.new_file().path()]
            .into_iter()
            .flatten()
        {
            let shown = path.to_string_lossy().into_owned();
            if protection.is_protected(path) && !touched.contains(&shown) {
                touched.push(shown);
            }
        }
    }
    Ok(touched)
}

fn commit_message(subject: &str, body: &str, run_id: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        format!("{subject}\n\nAgent-Run: {run_id}\n")
    } else {
        format!("{subject}\n\n{body}\n\nAgent-Run: {run_id}\n")
    }
}
