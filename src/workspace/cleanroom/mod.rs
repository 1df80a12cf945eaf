//! The clean room: where every test run whose result the harness states takes place. A
//! directory outside the user's checkout that holds exactly one tree of tracked files, kept by
//! a private git directory beside it (objects borrowed from the user's repository through
//! alternates), so that a reset costs what `git status` costs, not a new checkout. Nothing the
//! model's commands wrote can be in it: they run in the work tree, and the clean room is reset
//! to a committed tree before each run.

use super::{remove_entry, WorkspaceError, AGENT_EMAIL, AGENT_NAME as AGENT};
use git2::build::CheckoutBuilder;
use git2::{Oid, Repository};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod cargo_target;
mod kept_state;
mod setup_cache;
mod walk;

use kept_state::KeptState;
use walk::{Keys, Snapshot, TreeWalk, Undone};

/// Where a room lives, and what becomes of it at the end.
enum Place {
    /// A temp dir of its own, removed with the room.
    Temp(tempfile::TempDir),
    /// A lasting room (`rooms`) in the folder `root`: it stays, with the state that lets the
    /// next run trust it, and its record in `records`.
    Lasting { root: PathBuf, records: PathBuf },
}

/// One clean room: a tree of tracked files outside the user's checkout, kept by a private git dir
/// beside it and reset to a committed tree before each test run; in a temp dir of its own (removed
/// with it) or a lasting room kept for the next run.
pub struct CleanRoom {
    place: Place,
    /// Marks the room as this run's while it lives (see `leftovers`).
    _lease: crate::leftovers::Lease,
    tree: PathBuf,
    repo: Repository,
    /// The tree checked out by the last reset.
    current: Option<Oid>,
    /// What the setup command made (untracked or ignored entries), kept across resets.
    setup_outputs: BTreeSet<PathBuf>,
    /// The setup inputs and the stat data of its outputs when it last ran.
    setup_state: Option<(u64, u64)>,
    /// The tree the setup command last ran on.
    setup_from: Option<Oid>,
    runs: u32,
    /// Whether a test run has built into the shared build cache since it was last fresh.
    cache_written: bool,
    /// The tree's entries as the last reset left them.
    snapshot: Option<Snapshot>,
    /// The last test run's leftovers being undone in the background, from the snapshot.
    undoing: Option<std::thread::JoinHandle<Result<(Snapshot, Undone), WorkspaceError>>>,
    /// What that undo did, for the next reset.
    undone: Option<Undone>,
    /// The key of the snapshot's hashes.
    keys: Keys,
    /// Whether the setup command ran (or what it made was removed) since the last reset.
    setup_since_reset: bool,
    /// The check of a reopened room against the snapshot its last run kept, going on in a
    /// thread of its own (`reset_ahead`): the snapshot and whether the tree held it, and how
    /// many test runs had started when it did.
    checking: Option<(std::thread::JoinHandle<(Snapshot, bool)>, u32)>,
}

/// The protected entries of each folder's tree already looked at: (folder, tree) to them.
#[derive(Debug, Default)]
pub struct ProtectedMemo(std::collections::HashMap<(PathBuf, Oid), std::sync::Arc<Vec<PathBuf>>>);

impl ProtectedMemo {
    /// Each folder as its path, its tree's id and the count of its protected entries (in
    /// decimal), then those entries, each a part (`derived::push_part`).
    fn encode(&self) -> Vec<u8> {
        use super::derived::push_part;
        use std::os::unix::ffi::OsStrExt;
        let mut out = Vec::new();
        for ((folder, tree), found) in &self.0 {
            push_part(&mut out, &[folder.as_os_str().as_bytes()]);
            push_part(&mut out, &[tree.to_string().as_bytes()]);
            push_part(&mut out, &[found.len().to_string().as_bytes()]);
            for rel in found.iter() {
                push_part(&mut out, &[rel.as_os_str().as_bytes()]);
            }
        }
        out
    }

    /// The memo `encode` wrote; None for anything else.
    fn decode(bytes: &[u8]) -> Option<ProtectedMemo> {
        use std::os::unix::ffi::OsStrExt;
        let path = |part: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(part));
        let mut memo = ProtectedMemo::default();
        let mut parts = super::derived::split_parts(bytes)?.into_iter();
        while let Some(folder) = parts.next() {
            let tree = Oid::from_str(std::str::from_utf8(parts.next()?).ok()?).ok()?;
            let count: usize = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
            let found = (0..count)
                .map(|_| parts.next().map(path))
                .collect::<Option<Vec<_>>>()?;
            memo.0
                .insert((path(folder), tree), std::sync::Arc::new(found));
        }
        Some(memo)
    }
}

/// The kind of what a room keeps of the protected entries of a tree (`derived`).
const PROTECTED: &str = "protected";

/// The most folders the memo of protected entries holds.
const MAX_MEMO: usize = 200_000;

/// The hidden command that checks a whole tree out into a clean room: `agent-git
/// check-out-room GIT_DIR TREE_DIR TREE_ID`.
pub const CHECK_OUT_ROOM: &str = "check-out-room";

/// Writes every file of `tree` that differs from what the room `repo` holds (its HEAD is the
/// baseline), without an index, and removes nothing untracked: the room's own sweep does.
fn check_out(repo: &Repository, tree: Oid) -> Result<(), WorkspaceError> {
    let target = repo.find_tree(tree)?;
    let mut checkout = CheckoutBuilder::new();
    checkout
        .force()
        .update_index(false)
        .remove_untracked(false)
        .remove_ignored(false);
    repo.checkout_tree(target.as_object(), Some(&mut checkout))?;
    Ok(())
}

/// `check-out-room` in the process that runs it: the clean room's repository at `git`, its
/// tree at `work`.
pub fn check_out_room(git: &Path, work: &Path, tree: Oid) -> Result<(), WorkspaceError> {
    let repo = Repository::open_bare(git)?;
    repo.set_workdir(work, false)?;
    check_out(&repo, tree)
}

/// Where the entry `rel` of the tree at `tree` is; the tree itself for the empty path, not
/// `join("")`, whose trailing slash would follow a link standing in the tree's place.
fn entry_path(tree: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        tree.to_path_buf()
    } else {
        tree.join(rel)
    }
}

/// Removes what a test run left at `path`, also a folder it left shut to stop just that.
fn remove_planted(path: &Path) -> Result<(), WorkspaceError> {
    crate::leftovers::remove_forcibly(path).map_err(|e| WorkspaceError::io("remove", path, e))
}

/// The private directories of one test run: a fresh HOME, TMPDIR and a place for results.
pub struct RunDirs {
    /// The folder holding the other three: removed, with whatever the tests left, by `remove`.
    pub root: PathBuf,
    /// The test run's HOME, empty at the start.
    pub home: PathBuf,
    /// The test run's TMPDIR, empty at the start.
    pub tmp: PathBuf,
    /// Where the test runner writes the files the harness reads the results from (`junit.xml`,
    /// `results.json`).
    pub results: PathBuf,
}

impl RunDirs {
    /// Removes the run's directories and whatever the tests left in them, also folders they
    /// made unreadable to stop just that.
    pub fn remove(&self) -> Result<(), WorkspaceError> {
        crate::leftovers::remove_forcibly(&self.root)
            .map_err(|e| WorkspaceError::io("remove", &self.root, e))
    }
}

/// The names of the overlays of test runs, beside the tree: one for each run going at once.
pub const OVERLAYS: &[&str] = &["overlay", "overlay-plain"];

/// The file of a lasting room that holds what its last run knew of it (`KeptState`).
const STATE: &str = "state";

/// Fails where the room's folder `root` lies inside the user's checkout.
fn outside(root: &Path, user_workdir: Option<&Path>) -> Result<(), WorkspaceError> {
    if let Some(user) = user_workdir.and_then(|w| w.canonicalize().ok()) {
        if root.starts_with(&user) {
            return Err(WorkspaceError::Unsafe(format!(
                "the temp dir {} is inside the repository; set TMPDIR to a directory \
                 outside it",
                root.display()
            )));
        }
    }
    Ok(())
}

/// Writes `bytes` to a new file at `path`, whatever stood there removed first (a link is
/// never followed).
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), WorkspaceError> {
    use std::io::Write;
    remove_entry(path)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(|e| WorkspaceError::io("write", path, e))
}

/// Removes everything in the folder `root` but its lease.
fn clear_but_lease(root: &Path) -> Result<(), WorkspaceError> {
    let read = |e| WorkspaceError::io("read", root, e);
    for entry in std::fs::read_dir(root).map_err(read)? {
        let entry = entry.map_err(read)?;
        if entry.file_name() != crate::leftovers::LEASE {
            remove_planted(&entry.path())?;
        }
    }
    Ok(())
}

/// A lasting room as it was found, before it is this run's.
struct Reopened {
    tree: PathBuf,
    repo: Repository,
    kept: Option<KeptState>,
}

