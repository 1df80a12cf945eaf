//! The only code that writes git: the run's branch, its linked worktree, one commit per
//! accepted change, the report commit, and the clean room the tests run in. The user's HEAD,
//! index and working tree are never opened for writing.

mod clean_since;
mod cleanroom;
pub mod dates;
pub mod demo;
pub mod derived;
mod dirty;
pub mod discard;
pub mod entries;
pub mod export;
mod index_file;
pub mod land;
pub mod notes;
pub mod pool;
mod ready;
mod recorded;
pub mod rooms;

mod restore;
pub mod sets;
mod setup;
pub mod sweep;
mod tested;
pub mod trees;

pub use ready::{after_the_start, start_is_over};

pub use cleanroom::{
    check_out_room, write_new, CleanRoom, ProtectedMemo, RunDirs, CHECK_OUT_ROOM, OVERLAYS,
};
pub use dirty::{snapshot_working_tree, uncommitted};
pub use restore::{Absorbed, Snapshot};
pub use setup::{
    add_work_tree_here, base_reader, base_readers, check_branch_free, open_user_repo, read_blob,
    resolve_base, tree_files, BaseInfo, SetupError, ADD_WORK_TREE,
};
pub use tested::{record_tested, recorded, tested, Tested, TESTED_DIR};

use crate::guard::{changed_test_sections, Protection};
use git2::{
    IndexEntry, IndexTime, Oid, Repository, Signature, Status, StatusOptions, WorktreePruneOptions,
};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The name agent-git authors its commits as (edits, reports, set summaries).
pub const AGENT_NAME: &str = "agent-git";
/// The email of `AGENT_NAME`.
pub const AGENT_EMAIL: &str = "agent-git@localhost";

/// What git's status says when the work tree differs from the index.
const WORK_TREE_CHANGE: Status = Status::WT_NEW
    .union(Status::WT_MODIFIED)
    .union(Status::WT_DELETED)
    .union(Status::WT_TYPECHANGE);

/// The index format of a run's work tree. libgit2 reads the whole file into one buffer at
/// every load, beside the entries it makes of it; version 4 writes each path as what differs
/// from the one before it, which takes a fifth off on a large tree (8.8 to 6.9 MB at 100,000
/// files). git reads it as any other.
const INDEX_VERSION: u32 = 4;

/// Writes `index` again in `INDEX_VERSION` if it is in another.
pub(crate) fn compact_index(index: &mut git2::Index) -> Result<(), git2::Error> {
    if index.version() != INDEX_VERSION {
        index.set_version(INDEX_VERSION)?;
        index.write()?;
    }
    Ok(())
}

/// Makes `index` name exactly `tree`, without stat data, if something else moved it or marked
/// entries whose files git's status would then not look at (assume-unchanged, skip-worktree),
/// or if `anew`; otherwise leaves it, stat data and all.
pub(crate) fn index_of(
    index: &mut git2::Index,
    tree: &git2::Tree,
    anew: bool,
) -> Result<(), git2::Error> {
    let hides = |e: &git2::IndexEntry| {
        e.flags & git2::IndexEntryFlag::VALID.bits() != 0
            || e.flags_extended & git2::IndexEntryExtendedFlag::SKIP_WORKTREE.bits() != 0
    };
    if anew || index.write_tree()? != tree.id() || index.iter().any(|e| hides(&e)) {
        // Cleared first: read_tree would keep the stat data and flags of entries whose blob
        // matches, which whoever wrote the index chose.
        index.clear()?;
        index.read_tree(tree)?;
        index.write()?;
    }
    Ok(())
}

