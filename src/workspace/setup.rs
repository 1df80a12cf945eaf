//! Everything that must succeed before a run may create its branch: each failure here is a
//! usage or setup error (exit 2) and leaves the repository exactly as it was.

use super::Workspace;
use git2::{BranchType, Oid, Repository, WorktreeAddOptions};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a run could not start: a usage or setup error (exit 2); the repository is left as it was.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The path given (or the current directory) is in no git repository.
    #[error("{0} is not inside a git repository; run agent-git in one or pass --repo PATH")]
    NotARepository(PathBuf),
    /// The base is HEAD, and HEAD names no commit yet.
    #[error("the repository has no commits yet; commit the code and its tests first")]
    NoCommits,
    /// The base names no commit.
    #[error("unknown base revision `{0}`; pass a branch, tag or commit that exists (--base)")]
    UnknownBase(String),
    /// The branch name is not one git allows.
    #[error("`{0}` is not a valid branch name; choose another with --branch")]
    BadBranchName(String),
    /// A local branch of that name exists.
    #[error("branch `{0}` already exists; choose another name with --branch")]
    BranchExists(String),
    /// git keeps branches as files: `a` and `a/b` cannot both be.
    #[error(
        "branch `{0}` cannot be made beside the existing branch `{1}` (one would be a folder \
         of the other); choose another name with --branch"
    )]
    BranchClash(String, String),
    /// git failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// Making the run's work tree, its lease or its record failed: the path, and why.
    #[error("cannot create the run's work tree at {0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// `--dirty` was asked of a bare repository.
    #[error("--dirty starts from a working tree, and this repository has none (it is bare)")]
    Bare,
    /// A file of the user's working tree could not be read for `--dirty`: the path, and why.
    #[error("cannot read {0} from your working tree for --dirty: {1}")]
    Unreadable(PathBuf, std::io::Error),
}

/// The commit a run starts from, as `resolve_base` found it.
#[derive(Debug, Clone)]
pub struct BaseInfo {
    /// The commit.
    pub id: Oid,
    /// Its message's first line; empty when it has none.
    pub summary: String,
}

/// The repository containing `path`, as git finds it from there; `NotARepository` when there
/// is none.
pub fn open_user_repo(path: &Path) -> Result<Repository, SetupError> {
    Repository::discover(path).map_err(|_| SetupError::NotARepository(path.to_path_buf()))
}

/// The commit `spec` names (a branch, tag, commit or any revision): `NoCommits` for HEAD in a
/// repository without commits, `UnknownBase` for a name of none.
pub fn resolve_base(repo: &Repository, spec: &str) -> Result<BaseInfo, SetupError> {
    if spec == "HEAD" && repo.head().is_err() {
        return Err(SetupError::NoCommits);
    }
    let commit = repo
        .revparse_single(spec)
        .and_then(|o| o.peel_to_commit())
        .map_err(|_| SetupError::UnknownBase(spec.to_string()))?;
    Ok(BaseInfo {
        id: commit.id(),
        summary: commit.summary().ok().flatten().unwrap_or("").to_string(),
    })
}

/// Whether a run may create branch `name`: a valid name, no branch of that name, and none it would
/// be a folder of or inside (`a` beside `a/b`).
pub fn check_branch_free(repo: &Repository, name: &str) -> Result<(), SetupError> {
    if !git2::Branch::name_is_valid(name)? {
        return Err(SetupError::BadBranchName(name.to_string()));
    }
    if repo.find_branch(name, BranchType::Local).is_ok() {
        return Err(SetupError::BranchExists(name.to_string()));
    }
    // A branch is a file named by its path: none can be made inside another, nor hold one.
    // Each is looked up by name, not found among every branch (a repository with a branch a
    // run has hundreds, and the list took 6 ms of the start at 600).
    for (at, _) in name.match_indices('/') {
        let outer = &name[..at];
        if repo.find_branch(outer, BranchType::Local).is_ok() {
            return Err(SetupError::BranchClash(name.to_string(), outer.to_string()));
        }
    }
    // A valid name holds none of a pattern's special characters.
    let mut inside = repo.references_glob(&format!("refs/heads/{name}/*"))?;
    if let Some(inner) = inside.names().next() {
        let inner = inner?;
        let inner = inner.strip_prefix("refs/heads/").unwrap_or(inner);
        return Err(SetupError::BranchClash(name.to_string(), inner.to_string()));
    }
    Ok(())
}

