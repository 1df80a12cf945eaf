//! Work trees kept from run to run: a run that ends hands its work tree back, detached, and
//! the next run on the repository takes it, writing only the paths that differ from what it
//! holds instead of checking out every file again. Before a run sees it, everything an
//! earlier run left there (untracked and ignored files, links, a planted `.git`, changed
//! tracked files) is removed, so it looks exactly like a fresh checkout. Each slot has a lock
//! file: two runs never share a tree, and a run that dies lets go of its slot.

use super::clean_since::{self, CleanSince};
use super::recorded::Recorded;
use super::setup::{check_branch_free, SetupError};
use super::Workspace;
use crate::leftovers::{remove_forcibly, Lease};
use git2::build::CheckoutBuilder;
use git2::{BranchType, Oid, Repository};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How many work trees a repository keeps: one per run going on at the same time.
pub const SIZE: usize = 2;

/// A pool slot held by a run: its tree is the run's until the slot is handed back.
#[derive(Debug)]
pub struct Slot {
    /// Shared with the thread that makes the slot's tree ready: the slot is free only once
    /// both let go, however the run ends.
    _lock: std::sync::Arc<Lease>,
    index: usize,
}

/// The git name of slot `k`'s work tree, as `git worktree list` shows its path.
fn name_of(k: usize) -> String {
    format!("agent-git-pool-{k}")
}

fn parent_of(repo: &Repository) -> PathBuf {
    repo.commondir().join("agent-git")
}

pub(super) fn path_of(repo: &Repository, k: usize) -> PathBuf {
    parent_of(repo).join(format!("pool-{k}"))
}

pub(super) fn lock_of(repo: &Repository, k: usize) -> PathBuf {
    parent_of(repo).join(format!("pool-{k}.lease"))
}

/// Where slot `k`'s record of when its tree was last exact is kept (see `clean_since`).
fn record_of(repo: &Repository, k: usize) -> PathBuf {
    parent_of(repo).join(format!("pool-{k}.clean"))
}

/// Whether a lease file name in `agent-git/` is a pool slot's (never a run's).
pub fn is_slot_lease(name: &str) -> bool {
    name.starts_with("pool-") && name.ends_with(".lease")
}

impl Workspace {
    /// The run's work tree on `branch` (made at `base` when `fresh`): a pooled one when a slot
    /// is free, else one of its own as `create` and `resume` make. The slot comes back with it.
    pub fn take(
        repo: &Repository,
        base: Oid,
        branch: &str,
        run_id: &str,
        fresh: bool,
    ) -> Result<(Workspace, Option<Slot>), SetupError> {
        if fresh {
            check_branch_free(repo, branch)?;
            repo.branch(branch, &repo.find_commit(base)?, false)?;
            // From here the branch is a run's, report or not.
            if let Err(e) = super::discard::note_unreported(repo.commondir(), run_id, branch, base)
            {
                delete_branch(repo, branch);
                return Err(SetupError::Io(repo.commondir().join("agent-git"), e));
            }
        }
        let parent = parent_of(repo);
        std::fs::create_dir_all(&parent).map_err(|e| SetupError::Io(parent.clone(), e))?;
        for k in 1..=SIZE {
            // A slot that is busy, or whose lock cannot be had at all, is passed over.
            let Ok(Some(held)) = Lease::hold(&lock_of(repo, k)) else {
                continue;
            };
            let slot = Slot {
                _lock: std::sync::Arc::new(held),
                index: k,
            };
            let lease_path = parent.join(format!("{run_id}.lease"));
            let lease = match Lease::take(&lease_path) {
                Ok(lease) => lease,
                Err(e) => {
                    // Leave nothing behind: a branch made for this run holds nothing yet.
                    if fresh {
                        delete_branch(repo, branch);
                    }
                    return Err(SetupError::Io(lease_path, e));
                }
            };
            match fill_apart(repo, &slot, branch) {
                Ok(tree) => {
                    let lease = (lease, lease_path);
                    return Ok((
                        in_slot(repo, tree, base, branch, run_id, k, lease),
                        Some(slot),
                    ));
                }
                // A slot that cannot be emptied or made anew (what a run left there may
                // resist removal) does not stop the run: it gets a work tree of its own.
                Err(_) => {
                    // Half made, it could hold the run's branch as checked out there.
                    clear(repo, k);
                    drop(lease);
                    let _ = std::fs::remove_file(&lease_path);
                    break;
                }
            }
        }
        let workspace = super::setup::attach(repo, base, branch, run_id, fresh)?;
        Ok((workspace, None))
    }
}