impl Reopened {
    fn into_room(self, taken: super::rooms::Taken, records: PathBuf) -> CleanRoom {
        let place = Place::Lasting {
            root: taken.root,
            records,
        };
        CleanRoom::assemble(place, taken.lease, self.tree, self.repo, self.kept)
    }
}

impl Drop for CleanRoom {
    /// A room of its own goes, with what the tests left unreadable (the temp dir's own
    /// removal would stop there). A lasting room is made exactly its tree, and its state kept
    /// for the next run; one that cannot be is left with no state, and is started anew.
    fn drop(&mut self) {
        match &self.place {
            Place::Temp(dir) => {
                let dir = dir.path().to_path_buf();
                let _ = self.settle();
                let _ = crate::leftovers::remove_forcibly(&dir);
            }
            Place::Lasting { .. } => {
                let _ = self.keep();
            }
        }
    }
}

impl CleanRoom {
    /// An empty clean room for a repository whose objects are in `objects` (the user's
    /// repository's common dir + `objects`), in a temp dir of its own that goes with it. It
    /// lives in the system's temp dir, never inside `user_workdir`, so no runner walking up
    /// from it meets the user's uncommitted files.
    pub fn create(objects: &Path, user_workdir: Option<&Path>) -> Result<Self, WorkspaceError> {
        let dir = tempfile::Builder::new()
            .prefix("agent-git-clean-")
            .tempdir()
            .map_err(|e| WorkspaceError::io("create", &std::env::temp_dir(), e))?;
        let root = dir
            .path()
            .canonicalize()
            .map_err(|e| WorkspaceError::io("resolve", dir.path(), e))?;
        outside(&root, user_workdir)?;
        let lease_path = root.join(crate::leftovers::LEASE);
        let lease = crate::leftovers::Lease::take(&lease_path)
            .map_err(|e| WorkspaceError::io("lock", &lease_path, e))?;
        Self::build(Place::Temp(dir), &root, lease, objects)
    }

    /// The clean room of the last run on this repository, as that run left it, where one is
    /// free (see `rooms`); else a new lasting one, or one of its own (`create`) where no
    /// lasting room can be had. What it holds is known only from the state its last run kept,
    /// and the first reset checks every entry against that.
    pub fn open(objects: &Path, user_workdir: Option<&Path>) -> Result<Self, WorkspaceError> {
        Self::open_in(&std::env::temp_dir(), objects, user_workdir)
    }

    /// `open`, with the lasting rooms in `temp`.
    fn open_in(
        temp: &Path,
        objects: &Path,
        user_workdir: Option<&Path>,
    ) -> Result<Self, WorkspaceError> {
        // Nothing is made in a temp dir inside the checkout: `create` says why not.
        let lasting = temp
            .canonicalize()
            .ok()
            .filter(|temp| outside(temp, user_workdir).is_ok())
            .zip(objects.canonicalize().ok())
            .and_then(|(temp, objects)| super::rooms::take(&temp, &objects));
        let Some(taken) = lasting else {
            return Self::create(objects, user_workdir);
        };
        let records = super::rooms::records_of(objects);
        if !taken.made {
            match Self::reopen(&taken.root, objects, &records) {
                Some(room) => return Ok(room.into_room(taken, records)),
                // Not as a room is made: it starts anew.
                None => clear_but_lease(&taken.root)?,
            }
        }
        let root = taken.root.clone();
        let place = Place::Lasting {
            root: taken.root,
            records,
        };
        Self::build(place, &root, taken.lease, objects)
    }

    /// Makes the folders and the private git dir of a new room in `root`.
    fn build(
        place: Place,
        root: &Path,
        lease: crate::leftovers::Lease,
        objects: &Path,
    ) -> Result<Self, WorkspaceError> {
        let tree = root.join("tree");
        for sub in [&tree, &root.join("runs"), &root.join("cargo-target")] {
            std::fs::create_dir(sub).map_err(|e| WorkspaceError::io("create", sub, e))?;
        }
        let git = root.join("git");
        let repo = Repository::init_bare(&git)?;
        let alternates = git.join("objects/info/alternates");
        let objects = objects
            .canonicalize()
            .map_err(|e| WorkspaceError::io("resolve", objects, e))?;
        std::fs::write(&alternates, format!("{}\n", objects.display()))
            .map_err(|e| WorkspaceError::io("write", &alternates, e))?;
        // Reopened, so that the object database reads the alternates just written.
        let repo = {
            drop(repo);
            let repo = Repository::open_bare(&git)?;
            repo.set_workdir(&tree, false)?;
            // An index on disk, and empty for good: libgit2's checkout compares with HEAD (the
            // tree checked out last) only where an index exists, and checkouts never fill it.
            // What the room holds is known from the snapshot: an index of every file would
            // cost tens of MiB on a large tree, and writing it a checksum of it all at each
            // reset.
            repo.index()?.write()?;
            repo
        };
        Ok(Self::assemble(place, lease, tree, repo, None))
    }

    /// A room in `place` whose tree is at `tree`, knowing of it what `kept` says (nothing for
    /// a new room), before any setup or test run of this process.
    fn assemble(
        place: Place,
        lease: crate::leftovers::Lease,
        tree: PathBuf,
        repo: Repository,
        kept: Option<KeptState>,
    ) -> CleanRoom {
        let (keys, current, snapshot) = match kept {
            Some(kept) => (kept.keys, Some(kept.tree), Some(kept.snapshot)),
            None => (Keys::random(), None, None),
        };
        CleanRoom {
            place,
            _lease: lease,
            tree,
            repo,
            current,
            setup_outputs: BTreeSet::new(),
            setup_state: None,
            setup_from: None,
            runs: 0,
            cache_written: false,
            snapshot,
            undoing: None,
            undone: None,
            keys,
            setup_since_reset: false,
            checking: None,
        }
    }

    /// The lasting room in `root` as its last run left it, if it is one made for `objects`
    /// (None if not). With the state that run kept, it knows its tree and the stat data of
    /// every entry; without (that run died midway), it knows nothing, and its first reset
    /// writes the tree anew. The state is removed as it is read: it is true only until the
    /// room is used.
    fn reopen(root: &Path, objects: &Path, records: &Path) -> Option<Reopened> {
        // Only a room this repository's last run left, with the state it wrote: the record
        // says so (a run that died left none).
        let state_path = root.join(STATE);
        let state = std::fs::read(&state_path).ok();
        let kept_record = super::rooms::Record::take(records, root);
        let trusted = state
            .as_deref()
            .map(|state| super::rooms::Record::of(root, state));
        if kept_record.is_none() || kept_record != trusted.and_then(Result::ok) {
            return None;
        }
        let (tree, git) = (root.join("tree"), root.join("git"));
        let objects = objects.canonicalize().ok()?;
        let alternates = std::fs::read_to_string(git.join("objects/info/alternates")).ok()?;
        let real_dir = |path: &Path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        if alternates != format!("{}\n", objects.display())
            || ![&tree, &root.join("cargo-target")]
                .iter()
                .all(|d| real_dir(d))
        {
            return None;
        }
        let repo = Repository::open_bare(&git).ok()?;
        repo.set_workdir(&tree, false).ok()?;
        // What the last runs left outside the tree: their folders, an overlay.
        for leftover in ["runs", "cargo-target-fresh"].iter().chain(OVERLAYS) {
            remove_entry(&root.join(leftover)).ok()?;
        }
        std::fs::create_dir(root.join("runs")).ok()?;
        remove_entry(&state_path).ok()?;
        let head = repo.head().ok().and_then(|h| h.peel_to_tree().ok());
        let kept = state
            .as_deref()
            .and_then(KeptState::decode)
            .filter(|kept| head.is_some_and(|h| h.id() == kept.tree));
        // Builds of earlier runs are never trusted: what code under test left in the cache
        // could fail an honest run later. It goes, while the run goes on.
        // Into a folder of its own, so that its removal changes nothing in the room's own
        // folder (which its record pins) whenever it ends.
        let cache = root.join("cargo-target");
        let trash = root.join("trash");
        if !std::fs::symlink_metadata(&trash).is_ok_and(|m| m.is_dir()) {
            remove_entry(&trash).ok()?;
            std::fs::create_dir(&trash).ok()?;
        }
        let gone = trash.join(format!("cache-{}", std::process::id()));
        remove_entry(&gone).ok()?;
        std::fs::rename(&cache, &gone).ok()?;
        std::fs::create_dir(&cache).ok()?;
        std::thread::spawn(move || {
            // What earlier runs could not finish removing goes too.
            for entry in std::fs::read_dir(&trash).into_iter().flatten().flatten() {
                let _ = crate::leftovers::remove_forcibly(&entry.path());
            }
        });
        Some(Reopened { tree, repo, kept })
    }

