//! Putting the work tree back: after a refused change, before the tests, and after every shell
//! command. A model's command can leave links anywhere in the work tree (`tests -> /home/you`,
//! `.git -> ~/.bashrc`), so every write here first removes what was planted, and never follows
//! a link.

use super::{remove_entry, Workspace, WorkspaceError};
use crate::guard::Protection;
use git2::build::CheckoutBuilder;
use git2::{ResetType, Status, StatusOptions};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The state a shell command must leave as it found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    head: git2::Oid,
    dot_git: Vec<u8>,
    /// Whether nothing but agent-git can write the git dir while the command runs (a sandbox
    /// that confines it): the index is then the file agent-git left, unless its stamp moved.
    git_dir_sealed: bool,
}

impl Snapshot {
    /// As the command runs confined (`sealed`) or not.
    pub fn git_dir_sealed(self, sealed: bool) -> Snapshot {
        Snapshot {
            git_dir_sealed: sealed,
            ..self
        }
    }
}

/// A file's identity and the times of its last change, as `lstat` gives them: a `write` to it
/// or a rename in its place moves its change time, which no process can set back (a write
/// through a mapping of it need not, which is why only a sealed git dir trusts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    pub(super) fn of(path: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        meta.is_file().then(|| FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// How deep a folder of the work tree may lie: libgit2 walks no deeper than 100.
const MAX_DEPTH: usize = 90;

/// What the harness did with a shell command's effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Absorbed {
    /// Protected paths the command changed, now as they were.
    pub reverted: Vec<String>,
    /// Git state the command moved, now put back.
    pub restored: Vec<String>,
    /// The commit of everything else the command changed.
    pub commit: super::CommitResult,
}

impl Workspace {
    /// Puts the work tree back to the branch's last commit: tracked files restored, new
    /// (not ignored) files removed.
    pub fn discard_changes(&self) -> Result<(), WorkspaceError> {
        self.remove_planted_links()?;
        let repo = self.tree()?;
        let head = repo.head()?.peel_to_commit()?;
        let mut checkout = CheckoutBuilder::new();
        checkout.force();
        repo.reset(head.as_object(), ResetType::Hard, Some(&mut checkout))?;
        self.remove_untracked()
    }