/// The workspace of a run in slot `k`, under the run's own lease (which says it is going on).
fn in_slot(
    repo: &Repository,
    (tree, readiness): (Repository, super::ready::Readiness),
    base: Oid,
    branch: &str,
    run_id: &str,
    k: usize,
    lease: (Lease, PathBuf),
) -> Workspace {
    Workspace {
        handle: tree,
        readiness,
        run_id: run_id.to_string(),
        branch: branch.to_string(),
        base,
        worktree_path: path_of(repo, k),
        worktree_name: name_of(k),
        common_dir: repo.commondir().to_path_buf(),
        max_file_size: crate::settings::defaults().max_file_size,
        lease: Some(lease),
        index_known: std::cell::Cell::new(None),
    }
}

/// Slot `k`'s tree on `branch`, as `fill` makes it; but where the slot holds a tree to reuse,
/// only a handle on it now, and the tree made clean in a thread of its own, which the
/// workspace waits for before anything reads or writes the tree (`ready`). At 100,000 files
/// the reuse takes 0.3 s of CPU (the index read and written whole, an `lstat` a file); where
/// the base was tested before the take (`--if-failing`), the first model request waited for
/// all of it. A first checkout stays here: the tools' guard and the sandbox need the tree's
/// folder from the start, and waiting for it later made it run after the clean room's
/// checkout instead of beside it.
fn fill_apart(
    repo: &Repository,
    slot: &Slot,
    branch: &str,
) -> Result<(Repository, super::ready::Readiness), SetupError> {
    use super::ready::Readiness;
    let k = slot.index;
    if !reusable(repo, k) {
        return Ok((fill(repo, k, branch)?, Readiness::ready()));
    }
    let handle = open_slot(repo, k)?;
    let common = repo.commondir().to_path_buf();
    let (held, common_there, branch_there) =
        (slot._lock.clone(), common.clone(), branch.to_string());
    let going = std::thread::Builder::new()
        .name("agent-git-pool".to_string())
        .spawn(move || {
            let _held = held;
            // It yields to the base's test and the brief, which the first request waits for.
            let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10);
            super::ready::after_the_start();
            let _one = crate::memory::one_index_at_a_time();
            let repo = Repository::open(&common_there)?;
            let taken = reuse_exact(&repo, k, &branch_there).map(drop);
            drop(repo);
            crate::memory::give_back();
            taken
        });
    let Ok(going) = going else {
        return Ok((fill(repo, k, branch)?, Readiness::ready()));
    };
    // Never in the thread: it would take the folder away while the run sets its guard and
    // sandbox up in it. At the first wait, the run has nothing else going there.
    let branch = branch.to_string();
    let anew = move || -> Result<(), SetupError> {
        fill_anew(&Repository::open(&common)?, k, &branch).map(drop)
    };
    Ok((handle, Readiness::going(going, Box::new(anew))))
}

/// Whether slot `k` holds a tree `reuse` may try.
fn reusable(repo: &Repository, k: usize) -> bool {
    let admin = repo.commondir().join("worktrees").join(name_of(k));
    admin.join("HEAD").is_file() && path_of(repo, k).is_dir()
}

