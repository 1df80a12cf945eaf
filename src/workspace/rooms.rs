//! Clean rooms that outlast a run. A room for a repository keeps its files between runs, so
//! the next run resets it by what differs (a few files) instead of writing the whole tree
//! again and removing it at the end; on a disk that discards every freed block, removing
//! 10,000 files costs more than the run's tests.
//!
//! A lasting room is a folder of the temp dir named after this user and the repository's
//! object database, in one of a few slots: `agent-git-room-UID-KEY-K`. Only a folder this
//! user owns, open to nobody else, is used; a live run holds its lease (see `leftovers`), so
//! two runs never share one. What the room holds is trusted only from the state its last
//! owner wrote when it let go, and that state is removed as soon as it is read: a run that
//! dies midway leaves none, and the next run starts that room from nothing.

use crate::leftovers::Lease;
use std::hash::Hasher;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The start of a lasting room's name; a sweep of dead runs' temp dirs passes these over.
pub const PREFIX: &str = "agent-git-room-";

/// How many rooms a repository may have at once (one for each run going at the same time).
const SLOTS: usize = 8;

/// A lasting room's folder, held for this process.
pub struct Taken {
    pub root: PathBuf,
    pub lease: Lease,
    /// The folder was made just now: nothing is in it.
    pub made: bool,
}

/// The key of a repository's rooms: a hash of its object database's path, the same in every
/// process and every build.
fn key_of(objects: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut hasher = siphasher::sip::SipHasher13::new_with_keys(0, 0);
    hasher.write(objects.as_os_str().as_bytes());
    format!("{:016x}", hasher.finish())
}

/// The name of slot `k` of the rooms of `objects` (a canonical path).
fn name_of(objects: &Path, k: usize) -> String {
    let uid = rustix::process::geteuid().as_raw();
    format!("{PREFIX}{uid}-{}-{k}", key_of(objects))
}

/// Whether `path` is a folder (not a link) this user owns that nobody else may enter.
fn is_private_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| {
        m.file_type().is_dir()
            && m.uid() == rustix::process::geteuid().as_raw()
            && m.mode() & 0o077 == 0
    })
}

/// Takes a free lasting room of the repository whose (canonical) object database is
/// `objects`, in `temp`; None when every slot is busy or not this user's to use.
pub fn take(temp: &Path, objects: &Path) -> Option<Taken> {
    (1..=SLOTS).find_map(|k| {
        let root = temp.join(name_of(objects, k));
        let made = std::fs::DirBuilder::new().mode(0o700).create(&root).is_ok();
        // Made by another user or open to others: not a place for this repository's files.
        if !is_private_dir(&root) {
            return None;
        }
        let lease = Lease::hold(&root.join(crate::leftovers::LEASE)).ok()??;
        Some(Taken { root, lease, made })
    })
}

/// The lasting rooms of `objects` in `temp` that no run holds, removed; their paths.
pub fn empty(temp: &Path, objects: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for k in 1..=SLOTS {
        let root = temp.join(name_of(objects, k));
        if !is_private_dir(&root) {
            continue;
        }
        // Held while it goes, so that no run takes it meanwhile.
        let Ok(Some(_lease)) = Lease::hold(&root.join(crate::leftovers::LEASE)) else {
            continue;
        };
        if crate::leftovers::remove_forcibly(&root).is_ok() {
            removed.push(root);
        }
    }
    removed
}

/// Removes this user's lasting rooms in `temp` whose repository is gone (their object
/// database no longer exists) and that no run holds.
pub fn sweep_orphans(temp: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let root = entry.path();
        let named = entry.file_name().to_string_lossy().starts_with(PREFIX);
        if !named || !is_private_dir(&root) {
            continue;
        }
        let alternates = root.join("git/objects/info/alternates");
        let objects = std::fs::read_to_string(&alternates).unwrap_or_default();
        let objects = objects.trim();
        if objects.is_empty() || Path::new(objects).is_dir() {
            continue;
        }
        let Ok(Some(_lease)) = Lease::hold(&root.join(crate::leftovers::LEASE)) else {
            continue;
        };
        if crate::leftovers::remove_forcibly(&root).is_ok() {
            removed.push(root);
        }
    }
    removed.sort();
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_taken_once_and_made_once() {
        let temp = tempfile::tempdir().unwrap();
        let objects = Path::new("/some/repo/.git/objects");
        let first = take(temp.path(), objects).expect("a free slot");
        assert!(first.made);
        let second = take(temp.path(), objects).expect("another slot");
        assert_ne!(first.root, second.root, "a held room is nobody else's");
        let root = first.root.clone();
        drop(first);
        let again = take(temp.path(), objects).expect("the first slot, let go");
        assert_eq!(again.root, root);
        assert!(!again.made, "the folder stayed");
        let other = take(temp.path(), Path::new("/other/.git/objects")).unwrap();
        assert_ne!(other.root, root, "each repository has rooms of its own");
    }

    #[test]
    fn a_folder_open_to_others_or_a_link_is_never_taken() {
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::tempdir().unwrap();
        let objects = Path::new("/r/.git/objects");
        let one = temp.path().join(name_of(objects, 1));
        std::fs::create_dir(&one).unwrap();
        std::fs::set_permissions(&one, std::fs::Permissions::from_mode(0o755)).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), temp.path().join(name_of(objects, 2)))
            .unwrap();
        let taken = take(temp.path(), objects).expect("a slot");
        assert_eq!(taken.root, temp.path().join(name_of(objects, 3)));
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn rooms_of_a_repository_that_is_gone_are_swept_and_held_ones_stay() {
        let temp = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        let objects = repo.path().join("objects");
        std::fs::create_dir(&objects).unwrap();
        let gone = Path::new("/nowhere/.git/objects");
        let with_alternates = |taken: &Taken, to: &Path| {
            let info = taken.root.join("git/objects/info");
            std::fs::create_dir_all(&info).unwrap();
            std::fs::write(info.join("alternates"), format!("{}\n", to.display())).unwrap();
        };
        let live = take(temp.path(), &objects).unwrap();
        with_alternates(&live, &objects);
        let orphan = take(temp.path(), gone).unwrap();
        with_alternates(&orphan, gone);
        let held_orphan = take(temp.path(), gone).unwrap();
        with_alternates(&held_orphan, gone);
        let (live_root, orphan_root) = (live.root.clone(), orphan.root.clone());
        drop((live, orphan));
        assert_eq!(sweep_orphans(temp.path()), vec![orphan_root]);
        assert!(live_root.is_dir() && held_orphan.root.is_dir());
        assert_eq!(empty(temp.path(), &objects), vec![live_root]);
    }
}
