//! The walk of a clean room's tree: its snapshot (what each entry was as the last reset left
//! it), undoing what a test run changed since, and the work queue the walk's threads share.

use super::{entry_path, remove_planted};
use crate::workspace::WorkspaceError;
use std::collections::BTreeSet;
use std::hash::Hasher;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The tree's entries, each under a keyed hash of its relative path (`TreeWalk::key`): on a
/// 100,000-file tree a table of paths costs three times the memory, and a test run cannot
/// choose paths that collide with a key it never sees. Of a file or link a reset asks only
/// whether it changed, so it keeps a keyed hash of its stat data (16 bytes an entry in all,
/// not 48); of a folder it keeps the stat data it gives back to a folder a test run changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Snapshot {
    pub(super) files: std::collections::HashMap<u64, u64>,
    pub(super) dirs: std::collections::HashMap<u64, Stamp>,
}

/// The key of a room's hashes: drawn at random when the room is made, and kept with its
/// state when it outlasts a run (see `rooms`). What is hashed is written out field by field,
/// so a hash means the same in every build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Keys(pub(super) u64, pub(super) u64);

impl Keys {
    pub(super) fn random() -> Keys {
        use std::hash::BuildHasher;
        // RandomState is seeded from the system's randomness: what it makes of two constants
        // is as unpredictable as its seed.
        let seed = std::collections::hash_map::RandomState::new();
        Keys(seed.hash_one(0u8), seed.hash_one(1u8))
    }

    pub(super) fn hasher(&self) -> siphasher::sip::SipHasher13 {
        siphasher::sip::SipHasher13::new_with_keys(self.0, self.1)
    }
}

/// What a snapshot knows of an entry.
#[derive(Debug, Clone, Copy)]
enum Known<'s> {
    /// A file or link: the keyed hash of its stat data.
    File(u64),
    Dir(&'s Stamp),
}

impl Snapshot {
    fn get(&self, key: u64) -> Option<Known<'_>> {
        match self.files.get(&key) {
            Some(hash) => Some(Known::File(*hash)),
            None => self.dirs.get(&key).map(Known::Dir),
        }
    }

    pub(super) fn contains(&self, key: u64) -> bool {
        self.files.contains_key(&key) || self.dirs.contains_key(&key)
    }

    pub(super) fn insert(&mut self, walk: &TreeWalk, key: u64, stamp: Stamp) {
        self.remove(key);
        if stamp.is_dir() {
            self.dirs.insert(key, stamp);
        } else {
            self.files.insert(key, walk.hash_of(&stamp));
        }
    }

    pub(super) fn remove(&mut self, key: u64) {
        self.files.remove(&key);
        self.dirs.remove(&key);
    }

    pub(super) fn len(&self) -> usize {
        self.files.len() + self.dirs.len()
    }
}

/// What a walk of the tree calls for each entry: its relative and full path, its stat data,
/// and the part of the walk's result that the thread which met it keeps.
pub(super) type Visit<'v, T> =
    dyn Fn(&Path, &Path, &std::fs::Metadata, &mut T) -> Result<Walk, WorkspaceError> + Sync + 'v;

/// Whether a walk goes into the directory it just visited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Walk {
    On,
    SkipDir,
}

/// An entry's stat data as a reset compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Stamp {
    pub(super) ino: u64,
    pub(super) ctime: i64,
    pub(super) mtime: i64,
    pub(super) ctime_nsec: u32,
    pub(super) mtime_nsec: u32,
    pub(super) mode: u32,
}

impl Stamp {
    pub(super) fn of(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        // The kernel keeps nanoseconds below 10^9: they fit.
        let nanos = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
        Stamp {
            ino: meta.ino(),
            ctime: meta.ctime(),
            mtime: meta.mtime(),
            ctime_nsec: nanos(meta.ctime_nsec()),
            mtime_nsec: nanos(meta.mtime_nsec()),
            mode: meta.mode(),
        }
    }

    pub(super) fn is_dir(&self) -> bool {
        self.mode & 0o170000 == 0o040000
    }

    /// Each field in turn, as a hash and the state file take them.
    fn write_to(&self, out: &mut impl Hasher) {
        out.write_u64(self.ino);
        out.write_i64(self.ctime);
        out.write_i64(self.mtime);
        out.write_u32(self.ctime_nsec);
        out.write_u32(self.mtime_nsec);
        out.write_u32(self.mode);
    }
}