/// Every file path of a commit's tree, `/`-separated, and a reader for their text.
pub fn tree_files(repo: &Repository, commit: Oid) -> Result<Vec<String>, SetupError> {
    let tree = repo.find_commit(commit)?.tree()?;
    Ok(blob_paths(repo, &tree, Blobs::All)?)
}

/// The kind of what is kept of the file paths of a tree (`derived`): the base's, which the
/// next run lists first, for its test plan and again for its brief.
const BLOB_PATHS: &str = "files";

/// Which blobs `blob_paths` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blobs {
    All,
    /// Regular files, not links.
    Regular,
}

/// The path of every blob of `tree` (or of its regular files), `/`-separated; as the last
/// process kept them for the same tree where it did, else from a walk of every folder (a tenth
/// of a second at 100,000 files), then kept. A path that is not UTF-8 cannot be named as text:
/// it is left out, and walked past. The list is made at its size: on 100,000 files, the list
/// of pairs it was made from held 4 MiB beside it.
fn blob_paths(
    repo: &Repository,
    tree: &git2::Tree,
    which: Blobs,
) -> Result<Vec<String>, git2::Error> {
    let key = super::derived::Key::of(&[BLOB_PATHS.as_bytes(), tree.id().as_bytes()]);
    let common = repo.commondir();
    if let Some(paths) =
        super::derived::read(common, BLOB_PATHS, key).and_then(|b| decode_blob_paths(&b, which))
    {
        return Ok(paths);
    }
    let mut paths = Vec::new();
    let mut kept = Vec::new();
    super::entries::each_entry(repo, tree, &mut |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            if let Some(path) = super::entries::entry_path(dir, entry).to_str() {
                let regular = is_regular(entry.filemode());
                let kind: &[u8] = if regular { b"r" } else { b"o" };
                super::derived::push_part(&mut kept, &[kind, path.as_bytes()]);
                if regular || which == Blobs::All {
                    paths.push(path.to_string());
                }
            }
        }
        true
    })?;
    super::derived::write(common, BLOB_PATHS, key, &kept);
    paths.shrink_to_fit();
    Ok(paths)
}

/// The paths `blob_paths` kept (each its kind's letter and its text, a part:
/// `derived::push_part`) that `which` asks for. None for anything else.
fn decode_blob_paths(bytes: &[u8], which: Blobs) -> Option<Vec<String>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let parts = || bytes.strip_suffix(&[0]).map(|b| b.split(|b| *b == 0));
    let wanted = |kind: u8| kind == b'r' || which == Blobs::All;
    // Checked whole first, and counted, so that the list is made at its size.
    let mut count = 0;
    for part in parts()? {
        let (&kind, path) = part.split_first()?;
        if !matches!(kind, b'r' | b'o') || std::str::from_utf8(path).is_err() {
            return None;
        }
        count += usize::from(wanted(kind));
    }
    let mut paths = Vec::with_capacity(count);
    for part in parts()? {
        let (&kind, path) = part.split_first()?;
        if wanted(kind) {
            paths.push(std::str::from_utf8(path).ok()?.to_string());
        }
    }
    Some(paths)
}

