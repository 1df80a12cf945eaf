//! Landing a run's work on the user's current branch (`agent-git apply`): the one place that
//! writes to the user's checkout, and only as `git merge` would: a commit on the current branch,
//! and the index and files of the paths that commit changes. Every refusal comes before the
//! first write, so a refused landing changes nothing.

use super::{committer, dates, AGENT_EMAIL, AGENT_NAME};
use git2::build::CheckoutBuilder;
use git2::{CheckoutNotificationType, Oid, Repository};
use std::cell::RefCell;

/// What to land, and how.
pub struct Landing<'a> {
    /// The branch, for what the refusals tell the user to do.
    pub branch: &'a str,
    /// The commit the run started from.
    pub base: Oid,
    /// The run's last edit: its tree is the run's work.
    pub work: Oid,
    /// Keep the run's commits: a merge commit with `work` as its second parent. Otherwise one
    /// commit with the tree difference base..work, authored by agent-git.
    pub keep_history: bool,
    /// The message of the new commit.
    pub message: &'a str,
    /// The reflog line of the current branch.
    pub reflog: &'a str,
}

/// Why a run was not landed; each refusal comes before anything of the user's was written.
#[derive(Debug, thiserror::Error)]
pub enum LandError {
    /// The checkout has uncommitted changes to tracked files (untracked ones do not count, as for
    /// `git merge`); the paths.
    #[error(
        "your working tree or index has uncommitted changes ({}); nothing was changed. Commit \
         or stash them (`git stash`), then apply again",
        .0.join(", ")
    )]
    Dirty(Vec<String>),
    /// The repository is bare, or HEAD names no commit.
    #[error("the repository has no working tree or no commit checked out; apply in a checkout")]
    NoCheckout,
    /// The run's base (or, for a `--dirty` run, its snapshot's parent) is not in the current
    /// branch's history.
    #[error(
        "the run started from {base}, which is not in the history of your current branch \
         ({head}); nothing was changed. Check out a branch that contains it, or bring the \
         work over by hand: `git diff {base} {branch} | git apply`"
    )]
    NotAncestor {
        /// The run's base, abbreviated.
        base: String,
        /// The current commit, abbreviated.
        head: String,
        /// The run's branch, for the command the message suggests.
        branch: String,
    },
    /// Merging the run's work into the current branch conflicts.
    #[error(
        "the run's changes conflict with your branch in {}; nothing was changed. Merge by hand \
         (`git merge {branch}`) and resolve the conflicts, or start a new run from here",
        .paths.join(", ")
    )]
    Conflict {
        /// The conflicting paths.
        paths: Vec<String>,
        /// The run's branch, for the command the message suggests.
        branch: String,
    },
    /// Files of the checkout (untracked, ignored, or changed meanwhile) stand where the landed tree
    /// writes; the paths.
    #[error(
        "files the run changes are in the way in your working tree ({}); nothing was changed. \
         Move or remove them, then apply again",
        .0.join(", ")
    )]
    InTheWay(Vec<String>),
    /// The landed tree would be the current one: the run's changes are in the branch already, or it
    /// made none.
    #[error(
        "the run's changes are already in your branch (or it changed nothing); nothing to apply"
    )]
    NothingToApply,
    /// git failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// Lands the run; returns the new commit, now the tip of the current branch.
pub fn land(repo: &Repository, landing: &Landing) -> Result<Oid, LandError> {
    if repo.workdir().is_none() {
        return Err(LandError::NoCheckout);
    }
    let head = repo.head().map_err(|_| LandError::NoCheckout)?;
    let head_commit = head.peel_to_commit().map_err(|_| LandError::NoCheckout)?;
    // Untracked files do not count, as for `git merge`.
    let dirty = super::dirty::uncommitted(repo)?;
    if !dirty.is_empty() {
        return Err(LandError::Dirty(dirty));
    }
    let in_history = |commit: Oid| -> Result<bool, git2::Error> {
        Ok(head_commit.id() == commit || repo.graph_descendant_of(head_commit.id(), commit)?)
    };
    // A run started `--dirty` from a snapshot of the working tree: what counts is that the
    // snapshot's own base is in the history (the user commits their changes, then applies).
    let base_in_history = in_history(landing.base)?
        || super::dirty::snapshot_parent(repo, landing.base)
            .map(in_history)
            .transpose()?
            .unwrap_or(false);
    if !base_in_history {
        return Err(LandError::NotAncestor {
            base: short(landing.base),
            head: short(head_commit.id()),
            branch: landing.branch.to_string(),
        });
    }
    let tree = merged_tree(repo, &head_commit, landing)?;
    if tree == head_commit.tree_id() {
        return Err(LandError::NothingToApply);
    }
    let landed = commit(repo, &head_commit, tree, landing)?;
    match check_out(repo, tree) {
        Ok(()) => {}
        // Found before the first write: nothing to undo, and what is in the way is the user's.
        Err(e @ LandError::InTheWay(_)) => return Err(e),
        Err(e) => {
            // Stopped midway (a file it could not write): what it wrote is put back.
            undo_checkout(repo, &head_commit, tree);
            return Err(e);
        }
    }
    if let Err(e) = move_head(repo, &head, head_commit.id(), landed, landing.reflog) {
        // Put the files back as HEAD has them, so a failure leaves the checkout as it was.
        let mut back = CheckoutBuilder::new();
        back.force();
        let _ = repo.checkout_tree(head_commit.tree()?.as_object(), Some(&mut back));
        return Err(e.into());
    }
    Ok(landed)
}

