//! The user's uncommitted work: seen (to say it is not part of a run), or taken as a run's base
//! (`--dirty`) as a commit of the working tree made beside the user's index, HEAD and files,
//! never through them.

use super::index_file::IndexFile;
use super::{BaseInfo, SetupError};
use git2::{Index, IndexEntry, IndexTime, Oid, Repository, Status, StatusOptions};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The trailer that marks a commit `--dirty` made of a working tree.
pub const SNAPSHOT_TRAILER: &str = "Agent-Snapshot";

/// The commit a `--dirty` snapshot was made on top of, if `commit` is one.
pub fn snapshot_parent(repo: &Repository, commit: Oid) -> Option<Oid> {
    let commit = repo.find_commit(commit).ok()?;
    let message = commit.message().ok()?;
    let trailers = git2::message_trailers_strs(message).ok()?;
    let marked = trailers.iter().any(|(key, _)| key == SNAPSHOT_TRAILER);
    (marked && commit.parent_count() == 1)
        .then(|| commit.parent_id(0).ok())
        .flatten()
}

/// The tracked files whose working-tree or staged content differs from HEAD.
pub fn uncommitted(repo: &Repository) -> Result<Vec<String>, git2::Error> {
    // An error on the quick path (an unborn HEAD, an index it cannot read) is doubt, not a
    // clean tree: the status below decides.
    if all_committed(repo).unwrap_or(false) {
        return Ok(Vec::new());
    }
    Ok(changes(repo, false)?
        .into_iter()
        .map(|(path, _)| path)
        .collect())
}

/// Whether every tracked file is, for certain, as HEAD has it: the index names HEAD's tree,
/// and each file's stat data is what the index recorded. Where anything is in doubt (a file
/// touched since, a racily clean entry, a conflict, an index read here cannot read), false:
/// then a status of the whole tree says what differs. On a large checkout this is a third of
/// what that status costs.
///
/// The index is read one entry at a time (`IndexFile`), and that it names HEAD's tree is
/// what its cached trees say: libgit2's index held 21 MiB at 100,000 files for as long as
/// the look went on, and each of the entries was compared with HEAD's tree.
///
/// Each file is looked at by its path, so every folder on the way must be a folder of the
/// work tree itself: a link put where a tracked folder was would lead the look elsewhere.
fn all_committed(repo: &Repository) -> Result<bool, git2::Error> {
    let Some(workdir) = repo.workdir() else {
        return Ok(false);
    };
    let own = Repository::open(repo.path())?;
    let head = own.head()?.peel_to_tree()?.id();
    let config = own.config()?;
    // The index holds SHA-1 ids only in a SHA-1 repository.
    if config
        .get_string("extensions.objectformat")
        .is_ok_and(|format| !format.eq_ignore_ascii_case("sha1"))
    {
        return Ok(false);
    }
    let trust_ctime = config.get_bool("core.trustctime").unwrap_or(true);
    let stamps = super::recorded::Stamps::of(&own, trust_ctime);
    let Some(mut index) = IndexFile::open(&own.path().join("index")) else {
        return Ok(false);
    };
    // What a status does not look at either: assume-unchanged and skip-worktree entries.
    let unlooked = |entry: &IndexEntry| {
        entry.flags & git2::IndexEntryFlag::VALID.bits() != 0
            || entry.flags_extended & git2::IndexEntryExtendedFlag::SKIP_WORKTREE.bits() != 0
    };
    // A conflict's entries are of a stage other than 0.
    const STAGE: u16 = 0x3000;
    // The folders seen to be real folders (not links) so far.
    let mut folders: HashSet<Vec<u8>> = HashSet::new();
    // The folder the last file was in, open: the index lists a folder's files together, so
    // each file's stat data is read relative to it, not by resolving its whole path again.
    let mut open: Option<(Vec<u8>, std::fs::File)> = None;
    while let Some(entry) = index.next_entry() {
        // A file only meant to be added is in no tree the cached ones name.
        let intended = git2::IndexEntryExtendedFlag::INTENT_TO_ADD.bits();
        if entry.flags & STAGE != 0 || entry.flags_extended & intended != 0 {
            return Ok(false);
        }
        if entry.mode == 0o160000 || unlooked(&entry) {
            continue;
        }
        if !folders_are_real(workdir, &entry.path, &mut folders) {
            return Ok(false);
        }
        let (folder, name) = match entry.path.iter().rposition(|b| *b == b'/') {
            Some(at) => (&entry.path[..at], &entry.path[at + 1..]),
            None => (&entry.path[..0], &entry.path[..]),
        };
        if open
            .as_ref()
            .is_none_or(|(path, _)| path.as_slice() != folder)
        {
            let dir = workdir.join(OsStr::from_bytes(folder));
            let Ok(file) = std::fs::File::open(&dir) else {
                return Ok(false);
            };
            open = Some((folder.to_vec(), file));
        }
        let Some((_, dir)) = &open else {
            return Ok(false);
        };
        let stat = rustix::fs::statat(
            dir,
            OsStr::from_bytes(name),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        );
        match stat {
            Ok(stat) if stamps.stamped_stat(&entry, &stat) => {}
            _ => return Ok(false),
        }
    }
    Ok(index.tree() == Some(head))
}