/// Slot `k`'s tree on `branch`: the pooled one made clean, or, when there is none or it
/// cannot be trusted, a fresh checkout in its place.
fn fill(repo: &Repository, k: usize, branch: &str) -> Result<Repository, SetupError> {
    reuse_exact(repo, k, branch).or_else(|_| fill_anew(repo, k, branch))
}

/// Slot `k`'s pooled tree made clean on `branch`, and its record written.
fn reuse_exact(repo: &Repository, k: usize, branch: &str) -> Result<Repository, SetupError> {
    let path = path_of(repo, k);
    let (tree, exact, trust_ctime) = reuse(repo, k, branch)?;
    // A handle of its own for the run: the one that made the tree clean holds the index it
    // read (tens of MiB on a large repository) until the first commit needs it again.
    drop(tree);
    // Exact now, and nothing of the run has touched it yet.
    if trust_ctime {
        clean_since::write(&record_of(repo, k), &path, exact);
    }
    Ok(Repository::open(&path)?)
}

/// Slot `k` emptied and `branch` checked out there anew.
fn fill_anew(repo: &Repository, k: usize, branch: &str) -> Result<Repository, SetupError> {
    let path = path_of(repo, k);
    clear(repo, k);
    let tip = |r: &Repository| -> Option<Oid> {
        let branch = r.find_branch(branch, BranchType::Local).ok()?;
        Some(branch.get().peel_to_tree().ok()?.id())
    };
    let before = tip(repo);
    super::setup::add_work_tree(repo, &name_of(k), &path, branch)?;
    let tree = Repository::open(&path)?;
    // The tree the checkout wrote, if the branch did not move while it ran.
    match (before, tip(&tree)) {
        (Some(before), Some(after)) if before == after && trusts_ctime(&tree) => {
            clean_since::write(&record_of(repo, k), &path, after);
        }
        _ => {}
    }
    Ok(tree)
}

/// Whether `tree`'s repository trusts change times (`core.trustctime`, true unless set; not
/// where its config cannot be read).
fn trusts_ctime(tree: &Repository) -> bool {
    tree.config()
        .is_ok_and(|c| !c.get_bool("core.trustctime").is_ok_and(|trust| !trust))
}

/// The pooled tree of slot `k`, emptied of whatever an earlier run left and checked out on
/// `branch`: only the paths that differ from the commit it holds are written. With it, the
/// tree it now holds exactly, and whether the repository trusts change times.
fn reuse(repo: &Repository, k: usize, branch: &str) -> Result<(Repository, Oid, bool), SetupError> {
    let path = path_of(repo, k);
    if !reusable(repo, k) {
        return Err(SetupError::Io(path, std::io::ErrorKind::NotFound.into()));
    }
    // Taken (and removed) first: a take that fails leaves none.
    let since = clean_since::take(&record_of(repo, k), &path);
    let tree = open_slot(repo, k)?;
    let held = tree.head()?.peel_to_tree()?;
    // The status below finds what differs from the commit the tree holds only through an
    // index that names it, unmarked.
    let mut index = tree.index()?;
    // Where the repository says not to trust a file's change time, a file rewritten at its
    // old size and modification time looks unchanged: then no stat data is kept, and every
    // file is read.
    let distrust = !trusts_ctime(&tree);
    super::index_of(&mut index, &held, distrust)?;
    super::compact_index(&mut index)?;
    let recorded = Recorded::of(&tree, &index, !distrust);
    let since = since.filter(|s| !distrust && tree.find_tree(s.tree).is_ok());
    let look = Look::Content(&recorded, since.as_ref());
    let mut paths = remove_leftovers(&tree, &path, look)?;
    // Found through the tree's own handle: libgit2 checks out only its own objects.
    let target = tree
        .find_branch(branch, BranchType::Local)?
        .get()
        .peel_to_tree()?;
    let diff = super::trees::diff(&tree, Some(&held), Some(&target), None)?;
    for delta in diff.deltas() {
        let files = [delta.old_file(), delta.new_file()];
        paths.extend(files.iter().filter_map(|f| f.path()).map(Path::to_path_buf));
    }
    drop(diff);
    // Only the paths that differ between the two trees, and those the sweep found, are looked
    // at and written: a checkout of the whole tree lists every file of it in memory. HEAD
    // still names what the tree holds, which libgit2 takes as the baseline.
    if !paths.is_empty() {
        let mut checkout = CheckoutBuilder::new();
        checkout.force().disable_pathspec_match(true);
        for rel in &paths {
            checkout.path(rel.as_path());
        }
        tree.checkout_tree(target.as_object(), Some(&mut checkout))?;
    }
    let turn = super::setup::worktrees_lock(repo);
    tree.set_head(&format!("refs/heads/{branch}"))?;
    drop(turn);
    let exact = target.id();
    drop((held, target, index));
    Ok((tree, exact, !distrust))
}