/// A lister of the regular files of a commit and a reader of their text, for what the model is
/// told first. Both share a repository handle of their own and look at the commit's tree when
/// asked: a list or a table of every file kept for the whole run would cost memory in
/// proportion to the repository, so the reader keeps only some of the folders it parsed
/// (`TreeFiles`).
pub fn base_reader(
    repo: &Repository,
    commit: Oid,
) -> Result<(crate::brief::Lister, crate::brief::Reader), SetupError> {
    let tree_id = repo.find_commit(commit)?.tree_id();
    let own = std::rc::Rc::new(Repository::open(repo.path())?);
    let lister = own.clone();
    let list = move || {
        let Ok(tree) = lister.find_tree(tree_id) else {
            return Vec::new();
        };
        blob_paths(&lister, &tree, Blobs::Regular).unwrap_or_default()
    };
    Ok((Box::new(list), TreeFiles::new(own, tree_id).into_reader()))
}

/// Makes readers of a commit's files as `base_reader`'s, each with a repository handle of its
/// own: for threads that read beside the first.
pub fn base_readers(
    repo: &Repository,
    commit: Oid,
) -> Result<Box<crate::brief::Readers>, SetupError> {
    let tree_id = repo.find_commit(commit)?.tree_id();
    let git_dir = repo.path().to_path_buf();
    Ok(Box::new(move || {
        let own = std::rc::Rc::new(Repository::open(&git_dir).ok()?);
        Some(TreeFiles::new(own, tree_id).into_reader())
    }))
}

/// The most entries `TreeFiles` keeps of the folders it parsed (about 100 bytes each, for as
/// long as the run keeps the reader); past it they are found again.
const KEPT_ENTRIES: usize = 20_000;

/// The entries of one folder of a tree, by name: what each holds and its mode.
type Folder = HashMap<Vec<u8>, (Oid, i32)>;

/// Reads the files of one tree by path, each folder found and parsed once. libgit2 caches no
/// tree above 4 KiB and `Tree::get_path` parses every folder above the file again, so reading
/// each file of a folder of 1,000 entries that way parsed the folder once per file: the brief
/// of a repository of 100,000 source files took 10 s to read them.
struct TreeFiles {
    repo: std::rc::Rc<Repository>,
    root: Oid,
    folders: RefCell<HashMap<String, std::rc::Rc<Folder>>>,
    /// How many entries `folders` holds.
    kept: std::cell::Cell<usize>,
}

impl TreeFiles {
    fn new(repo: std::rc::Rc<Repository>, root: Oid) -> TreeFiles {
        TreeFiles {
            repo,
            root,
            folders: RefCell::new(HashMap::new()),
            kept: std::cell::Cell::new(0),
        }
    }

    /// `read`, as the brief takes it.
    fn into_reader(self) -> crate::brief::Reader {
        Box::new(move |path: &str| self.read(path))
    }

    /// The text of the regular file at `path` (`/`-separated); None for anything else.
    fn read(&self, path: &str) -> Option<String> {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let &(id, mode) = self.folder(dir)?.get(name.as_bytes())?;
        if !is_regular(mode) {
            return None;
        }
        let blob = self.repo.find_blob(id).ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    }

    /// The entries of the folder at `dir` ("" for the root), parsed once while kept.
    fn folder(&self, dir: &str) -> Option<std::rc::Rc<Folder>> {
        if let Some(folder) = self.folders.borrow().get(dir) {
            return Some(folder.clone());
        }
        let id = if dir.is_empty() {
            self.root
        } else {
            let (parent, name) = dir.rsplit_once('/').unwrap_or(("", dir));
            let &(id, mode) = self.folder(parent)?.get(name.as_bytes())?;
            if mode != 0o040000 {
                return None;
            }
            id
        };
        let tree = self.repo.find_tree(id).ok()?;
        let entries: Folder = tree
            .iter()
            .map(|e| (e.name_bytes().to_vec(), (e.id(), e.filemode())))
            .collect();
        let entries = std::rc::Rc::new(entries);
        let mut folders = self.folders.borrow_mut();
        if self.kept.get() + entries.len() > KEPT_ENTRIES {
            folders.clear();
            self.kept.set(0);
        }
        self.kept.set(self.kept.get() + entries.len());
        folders.insert(dir.to_string(), entries.clone());
        Some(entries)
    }
}

/// A file's mode in a tree that is a regular file: not a link, not a submodule.
fn is_regular(mode: i32) -> bool {
    matches!(mode, 0o100644 | 0o100755)
}