/// The agent-git binary that checks whole trees out in processes of its own, once set.
static APART: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Has every checkout of a whole tree (a new work tree, a clean room's first or after a test
/// run removed what it cannot name) done by `agent_git`, this binary, in a process of its own,
/// as `git worktree add` runs its checkout: libgit2 lists every file of the tree in memory and
/// reads every object of it, which a run would otherwise carry, mapped and fragmented, to its
/// end. Without it (as in unit tests), this process checks out itself.
pub fn check_out_apart(agent_git: PathBuf) {
    let _ = APART.set(agent_git);
}

/// Runs `agent-git ARGS` (a hidden command) apart and waits for it: what it said when it
/// failed.
fn run_apart(args: &[&std::ffi::OsStr]) -> Option<Result<(), String>> {
    use std::os::unix::process::CommandExt;
    let agent_git = APART.get()?;
    let mut command = std::process::Command::new(agent_git);
    let parent = rustix::process::getpid();
    // Killed if the run dies, however it dies (a second Ctrl-C, a kill of its process group):
    // it must not go on writing a tree the next run takes. The thread that spawns it waits for
    // it, so it is not the thread's end that kills it.
    // SAFETY: `die_with` is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(move || crate::sandbox::die_with(parent));
    }
    let output = command
        // Out of the terminal's process group: a first Ctrl-C is the run's to handle, as it
        // was when the run checked out itself, and leaves nothing half-written.
        .process_group(0)
        // The hidden command, then `--`: a path or a branch name is never read as a flag.
        .args(&args[..1])
        .arg("--")
        .args(&args[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    Some(match output {
        Err(e) => Err(format!("cannot run {}: {e}", agent_git.display())),
        Ok(done) if done.status.success() => Ok(()),
        Ok(done) => Err(format!(
            "{} ({})",
            String::from_utf8_lossy(&done.stderr).trim(),
            done.status
        )),
    })
}

/// Why an operation on the run's work tree, branch, clean room or stored notes failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// git failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// A file operation failed.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// What was being done, as a verb (`create`, `remove`).
        what: &'static str,
        /// The file or folder it was done to.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Walking the clean room's tree failed.
    #[error("cannot walk the clean room: {0}")]
    Walk(#[from] walkdir::Error),
    /// The harness refused to go on rather than write somewhere it should not.
    #[error("{0}")]
    Unsafe(String),
}

impl WorkspaceError {
    pub(crate) fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        WorkspaceError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The repository's config files that hold a credential (a token, a password, an HTTP header,
/// a URL with a user in it, as CI checkouts leave them): the shared config, the work trees'
/// own (`config.worktree`) and the submodules' (`modules/**/config`). The model's commands and
/// the tests do not read them.
pub fn config_with_credentials(common_dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![
        common_dir.join("config"),
        common_dir.join("config.worktree"),
    ];
    for place in ["worktrees", "modules"] {
        let walk = walkdir::WalkDir::new(common_dir.join(place)).max_depth(6);
        for entry in walk.into_iter().flatten() {
            let name = entry.file_name();
            if entry.file_type().is_file() && (name == "config" || name == "config.worktree") {
                files.push(entry.into_path());
            }
        }
    }
    files.retain(|file| std::fs::read_to_string(file).is_ok_and(|t| holds_credentials(&t)));
    files
}

/// Whether git config text holds something that lets its reader in somewhere.
fn holds_credentials(text: &str) -> bool {
    let lower = text.to_lowercase();
    // A user in an http(s) URL is a token as often as a name (`https://ghp_...@github.com`).
    let userinfo = regex::Regex::new(r"https?://[^/\s@]+@").is_ok_and(|r| r.is_match(&lower));
    lower.contains("extraheader")
        || lower.contains("token")
        || lower.contains("password")
        || userinfo
}

/// Removes whatever is at `path` without following it: a link goes, not what it points to;
/// a directory goes with everything in it. Nothing there is fine.
pub(crate) fn remove_entry(path: &Path) -> Result<(), WorkspaceError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(WorkspaceError::io("inspect", path, e)),
    };
    let removed = if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    removed.map_err(|e| WorkspaceError::io("remove", path, e))
}

/// What happened to a change the agent made in the work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    /// The change is committed on the run's branch: the new commit.
    Committed(Oid),
    /// The work tree already matched the branch: nothing to commit.
    NoChange,
    /// The change touched protected paths; it was rolled back whole.
    Refused(Vec<String>),
    /// A commit hook of the repository refused the change; it was rolled back whole.
    Rejected {
        /// Which hook refused: `pre-commit` or `commit-msg`.
        hook: &'static str,
        /// What the hook printed.
        output: String,
    },
}

/// The repository's own commit hooks, run as `git commit` runs them: `pre-commit` with the
/// change staged, then `commit-msg` on the message.
pub trait CommitHooks {
    /// None when it passed or there is none; the hook's output when it refused.
    fn pre_commit(&self) -> Result<Option<String>, WorkspaceError>;
    /// The message as the hook left it, or the hook's output when it refused.
    fn commit_msg(&self, message: &str) -> Result<Result<String, String>, WorkspaceError>;
    /// Whether a `pre-commit` hook will run: only then can a commit's files change after they
    /// were staged, and the work tree must be looked at again.
    fn runs_pre_commit(&self) -> bool;
}

/// No hooks: `--no-verify`, and the harness's own commits.
pub struct NoHooks;

impl CommitHooks for NoHooks {
    fn pre_commit(&self) -> Result<Option<String>, WorkspaceError> {
        Ok(None)
    }

    fn commit_msg(&self, message: &str) -> Result<Result<String, String>, WorkspaceError> {
        Ok(Ok(message.to_string()))
    }

    fn runs_pre_commit(&self) -> bool {
        false
    }
}

/// Which paths of the work tree a commit looks at.
#[derive(Debug, Clone, Copy)]
pub enum Changed<'p> {
    /// Every path git's status shows changed (after a shell command).
    Status,
    /// Only these paths (after a tool that wrote them): no other file is looked at.
    Paths(&'p [PathBuf]),
}

/// The hooks agent commits run, by their git names.
pub const COMMIT_HOOKS: [&str; 2] = ["pre-commit", "commit-msg"];

/// A file left out of a commit, and why (said to the model).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The file, relative to the work tree.
    pub path: String,
    /// Why it was left out, in words for the model.
    pub why: String,
}

/// Where a commit stands: a tree staged to be committed, or already decided.
enum Staged {
    Tree(Oid),
    Done(CommitOutcome),
}