/// Slot `k`'s tree, opened through a link to its git dir written again: a run may have
/// planted its own, to another repository.
pub(super) fn open_slot(repo: &Repository, k: usize) -> Result<Repository, SetupError> {
    let admin = repo.commondir().join("worktrees").join(name_of(k));
    let dot_git = path_of(repo, k).join(".git");
    remove_forcibly(&dot_git).map_err(|e| SetupError::Io(dot_git.clone(), e))?;
    let link = format!("gitdir: {}\n", admin.display());
    std::fs::write(&dot_git, link).map_err(|e| SetupError::Io(dot_git.clone(), e))?;
    Ok(Repository::open(path_of(repo, k))?)
}

/// How closely a sweep looks at the entries the commit names.
#[derive(Clone, Copy)]
pub(super) enum Look<'i> {
    /// As a fresh checkout has them, content and all: a file or link whose stat data is not
    /// the index's (or is too recent for it to tell) is read and hashed.
    /// With the record of when the tree was last exact, if there is one: what nothing
    /// touched since is taken as it was then, and folders nothing touched are not read.
    Content(&'i Recorded<'i>, Option<&'i CleanSince>),
    /// Names and kinds only: what a run made under a new name, or in place of a folder, a file
    /// or a link, goes. A tracked file a run rewrote stays until the next run's sweep, which
    /// looks at content.
    Names,
}

/// Removes every path of the tree that is not as a fresh checkout of the commit it holds
/// would have it (with `Look::Content`; see `Look::Names` for the other): untracked and
/// ignored files and folders whole (links removed, never followed), and changed tracked
/// files, which the checkout must then write again. Says which of the commit's paths it
/// removed or found missing.
pub(super) fn remove_leftovers(
    tree: &Repository,
    root: &Path,
    look: Look<'_>,
) -> Result<Vec<PathBuf>, SetupError> {
    let held = tree.head()?.peel_to_tree()?;
    remove_unlisted(tree, &held, root, look)
}

