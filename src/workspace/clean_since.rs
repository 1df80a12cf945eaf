//! A pooled tree's record of the moment it was last known to be exactly a commit's tree, so
//! that the next take need not look again at what nothing touched since.
//!
//! Every write, truncation, chmod, link, unlink or rename moves the change time of the inode it
//! touches (and of the folder whose entries it changes) to the clock's now, and no process can
//! set a change time back. The record is written after a take made the tree exact and before
//! the run sees it; the line is the change time of a file made for the purpose just before,
//! kept in the record's text (the record's own change time moves with a chmod or a touch, which
//! a sandbox of Landlock alone lets a run do to a file beside its tree). An entry whose change
//! time is older, in folders whose change times are older too, is the entry that was there,
//! holding what it held. The record lives beside the slot, outside the work tree, where nothing
//! a run starts in the sandbox may write (with `--sandbox off`, as with the index whose stat
//! data the sweep trusts otherwise, a run could forge it); each take removes it first, so only
//! a take that ends well leaves one.
//!
//! It is trusted only where the filesystem keeps change times as Linux's local filesystems do
//! (moving them on a rename too), on the device of the slot (not on what is mounted inside),
//! within the boot that wrote it and while the clock has not gone back past it, and not at all
//! where `core.trustctime` says not to.

use git2::Oid;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What a record says: when the tree was last exact, and which tree it held then.
#[derive(Debug, Clone, Copy)]
pub(super) struct CleanSince {
    /// The line (seconds, nanoseconds): whatever changed after the record was written has a
    /// change time as late or later.
    before: (i64, i64),
    /// The device of the slot: an entry on another (mounted inside) is not judged by it.
    device: u64,
    /// The tree the work tree held exactly when the record was written.
    pub tree: Oid,
}

impl CleanSince {
    /// Whether the entry whose stat data is `meta` was last changed before the record.
    pub fn older(&self, meta: &std::fs::Metadata) -> bool {
        meta.dev() == self.device && (meta.ctime(), meta.ctime_nsec()) < self.before
    }

    /// `older`, for stat data read relative to a folder.
    // The fields' types are narrower or unsigned on some platforms.
    #[allow(clippy::useless_conversion)]
    pub fn older_stat(&self, stat: &rustix::fs::Stat) -> bool {
        let nanos = i64::try_from(stat.st_ctime_nsec).unwrap_or(i64::MAX);
        u64::from(stat.st_dev) == self.device && (i64::from(stat.st_ctime), nanos) < self.before
    }
}

/// Filesystems (`statfs` magic numbers) whose change times the kernel alone sets, on every
/// change of an inode including a rename: ext2/3/4, XFS, Btrfs, tmpfs, overlayfs, F2FS, ZFS.
const KEEP_CHANGE_TIMES: [u64; 7] = [
    0xef53,
    0x5846_5342,
    0x9123_683e,
    0x0102_1994,
    0x794c_7630,
    0xf2f5_2010,
    0x2fc1_2fc1,
];

/// Takes the record at `record` of the work tree at `root`, removing it whatever it says:
/// `None` when there is none, it cannot be read or removed, it is of another folder than
/// `root` (one put in its place) or of another boot, the clock is now before its line, or
/// `root`'s filesystem does not keep change times as the record needs.
pub(super) fn take(record: &Path, root: &Path) -> Option<CleanSince> {
    let meta = std::fs::symlink_metadata(record).ok()?;
    let text = (meta.is_file() && meta.nlink() == 1)
        .then(|| std::fs::read_to_string(record).ok())
        .flatten();
    // One that stays would be read again by a take that did not write it.
    crate::leftovers::remove_forcibly(record).ok()?;
    let text = text?;
    let mut fields = text.split_whitespace();
    let mut next = || fields.next();
    let tree = Oid::from_str(next()?).ok()?;
    let (dev, ino): (u64, u64) = (next()?.parse().ok()?, next()?.parse().ok()?);
    let before: (i64, i64) = (next()?.parse().ok()?, next()?.parse().ok()?);
    let boot = next()?.to_string();
    if next().is_some() || boot != boot_id()? {
        return None;
    }
    let top = std::fs::symlink_metadata(root).ok()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let now = (
        i64::try_from(now.as_secs()).ok()?,
        i64::from(now.subsec_nanos()),
    );
    let trusted = top.is_dir()
        && (top.dev(), top.ino()) == (dev, ino)
        && meta.dev() == dev
        && before <= now
        && keeps_change_times(root);
    trusted.then_some(CleanSince {
        before,
        device: dev,
        tree,
    })
}