    /// Lets go of a lasting room with no state or record written: the next run empties it
    /// and makes it anew.
    pub fn keep_nothing(&mut self) {
        self.current = None;
    }

    /// At the end of a lasting room's run: the tree made exactly what was last checked out
    /// (what the last test run left undone), and the state that says so written for the
    /// next run. Nothing is written where the room does not know what it holds.
    fn keep(&mut self) -> Result<(), WorkspaceError> {
        let Place::Lasting { root, records } = &self.place else {
            return Ok(());
        };
        let (root, records) = (root.clone(), records.clone());
        self.settle()?;
        let Some(current) = self.current else {
            return Ok(());
        };
        self.reset_to(current)?;
        let Some(snapshot) = &self.snapshot else {
            return Ok(());
        };
        let state = KeptState::encode(self.keys, current, snapshot);
        let fresh = root.join(format!("{STATE}.new"));
        write_new(&fresh, &state)?;
        let path = root.join(STATE);
        std::fs::rename(&fresh, &path).map_err(|e| WorkspaceError::io("write", &path, e))?;
        let record = super::rooms::Record::of(&root, &state)
            .map_err(|e| WorkspaceError::io("inspect", &root, e))?;
        record.write(&records, &root)
    }

    /// The tree the clean room holds now.
    pub fn current_tree(&self) -> Option<Oid> {
        self.current
    }

    /// The directory the tests run in.
    pub fn path(&self) -> &Path {
        &self.tree
    }

    /// The clean room's own directory (the tree's parent), for files the harness puts beside it.
    pub fn root(&self) -> &Path {
        self.tree.parent().unwrap_or(&self.tree)
    }

    /// Makes the tree exactly `tree`: tracked files as committed, nothing untracked or ignored
    /// but what the setup command made. Anything a test run planted is removed before any file
    /// is written, so no write follows a link it left.
    pub fn reset_to(&mut self, tree: Oid) -> Result<(), WorkspaceError> {
        self.settle()?;
        self.setup_since_reset = false;
        // What the setup command made where `tree` tracks something is the tree's now: it goes
        // whole (what the setup wrote beneath it too, or that would stay unknown to the
        // snapshot, and be taken for the next setup's), and the checkout writes what is tracked.
        let target = self.repo.find_tree(tree)?;
        let (dropped, kept): (Vec<PathBuf>, Vec<PathBuf>) = std::mem::take(&mut self.setup_outputs)
            .into_iter()
            .partition(|rel| target.get_path(rel).is_ok());
        drop(target);
        self.setup_outputs = kept.into_iter().collect();
        let (Some(mut snapshot), Some(current)) = (self.snapshot.take(), self.current) else {
            self.sweep(Path::new(""))?;
            return self.check_out_whole(tree);
        };
        let undone = match self.undone.take() {
            Some(undone) => undone,
            None => self.tree_walk().undo_changes_since(&snapshot)?,
        };
        for rel in &dropped {
            self.remove_in_tree(rel)?;
        }
        if undone.lost_known_entries {
            // Something the snapshot knew is gone and cannot be named cheaply: start over.
            return self.check_out_whole(tree);
        }
        let untouched = undone.removed.is_empty() && undone.restored.is_empty();
        if current == tree && untouched && dropped.is_empty() {
            // Nothing moved: the snapshot still describes the tree.
            self.snapshot = Some(snapshot);
            return Ok(());
        }
        let mut paths = self.changed_between(current, tree)?;
        paths.extend(undone.removed.iter().cloned());
        self.check_out_paths(tree, &paths)?;
        // Only what the checkout, the undo or the removal of outputs touched has new stat data,
        // and the folders above it.
        let touched = paths.iter().chain(&undone.restored).chain(&dropped);
        self.tree_walk().restamp(&mut snapshot, touched)?;
        self.snapshot = Some(snapshot);
        Ok(())
    }

    /// `reset_to`, ahead of the first test run, with nothing but this room's owner to touch
    /// it until then: that run's reset has nothing to undo, and walks nothing.
    /// A room reopened with the snapshot its last run kept is not walked before it is used:
    /// only the paths that differ from `tree` are written, once each of them and each folder
    /// above them is found as the snapshot knows it (else the whole tree is walked first, as
    /// any reset does). The rest of the tree is held against the snapshot by a walk that
    /// changes nothing, in a thread of its own; the first reset waits for it and undoes what it
    /// found, unless a run on an overlay goes on beside it (`reset_beside`).
    pub fn reset_ahead(&mut self, tree: Oid) -> Result<(), WorkspaceError> {
        let reopened =
            self.undone.is_none() && self.undoing.is_none() && self.setup_outputs.is_empty();
        let kept = match (reopened, self.current) {
            (true, Some(current)) => self.snapshot.take().map(|snapshot| (current, snapshot)),
            _ => None,
        };
        if let Some((current, mut snapshot)) = kept {
            let paths = self.changed_between(current, tree)?;
            let mut walk = self.tree_walk();
            if walk.as_known(&snapshot, &paths) {
                if current != tree {
                    self.check_out_paths(tree, &paths)?;
                    walk.restamp(&mut snapshot, paths.iter())?;
                }
                // It goes on beside the run's start, which needs the two cores more.
                walk.yielding = true;
                let check = std::thread::spawn(move || {
                    walk::yield_cpu();
                    let held = walk.holds(&snapshot);
                    (snapshot, held)
                });
                self.checking = Some((check, self.runs));
                return Ok(());
            }
            self.snapshot = Some(snapshot);
        }
        self.reset_to(tree)?;
        if self.snapshot.is_some() {
            self.undone = Some(Undone::default());
        }
        Ok(())
    }

    /// `reset_to` for a run on an overlay of the tree, which writes nothing in it: where the
    /// room holds `tree` already and its check (`reset_ahead`) is still going, the run goes
    /// on beside it, and true comes back. The run's result then stands only once `verified`
    /// says so.
    pub fn reset_beside(&mut self, tree: Oid) -> Result<bool, WorkspaceError> {
        let beside = self.checking.is_some()
            && self.current == Some(tree)
            && self.undoing.is_none()
            && self.setup_outputs.is_empty();
        if !beside {
            self.reset_to(tree)?;
            return Ok(false);
        }
        self.setup_since_reset = false;
        Ok(true)
    }

    /// Whether the check `reset_ahead` started found the tree as the snapshot knows it (true
    /// where there was none). Where it did not, a run on it meanwhile says nothing of the
    /// tree, and the next reset walks it and undoes what changed. Where it did and no test
    /// ran since it started, the next reset has nothing to undo; after a run, what is left to
    /// undo is known as after any run.
    pub fn verified(&mut self) -> Result<bool, WorkspaceError> {
        let Some((checking, runs)) = self.checking.take() else {
            return Ok(true);
        };
        let (snapshot, held) = checking.join().map_err(|_| {
            WorkspaceError::Unsafe("the check of the clean room stopped midway".to_string())
        })?;
        self.snapshot = Some(snapshot);
        self.undone = (held && runs == self.runs).then(Undone::default);
        Ok(held)
    }

    /// Starts undoing what the last test run left, in a thread of its own: the next reset
    /// then finds it done, as the model usually takes longer to answer than this takes.
    pub fn undo_in_background(&mut self) {
        // A check still going is waited for by the next reset, which then walks the tree.
        if self.undoing.is_some() || self.undone.is_some() || self.checking.is_some() {
            return;
        }
        let Some(snapshot) = self.snapshot.take() else {
            return;
        };
        let walk = self.tree_walk();
        self.undoing = Some(std::thread::spawn(move || {
            let undone = walk.undo_changes_since(&snapshot)?;
            Ok((snapshot, undone))
        }));
    }

    /// Says that the last test run left the tree as it was (it ran on an overlay, and nothing
    /// but test runs can reach the room): unless the setup command ran since the last reset,
    /// the next reset has nothing to undo, and walks nothing. Otherwise the undo starts.
    pub fn left_untouched(&mut self) {
        if self.setup_since_reset || self.undoing.is_some() || self.undone.is_some() {
            return self.undo_in_background();
        }
        if self.snapshot.is_some() {
            self.undone = Some(Undone::default());
        }
    }

    /// An empty folder for a test run's overlay on the tree (see `left_untouched`), beside the
    /// tree: never inside what the run may write to. Two runs at once have one each
    /// (`OVERLAYS`).
    pub fn fresh_overlay(&self, name: &str) -> Result<PathBuf, WorkspaceError> {
        let upper = self.root().join(name);
        self.remove_overlay(name)?;
        std::fs::create_dir(&upper).map_err(|e| WorkspaceError::io("create", &upper, e))?;
        Ok(upper)
    }

