//! Traceback frames that point into the repository, read from test output. Tests run in a
//! copy of the repository at a path nobody knows in advance, so a printed path is mapped to
//! the tracked file that is its longest suffix.

use regex::{Captures, Regex};
use std::sync::OnceLock;

/// A place in a repository file that a traceback passes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The tracked path, relative and `/`-separated.
    pub file: String,
    pub line: usize,
    pub function: Option<String>,
}

/// Paths that belong to the toolchain or to installed packages, never to the repository.
const OUTSIDE: &[&str] = &[
    "site-packages/",
    "dist-packages/",
    "/lib/python3.",
    "/lib/python2.",
    "/lib/pypy",
    "<frozen ",
    "node_modules/",
    "node:",
    "/.cargo/registry/",
    "/.cargo/git/",
    "/rustc/",
    "/.rustup/",
    "/go/pkg/mod/",
    "/usr/local/go/",
    "/usr/lib/go",
];

/// The tracked files of a repository, indexed for mapping printed paths to them.
/// The repository's files, looked up by path and by file name. Sorted lists rather than
/// hash tables: on a 100,000-file repository they hold a third of the memory, and a brief
/// looks up a few hundred names.
pub(crate) struct RepoFiles<'a> {
    all: Vec<&'a str>,
    /// Places in `all`, by file name (then path): four bytes a file, not a second pair of
    /// slices.
    by_name: Vec<u32>,
}

impl<'a> RepoFiles<'a> {
    pub(crate) fn new(files: &'a [String]) -> Self {
        let mut all: Vec<&str> = files.iter().map(String::as_str).collect();
        all.sort_unstable();
        // More files than a u32 counts are not looked up by name.
        let count = u32::try_from(all.len()).unwrap_or(u32::MAX);
        // By name, then by place: `all` is sorted, so that is by name, then path. Each name
        // is found once, not at each comparison (on 100,000 files, a third of the brief).
        let mut named: Vec<(&str, u32)> = (0..count)
            .map(|at| (file_name(all[at as usize]), at))
            .collect();
        named.sort_unstable();
        let by_name = named.into_iter().map(|(_, at)| at).collect();
        RepoFiles { all, by_name }
    }

    /// Every tracked path, sorted.
    pub(crate) fn all(&self) -> &[&'a str] {
        &self.all
    }

    /// The tracked path equal to `path`.
    pub(crate) fn get(&self, path: &str) -> Option<&'a str> {
        self.all.binary_search(&path).ok().map(|at| self.all[at])
    }

    /// Tracked files that are `tail` or end with `/tail`, shortest first.
    pub(crate) fn ending_with(&self, tail: &str) -> Vec<&'a str> {
        let name = file_name(tail);
        let path = |at: &u32| self.all[*at as usize];
        let start = self
            .by_name
            .partition_point(|at| file_name(path(at)) < name);
        let mut found: Vec<&str> = self.by_name[start..]
            .iter()
            .map(path)
            .take_while(|f| file_name(f) == name)
            .filter(|f| *f == tail || f.ends_with(&format!("/{tail}")))
            .collect();
        found.sort_by_key(|f| (f.len(), *f));
        found
    }

    /// The tracked file a printed path names: its longest suffix that is tracked; else, for a
    /// relative path (Go prints them relative to the package), the one tracked file ending
    /// with it, or the one in a directory that `dirs` name.
    pub(crate) fn resolve(&self, printed: &str, dirs: &[&str]) -> Option<&'a str> {
        let path = printed.strip_prefix("file://").unwrap_or(printed);
        if OUTSIDE.iter().any(|o| path.contains(o)) {
            return None;
        }
        let path = path.trim_start_matches("./");
        let mut rest = path.trim_start_matches('/');
        loop {
            if let Some(found) = self.get(rest) {
                return Some(found);
            }
            match rest.split_once('/') {
                Some((_, tail)) => rest = tail,
                None => break,
            }
        }
        if path.starts_with('/') {
            return None;
        }
        let found = self.ending_with(path);
        match found.as_slice() {
            [one] => Some(one),
            _ => found.into_iter().find(|f| {
                let dir = f.rsplit_once('/').map_or("", |(d, _)| d);
                dirs.iter()
                    .any(|d| *d == dir || d.ends_with(&format!("/{dir}")))
            }),
        }
    }
}

pub(crate) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