    /// Removes every link the work tree shows that the branch does not hold as it is, and
    /// every link standing where the branch has a directory: whatever the harness writes next
    /// then lands in the work tree, not where a link points.
    fn remove_planted_links(&self) -> Result<(), WorkspaceError> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(false)
            .include_ignored(true)
            .recurse_ignored_dirs(false)
            .exclude_submodules(true);
        let statuses = self.tree()?.statuses(Some(&mut opts))?;
        for entry in statuses.iter().filter(|e| e.status() != Status::CURRENT) {
            let rel = Path::new(std::ffi::OsStr::from_bytes(entry.path_bytes()));
            self.unlink_at_or_above(rel)?;
        }
        Ok(())
    }

    /// Removes a link at `rel` or at any directory above it (inside the work tree).
    fn unlink_at_or_above(&self, rel: &Path) -> Result<(), WorkspaceError> {
        let mut prefix = PathBuf::new();
        for part in rel.components() {
            prefix.push(part);
            let full = self.worktree_path.join(&prefix);
            match std::fs::symlink_metadata(&full) {
                Ok(meta) if meta.file_type().is_symlink() => return remove_entry(&full),
                Ok(meta) if meta.is_dir() => continue,
                _ => return Ok(()),
            }
        }
        Ok(())
    }

    /// Deletes files git does not track and does not ignore, and the folders they leave empty.
    /// (libgit2's reset does not do this even when asked to.)
    fn remove_untracked(&self) -> Result<(), WorkspaceError> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(true);
        let statuses = self.tree()?.statuses(Some(&mut opts))?;
        let mut dirs = Vec::new();
        for entry in statuses.iter().filter(|e| e.status().is_wt_new()) {
            let path = Path::new(std::ffi::OsStr::from_bytes(entry.path_bytes()));
            let full = self.worktree_path.join(path);
            remove_entry(&full)?;
            dirs.extend(
                full.ancestors()
                    .skip(1)
                    .take_while(|d| *d != self.worktree_path)
                    .map(Path::to_path_buf),
            );
        }
        // Deepest first; a folder that still holds anything (ignored files) stays.
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        dirs.dedup();
        for dir in dirs {
            let _ = std::fs::remove_dir(dir);
        }
        Ok(())
    }

    /// What a command must not have moved: the branch tip, HEAD, the work tree's `.git` file.
    pub fn snapshot(&self) -> Result<Snapshot, WorkspaceError> {
        Ok(Snapshot {
            head: self.head()?,
            dot_git: std::fs::read(self.worktree_path.join(".git")).unwrap_or_default(),
            git_dir_sealed: false,
        })
    }

    /// After a shell command: puts back a moved HEAD or branch and a rewritten `.git` file,
    /// reverts changes to protected paths, and commits everything else as one commit.
    pub fn absorb_command(
        &self,
        subject: &str,
        body: &str,
        protection: &Protection,
        before: &Snapshot,
        hooks: &dyn super::CommitHooks,
    ) -> Result<Absorbed, WorkspaceError> {
        match self.absorb(subject, body, protection, before, hooks) {
            // A tree nested deeper than git walks: cut it off where it goes too deep, once.
            Err(e) if e.to_string().contains("nesting too deep") => {
                let cut = self.cut_too_deep();
                if cut.is_empty() {
                    return Err(e);
                }
                let mut absorbed = self.absorb(subject, body, protection, before, hooks)?;
                absorbed.commit.dropped.extend(cut);
                Ok(absorbed)
            }
            absorbed => absorbed,
        }
    }

    /// Removes every folder of the work tree that lies deeper than git goes, and says so.
    fn cut_too_deep(&self) -> Vec<super::Dropped> {
        let walk = walkdir::WalkDir::new(&self.worktree_path)
            .min_depth(MAX_DEPTH)
            .max_depth(MAX_DEPTH)
            .into_iter()
            .filter_entry(|e| e.file_name() != ".git");
        let deep: Vec<PathBuf> = walk
            .flatten()
            .filter(|e| e.file_type().is_dir())
            .map(|e| e.into_path())
            .collect();
        let mut cut = Vec::new();
        for dir in deep {
            if crate::leftovers::remove_forcibly(&dir).is_ok() {
                let rel = dir.strip_prefix(&self.worktree_path).unwrap_or(&dir);
                cut.push(super::Dropped {
                    path: rel.to_string_lossy().into_owned(),
                    why: format!("it lies {MAX_DEPTH} folders deep or more, deeper than git goes"),
                });
            }
        }
        cut
    }

    fn absorb(
        &self,
        subject: &str,
        body: &str,
        protection: &Protection,
        before: &Snapshot,
        hooks: &dyn super::CommitHooks,
    ) -> Result<Absorbed, WorkspaceError> {
        let mut restored = Vec::new();
        if self.restore_dot_git(&before.dot_git)? {
            restored.push("the work tree's .git file".to_string());
        }
        restored.extend(self.restore_refs(before.head)?);
        let head_tree = self.tree()?.find_commit(before.head)?.tree()?;
        // One look at the work tree serves both: what to put back, and what to commit.
        let changes = self.status_against_branch(&head_tree, before.git_dir_sealed)?;
        let reverted = self.restore_protected(&changes, &head_tree, protection)?;
        let changed: Vec<PathBuf> = changes
            .into_iter()
            .filter(|(rel, status)| {
                status.intersects(super::WORK_TREE_CHANGE)
                    && !reverted.iter().any(|r| Path::new(r) == rel)
            })
            .map(|(rel, _)| rel)
            .collect();
        let commit = self.commit(
            super::Changed::Paths(&changed),
            subject,
            body,
            protection,
            hooks,
        )?;
        Ok(Absorbed {
            reverted,
            restored,
            commit,
        })
    }

    /// Rewrites the work tree's `.git` file if a command changed it, replaced it with a link or
    /// a directory: the old entry is removed, never written through.
    fn restore_dot_git(&self, content: &[u8]) -> Result<bool, WorkspaceError> {
        let dot_git = self.worktree_path.join(".git");
        let intact = std::fs::symlink_metadata(&dot_git).is_ok_and(|m| m.is_file())
            && std::fs::read(&dot_git).is_ok_and(|now| now == content);
        if intact {
            return Ok(false);
        }
        remove_entry(&dot_git)?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&dot_git)
            .and_then(|mut file| std::io::Write::write_all(&mut file, content))
            .map_err(|e| WorkspaceError::io("restore", &dot_git, e))?;
        Ok(true)
    }

    /// Puts back the run's branch and HEAD if a command moved them.
    fn restore_refs(&self, head: git2::Oid) -> Result<Vec<String>, WorkspaceError> {
        let mut restored = Vec::new();
        let repo = self.tree()?;
        let branch_ref = self.branch_ref();
        let head_target = repo
            .find_reference("HEAD")?
            .symbolic_target_bytes()
            .map(|t| String::from_utf8_lossy(t).into_owned());
        if repo.refname_to_id(&branch_ref).ok() != Some(head) {
            repo.reference(
                &branch_ref,
                head,
                true,
                "agent-git: restore the run's branch",
            )?;
            restored.push(format!("branch {}", self.branch));
        }
        if head_target.as_deref() != Some(branch_ref.as_str()) {
            repo.set_head(&branch_ref)?;
            restored.push("HEAD".to_string());
        }
        if !restored.is_empty() {
            // The index may name another commit's tree now; rebuild it from the branch.
            let mut index = repo.index()?;
            index.read_tree(&repo.find_commit(head)?.tree()?)?;
            index.write()?;
        }
        Ok(restored)
    }

    /// Every path where the work tree or the index differs from `head_tree` (the branch's),
    /// with git's status of it, found by the index's stat data (no unchanged file is read).
    /// Ignored files are listed too, but ignored directories are not entered.
    /// Where the command could not write the git dir (`sealed`) and the index file is the
    /// very one a status before found to name `head_tree` entry for entry (agent-git writes it
    /// through a new file and a rename, so any write of its own gives it another stamp), the
    /// work tree is compared with the index alone: the branch's whole tree is not walked
    /// again to compare it with the index (a tenth of the status at 100,000 files). Any other
    /// index is made to name `head_tree` first (`index_of`), and compared with it too: a
    /// command with the sandbox off may leave entries the index's own tree summary (which
    /// `index_of` goes by) does not show, or write the index through a mapping of it, which
    /// leaves its times as they were.
    fn status_against_branch(
        &self,
        head_tree: &git2::Tree,
        sealed: bool,
    ) -> Result<Vec<(PathBuf, Status)>, WorkspaceError> {
        let repo = self.tree()?;
        let index_file = repo.path().join("index");
        let recorded = self.index_known.take();
        let known = sealed
            && FileStamp::of(&index_file)
                .is_some_and(|now| recorded == Some((now, head_tree.id())));
        let mut index = repo.index()?;
        // As the file is now, whatever wrote it since.
        index.read(false)?;
        if !known {
            super::index_of(&mut index, head_tree, false)?;
        }
        let compared = FileStamp::of(&index_file);
        if known && index.len() >= PARTED_STATUS_ENTRIES {
            // Opened anew, as the other part's is: a long-lived handle keeps each `.gitignore`
            // it read for as long as its size, inode and modification time stay, all of which
            // a command can keep while it rewrites the file. One that cannot be opened (a
            // repository opened anew is refused where the handle was not, e.g. for its owner),
            // or a part that fails, leaves it to the one status.
            let fresh = git2::Repository::open(&self.worktree_path).ok();
            let parted = fresh.and_then(|fresh| {
                let parts = status_parts(&fresh, &self.worktree_path, head_tree)?;
                workdir_status_in_parts(&fresh, &self.worktree_path, &parts).ok()
            });
            if let Some(changes) = parted {
                if FileStamp::of(&index_file) == compared {
                    self.index_known
                        .set(compared.map(|now| (now, head_tree.id())));
                }
                return Ok(changes);
            }
        }
        let mut opts = status_options();
        if known {
            opts.show(git2::StatusShow::Workdir);
        }
        let statuses = repo.statuses(Some(&mut opts))?;
        let in_index = Status::INDEX_NEW
            | Status::INDEX_MODIFIED
            | Status::INDEX_DELETED
            | Status::INDEX_RENAMED
            | Status::INDEX_TYPECHANGE;
        let index_named_tree = known || statuses.iter().all(|e| !e.status().intersects(in_index));
        if index_named_tree && compared.is_some() && FileStamp::of(&index_file) == compared {
            self.index_known
                .set(compared.map(|now| (now, head_tree.id())));
        }
        Ok(changed(&statuses))
    }

    /// Puts every protected path of `changes` back as `tree` has it. Ignored files count too
    /// (a model may ignore a conftest.py it plants), but ignored directories are not entered:
    /// node_modules holds test files that are not ours.
    fn restore_protected(
        &self,
        changes: &[(PathBuf, Status)],
        tree: &git2::Tree,
        protection: &Protection,
    ) -> Result<Vec<String>, WorkspaceError> {
        let mut restored = Vec::new();
        let mut checkout = CheckoutBuilder::new();
        checkout.force().update_index(false);
        for (path, _) in changes {
            let path = path.as_path();
            let full = self.worktree_path.join(path);
            let is_dir = std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir());
            if is_dir || !protection.is_protected(path) {
                continue;
            }
            // Whatever stands there now goes first, and any link above it: a checkout then
            // writes a new file inside the work tree.
            self.unlink_at_or_above(path)?;
            remove_entry(&full)?;
            if tree.get_path(path).is_ok() {
                checkout.path(path);
            }
            restored.push(path.to_string_lossy().into_owned());
        }
        // With no paths named, a checkout would reset the whole tree: only check out if needed.
        if restored.iter().any(|p| tree.get_path(Path::new(p)).is_ok()) {
            self.tree()?
                .checkout_tree(tree.as_object(), Some(&mut checkout))?;
        }
        Ok(restored)
    }
}