/// Gives a directory back the mode and modification time it had, without the extended
/// attributes a test run may have set on it.
fn restore_dir(dir: &Path, was: &Stamp) -> Result<(), WorkspaceError> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |e: std::io::Error| WorkspaceError::io("restore", dir, e);
    let xattr = |e: rustix::io::Errno| fail(std::io::Error::from(e));
    let size = match rustix::fs::llistxattr_query(dir) {
        Ok(size) => size,
        Err(rustix::io::Errno::NOTSUP) => 0,
        Err(e) => return Err(xattr(e)),
    };
    let mut buffer = vec![0u8; size];
    let len = if size == 0 {
        0
    } else {
        rustix::fs::llistxattr(dir, &mut buffer[..]).map_err(xattr)?
    };
    for name in buffer[..len].split(|b| *b == 0).filter(|n| !n.is_empty()) {
        rustix::fs::lremovexattr(dir, std::ffi::OsStr::from_bytes(name)).map_err(xattr)?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(was.mode & 0o7777))
        .map_err(fail)?;
    let when = std::time::UNIX_EPOCH
        + std::time::Duration::new(u64::try_from(was.mtime).unwrap_or(0), was.mtime_nsec);
    std::fs::File::open(dir)
        .and_then(|d| d.set_modified(when))
        .map_err(fail)
}

/// Walks the clean room's tree: what undoing a test run and taking a snapshot share, and all a
/// thread of its own needs for them.
pub(super) struct TreeWalk {
    pub(super) tree: PathBuf,
    /// What the setup command made: not walked.
    pub(super) skip: BTreeSet<PathBuf>,
    /// The key of the snapshot's hashes: the clean room's own, drawn at random.
    pub(super) keys: Keys,
    /// Whether its threads yield to the rest of the process (nice 10).
    pub(super) yielding: bool,
}

impl TreeWalk {
    /// The snapshot's key for the entry at `rel`.
    pub(super) fn key(&self, rel: &Path) -> u64 {
        let mut hasher = self.keys.hasher();
        hasher.write(rel.as_os_str().as_bytes());
        hasher.finish()
    }

    /// The snapshot's keyed hash of a file's stat data: a test run that cannot see the key
    /// cannot make a change hash as the entry did.
    fn hash_of(&self, stamp: &Stamp) -> u64 {
        let mut hasher = self.keys.hasher();
        stamp.write_to(&mut hasher);
        hasher.finish()
    }

    /// Whether an entry's stat data now is what the snapshot knows of it.
    fn unchanged(&self, known: Known<'_>, now: &Stamp) -> bool {
        match known {
            Known::File(hash) => !now.is_dir() && self.hash_of(now) == hash,
            Known::Dir(was) => was == now,
        }
    }

    /// Everything in the tree as the last reset left it: inode, change time, mode and
    /// modification time of each entry. Any write, chmod, touch, link or extended attribute a
    /// test run makes moves an entry's change time, which no test run can set back.
    pub(super) fn take_snapshot(&self) -> Result<Snapshot, WorkspaceError> {
        type Part = (Vec<(u64, u64)>, Vec<(u64, Stamp)>);
        let parts = self.walk(&|rel, _, meta, (files, dirs): &mut Part| {
            let stamp = Stamp::of(meta);
            if stamp.is_dir() {
                dirs.push((self.key(rel), stamp));
            } else {
                files.push((self.key(rel), self.hash_of(&stamp)));
            }
            Ok(Walk::On)
        })?;
        let mut snapshot = Snapshot::default();
        snapshot
            .files
            .reserve(parts.iter().map(|(files, _)| files.len()).sum());
        for (files, dirs) in parts {
            snapshot.files.extend(files);
            snapshot.dirs.extend(dirs);
        }
        Ok(snapshot)
    }

