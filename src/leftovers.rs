//! What tells a leftover from a run in progress, and removes one: each run holds a lock on a
//! lease file in every directory it makes for itself, and the kernel lets go of the lock
//! however the run ends (SIGKILL, a power cut). A lease whose lock can be taken marks a
//! leftover; one still held is a run in progress, and is never touched. The sweeps that find
//! and remove leftovers are all in `workspace::sweep`.

use std::fs::File;
use std::path::Path;

/// The name of the lease file inside a run's own temp dir.
pub const LEASE: &str = "agent-git.lease";

/// The prefixes of the temp dirs runs make: the model's private HOME and TMPDIR, the clean
/// room, and the folder the base's test sandbox starts from.
pub const TEMP_PREFIXES: &[&str] = &["agent-git-sandbox-", "agent-git-clean-", "agent-git-check-"];

/// A held lock: the directory it marks belongs to a live run for as long as this lives.
#[derive(Debug)]
pub struct Lease {
    _file: File,
}

impl Lease {
    /// Makes the lease file `path`, locked: it is locked under another name first and then
    /// renamed, so no sweep ever finds it unlocked and takes its directory for a leftover.
    pub fn take(path: &Path) -> std::io::Result<Lease> {
        let mut fresh = path.as_os_str().to_owned();
        fresh.push(".new");
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&fresh)?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
        std::fs::rename(&fresh, path)?;
        Ok(Lease { _file: file })
    }
}

impl Lease {
    /// Takes the lock of the lasting lease file `path` (made if missing), as a pool slot has;
    /// None while someone else holds it. A lock taken on a file that was removed meanwhile
    /// (gc emptied the slot) is no lock: only the file at `path` counts.
    pub fn hold(path: &Path) -> std::io::Result<Option<Lease>> {
        use std::os::unix::fs::MetadataExt;
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(false).write(true);
        let file = crate::files::open_regular(path, &mut options)?;
        let flock = rustix::fs::FlockOperation::NonBlockingLockExclusive;
        match rustix::fs::flock(&file, flock) {
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => return Ok(None),
            Err(e) => return Err(e.into()),
            Ok(()) => {}
        }
        let held = file.metadata()?;
        let same = std::fs::symlink_metadata(path)
            .is_ok_and(|now| now.ino() == held.ino() && now.dev() == held.dev());
        Ok(same.then_some(Lease { _file: file }))
    }
}

/// Whether the lease at `path` exists and no live run holds it.
pub fn is_abandoned(path: &Path) -> bool {
    // A command may have put a FIFO in place of the lease: it is never waited on.
    let Ok(file) = crate::files::open_regular(path, std::fs::OpenOptions::new().read(true)) else {
        return false;
    };
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
}

/// Removes `path` and everything under it, also folders a command made unreadable (or an
/// overlay's work dir, which the kernel makes so): each pass opens the folders it can reach,
/// one level deeper than the last.
pub fn remove_forcibly(path: &Path) -> std::io::Result<()> {
    let remove = |path: &Path| match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    for _ in 0..64 {
        if remove(path).is_ok() {
            return Ok(());
        }
        let walk = walkdir::WalkDir::new(path).follow_links(false);
        for entry in walk
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_dir())
        {
            open_up(entry.path());
        }
    }
    remove(path)
}

/// Lets the owner into the directory at `path`, never into what a link there leads to: the
/// directory is pinned by a descriptor opened without following one (O_PATH, which needs no
/// permission on it), and its mode changed through that.
fn open_up(path: &Path) {
    use rustix::fs::{Mode, OFlags};
    use std::os::fd::AsRawFd;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if let Ok(dir) = rustix::fs::open(path, flags, Mode::empty()) {
        let pinned = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let _ = rustix::fs::chmod(pinned.as_str(), Mode::from_raw_mode(0o700));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_slot_is_busy_for_everyone_else_until_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool-1.lease");
        let held = Lease::hold(&path).unwrap().expect("a new slot is free");
        assert!(Lease::hold(&path).unwrap().is_none(), "busy while held");
        assert!(!is_abandoned(&path));
        drop(held);
        assert!(Lease::hold(&path).unwrap().is_some(), "free once let go");
        assert!(path.is_file(), "the lock file stays with its slot");
    }
}