/// Makes every folder the commit `tree` holds hold nothing but the names the commit gives it,
/// exactly (a `.git` planted there, `.GIT`, a pipe, a socket, a name git's status takes for
/// another's or passes over), with the mode a fresh checkout gives a folder, each entry of the
/// kind the commit gives it and, as `look` says, its content; and empties the folders of
/// submodules. Says which of the commit's paths it removed or found missing (for the checkout
/// to write again). One read of each folder, but none of a folder the record says nothing
/// touched; each entry's stat data is read relative to its folder, links never followed.
fn remove_unlisted(
    repo: &Repository,
    tree: &git2::Tree,
    root: &Path,
    look: Look<'_>,
) -> Result<Vec<PathBuf>, SetupError> {
    let umask = umask();
    // What a checkout gives the folders it makes.
    let mode = 0o755 & !umask;
    let since = match look {
        Look::Content(_, since) => since,
        Look::Names => None,
    };
    let mut removed = Vec::new();
    let mut folders = vec![Folder {
        rel: PathBuf::new(),
        id: tree.id(),
        was: since.map(|s| s.tree),
        above: true,
    }];
    while let Some(folder) = folders.pop() {
        let rel = &folder.rel;
        let listed = repo.find_tree(folder.id)?;
        let top = rel.as_os_str().is_empty();
        // The top by its own name: `join("")`'s trailing slash would follow a link there.
        let dir = if top {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        let io = |e: std::io::Error| SetupError::Io(dir.clone(), e);
        let meta = std::fs::symlink_metadata(&dir).map_err(io)?;
        if !meta.is_dir() {
            // Only the top can be anything else here: a link where the tree was.
            return Err(io(std::io::Error::other("not a folder")));
        }
        for entry in listed.iter() {
            if leaves_folder(entry.name_bytes()) {
                // No git writes such a name: the slot is not trusted.
                return Err(io(std::io::Error::other(
                    "a tree entry's name leaves its folder",
                )));
            }
        }
        // Whether this folder is, since the record, the one that was at its path then: the top
        // is the top; any other, and each folder above it, last changed before the record (a
        // rename moves the change time of what it moves, and of the folders it changes).
        let here = since.filter(|s| top || (folder.above && s.older(&meta)));
        // The record's tree here is this folder's: then an entry that last changed before the
        // record holds what the commit gives it.
        let same = here.is_some() && folder.was == Some(folder.id);
        if same && !top {
            // Its names are the record's: each is looked up, and the folder is not read.
            if let Some(inside) = untouched(&dir, rel, &listed, here, umask) {
                with_mode(&dir, &meta, mode).map_err(io)?;
                folders.extend(inside);
                continue;
            }
        }
        with_mode(&dir, &meta, mode).map_err(io)?;
        // The record's tree here, where it differs: what of it each entry had then.
        let was = match (here, same, folder.was) {
            (Some(_), false, Some(was)) => repo.find_tree(was).ok(),
            _ => None,
        };
        let was_of = |name: &[u8], id: Oid| {
            if same {
                Some(id)
            } else {
                was.as_ref()
                    .and_then(|t| t.get_name_bytes(name).map(|e| e.id()))
            }
        };
        let mut names = std::collections::HashMap::with_capacity(listed.len());
        for entry in listed.iter() {
            names.insert(
                entry.name_bytes().to_vec(),
                (entry.filemode(), entry.id(), false),
            );
        }
        for found in std::fs::read_dir(&dir).map_err(io)? {
            let found = found.map_err(io)?;
            let name = found.file_name();
            let path = dir.join(&name);
            let fail = |e: std::io::Error| SetupError::Io(path.clone(), e);
            let Some((filemode, id, seen)) = names.get_mut(name.as_bytes()) else {
                // The work tree's own link to its git dir stays.
                if !(top && name == ".git") {
                    remove_forcibly(&path).map_err(fail)?;
                }
                continue;
            };
            *seen = true;
            let sub = rel.join(&name);
            let kind = found.file_type().map_err(fail)?;
            // What the entry holds, if it is what the record's tree had here.
            let kept_since = |meta: &std::fs::Metadata| {
                here.is_some_and(|s| s.older(meta)) && was_of(name.as_bytes(), *id) == Some(*id)
            };
            let keep = match (*filemode, look) {
                (0o040000, _) if kind.is_dir() => {
                    folders.push(Folder {
                        rel: sub.clone(),
                        id: *id,
                        was: was_of(name.as_bytes(), *id),
                        above: here.is_some(),
                    });
                    true
                }
                // A submodule's folder is empty in a fresh checkout, with a folder's mode.
                (0o160000, _) if kind.is_dir() => {
                    let meta = found.metadata().map_err(fail)?;
                    with_mode(&path, &meta, mode).map_err(fail)?;
                    for inside in std::fs::read_dir(&path).map_err(fail)? {
                        let inside = inside.map_err(fail)?.path();
                        remove_forcibly(&inside).map_err(|e| SetupError::Io(inside.clone(), e))?;
                    }
                    true
                }
                (0o120000, Look::Names) => kind.is_symlink(),
                (0o100644 | 0o100755, Look::Names) => kind.is_file(),
                (0o120000, Look::Content(recorded, _)) if kind.is_symlink() => {
                    let meta = found.metadata().map_err(fail)?;
                    kept_since(&meta) || recorded.holds(&sub, &path, &meta, *id)
                }
                // A file as a checkout writes it: its own (no other name shares it, which a
                // write would change too), with the mode the commit gives it and its content.
                // A pipe, a socket, another mode or a second name goes, and the checkout
                // writes it.
                (file @ (0o100644 | 0o100755), Look::Content(recorded, _)) if kind.is_file() => {
                    let meta = found.metadata().map_err(fail)?;
                    as_written(file, meta.mode(), meta.nlink(), umask)
                        && (kept_since(&meta) || recorded.holds(&sub, &path, &meta, *id))
                }
                _ => false,
            };
            if !keep {
                remove_forcibly(&path).map_err(fail)?;
                removed.push(sub);
            }
        }
        // Named by the commit, and not there.
        for (name, (filemode, _, seen)) in names {
            if !seen && filemode != 0o160000 {
                removed.push(rel.join(std::ffi::OsStr::from_bytes(&name)));
            }
        }
    }
    Ok(removed)
}

/// A folder the sweep has yet to look at.
struct Folder {
    /// Its path in the tree.
    rel: PathBuf,
    /// The commit's tree there.
    id: Oid,
    /// The record's tree there, if the record has one and a folder there.
    was: Option<Oid>,
    /// Whether each folder above it but the top last changed before the record.
    above: bool,
}

/// Whether a tree entry's name is one no git writes, as it would lead out of its folder.
fn leaves_folder(name: &[u8]) -> bool {
    name.is_empty() || name == b"." || name == b".." || name.contains(&b'/')
}

/// Whether a file with this `mode` (`st_mode`) and number of names is as a checkout writes a
/// file of the tree's `filemode`: its own, with the permissions the checkout gives it.
fn as_written(filemode: i32, mode: u32, links: u64, umask: u32) -> bool {
    links == 1 && mode & 0o7777 == u32::try_from(filemode & 0o777).unwrap_or(0) & !umask
}

/// The folders inside the folder at `dir` (`rel` in the tree, whose names have not changed
/// since the record, which holds `listed` there) when each of its entries is still what the
/// record found there: of the kind and mode the commit gives it, a file with no other name,
/// and (but for a folder) last changed before the record. `None` when one is not (the folder
/// is then looked at closely).
fn untouched(
    dir: &Path,
    rel: &Path,
    listed: &git2::Tree,
    since: Option<&CleanSince>,
    umask: u32,
) -> Option<Vec<Folder>> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let since = since?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // A folder that cannot be opened so is read as any other.
    let fd = rustix::fs::open(dir, flags, Mode::empty()).ok()?;
    let mut inside = Vec::new();
    for entry in listed.iter() {
        let name = std::ffi::OsStr::from_bytes(entry.name_bytes());
        let stat = rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        let fits = match entry.filemode() {
            0o040000 => kind == FileType::Directory,
            0o120000 => kind == FileType::Symlink,
            file @ (0o100644 | 0o100755) => {
                kind == FileType::RegularFile
                    && as_written(file, stat.st_mode, links_of(&stat), umask)
            }
            // A submodule's folder, or what no checkout writes: looked at closely.
            _ => false,
        };
        // A folder inside is the one that was there (this folder's names have not changed);
        // whether its own have is for its own look.
        if !fits || (kind != FileType::Directory && !since.older_stat(&stat)) {
            return None;
        }
        if kind == FileType::Directory {
            inside.push(Folder {
                rel: rel.join(name),
                id: entry.id(),
                was: Some(entry.id()),
                above: true,
            });
        }
    }
    Some(inside)
}