    /// Visits every entry of the tree but what the setup command made, a folder before what
    /// it holds, links not followed; `visit` (given the relative and the full path, the
    /// entry's stat data and the part of the result its thread keeps) may skip a directory it
    /// just removed. Folders are read by several threads at once: on a large tree the stat
    /// calls are most of the cost, and they wait on the kernel, not on each other.
    pub(super) fn walk<T: Default + Send>(
        &self,
        visit: &Visit<'_, T>,
    ) -> Result<Vec<T>, WorkspaceError> {
        let meta = std::fs::symlink_metadata(&self.tree)
            .map_err(|e| WorkspaceError::io("inspect", &self.tree, e))?;
        let mut first = T::default();
        if visit(Path::new(""), &self.tree, &meta, &mut first)? != Walk::On {
            return Ok(vec![first]);
        }
        let queue = Queue {
            state: std::sync::Mutex::new(QueueState {
                folders: vec![PathBuf::new()],
                reading: 0,
                failed: None,
            }),
            ready: std::sync::Condvar::new(),
        };
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let parts: Vec<std::thread::Result<T>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..workers)
                .map(|_| {
                    scope.spawn(|| {
                        if self.yielding {
                            yield_cpu();
                        }
                        self.work(&queue, visit)
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join()).collect()
        });
        if let Some(e) = queue.lock().failed.take() {
            return Err(e);
        }
        let mut all = vec![first];
        for part in parts {
            // A thread that stopped midway left folders unread: nothing may be assumed of them.
            all.push(part.map_err(|_| {
                WorkspaceError::Unsafe("the walk of the clean room stopped midway".to_string())
            })?);
        }
        Ok(all)
    }