/// A commit attempt: what became of it, and the files that were left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitResult {
    /// Whether a commit was made, and if not why.
    pub outcome: CommitOutcome,
    /// Files left out of the commit, and why (too large, say).
    pub dropped: Vec<Dropped>,
}

/// One file of a diffstat: a changed path and its lines added and removed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileStat {
    /// The path, relative to the tree's root; a deleted file's old path.
    pub path: String,
    /// Lines added; 0 for a binary file.
    pub added: usize,
    /// Lines removed; 0 for a binary file.
    pub removed: usize,
    /// git sees the file as binary: its lines are not counted.
    pub binary: bool,
}

/// A run's own work: its branch, checked out in a linked work tree outside the user's checkout and
/// held under a lease while the run lives. Every change the model makes is committed there.
pub struct Workspace {
    /// The work tree's repository: through `tree` once the work tree is ready, through
    /// `objects` before, for objects, the config and the branch.
    handle: Repository,
    /// The work tree being made ready, or ready.
    readiness: ready::Readiness,
    /// The run's id: eight hex digits.
    pub run_id: String,
    /// The run's branch, without `refs/heads/`.
    pub branch: String,
    /// The commit the run started from.
    pub base: Oid,
    /// The work tree the model's tools work in.
    pub worktree_path: PathBuf,
    worktree_name: String,
    common_dir: PathBuf,
    /// Files above this size are not committed (`agent-git.maxFileSize`).
    pub max_file_size: u64,
    /// Marks the work tree as this run's while it lives (see `leftovers`), and where.
    lease: Option<(crate::leftovers::Lease, PathBuf)>,
    /// The index file as the last status after a command left it, naming the branch's tree
    /// given: while it is that file still, it still names that tree (`restore`).
    index_known: std::cell::Cell<Option<(restore::FileStamp, Oid)>>,
}

impl Workspace {
    /// The work tree the model's tools work in.
    pub fn path(&self) -> &Path {
        &self.worktree_path
    }

    /// The repository's own git dir (that of the user's checkout), which holds the work tree.
    pub fn git_dir(&self) -> &Path {
        &self.common_dir
    }

    /// The repository's config file, if it holds what looks like a credential: commands may
    /// not read it.
    pub fn config_with_credentials(&self) -> Vec<PathBuf> {
        config_with_credentials(&self.common_dir)
    }

    /// Where the repository's objects are: the clean room borrows them.
    pub fn objects_dir(&self) -> PathBuf {
        self.common_dir.join("objects")
    }

    /// The run's repository, for tools that read its work tree and objects; changes still go
    /// through the workspace's own methods. Waits for the work tree to be ready.
    pub fn repo(&self) -> Result<&Repository, WorkspaceError> {
        self.tree()
    }

    /// The repository with its work tree, index and HEAD ready: waits for them.
    fn tree(&self) -> Result<&Repository, WorkspaceError> {
        self.readiness.wait()?;
        Ok(&self.handle)
    }

    /// The repository for its objects, config and branch only (never HEAD, the index or the
    /// work tree, which may not be ready yet).
    fn objects(&self) -> &Repository {
        &self.handle
    }

    /// Waits for the work tree to be ready: before anything the model's tools do there.
    pub fn ready(&self) -> Result<(), WorkspaceError> {
        self.readiness.wait()
    }

    /// Waits for the work tree's preparation to end, with no checkout anew where it failed:
    /// for a run that is over.
    pub(super) fn settle(&self) -> Result<(), WorkspaceError> {
        self.readiness.settle()
    }

    /// The branch's last commit (the work tree's HEAD names the branch once it is ready).
    pub fn head(&self) -> Result<Oid, WorkspaceError> {
        Ok(self.objects().refname_to_id(&self.branch_ref())?)
    }

    /// The branch's full ref name.
    fn branch_ref(&self) -> String {
        format!("refs/heads/{}", self.branch)
    }

    /// Whether git ignores `rel` and does not track it: a change there could never be committed.
    pub fn is_ignored_untracked(&self, rel: &Path) -> Result<bool, WorkspaceError> {
        let repo = self.tree()?;
        if !repo.is_path_ignored(rel)? {
            return Ok(false);
        }
        let tree = repo.head()?.peel_to_tree()?;
        Ok(tree.get_path(rel).is_err())
    }

    /// Commits whatever the work tree now holds (tracked changes and new files that are not
    /// ignored) as one commit, unless it adds, changes, deletes or renames a protected path or
    /// a test section of a shared config file: then the whole change is rolled back, whatever
    /// produced it. Files over the size limit and links that lead outside the work tree are
    /// left out (and undone), and said so.
    pub fn commit_changes(
        &self,
        subject: &str,
        body: &str,
        protection: &Protection,
        hooks: &dyn CommitHooks,
    ) -> Result<CommitResult, WorkspaceError> {
        self.commit(Changed::Status, subject, body, protection, hooks)
    }