/// The content of the file at `path` in `commit`'s tree; None when there is none, or it is a
/// folder.
pub fn read_blob(repo: &Repository, commit: Oid, path: &str) -> Option<Vec<u8>> {
    let tree = repo.find_commit(commit).ok()?.tree().ok()?;
    let entry = tree.get_path(Path::new(path)).ok()?;
    let blob = repo.find_blob(entry.id()).ok()?;
    Some(blob.content().to_vec())
}

impl Workspace {
    /// Creates the run's branch at `base` and checks it out in a linked worktree kept under
    /// the repository's git directory, outside the user's working tree.
    pub fn create(
        repo: &Repository,
        base: Oid,
        branch: &str,
        run_id: &str,
    ) -> Result<Workspace, SetupError> {
        check_branch_free(repo, branch)?;
        let base_commit = repo.find_commit(base)?;
        repo.branch(branch, &base_commit, false)?;
        // From here the branch is a run's, report or not.
        if let Err(e) = super::discard::note_unreported(repo.commondir(), run_id, branch, base) {
            let _ = repo
                .find_branch(branch, BranchType::Local)
                .and_then(|mut b| b.delete());
            return Err(SetupError::Io(repo.commondir().join("agent-git"), e));
        }
        attach(repo, base, branch, run_id, true)
    }

    /// A work tree on the branch of an earlier attempt, to go on where it stopped. The branch
    /// is never deleted, whatever fails.
    pub fn resume(
        repo: &Repository,
        base: Oid,
        branch: &str,
        run_id: &str,
    ) -> Result<Workspace, SetupError> {
        attach(repo, base, branch, run_id, false)
    }
}

/// Checks `branch` out in a linked worktree of its own, under a lease; `fresh` when the
/// branch was made for this run (and goes again if the worktree cannot be made).
pub(super) fn attach(
    repo: &Repository,
    base: Oid,
    branch: &str,
    run_id: &str,
    fresh: bool,
) -> Result<Workspace, SetupError> {
    let common_dir = repo.commondir().to_path_buf();
    let worktree_name = format!("agent-git-{run_id}");
    let parent = common_dir.join("agent-git");
    std::fs::create_dir_all(&parent).map_err(|e| SetupError::Io(parent.clone(), e))?;
    let worktree_path = parent.join(run_id);
    let lease_path = parent.join(format!("{run_id}.lease"));
    let lease = crate::leftovers::Lease::take(&lease_path)
        .map_err(|e| SetupError::Io(lease_path.clone(), e))?;
    let added = add_work_tree(repo, &worktree_name, &worktree_path, branch);
    if let Err(e) = added {
        // Leave nothing behind: a branch made for this run holds nothing yet.
        if fresh {
            let _ = repo
                .find_branch(branch, BranchType::Local)
                .and_then(|mut b| b.delete());
            super::discard::forget_unreported(repo.commondir(), run_id);
        }
        let _ = std::fs::remove_file(&lease_path);
        return Err(e);
    }
    let wt_repo = Repository::open(&worktree_path)?;
    Ok(Workspace {
        handle: wt_repo,
        readiness: super::ready::Readiness::ready(),
        run_id: run_id.to_string(),
        branch: branch.to_string(),
        base,
        worktree_path,
        worktree_name,
        common_dir,
        max_file_size: crate::settings::defaults().max_file_size,
        lease: Some((lease, lease_path)),
        index_known: std::cell::Cell::new(None),
    })
}

/// Held while a run adds a work tree or checks a branch out in one: libgit2 takes a branch
/// for checked out elsewhere when it cannot read another work tree's HEAD, which a run adding
/// that work tree at the same moment has not written yet ("already checked out", seen with
/// six runs at once). Runs take turns; where the lock cannot be had they go on without it.
pub(super) fn worktrees_lock(repo: &Repository) -> Option<std::fs::File> {
    let path = repo.commondir().join("agent-git").join("worktrees.lock");
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    let file = crate::files::open_regular(&path, &mut options).ok()?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
    Some(file)
}