    /// Throws away what the last test run wrote through its overlay `name`.
    pub fn remove_overlay(&self, name: &str) -> Result<(), WorkspaceError> {
        let upper = self.root().join(name);
        match std::fs::symlink_metadata(&upper) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            _ => remove_planted(&upper),
        }
    }

    /// Waits for an undo or a check in the background to end; nothing else may touch the
    /// tree till then.
    fn settle(&mut self) -> Result<(), WorkspaceError> {
        self.verified()?;
        let Some(undoing) = self.undoing.take() else {
            return Ok(());
        };
        let (snapshot, undone) = undoing.join().map_err(|_| {
            WorkspaceError::Unsafe("the clean room's clean-up stopped midway".to_string())
        })??;
        self.snapshot = Some(snapshot);
        self.undone = Some(undone);
        Ok(())
    }

    fn tree_walk(&self) -> TreeWalk {
        TreeWalk {
            tree: self.tree.clone(),
            skip: self.setup_outputs.clone(),
            keys: self.keys,
            yielding: false,
        }
    }

    /// Writes every file of `tree` that differs from what the room holds, and notes it all.
    fn check_out_whole(&mut self, tree: Oid) -> Result<(), WorkspaceError> {
        // In a process of its own where one can be (`super::check_out_apart`).
        let id = tree.to_string();
        let args = [
            CHECK_OUT_ROOM.as_ref(),
            self.repo.path().as_os_str(),
            self.tree.as_os_str(),
            id.as_ref(),
        ];
        match super::run_apart(&args) {
            Some(apart) => apart.map_err(|e| {
                WorkspaceError::Unsafe(format!("the checkout of the clean room failed: {e}"))
            })?,
            None => check_out(&self.repo, tree)?,
        }
        self.record_checkout(tree)?;
        self.snapshot = Some(self.tree_walk().take_snapshot()?);
        Ok(())
    }

    /// Writes `paths` as `tree` has them (removing those it does not have), and notes that the
    /// room holds `tree`.
    fn check_out_paths(&mut self, tree: Oid, paths: &[PathBuf]) -> Result<(), WorkspaceError> {
        if !paths.is_empty() {
            let target = self.repo.find_tree(tree)?;
            let mut checkout = CheckoutBuilder::new();
            checkout
                .force()
                .update_index(false)
                .remove_untracked(false)
                .remove_ignored(false)
                .disable_pathspec_match(true);
            for path in paths {
                checkout.path(path);
            }
            self.repo
                .checkout_tree(target.as_object(), Some(&mut checkout))?;
        }
        self.record_checkout(tree)
    }

    /// The paths whose entries differ between two trees (files, links; not folders).
    fn changed_between(&self, old: Oid, new: Oid) -> Result<Vec<PathBuf>, WorkspaceError> {
        let old = self.repo.find_tree(old)?;
        let new = self.repo.find_tree(new)?;
        let diff = super::trees::diff(&self.repo, Some(&old), Some(&new), None)?;
        let mut paths = Vec::new();
        for delta in diff.deltas() {
            for file in [delta.old_file(), delta.new_file()] {
                if let Some(path) = file.path() {
                    if !paths.iter().any(|p: &PathBuf| p == path) {
                        paths.push(path.to_path_buf());
                    }
                }
            }
        }
        Ok(paths)
    }

    /// HEAD names what is checked out: the next checkout then compares with it (and with
    /// what a test run changed), not with every file.
    fn record_checkout(&mut self, tree: Oid) -> Result<(), WorkspaceError> {
        let target = self.repo.find_tree(tree)?;
        let when = git2::Time::new(0, 0);
        let signature = git2::Signature::new(AGENT, AGENT_EMAIL, &when)?;
        let commit = self
            .repo
            .commit(None, &signature, &signature, "clean room", &target, &[])?;
        self.repo.set_head_detached(commit)?;
        self.current = Some(tree);
        Ok(())
    }

    /// Removes the entry at `rel` in the tree (a folder whole, a link itself), only where every
    /// folder on the way to it is a real folder of the tree: a test run may have put a link in
    /// the place of one, and what it leads to is never the room's to remove. Where one is not,
    /// the entry is not where it was made, and nothing is removed.
    fn remove_in_tree(&self, rel: &Path) -> Result<(), WorkspaceError> {
        let mut dir = self.tree.clone();
        let Some(name) = rel.file_name() else {
            return Ok(());
        };
        for part in rel.parent().into_iter().flat_map(Path::components) {
            let std::path::Component::Normal(part) = part else {
                return Ok(());
            };
            dir.push(part);
            if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                return Ok(());
            }
        }
        remove_planted(&dir.join(name))
    }

    /// With nothing known of what the room holds (before the first checkout, or after a reset
    /// that failed midway): removes everything in the folder `rel` but what the setup command
    /// made and the folders that hold it, for a whole checkout to write the tree anew.
    fn sweep(&self, rel: &Path) -> Result<(), WorkspaceError> {
        let dir = entry_path(&self.tree, rel);
        if rel.as_os_str().is_empty() && !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir())
        {
            // The tree itself is gone, or something else (a link) stands in its place: never
            // followed, it goes, and the tree starts empty.
            if std::fs::symlink_metadata(&dir).is_ok() {
                remove_planted(&dir)?;
            }
            return std::fs::create_dir(&dir).map_err(|e| WorkspaceError::io("create", &dir, e));
        }
        let read = |e| WorkspaceError::io("read", &dir, e);
        for entry in std::fs::read_dir(&dir).map_err(read)? {
            let entry = entry.map_err(read)?;
            let child = rel.join(entry.file_name());
            if self.setup_outputs.contains(&child) {
                continue;
            }
            let holds_output = self.setup_outputs.iter().any(|out| out.starts_with(&child));
            // A link is never followed: it goes, whatever it points at.
            if holds_output && entry.file_type().map_err(read)?.is_dir() {
                self.sweep(&child)?;
            } else {
                remove_planted(&entry.path())?;
            }
        }
        Ok(())
    }

    /// The top-most entries of `tree` that `protection` covers, where they lie in the clean
    /// room: they stay read-only while the tests run, so code under test cannot rewrite them.
    /// A folder whose tree `memo` has seen (for the same protection) is not walked again, so
    /// a tree that differs from the last in one file costs a few folders, not all of them.
    pub fn protected_paths(
        &self,
        tree: Oid,
        protection: &crate::guard::Protection,
        memo: &mut ProtectedMemo,
    ) -> Result<Vec<PathBuf>, WorkspaceError> {
        let tree = self.repo.find_tree(tree)?;
        // A run tests trees that differ in a few folders each; many more means another
        // history, and the memo starts over.
        if memo.0.len() > MAX_MEMO {
            memo.0.clear();
        }
        // The first tree a room is asked of (the base's) is the one the next run asks of
        // first: what was found in it is kept for that run, under its tree and protection.
        let kept = match (memo.0.is_empty(), self.common_dir()) {
            (true, Some(common)) => Some((common, Self::protected_key(&tree, protection))),
            _ => None,
        };
        if let Some((common, key)) = &kept {
            // The whole memo, so that the trees tested after it cost their changed folders.
            if let Some(known) = super::derived::read(common, PROTECTED, *key)
                .and_then(|bytes| ProtectedMemo::decode(&bytes))
            {
                *memo = known;
            }
        }
        let root = (PathBuf::new(), tree.id());
        let found = match memo.0.get(&root) {
            Some(found) => found.clone(),
            None => {
                let found = self.protected_in(Path::new(""), &tree, protection, memo)?;
                if let Some((common, key)) = &kept {
                    super::derived::write(common, PROTECTED, *key, &memo.encode());
                }
                found
            }
        };
        Ok(found.iter().map(|rel| self.tree.join(rel)).collect())
    }

    /// The key of what `protection` covers in `tree`.
    fn protected_key(
        tree: &git2::Tree,
        protection: &crate::guard::Protection,
    ) -> super::derived::Key {
        super::derived::Key::of(&[
            PROTECTED.as_bytes(),
            tree.id().as_bytes(),
            protection.covered_key(),
        ])
    }

    /// The common git dir of the repository a lasting room is for, where what it found in a
    /// tree is kept for the next run (`derived`); None for a room of its own.
    fn common_dir(&self) -> Option<&Path> {
        match &self.place {
            // `records_of`: the common dir's `agent-git/rooms`.
            Place::Lasting { records, .. } => records.parent()?.parent(),
            Place::Temp(_) => None,
        }
    }

    fn protected_in(
        &self,
        dir: &Path,
        tree: &git2::Tree,
        protection: &crate::guard::Protection,
        memo: &mut ProtectedMemo,
    ) -> Result<std::sync::Arc<Vec<PathBuf>>, WorkspaceError> {
        let key = (dir.to_path_buf(), tree.id());
        if let Some(found) = memo.0.get(&key) {
            return Ok(found.clone());
        }
        let mut found = Vec::new();
        for entry in tree.iter() {
            // By its bytes: a name that is not UTF-8 is protected as any other.
            let rel = dir.join(
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(entry.name_bytes()),
            );
            if entry.kind() == Some(git2::ObjectType::Tree) {
                if protection.is_protected_dir(&rel) {
                    found.push(rel);
                } else {
                    let sub = self.repo.find_tree(entry.id())?;
                    let inner = self.protected_in(&rel, &sub, protection, memo)?;
                    found.extend(inner.iter().cloned());
                }
            } else if protection.is_protected_in_open_dir(&rel) {
                // Each folder above it was found open on the way down.
                found.push(rel);
            }
        }
        let found = std::sync::Arc::new(found);
        memo.0.insert(key, found.clone());
        Ok(found)
    }

    /// Fresh, empty private directories for the next test run.
    pub fn run_dirs(&mut self) -> Result<RunDirs, WorkspaceError> {
        self.runs += 1;
        let root = self.root().join("runs").join(self.runs.to_string());
        let dirs = RunDirs {
            home: root.join("home"),
            tmp: root.join("tmp"),
            results: root.join("results"),
            root,
        };
        for dir in [&dirs.home, &dirs.tmp, &dirs.results] {
            std::fs::create_dir_all(dir).map_err(|e| WorkspaceError::io("create", dir, e))?;
        }
        Ok(dirs)
    }
}

