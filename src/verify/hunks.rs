//! The changes of a run, one by one: each hunk of a changed text file, and each other file
//! change whole (a file added, deleted, made executable, binary). A tree with some of them
//! left out is the base with the rest applied, by libgit2's own patch code.

use git2::{ApplyOptions, Delta, Diff, DiffOptions, Oid, Patch, Repository};
use std::cell::Cell;
use std::rc::Rc;

/// One change that can be left out alone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// The file's path in the tree, relative to its root.
    pub file: String,
    /// The hunk's header (`@@ -3,2 +3,3 @@ def add`), or what happened to the file.
    pub header: String,
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
    #[serde(skip)]
    delta: usize,
    /// Its place among the delta's hunks; None for a file change taken whole.
    #[serde(skip)]
    hunk: Option<usize>,
}

/// The diff from `base` to `tip`, as every listing and application here reads it.
fn diff<'r>(repo: &'r Repository, base: Oid, tip: Oid) -> Result<Diff<'r>, git2::Error> {
    let base = repo.find_tree(base)?;
    let tip = repo.find_tree(tip)?;
    let mut options = DiffOptions::new();
    options.context_lines(3).show_binary(true);
    crate::workspace::trees::diff(repo, Some(&base), Some(&tip), Some(&mut options))
}

/// The changes from `base` to `tip`, in diff order.
pub fn changes(repo: &Repository, base: Oid, tip: Oid) -> Result<Vec<Change>, git2::Error> {
    let diff = diff(repo, base, tip)?;
    let mut all = Vec::new();
    for (delta_index, delta) in diff.deltas().enumerate() {
        let file = crate::workspace::delta_path(&delta);
        let patch = Patch::from_diff(&diff, delta_index)?;
        let hunks = patch.as_ref().map_or(0, Patch::num_hunks);
        let text = delta.status() == Delta::Modified
            && !delta.flags().is_binary()
            && delta.old_file().mode() == delta.new_file().mode()
            && hunks > 0;
        match (text, patch) {
            (true, Some(patch)) => {
                for hunk_index in 0..hunks {
                    let (hunk, _) = patch.hunk(hunk_index)?;
                    let mut added = 0;
                    let mut removed = 0;
                    for line in 0..patch.num_lines_in_hunk(hunk_index)? {
                        match patch.line_in_hunk(hunk_index, line)?.origin() {
                            '+' => added += 1,
                            '-' => removed += 1,
                            _ => {}
                        }
                    }
                    all.push(Change {
                        file: file.clone(),
                        header: String::from_utf8_lossy(hunk.header()).trim().to_string(),
                        added,
                        removed,
                        delta: delta_index,
                        hunk: Some(hunk_index),
                    });
                }
            }
            (_, patch) => {
                let (added, removed) = patch
                    .and_then(|p| p.line_stats().ok())
                    .map_or((0, 0), |(_, added, removed)| (added, removed));
                all.push(Change {
                    file,
                    header: format!("the whole file ({:?})", delta.status()).to_lowercase(),
                    added,
                    removed,
                    delta: delta_index,
                    hunk: None,
                });
            }
        }
    }
    Ok(all)
}

