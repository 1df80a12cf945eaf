//! What an index records of a work tree's files, and whether a file is still what it records:
//! from its stat data alone where that can tell, as git's status does, else from its content.

use git2::{Index, IndexEntry, Oid, Repository};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The index of a work tree, with what tells whether its stat data can be trusted.
pub(crate) struct Recorded<'i> {
    pub index: &'i Index,
    stamps: Stamps,
}

/// What tells whether an index's stat data can be trusted.
pub(crate) struct Stamps {
    /// When the index file was written: an entry stamped as late as that may have changed
    /// within the same tick without its stat data showing it ("racily clean").
    written: Option<(i64, i64)>,
    trust_ctime: bool,
}

impl<'i> Recorded<'i> {
    /// `index`, as `repo` (whose index it is) last wrote it. `trust_ctime` as the repository's
    /// `core.trustctime` says.
    pub fn of(repo: &Repository, index: &'i Index, trust_ctime: bool) -> Recorded<'i> {
        Recorded {
            index,
            stamps: Stamps::of(repo, trust_ctime),
        }
    }

    /// Whether the file or link at `path` (`rel` in the tree, stat data `meta`) holds the
    /// blob `id`: its stat data says so, or else its content (read raw, as a checkout without
    /// filters writes it).
    pub fn holds(&self, rel: &Path, path: &Path, meta: &std::fs::Metadata, id: Oid) -> bool {
        if let Some(entry) = self.index.get_path(rel, 0) {
            if entry.id == id && self.stamps.stamped(&entry, meta) {
                return true;
            }
        }
        let content = if meta.file_type().is_symlink() {
            std::fs::read_link(path).ok().and_then(|to| {
                Oid::hash_object(git2::ObjectType::Blob, to.as_os_str().as_bytes()).ok()
            })
        } else {
            Oid::hash_file(git2::ObjectType::Blob, path).ok()
        };
        content == Some(id)
    }
}

impl Stamps {
    /// For `repo`'s index as it last wrote it. `trust_ctime` as the repository's
    /// `core.trustctime` says.
    pub fn of(repo: &Repository, trust_ctime: bool) -> Stamps {
        let written = std::fs::symlink_metadata(repo.path().join("index"))
            .ok()
            .map(|meta| (meta.mtime(), meta.mtime_nsec()));
        Stamps {
            written,
            trust_ctime,
        }
    }

    /// Whether `entry`'s stat data is `meta`'s, of the same kind and mode, and older than the
    /// index that holds it: then the file is what the entry records.
    pub fn stamped(&self, entry: &IndexEntry, meta: &std::fs::Metadata) -> bool {
        self.matches(
            entry,
            &Seen {
                mode: meta.mode(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                ctime: (meta.ctime(), meta.ctime_nsec()),
                size: meta.size(),
                ino: meta.ino(),
                uid: meta.uid(),
                gid: meta.gid(),
            },
        )
    }

    /// `stamped`, for stat data read relative to a folder.
    // The fields' types are narrower or unsigned on some platforms.
    #[allow(clippy::useless_conversion)]
    pub fn stamped_stat(&self, entry: &IndexEntry, stat: &rustix::fs::Stat) -> bool {
        let nanos = |n| i64::try_from(n).unwrap_or(i64::MAX);
        self.matches(
            entry,
            &Seen {
                mode: stat.st_mode,
                mtime: (i64::from(stat.st_mtime), nanos(stat.st_mtime_nsec)),
                ctime: (i64::from(stat.st_ctime), nanos(stat.st_ctime_nsec)),
                size: u64::try_from(stat.st_size).unwrap_or(u64::MAX),
                ino: u64::from(stat.st_ino),
                uid: stat.st_uid,
                gid: stat.st_gid,
            },
        )
    }

    fn matches(&self, entry: &IndexEntry, seen: &Seen) -> bool {
        // The index keeps 32 bits of what the kernel gives in 64.
        let low = |n: u64| u32::try_from(n & 0xffff_ffff).unwrap_or(0);
        let seconds = |s: i64| i64::from(i32::try_from(s).unwrap_or(i32::MIN));
        let pair = |t: git2::IndexTime| (i64::from(t.seconds()), i64::from(t.nanoseconds()));
        let mtime = pair(entry.mtime);
        // The kind from the type bits of the mode, as the index writes it.
        let kind = match seen.mode & 0o170000 {
            0o120000 => 0o120000,
            0o100000 if seen.mode & 0o100 != 0 => 0o100755,
            0o100000 => 0o100644,
            _ => 0,
        };
        // An entry git found racily clean when it wrote the index keeps its stat data with
        // the size set to 0 ("smudged"): only a file that is really empty may match it.
        let smudged = entry.file_size == 0 && entry.id != empty_blob();
        self.written.is_some_and(|written| mtime < written)
            && !smudged
            && mtime != (0, 0)
            && entry.mode == kind
            && mtime == (seconds(seen.mtime.0), seen.mtime.1)
            && (!self.trust_ctime || pair(entry.ctime) == (seconds(seen.ctime.0), seen.ctime.1))
            && entry.file_size == low(seen.size)
            && entry.ino == low(seen.ino)
            && entry.uid == seen.uid
            && entry.gid == seen.gid
    }
}

/// A file's stat data as an index entry records it.
struct Seen {
    /// The whole `st_mode`: type bits and permissions.
    mode: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
    size: u64,
    ino: u64,
    uid: u32,
    gid: u32,
}

/// The id of the empty blob (e69de29b…), the only content a size of 0 may stand for.
pub(crate) fn empty_blob() -> Oid {
    const EMPTY: [u8; 20] = [
        0xe6, 0x9d, 0xe2, 0x9b, 0xb2, 0xd1, 0xd6, 0x43, 0x4b, 0x8b, 0x29, 0xae, 0x77, 0x5a, 0xd8,
        0xc2, 0xe4, 0x8c, 0x53, 0x91,
    ];
    Oid::from_bytes(&EMPTY).unwrap_or(Oid::ZERO_SHA1)
}