#[cfg(test)]
mod tests {
    use super::kept_state::STATE_MAGIC;
    use super::*;
    use std::os::unix::fs::symlink;

    /// A repository with one commit of `files`; returns it and the commit's tree.
    pub(super) fn repo_with(dir: &Path, files: &[(&str, &str)]) -> (Repository, Oid) {
        let repo = Repository::init(dir).unwrap();
        let mut index = repo.index().unwrap();
        for (path, text) in files {
            let full = dir.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        let tree = index.write_tree().unwrap();
        (repo, tree)
    }

    pub(super) fn read(room: &CleanRoom, rel: &str) -> String {
        std::fs::read_to_string(room.path().join(rel)).unwrap()
    }

    /// A commit's tree with `files` written (and `gone` removed) on top of the index.
    pub(super) fn commit_files(repo: &Repository, files: &[(&str, &str)], gone: &[&str]) -> Oid {
        let dir = repo.workdir().unwrap();
        let mut index = repo.index().unwrap();
        for path in gone {
            std::fs::remove_file(dir.join(path)).unwrap();
            let _ = std::fs::remove_dir(dir.join(path).parent().unwrap());
            index.remove_path(Path::new(path)).unwrap();
        }
        for (path, text) in files {
            let full = dir.join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        index.write().unwrap();
        index.write_tree().unwrap()
    }

    /// The room holds exactly `tree` (file by file), and its snapshot is what a new walk sees.
    fn holds_exactly(room: &CleanRoom, repo: &Repository, tree: Oid) {
        let mut expected = BTreeSet::new();
        let tree = repo.find_tree(tree).unwrap();
        crate::workspace::entries::each_entry(repo, &tree, &mut |dir, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) {
                let rel = crate::workspace::entries::entry_path(dir, entry);
                let blob = repo.find_blob(entry.id()).unwrap();
                let on_disk = std::fs::read(room.path().join(&rel)).unwrap();
                assert_eq!(on_disk, blob.content(), "{}", rel.display());
                expected.insert(rel);
            }
            true
        })
        .unwrap();
        // Folders too: an empty one a fresh checkout would not have is a difference.
        let folders: Vec<PathBuf> = expected
            .iter()
            .flat_map(|p| p.ancestors().skip(1).map(Path::to_path_buf))
            .collect();
        expected.extend(folders);
        let found: BTreeSet<PathBuf> = walkdir::WalkDir::new(room.path())
            .into_iter()
            .map(Result::unwrap)
            .map(|e| e.path().strip_prefix(room.path()).unwrap().to_path_buf())
            .collect();
        assert_eq!(found, expected);
        let index = git2::Index::open(&room.root().join("git/index")).unwrap();
        assert_eq!(
            index.len(),
            0,
            "the room's index stays empty: the snapshot knows the tree"
        );
        assert_eq!(
            room.snapshot.as_ref().unwrap(),
            &room.tree_walk().take_snapshot().unwrap(),
            "the snapshot kept up to date equals a new one"
        );
    }

