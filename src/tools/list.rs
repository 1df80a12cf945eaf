//! The list_files tool: one directory at a time, its subdirectories first with how many files
//! each holds, then its files, a page at a time. No entry of the directory is ever hidden
//! behind a big sibling.
//!
//! Between calls the work tree is the branch's HEAD plus ignored files (every change is
//! committed at once), so a tracked directory is listed from HEAD's tree, as fast as
//! `git ls-files`; only a directory git does not track is walked on disk.

use super::files::refused;
use super::walk::each_file;
use super::{parse_input, Tool, ToolContext, ToolError, ToolOutcome};
use crate::guard::{display, Guard};
use crate::model::ToolSpec;
use git2::{ObjectType, Oid, Repository, Tree};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// The most entries on one page.
const PAGE_ENTRIES: usize = 500;
/// The most bytes on one page: long names make a shorter page, never a larger one.
const PAGE_BYTES: usize = 32 * 1024;

/// The list_files tool. It keeps the file counts of the trees it has listed for the run.
#[derive(Default)]
pub struct ListFiles {
    counts: FileCounts,
}

/// How many files each tree holds, by tree id: a tree's count never changes, so it lives as
/// long as the tool, across the calls and commits of a run.
#[derive(Default)]
pub struct FileCounts(Mutex<HashMap<Oid, usize>>);

impl FileCounts {
    /// How many trees are remembered.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no tree is remembered yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Deserialize)]
struct ListArgs {
    path: Option<String>,
    offset: Option<usize>,
}

impl Tool for ListFiles {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_files",
            description: "List one directory of the repository (default: the root): first its \
                subdirectories, each with the number of files under it, then its files. Only \
                files git tracks count, as `git ls-files` shows them: ignored files are left out \
                (unless git already tracks them). A directory git does not track (ignored, or a \
                nested repository) is listed from disk, and says so. Paths are relative to the \
                repository root. At most 500 entries per call; the last line says which offset \
                shows the next page.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory relative to the repository root; default: the root."},
                    "offset": {"type": "integer", "minimum": 0, "description": "How many entries to skip, to see the next page (default 0)."}
                }
            }),
        }
    }

    fn label(&self, input: &Value) -> String {
        let path = input.get("path").and_then(Value::as_str).unwrap_or(".");
        match input.get("offset").and_then(Value::as_u64) {
            Some(offset) if offset > 0 => format!("list {path} from {offset}"),
            _ => format!("list {path}"),
        }
    }

    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError> {
        let args: ListArgs = parse_input("list_files", input)?;
        let path = args.path.as_deref().unwrap_or(".");
        let repo = ctx.workspace.repo()?;
        let offset = args.offset.unwrap_or(0);
        let outcome = list(ctx.guard, repo, &self.counts, path, offset);
        Ok(outcome.map_err(crate::workspace::WorkspaceError::from)?)
    }
}

/// The list_files tool's answer for the directory `path` (relative to the guard's root, which
/// is `repo`'s work tree), from entry `offset` on: from HEAD's tree, or from disk for what it
/// does not hold. Fails only when git cannot read HEAD's objects.
pub fn list(
    guard: &Guard,
    repo: &Repository,
    counts: &FileCounts,
    path: &str,
    offset: usize,
) -> Result<ToolOutcome, git2::Error> {
    let resolved = match guard.check_read(path) {
        Ok(r) => r,
        Err(e) => return Ok(refused(e)),
    };
    let shown = display(&resolved.rel);
    // Where a symlink leads, as the guard resolved it, is where the tree is read.
    let inside = resolved
        .real
        .strip_prefix(guard.root())
        .unwrap_or(&resolved.rel);
    let listing = match tracked(repo, inside)? {
        Tracked::Dir(tree) => {
            let mut memo = counts.0.lock().unwrap_or_else(PoisonError::into_inner);
            Listing::of_tree(repo, &tree, &mut memo)?
        }
        Tracked::File => return Ok(ToolOutcome::ok(shown, "1 file")),
        Tracked::No if !resolved.real.exists() => {
            return Ok(ToolOutcome::error(
                format!("{shown} does not exist"),
                "error: not found",
            ))
        }
        Tracked::No if !resolved.real.is_dir() => return Ok(ToolOutcome::ok(shown, "1 file")),
        Tracked::No => Listing::of(&resolved.real).untracked(),
    };
    Ok(listing.answer(&resolved.rel, offset))
}