/// How many names the file whose stat data is `stat` has.
#[allow(clippy::useless_conversion)] // a narrower type on some platforms
fn links_of(stat: &rustix::fs::Stat) -> u64 {
    u64::from(stat.st_nlink)
}

/// Gives the folder at `path` (whose stat data is `meta`) the mode `mode`, if it has another.
fn with_mode(path: &Path, meta: &std::fs::Metadata, mode: u32) -> std::io::Result<()> {
    if meta.permissions().mode() & 0o7777 == mode {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// The process's umask, which a checkout's files and folders get their modes through.
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|m| u32::from_str_radix(m.trim(), 8).ok())
        .unwrap_or(0o022)
}

/// Slot `k` without a tree: its work tree unregistered and its folder gone.
pub(super) fn clear(repo: &Repository, k: usize) {
    if let Ok(worktree) = repo.find_worktree(&name_of(k)) {
        let mut prune = git2::WorktreePruneOptions::new();
        prune.valid(true).locked(true).working_tree(true);
        let _ = worktree.prune(Some(&mut prune));
    }
    // What git could not prune (a git dir it does not take for a work tree's) would stop the
    // next `worktree add` of this name.
    let _ = remove_forcibly(&repo.commondir().join("worktrees").join(name_of(k)));
    let _ = remove_forcibly(&path_of(repo, k));
    clean_since::forget(&record_of(repo, k));
}