/// What a status after a command looks at: untracked files in every folder, ignored files but
/// not inside ignored folders, no submodules.
fn status_options() -> StatusOptions {
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(true)
        .recurse_ignored_dirs(false)
        .exclude_submodules(true);
    opts
}

/// From this many index entries, a status of the work tree against an index known to name the
/// branch's tree is taken in two parts, one per core: libgit2 looks at each file by its whole
/// path, one `lstat` after another (0.27 s of a `run_command` at 100,000 files).
const PARTED_STATUS_ENTRIES: usize = 10_000;

/// The deepest folder `status_parts` goes down to, looking for a folder of folders.
const PARTED_STATUS_DEPTH: usize = 4;

/// Two lists of paths of `workdir` (relative) that together name every path a status can report
/// there: the entries of the root; where the root holds one folder of tracked files (`src/`,
/// `pkg/`), that folder's entries in its place; and so down to the first folder holding two
/// such folders or more. A folder's entries are those on disk and those `tree` (what the index
/// names) has there, so that what is gone from disk is still named. None where no such folder
/// is found by `PARTED_STATUS_DEPTH`, where a folder cannot be read, or where a name holds a
/// byte a pathspec could read as other than itself.
/// `repo` is opened anew: its ignore rules are the files' as they are now.
fn status_parts(
    repo: &git2::Repository,
    workdir: &Path,
    tree: &git2::Tree,
) -> Option<[Vec<PathBuf>; 2]> {
    let plain = |name: &[u8]| {
        !name.is_empty()
            && name
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    // Names that differ only in case are one name there, which the parts' order does not know.
    if repo
        .config()
        .ok()?
        .get_bool("core.ignorecase")
        .unwrap_or(false)
    {
        return None;
    }
    let mut names: Vec<PathBuf> = Vec::new();
    let mut level = PathBuf::new();
    for _ in 0..PARTED_STATUS_DEPTH {
        // A folder gone into that is ignored, or holds a `.git` (any case), is one whose
        // entries libgit2 does not list in a part that names none of them.
        let root = level.as_os_str().is_empty();
        if !root && repo.is_path_ignored(&level).unwrap_or(true) {
            return None;
        }
        let held = match root {
            true => Some(tree.clone()),
            false => tree
                .get_path(&level)
                .ok()
                .and_then(|entry| entry.to_object(repo).ok()?.into_tree().ok()),
        };
        let mut here: Vec<PathBuf> = Vec::new();
        let mut tracked_folders: Vec<Vec<u8>> = Vec::new();
        for entry in held.iter().flat_map(|t| t.iter()) {
            let name = entry.name_bytes();
            if !plain(name) {
                return None;
            }
            if entry.kind() == Some(git2::ObjectType::Tree) {
                tracked_folders.push(name.to_vec());
            }
            here.push(level.join(std::ffi::OsStr::from_bytes(name)));
        }
        // The folders a status goes into that hold tracked files: those with the most to look
        // at (an ignored `node_modules` beside `src/` parts nothing).
        let mut folders: Vec<PathBuf> = Vec::new();
        for entry in std::fs::read_dir(workdir.join(&level)).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name();
            if root && name == ".git" {
                continue;
            }
            if !plain(name.as_bytes()) || name.as_bytes().eq_ignore_ascii_case(b".git") {
                return None;
            }
            // A link to a folder is an entry of its own, not a folder a status goes into.
            let tracked = tracked_folders
                .iter()
                .any(|t| t.as_slice() == name.as_bytes());
            if tracked && entry.file_type().ok()?.is_dir() {
                folders.push(level.join(&name));
            }
            here.push(level.join(&name));
        }
        here.sort();
        here.dedup();
        if misread_together(&here) {
            return None;
        }
        match folders.len() {
            0 => return None,
            1 => {
                let folder = folders.pop()?;
                names.extend(here.into_iter().filter(|p| *p != folder));
                level = folder;
            }
            _ => {
                names.extend(here);
                let mut parts = [Vec::new(), Vec::new()];
                for (i, name) in names.into_iter().enumerate() {
                    parts[i % 2].push(name);
                }
                return Some(parts);
            }
        }
    }
    None
}