struct Patterns {
    python: Regex,
    pytest: Regex,
    rust_panic: Regex,
    rust_at: Regex,
    node_at: Regex,
    node_location: Regex,
    go_trace: Regex,
    go_log: Regex,
    go_package: Regex,
}

/// Compiles the patterns now, so that their first use does not wait for them.
pub(super) fn warm_up() {
    let _ = patterns();
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("bad built-in regex {p}: {e}"));
        Patterns {
            // The function as the next word (`<module>` too): a Unicode `\w` class here would
            // take 0.8 MiB of memory.
            python: re(r#"File "([^"]+)", line (\d+)(?:, in (\S+))?"#),
            pytest: re(r"^([^\s:]+\.py):(\d+):(?: in (\w+)|\s|$)"),
            rust_panic: re(r"panicked at (?:'.*', )?([^\s:']+\.rs):(\d+):\d+"),
            rust_at: re(r"^\s+at (\S+\.rs):(\d+)(?::\d+)?\s*$"),
            node_at: re(
                r"(?:\bat |^\s+)(?:async )?(?:([^\s(]+)(?: \[as [^\]]+\])? \()?((?:file://)?[^\s()]+):(\d+):\d+\)?",
            ),
            node_location: re(r"location: '([^']+):(\d+):\d+'"),
            go_trace: re(r"^\s+(/\S+\.go):(\d+)(?: \+0x[0-9a-f]+)?\s*$"),
            go_log: re(r"^\s+(\S+\.go):(\d+): "),
            go_package: re(r"^(?:FAIL|ok)\s+([\w.\-]+(?:/[\w.\-]+)+)\s"),
        }
    })
}

/// A place as the output prints it.
struct Printed<'t> {
    path: &'t str,
    line: &'t str,
    function: Option<String>,
}

/// The path, line and (when the pattern has one) function groups of a match.
fn printed<'t>(c: &Captures<'t>, function: Option<usize>, offset: usize) -> Printed<'t> {
    let group = |i: usize| c.get(i).map_or("", |m| m.as_str());
    Printed {
        path: group(1 + offset),
        line: group(2 + offset),
        function: function
            .and_then(|i| c.get(i))
            .map(|m| m.as_str().to_string()),
    }
}

/// The repository frames in `text`, in the order printed, each place once.
pub(crate) fn frames_in(text: &str, repo: &RepoFiles) -> Vec<Frame> {
    let p = patterns();
    let lines: Vec<&str> = text.lines().collect();
    // Go prints paths relative to the package; `FAIL example.com/shop/pricing` says which.
    let packages: Vec<&str> = lines
        .iter()
        .filter_map(|l| p.go_package.captures(l))
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    let mut frames: Vec<Frame> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let previous = i.checked_sub(1).map_or("", |j| lines[j]);
        for place in places_on_line(line, previous) {
            let Some(file) = repo.resolve(place.path, &packages) else {
                continue;
            };
            let Ok(line) = place.line.parse::<usize>() else {
                continue;
            };
            match frames.iter_mut().find(|f| f.file == file && f.line == line) {
                // A panic line names the place, the backtrace below it the function.
                Some(seen) => seen.function = seen.function.take().or(place.function),
                None => frames.push(Frame {
                    file: file.to_string(),
                    line,
                    function: place.function,
                }),
            }
        }
    }
    frames
}

/// Every place one line of output names, in any runner's shape.
fn places_on_line<'t>(line: &'t str, previous: &'t str) -> Vec<Printed<'t>> {
    let p = patterns();
    let mut found: Vec<Printed> = p
        .python
        .captures_iter(line)
        .map(|c| printed(&c, Some(3), 0))
        .collect();
    let once = [
        (&p.pytest, Some(3)),
        (&p.rust_panic, None),
        (&p.node_location, None),
        (&p.go_log, None),
    ];
    for (pattern, function) in once {
        found.extend(pattern.captures(line).map(|c| printed(&c, function, 0)));
    }
    // Rust backtraces and Go panics print the function on the line above the place.
    let traced = p
        .rust_at
        .captures(line)
        .or_else(|| p.go_trace.captures(line));
    if let Some(c) = traced {
        let mut place = printed(&c, None, 0);
        place.function = caller(previous);
        found.push(place);
    }
    if found.is_empty() {
        found.extend(
            p.node_at
                .captures_iter(line)
                .map(|c| printed(&c, Some(1), 1)),
        );
    }
    found
}