/// Whether each folder on the way to `path` (relative to `workdir`) is a folder and not a
/// link; the ones found so are added to `seen`, so that each is looked at once.
fn folders_are_real(workdir: &Path, path: &[u8], seen: &mut HashSet<Vec<u8>>) -> bool {
    let ends = path
        .iter()
        .enumerate()
        .filter(|(_, byte)| **byte == b'/')
        .map(|(at, _)| at);
    for end in ends {
        let folder = &path[..end];
        if seen.contains(folder) {
            continue;
        }
        match std::fs::symlink_metadata(workdir.join(OsStr::from_bytes(folder))) {
            Ok(meta) if meta.is_dir() => seen.insert(folder.to_vec()),
            _ => return false,
        };
    }
    true
}

/// Paths that differ from HEAD in the working tree or the index, with their status; untracked
/// files (not ignored) too when asked. Submodules are left as they are.
fn changes(repo: &Repository, untracked: bool) -> Result<Vec<(String, Status)>, git2::Error> {
    let mut options = StatusOptions::new();
    options
        .include_untracked(untracked)
        .recurse_untracked_dirs(untracked)
        .include_ignored(false)
        .exclude_submodules(true);
    // A handle of its own: the index it loads (tens of MiB on a large repository) goes with it,
    // rather than staying with the caller's for the whole run.
    let own = Repository::open(repo.path())?;
    let statuses = own.statuses(Some(&mut options))?;
    let mut changed: Vec<(String, Status)> = statuses
        .iter()
        .filter(|entry| !entry.status().is_ignored() && entry.status() != Status::CURRENT)
        .filter(|entry| untracked || !entry.status().is_wt_new())
        .filter_map(|entry| Some((entry.path().ok()?.to_string(), entry.status())))
        .collect();
    if let Some(workdir) = own.workdir() {
        let known: HashSet<String> = changed.iter().map(|(path, _)| path.clone()).collect();
        let emptied = emptied_behind_smudges(&own.index()?, workdir);
        changed.extend(
            emptied
                .into_iter()
                .filter(|path| !known.contains(path))
                .map(|path| (path, Status::WT_MODIFIED)),
        );
    }
    Ok(changed)
}

/// The files emptied behind a smudged entry, which libgit2's status takes as unchanged: git
/// keeps a racily clean entry's stat data with its size set to 0, and an empty file with the
/// same times then matches it, though the entry records content. (A file that is not empty
/// differs in size, and the status reads it.)
fn emptied_behind_smudges(index: &Index, workdir: &Path) -> Vec<String> {
    index
        .iter()
        .filter(|entry| {
            entry.file_size == 0
                && entry.mode & 0o170000 == 0o100000
                && entry.id != super::recorded::empty_blob()
        })
        .filter(|entry| {
            std::fs::symlink_metadata(workdir.join(OsStr::from_bytes(&entry.path)))
                .is_ok_and(|meta| meta.is_file() && meta.len() == 0)
        })
        .filter_map(|entry| String::from_utf8(entry.path).ok())
        .collect()
}

/// A commit of the working tree as it is: HEAD's tree with every tracked file as it is on
/// disk and every untracked file that is not ignored, on top of HEAD. The tree is built in an
/// index of its own in memory and no ref moves: the user's index, HEAD and files stay as they
/// are.
pub fn snapshot_working_tree(repo: &Repository) -> Result<BaseInfo, SetupError> {
    let workdir = repo.workdir().ok_or(SetupError::Bare)?.to_path_buf();
    let head = repo.head()?.peel_to_commit()?;
    let mut index = Index::new()?;
    index.read_tree(&head.tree()?)?;
    let changed = changes(repo, true)?;
    for (path, _) in &changed {
        match file_entry(repo, &workdir, path)? {
            Some(entry) => index.add(&entry)?,
            None => index.remove_path(Path::new(path))?,
        }
    }
    let tree = repo.find_tree(index.write_tree_to(repo)?)?;
    let signature = repo
        .signature()
        .or_else(|_| git2::Signature::now("agent-git", "agent-git@localhost"))?;
    let summary = format!(
        "agent-git: uncommitted changes on top of {:.7} ({})",
        head.id(),
        crate::text::count(changed.len() as u64, "file")
    );
    let message = format!("{summary}\n\n{SNAPSHOT_TRAILER}: working tree\n");
    let id = repo.commit(None, &signature, &signature, &message, &tree, &[&head])?;
    Ok(BaseInfo { id, summary })
}