    /// One thread of a walk: reads folders from the queue until none is left and none is
    /// being read (which could add more), or another thread failed.
    fn work<T: Default>(&self, queue: &Queue, visit: &Visit<'_, T>) -> T {
        let mut part = T::default();
        loop {
            let folder = {
                let mut state = queue.lock();
                loop {
                    if state.failed.is_some() {
                        return part;
                    }
                    if let Some(folder) = state.folders.pop() {
                        state.reading += 1;
                        break folder;
                    }
                    if state.reading == 0 {
                        queue.ready.notify_all();
                        return part;
                    }
                    state = queue
                        .ready
                        .wait(state)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            let found = self.read_folder(&folder, visit, &mut part);
            let mut state = queue.lock();
            state.reading -= 1;
            match found {
                Ok(folders) => state.folders.extend(folders),
                Err(e) => {
                    state.failed.get_or_insert(e);
                }
            }
            queue.ready.notify_all();
        }
    }

    /// Visits the entries of the folder `rel` and returns its folders to walk next. Each
    /// entry's stat data is read relative to its open folder, not by its full path: on a
    /// large tree, looking up every path from the root again costs more than the stat itself.
    fn read_folder<T>(
        &self,
        rel: &Path,
        visit: &Visit<'_, T>,
        part: &mut T,
    ) -> Result<Vec<PathBuf>, WorkspaceError> {
        let dir = self.tree.join(rel);
        let read = |e| WorkspaceError::io("read", &dir, e);
        let mut folders = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(read)? {
            let entry = entry.map_err(read)?;
            let child = rel.join(entry.file_name());
            if self.skip.contains(&child) {
                continue;
            }
            let full = entry.path();
            let meta = entry
                .metadata()
                .map_err(|e| WorkspaceError::io("inspect", &full, e))?;
            if visit(&child, &full, &meta, part)? == Walk::On && meta.is_dir() {
                folders.push(child);
            }
        }
        Ok(folders)
    }

    /// Takes the stat data of `touched` and of every folder above them anew; an entry no longer
    /// there leaves the snapshot.
    pub(super) fn restamp<'p>(
        &self,
        snapshot: &mut Snapshot,
        touched: impl Iterator<Item = &'p PathBuf>,
    ) -> Result<(), WorkspaceError> {
        let mut done: BTreeSet<&Path> = BTreeSet::new();
        for path in touched {
            for rel in path.ancestors() {
                if !done.insert(rel) {
                    break;
                }
                let full = entry_path(&self.tree, rel);
                match std::fs::symlink_metadata(&full) {
                    Ok(meta) => {
                        snapshot.insert(self, self.key(rel), Stamp::of(&meta));
                    }
                    // Gone, or a file now stands where its folder was.
                    Err(e)
                        if e.kind() == std::io::ErrorKind::NotFound
                            || e.raw_os_error() == Some(libc::ENOTDIR) =>
                    {
                        snapshot.remove(self.key(rel));
                    }
                    Err(e) => return Err(WorkspaceError::io("inspect", &full, e)),
                }
            }
        }
        Ok(())
    }

    /// Whether every entry of the tree is as `snapshot` knows it and none is missing or
    /// added, changing nothing: a walk that cannot finish says no.
    pub(super) fn holds(&self, snapshot: &Snapshot) -> bool {
        let parts = self.walk(
            &|rel, _, meta, (differs, seen): &mut (bool, usize)| match snapshot.get(self.key(rel)) {
                Some(known) if self.unchanged(known, &Stamp::of(meta)) => {
                    *seen += 1;
                    Ok(Walk::On)
                }
                _ => {
                    *differs = true;
                    Ok(Walk::SkipDir)
                }
            },
        );
        parts.is_ok_and(|parts| {
            let seen: usize = parts.iter().map(|(_, seen)| seen).sum();
            !parts.iter().any(|(differs, _)| *differs) && seen == snapshot.len()
        })
    }

    /// Whether each of `paths`, and each folder above it, is as `snapshot` knows it (or, where
    /// it knows nothing, not there at all): then writing `paths` follows no link a run left,
    /// and overwrites nothing but what the snapshot describes. Changes nothing.
    pub(super) fn as_known(&self, snapshot: &Snapshot, paths: &[PathBuf]) -> bool {
        let mut done: BTreeSet<&Path> = BTreeSet::new();
        for path in paths {
            for rel in path.ancestors() {
                if !done.insert(rel) {
                    break;
                }
                let known = snapshot.get(self.key(rel));
                let as_known = match std::fs::symlink_metadata(entry_path(&self.tree, rel)) {
                    Ok(meta) => known.is_some_and(|known| self.unchanged(known, &Stamp::of(&meta))),
                    Err(e) => e.kind() == std::io::ErrorKind::NotFound && known.is_none(),
                };
                if !as_known {
                    return false;
                }
            }
        }
        true
    }

    /// Removes whatever a test run added or changed since `snapshot` (a directory whose
    /// content changed gets its mode, times and extended attributes back, and its entries are
    /// judged one by one), and says what it did.
    pub(super) fn undo_changes_since(&self, snapshot: &Snapshot) -> Result<Undone, WorkspaceError> {
        let parts = self.walk(&|rel, full, meta, (undone, seen): &mut (Undone, usize)| {
            let now = Stamp::of(meta);
            match snapshot.get(self.key(rel)) {
                Some(known) if self.unchanged(known, &now) => *seen += 1,
                Some(Known::Dir(was)) if meta.is_dir() => {
                    *seen += 1;
                    // What cannot be put back goes whole; the checkout writes it anew.
                    if restore_dir(full, was).is_err() {
                        remove_planted(full)?;
                        undone.lost_known_entries = true;
                        return Ok(Walk::SkipDir);
                    }
                    undone.restored.push(rel.to_path_buf());
                }
                known => {
                    if matches!(known, Some(Known::Dir(_))) {
                        // What the snapshot knew beneath it is gone too.
                        undone.lost_known_entries = true;
                    }
                    if known.is_some() {
                        *seen += 1;
                        undone.removed.push(rel.to_path_buf());
                    }
                    remove_planted(full)?;
                    return Ok(Walk::SkipDir);
                }
            }
            Ok(Walk::On)
        })?;
        let mut undone = Undone::default();
        let mut seen = 0;
        for (part, part_seen) in parts {
            undone.removed.extend(part.removed);
            undone.restored.extend(part.restored);
            undone.lost_known_entries |= part.lost_known_entries;
            seen += part_seen;
        }
        // An entry of the snapshot the walk did not meet was removed by the test run.
        undone.lost_known_entries |= seen < snapshot.len();
        Ok(undone)
    }
}

/// Lowers the calling thread's priority to nice 10 (a thread's nice value is its own on
/// Linux; raising it needs no privilege).
pub(super) fn yield_cpu() {
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10);
}

/// The folders a walk has still to read, shared by its threads.
struct Queue {
    state: std::sync::Mutex<QueueState>,
    ready: std::sync::Condvar,
}

struct QueueState {
    folders: Vec<PathBuf>,
    /// Threads reading a folder now: each may add more.
    reading: usize,
    failed: Option<WorkspaceError>,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What undoing a test run's changes did.
#[derive(Debug, Default)]
pub(super) struct Undone {
    /// Entries of the tree that were changed and are now removed, to be written anew.
    pub(super) removed: Vec<PathBuf>,
    /// Directories whose mode and times were put back (their own stat data is new).
    pub(super) restored: Vec<PathBuf>,
    /// Entries the snapshot knew that are gone and were not named (a removed directory's).
    pub(super) lost_known_entries: bool,
}