/// Whether two of `names` (sorted, of one folder) are one the other's start followed by a byte
/// that sorts before `/` (`tests` and `tests.ini`, `Button` and `Button-x`): libgit2's walk of
/// an index by pathspecs read literally can then step past the shorter one and leave out every
/// path under it.
fn misread_together(names: &[PathBuf]) -> bool {
    let names: Vec<&[u8]> = names.iter().map(|n| n.as_os_str().as_bytes()).collect();
    // Sorted, the names a name starts are the ones right after it.
    names.iter().enumerate().any(|(i, short)| {
        names[i + 1..]
            .iter()
            .take_while(|long| long.starts_with(short))
            .any(|long| long.len() > short.len() && long[short.len()] < b'/')
    })
}

/// The status of `workdir` against its index, taken in `parts` (pathspecs, read literally): the
/// first through `repo` (opened anew), the second in a thread with a handle of its own. What
/// `status_against_branch` returns.
fn workdir_status_in_parts(
    repo: &git2::Repository,
    workdir: &Path,
    parts: &[Vec<PathBuf>; 2],
) -> Result<Vec<(PathBuf, Status)>, WorkspaceError> {
    let part = |repo: &git2::Repository, paths: &[PathBuf]| {
        let mut opts = status_options();
        opts.show(git2::StatusShow::Workdir)
            .disable_pathspec_match(true);
        for path in paths {
            opts.pathspec(path);
        }
        let statuses = repo.statuses(Some(&mut opts))?;
        Ok::<_, WorkspaceError>(changed(&statuses))
    };
    let (first, second) = std::thread::scope(|scope| {
        let other = scope.spawn(|| part(&git2::Repository::open(workdir)?, &parts[1]));
        let here = part(repo, &parts[0]);
        (here, other.join())
    });
    let second = second.map_err(|_| {
        WorkspaceError::Unsafe("a status of the work tree stopped midway".to_string())
    })?;
    let mut changes = first?;
    changes.extend(second?);
    // In git's order, by the path's bytes.
    changes.sort_by(|a, b| a.0.as_os_str().as_bytes().cmp(b.0.as_os_str().as_bytes()));
    changes.dedup();
    Ok(changes)
}

