//! Every entry of a git tree, with its folder as a path made from the name's bytes. git2's own
//! `Tree::walk` gives each folder as `&str` and stops the walk (`git_tree_walk callback
//! returned -1`) at the first folder whose name is not UTF-8, which git allows: a folder named
//! in Latin-1 must not stop a run.

use git2::{ObjectType, Repository, Tree, TreeEntry};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Calls `visit(folder, entry)` for each entry of `tree`: a folder's entries in the tree's
/// order, then those of the folders among them for which `visit` returned true.
pub fn each_entry(
    repo: &Repository,
    tree: &Tree,
    visit: &mut dyn FnMut(&Path, &TreeEntry) -> bool,
) -> Result<(), git2::Error> {
    let mut pending: Vec<(PathBuf, Tree)> = vec![(PathBuf::new(), tree.clone())];
    while let Some((dir, tree)) = pending.pop() {
        let mut below = Vec::new();
        for entry in tree.iter() {
            let descend = visit(&dir, &entry);
            if descend && entry.kind() == Some(ObjectType::Tree) {
                let name = std::ffi::OsStr::from_bytes(entry.name_bytes());
                below.push((dir.join(name), repo.find_tree(entry.id())?));
            }
        }
        // The folders below are popped in the tree's own order.
        pending.extend(below.into_iter().rev());
    }
    Ok(())
}

/// The path of `entry` in the folder `dir`.
pub fn entry_path(dir: &Path, entry: &TreeEntry) -> PathBuf {
    dir.join(std::ffi::OsStr::from_bytes(entry.name_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_whose_name_is_not_utf8_is_walked_like_any_other() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let blob = repo.blob(b"x\n").unwrap();
        let mut inner = repo.treebuilder(None).unwrap();
        inner.insert("f.py", blob, 0o100644).unwrap();
        let inner = inner.write().unwrap();
        let mut root = repo.treebuilder(None).unwrap();
        root.insert(&b"caf\xe9"[..], inner, 0o040000).unwrap();
        root.insert("z.py", blob, 0o100644).unwrap();
        let root = repo.find_tree(root.write().unwrap()).unwrap();
        let mut seen = Vec::new();
        each_entry(&repo, &root, &mut |dir, entry| {
            seen.push(entry_path(dir, entry));
            true
        })
        .unwrap();
        let latin = PathBuf::from(std::ffi::OsStr::from_bytes(b"caf\xe9"));
        assert_eq!(
            seen,
            [latin.clone(), PathBuf::from("z.py"), latin.join("f.py")]
        );
    }
}