    /// As `commit_changes`, looking only where `changed` says the work tree changed: a tool
    /// that wrote one file costs one file's staging, whatever the size of the tree.
    pub fn commit(
        &self,
        changed: Changed,
        subject: &str,
        body: &str,
        protection: &Protection,
        hooks: &dyn CommitHooks,
    ) -> Result<CommitResult, WorkspaceError> {
        let repo = self.tree()?;
        let head = repo.head()?.peel_to_commit()?;
        let head_tree = head.tree()?;
        let mut index = repo.index()?;
        // The index follows the branch; rebuild it only if something else moved it.
        if index.write_tree()? != head_tree.id() {
            index.read_tree(&head_tree)?;
        }
        let paths = match changed {
            Changed::Status => self.changed_paths()?,
            Changed::Paths(paths) => self.committable(paths, &head_tree)?,
        };
        let mut dropped = self.stage_paths(&mut index, &paths)?;
        let mut staged =
            self.check_staged(!paths.is_empty(), &mut index, &head_tree, protection)?;
        if let (Staged::Tree(_), true) = (&staged, hooks.runs_pre_commit()) {
            if let Some(output) = hooks.pre_commit()? {
                staged = self.roll_back(&mut index, &head_tree, "pre-commit", output)?;
            } else {
                // A hook may have changed files (a formatter): what it left is committed.
                let paths = self.changed_paths()?;
                dropped.extend(self.stage_paths(&mut index, &paths)?);
                staged = self.check_staged(true, &mut index, &head_tree, protection)?;
            }
        }
        let outcome = match staged {
            Staged::Done(outcome) => outcome,
            Staged::Tree(tree_id) => {
                let message = commit_message(subject, body, &self.run_id);
                match hooks.commit_msg(&message)? {
                    Ok(message) => self.commit_tree(tree_id, &head, &message)?,
                    Err(output) => {
                        match self.roll_back(&mut index, &head_tree, "commit-msg", output)? {
                            Staged::Done(outcome) => outcome,
                            Staged::Tree(_) => CommitOutcome::NoChange,
                        }
                    }
                }
            }
        };
        Ok(CommitResult { outcome, dropped })
    }

    /// The staged tree, or why there is nothing to commit: no change, or a protected one
    /// (then rolled back whole).
    fn check_staged(
        &self,
        staged_any: bool,
        index: &mut git2::Index,
        head_tree: &git2::Tree,
        protection: &Protection,
    ) -> Result<Staged, WorkspaceError> {
        let tree_id = index.write_tree()?;
        if tree_id == head_tree.id() {
            // Kept only when something was staged: a 100,000-file index is not rewritten
            // for nothing.
            if staged_any {
                index.write()?;
            }
            return Ok(Staged::Done(CommitOutcome::NoChange));
        }
        let tree = self.objects().find_tree(tree_id)?;
        let touched = protected_changes(self.objects(), head_tree, &tree, protection)?;
        if !touched.is_empty() {
            index.read_tree(head_tree)?;
            index.write()?;
            self.discard_changes()?;
            return Ok(Staged::Done(CommitOutcome::Refused(touched)));
        }
        // Written, so that a hook sees the change staged as `git commit` would show it.
        index.write()?;
        Ok(Staged::Tree(tree_id))
    }

    /// Undoes a change a hook refused: index and work tree back to the branch.
    fn roll_back(
        &self,
        index: &mut git2::Index,
        head_tree: &git2::Tree,
        hook: &'static str,
        output: String,
    ) -> Result<Staged, WorkspaceError> {
        index.read_tree(head_tree)?;
        index.write()?;
        self.discard_changes()?;
        Ok(Staged::Done(CommitOutcome::Rejected { hook, output }))
    }

    fn commit_tree(
        &self,
        tree_id: Oid,
        head: &git2::Commit,
        message: &str,
    ) -> Result<CommitOutcome, WorkspaceError> {
        let repo = self.tree()?;
        let tree = repo.find_tree(tree_id)?;
        let author = dates::signature(AGENT_NAME, AGENT_EMAIL, "GIT_AUTHOR_DATE")?;
        let committer = self.committer()?;
        let oid = repo.commit(Some("HEAD"), &author, &committer, message, &tree, &[head])?;
        Ok(CommitOutcome::Committed(oid))
    }

    /// The repository's hook `name` as `git commit` would run it: under `core.hooksPath`
    /// (relative to the work tree) or the common git dir's `hooks`, if it is an executable file.
    pub fn hook_path(&self, name: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let configured = self
            .objects()
            .config()
            .ok()
            .and_then(|c| c.get_path("core.hooksPath").ok());
        let dir = match configured {
            Some(dir) if dir.is_absolute() => dir,
            // In the work tree: as the branch has it, once it is ready.
            Some(dir) => {
                self.ready().ok()?;
                self.worktree_path.join(dir)
            }
            None => self.common_dir.join("hooks"),
        };
        let path = dir.join(name);
        let meta = std::fs::metadata(&path).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(path)
    }

