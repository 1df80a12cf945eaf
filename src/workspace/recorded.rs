//! What an index records of a work tree's files, and whether a file is still what it records:
//! from its stat data alone where that can tell, as git's status does, else from its content.

use git2::{Index, IndexEntry, Oid, Repository};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The index of a work tree, with what tells whether its stat data can be trusted.
pub(crate) struct Recorded<'i> {
    pub index: &'i Index,
    /// When the index file was written: an entry stamped as late as that may have changed
    /// within the same tick without its stat data showing it ("racily clean").
    written: Option<(i64, i64)>,
    trust_ctime: bool,
}

impl<'i> Recorded<'i> {
    /// `index`, as `repo` (whose index it is) last wrote it. `trust_ctime` as the repository's
    /// `core.trustctime` says.
    pub fn of(repo: &Repository, index: &'i Index, trust_ctime: bool) -> Recorded<'i> {
        let written = std::fs::symlink_metadata(repo.path().join("index"))
            .ok()
            .map(|meta| (meta.mtime(), meta.mtime_nsec()));
        Recorded {
            index,
            written,
            trust_ctime,
        }
    }

    /// Whether the file or link at `path` (`rel` in the tree, stat data `meta`) holds the
    /// blob `id`: its stat data says so, or else its content (read raw, as a checkout without
    /// filters writes it).
    pub fn holds(&self, rel: &Path, path: &Path, meta: &std::fs::Metadata, id: Oid) -> bool {
        if let Some(entry) = self.index.get_path(rel, 0) {
            if entry.id == id && self.stamped(&entry, meta) {
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

    /// Whether `entry`'s stat data is `meta`'s, of the same kind and mode, and older than the
    /// index that holds it: then the file is what the entry records.
    pub fn stamped(&self, entry: &IndexEntry, meta: &std::fs::Metadata) -> bool {
        // The index keeps 32 bits of what the kernel gives in 64.
        let low = |n: u64| u32::try_from(n & 0xffff_ffff).unwrap_or(0);
        let seconds = |s: i64| i64::from(i32::try_from(s).unwrap_or(i32::MIN));
        let pair = |t: git2::IndexTime| (i64::from(t.seconds()), i64::from(t.nanoseconds()));
        let mtime = pair(entry.mtime);
        let kind = if meta.file_type().is_symlink() {
            0o120000
        } else if meta.is_file() && meta.mode() & 0o100 != 0 {
            0o100755
        } else if meta.is_file() {
            0o100644
        } else {
            0
        };
        // An entry git found racily clean when it wrote the index keeps its stat data with
        // the size set to 0 ("smudged"): only a file that is really empty may match it.
        let smudged = entry.file_size == 0 && entry.id != empty_blob();
        self.written.is_some_and(|written| mtime < written)
            && !smudged
            && mtime != (0, 0)
            && entry.mode == kind
            && mtime == (seconds(meta.mtime()), meta.mtime_nsec())
            && (!self.trust_ctime
                || pair(entry.ctime) == (seconds(meta.ctime()), meta.ctime_nsec()))
            && entry.file_size == low(meta.size())
            && entry.ino == low(meta.ino())
            && entry.uid == meta.uid()
            && entry.gid == meta.gid()
    }
}

/// The id of the empty blob (e69de29b…), the only content a size of 0 may stand for.
pub(crate) fn empty_blob() -> Oid {
    const EMPTY: [u8; 20] = [
        0xe6, 0x9d, 0xe2, 0x9b, 0xb2, 0xd1, 0xd6, 0x43, 0x4b, 0x8b, 0x29, 0xae, 0x77, 0x5a, 0xd8,
        0xc2, 0xe4, 0x8c, 0x53, 0x91,
    ];
    Oid::from_bytes(&EMPTY).unwrap_or(Oid::ZERO_SHA1)
}