/// The hidden command that adds a run's work tree: `agent-git add-work-tree GIT_DIR NAME
/// PATH BRANCH`.
pub const ADD_WORK_TREE: &str = "add-work-tree";

/// Adds the linked work tree `name` at `path`, on `branch`, its index in the compact format:
/// in a process of its own where one can be (`super::check_out_apart`).
pub(super) fn add_work_tree(
    repo: &Repository,
    name: &str,
    path: &Path,
    branch: &str,
) -> Result<(), SetupError> {
    let _turn = worktrees_lock(repo);
    let args = [
        ADD_WORK_TREE.as_ref(),
        repo.commondir().as_os_str(),
        name.as_ref(),
        path.as_os_str(),
        branch.as_ref(),
    ];
    match super::run_apart(&args) {
        Some(added) => {
            added.map_err(|e| SetupError::Io(path.to_path_buf(), std::io::Error::other(e)))
        }
        None => add_work_tree_here(repo, name, path, branch),
    }
}

/// `add-work-tree` in the process that runs it.
pub fn add_work_tree_here(
    repo: &Repository,
    name: &str,
    path: &Path,
    branch: &str,
) -> Result<(), SetupError> {
    let reference = repo
        .find_branch(branch, BranchType::Local)?
        .into_reference();
    // libgit2 makes this folder only when it is missing, and fails (EEXIST) when another run
    // made it in between: two runs that start at once would lose a pool slot to that.
    let admin = repo.commondir().join("worktrees");
    std::fs::create_dir_all(&admin).map_err(|e| SetupError::Io(admin.clone(), e))?;
    let mut opts = WorktreeAddOptions::new();
    opts.reference(Some(&reference));
    repo.worktree(name, path, Some(&opts))?;
    super::compact_index(&mut Repository::open(path)?.index()?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::Protection;
    use crate::workspace::{CommitOutcome, NoHooks};

    /// The reader of a tree's files finds each by its folders, whatever it kept of them: a
    /// file deep down, in more folders than it keeps, a link and a folder (no text), and a
    /// name that is not there.
    #[test]
    fn the_files_of_a_tree_are_read_by_path_through_its_folders() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        // 62 entries a folder at the bottom, one above: more than it keeps in all.
        let count = KEPT_ENTRIES / 60 + 10;
        let padding = repo.blob(b"").unwrap();
        let root = {
            let mut top = repo.treebuilder(None).unwrap();
            for i in 0..count {
                let blob = repo.blob(format!("def f{i}():\n").as_bytes()).unwrap();
                let mut inner = repo.treebuilder(None).unwrap();
                inner.insert(format!("f{i}.py"), blob, 0o100644).unwrap();
                inner.insert("link.py", blob, 0o120000).unwrap();
                for j in 0..60 {
                    inner.insert(format!("pad{j}"), padding, 0o100644).unwrap();
                }
                let mut middle = repo.treebuilder(None).unwrap();
                middle
                    .insert("deep", inner.write().unwrap(), 0o040000)
                    .unwrap();
                top.insert(format!("m{i}"), middle.write().unwrap(), 0o040000)
                    .unwrap();
            }
            let mut root = repo.treebuilder(None).unwrap();
            root.insert("pkg", top.write().unwrap(), 0o040000).unwrap();
            root.write().unwrap()
        };
        let files = TreeFiles::new(std::rc::Rc::new(repo), root);
        for round in 0..2 {
            for i in (0..count).rev() {
                let path = format!("pkg/m{i}/deep/f{i}.py");
                assert_eq!(files.read(&path), Some(format!("def f{i}():\n")), "{round}");
            }
        }
        assert_eq!(files.read("pkg/m3/deep/link.py"), None);
        assert_eq!(files.read("pkg/m3/deep"), None);
        assert_eq!(files.read("pkg/m3/deep/f4.py"), None);
        assert_eq!(files.read("pkg/m3/deep/f3.py/x"), None);
        assert!(files.kept.get() <= KEPT_ENTRIES);
        // A folder read from is kept: its next file is not found through a parse again.
        let kept = |path: &str| {
            files.read(path);
            files.folders.borrow().get("pkg/m7/deep").cloned().unwrap()
        };
        let (kept, again) = (kept("pkg/m7/deep/f7.py"), kept("pkg/m7/deep/f7.py"));
        assert!(std::rc::Rc::ptr_eq(&kept, &again));
    }

    /// The files of a tree, listed from a walk and read back from what the walk kept, are
    /// the same, links and all, and a lister of the regular ones leaves the links out.
    #[test]
    fn the_files_of_a_tree_kept_for_the_next_run_are_those_a_walk_finds() {
        crate::workspace::derived::open();
        let dir = tempfile::tempdir().unwrap();
        let (repo, commit) = repo_with_commit(dir.path());
        let blob = repo.blob(b"calc.py").unwrap();
        let head = repo.find_commit(commit).unwrap().tree().unwrap();
        let mut root = repo.treebuilder(Some(&head)).unwrap();
        root.insert("link.py", blob, 0o120000).unwrap();
        root.insert("run.sh", blob, 0o100755).unwrap();
        let tree = repo.find_tree(root.write().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let with_link = repo
            .commit(
                None,
                &sig,
                &sig,
                "link",
                &tree,
                &[&repo.find_commit(commit).unwrap()],
            )
            .unwrap();
        let kept = repo.path().join("agent-git/derived").join(BLOB_PATHS);
        let _ = std::fs::remove_file(&kept);
        let walked = tree_files(&repo, with_link).unwrap();
        assert!(kept.is_file());
        let read_back = tree_files(&repo, with_link).unwrap();
        assert_eq!(walked, read_back);
        assert_eq!(
            walked,
            ["calc.py", "link.py", "run.sh", "tests/test_calc.py"]
        );
        let (list, _) = base_reader(&repo, with_link).unwrap();
        assert_eq!(list(), ["calc.py", "run.sh", "tests/test_calc.py"]);
        // Another tree is walked anew, and kept in its place.
        assert_eq!(
            tree_files(&repo, commit).unwrap(),
            ["calc.py", "tests/test_calc.py"]
        );
        let (list, _) = base_reader(&repo, with_link).unwrap();
        assert_eq!(list(), ["calc.py", "run.sh", "tests/test_calc.py"]);
        assert_eq!(decode_blob_paths(b"xcalc.py\0", Blobs::All), None);
        assert_eq!(decode_blob_paths(b"rcalc.py", Blobs::All), None);
        assert_eq!(decode_blob_paths(b"r\xffcalc.py\0", Blobs::Regular), None);
        let kept = b"rcalc.py\0orun.sh\0";
        assert_eq!(
            decode_blob_paths(kept, Blobs::All).unwrap(),
            ["calc.py", "run.sh"]
        );
        assert_eq!(
            decode_blob_paths(kept, Blobs::Regular).unwrap(),
            ["calc.py"]
        );
    }

    fn repo_with_commit(dir: &Path) -> (Repository, Oid) {
        let repo = Repository::init(dir).unwrap();
        std::fs::write(dir.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
        std::fs::create_dir(dir.join("tests")).unwrap();
        std::fs::write(dir.join("tests/test_calc.py"), "assert True\n").unwrap();
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let oid = repo
            .commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
            .unwrap();
        drop(tree);
        (repo, oid)
    }

    /// After a command that changed nothing, a sealed status compares the work tree with the
    /// index alone. An index written since (here with a protected entry staged, the work tree
    /// as it was) is made to name the branch's tree again first, as an unsealed status always
    /// does: the staged entry goes, and nothing in the work tree needs putting back.
    #[test]
    fn a_status_builds_on_the_index_only_while_it_is_the_file_it_left() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, base) = repo_with_commit(dir.path());
        let ws = Workspace::create(&repo, base, "agent/t", "r4").unwrap();
        let protection = Protection::new(&[], &[]).unwrap();
        let test = Path::new("tests/test_calc.py");
        let committed = repo.find_commit(base).unwrap().tree().unwrap();
        let committed = committed.get_path(test).unwrap().id();
        let absorb = |sealed: bool| {
            let before = ws.snapshot().unwrap().git_dir_sealed(sealed);
            let absorbed = ws.absorb_command("run", "", &protection, &before, &NoHooks);
            absorbed.unwrap().reverted
        };
        let staged = || {
            let index = Repository::open(ws.path()).unwrap().index().unwrap();
            index.get_path(test, 0).unwrap().id
        };
        let stage = |content: &[u8]| {
            let wt = Repository::open(ws.path()).unwrap();
            let mut index = wt.index().unwrap();
            let mut entry = index.get_path(test, 0).unwrap();
            entry.id = wt.blob(content).unwrap();
            index.add(&entry).unwrap();
            index.write().unwrap();
        };
        for sealed in [true, false] {
            assert!(absorb(sealed).is_empty());
            assert!(ws.index_known.get().is_some(), "known to name the branch");
            stage(b"assert 'staged'\n");
            assert_ne!(staged(), committed);
            assert!(absorb(sealed).is_empty());
            assert_eq!(staged(), committed, "the index names the branch again");
        }
    }

    #[test]
    fn commits_edits_refuses_protected_changes_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, base) = repo_with_commit(dir.path());
        let ws = Workspace::create(&repo, base, "agent/t", "r1").unwrap();
        let protection = Protection::new(&[], &[]).unwrap();
        assert!(ws.path().join("calc.py").exists());

        std::fs::write(
            ws.path().join("calc.py"),
            "def add(a, b):\n    return a + b\n",
        )
        .unwrap();
        let CommitOutcome::Committed(oid) = ws
            .commit_changes("fix", "why", &protection, &NoHooks)
            .unwrap()
            .outcome
        else {
            panic!("expected a commit");
        };
        assert_eq!(ws.head().unwrap(), oid);
        assert_eq!(
            ws.commit_changes("again", "", &protection, &NoHooks)
                .unwrap()
                .outcome,
            CommitOutcome::NoChange
        );

        std::fs::write(ws.path().join("tests/test_calc.py"), "").unwrap();
        std::fs::write(ws.path().join("new.py"), "x = 1\n").unwrap();
        assert_eq!(
            ws.commit_changes("sneak", "", &protection, &NoHooks)
                .unwrap()
                .outcome,
            CommitOutcome::Refused(vec!["tests/test_calc.py".into()])
        );
        assert_eq!(ws.head().unwrap(), oid);
        assert_eq!(
            std::fs::read_to_string(ws.path().join("tests/test_calc.py")).unwrap(),
            "assert True\n"
        );
        assert!(
            !ws.path().join("new.py").exists(),
            "a refused change is rolled back whole"
        );

        let stats = ws.diffstat().unwrap();
        assert_eq!(
            stats,
            vec![crate::workspace::FileStat {
                path: "calc.py".into(),
                added: 1,
                removed: 1,
                binary: false
            }]
        );
        let path = ws.path().to_path_buf();
        ws.remove_worktree().unwrap();
        assert!(!path.exists());
        assert!(repo.find_branch("agent/t", BranchType::Local).is_ok());
        assert!(matches!(
            Workspace::create(&repo, base, "agent/t", "r2"),
            Err(SetupError::BranchExists(_))
        ));
    }

    #[test]
    fn a_branch_that_would_be_a_folder_of_another_is_refused_before_anything() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, base) = repo_with_commit(dir.path());
        let commit = repo.find_commit(base).unwrap();
        repo.branch("feat-2/x", &commit, false).unwrap();
        repo.branch("agent", &commit, false).unwrap();
        repo.branch("deep/er/still", &commit, false).unwrap();
        repo.branch("packed/one", &commit, false).unwrap();
        // Packed, as `git pack-refs` or a clone leaves branches: no file of its own.
        let packed = dir.path().join(".git/packed-refs");
        let id = repo.refname_to_id("refs/heads/packed/one").unwrap();
        std::fs::write(&packed, format!("{id} refs/heads/packed/one\n")).unwrap();
        std::fs::remove_file(dir.path().join(".git/refs/heads/packed/one")).unwrap();
        for (name, other) in [
            ("feat-2", "feat-2/x"),
            ("agent/run", "agent"),
            ("agent/run/deeper", "agent"),
            ("deep", "deep/er/still"),
            ("deep/er", "deep/er/still"),
            ("deep/er/still/more", "deep/er/still"),
            ("packed", "packed/one"),
            ("packed/one/two", "packed/one"),
        ] {
            match check_branch_free(&repo, name) {
                Err(SetupError::BranchClash(n, o)) => {
                    assert_eq!((n.as_str(), o.as_str()), (name, other))
                }
                found => panic!("{name}: {found:?}"),
            }
        }
        for free in [
            "feat-2x",
            "feat",
            "deep/e",
            "deep/err",
            "deeper",
            "packed-one",
        ] {
            assert!(check_branch_free(&repo, free).is_ok(), "{free}");
        }
    }

    #[test]
    fn a_command_s_changes_to_protected_paths_are_put_back_and_the_rest_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, base) = repo_with_commit(dir.path());
        let ws = Workspace::create(&repo, base, "agent/r", "r3").unwrap();
        let protection = Protection::new(&[], &[]).unwrap();
        let before = ws.snapshot().unwrap();
        std::fs::remove_file(ws.path().join("tests/test_calc.py")).unwrap();
        std::fs::write(ws.path().join("conftest.py"), "skip everything").unwrap();
        std::fs::write(ws.path().join("calc.py"), "changed").unwrap();
        let absorbed = ws
            .absorb_command("run", "", &protection, &before, &NoHooks)
            .unwrap();
        let mut restored = absorbed.reverted.clone();
        restored.sort();
        assert_eq!(restored, vec!["conftest.py", "tests/test_calc.py"]);
        assert!(matches!(
            absorbed.commit.outcome,
            CommitOutcome::Committed(_)
        ));
        assert!(!ws.path().join("conftest.py").exists());
        assert_eq!(
            std::fs::read_to_string(ws.path().join("tests/test_calc.py")).unwrap(),
            "assert True\n"
        );
        assert_eq!(
            std::fs::read_to_string(ws.path().join("calc.py")).unwrap(),
            "changed",
            "unprotected work is left alone"
        );
        ws.remove_worktree().unwrap();
    }

    /// worktree's index, then rewrites it: the index-stat status no longer reports it.
    #[test]
    fn skip_worktree_cannot_hide_a_protected_change_from_absorb() {
        for flag in ["--skip-worktree", "--assume-unchanged"] {
            let dir = tempfile::tempdir().unwrap();
            let (repo, base) = repo_with_commit(dir.path());
            let ws = Workspace::create(&repo, base, "agent/r", "rsw").unwrap();
            let protection = Protection::new(&[], &[]).unwrap();
            let before = ws.snapshot().unwrap();
            // What `run_command` could do: git update-index, then rewrite the test.
            let ok = std::process::Command::new("git")
                .current_dir(ws.path())
                .args(["update-index", flag, "tests/test_calc.py"])
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .status()
                .unwrap();
            assert!(ok.success());
            std::fs::write(
                ws.path().join("tests/test_calc.py"),
                "assert 1 == 1 or True\n",
            )
            .unwrap();
            let absorbed = ws
                .absorb_command("run", "", &protection, &before, &NoHooks)
                .unwrap();
            let now = std::fs::read_to_string(ws.path().join("tests/test_calc.py")).unwrap();
            assert_eq!(
                (flag, absorbed.reverted.clone(), now.as_str()),
                (
                    flag,
                    vec!["tests/test_calc.py".to_string()],
                    "assert True\n"
                ),
                "the protected change must be put back"
            );
            ws.remove_worktree().unwrap();
        }
    }
}