    /// Every path the work tree shows changed from the index (new files that are not ignored
    /// included), found by the index's stat data: unchanged files are never read.
    fn changed_paths(&self) -> Result<Vec<PathBuf>, WorkspaceError> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .exclude_submodules(true)
            .show(git2::StatusShow::Workdir);
        let statuses = self.tree()?.statuses(Some(&mut opts))?;
        Ok(statuses
            .iter()
            .filter(|entry| entry.status().intersects(WORK_TREE_CHANGE))
            .map(|entry| PathBuf::from(std::ffi::OsStr::from_bytes(entry.path_bytes())))
            .collect())
    }

    /// The paths a tool named that a commit may hold: an untracked file git ignores is not
    /// one (status would not show it either).
    fn committable(
        &self,
        paths: &[PathBuf],
        head_tree: &git2::Tree,
    ) -> Result<Vec<PathBuf>, WorkspaceError> {
        let repo = self.tree()?;
        let mut kept = Vec::with_capacity(paths.len());
        for rel in paths {
            if head_tree.get_path(rel).is_ok() || !repo.is_path_ignored(rel)? {
                kept.push(rel.clone());
            }
        }
        Ok(kept)
    }

    /// Puts `paths` as the work tree has them into `index`, except the ones that may not be
    /// committed, which are undone.
    fn stage_paths(
        &self,
        index: &mut git2::Index,
        paths: &[PathBuf],
    ) -> Result<Vec<Dropped>, WorkspaceError> {
        let mut dropped = Vec::new();
        let mut staged_links: Vec<PathBuf> = Vec::new();
        for rel in paths {
            let rel = rel.as_path();
            let full = self.worktree_path.join(rel);
            let Ok(meta) = std::fs::symlink_metadata(&full) else {
                index.remove_path(rel)?;
                continue;
            };
            let refusal = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&full)
                    .map_err(|e| WorkspaceError::io("read the link", &full, e))?;
                self.link_leaves_tree(rel, &target).then(|| {
                    format!(
                        "it is a symbolic link to {}, outside the repository, which would \
                         not exist where others check the branch out",
                        target.display()
                    )
                })
            } else if meta.is_file() && meta.len() > self.max_file_size {
                Some(format!(
                    "it is {}, over the limit of {} (agent-git.maxFileSize)",
                    human_size(meta.len()),
                    human_size(self.max_file_size)
                ))
            } else if meta.is_dir() {
                // A nested repository: git would record it as a submodule. Leave it alone.
                continue;
            } else if !meta.is_file() {
                // Reading a pipe would wait for a writer that never comes.
                Some("it is not a file, a link or a folder (a pipe, a socket, a device)".into())
            } else {
                None
            };
            // A name git will not store (`git~1/x`, made by a command) is dropped, not fatal.
            let refusal = match refusal {
                None => match index.add_path(rel) {
                    Err(e) if e.class() == git2::ErrorClass::Index => {
                        Some(format!("git will not store a file there ({})", e.message()))
                    }
                    added => added.map(|()| None)?,
                },
                some => some,
            };
            match refusal {
                None => {
                    if meta.file_type().is_symlink() {
                        staged_links.push(rel.to_path_buf());
                    }
                }
                Some(why) => {
                    self.undo_path(rel)?;
                    let shown = rel.to_string_lossy().into_owned();
                    dropped.push(Dropped { path: shown, why });
                }
            }
        }
        // A link committed earlier may now lead outside because a link it goes through
        // changed (`up -> s/..` once `s -> .`): then this change's links are undone.
        if !staged_links.is_empty() && !self.links_leaving(index)?.is_empty() {
            for rel in staged_links {
                self.undo_path(&rel)?;
                index.remove_path(&rel)?;
                if std::fs::symlink_metadata(self.worktree_path.join(&rel)).is_ok() {
                    index.add_path(&rel)?;
                }
                dropped.push(Dropped {
                    path: rel.to_string_lossy().into_owned(),
                    why: "with it, a symbolic link of the branch would lead outside the repository"
                        .into(),
                });
            }
        }
        Ok(dropped)
    }

    /// The symbolic links `index` holds that lead outside the work tree as it is now.
    fn links_leaving(&self, index: &git2::Index) -> Result<Vec<PathBuf>, WorkspaceError> {
        let mut leaving = Vec::new();
        for entry in index.iter().filter(|e| e.mode == 0o120000) {
            let rel = PathBuf::from(std::ffi::OsStr::from_bytes(&entry.path));
            let full = self.worktree_path.join(&rel);
            if let Ok(target) = std::fs::read_link(&full) {
                if self.link_leaves_tree(&rel, &target) {
                    leaving.push(rel);
                }
            }
        }
        Ok(leaving)
    }

    /// Whether a link at `rel` leads outside the work tree or into `.git`: by its text, and,
    /// when the text climbs (`..`), by where it really resolves now, since a link above it
    /// may move the climb elsewhere (`up -> a/s/../..` with `a/s -> ../b`). A climbing link
    /// that resolves nowhere cannot be checked, so it counts as leaving.
    fn link_leaves_tree(&self, rel: &Path, target: &Path) -> bool {
        if link_escapes(rel, target) {
            return true;
        }
        if !target.components().any(|c| c == Component::ParentDir) {
            return false;
        }
        let Ok(root) = self.worktree_path.canonicalize() else {
            return true;
        };
        match self.worktree_path.join(rel).canonicalize() {
            Ok(real) => !real.starts_with(&root) || real.starts_with(root.join(".git")),
            Err(_) => true,
        }
    }

    /// Puts one path back as the branch has it (or removes it, if the branch has none).
    fn undo_path(&self, rel: &Path) -> Result<(), WorkspaceError> {
        remove_entry(&self.worktree_path.join(rel))?;
        let repo = self.tree()?;
        let tree = repo.head()?.peel_to_tree()?;
        if tree.get_path(rel).is_ok() {
            let mut checkout = git2::build::CheckoutBuilder::new();
            checkout.force().update_index(false).path(rel);
            repo.checkout_tree(tree.as_object(), Some(&mut checkout))?;
        }
        Ok(())
    }

    /// The tree of the commit the run started from.
    pub fn base_tree(&self) -> Result<Oid, WorkspaceError> {
        Ok(self.objects().find_commit(self.base)?.tree_id())
    }

    /// The tree the tests are judged on: the branch's last commit, with every protected path
    /// and shared config file whose test sections changed exactly as in the base commit.
    pub fn verification_tree(&self, protection: &Protection) -> Result<Oid, WorkspaceError> {
        let repo = self.objects();
        let head_tree = repo.find_commit(self.head()?)?.tree()?;
        let base_tree = repo.find_commit(self.base)?.tree()?;
        let changes = protected_change_list(repo, &base_tree, &head_tree, protection)?;
        if changes.is_empty() {
            return Ok(head_tree.id());
        }
        let mut index = git2::Index::new()?;
        index.read_tree(&head_tree)?;
        for change in &changes {
            match base_tree.get_path(&change.path) {
                Ok(entry) => index.add(&index_entry(&change.path, &entry))?,
                Err(_) => index.remove_path(&change.path)?,
            }
        }
        Ok(index.write_tree_to(repo)?)
    }

    /// The report: an empty commit on top of the branch.
    pub fn commit_report(&self, message: &str) -> Result<Oid, WorkspaceError> {
        // On the branch, not through HEAD: the report is written also where the work tree
        // never became ready (the HEAD of one that did names the branch).
        let head = self.objects().find_commit(self.head()?)?;
        let author = dates::signature(AGENT_NAME, AGENT_EMAIL, "GIT_AUTHOR_DATE")?;
        let committer = self.committer()?;
        let report = self.objects().commit(
            Some(&self.branch_ref()),
            &author,
            &committer,
            &clean_message(message),
            &head.tree()?,
            &[&head],
        )?;
        discard::forget_unreported(&self.common_dir, &self.run_id);
        Ok(report)
    }

    /// Keeps the run's conversation in git, as the note of its report commit.
    pub fn store_transcript(
        &self,
        report: Oid,
        transcript: &serde_json::Value,
    ) -> Result<Oid, WorkspaceError> {
        notes::store_transcript(self.objects(), report, transcript)
    }

    /// The user's identity when git knows it, else agent-git's own.
    fn committer(&self) -> Result<Signature<'static>, WorkspaceError> {
        Ok(committer(self.objects())?)
    }

    /// Files changed between the base and the branch, with added and removed line counts.
    pub fn diffstat(&self) -> Result<Vec<FileStat>, WorkspaceError> {
        let repo = self.objects();
        let base_tree = repo.find_commit(self.base)?.tree()?;
        let head_tree = repo.find_commit(self.head()?)?.tree()?;
        Ok(diffstat(repo, &base_tree, &head_tree)?)
    }

    /// Removes the worktree and the branch: for a run that made nothing worth keeping.
    pub fn discard(self) -> Result<(), WorkspaceError> {
        self.remove_worktree()?;
        let main = Repository::open(&self.common_dir)?;
        main.find_branch(&self.branch, git2::BranchType::Local)?
            .delete()?;
        discard::forget_unreported(&self.common_dir, &self.run_id);
        Ok(())
    }

    /// Removes the linked worktree; the branch stays.
    pub fn remove_worktree(&self) -> Result<(), WorkspaceError> {
        let main = Repository::open(&self.common_dir)?;
        let worktree = main.find_worktree(&self.worktree_name)?;
        // Whatever git cannot remove (a tree nested deeper than it walks) goes first.
        let _ = crate::leftovers::remove_forcibly(&self.worktree_path);
        worktree.prune(Some(
            WorktreePruneOptions::new()
                .valid(true)
                .locked(true)
                .working_tree(true),
        ))?;
        // prune removes the checkout; the folders that held it may stay behind, empty.
        let _ = std::fs::remove_dir_all(&self.worktree_path);
        if let Some(parent) = self.worktree_path.parent() {
            let _ = std::fs::remove_dir(parent);
        }
        let _ = std::fs::remove_dir(self.common_dir.join("worktrees"));
        self.forget_lease();
        Ok(())
    }

    /// The work tree outlives the run on purpose (`--keep-worktree`): no later run may take
    /// it for a leftover.
    pub fn forget_lease(&self) {
        if let Some((_, path)) = &self.lease {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The path a change of a diff is at: its new one, or the old one of a deletion.
pub(crate) fn delta_path(delta: &git2::DiffDelta) -> String {
    delta
        .new_file()
        .path()
        .or(delta.old_file().path())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Files changed between two trees, with added and removed line counts.
pub fn diffstat(
    repo: &Repository,
    old: &git2::Tree,
    new: &git2::Tree,
) -> Result<Vec<FileStat>, git2::Error> {
    let diff = trees::diff(repo, Some(old), Some(new), None)?;
    let mut stats = Vec::new();
    for (i, delta) in diff.deltas().enumerate() {
        let path = delta_path(&delta);
        let (added, removed, binary) = match git2::Patch::from_diff(&diff, i)? {
            Some(p) => {
                let (_, added, removed) = p.line_stats()?;
                (added, removed, delta.flags().is_binary())
            }
            None => (0, 0, true),
        };
        stats.push(FileStat {
            path,
            added,
            removed,
            binary,
        });
    }
    Ok(stats)
}

/// The user's identity when git knows it, else agent-git's own; dated as git would.
pub(crate) fn committer(repo: &Repository) -> Result<Signature<'static>, git2::Error> {
    let date = "GIT_COMMITTER_DATE";
    match repo.signature() {
        Ok(sig) => dates::signature(
            &String::from_utf8_lossy(sig.name_bytes()),
            &String::from_utf8_lossy(sig.email_bytes()),
            date,
        ),
        Err(_) => dates::signature(AGENT_NAME, AGENT_EMAIL, date),
    }
}

/// A change to a protected path, or to a test section of a shared config file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProtectedChange {
    path: PathBuf,
    /// For a shared config file: the file and its changed test sections.
    sections: Option<String>,
}

impl ProtectedChange {
    fn describe(&self) -> String {
        match &self.sections {
            Some(sections) => sections.clone(),
            None => self.path.to_string_lossy().into_owned(),
        }
    }
}

/// Every protected path that differs between two trees, and every shared config file whose
/// test sections do.
fn protected_change_list(
    repo: &Repository,
    old: &git2::Tree,
    new: &git2::Tree,
    protection: &Protection,
) -> Result<Vec<ProtectedChange>, git2::Error> {
    let diff = trees::diff(repo, Some(old), Some(new), None)?;
    let blob = |file: git2::DiffFile| -> Option<Vec<u8>> {
        if file.id().is_zero() {
            return None;
        }
        repo.find_blob(file.id()).ok().map(|b| b.content().to_vec())
    };
    let mut changes: Vec<ProtectedChange> = Vec::new();
    for delta in diff.deltas() {
        for path in [delta.old_file().path(), delta.new_file().path()]
            .into_iter()
            .flatten()
        {
            if changes.iter().any(|c| c.path == path) {
                continue;
            }
            let added = delta.old_file().id().is_zero();
            let sections =
                if protection.is_protected(path) || (added && protection.refuses_new(path)) {
                    None
                } else {
                    let (before, after) = (blob(delta.old_file()), blob(delta.new_file()));
                    match changed_test_sections(path, before.as_deref(), after.as_deref()) {
                        Some(sections) => Some(sections),
                        None => continue,
                    }
                };
            changes.push(ProtectedChange {
                path: path.to_path_buf(),
                sections,
            });
        }
    }
    Ok(changes)
}

/// The protected changes between two trees, as the model and the report read them.
fn protected_changes(
    repo: &Repository,
    old: &git2::Tree,
    new: &git2::Tree,
    protection: &Protection,
) -> Result<Vec<String>, git2::Error> {
    Ok(protected_change_list(repo, old, new, protection)?
        .iter()
        .map(ProtectedChange::describe)
        .collect())
}

/// An index entry for a tree entry at `path`: the blob and mode, no stat data.
pub(crate) fn index_entry(path: &Path, entry: &git2::TreeEntry) -> IndexEntry {
    blob_entry(
        path.as_os_str().as_bytes(),
        entry.id(),
        entry.filemode() as u32,
    )
}

/// An index entry naming blob `id` at `path` with `mode`, and no stat data.
pub(crate) fn blob_entry(path: &[u8], id: Oid, mode: u32) -> IndexEntry {
    IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: 0,
        flags_extended: 0,
        path: path.to_vec(),
    }
}

