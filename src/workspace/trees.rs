//! The differences between two trees, found without opening what they share. A subtree with
//! the same id on both sides holds the same files, so it is skipped whole; libgit2's own
//! tree-to-tree diff walks every file of both trees instead (200,000 entries at 100,000 files,
//! for a change of one line), and agent-git diffs a run's trees at every commit, test and
//! proof.

use git2::{Diff, DiffOptions, ObjectType, Oid, Repository, Tree};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `repo.diff_tree_to_tree(old, new, options)`, with the same deltas in the same order, but
/// only the folders that lead to a change are read. `options` must not name paths of its own.
pub fn diff<'r>(
    repo: &'r Repository,
    old: Option<&Tree>,
    new: Option<&Tree>,
    options: Option<&mut DiffOptions>,
) -> Result<Diff<'r>, git2::Error> {
    let paths = changed_paths(repo, old, new)?;
    if paths.is_empty() {
        // Two empty sides: an empty diff, made without reading anything.
        return repo.diff_tree_to_tree(None, None, options);
    }
    let mut own = DiffOptions::new();
    let options = options.unwrap_or(&mut own);
    // Each path taken as it is (no patterns): libgit2 then opens only the folders on the way
    // to one of them.
    options.disable_pathspec_match(true);
    for path in &paths {
        options.pathspec(path.as_path());
    }
    repo.diff_tree_to_tree(old, new, Some(options))
}

/// Every path below which `old` and `new` differ: each file, link or submodule that was
/// added, removed, or changed in content or mode. A path whose file became a folder (or the
/// reverse) is named, and so is every file of that folder.
pub fn changed_paths(
    repo: &Repository,
    old: Option<&Tree>,
    new: Option<&Tree>,
) -> Result<Vec<PathBuf>, git2::Error> {
    let mut paths = Vec::new();
    if old.map(Tree::id) != new.map(Tree::id) {
        compare(repo, old, new, Path::new(""), &mut paths)?;
    }
    Ok(paths)
}

/// One side's entry: its id, mode and kind.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Entry {
    id: Oid,
    mode: i32,
    tree: bool,
}

/// The entries of a tree by name, in the tree's order.
fn entries(tree: Option<&Tree>) -> Vec<(Vec<u8>, Entry)> {
    tree.into_iter()
        .flat_map(|tree| tree.iter())
        .map(|entry| {
            (
                entry.name_bytes().to_vec(),
                Entry {
                    id: entry.id(),
                    mode: entry.filemode(),
                    tree: entry.kind() == Some(ObjectType::Tree),
                },
            )
        })
        .collect()
}

fn compare(
    repo: &Repository,
    old: Option<&Tree>,
    new: Option<&Tree>,
    at: &Path,
    out: &mut Vec<PathBuf>,
) -> Result<(), git2::Error> {
    let old = entries(old);
    let new = entries(new);
    let find = |side: &[(Vec<u8>, Entry)], name: &[u8]| {
        side.iter()
            .find(|(other, _)| other.as_slice() == name)
            .map(|(_, entry)| *entry)
    };
    // Small folders are the rule; a folder of many files is looked up through a map.
    let index = |side: &[(Vec<u8>, Entry)]| -> Option<std::collections::HashMap<Vec<u8>, Entry>> {
        (side.len() > 64).then(|| side.iter().cloned().collect())
    };
    let (old_index, new_index) = (index(&old), index(&new));
    let in_old = |name: &[u8]| match &old_index {
        Some(map) => map.get(name).copied(),
        None => find(&old, name),
    };
    let in_new = |name: &[u8]| match &new_index {
        Some(map) => map.get(name).copied(),
        None => find(&new, name),
    };
    for (name, before) in &old {
        let after = in_new(name);
        side_by_side(repo, at, name, Some(*before), after, out)?;
    }
    for (name, after) in &new {
        if in_old(name).is_none() {
            side_by_side(repo, at, name, None, Some(*after), out)?;
        }
    }
    Ok(())
}

