//! The search tool: ripgrep's own searcher over the files git would track, on every core.
//! Results come back ordered by path and line, so the same tree always gives the same answer.

use super::files::refused;
use super::walk::each_file;
use super::{parse_input, Tool, ToolContext, ToolError, ToolOutcome};
use crate::guard::{display, Guard};
use crate::model::ToolSpec;
use grep_matcher::LineTerminator;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkFinish, SinkMatch};
use serde::Deserialize;
use serde_json::{json, Value};
use std::fs::File;
use std::path::{Path, PathBuf};

const MAX_MATCHES: usize = 200;
const MAX_MATCH_LINE: usize = 300;
const MAX_SEARCHED_FILE: u64 = 1024 * 1024;

/// The search tool: a regular expression over the work tree's files, skipping ignored files,
/// binary ones and those over 1 MiB.
pub struct Search;

#[derive(Deserialize)]
struct SearchArgs {
    pattern: String,
    path: Option<String>,
}

impl Tool for Search {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "search",
            description:
                "Search the repository's files (ignored files skipped) for a regular expression \
                (Rust regex syntax). Results are `path:line: text` in path order, at most 200, \
                with a count of the rest; binary files and files over 1 MB are skipped.",
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression to look for, line by line."},
                    "path": {"type": "string", "description": "File or directory to search in; default: the whole repository."}
                },
                "required": ["pattern"]
            }),
        }
    }

    fn label(&self, input: &Value) -> String {
        let pattern = input.get("pattern").and_then(Value::as_str).unwrap_or("");
        format!("search '{pattern}'")
    }

    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolError> {
        let args: SearchArgs = parse_input("search", input)?;
        Ok(search(
            ctx.guard,
            &args.pattern,
            args.path.as_deref().unwrap_or("."),
        ))
    }
}

/// The search tool's answer for `pattern` under `path` (relative to the guard's root): the
/// first matches by path and line, and how many there are in all.
pub fn search(guard: &Guard, pattern: &str, path: &str) -> ToolOutcome {
    let matcher = match line_matcher(pattern) {
        Ok(m) => m,
        Err(e) => {
            return ToolOutcome::error(
                format!("invalid regular expression: {e}"),
                "error: bad pattern",
            )
        }
    };
    let resolved = match guard.check_read(path) {
        Ok(r) => r,
        Err(e) => return refused(e),
    };
    let found = each_file(
        &resolved.real,
        || Found::new(line_searcher()),
        |found, entry| found.search(guard, &matcher, entry),
    );
    let (hits, total) = Found::merge(found);
    let summary = format!("{total} matches");
    if hits.is_empty() {
        return ToolOutcome::ok("no matches", summary);
    }
    let mut lines: Vec<String> = hits
        .iter()
        .map(|h| format!("{}:{}: {}", display(&h.path), h.line, h.text))
        .collect();
    let more = total - hits.len() as u64;
    if more > 0 {
        lines.push(format!(
            "[{more} more matches not shown; narrow the pattern or the path]"
        ));
    }
    ToolOutcome::ok(lines.join("\n"), summary)
}

/// The pattern matched line by line, as a model writing `^def` or `:$` means it: the anchors
/// hold at each line's ends, before a `\r\n` too.
fn line_matcher(pattern: &str) -> Result<RegexMatcher, grep_regex::Error> {
    RegexMatcherBuilder::new()
        .multi_line(true)
        .crlf(true)
        .build(pattern)
}

fn line_searcher() -> Searcher {
    SearcherBuilder::new()
        .line_terminator(LineTerminator::crlf())
        .line_number(true)
        // A NUL byte anywhere makes the file binary: it is dropped, matches found before included.
        .binary_detection(BinaryDetection::quit(0))
        .build()
}

/// One matching line.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Hit {
    path: PathBuf,
    line: u64,
    text: String,
}

/// What one thread of the walk found: the first hits by path (at most twice the cap, so
/// memory stays bounded whatever the pattern) and how many matching lines it saw in all.
struct Found {
    searcher: Searcher,
    hits: Vec<Hit>,
    /// Once this thread holds the cap of hits in files up to this path, later files' lines
    /// are only counted.
    bar: Option<PathBuf>,
    total: u64,
}

impl Found {
    fn new(searcher: Searcher) -> Self {
        Found {
            searcher,
            hits: Vec::new(),
            bar: None,
            total: 0,
        }
    }