/// Writes the record that the work tree at `root` holds exactly `tree` now. A record that
/// cannot be written is none: the next take then looks at everything.
pub(super) fn write(record: &Path, root: &Path, tree: Oid) {
    forget(record);
    let (Ok(top), Some(boot)) = (std::fs::symlink_metadata(root), boot_id()) else {
        return;
    };
    // The line: the change time of a file made now, on the record's filesystem.
    let mark = record.with_extension("mark");
    forget(&mark);
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&mark)
        .and_then(|file| file.metadata());
    forget(&mark);
    let Ok(made) = made else {
        return;
    };
    let (line, nanos) = (made.ctime(), made.ctime_nsec());
    let text = format!("{tree} {} {} {line} {nanos} {boot}\n", top.dev(), top.ino());
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(record)
        .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()));
    if written.is_err() {
        forget(record);
    }
}

/// Removes the record at `record`, if there is one: the tree is no longer known to be exact.
pub(super) fn forget(record: &Path) {
    let _ = crate::leftovers::remove_forcibly(record);
}

/// This boot's id: change times of another boot may come from a clock set otherwise.
fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains(char::is_whitespace)).then(|| id.to_string())
}

fn keeps_change_times(root: &Path) -> bool {
    rustix::fs::statfs(root).is_ok_and(|fs| {
        // The magic number's width differs by platform; its value fits 32 bits.
        #[allow(clippy::unnecessary_cast)]
        let magic = fs.f_type as u64 & 0xffff_ffff;
        KEEP_CHANGE_TIMES.contains(&magic)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temp dir with a slot folder in it, and where that folder's record goes.
    fn recorded() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("slot");
        std::fs::create_dir(&root).unwrap();
        let record = dir.path().join("slot.clean");
        (dir, root, record)
    }

    fn tree() -> Oid {
        Oid::from_str("4b825dc642cb6eb9a060e54bf8d69288fbee4904").unwrap()
    }

    #[test]
    fn a_record_is_taken_once_and_its_line_is_when_it_was_written() {
        let (dir, root, record) = recorded();
        if !keeps_change_times(dir.path()) || boot_id().is_none() {
            eprintln!("skipped: this filesystem's change times are not trusted here");
            return;
        }
        let before = std::fs::File::create(dir.path().join("before")).unwrap();
        let before = before.metadata().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&record, &root, tree());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let after = std::fs::File::create(dir.path().join("after")).unwrap();
        let after = after.metadata().unwrap();
        // A touch of the record after the change does not move the line.
        let file = std::fs::File::options().write(true).open(&record).unwrap();
        file.set_modified(std::time::SystemTime::now()).unwrap();
        drop(file);

        let since = take(&record, &root).expect("the record");
        assert_eq!(since.tree, tree());
        assert!(since.older(&before) && !since.older(&after));
        assert!(!record.exists(), "a record is removed as it is taken");
        assert!(take(&record, &root).is_none(), "and taken once");
    }

    #[test]
    fn a_record_of_another_folder_boot_or_a_later_line_is_not_believed() {
        let (dir, root, record) = recorded();
        let top = std::fs::symlink_metadata(&root).unwrap();
        let boot = boot_id().unwrap_or_default();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let (dev, ino) = (top.dev(), top.ino());
        for text in [
            format!("{} {dev} {} {now} 0 {boot}\n", tree(), ino + 1),
            format!("{} {dev} {ino} {now} 0 another-boot\n", tree()),
            format!("{} {dev} {ino} {} 0 {boot}\n", tree(), now + 3600),
            format!("{} {dev} {ino} {now} 0 {boot} more\n", tree()),
            format!("{} {dev} {ino} {now}\n", tree()),
            "not a record\n".to_string(),
        ] {
            std::fs::write(&record, &text).unwrap();
            assert!(take(&record, &root).is_none(), "believed: {text}");
            assert!(!record.exists(), "left: {text}");
        }
        // Written by hand, as the take writes it, it is believed (where it may be).
        std::fs::write(&record, format!("{} {dev} {ino} {now} 0 {boot}\n", tree())).unwrap();
        let believed = take(&record, &root).is_some();
        assert_eq!(believed, keeps_change_times(dir.path()) && !boot.is_empty());
    }
}