/// Whether a symbolic link at `rel` with `target` leads outside the work tree or into `.git`.
fn link_escapes(rel: &Path, target: &Path) -> bool {
    if target.has_root() {
        return true;
    }
    let mut depth: Vec<&std::ffi::OsStr> = Vec::new();
    let parent = rel.parent().unwrap_or(Path::new(""));
    for component in parent.components().chain(target.components()) {
        match component {
            Component::Normal(part) if part == ".git" => return true,
            Component::Normal(part) => depth.push(part),
            Component::ParentDir if depth.pop().is_none() => return true,
            _ => {}
        }
    }
    false
}

fn human_size(bytes: u64) -> String {
    const MB: u64 = 1024 * 1024;
    if bytes >= MB {
        format!("{:.1} MB", bytes as f64 / MB as f64)
    } else {
        format!("{} KB", bytes.div_ceil(1024))
    }
}

/// The message of an agent edit: the subject in the model's words (the first line of its note),
/// the rest of the note as the body, and trailers naming the tool call and the run. Without a
/// note, the subject is `fallback` (`agent-git: edit calc.py`).
fn commit_message(fallback: &str, note: &str, run_id: &str) -> String {
    let (subject, body) = match note_subject(note) {
        Some((subject, rest)) => (subject, rest),
        None => (fallback.to_string(), String::new()),
    };
    // The model's words keep their lines but show every other control character written out.
    let (subject, body) = (
        crate::text::one_line(&subject),
        without_cut_lines(&crate::text::for_terminal(&body)),
    );
    let action = fallback.strip_prefix("agent-git: ").unwrap_or(fallback);
    let trailers = format!("Agent-Tool: {}\nAgent-Run: {run_id}\n", one_line(action));
    let message = if body.is_empty() {
        format!("{subject}\n\n{trailers}")
    } else {
        format!("{subject}\n\n{body}\n\n{trailers}")
    };
    clean_message(&message)
}