    fn search(&mut self, guard: &Guard, matcher: &RegexMatcher, entry: &ignore::DirEntry) {
        let Ok(rel) = entry.path().strip_prefix(guard.root()) else {
            return;
        };
        let Some(file) = searchable(guard, rel, entry) else {
            return;
        };
        let mut sink = FileSink {
            keep: self.could_keep(rel),
            ..FileSink::default()
        };
        // One byte past the cap is read to tell a file at the cap from one over it.
        let capped = std::io::Read::take(&file, MAX_SEARCHED_FILE + 1);
        let searched = self.searcher.search_reader(matcher, capped, &mut sink);
        if searched.is_err() || sink.binary || sink.bytes > MAX_SEARCHED_FILE {
            return;
        }
        self.total += sink.count;
        let path = rel.to_path_buf();
        self.hits
            .extend(sink.lines.into_iter().map(|(line, text)| Hit {
                path: path.clone(),
                line,
                text,
            }));
        if self.hits.len() > 2 * MAX_MATCHES {
            self.hits.sort_unstable();
            self.hits.truncate(MAX_MATCHES);
            self.bar = self.hits.last().map(|h| h.path.clone());
        }
    }

    /// Whether hits in `rel` could be among the first by path: not when this thread alone
    /// already holds enough hits in files that sort before it.
    fn could_keep(&self, rel: &Path) -> bool {
        self.bar.as_deref().is_none_or(|bar| rel < bar)
    }

    /// The first hits of all threads by path and line, and the count of every match.
    fn merge(found: Vec<Found>) -> (Vec<Hit>, u64) {
        let total = found.iter().map(|f| f.total).sum();
        let mut hits: Vec<Hit> = found.into_iter().flat_map(|f| f.hits).collect();
        hits.sort_unstable();
        hits.truncate(MAX_MATCHES);
        (hits, total)
    }
}

/// The file at `rel`, opened for searching if it is a regular file; through a symlink only if
/// it leads to one inside the work tree. The walk already knows the other entries are regular
/// files: they cost no extra `stat`, and their size is checked as they are read.
fn searchable(guard: &Guard, rel: &Path, entry: &ignore::DirEntry) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    if entry.path_is_symlink() && guard.check_read(rel.to_str()?).is_err() {
        return None;
    }
    // Without O_NONBLOCK, opening a FIFO put in a file's place would wait for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(entry.path())
        .ok()?;
    if entry.path_is_symlink() && !file.metadata().ok()?.is_file() {
        return None;
    }
    Some(file)
}

/// Receives one file's matching lines.
#[derive(Default)]
struct FileSink {
    /// Whether the lines are worth keeping, or only counting.
    keep: bool,
    lines: Vec<(u64, String)>,
    count: u64,
    binary: bool,
    /// How many bytes were searched: over the cap, the file is skipped.
    bytes: u64,
}

impl Sink for FileSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.count += 1;
        if self.keep && self.lines.len() < MAX_MATCHES {
            let line = found.line_number().unwrap_or(0);
            self.lines.push((line, shown_line(found.bytes())));
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }

    fn finish(&mut self, _: &Searcher, finish: &SinkFinish) -> Result<(), Self::Error> {
        self.bytes = finish.byte_count();
        Ok(())
    }
}