/// The index entry of a file as it is on disk (its blob written), or None when it is gone.
fn file_entry(
    repo: &Repository,
    workdir: &Path,
    path: &str,
) -> Result<Option<IndexEntry>, SetupError> {
    let full = workdir.join(path);
    let Ok(meta) = std::fs::symlink_metadata(&full) else {
        return Ok(None);
    };
    let (mode, content) = if meta.file_type().is_symlink() {
        let target =
            std::fs::read_link(&full).map_err(|e| SetupError::Unreadable(path.into(), e))?;
        (0o120000, target.as_os_str().as_encoded_bytes().to_vec())
    } else if meta.is_file() {
        use std::os::unix::fs::PermissionsExt;
        let executable = meta.permissions().mode() & 0o111 != 0;
        let content = std::fs::read(&full).map_err(|e| SetupError::Unreadable(path.into(), e))?;
        (if executable { 0o100755 } else { 0o100644 }, content)
    } else {
        return Ok(None);
    };
    let id: Oid = repo.blob(&content)?;
    Ok(Some(IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: u32::try_from(content.len()).unwrap_or(u32::MAX),
        id,
        flags: u16::try_from(path.len()).unwrap_or(0xfff).min(0xfff),
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::index_file::tests::git;

    /// Puts every file `back` seconds back and has git record that: no entry is racily clean.
    /// (git built without nanoseconds sees no change within a second, and records none.)
    fn settle(root: &Path, names: &[&str], back: u64) {
        let then = std::time::SystemTime::now() - std::time::Duration::from_secs(back);
        for name in names {
            let file = std::fs::File::options()
                .write(true)
                .open(root.join(name))
                .unwrap();
            file.set_modified(then).unwrap();
        }
        git(root, &["update-index", "-q", "--refresh"]);
    }

    /// The quick look says "all committed" only where a status finds nothing: it answers for
    /// each index version git writes and leaves a split index to the status; a staged change
    /// whose file is as the index has it, an index whose cached trees name a tree other than
    /// HEAD's, and a file only meant to be added are each found.
    #[test]
    fn the_quick_look_says_clean_only_where_a_status_finds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        let names = ["a.py", "pkg/b.py", "pkg/c.py"];
        for name in names {
            std::fs::create_dir_all(root.join(name).parent().unwrap()).unwrap();
            std::fs::write(root.join(name), name).unwrap();
        }
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "base"]);
        settle(root, &names, 30);
        let repo = Repository::open(root).unwrap();
        let status = |repo: &Repository| -> Vec<String> {
            changes(repo, false)
                .unwrap()
                .into_iter()
                .map(|(path, _)| path)
                .collect()
        };
        for version in ["2", "3", "4"] {
            git(root, &["update-index", "--index-version", version]);
            assert!(all_committed(&repo).unwrap(), "version {version}");
            assert!(uncommitted(&repo).unwrap().is_empty());
        }
        // Left to the status (which libgit2 cannot take of a split index either).
        git(root, &["update-index", "--split-index"]);
        assert!(!all_committed(&repo).unwrap());
        git(root, &["update-index", "--no-split-index"]);
        assert!(all_committed(&repo).unwrap());

        // A change staged, each file's stat data as the index has it.
        std::fs::write(root.join("pkg/b.py"), "staged\n").unwrap();
        git(root, &["add", "pkg/b.py"]);
        settle(root, &names, 20);
        assert!(!all_committed(&repo).unwrap());
        assert_eq!(uncommitted(&repo).unwrap(), ["pkg/b.py"]);
        // Committed, then HEAD moved back without touching the index: its cached trees are
        // whole, and name the tree of the commit HEAD left.
        git(root, &["commit", "-qm", "next"]);
        git(root, &["reset", "-q", "--soft", "HEAD~1"]);
        assert!(!all_committed(&repo).unwrap());
        assert_eq!(uncommitted(&repo).unwrap(), ["pkg/b.py"]);
        git(root, &["commit", "-qm", "next again"]);
        settle(root, &names, 10);
        assert!(all_committed(&repo).unwrap());

        // A file only meant to be added.
        std::fs::write(root.join("new.py"), "x\n").unwrap();
        git(root, &["add", "-N", "new.py"]);
        assert!(!all_committed(&repo).unwrap());
        assert_eq!(uncommitted(&repo).unwrap(), status(&repo));
        assert!(!status(&repo).is_empty());

        // Split and joined again where the index keeps no checksum (as `feature.manyFiles`
        // has it): git has written this index with no entries, and a cached root still
        // covering them. Whatever git writes, the quick look agrees with the status.
        git(root, &["rm", "-q", "--cached", "new.py"]);
        // The cached trees made whole again.
        git(root, &["write-tree"]);
        settle(root, &names, 5);
        assert!(all_committed(&repo).unwrap());
        git(root, &["config", "feature.manyFiles", "true"]);
        git(root, &["update-index", "--split-index"]);
        git(root, &["update-index", "--no-split-index"]);
        assert_eq!(
            all_committed(&repo).unwrap(),
            status(&repo).is_empty(),
            "{:?}",
            status(&repo)
        );
    }
}