/// The tree of `base` with every change to `tip` but those `left_out` holds (indices into
/// `changes`' list).
pub fn tree_without(
    repo: &Repository,
    base: Oid,
    tip: Oid,
    all: &[Change],
    left_out: &[usize],
) -> Result<Oid, git2::Error> {
    // Without every change, or without none, the tree is known: applying the rest would read
    // the whole tree into an index and write it again.
    if (0..all.len()).all(|i| left_out.contains(&i)) {
        return Ok(base);
    }
    if !left_out.iter().any(|&i| i < all.len()) {
        return Ok(tip);
    }
    let diff = diff(repo, base, tip)?;
    let out: Vec<&Change> = left_out.iter().filter_map(|&i| all.get(i)).collect();
    // The delta the callbacks are at, and the hunk within it (libgit2 calls them in order).
    let at_delta = Rc::new(Cell::new(usize::MAX));
    let at_hunk = Rc::new(Cell::new(0usize));
    let (delta_seen, hunk_seen) = (at_delta.clone(), at_hunk.clone());
    let whole_out: Vec<usize> = out
        .iter()
        .filter(|c| c.hunk.is_none())
        .map(|c| c.delta)
        .collect();
    let hunks_out: Vec<(usize, usize)> = out
        .iter()
        .filter_map(|c| c.hunk.map(|h| (c.delta, h)))
        .collect();
    let mut options = ApplyOptions::new();
    options.delta_callback(move |delta| {
        let next = delta_seen.get().wrapping_add(1);
        delta_seen.set(next);
        hunk_seen.set(0);
        delta.is_some() && !whole_out.contains(&next)
    });
    options.hunk_callback(move |_| {
        let hunk = at_hunk.get();
        at_hunk.set(hunk + 1);
        !hunks_out.contains(&(at_delta.get(), hunk))
    });
    let base_tree = repo.find_tree(base)?;
    let mut index = repo.apply_to_tree(&base_tree, &diff, Some(&mut options))?;
    // libgit2 removes every deleted path before it asks which deltas to apply: a deletion
    // left out is put back here.
    for change in out.iter().filter(|c| c.hunk.is_none()) {
        let Some(delta) = diff.get_delta(change.delta) else {
            continue;
        };
        if delta.status() != Delta::Deleted {
            continue;
        }
        if let Some(path) = delta.old_file().path() {
            let entry = base_tree.get_path(path)?;
            index.add(&crate::workspace::index_entry(path, &entry))?;
        }
    }
    index.write_tree_to(repo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(repo: &Repository, files: &[(&str, &str)]) -> Oid {
        let mut builder = repo.treebuilder(None).unwrap();
        for (name, text) in files {
            let blob = repo.blob(text.as_bytes()).unwrap();
            builder.insert(name, blob, 0o100644).unwrap();
        }
        builder.write().unwrap()
    }

    fn text_of(repo: &Repository, tree: Oid, name: &str) -> Option<String> {
        let tree = repo.find_tree(tree).unwrap();
        let entry = tree.get_name(name)?;
        let blob = repo.find_blob(entry.id()).unwrap();
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    }

    #[test]
    fn each_change_can_be_left_out_alone() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let lines: Vec<String> = (1..=30).map(|n| format!("line {n}\n")).collect();
        let before = lines.concat();
        let mut changed = lines.clone();
        changed[1] = "line 2, changed\n".into();
        changed[25] = "line 26, changed\n".into();
        let after = changed.concat();
        let base = tree(&repo, &[("a.txt", &before), ("gone.txt", "bye\n")]);
        let tip = tree(&repo, &[("a.txt", &after), ("new.txt", "hello\n")]);
        let all = changes(&repo, base, tip).unwrap();
        let described: Vec<(&str, usize, usize, bool)> = all
            .iter()
            .map(|c| (c.file.as_str(), c.added, c.removed, c.hunk.is_some()))
            .collect();
        assert_eq!(
            described,
            vec![
                ("a.txt", 1, 1, true),
                ("a.txt", 1, 1, true),
                ("gone.txt", 0, 1, false),
                ("new.txt", 1, 0, false),
            ]
        );
        assert!(all[0].header.starts_with("@@ -1,"), "{}", all[0].header);

        assert_eq!(tree_without(&repo, base, tip, &all, &[]).unwrap(), tip);
        let first_out = tree_without(&repo, base, tip, &all, &[0]).unwrap();
        let mut expected = changed.clone();
        expected[1] = "line 2\n".into();
        assert_eq!(text_of(&repo, first_out, "a.txt"), Some(expected.concat()));
        assert_eq!(text_of(&repo, first_out, "new.txt"), Some("hello\n".into()));
        let second_out = tree_without(&repo, base, tip, &all, &[1]).unwrap();
        let mut expected = changed;
        expected[25] = "line 26\n".into();
        assert_eq!(text_of(&repo, second_out, "a.txt"), Some(expected.concat()));
        let kept_file = tree_without(&repo, base, tip, &all, &[2]).unwrap();
        assert_eq!(text_of(&repo, kept_file, "gone.txt"), Some("bye\n".into()));
        let no_new = tree_without(&repo, base, tip, &all, &[3]).unwrap();
        assert_eq!(text_of(&repo, no_new, "new.txt"), None);
        assert_eq!(
            tree_without(&repo, base, tip, &all, &[0, 1, 2, 3]).unwrap(),
            base
        );
    }
}