/// A matching line as the model sees it: without its line ending, at most 300 characters.
fn shown_line(bytes: &[u8]) -> String {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // 300 characters take at most 1200 bytes: no need to decode the rest of a long line.
    let head = &line[..line.len().min(MAX_MATCH_LINE * 4)];
    String::from_utf8_lossy(head)
        .chars()
        .take(MAX_MATCH_LINE)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::Protection;

    /// A work tree holding `files`, and a guard over it that protects `test*.py`.
    fn tree(files: &[(&str, &[u8])]) -> (tempfile::TempDir, Guard) {
        let dir = tempfile::tempdir().unwrap();
        for (path, bytes) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, bytes).unwrap();
        }
        let protection = Protection::new(&["test*.py".to_string()], &[]).unwrap();
        let guard = Guard::new(dir.path(), protection).unwrap();
        (dir, guard)
    }

    #[test]
    fn matches_come_ordered_by_path_then_line_whatever_thread_found_them() {
        let names: Vec<String> = (0..40)
            .rev()
            .map(|i| format!("d{}/f{i:02}.txt", i % 7))
            .collect();
        let files: Vec<(&str, &[u8])> = names
            .iter()
            .map(|n| (n.as_str(), &b"hit one\nmiss\nhit two\n"[..]))
            .collect();
        let (_dir, guard) = tree(&files);
        let out = search(&guard, "^hit", ".");
        let mut expected: Vec<String> = Vec::new();
        let mut sorted = names.clone();
        sorted.sort_by(|a, b| Path::new(a).cmp(Path::new(b)));
        for name in &sorted {
            expected.push(format!("{name}:1: hit one"));
            expected.push(format!("{name}:3: hit two"));
        }
        assert_eq!(out.content, expected.join("\n"));
        assert_eq!(out.summary, "80 matches");
        assert!(!out.is_error);
    }

    #[test]
    fn past_the_cap_the_first_matches_by_path_are_shown_and_the_rest_counted() {
        let names: Vec<String> = (0..120).map(|i| format!("f{i:03}.txt")).collect();
        let text = b"x\nx\nx\n";
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &text[..])).collect();
        let (_dir, guard) = tree(&files);
        let out = search(&guard, "x", ".");
        let lines: Vec<&str> = out.content.lines().collect();
        assert_eq!(lines.len(), MAX_MATCHES + 1);
        assert_eq!(lines[0], "f000.txt:1: x");
        assert_eq!(lines[MAX_MATCHES - 1], "f066.txt:2: x");
        assert_eq!(
            lines[MAX_MATCHES],
            "[160 more matches not shown; narrow the pattern or the path]"
        );
        assert_eq!(out.summary, "360 matches");
    }

    #[test]
    fn lines_are_cut_and_anchors_hold_at_crlf_line_ends() {
        let long = format!("key = {}\n", "é".repeat(1000));
        let (_dir, guard) = tree(&[
            ("long.txt", long.as_bytes()),
            ("dos.txt", b"first:\r\nsecond\r\n"),
        ]);
        let out = search(&guard, "^key", ".");
        let expected: String = format!("long.txt:1: key = {}", "é".repeat(MAX_MATCH_LINE - 6));
        assert_eq!(out.content, expected);
        assert_eq!(search(&guard, ":$", ".").content, "dos.txt:1: first:");
        assert_eq!(search(&guard, "^second$", ".").content, "dos.txt:2: second");
    }

    #[test]
    fn ignored_binary_oversized_and_git_files_are_not_searched() {
        let mut late_nul = b"needle\n".to_vec();
        late_nul.extend(std::iter::repeat_n(b'a', 20_000));
        late_nul.push(0);
        let mut big = b"needle\n".to_vec();
        big.resize(MAX_SEARCHED_FILE as usize + 1, b'a');
        let mut at_cap = b"needle\n".to_vec();
        at_cap.resize(MAX_SEARCHED_FILE as usize, b'a');
        let (_dir, guard) = tree(&[
            (".gitignore", b"*.log\nbuild/\n"),
            ("app.log", b"needle\n"),
            ("build/out.txt", b"needle\n"),
            (".git/config", b"needle\n"),
            ("nul.bin", b"needle\0\n"),
            ("late_nul.txt", &late_nul),
            ("big.txt", &big),
            ("at_cap.txt", &at_cap),
            ("src/.hidden.py", b"needle = 1\n"),
            ("latin1.txt", b"caf\xe9 needle\n"),
        ]);
        let out = search(&guard, "needle", ".");
        assert_eq!(
            out.content,
            "at_cap.txt:1: needle\nlatin1.txt:1: caf\u{fffd} needle\nsrc/.hidden.py:1: needle = 1"
        );
        assert_eq!(out.summary, "3 matches");
    }

    #[test]
    fn protected_files_are_searched_and_the_guard_still_refuses_paths() {
        let (_dir, guard) = tree(&[
            ("test_calc.py", b"def test_add():\n"),
            ("calc.py", b"def add(a, b):\n"),
            ("pkg/mod.py", b"def add_more():\n"),
        ]);
        let out = search(&guard, "def (test_)?add", ".");
        assert_eq!(
            out.content,
            "calc.py:1: def add(a, b):\npkg/mod.py:1: def add_more():\ntest_calc.py:1: def test_add():"
        );
        assert_eq!(
            search(&guard, "def", "pkg").content,
            "pkg/mod.py:1: def add_more():"
        );
        assert_eq!(
            search(&guard, "def", "calc.py").content,
            "calc.py:1: def add(a, b):"
        );
        assert_eq!(search(&guard, "nowhere", ".").content, "no matches");
        for (path, says) in [
            ("../", "leads outside"),
            (".git", "inside .git"),
            ("/etc", "absolute"),
        ] {
            let out = search(&guard, "def", path);
            assert!(
                out.is_error && out.content.contains(says),
                "{path}: {out:?}"
            );
        }
        let bad = search(&guard, "(", ".");
        assert!(bad.is_error && bad.content.starts_with("invalid regular expression"));
    }

    #[test]
    fn links_are_followed_only_inside_the_tree_and_fifos_never_block() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "needle outside\n").unwrap();
        let (dir, guard) = tree(&[("real.txt", b"needle inside\n")]);
        let root = dir.path();
        std::os::unix::fs::symlink("real.txt", root.join("alias.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.join("out.txt"))
            .unwrap();
        let fifo = root.join("pipe.txt");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        std::os::unix::fs::symlink("pipe.txt", root.join("to_pipe.txt")).unwrap();
        let out = search(&guard, "needle", ".");
        assert_eq!(
            out.content,
            "alias.txt:1: needle inside\nreal.txt:1: needle inside"
        );
    }
}
