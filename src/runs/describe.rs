//! The model's words for a run's work, for the subject of the commit that applies it: the
//! subject of its newest edit written from the model's note that the run kept (an edit later
//! undone, and the edit that undid it, say nothing about the result).

use git2::{Oid, Repository, Tree};
use std::path::PathBuf;

/// One edit of the run: its subject, the paths it touched, and their blobs before and after.
struct Edit {
    subject: String,
    paths: Vec<PathBuf>,
    before: Vec<Option<Oid>>,
    after: Vec<Option<Oid>>,
}

pub(crate) fn model_description(
    repo: &Repository,
    work: Oid,
    base: Oid,
) -> Result<Option<String>, git2::Error> {
    let edits = edits(repo, work, base)?;
    let final_tree = repo.find_commit(work)?.tree()?;
    let mut undone = vec![false; edits.len()];
    for (i, edit) in edits.iter().enumerate() {
        if blobs(&final_tree, &edit.paths) == edit.before {
            undone[i] = true;
        }
        for (j, later) in edits.iter().enumerate().skip(i + 1) {
            if later.paths == edit.paths && later.after == edit.before {
                undone[i] = true;
                undone[j] = true;
            }
        }
    }
    Ok(edits
        .iter()
        .zip(undone)
        .rev()
        .find(|(edit, undone)| !undone && !edit.subject.starts_with("agent-git: "))
        .map(|(edit, _)| edit.subject.clone()))
}

/// The run's edits base..work, oldest first.
fn edits(repo: &Repository, work: Oid, base: Oid) -> Result<Vec<Edit>, git2::Error> {
    let mut walk = repo.revwalk()?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    walk.push(work)?;
    walk.hide(base)?;
    let mut edits = Vec::new();
    for oid in walk {
        let commit = repo.find_commit(oid?)?;
        let Ok(parent) = commit.parent(0) else {
            continue;
        };
        let (old, new) = (parent.tree()?, commit.tree()?);
        let diff = crate::workspace::trees::diff(repo, Some(&old), Some(&new), None)?;
        let mut paths: Vec<PathBuf> = diff
            .deltas()
            .filter_map(|d| d.new_file().path().or(d.old_file().path()))
            .map(PathBuf::from)
            .collect();
        paths.sort();
        edits.push(Edit {
            subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default())
                .into_owned(),
            before: blobs(&old, &paths),
            after: blobs(&new, &paths),
            paths,
        });
    }
    Ok(edits)
}

fn blobs(tree: &Tree, paths: &[PathBuf]) -> Vec<Option<Oid>> {
    paths
        .iter()
        .map(|p| tree.get_path(p).ok().map(|e| e.id()))
        .collect()
}