/// `body` with each line that starts with `---` indented: git's and libgit2's trailer readers
/// stop at such a line, so the model's words above one would be read as the commit's trailers
/// (an `Agent-Outcome: passed` of its own making).
fn without_cut_lines(body: &str) -> String {
    let lines: Vec<String> = body
        .split('\n')
        .map(|line| match line.starts_with("---") {
            true => format!(" {line}"),
            false => line.to_string(),
        })
        .collect();
    lines.join("\n")
}

/// The subject a note gives (its first line without markdown marks or a closing period, cut
/// to 72 characters) and what is left for the body (the whole note when the line was cut).
fn note_subject(note: &str) -> Option<(String, String)> {
    let note = note.trim();
    let (first, rest) = note.split_once('\n').unwrap_or((note, ""));
    let line = first
        .trim()
        .trim_start_matches(['#', '*', '-', '>', ' '])
        .trim_end_matches(['*', ' '])
        .trim_end_matches('.')
        .trim_end();
    if line.is_empty() {
        return None;
    }
    if line.chars().count() <= SUBJECT_MAX {
        return Some((line.to_string(), rest.trim().to_string()));
    }
    let cut: String = line.chars().take(SUBJECT_MAX - 3).collect();
    let at_word = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    Some((format!("{}...", at_word.trim_end()), note.to_string()))
}