    #[test]
    fn protected_entries_from_the_memo_are_those_a_fresh_walk_finds() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, first) = repo_with(
            dir.path(),
            &[
                ("calc.py", "x = 1\n"),
                ("tests/test_calc.py", "t = 1\n"),
                ("pkg/test_pkg.py", "t = 1\n"),
                ("pkg/deep/code.py", "c = 1\n"),
            ],
        );
        let second = commit_files(&repo, &[("pkg/deep/test_deep.py", "t = 2\n")], &[]);
        let third = commit_files(&repo, &[("calc.py", "x = 3\n")], &["pkg/test_pkg.py"]);
        let room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        let protection = crate::guard::Protection::new(&[], &[]).unwrap();
        let mut memo = ProtectedMemo::default();
        for tree in [first, second, third, second, first] {
            let remembered = room.protected_paths(tree, &protection, &mut memo).unwrap();
            let fresh = room
                .protected_paths(tree, &protection, &mut ProtectedMemo::default())
                .unwrap();
            assert_eq!(remembered, fresh);
        }
        let mut names = |tree| {
            protected_in_room(&room, tree, &protection, &mut memo)
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(second),
            ["pkg/deep/test_deep.py", "pkg/test_pkg.py", "tests"]
        );
        assert_eq!(names(third), ["pkg/deep/test_deep.py", "tests"]);
    }

    /// The protected entries `room` finds in `tree`, relative to its tree.
    fn protected_in_room(
        room: &CleanRoom,
        tree: Oid,
        protection: &crate::guard::Protection,
        memo: &mut ProtectedMemo,
    ) -> Vec<PathBuf> {
        let found = room.protected_paths(tree, protection, memo).unwrap();
        found
            .iter()
            .map(|p| p.strip_prefix(room.path()).unwrap().to_path_buf())
            .collect()
    }

    /// A test in a folder, or of a name, that is not UTF-8 is protected as any other.
    #[test]
    fn protected_entries_of_names_that_are_not_utf8_are_found() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let (repo, _) = repo_with(dir.path(), &[("calc.py", "x = 1\n")]);
        let blob = repo.blob(b"t = 1\n").unwrap();
        let mut inner = repo.treebuilder(None).unwrap();
        inner.insert("test_x.py", blob, 0o100644).unwrap();
        inner
            .insert(b"test_\xff.py".as_slice(), blob, 0o100644)
            .unwrap();
        let inner = inner.write().unwrap();
        let mut root = repo.treebuilder(None).unwrap();
        root.insert(b"caf\xe9".as_slice(), inner, 0o040000).unwrap();
        root.insert("calc.py", blob, 0o100644).unwrap();
        let tree = root.write().unwrap();
        let room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        let protection = crate::guard::Protection::new(&[], &[]).unwrap();
        let found = room
            .protected_paths(tree, &protection, &mut ProtectedMemo::default())
            .unwrap();
        let folder = room.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
        assert_eq!(
            found,
            [
                folder.join("test_x.py"),
                folder.join(std::ffi::OsStr::from_bytes(b"test_\xff.py")),
            ]
        );
    }

    /// What a lasting room found protected in the first tree it was asked of is kept for the
    /// next run's room, under that tree and that protection: read back, it answers as a
    /// fresh walk does, for that tree and for the trees after it; another protection or
    /// another tree is walked anew.
    #[test]
    fn protected_entries_kept_for_the_next_run_are_those_a_fresh_walk_finds() {
        super::super::derived::open();
        let dir = tempfile::tempdir().unwrap();
        let temp = tempfile::tempdir().unwrap();
        let (repo, first) = repo_with(
            dir.path(),
            &[
                ("calc.py", "x = 1\n"),
                ("tests/test_calc.py", "t = 1\n"),
                ("pkg/test_pkg.py", "t = 1\n"),
                ("pkg/deep/code.py", "c = 1\n"),
            ],
        );
        let second = commit_files(&repo, &[("pkg/deep/test_deep.py", "t = 2\n")], &[]);
        let plain = crate::guard::Protection::new(&[], &[]).unwrap();
        let more = crate::guard::Protection::new(&[], &["pkg/deep/code.py".into()]).unwrap();
        let fresh_room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        let fresh = |tree, protection| {
            protected_in_room(&fresh_room, tree, protection, &mut ProtectedMemo::default())
        };
        let asked = protected_in_room;
        {
            let room = lasting(temp.path(), &repo);
            let found = asked(&room, first, &plain, &mut ProtectedMemo::default());
            assert_eq!(found, fresh(first, &plain));
        }
        let kept = repo.path().join("agent-git/derived").join(PROTECTED);
        assert!(kept.is_file());
        let was = std::fs::read(&kept).unwrap();

        let room = lasting(temp.path(), &repo);
        let mut memo = ProtectedMemo::default();
        assert_eq!(asked(&room, first, &plain, &mut memo), fresh(first, &plain));
        assert!(memo.0.len() > 1, "the whole memo is read back: {memo:?}");
        assert_eq!(
            asked(&room, second, &plain, &mut memo),
            fresh(second, &plain)
        );
        // Read, not written again.
        assert_eq!(std::fs::read(&kept).unwrap(), was);
        // Another protection, another tree: walked anew, and kept in its place.
        let other = asked(&room, first, &more, &mut ProtectedMemo::default());
        assert_eq!(other, fresh(first, &more));
        assert!(other.contains(&PathBuf::from("pkg/deep/code.py")));
        assert_ne!(std::fs::read(&kept).unwrap(), was);
        let found = asked(&room, second, &plain, &mut ProtectedMemo::default());
        assert_eq!(found, fresh(second, &plain));
        assert!(found.contains(&PathBuf::from("pkg/deep/test_deep.py")));
        assert!(!found.contains(&PathBuf::from("pkg/deep/code.py")));
    }

    /// A lasting room of `repo`'s, with the lasting rooms in `temp`.
    fn lasting(temp: &Path, repo: &Repository) -> CleanRoom {
        CleanRoom::open_in(temp, &repo.path().join("objects"), repo.workdir()).unwrap()
    }

    /// A repository of three files, two of them in a folder, and its tree.
    fn three_files(dir: &Path) -> (Repository, Oid) {
        let files = [
            ("calc.py", "x = 1\n"),
            ("pkg/a.py", "a = 1\n"),
            ("pkg/b.py", "b\n"),
        ];
        repo_with(dir, &files)
    }

    fn inode(room: &CleanRoom, rel: &str) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(room.path().join(rel))
            .unwrap()
            .ino()
    }

    #[test]
    fn a_lasting_room_is_found_as_its_last_run_left_it_and_reset_by_what_differs() {
        let (dir, temp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (repo, first) = three_files(dir.path());
        let mut room = lasting(temp.path(), &repo);
        room.reset_to(first).unwrap();
        // What a test run left, not undone before the run ends.
        std::fs::write(room.path().join("pkg/planted.py"), "p\n").unwrap();
        let (root, kept_inode) = (room.root().to_path_buf(), inode(&room, "pkg/a.py"));
        drop(room);
        assert!(root.join(STATE).is_file(), "the state is kept");

        let second = commit_files(&repo, &[("calc.py", "x = 2\n")], &["pkg/b.py"]);
        let mut room = lasting(temp.path(), &repo);
        assert_eq!(room.root(), root, "the same room");
        assert!(
            !root.join(STATE).exists(),
            "the state is true only until the room is used"
        );
        assert_eq!(room.current_tree(), Some(first));
        room.reset_to(second).unwrap();
        holds_exactly(&room, &repo, second);
        assert_eq!(
            inode(&room, "pkg/a.py"),
            kept_inode,
            "a file that did not change stays"
        );
    }

    #[test]
    fn what_changed_in_a_lasting_room_between_runs_is_undone() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, temp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (repo, tree) = three_files(dir.path());
        let mut room = lasting(temp.path(), &repo);
        room.reset_to(tree).unwrap();
        let path = room.path().to_path_buf();
        drop(room);
        // Between two runs: a file rewritten with its old times, one removed, one added, a
        // folder made open to all, a folder swapped for a link.
        let calc = path.join("calc.py");
        let times = std::fs::metadata(&calc).unwrap().modified().unwrap();
        std::fs::write(&calc, "x = 9\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&calc)
            .unwrap()
            .set_modified(times)
            .unwrap();
        std::fs::remove_file(path.join("pkg/b.py")).unwrap();
        std::fs::write(path.join("pkg/new.py"), "n\n").unwrap();
        std::fs::set_permissions(path.join("pkg"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut room = lasting(temp.path(), &repo);
        room.reset_to(tree).unwrap();
        holds_exactly(&room, &repo, tree);
        drop(room);
        std::fs::remove_dir_all(path.join("pkg")).unwrap();
        symlink(dir.path(), path.join("pkg")).unwrap();
        let mut room = lasting(temp.path(), &repo);
        room.reset_to(tree).unwrap();
        holds_exactly(&room, &repo, tree);
        assert!(
            dir.path().join("pkg/a.py").is_file(),
            "the link was not followed"
        );
    }

    /// A reopened room's reset ahead writes only what differs from the tree it kept, and
    /// changes nothing else (a change made elsewhere between runs stays for now); its check,
    /// beside the first run, finds that change, and the reset after it undoes it. Where
    /// nothing changed, the check holds.
    #[test]
    fn a_reopened_room_is_reset_by_what_differs_and_checked_beside_the_first_run() {
        let (dir, temp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (repo, first) = three_files(dir.path());
        let second = commit_files(&repo, &[("calc.py", "x = 2\n")], &[]);
        let mut room = lasting(temp.path(), &repo);
        room.reset_to(first).unwrap();
        let path = room.path().to_path_buf();
        drop(room);

        // Nothing changed between runs: the check holds.
        let mut room = lasting(temp.path(), &repo);
        room.reset_ahead(second).unwrap();
        assert_eq!(read(&room, "calc.py"), "x = 2\n");
        assert!(room.reset_beside(second).unwrap(), "checked beside the run");
        assert!(room.verified().unwrap());
        holds_exactly(&room, &repo, second);
        drop(room);

        // A file changed between runs, away from what differs between the trees.
        std::fs::write(path.join("pkg/a.py"), "a = 'tampered'\n").unwrap();
        std::fs::write(path.join("pkg/planted.py"), "p\n").unwrap();
        let mut room = lasting(temp.path(), &repo);
        room.reset_ahead(first).unwrap();
        assert_eq!(read(&room, "calc.py"), "x = 1\n");
        assert_eq!(
            read(&room, "pkg/a.py"),
            "a = 'tampered'\n",
            "not undone ahead"
        );
        assert!(room.reset_beside(first).unwrap());
        assert!(!room.verified().unwrap(), "the check finds the change");
        // The next reset walks the tree and undoes it.
        assert!(!room.reset_beside(first).unwrap(), "checked once");
        holds_exactly(&room, &repo, first);
        drop(room);

        // No run beside the check: the first reset waits for it, and undoes what it found.
        std::fs::write(path.join("pkg/b.py"), "b = 'tampered'\n").unwrap();
        let mut room = lasting(temp.path(), &repo);
        room.reset_ahead(second).unwrap();
        room.reset_to(second).unwrap();
        holds_exactly(&room, &repo, second);
    }

    /// A reset ahead writes nothing through a link a run left in place of a folder above
    /// what differs: it walks the whole tree first, as any reset does, and the link goes.
    #[test]
    fn a_reset_ahead_follows_no_link_left_above_what_differs() {
        let (dir, temp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let elsewhere = tempfile::tempdir().unwrap();
        let (repo, first) = repo_with(dir.path(), &[("calc.py", "x\n"), ("pkg/a.py", "a\n")]);
        let second = commit_files(&repo, &[("pkg/a.py", "a = 2\n")], &[]);
        let mut room = lasting(temp.path(), &repo);
        room.reset_to(first).unwrap();
        let path = room.path().to_path_buf();
        drop(room);
        std::fs::remove_dir_all(path.join("pkg")).unwrap();
        symlink(elsewhere.path(), path.join("pkg")).unwrap();
        let mut room = lasting(temp.path(), &repo);
        room.reset_ahead(second).unwrap();
        assert!(
            !elsewhere.path().join("a.py").exists(),
            "nothing was written through the link"
        );
        assert!(
            !room.reset_beside(second).unwrap(),
            "walked, not to be checked"
        );
        holds_exactly(&room, &repo, second);
    }

    #[test]
    fn a_lasting_room_without_a_whole_state_starts_anew() {
        let (dir, temp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (repo, tree) = repo_with(dir.path(), &[("calc.py", "x = 1\n"), ("t/a.py", "a\n")]);
        let mut room = lasting(temp.path(), &repo);
        room.reset_to(tree).unwrap();
        let root = room.root().to_path_buf();
        drop(room);
        let state = std::fs::read(root.join(STATE)).unwrap();
        // A run that died midway kept none; a state cut short, or of another tree, is none.
        let other = commit_files(&repo, &[("calc.py", "x = 3\n")], &[]);
        let mut elsewhere = state.clone();
        let at = STATE_MAGIC.len() + 16;
        elsewhere[at..at + 20].copy_from_slice(other.as_bytes());
        for written in [
            None,
            Some(state[..state.len() - 3].to_vec()),
            Some(elsewhere),
        ] {
            std::fs::write(root.join("tree/t/planted.py"), "p\n").unwrap();
            match &written {
                Some(bytes) => std::fs::write(root.join(STATE), bytes).unwrap(),
                None => std::fs::remove_file(root.join(STATE)).unwrap(),
            }
            let mut room = lasting(temp.path(), &repo);
            assert_eq!(room.current_tree(), None, "nothing is known of it");
            room.reset_to(tree).unwrap();
            holds_exactly(&room, &repo, tree);
        }
        // A room whose git dir is not this repository's is made again.
        std::fs::write(root.join("git/objects/info/alternates"), "/elsewhere\n").unwrap();
        let mut room = lasting(temp.path(), &repo);
        room.reset_to(tree).unwrap();
        holds_exactly(&room, &repo, tree);
    }

    #[test]
    fn a_room_or_state_the_repository_has_no_record_of_is_never_trusted() {
        let (dir, temp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (repo, tree) = repo_with(dir.path(), &[("calc.py", "x = 1\n"), ("t/a.py", "a\n")]);
        let records = super::super::rooms::records_of(&repo.path().join("objects"));
        let keep = |temp: &Path| {
            let mut room = lasting(temp, &repo);
            room.reset_to(tree).unwrap();
            let root = room.root().to_path_buf();
            drop(room);
            root
        };
        // The record gone (a state written by someone else has none).
        let root = keep(temp.path());
        let name = root.file_name().unwrap().to_owned();
        std::fs::remove_file(records.join(&name)).unwrap();
        let room = lasting(temp.path(), &repo);
        assert_eq!(
            room.current_tree(),
            None,
            "no record: nothing is known of it"
        );
        drop(room);
        // A room made in its place, state and all, with the record of the one it replaced.
        let root = keep(temp.path());
        let record = std::fs::read(records.join(&name)).unwrap();
        let copy = temp.path().join("copy");
        assert!(std::process::Command::new("cp")
            .args(["-a", root.to_str().unwrap(), copy.to_str().unwrap()])
            .status()
            .unwrap()
            .success());
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::rename(&copy, &root).unwrap();
        std::fs::write(records.join(&name), record).unwrap();
        let mut room = lasting(temp.path(), &repo);
        assert_eq!(
            room.current_tree(),
            None,
            "another folder: nothing is known of it"
        );
        room.reset_to(tree).unwrap();
        holds_exactly(&room, &repo, tree);
        // Whatever a planted room held in the harness's own places is not followed.
        let root = room.root().to_path_buf();
        drop(room);
        std::fs::remove_file(records.join(&name)).unwrap();
        let victim = dir.path().join("NOTES.txt");
        std::fs::write(&victim, "mine\n").unwrap();
        std::fs::remove_file(root.join(STATE)).unwrap();
        symlink(&victim, root.join(STATE)).unwrap();
        symlink(&victim, root.join("state.new")).unwrap();
        let mut room = lasting(temp.path(), &repo);
        room.reset_to(tree).unwrap();
        drop(room);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
    }

    #[test]
    fn runs_going_at_once_have_rooms_of_their_own() {
        let (dir, temp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (repo, tree) = repo_with(dir.path(), &[("calc.py", "x = 1\n")]);
        let mut one = lasting(temp.path(), &repo);
        let mut two = lasting(temp.path(), &repo);
        assert_ne!(one.root(), two.root());
        one.reset_to(tree).unwrap();
        two.reset_to(tree).unwrap();
        holds_exactly(&two, &repo, tree);
    }

    #[test]
    fn a_reset_to_another_tree_writes_what_differs_and_keeps_its_snapshot_true() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, first) = repo_with(
            dir.path(),
            &[
                ("calc.py", "x = 1\n"),
                ("pkg/a.py", "a = 1\n"),
                ("pkg/deep/b.py", "b = 1\n"),
                ("data/keep.txt", "keep\n"),
            ],
        );
        let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        room.reset_to(first).unwrap();
        holds_exactly(&room, &repo, first);

        // Changed, added in a new folder, removed (its folder emptied).
        let second = commit_files(
            &repo,
            &[("calc.py", "x = 2\n"), ("new/dir/c.py", "c = 1\n")],
            &["pkg/deep/b.py"],
        );
        room.reset_to(second).unwrap();
        holds_exactly(&room, &repo, second);

        // A test run that rewrote a tracked file and planted files, then a new tree.
        std::fs::write(room.path().join("pkg/a.py"), "a = 99\n").unwrap();
        std::fs::create_dir_all(room.path().join("pkg/__pycache__")).unwrap();
        std::fs::write(room.path().join("pkg/__pycache__/a.pyc"), "x").unwrap();
        let third = commit_files(&repo, &[("data/more.txt", "more\n")], &[]);
        // Undone while the model thinks, then written.
        room.undo_in_background();
        room.reset_to(third).unwrap();
        holds_exactly(&room, &repo, third);

        // A test run that removed a tracked file and a folder: the room starts over.
        std::fs::remove_file(room.path().join("calc.py")).unwrap();
        std::fs::remove_dir_all(room.path().join("new")).unwrap();
        room.reset_to(third).unwrap();
        holds_exactly(&room, &repo, third);

        // A file becomes a folder, then a folder a file again, while test runs chmod a
        // folder shut and swap a tracked folder for a link.
        let fourth = commit_files(&repo, &[("calc.py/inner.py", "i = 1\n")], &["calc.py"]);
        room.undo_in_background();
        room.reset_to(fourth).unwrap();
        holds_exactly(&room, &repo, fourth);
        std::fs::set_permissions(
            room.path().join("calc.py"),
            std::os::unix::fs::PermissionsExt::from_mode(0o000),
        )
        .unwrap();
        let fifth = commit_files(&repo, &[("calc.py", "x = 5\n")], &["calc.py/inner.py"]);
        room.reset_to(fifth).unwrap();
        holds_exactly(&room, &repo, fifth);
        std::fs::remove_dir_all(room.path().join("data")).unwrap();
        symlink("/", room.path().join("data")).unwrap();
        room.undo_in_background();
        room.reset_to(fifth).unwrap();
        holds_exactly(&room, &repo, fifth);

        // And back to the first tree.
        room.reset_to(first).unwrap();
        holds_exactly(&room, &repo, first);
    }

    #[test]
    fn a_reset_undoes_whatever_a_test_run_left_and_follows_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let (repo, tree) = repo_with(
            dir.path(),
            &[
                ("calc.py", "def add(a, b):\n    return a - b\n"),
                ("tests/test_calc.py", "assert True\n"),
                (".gitignore", "build/\n"),
            ],
        );
        let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        assert!(!room.path().starts_with(dir.path()));
        room.reset_to(tree).unwrap();
        assert_eq!(read(&room, "tests/test_calc.py"), "assert True\n");

        // What a test run could leave: ignored and untracked files, a cache, a tracked file
        // rewritten with its old size and mtime, a tracked directory swapped for a link.
        let root = room.path().to_path_buf();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join("build/state.json"), "{}").unwrap();
        std::fs::create_dir_all(root.join("__pycache__")).unwrap();
        std::fs::write(root.join("__pycache__/calc.pyc"), "stale").unwrap();
        std::fs::write(root.join("usercustomize.py"), "x").unwrap();
        std::fs::create_dir(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/impl.py"), "add = 1").unwrap();
        let calc = root.join("calc.py");
        let mtime = std::fs::metadata(&calc).unwrap().modified().unwrap();
        std::fs::write(&calc, "def add(a, b):\n    return a + b\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&calc)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        std::fs::remove_dir_all(root.join("tests")).unwrap();
        symlink(outside.path(), root.join("tests")).unwrap();

        room.reset_to(tree).unwrap();
        assert_eq!(read(&room, "calc.py"), "def add(a, b):\n    return a - b\n");
        assert_eq!(read(&room, "tests/test_calc.py"), "assert True\n");
        assert!(!std::fs::symlink_metadata(root.join("tests"))
            .unwrap()
            .file_type()
            .is_symlink());
        for gone in ["build", "__pycache__", "usercustomize.py", ".git"] {
            assert!(!root.join(gone).exists(), "{gone} survived the reset");
        }
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "nothing was written through the link"
        );
    }

    #[test]
    fn a_reset_undoes_metadata_and_hidden_state_a_test_run_left() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let (repo, tree) = repo_with(
            dir.path(),
            &[("calc.py", "x = 1\n"), ("data/table.txt", "1\n")],
        );
        let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        room.reset_to(tree).unwrap();
        let root = room.path().to_path_buf();
        let data = root.join("data");
        let calc = root.join("calc.py");
        let data_mtime = std::fs::metadata(&data).unwrap().mtime();
        let calc_mode = std::fs::metadata(&calc).unwrap().mode();

        // A test run leaves state where git does not look: a `.git` in a tracked directory,
        // a directory's time, a file's mode, an extended attribute, a second name.
        std::fs::create_dir_all(data.join(".git")).unwrap();
        std::fs::write(data.join(".git/state"), "+").unwrap();
        std::fs::set_permissions(&calc, std::fs::Permissions::from_mode(0o000)).unwrap();
        let _ = rustix::fs::setxattr(&calc, "user.state", b"+", rustix::fs::XattrFlags::empty());
        std::fs::hard_link(root.join("data/table.txt"), root.join("alias.txt")).unwrap();
        std::fs::File::open(&data)
            .unwrap()
            .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_234_567))
            .unwrap();
        // In another second than the checkout: the folder's time put back must not be moved
        // again by what the reset removes from it.
        std::thread::sleep(std::time::Duration::from_millis(1100));

        room.reset_to(tree).unwrap();
        holds_exactly(&room, &repo, tree);
        assert!(!data.join(".git").exists());
        assert!(!root.join("alias.txt").exists());
        // The time the run set is gone: put back, or moved on by a file written anew in it.
        let mtime = std::fs::metadata(&data).unwrap().mtime();
        assert!(mtime >= data_mtime, "{mtime} < {data_mtime}");
        assert_eq!(std::fs::metadata(&calc).unwrap().mode(), calc_mode);
        let mut names = [0u8; 256];
        assert_eq!(
            rustix::fs::llistxattr(&calc, &mut names[..]).unwrap_or(0),
            0
        );
        assert_eq!(read(&room, "calc.py"), "x = 1\n");
    }

    /// A run on an overlay leaves the tree as it was: the next reset walks nothing and writes
    /// only what differs; after the setup command ran, what it changed is undone all the same.
    #[test]
    fn a_run_that_left_the_tree_untouched_costs_no_walk_unless_the_setup_ran() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, first) = repo_with(
            dir.path(),
            &[("calc.py", "one\n"), ("pkg/mod.py", "x = 1\n")],
        );
        let second = commit_files(&repo, &[("calc.py", "two\n")], &[]);
        let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        room.reset_to(first).unwrap();
        // Nothing that could have been undone is looked for: a change made behind the room's
        // back (which the sandbox rules out for test runs on an overlay) stays.
        std::fs::write(room.path().join("pkg/mod.py"), "x = 2\n").unwrap();
        room.left_untouched();
        room.reset_to(second).unwrap();
        assert_eq!(read(&room, "calc.py"), "two\n");
        assert_eq!(
            read(&room, "pkg/mod.py"),
            "x = 2\n",
            "no walk: trusted as it was"
        );
        std::fs::write(room.path().join("pkg/mod.py"), "x = 1\n").unwrap();
        room.reset_to(first).unwrap();
        holds_exactly(&room, &repo, first);

        // The setup command writes for real, so what it changed is undone.
        room.clear_setup().unwrap();
        std::fs::write(room.path().join("pkg/mod.py"), "x = 3\n").unwrap();
        room.record_setup(first).unwrap();
        room.left_untouched();
        room.settle().unwrap();
        room.reset_to(first).unwrap();
        assert_eq!(read(&room, "pkg/mod.py"), "x = 1\n");
        holds_exactly(&room, &repo, first);
    }

    /// With nothing known of the room, a link in the tree's place is removed, never followed.
    #[test]
    fn a_sweep_never_follows_a_link_in_place_of_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, tree) = repo_with(dir.path(), &[("calc.py", "one\n")]);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep.txt"), "mine\n").unwrap();
        let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        std::fs::remove_dir(room.path()).unwrap();
        symlink(outside.path(), room.path()).unwrap();
        room.reset_to(tree).unwrap();
        assert!(outside.path().join("keep.txt").exists());
        assert!(!std::fs::symlink_metadata(room.path()).unwrap().is_symlink());
        holds_exactly(&room, &repo, tree);
    }

    /// A test run leaves a folder it planted shut (mode 000, or 0555) with a file in it.
    #[test]
    fn a_planted_folder_left_shut_is_undone() {
        use std::os::unix::fs::PermissionsExt;
        for mode in [0o555, 0o000] {
            let dir = tempfile::tempdir().unwrap();
            let (repo, tree) = repo_with(dir.path(), &[("calc.py", "x = 1\n")]);
            let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
            room.reset_to(tree).unwrap();
            let shut = room.path().join("cache");
            std::fs::create_dir_all(shut.join("sub")).unwrap();
            std::fs::write(shut.join("sub/f"), "x").unwrap();
            std::fs::set_permissions(&shut, std::fs::Permissions::from_mode(mode)).unwrap();
            room.undo_in_background();
            let reset = room.reset_to(tree);
            assert!(reset.is_ok(), "mode {mode:o}: {reset:?}");
            holds_exactly(&room, &repo, tree);
        }
    }

    /// With commands unconfined, the room is undone at the reset itself: what they planted
    /// between two test runs is gone before the next.
    #[test]
    fn a_file_planted_between_runs_is_gone_at_the_next_reset() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, first) = repo_with(dir.path(), &[("calc.py", "x = 1\n")]);
        let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        room.reset_to(first).unwrap();
        std::fs::write(room.path().join("conftest.py"), "import pytest\n").unwrap();
        let second = commit_files(&repo, &[("calc.py", "x = 2\n")], &[]);
        room.reset_to(second).unwrap();
        assert!(!room.path().join("conftest.py").exists());
        holds_exactly(&room, &repo, second);
    }

    /// Quiet changes a test run can make, each undone before the next run.
    #[test]
    fn quiet_changes_are_undone() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (repo, tree) = repo_with(
            dir.path(),
            &[
                ("calc.py", "x = 1\n"),
                ("pkg/a.py", "a = 1\n"),
                ("pkg/b.py", "b = 1\n"),
                ("data/d.txt", "d\n"),
            ],
        );
        let mut room = CleanRoom::create(&repo.path().join("objects"), repo.workdir()).unwrap();
        room.reset_to(tree).unwrap();
        let other = tempfile::tempdir().unwrap();
        for round in 0..6 {
            let p = room.path();
            match round {
                0 => {
                    // Same size, mtime put back.
                    let f = p.join("calc.py");
                    let m = std::fs::metadata(&f).unwrap();
                    std::fs::write(&f, "x = 9\n").unwrap();
                    let t = std::time::UNIX_EPOCH
                        + std::time::Duration::new(m.mtime() as u64, m.mtime_nsec() as u32);
                    std::fs::File::options()
                        .write(true)
                        .open(&f)
                        .unwrap()
                        .set_modified(t)
                        .unwrap();
                }
                1 => {
                    // A hard link kept outside, then the content changed through it.
                    std::fs::hard_link(p.join("pkg/a.py"), other.path().join("a")).unwrap();
                    std::fs::remove_file(other.path().join("a")).unwrap();
                }
                2 => {
                    // A file swapped for a link to another tracked file; a dir swapped for a file.
                    std::fs::remove_file(p.join("pkg/b.py")).unwrap();
                    std::os::unix::fs::symlink("a.py", p.join("pkg/b.py")).unwrap();
                    std::fs::remove_dir_all(p.join("data")).unwrap();
                    std::fs::write(p.join("data"), "x").unwrap();
                }
                3 => {
                    // xattr on a file; a .git planted deep; a fifo.
                    let _ = rustix::fs::setxattr(
                        p.join("calc.py"),
                        "user.x",
                        b"1",
                        rustix::fs::XattrFlags::empty(),
                    );
                    std::fs::create_dir_all(p.join("pkg/.git")).unwrap();
                    std::fs::write(p.join("pkg/.git/HEAD"), "ref: x").unwrap();
                    rustix::fs::mknodat(
                        rustix::fs::CWD,
                        p.join("fifo"),
                        rustix::fs::FileType::Fifo,
                        rustix::fs::Mode::RWXU,
                        0,
                    )
                    .unwrap();
                }
                4 => {
                    // chmod +x a file, a rename round trip of a folder.
                    std::fs::set_permissions(
                        p.join("calc.py"),
                        std::os::unix::fs::PermissionsExt::from_mode(0o755),
                    )
                    .unwrap();
                    std::fs::rename(p.join("pkg"), p.join("pkg2")).unwrap();
                    std::fs::rename(p.join("pkg2"), p.join("pkg")).unwrap();
                }
                _ => {
                    // A folder replaced by a copy with the same files (new inodes everywhere).
                    std::fs::rename(p.join("pkg"), other.path().join("pkg")).unwrap();
                    std::fs::create_dir(p.join("pkg")).unwrap();
                    std::fs::write(p.join("pkg/a.py"), "a = 1\n").unwrap();
                    std::fs::write(p.join("pkg/b.py"), "evil\n").unwrap();
                }
            }
            room.undo_in_background();
            room.reset_to(tree).unwrap();
            holds_exactly(&room, &repo, tree);
            let mode = std::fs::metadata(room.path().join("calc.py"))
                .unwrap()
                .mode();
            assert_eq!(mode & 0o111, 0, "round {round}");
            let x = rustix::fs::getxattr(room.path().join("calc.py"), "user.x", &mut [0u8; 8]);
            assert!(x.is_err(), "round {round}");
        }
    }
}