/// The tree of the landed commit: the run's change (base..work) merged into HEAD.
fn merged_tree(
    repo: &Repository,
    head: &git2::Commit,
    landing: &Landing,
) -> Result<Oid, LandError> {
    let work = repo.find_commit(landing.work)?;
    let mut index = if landing.keep_history {
        repo.merge_commits(head, &work, None)?
    } else {
        let base = repo.find_commit(landing.base)?.tree()?;
        repo.merge_trees(&base, &head.tree()?, &work.tree()?, None)?
    };
    if index.has_conflicts() {
        let mut paths: Vec<String> = index
            .conflicts()?
            .flatten()
            .filter_map(|c| c.our.or(c.their).or(c.ancestor))
            .map(|e| String::from_utf8_lossy(&e.path).into_owned())
            .collect();
        paths.dedup();
        return Err(LandError::Conflict {
            paths,
            branch: landing.branch.to_string(),
        });
    }
    Ok(index.write_tree_to(repo)?)
}

fn commit(
    repo: &Repository,
    head: &git2::Commit,
    tree: Oid,
    landing: &Landing,
) -> Result<Oid, git2::Error> {
    let tree = repo.find_tree(tree)?;
    let committer = committer(repo)?;
    if landing.keep_history {
        let work = repo.find_commit(landing.work)?;
        return repo.commit(
            None,
            &committer,
            &committer,
            landing.message,
            &tree,
            &[head, &work],
        );
    }
    let author = dates::signature(AGENT_NAME, AGENT_EMAIL, "GIT_AUTHOR_DATE")?;
    repo.commit(None, &author, &committer, landing.message, &tree, &[head])
}

/// Writes the landed tree's changed paths to the index and working tree, as a safe checkout:
/// a file in the way (untracked, or changed meanwhile) stops it before anything is written.
fn check_out(repo: &Repository, tree: Oid) -> Result<(), LandError> {
    let in_the_way = RefCell::new(Vec::new());
    let mut checkout = CheckoutBuilder::new();
    // An ignored file in the way (a `.env`) is the user's too: never overwritten.
    checkout
        .safe()
        .overwrite_ignored(false)
        .notify_on(CheckoutNotificationType::CONFLICT)
        .notify(|_, path, _, _, _| {
            if let Some(path) = path {
                in_the_way
                    .borrow_mut()
                    .push(path.to_string_lossy().into_owned());
            }
            true
        });
    let tree = repo.find_tree(tree)?;
    match repo.checkout_tree(tree.as_object(), Some(&mut checkout)) {
        Ok(()) => Ok(()),
        Err(e) if e.code() == git2::ErrorCode::Conflict => {
            drop(checkout);
            Err(LandError::InTheWay(in_the_way.into_inner()))
        }
        Err(e) => Err(e.into()),
    }
}

/// Puts the paths a checkout of `landed` may have written back as HEAD has them: the files it
/// changed or removed are restored, the ones it added removed. The checkout was safe, so none
/// of them held the user's own work.
fn undo_checkout(repo: &Repository, head: &git2::Commit, landed: Oid) {
    let (Ok(head_tree), Ok(landed_tree)) = (head.tree(), repo.find_tree(landed)) else {
        return;
    };
    let Ok(diff) = super::trees::diff(repo, Some(&head_tree), Some(&landed_tree), None) else {
        return;
    };
    let workdir = repo.workdir().map(std::path::Path::to_path_buf);
    let mut back = CheckoutBuilder::new();
    back.force();
    for delta in diff.deltas() {
        match (delta.status(), delta.new_file().path(), &workdir) {
            (git2::Delta::Added, Some(path), Some(workdir)) => {
                let _ = std::fs::remove_file(workdir.join(path));
            }
            (_, Some(path), _) => {
                back.path(path);
            }
            _ => {}
        }
    }
    let _ = repo.checkout_tree(head_tree.as_object(), Some(&mut back));
}

/// Moves the current branch (or a detached HEAD) to `landed`, only if it is still at `from`.
fn move_head(
    repo: &Repository,
    head: &git2::Reference,
    from: Oid,
    landed: Oid,
    reflog: &str,
) -> Result<(), git2::Error> {
    match head.name() {
        Ok(name) if head.is_branch() => {
            repo.reference_matching(name, landed, true, from, reflog)?;
            Ok(())
        }
        _ => repo.set_head_detached(landed),
    }
}

fn short(oid: Oid) -> String {
    oid.to_string()[..7].to_string()
}
