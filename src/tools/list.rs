//! The list_files tool: one directory at a time, its subdirectories first with how many files
//! each holds, then its files, a page at a time. No entry of the directory is ever hidden
//! behind a big sibling.

use super::files::refused;
use super::walk::each_file;
use super::{parse_input, Tool, ToolContext, ToolFatal, ToolOutcome};
use crate::guard::{display, Guard};
use crate::model::ToolSpec;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

/// The most entries on one page.
const PAGE_ENTRIES: usize = 500;
/// The most bytes on one page: long names make a shorter page, never a larger one.
const PAGE_BYTES: usize = 32 * 1024;

pub struct ListFiles;

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
                files git tracks or would track count (ignored files are left out). Paths are \
                relative to the repository root. At most 500 entries per call; the last line \
                says which offset shows the next page.",
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

    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolFatal> {
        let args: ListArgs = match parse_input("list_files", input) {
            Ok(a) => a,
            Err(outcome) => return Ok(outcome),
        };
        let path = args.path.as_deref().unwrap_or(".");
        Ok(list(ctx.guard, path, args.offset.unwrap_or(0)))
    }
}

/// The list_files tool's answer for the directory `path` (relative to the guard's root), from
/// entry `offset` on.
pub fn list(guard: &Guard, path: &str, offset: usize) -> ToolOutcome {
    let resolved = match guard.check_read(path) {
        Ok(r) => r,
        Err(e) => return refused(e),
    };
    let shown = display(&resolved.rel);
    if !resolved.real.exists() {
        return ToolOutcome::error(format!("{shown} does not exist"), "error: not found");
    }
    if !resolved.real.is_dir() {
        return ToolOutcome::ok(shown, "1 file");
    }
    let listing = Listing::of(&resolved.real);
    let summary = format!("{} files", listing.total);
    if listing.entries.is_empty() {
        return ToolOutcome::ok("(no files)", summary);
    }
    if offset >= listing.entries.len() {
        return ToolOutcome::error(
            format!(
                "offset {offset} is past the end: {shown} has {} entries",
                listing.entries.len()
            ),
            "error: past the end",
        );
    }
    ToolOutcome::ok(listing.page(&resolved.rel, offset), summary)
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
        Listing { entries, total }
    }

    /// The entries from `offset` on that fit a page, and how to see the next page.
    fn page(&self, rel: &Path, offset: usize) -> String {
        let mut out = String::new();
        let mut end = offset;
        for entry in self.entries[offset..].iter().take(PAGE_ENTRIES) {
            let line = match entry {
                Entry::Dir(name, 1) => format!("{}/ (1 file)\n", display(&rel.join(name))),
                Entry::Dir(name, n) => format!("{}/ ({n} files)\n", display(&rel.join(name))),
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
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::Protection;

    /// A work tree holding `files` (empty ones), and a guard over it.
    fn tree(files: &[String]) -> (tempfile::TempDir, Guard) {
        let dir = tempfile::tempdir().unwrap();
        for path in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, "").unwrap();
        }
        let protection = Protection::new(&["test*.py".to_string()], &[]).unwrap();
        let guard = Guard::new(dir.path(), protection).unwrap();
        (dir, guard)
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_top_level_entry_shows_beside_a_huge_directory_with_counts() {
        let mut files = names(&["calc.py", "test_calc.py", ".gitignore", "src/a.py"]);
        files.extend((0..1500).map(|i| format!("data/d{}/f{i:04}.txt", i / 100)));
        files.extend(names(&[
            "zz/build/out.o",
            "zz/keep.py",
            "logs/x.log",
            ".git/HEAD",
        ]));
        let (dir, guard) = tree(&files);
        std::fs::write(dir.path().join(".gitignore"), "build/\n*.log\n").unwrap();
        let out = list(&guard, ".", 0);
        assert_eq!(
            out.content,
            "data/ (1500 files)\nsrc/ (1 file)\nzz/ (1 file)\n.gitignore\ncalc.py\ntest_calc.py\n"
        );
        assert_eq!(out.summary, "1505 files");
        let data = list(&guard, "data/", 0);
        assert!(data
            .content
            .starts_with("data/d0/ (100 files)\ndata/d1/ (100 files)\n"));
        assert_eq!(data.content.lines().count(), 15);
        assert_eq!(
            list(&guard, "data/d3", 0).content.lines().next(),
            Some("data/d3/f0300.txt")
        );
        assert_eq!(list(&guard, "calc.py", 0).content, "calc.py");
    }

    #[test]
    fn a_large_directory_pages_with_an_offset_and_the_last_page_says_so() {
        let files: Vec<String> = (0..1203).map(|i| format!("pkg/m{i:04}.py")).collect();
        let (_dir, guard) = tree(&files);
        let first = list(&guard, "pkg", 0);
        let lines: Vec<&str> = first.content.lines().collect();
        assert_eq!(lines.len(), PAGE_ENTRIES + 1);
        assert_eq!(lines[0], "pkg/m0000.py");
        assert_eq!(
            lines[PAGE_ENTRIES],
            "[entries 1-500 of 1203; for the next page call list_files with path \"pkg\" and offset 500]"
        );
        let second = list(&guard, "pkg", 500);
        assert_eq!(second.content.lines().next(), Some("pkg/m0500.py"));
        let last = list(&guard, "pkg", 1000);
        let lines: Vec<&str> = last.content.lines().collect();
        assert_eq!(lines[0], "pkg/m1000.py");
        assert_eq!(lines[202], "pkg/m1202.py");
        assert_eq!(lines[203], "[entries 1001-1203 of 1203: the last page]");
        let past = list(&guard, "pkg", 1203);
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
        let (_dir, guard) = tree(&files);
        let out = list(&guard, "n", 0);
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
        let next = list(&guard, "n", shown);
        assert!(next.content.starts_with(&format!("n/{shown:03}x")));
    }

    #[test]
    fn the_guard_still_decides_what_may_be_listed() {
        let (_dir, guard) = tree(&names(&["a.py"]));
        for (path, says) in [
            ("..", "leads outside"),
            (".git", "inside .git"),
            ("nope", "does not exist"),
        ] {
            let out = list(&guard, path, 0);
            assert!(
                out.is_error && out.content.contains(says),
                "{path}: {out:?}"
            );
        }
        std::fs::create_dir(guard.root().join("empty")).unwrap();
        assert_eq!(list(&guard, "empty", 0).content, "(no files)");
    }
}