/// One name of a folder, as the two sides have it.
fn side_by_side(
    repo: &Repository,
    at: &Path,
    name: &[u8],
    before: Option<Entry>,
    after: Option<Entry>,
    out: &mut Vec<PathBuf>,
) -> Result<(), git2::Error> {
    if before == after {
        return Ok(());
    }
    let path = at.join(OsStr::from_bytes(name));
    let tree_of = |entry: Option<Entry>| -> Result<Option<Tree>, git2::Error> {
        match entry {
            Some(entry) if entry.tree => repo.find_tree(entry.id).map(Some),
            _ => Ok(None),
        }
    };
    let (old_tree, new_tree) = (tree_of(before)?, tree_of(after)?);
    // A file on either side is named itself; a folder's differences are looked for inside.
    let file = |entry: Option<Entry>| entry.is_some_and(|e| !e.tree);
    if file(before) || file(after) {
        out.push(path.clone());
    }
    if old_tree.is_some() || new_tree.is_some() {
        compare(repo, old_tree.as_ref(), new_tree.as_ref(), &path, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree of `files` (path, content, executable), made in `repo`.
    fn tree<'r>(repo: &'r Repository, files: &[(&str, &str, bool)]) -> Tree<'r> {
        let mut index = git2::Index::new().unwrap();
        for (path, content, executable) in files {
            let id = repo.blob(content.as_bytes()).unwrap();
            let mode = if *executable { 0o100755 } else { 0o100644 };
            let entry = crate::workspace::blob_entry(path.as_bytes(), id, mode);
            index.add(&entry).unwrap();
        }
        let id = index.write_tree_to(repo).unwrap();
        repo.find_tree(id).unwrap()
    }

    /// What a diff says, delta by delta: status and both paths.
    fn deltas(diff: &Diff) -> Vec<String> {
        diff.deltas()
            .map(|d| {
                format!(
                    "{:?} {:?} {:?} {:o}",
                    d.status(),
                    d.old_file().path(),
                    d.new_file().path(),
                    u32::from(d.new_file().mode())
                )
            })
            .collect()
    }

    #[test]
    fn the_diff_is_libgit2s_whole_diff_whatever_changed() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let many: Vec<(String, String)> = (0..100)
            .map(|i| (format!("wide/f{i:03}.txt"), format!("{i}\n")))
            .collect();
        let mut base: Vec<(&str, &str, bool)> = vec![
            ("a.py", "a\n", false),
            ("a-b.py", "ab\n", false),
            ("a0", "zero\n", false),
            ("deep/er/still/x.py", "x\n", false),
            ("deep/er/y.py", "y\n", false),
            ("gone/one.txt", "1\n", false),
            ("gone/two.txt", "2\n", false),
            ("run.sh", "echo\n", false),
            ("becomes_dir", "file\n", false),
            ("src/lib.py", "lib\n", false),
            ("src/other.py", "other\n", false),
            ("zz", "last\n", false),
        ];
        base.extend(many.iter().map(|(p, c)| (p.as_str(), c.as_str(), false)));
        let mut changed: Vec<(&str, &str, bool)> = base
            .iter()
            .filter(|(p, _, _)| {
                !p.starts_with("gone/") && *p != "becomes_dir" && *p != "run.sh" && *p != "a0"
            })
            .map(|&(p, c, x)| match p {
                "deep/er/still/x.py" => (p, "x changed\n", x),
                "wide/f050.txt" => (p, "fifty\n", x),
                _ => (p, c, x),
            })
            .collect();
        changed.extend([
            ("run.sh", "echo\n", true),
            ("becomes_dir/inside.py", "in\n", false),
            ("new/folder/n.py", "n\n", false),
            ("a0/now_a_dir", "d\n", false),
        ]);
        let (old, new) = (tree(&repo, &base), tree(&repo, &changed));
        let cases = [
            (Some(&old), Some(&new)),
            (Some(&new), Some(&old)),
            (None, Some(&new)),
            (Some(&old), None),
            (Some(&old), Some(&old)),
            (None, None),
        ];
        for (a, b) in cases {
            let whole = repo.diff_tree_to_tree(a, b, None).unwrap();
            let ours = diff(&repo, a, b, None).unwrap();
            assert_eq!(deltas(&ours), deltas(&whole));
            let mut with_options = DiffOptions::new();
            with_options.context_lines(1);
            let patched = diff(&repo, a, b, Some(&mut with_options)).unwrap();
            assert_eq!(patched.stats().unwrap().insertions(), {
                whole.stats().unwrap().insertions()
            });
        }
        let paths = changed_paths(&repo, Some(&old), Some(&new)).unwrap();
        let mut names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "a0",
                "a0/now_a_dir",
                "becomes_dir",
                "becomes_dir/inside.py",
                "deep/er/still/x.py",
                "gone/one.txt",
                "gone/two.txt",
                "new/folder/n.py",
                "run.sh",
                "wide/f050.txt",
            ]
        );
        assert!(changed_paths(&repo, Some(&old), Some(&old))
            .unwrap()
            .is_empty());
    }
}