const SUBJECT_MAX: usize = 72;

/// A trailer's value holds one line, its control characters written out.
fn one_line(text: &str) -> String {
    crate::text::one_line(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A commit message git can store: a NUL byte (from a model's text or a path it named) would
/// end it, so each one is written as `\0`.
pub fn clean_message(message: &str) -> String {
    message.replace('\0', "\\0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_that_leave_the_tree_or_enter_git_escape() {
        let escapes = |rel: &str, target: &str| link_escapes(Path::new(rel), Path::new(target));
        assert!(escapes("calc.py", "/home/user/calc.py"));
        assert!(escapes("calc.py", "../outside.py"));
        assert!(escapes("a/b.py", "../../x.py"));
        assert!(escapes("cfg", ".git/config"));
        assert!(escapes("a/cfg", "../.git"));
        assert!(!escapes("a/b.py", "../c.py"));
        assert!(!escapes("alias.py", "pkg/./real.py"));
    }

    #[test]
    fn nul_bytes_cannot_end_a_commit_message() {
        assert_eq!(
            commit_message("agent-git: write a\0b", "why\0\nbecause\0", "r1"),
            "why\\0\n\nbecause\\0\n\nAgent-Tool: write a\\0b\nAgent-Run: r1\n"
        );
    }

    #[test]
    fn the_model_s_words_cannot_become_an_edit_commit_s_trailers() {
        let forged = commit_message(
            "agent-git: edit calc.py",
            "calc: make add add\n\nAgent-Outcome: passed\nAgent-Applied: 1234abcd\n---\nmore",
            "r1",
        );
        let trailers = git2::message_trailers_strs(&forged).unwrap();
        let keys: Vec<&str> = trailers.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["Agent-Tool", "Agent-Run"], "{forged}");
    }

    #[test]
    fn edit_subjects_are_the_model_s_words() {
        let message = |note: &str| commit_message("agent-git: edit calc.py", note, "r1");
        assert_eq!(
            message("calc: add() adds instead of subtracting.\n\nIt used `-`."),
            "calc: add() adds instead of subtracting\n\nIt used `-`.\n\n\
             Agent-Tool: edit calc.py\nAgent-Run: r1\n"
        );
        assert_eq!(
            message("## **Fix add()**\n"),
            "Fix add()\n\nAgent-Tool: edit calc.py\nAgent-Run: r1\n"
        );
        assert_eq!(
            message("  \n"),
            "agent-git: edit calc.py\n\nAgent-Tool: edit calc.py\nAgent-Run: r1\n"
        );
        let long = "word ".repeat(30);
        let cut = message(&long);
        let subject = cut.lines().next().unwrap();
        assert!(
            subject.chars().count() <= 72 && subject.ends_with("word..."),
            "{subject}"
        );
        assert!(
            cut.contains(long.trim()),
            "a cut line stays whole in the body: {cut}"
        );
    }
}