/// What HEAD's tree holds at a path.
enum Tracked<'r> {
    Dir(Tree<'r>),
    File,
    /// Nothing, or a submodule (whose files are another repository's).
    No,
}

/// What HEAD's tree holds at `inside` (relative to the work tree's root).
fn tracked<'r>(repo: &'r Repository, inside: &Path) -> Result<Tracked<'r>, git2::Error> {
    let root = repo.head()?.peel_to_tree()?;
    if inside.as_os_str().is_empty() {
        return Ok(Tracked::Dir(root));
    }
    let entry = match root.get_path(inside) {
        Ok(entry) => entry,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(Tracked::No),
        Err(e) => return Err(e),
    };
    Ok(match entry.kind() {
        Some(ObjectType::Tree) => Tracked::Dir(repo.find_tree(entry.id())?),
        Some(ObjectType::Blob) => Tracked::File,
        _ => Tracked::No,
    })
}

/// How many files the tree `id` holds, at any depth; a symlink or a submodule counts as one.
fn count_files(
    repo: &Repository,
    id: Oid,
    memo: &mut HashMap<Oid, usize>,
) -> Result<usize, git2::Error> {
    if let Some(&known) = memo.get(&id) {
        return Ok(known);
    }
    let tree = repo.find_tree(id)?;
    let mut count = 0;
    for entry in tree.iter() {
        count += match entry.kind() {
            Some(ObjectType::Tree) => count_files(repo, entry.id(), memo)?,
            _ => 1,
        };
    }
    memo.insert(id, count);
    Ok(count)
}

/// One entry of a directory: a subdirectory with the files under it, or a file.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Entry {
    Dir(OsString, usize),
    File(OsString),
}

/// A directory's entries, subdirectories first, each kind by name; and its files in all.
struct Listing {
    entries: Vec<Entry>,
    total: usize,
    /// Read from disk, since git does not track the directory.
    untracked: bool,
}

/// What one thread of the walk saw: files per subdirectory, and the directory's own files.
#[derive(Default)]
struct Tally {
    dirs: HashMap<OsString, usize>,
    files: Vec<OsString>,
}

impl Tally {
    /// Counts the file at `inside` (relative to the listed directory).
    fn add(&mut self, inside: &Path) {
        let mut parts = inside.iter();
        let Some(first) = parts.next() else {
            return;
        };
        if parts.next().is_none() {
            self.files.push(first.to_os_string());
        } else if let Some(count) = self.dirs.get_mut(first) {
            *count += 1;
        } else {
            self.dirs.insert(first.to_os_string(), 1);
        }
    }
}

impl Listing {
    /// The entries of a tracked directory; the counts of its subtrees come from `memo` when
    /// known, and are added to it when not.
    fn of_tree(
        repo: &Repository,
        tree: &Tree,
        memo: &mut HashMap<Oid, usize>,
    ) -> Result<Listing, git2::Error> {
        let mut entries = Vec::with_capacity(tree.len());
        let mut total = 0;
        for entry in tree.iter() {
            let name = OsStr::from_bytes(entry.name_bytes()).to_os_string();
            if entry.kind() == Some(ObjectType::Tree) {
                let count = count_files(repo, entry.id(), memo)?;
                total += count;
                entries.push(Entry::Dir(name, count));
            } else {
                total += 1;
                entries.push(Entry::File(name));
            }
        }
        entries.sort_unstable();
        Ok(Listing {
            entries,
            total,
            untracked: false,
        })
    }

    /// The same listing, marked as read from disk.
    fn untracked(self) -> Listing {
        Listing {
            untracked: true,
            ..self
        }
    }