/// The function a backtrace line names, short: `  4: shop::pricing::apply` gives `apply`,
/// `example.com/shop/pricing.Apply(0x5)` gives `pricing.Apply`.
fn caller(line: &str) -> Option<String> {
    let line = line.trim();
    let line = match line.split_once(": ") {
        Some((n, rest)) if n.chars().all(|c| c.is_ascii_digit()) => rest,
        _ => line,
    };
    let name = line.split('(').next()?.trim();
    let name = name.rsplit('/').next()?;
    let name = name
        .split("::")
        .filter(|s| !s.starts_with("{{") && !s.is_empty())
        .last()?;
    (!name.is_empty() && !name.contains(' ')).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> Vec<String> {
        [
            "shop/__init__.py",
            "shop/cart.py",
            "shop/pricing.py",
            "tests/test_cart.py",
            "src/lib.rs",
            "src/calc.js",
            "test/calc.test.js",
            "web/util.mjs",
            "calc/calc.go",
            "calc/calc_test.go",
            "other/calc_test.go",
        ]
        .map(String::from)
        .to_vec()
    }

    fn frames(output: &str) -> Vec<(String, usize, Option<String>)> {
        let files = repo();
        let repo = RepoFiles::new(&files);
        frames_in(output, &repo)
            .into_iter()
            .map(|f| (f.file, f.line, f.function))
            .collect()
    }

    fn at(file: &str, line: usize, function: Option<&str>) -> (String, usize, Option<String>) {
        (file.to_string(), line, function.map(String::from))
    }

    #[test]
    fn unittest_traceback_through_modules_keeps_repository_frames_only() {
        let output = r#"E
======================================================================
ERROR: test_total_plain (tests.test_cart.TestCart.test_total_plain)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/usr/lib/python3.12/unittest/case.py", line 58, in testPartExecutor
    yield
  File "/tmp/agent-git-clean-x81/repo/tests/test_cart.py", line 10, in test_total_plain
    self.assertEqual(cart.total(), 10.0)
                     ^^^^^^^^^^^^
  File "/tmp/agent-git-clean-x81/repo/shop/cart.py", line 13, in total
    return pricing.apply_discount(subtotal, code)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tmp/agent-git-clean-x81/repo/shop/pricing.py", line 5, in apply_discount
    rate = RATES[code]
           ~~~~~^^^^^^
  File "/home/u/.venv/lib/python3.12/site-packages/shop/pricing.py", line 9, in x
KeyError: None

----------------------------------------------------------------------
Ran 1 test in 0.001s

FAILED (errors=1)
"#;
        assert_eq!(
            frames(output),
            vec![
                at("tests/test_cart.py", 10, Some("test_total_plain")),
                at("shop/cart.py", 13, Some("total")),
                at("shop/pricing.py", 5, Some("apply_discount")),
            ]
        );
    }

    #[test]
    fn pytest_long_traceback_with_assert_lines() {
        let output = r#"============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.2.0, pluggy-1.5.0
rootdir: /tmp/agent-git-clean-3f9a/repo
collected 3 items

tests/test_cart.py F..                                                   [100%]

=================================== FAILURES ===================================
___________________________ test_total_unknown_code ____________________________

    def test_total_unknown_code():
        cart = Cart()
        cart.add("pen", 2.0, 5)
>       assert cart.total("BOGUS") == 10.0

tests/test_cart.py:14: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 
shop/cart.py:13: in total
    return pricing.apply_discount(subtotal, code)
../../usr/lib/python3.12/functools.py:909: in wrapper
    return dispatch(args[0].__class__)(*args, **kw)
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 

total = 10.0, code = 'BOGUS'

    def apply_discount(total, code):
>       rate = RATES[code]
E       KeyError: 'BOGUS'

shop/pricing.py:5: KeyError
=========================== short test summary info ============================
FAILED tests/test_cart.py::test_total_unknown_code - KeyError: 'BOGUS'
========================= 1 failed, 2 passed in 0.03s ==========================
"#;
        assert_eq!(
            frames(output),
            vec![
                at("tests/test_cart.py", 14, None),
                at("shop/cart.py", 13, Some("total")),
                at("shop/pricing.py", 5, None),
            ]
        );
    }

    #[test]
    fn cargo_panic_and_backtrace() {
        let output = r#"running 2 tests
test tests::adds ... FAILED
test tests::zero ... ok

failures:

---- tests::adds stdout ----

thread 'tests::adds' panicked at src/lib.rs:12:9:
assertion `left == right` failed
  left: -1
 right: 5
stack backtrace:
   0: __rustc::rust_begin_unwind
             at /rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/std/src/panicking.rs:689:5
   1: core::panicking::assert_failed
             at /rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/panicking.rs:394:5
   2: serde_json::de::from_str
             at /home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_json-1.0.1/src/de.rs:10:5
   3: calc::add
             at ./src/lib.rs:3:5
   4: calc::tests::adds
             at ./src/lib.rs:12:9
   5: calc::tests::adds::{{closure}}
             at ./src/lib.rs:11:14
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.

failures:
    tests::adds

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
"#;
        assert_eq!(
            frames(output),
            vec![
                at("src/lib.rs", 12, Some("adds")),
                at("src/lib.rs", 3, Some("add")),
                at("src/lib.rs", 11, Some("adds")),
            ]
        );
    }

    #[test]
    fn node_test_spec_and_tap_reporters() {
        let spec = "\u{2716} rejects strings (0.152096ms)
  TypeError [Error]: a must be a number
      at add (/tmp/agent-git-clean-q1/repo/src/calc.js:2:36)
      at TestContext.<anonymous> (/tmp/agent-git-clean-q1/repo/test/calc.test.js:10:22)
      at Test.runInAsyncScope (node:async_hooks:206:9)
      at Test.run (node:internal/test_runner/test:796:25)
      at async Test.processPendingSubtests (node:internal/test_runner/test:526:7)
      at file:///tmp/agent-git-clean-q1/repo/web/util.mjs:3:10
      at run (/tmp/agent-git-clean-q1/repo/node_modules/lib/src/calc.js:1:1)

test at test/calc.test.js:9:1
";
        assert_eq!(
            frames(spec),
            vec![
                at("src/calc.js", 2, Some("add")),
                at("test/calc.test.js", 10, Some("TestContext.<anonymous>")),
                at("web/util.mjs", 3, None),
                at("test/calc.test.js", 9, None),
            ]
        );
        let tap = "not ok 2 - rejects strings
  ---
  duration_ms: 0.226817
  location: '/tmp/agent-git-clean-q1/repo/test/calc.test.js:9:1'
  failureType: 'testCodeFailure'
  error: 'a must be a number'
  code: 'ERR_TEST_FAILURE'
  name: 'TypeError'
  stack: |-
    add (/tmp/agent-git-clean-q1/repo/src/calc.js:2:36)
    TestContext.<anonymous> (/tmp/agent-git-clean-q1/repo/test/calc.test.js:10:22)
    Test.runInAsyncScope (node:async_hooks:206:9)
    node:internal/test_runner/harness:255:12
  ...
";
        assert_eq!(
            frames(tap),
            vec![
                at("test/calc.test.js", 9, None),
                at("src/calc.js", 2, Some("add")),
                at("test/calc.test.js", 10, Some("TestContext.<anonymous>")),
            ]
        );
    }

    #[test]
    fn go_test_log_lines_and_panics() {
        let output = "--- FAIL: TestAdd (0.00s)
    calc_test.go:12: Add(2, 3) = -1; want 5
--- FAIL: TestDivide (0.00s)
panic: runtime error: integer divide by zero [recovered]
\tpanic: runtime error: integer divide by zero

goroutine 7 [running]:
testing.tRunner.func1.2({0x5172c0, 0x5d3a80})
\t/usr/local/go/src/testing/testing.go:1631 +0x24a
example.com/shop/calc.Divide(...)
\t/tmp/agent-git-clean-z/repo/calc/calc.go:8
example.com/shop/calc.TestDivide(0xc000007040?)
\t/tmp/agent-git-clean-z/repo/calc/calc_test.go:20 +0x18
testing.tRunner(0xc0000071e0, 0x53f7e8)
\t/usr/local/go/src/testing/testing.go:1689 +0xfb
exit status 2
FAIL\texample.com/shop/calc\t0.004s
FAIL
";
        assert_eq!(
            frames(output),
            vec![
                at("calc/calc_test.go", 12, None),
                at("calc/calc.go", 8, Some("calc.Divide")),
                at("calc/calc_test.go", 20, Some("calc.TestDivide")),
            ]
        );
    }

    #[test]
    fn an_ambiguous_relative_path_without_a_package_is_dropped() {
        let output = "--- FAIL: TestAdd (0.00s)\n    calc_test.go:12: boom\nFAIL\n";
        assert_eq!(frames(output), vec![]);
    }
}