fn delete_branch(repo: &Repository, branch: &str) {
    let _ = repo
        .find_branch(branch, BranchType::Local)
        .and_then(|mut b| b.delete());
    forget_unreported_branch(repo, branch);
}

/// The record of the run that made `branch`, which is gone with it.
fn forget_unreported_branch(repo: &Repository, branch: &str) {
    for run in super::discard::unreported(repo) {
        if run.branch == branch {
            super::discard::forget_unreported(repo.commondir(), &run.run_id);
        }
    }
}

/// The end of a run's hold on its work tree: a pooled one goes back to the pool emptied of
/// what the run left and detached (its branch is then checked out nowhere), any other is
/// removed. The branch stays.
pub fn finish(workspace: Workspace, slot: Option<Slot>) -> Result<(), super::WorkspaceError> {
    let Some(slot) = slot else {
        return workspace.remove_worktree();
    };
    if workspace.settle().is_err() {
        // Never made ready, so never seen by the run: the slot starts anew next time.
        clear(&Repository::open(&workspace.common_dir)?, slot.index);
        workspace.forget_lease();
        return Ok(());
    }
    let handed_back = give_back(&workspace);
    if handed_back.is_err() {
        // A tree that cannot be handed back clean is not kept.
        clear(&Repository::open(&workspace.common_dir)?, slot.index);
    }
    workspace.forget_lease();
    drop(slot);
    handed_back
}

/// Nothing the run made outlives it (its branch may name a file there by its absolute path,
/// which must fail elsewhere as it fails here), and the tree holds no branch.
fn give_back(workspace: &Workspace) -> Result<(), super::WorkspaceError> {
    let tree = workspace.tree()?;
    remove_leftovers(tree, &workspace.worktree_path, Look::Names).map_err(|e| {
        super::WorkspaceError::Unsafe(format!("cannot empty the work tree for the pool: {e}"))
    })?;
    let head = workspace.head()?;
    Ok(tree.set_head_detached(head)?)
}

/// `finish`, and the branch deleted: for a run that made nothing worth keeping.
pub fn discard(workspace: Workspace, slot: Option<Slot>) -> Result<(), super::WorkspaceError> {
    let common = workspace.common_dir.clone();
    let branch = workspace.branch.clone();
    finish(workspace, slot)?;
    let main = Repository::open(&common)?;
    main.find_branch(&branch, BranchType::Local)?.delete()?;
    forget_unreported_branch(&main, &branch);
    Ok(())
}