    /// The tool's answer: the page from `offset` on, or why there is none.
    fn answer(&self, rel: &Path, offset: usize) -> ToolOutcome {
        let summary = crate::text::count(self.total as u64, "file");
        if self.entries.is_empty() {
            return ToolOutcome::ok("(no files)", summary);
        }
        if offset >= self.entries.len() {
            return ToolOutcome::error(
                format!(
                    "offset {offset} is past the end: {} has {} entries",
                    display(rel),
                    self.entries.len()
                ),
                "error: past the end",
            );
        }
        ToolOutcome::ok(self.page(rel, offset), summary)
    }

    /// The files under `dir` that git would track, walked on disk.
    fn of(dir: &Path) -> Listing {
        let tallies = each_file(dir, Tally::default, |tally, entry| {
            if let Ok(inside) = entry.path().strip_prefix(dir) {
                tally.add(inside);
            }
        });
        let mut dirs: HashMap<OsString, usize> = HashMap::new();
        let mut entries = Vec::new();
        for tally in tallies {
            for (name, count) in tally.dirs {
                *dirs.entry(name).or_default() += count;
            }
            entries.extend(tally.files.into_iter().map(Entry::File));
        }
        let total = dirs.values().sum::<usize>() + entries.len();
        entries.extend(
            dirs.into_iter()
                .map(|(name, count)| Entry::Dir(name, count)),
        );
        entries.sort_unstable();
        Listing {
            entries,
            total,
            untracked: false,
        }
    }

