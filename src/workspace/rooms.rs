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
pub(super) const SLOTS: usize = 8;

/// A lasting room's folder, held for this process.
pub struct Taken {
    /// The room's folder.
    pub root: PathBuf,
    /// The lock of the room's slot: the room is this process's for as long as it is held.
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
pub(super) fn name_of(objects: &Path, k: usize) -> String {
    let uid = rustix::process::geteuid().as_raw();
    format!("{PREFIX}{uid}-{}-{k}", key_of(objects))
}

/// Whether `path` is a folder (not a link) this user owns that nobody else may enter.
pub(super) fn is_private_dir(path: &Path) -> bool {
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

/// What the repository knows of one of its lasting rooms, kept in its own git dir
/// (`records_of`), where neither the model's commands nor the tests can write: the room's
/// folder (device, inode, change time, as its last run left it) and a digest of the state
/// that run wrote. A room anyone else made or changed, or a state anyone else wrote, has
/// none that matches: nothing in it is trusted, and it is made anew.
#[derive(Debug, PartialEq, Eq)]
pub struct Record(String);

/// Where the records of the rooms of the repository whose object database is `objects` are.
pub fn records_of(objects: &Path) -> PathBuf {
    objects
        .parent()
        .unwrap_or(objects)
        .join("agent-git")
        .join("rooms")
}

impl Record {
    /// The record of the room `root` holding `state`, as they are now.
    pub fn of(root: &Path, state: &[u8]) -> std::io::Result<Record> {
        let meta = std::fs::symlink_metadata(root)?;
        let digest =
            git2::Oid::hash_object(git2::ObjectType::Blob, state).map_err(std::io::Error::other)?;
        Ok(Record(format!(
            "{} {} {} {} {digest}\n",
            meta.dev(),
            meta.ino(),
            meta.ctime(),
            meta.ctime_nsec()
        )))
    }

    fn path(records: &Path, root: &Path) -> PathBuf {
        records.join(root.file_name().unwrap_or_default())
    }

    /// Keeps this record of the room `root`.
    pub fn write(&self, records: &Path, root: &Path) -> Result<(), super::WorkspaceError> {
        let io = |e| super::WorkspaceError::io("write", records, e);
        std::fs::create_dir_all(records).map_err(io)?;
        let path = Self::path(records, root);
        let fresh = path.with_extension("new");
        super::remove_entry(&fresh)?;
        super::cleanroom::write_new(&fresh, self.0.as_bytes())?;
        std::fs::rename(&fresh, &path).map_err(io)
    }

    /// The record kept of the room `root`, removed as it is read: it is true only until the
    /// room is used.
    pub fn take(records: &Path, root: &Path) -> Option<Record> {
        let path = Self::path(records, root);
        let text = std::fs::read_to_string(&path).ok();
        let _ = super::remove_entry(&path);
        text.map(Record)
    }
}

/// Removes the room `root` unless a run holds it: under its lease, it is first moved aside
/// (a run that comes meanwhile makes a new one in its place, never takes a lease in a folder
/// being emptied), then removed.
pub(super) fn remove_held(temp: &Path, root: &Path) -> bool {
    let Ok(Some(_lease)) = Lease::hold(&root.join(crate::leftovers::LEASE)) else {
        return false;
    };
    let aside = temp.join(format!(
        "agent-git-clean-gone-{}-{}",
        std::process::id(),
        root.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::rename(root, &aside).is_ok() && crate::leftovers::remove_forcibly(&aside).is_ok()
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
}