/// The entries of `statuses` that are not current, each path as a relative path.
fn changed(statuses: &git2::Statuses) -> Vec<(PathBuf, Status)> {
    statuses
        .iter()
        .filter(|e| e.status() != Status::CURRENT)
        .map(|e| {
            let rel = Path::new(std::ffi::OsStr::from_bytes(e.path_bytes()));
            (rel.components().as_path().to_path_buf(), e.status())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A repository whose files are all under `pkg/`, in folders of their own, committed.
    fn packaged(dir: &Path) -> (git2::Repository, git2::Oid) {
        let repo = git2::Repository::init(dir).unwrap();
        let files = [
            (".gitignore", "build/\n*.log\nnode_modules/\n"),
            ("setup.py", "x\n"),
            ("gone.txt", "x\n"),
            ("pkg/__init__.py", "x\n"),
            ("pkg/a/x.py", "x\n"),
            ("pkg/a/y.py", "y\n"),
            ("pkg/b/z.py", "z\n"),
            ("pkg/b/deep/w.py", "w\n"),
            ("pkg/c/v.py", "v\n"),
            ("pkg/d/u.py", "u\n"),
        ];
        let mut index = repo.index().unwrap();
        for (path, text) in files {
            let full = dir.join(path);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(&full, text).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        index.write().unwrap();
        let tree = index.write_tree().unwrap();
        (repo, tree)
    }

    fn single(repo: &git2::Repository) -> Vec<(PathBuf, Status)> {
        let mut opts = status_options();
        opts.show(git2::StatusShow::Workdir);
        changed(&repo.statuses(Some(&mut opts)).unwrap())
    }

    #[test]
    fn a_status_in_parts_finds_what_one_status_finds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (repo, tree) = packaged(root);
        // Changed, gone (a whole folder too), new (deep in a new folder), ignored (a folder and a
        // file), a file where a folder was, a link where a folder was.
        fs::write(root.join("pkg/a/x.py"), "changed\n").unwrap();
        fs::remove_file(root.join("gone.txt")).unwrap();
        fs::remove_dir_all(root.join("pkg/b")).unwrap();
        fs::create_dir_all(root.join("pkg/c/new/deeper")).unwrap();
        fs::write(root.join("pkg/c/new/deeper/t.py"), "t\n").unwrap();
        fs::create_dir_all(root.join("pkg/build")).unwrap();
        fs::write(root.join("pkg/build/out.o"), "o\n").unwrap();
        fs::write(root.join("pkg/run.log"), "log\n").unwrap();
        fs::write(root.join("notes.txt"), "n\n").unwrap();
        fs::create_dir_all(root.join("node_modules/lib")).unwrap();
        fs::write(root.join("node_modules/lib/x.js"), "x\n").unwrap();
        fs::remove_file(root.join("pkg/a/y.py")).unwrap();
        fs::create_dir(root.join("pkg/a/y.py")).unwrap();
        fs::write(root.join("pkg/a/y.py/inner.py"), "i\n").unwrap();
        fs::remove_dir_all(root.join("pkg/d")).unwrap();
        std::os::unix::fs::symlink("a", root.join("pkg/d")).unwrap();

        let tree = repo.find_tree(tree).unwrap();
        let parts = status_parts(&repo, root, &tree).expect("parts");
        assert!(parts.iter().all(|p| !p.is_empty()), "{parts:?}");
        // The folder of tracked folders is `pkg/` (an ignored one beside it does not count):
        // the root's other entries and pkg's are named.
        let named: Vec<&PathBuf> = parts.iter().flatten().collect();
        assert!(named.contains(&&PathBuf::from("pkg/b")), "{named:?}");
        assert!(named.contains(&&PathBuf::from("gone.txt")), "{named:?}");
        assert!(!named.contains(&&PathBuf::from("pkg")), "{named:?}");

        let whole = single(&repo);
        let parted = workdir_status_in_parts(&repo, root, &parts).unwrap();
        assert_eq!(parted, whole);
        for path in [
            "pkg/a/x.py",
            "gone.txt",
            "pkg/b/z.py",
            "pkg/b/deep/w.py",
            "pkg/c/new/deeper/t.py",
            "pkg/build/",
            "pkg/run.log",
            "notes.txt",
            "pkg/d",
            "node_modules/",
        ] {
            assert!(
                parted
                    .iter()
                    .any(|(p, _)| p == Path::new(path.trim_end_matches('/'))
                        || p.to_string_lossy() == path),
                "{path} not in {parted:?}"
            );
        }
    }

    #[test]
    fn a_name_a_pathspec_could_misread_takes_one_status() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (repo, tree) = packaged(root);
        let tree = repo.find_tree(tree).unwrap();
        assert!(status_parts(&repo, root, &tree).is_some());
        for name in ["pkg/!odd", "pkg/a b", "pkg/*"] {
            fs::write(root.join(name), "x\n").unwrap();
            assert!(status_parts(&repo, root, &tree).is_none(), "{name}");
            fs::remove_file(root.join(name)).unwrap();
        }
        // Nothing but files under the root: nothing to part.
        fs::remove_dir_all(root.join("pkg")).unwrap();
        assert!(status_parts(&repo, root, &tree).is_none());
    }

    /// A repository of `files` (each holding its own path), committed to the index.
    fn repo_with(dir: &Path, files: &[&str]) -> (git2::Repository, git2::Oid) {
        let repo = git2::Repository::init(dir).unwrap();
        let mut index = repo.index().unwrap();
        for path in files {
            let full = dir.join(path);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(&full, format!("{path}\n")).unwrap();
            index.add_path(Path::new(path)).unwrap();
        }
        index.write().unwrap();
        let tree = index.write_tree().unwrap();
        (repo, tree)
    }

    /// Whether a status in parts, where `status_parts` parts it, finds what one status finds.
    fn parted_as_one(root: &Path, repo: &git2::Repository, tree: git2::Oid) -> bool {
        let tree = repo.find_tree(tree).unwrap();
        // As `status_against_branch` takes it: through a repository opened anew.
        let fresh = git2::Repository::open(root).unwrap();
        match status_parts(&fresh, root, &tree) {
            None => true,
            Some(parts) => workdir_status_in_parts(&fresh, root, &parts).unwrap() == single(repo),
        }
    }

    const BASE: &[&str] = &["setup.py", "pkg/a/x.py", "pkg/b/y.py"];

    /// What a command can leave that libgit2's statuses on literal pathspecs would miss: each
    /// such tree is found in parts as in one status, or not parted at all.
    #[test]
    fn trees_a_parted_status_could_misread_are_seen_whole() {
        type Change<'c> = &'c dyn Fn(&Path);
        let cases: Vec<(&str, Vec<&str>, Change)> = vec![
            // A folder beside tracked names that start with its own and a byte before `/`.
            (
                "sibling names",
                vec!["pkg/tests/test_core.py", "pkg/tests/t2.py", "pkg/tests.ini"],
                &|r: &Path| {
                    fs::remove_file(r.join("pkg/tests/test_core.py")).unwrap();
                    fs::write(r.join("pkg/tests/t2.py"), "changed\n").unwrap();
                    fs::write(r.join("pkg/tests-0"), "x").unwrap();
                    fs::write(r.join("pkg/tests-1"), "x").unwrap();
                },
            ),
            (
                "a component's files",
                vec![
                    "pkg/Button/index.js",
                    "pkg/Button/__tests__/b.test.js",
                    "pkg/Button.js",
                    "pkg/Button.stories.js",
                ],
                &|r: &Path| {
                    fs::remove_file(r.join("pkg/Button/__tests__/b.test.js")).unwrap();
                },
            ),
            // A tracked file where the one folder was.
            ("a file made a folder", vec!["conftest.py"], &|r: &Path| {
                fs::remove_dir_all(r.join("pkg")).unwrap();
                fs::remove_file(r.join("conftest.py")).unwrap();
                fs::create_dir_all(r.join("conftest.py/a")).unwrap();
                fs::create_dir_all(r.join("conftest.py/b")).unwrap();
                fs::write(r.join("conftest.py/a/f.py"), "x").unwrap();
                fs::write(r.join("conftest.py/b/g.py"), "x").unwrap();
            }),
            ("an untracked folder with a .git", vec![], &|r: &Path| {
                fs::rename(r.join("pkg"), r.join("lib")).unwrap();
                fs::create_dir_all(r.join("lib/.git")).unwrap();
            }),
            ("an ignored folder", vec![".gitignore"], &|r: &Path| {
                fs::write(r.join(".gitignore"), "lib/\n").unwrap();
                fs::rename(r.join("pkg"), r.join("lib")).unwrap();
            }),
            ("a .git planted in the folder", vec![], &|r: &Path| {
                fs::create_dir_all(r.join("pkg/.git")).unwrap();
                for d in ["pkg/a-x", "pkg/b-x"] {
                    fs::create_dir_all(r.join(d)).unwrap();
                    fs::write(r.join(d).join("conftest.py"), "x").unwrap();
                }
            }),
            ("a .git file planted in the folder", vec![], &|r: &Path| {
                fs::write(r.join("pkg/.git"), "gitdir: /nonexistent\n").unwrap();
                fs::create_dir_all(r.join("pkg/ax")).unwrap();
                fs::write(r.join("pkg/ax/test_x.py"), "x").unwrap();
                fs::write(r.join("pkg/bx"), "x").unwrap();
            }),
            // Rewritten in place at its size, its modification time put back: a handle that
            // read it before would keep the old rules.
            (
                "an ignore rule slipped in",
                vec![".gitignore"],
                &|r: &Path| {
                    let ignore = r.join(".gitignore");
                    let modified = fs::metadata(&ignore).unwrap().modified().unwrap();
                    let len = fs::metadata(&ignore).unwrap().len() as usize;
                    let rules = format!("{:<width$}", "pkg/\n", width = len);
                    fs::write(&ignore, rules).unwrap();
                    let file = fs::File::options().write(true).open(&ignore).unwrap();
                    file.set_modified(modified).unwrap();
                    for d in ["pkg/ax", "pkg/bx"] {
                        fs::create_dir_all(r.join(d)).unwrap();
                        fs::write(r.join(d).join("conftest.py"), "x").unwrap();
                    }
                },
            ),
            (
                "a tracked folder made ignored",
                vec![".gitignore"],
                &|r: &Path| {
                    fs::write(r.join(".gitignore"), "pkg/\n").unwrap();
                    for d in ["pkg/ax", "pkg/bx"] {
                        fs::create_dir_all(r.join(d)).unwrap();
                        fs::write(r.join(d).join("conftest.py"), "x").unwrap();
                    }
                    fs::write(r.join("pkg/a/x.py"), "changed").unwrap();
                },
            ),
            (
                "the last level's odd entries",
                vec![
                    ".gitignore",
                    "pkg/c/v.py",
                    "pkg/m1/a.py",
                    "pkg/m10/b.py",
                    "pkg/f",
                ],
                &|r: &Path| {
                    fs::write(r.join(".gitignore"), "build/\n*.log\n!keep.log\n").unwrap();
                    fs::create_dir_all(r.join("pkg/nested/.git")).unwrap();
                    fs::write(r.join("pkg/nested/f.py"), "x").unwrap();
                    fs::create_dir_all(r.join("pkg/build")).unwrap();
                    fs::write(r.join("pkg/build/keep.log"), "x").unwrap();
                    fs::write(r.join("pkg/keep.log"), "x").unwrap();
                    fs::remove_file(r.join("pkg/f")).unwrap();
                    fs::create_dir_all(r.join("pkg/f/g")).unwrap();
                    fs::write(r.join("pkg/f/g/h.py"), "x").unwrap();
                    fs::remove_dir_all(r.join("pkg/c")).unwrap();
                    fs::write(r.join("pkg/c"), "x").unwrap();
                    fs::remove_file(r.join("pkg/m1/a.py")).unwrap();
                    fs::write(r.join("pkg/m10/b.py"), "y").unwrap();
                    fs::remove_dir_all(r.join("pkg/b")).unwrap();
                    std::os::unix::fs::symlink("a", r.join("pkg/b")).unwrap();
                    fs::write(r.join("pkg/a/.gitignore"), "*.py\n").unwrap();
                    fs::write(r.join("pkg/a/new.py"), "x").unwrap();
                },
            ),
        ];
        for (name, extra, change) in cases {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let files: Vec<&str> = BASE.iter().copied().chain(extra).collect();
            let (repo, tree) = repo_with(root, &files);
            change(root);
            assert!(parted_as_one(root, &repo, tree), "{name}");
        }
        // Names one case apart are one name where case is ignored: not parted.
        let dir = tempfile::tempdir().unwrap();
        let (repo, tree) = repo_with(dir.path(), BASE);
        repo.config()
            .unwrap()
            .set_bool("core.ignorecase", true)
            .unwrap();
        let repo = git2::Repository::open(dir.path()).unwrap();
        let tree = repo.find_tree(tree).unwrap();
        assert!(status_parts(&repo, dir.path(), &tree).is_none());
    }
}