    /// The entries from `offset` on that fit a page, and how to see the next page.
    fn page(&self, rel: &Path, offset: usize) -> String {
        let mut out = String::new();
        let mut end = offset;
        for entry in self.entries[offset..].iter().take(PAGE_ENTRIES) {
            let line = match entry {
                Entry::Dir(name, 1) => format!("{}/ (1 file)\n", display(&rel.join(name))),
                Entry::Dir(name, n) => format!(
                    "{}/ ({})\n",
                    display(&rel.join(name)),
                    crate::text::count(*n as u64, "file")
                ),
                Entry::File(name) => format!("{}\n", display(&rel.join(name))),
            };
            if end > offset && out.len() + line.len() > PAGE_BYTES {
                break;
            }
            out.push_str(&line);
            end += 1;
        }
        let all = self.entries.len();
        if end < all {
            out.push_str(&format!(
                "[entries {}-{end} of {all}; for the next page call list_files with path {} and offset {end}]\n",
                offset + 1,
                Value::String(display(rel)),
            ));
        } else if offset > 0 {
            out.push_str(&format!(
                "[entries {}-{end} of {all}: the last page]\n",
                offset + 1
            ));
        }
        if self.untracked {
            out.push_str(&format!(
                "[git does not track {} (it is ignored, a nested repository or a submodule): \
                 these files are read from disk, and changes to them are not committed]\n",
                display(rel)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::Protection;

    /// A repository whose HEAD holds `files` (empty ones, but what `.gitignore` leaves out),
    /// with `gitignore` as its .gitignore, and a guard over its work tree.
    struct Fixture {
        dir: tempfile::TempDir,
        guard: Guard,
        repo: Repository,
        counts: FileCounts,
    }

    impl Fixture {
        fn new(files: &[String], gitignore: &str) -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            for path in files {
                let full = dir.path().join(path);
                std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                std::fs::write(full, "").unwrap();
            }
            std::fs::write(dir.path().join(".gitignore"), gitignore).unwrap();
            let repo = Repository::init(dir.path()).unwrap();
            let protection = Protection::new(&["test*.py".to_string()], &[]).unwrap();
            let guard = Guard::new(dir.path(), protection).unwrap();
            let fixture = Fixture {
                dir,
                guard,
                repo,
                counts: FileCounts::default(),
            };
            fixture.commit_all();
            fixture
        }

        /// Commits what the work tree holds, as the workspace does after every change.
        fn commit_all(&self) {
            let mut index = self.repo.index().unwrap();
            index
                .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
                .unwrap();
            index.update_all(["*"], None).unwrap();
            index.write().unwrap();
            let tree = self.repo.find_tree(index.write_tree().unwrap()).unwrap();
            let sig = git2::Signature::now("t", "t@example.com").unwrap();
            let parent = self.repo.head().ok().map(|h| h.peel_to_commit().unwrap());
            let parents: Vec<&git2::Commit> = parent.iter().collect();
            self.repo
                .commit(Some("HEAD"), &sig, &sig, "c", &tree, &parents)
                .unwrap();
        }

        fn list(&self, path: &str, offset: usize) -> ToolOutcome {
            list(&self.guard, &self.repo, &self.counts, path, offset).unwrap()
        }

        fn root(&self) -> &Path {
            self.dir.path()
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn crowded() -> Fixture {
        let mut files = names(&["calc.py", "test_calc.py", "src/a.py"]);
        files.extend((0..1500).map(|i| format!("data/d{}/f{i:04}.txt", i / 100)));
        files.extend(names(&["zz/build/out.o", "zz/keep.py", "logs/x.log"]));
        Fixture::new(&files, "build/\n*.log\n")
    }

    #[test]
    fn every_top_level_entry_shows_beside_a_huge_directory_with_counts() {
        let repo = crowded();
        let out = repo.list(".", 0);
        assert_eq!(
            out.content,
            "data/ (1500 files)\nsrc/ (1 file)\nzz/ (1 file)\n.gitignore\ncalc.py\ntest_calc.py\n"
        );
        assert_eq!(out.summary, "1505 files");
        let data = repo.list("data/", 0);
        assert!(data
            .content
            .starts_with("data/d0/ (100 files)\ndata/d1/ (100 files)\n"));
        assert_eq!(data.content.lines().count(), 15);
        assert_eq!(
            repo.list("data/d3", 0).content.lines().next(),
            Some("data/d3/f0300.txt")
        );
        assert_eq!(repo.list("calc.py", 0).content, "calc.py");
    }

    #[test]
    fn counts_follow_the_commits_of_the_run() {
        let repo = crowded();
        assert!(repo
            .list(".", 0)
            .content
            .starts_with("data/ (1500 files)\n"));
        std::fs::write(repo.root().join("data/d0/new.txt"), "").unwrap();
        std::fs::remove_file(repo.root().join("src/a.py")).unwrap();
        std::fs::write(repo.root().join("src/b.py"), "").unwrap();
        std::fs::write(repo.root().join("src/c.py"), "").unwrap();
        repo.commit_all();
        let out = repo.list(".", 0);
        assert_eq!(
            out.content,
            "data/ (1501 files)\nsrc/ (2 files)\nzz/ (1 file)\n.gitignore\ncalc.py\ntest_calc.py\n"
        );
        assert_eq!(out.summary, "1507 files");
        assert!(repo
            .list("data", 0)
            .content
            .starts_with("data/d0/ (101 files)\n"));
    }

    #[test]
    fn remembered_counts_answer_as_a_fresh_count_does() {
        let repo = crowded();
        for path in [".", "data", "data/d7", "zz"] {
            let first = repo.list(path, 0);
            let remembered = repo.list(path, 0);
            let fresh = list(&repo.guard, &repo.repo, &FileCounts::default(), path, 0).unwrap();
            assert_eq!(first, remembered, "{path}");
            assert_eq!(fresh, remembered, "{path}");
        }
        // data, its 15 subdirectories, src, zz: a listed tree counts its entries itself.
        assert_eq!(repo.counts.len(), 18);
    }

    #[test]
    fn tracked_files_that_gitignore_matches_are_listed_as_git_ls_files_lists_them() {
        let repo = Fixture::new(&names(&["a.py", "keep.log"]), "");
        std::fs::write(repo.root().join(".gitignore"), "*.log\n").unwrap();
        std::fs::write(repo.root().join("new.log"), "").unwrap();
        repo.commit_all();
        assert_eq!(repo.list(".", 0).content, ".gitignore\na.py\nkeep.log\n");
    }

    #[test]
    fn a_directory_git_does_not_track_is_read_from_disk_and_says_so() {
        let repo = crowded();
        let out = repo.list("zz/build", 0);
        assert_eq!(
            out.content,
            "zz/build/out.o\n[git does not track zz/build (it is ignored, a nested repository or \
             a submodule): these files are read from disk, and changes to them are not committed]\n"
        );
        assert_eq!(out.summary, "1 file");
        let logs = repo.list("logs", 0);
        assert_eq!(logs.content, "(no files)", "*.log still leaves x.log out");
        assert_eq!(repo.list("logs/x.log", 0).content, "logs/x.log");
    }

    #[test]
    fn a_path_through_a_symlink_lists_where_the_link_leads() {
        let repo = crowded();
        std::os::unix::fs::symlink("data/d2", repo.root().join("alias")).unwrap();
        repo.commit_all();
        assert!(
            repo.list(".", 0).content.contains("\nalias\n"),
            "a link is a file"
        );
        let out = repo.list("alias", 0);
        assert_eq!(out.content.lines().next(), Some("alias/f0200.txt"));
        assert_eq!(out.summary, "100 files");
    }

    #[test]
    fn a_submodule_is_one_entry_and_its_checkout_is_read_from_disk() {
        let repo = Fixture::new(&names(&["a.py"]), "");
        let head = repo.repo.head().unwrap().peel_to_commit().unwrap();
        let mut root = repo.repo.treebuilder(Some(&head.tree().unwrap())).unwrap();
        root.insert("vendor", head.id(), 0o160000).unwrap();
        let tree = repo.repo.find_tree(root.write().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        repo.repo
            .commit(Some("HEAD"), &sig, &sig, "sub", &tree, &[&head])
            .unwrap();
        std::fs::create_dir(repo.root().join("vendor")).unwrap();
        let out = repo.list(".", 0);
        assert_eq!(out.content, ".gitignore\na.py\nvendor\n");
        assert_eq!(out.summary, "3 files");
        assert_eq!(repo.list("vendor", 0).content, "(no files)");
    }

    #[test]
    fn a_large_directory_pages_with_an_offset_and_the_last_page_says_so() {
        let files: Vec<String> = (0..1203).map(|i| format!("pkg/m{i:04}.py")).collect();
        let repo = Fixture::new(&files, "");
        let first = repo.list("pkg", 0);
        let lines: Vec<&str> = first.content.lines().collect();
        assert_eq!(lines.len(), PAGE_ENTRIES + 1);
        assert_eq!(lines[0], "pkg/m0000.py");
        assert_eq!(
            lines[PAGE_ENTRIES],
            "[entries 1-500 of 1203; for the next page call list_files with path \"pkg\" and offset 500]"
        );
        let second = repo.list("pkg", 500);
        assert_eq!(second.content.lines().next(), Some("pkg/m0500.py"));
        let last = repo.list("pkg", 1000);
        let lines: Vec<&str> = last.content.lines().collect();
        assert_eq!(lines[0], "pkg/m1000.py");
        assert_eq!(lines[202], "pkg/m1202.py");
        assert_eq!(lines[203], "[entries 1001-1203 of 1203: the last page]");
        let past = repo.list("pkg", 1203);
        assert!(
            past.is_error && past.content.contains("has 1203 entries"),
            "{past:?}"
        );
    }

    #[test]
    fn long_names_make_a_shorter_page_that_says_where_to_go_on() {
        let files: Vec<String> = (0..300)
            .map(|i| format!("n/{i:03}{}", "x".repeat(200)))
            .collect();
        let repo = Fixture::new(&files, "");
        let out = repo.list("n", 0);
        assert!(
            out.content.len() <= PAGE_BYTES + 200,
            "{}",
            out.content.len()
        );
        let shown = out.content.lines().count() - 1;
        assert!(shown < 300);
        let footer = out.content.lines().last().unwrap();
        assert!(
            footer.ends_with(&format!("and offset {shown}]")),
            "{footer}"
        );
        let next = repo.list("n", shown);
        assert!(next.content.starts_with(&format!("n/{shown:03}x")));
    }

    #[test]
    fn the_guard_still_decides_what_may_be_listed() {
        let repo = Fixture::new(&names(&["a.py"]), "");
        for (path, says) in [
            ("..", "leads outside"),
            (".git", "inside .git"),
            ("nope", "does not exist"),
        ] {
            let out = repo.list(path, 0);
            assert!(
                out.is_error && out.content.contains(says),
                "{path}: {out:?}"
            );
        }
        std::fs::create_dir(repo.root().join("empty")).unwrap();
        assert_eq!(repo.list("empty", 0).content, "(no files)");
    }
}
