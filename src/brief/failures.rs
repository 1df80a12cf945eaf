//! The failing tests' context: each test's source, and the repository lines its traceback
//! passes through, quoted with line numbers so the model starts where the failure is.

use super::frames::{frames_in, Frame, RepoFiles};
use super::locate::{locate, Located, Reader};
use crate::testrun::TestResult;

/// Tests quoted at most: past a few, more failures rarely tell anything new.
const MAX_TESTS: usize = 5;
const MAX_FRAMES: usize = 12;
/// A test longer than this is quoted up to here.
const MAX_QUOTED_LINES: usize = 40;
/// Lines shown either side of a frame's line.
const CONTEXT_LINES: usize = 2;
const MAX_LINE_CHARS: usize = 200;
const FRAMES_HEADER: &str = "Where the failures point (repository frames from the output):";

/// The source of each failing test and the repository frames of the output, in at most
/// `max_bytes`; "" when nothing of the repository could be found.
///
/// `files` are the repository's tracked paths (relative, `/`-separated); `read` gives a
/// file's text.
pub fn failing_context(
    result: &TestResult,
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    max_bytes: usize,
) -> String {
    context_in(result, &RepoFiles::new(files), files, read, max_bytes)
}

/// `failing_context`, with the files' index (`RepoFiles`) made once for the whole brief.
pub(crate) fn context_in(
    result: &TestResult,
    repo: &RepoFiles,
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    max_bytes: usize,
) -> String {
    let mut reader = Reader::new(read);
    let failures = result.failing.iter().take(MAX_TESTS);
    let tests: Vec<(&str, Located)> = failures
        .filter_map(|f| Some((f.name.as_str(), locate(&f.name, repo, files, &mut reader)?)))
        .collect();
    let frames = frames_in(&output_of(result), repo);
    let quoted = |f: &Frame| {
        let in_test =
            |(_, t): &(&str, Located)| t.file == f.file && (t.start..=t.end).contains(&f.line);
        tests.iter().any(in_test)
    };
    let test_sections: Vec<String> = tests
        .iter()
        .filter_map(|(name, at)| quote_test(name, at, &frames, &mut reader))
        .collect();
    let frame_sections: Vec<String> = frames
        .iter()
        .filter(|f| !quoted(f))
        .take(MAX_FRAMES)
        .filter_map(|f| quote_frame(f, &mut reader))
        .collect();
    fit(test_sections, frame_sections, max_bytes)
}

/// The details of the failures and the tail of the output: where tracebacks are printed.
pub(crate) fn output_of(result: &TestResult) -> String {
    let mut text = String::new();
    for detail in result.failing.iter().filter_map(|f| f.detail.as_deref()) {
        text.push_str(detail);
        text.push('\n');
    }
    text.push_str(&result.tail);
    text
}

/// `Failing test NAME (FILE:LINE):` and its lines; the lines a frame points to are marked.
fn quote_test(name: &str, at: &Located, frames: &[Frame], reader: &mut Reader) -> Option<String> {
    let src = reader.get(&at.file)?;
    let end = at.end.min(at.start + MAX_QUOTED_LINES - 1);
    let marked: Vec<usize> = frames
        .iter()
        .filter(|f| f.file == at.file)
        .map(|f| f.line)
        .collect();
    let mut text = format!("Failing test {name} ({}:{}):\n", at.file, at.start);
    text.push_str(&numbered(&src, at.start, end, &marked)?);
    if end < at.end {
        text.push_str(&format!("    ... ({} more lines)\n", at.end - end));
    }
    Some(text)
}

/// `FILE:LINE, in FUNCTION` and a few lines either side, the frame's line marked.
fn quote_frame(frame: &Frame, reader: &mut Reader) -> Option<String> {
    let src = reader.get(&frame.file)?;
    let start = frame.line.saturating_sub(CONTEXT_LINES).max(1);
    let end = frame.line + CONTEXT_LINES;
    let mut text = format!("{}:{}", frame.file, frame.line);
    if let Some(function) = &frame.function {
        text.push_str(&format!(", in {function}"));
    }
    text.push('\n');
    text.push_str(&numbered(&src, start, end, &[frame.line])?);
    Some(text)
}

/// Lines `start..=end` of `src` (1-based, cut at its end) as `> 12 | text`, the `marked` ones
/// with `>`; None when `start` is past the end.
fn numbered(src: &str, start: usize, end: usize, marked: &[usize]) -> Option<String> {
    let lines: Vec<&str> = src.lines().skip(start - 1).take(end + 1 - start).collect();
    if lines.is_empty() {
        return None;
    }
    let width = (start + lines.len() - 1).to_string().len();
    let mut text = String::new();
    for (i, line) in lines.iter().enumerate() {
        let number = start + i;
        let mark = if marked.contains(&number) { '>' } else { ' ' };
        let line = match line.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None => line.trim_end().to_string(),
        };
        text.push_str(&format!("{mark} {number:>width$} | {line}\n"));
    }
    Some(text)
}

/// Sections that fit in `max_bytes`, chosen first test, then frames, then the other tests,
/// and told tests first.
fn fit(tests: Vec<String>, frames: Vec<String>, max_bytes: usize) -> String {
    let mut used = 0;
    let mut take = |section: &str, extra: usize| {
        let cost = section.len() + 1 + extra;
        let fits = used + cost <= max_bytes;
        if fits {
            used += cost;
        }
        fits
    };
    let first_test: Vec<bool> = tests.iter().take(1).map(|t| take(t, 0)).collect();
    let mut kept_frames = Vec::new();
    for frame in &frames {
        let header = if kept_frames.is_empty() {
            FRAMES_HEADER.len() + 1
        } else {
            0
        };
        if take(frame, header) {
            kept_frames.push(frame.as_str());
        }
    }
    let other_tests: Vec<bool> = tests.iter().skip(1).map(|t| take(t, 0)).collect();
    let kept_tests = tests
        .iter()
        .zip(first_test.into_iter().chain(other_tests))
        .filter(|(_, kept)| *kept)
        .map(|(t, _)| t.as_str());
    let mut sections: Vec<String> = kept_tests.map(String::from).collect();
    if !kept_frames.is_empty() {
        sections.push(format!("{FRAMES_HEADER}\n{}", kept_frames.join("\n")));
    }
    sections.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testrun::{Ended, TestPlan};
    use std::collections::HashMap;
    use std::time::Duration;

    /// A run of `command` that printed `output` and failed.
    fn failed_run(command: &str, output: &str) -> TestResult {
        let plan = TestPlan::shell(command.into(), Duration::from_secs(60));
        let ended = Ended {
            exit_code: Some(1),
            timed_out: false,
            interrupted: false,
        };
        TestResult::read(&plan, output, ended, None)
    }

    /// `failing_context` over an in-memory repository.
    fn context(result: &TestResult, repo: &[(&str, &str)], max_bytes: usize) -> String {
        let files: Vec<String> = repo.iter().map(|(p, _)| p.to_string()).collect();
        let texts: HashMap<&str, &str> = repo.iter().copied().collect();
        let read = |p: &str| texts.get(p).map(|t| t.to_string());
        failing_context(result, &files, &read, max_bytes)
    }

    const CART: &str = "from shop import pricing


class Cart:
    def __init__(self):
        self.items = []

    def add(self, name, price, qty=1):
        self.items.append((name, price, qty))

    def total(self, code=None):
        subtotal = sum(price * qty for _, price, qty in self.items)
        return pricing.apply_discount(subtotal, code)
";
    const PRICING: &str = "RATES = {\"SAVE10\": 0.10}


def apply_discount(total, code):
    rate = RATES[code]
    return round(total * (1 - rate), 2)
";
    const TEST_CART: &str = "import unittest

from shop.cart import Cart


class TestCart(unittest.TestCase):
    def test_total_with_discount(self):
        cart = Cart()
        cart.add(\"pen\", 2.0, 5)
        self.assertEqual(cart.total(\"SAVE10\"), 9.0)

    def test_total_plain(self):
        cart = Cart()
        cart.add(\"pen\", 2.0, 5)
        self.assertEqual(cart.total(), 10.0)
";

    fn shop() -> Vec<(&'static str, &'static str)> {
        vec![
            ("shop/__init__.py", ""),
            ("shop/cart.py", CART),
            ("shop/pricing.py", PRICING),
            ("tests/__init__.py", ""),
            ("tests/test_cart.py", TEST_CART),
        ]
    }

    const UNITTEST_OUTPUT: &str = r#"E
======================================================================
ERROR: test_total_plain (tests.test_cart.TestCart.test_total_plain)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/usr/lib/python3.12/unittest/case.py", line 58, in testPartExecutor
    yield
  File "/tmp/agent-git-clean-x81/repo/tests/test_cart.py", line 15, in test_total_plain
    self.assertEqual(cart.total(), 10.0)
                     ^^^^^^^^^^^^
  File "/tmp/agent-git-clean-x81/repo/shop/cart.py", line 13, in total
    return pricing.apply_discount(subtotal, code)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tmp/agent-git-clean-x81/repo/shop/pricing.py", line 5, in apply_discount
    rate = RATES[code]
           ~~~~~^^^^^^
KeyError: None

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (errors=1)
"#;

    #[test]
    fn unittest_failure_quotes_the_test_and_the_frames_into_the_package() {
        let result = failed_run("python3 -m unittest", UNITTEST_OUTPUT);
        assert_eq!(
            context(&result, &shop(), 4000),
            "\
Failing test tests.test_cart.TestCart.test_total_plain (tests/test_cart.py:12):
  12 |     def test_total_plain(self):
  13 |         cart = Cart()
  14 |         cart.add(\"pen\", 2.0, 5)
> 15 |         self.assertEqual(cart.total(), 10.0)

Where the failures point (repository frames from the output):
shop/cart.py:13, in total
  11 |     def total(self, code=None):
  12 |         subtotal = sum(price * qty for _, price, qty in self.items)
> 13 |         return pricing.apply_discount(subtotal, code)

shop/pricing.py:5, in apply_discount
  3 | 
  4 | def apply_discount(total, code):
> 5 |     rate = RATES[code]
  6 |     return round(total * (1 - rate), 2)
"
        );
    }

    #[test]
    fn pytest_failure_in_a_class_with_parameters_and_assert_lines() {
        let test_file = "import pytest

from shop.cart import Cart


class TestCart:
    @pytest.mark.parametrize(\"code\", [\"BOGUS\"])
    def test_total_unknown_code(self, code):
        cart = Cart()
        cart.add(\"pen\", 2.0, 5)
        assert cart.total(code) == 10.0
";
        let output = r#"=================================== FAILURES ===================================
_________________ TestCart.test_total_unknown_code[BOGUS] ______________________

self = <tests.test_cart.TestCart object at 0x7f>, code = 'BOGUS'

    @pytest.mark.parametrize("code", ["BOGUS"])
    def test_total_unknown_code(self, code):
        cart = Cart()
        cart.add("pen", 2.0, 5)
>       assert cart.total(code) == 10.0

tests/test_cart.py:11: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 
shop/cart.py:13: in total
    return pricing.apply_discount(subtotal, code)
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 

total = 10.0, code = 'BOGUS'

    def apply_discount(total, code):
>       rate = RATES[code]
E       KeyError: 'BOGUS'

shop/pricing.py:5: KeyError
=========================== short test summary info ============================
FAILED tests/test_cart.py::TestCart::test_total_unknown_code[BOGUS] - KeyError: 'BOGUS'
========================= 1 failed, 2 passed in 0.03s ==========================
"#;
        let mut repo = shop();
        repo[4] = ("tests/test_cart.py", test_file);
        let result = failed_run("pytest", output);
        assert_eq!(
            context(&result, &repo, 4000),
            "\
Failing test tests/test_cart.py::TestCart::test_total_unknown_code[BOGUS] (tests/test_cart.py:7):
   7 |     @pytest.mark.parametrize(\"code\", [\"BOGUS\"])
   8 |     def test_total_unknown_code(self, code):
   9 |         cart = Cart()
  10 |         cart.add(\"pen\", 2.0, 5)
> 11 |         assert cart.total(code) == 10.0

Where the failures point (repository frames from the output):
shop/cart.py:13, in total
  11 |     def total(self, code=None):
  12 |         subtotal = sum(price * qty for _, price, qty in self.items)
> 13 |         return pricing.apply_discount(subtotal, code)

shop/pricing.py:5
  3 | 
  4 | def apply_discount(total, code):
> 5 |     rate = RATES[code]
  6 |     return round(total * (1 - rate), 2)
"
        );
    }

    #[test]
    fn cargo_panic_quotes_the_test_with_its_attribute_and_the_function_it_calls() {
        let lib = "pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 3), 5);
    }
}
";
        let output = "running 1 test
test tests::adds ... FAILED

failures:

---- tests::adds stdout ----

thread 'tests::adds' panicked at src/lib.rs:11:9:
assertion `left == right` failed
  left: -1
 right: 5
stack backtrace:
   3: calc::add
             at ./src/lib.rs:2:5
   4: calc::tests::adds
             at ./src/lib.rs:11:9
   5: core::ops::function::FnOnce::call_once
             at /rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/ops/function.rs:250:5

failures:
    tests::adds

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
        let repo = [
            ("Cargo.toml", "[package]\nname = \"calc\"\n"),
            ("src/lib.rs", lib),
        ];
        let result = failed_run("cargo test", output);
        assert_eq!(
            context(&result, &repo, 4000),
            "\
Failing test tests::adds (src/lib.rs:9):
   9 |     #[test]
  10 |     fn adds() {
> 11 |         assert_eq!(add(2, 3), 5);
  12 |     }

Where the failures point (repository frames from the output):
src/lib.rs:2, in add
  1 | pub fn add(a: i32, b: i32) -> i32 {
> 2 |     a - b
  3 | }
  4 | 
"
        );
    }

    #[test]
    fn node_test_failure_quotes_the_test_call_by_its_title() {
        let calc = "function add(a, b) {
  if (typeof a !== 'number') throw new TypeError('a must be a number');
  return a - b;
}
module.exports = { add };
";
        let test_file = "const test = require('node:test');
const assert = require('node:assert');
const { add } = require('../src/calc');

test('adds two numbers', () => {
  assert.strictEqual(add(2, 3), 5);
});

test('rejects strings', () => {
  assert.strictEqual(add('2', 3), 5);
});
";
        let output = "\u{2716} rejects strings (0.152096ms)
  TypeError [Error]: a must be a number
      at add (/tmp/agent-git-clean-q1/repo/src/calc.js:2:36)
      at TestContext.<anonymous> (/tmp/agent-git-clean-q1/repo/test/calc.test.js:10:22)
      at Test.runInAsyncScope (node:async_hooks:206:9)
      at async Test.processPendingSubtests (node:internal/test_runner/test:526:7)

\u{2139} tests 2
\u{2139} pass 1
\u{2139} fail 1
";
        let repo = [("src/calc.js", calc), ("test/calc.test.js", test_file)];
        let result = failed_run("node --test", output);
        assert_eq!(
            context(&result, &repo, 4000),
            "\
Failing test rejects strings (test/calc.test.js:9):
   9 | test('rejects strings', () => {
> 10 |   assert.strictEqual(add('2', 3), 5);
  11 | });

Where the failures point (repository frames from the output):
src/calc.js:2, in add
  1 | function add(a, b) {
> 2 |   if (typeof a !== 'number') throw new TypeError('a must be a number');
  3 |   return a - b;
  4 | }
"
        );
    }

    #[test]
    fn go_test_failure_finds_the_test_function_in_its_package() {
        let test_file = "package calc

import \"testing\"

func TestAdd(t *testing.T) {
\tif got := Add(2, 3); got != 5 {
\t\tt.Errorf(\"Add(2, 3) = %d; want 5\", got)
\t}
}
";
        let output = "--- FAIL: TestAdd (0.00s)
    calc_test.go:7: Add(2, 3) = -1; want 5
FAIL
FAIL\texample.com/shop/calc\t0.002s
FAIL
";
        let repo = [
            ("go.mod", "module example.com/shop\n"),
            (
                "calc/calc.go",
                "package calc\n\nfunc Add(a, b int) int { return a - b }\n",
            ),
            ("calc/calc_test.go", test_file),
            ("money/calc_test.go", "package money\n"),
        ];
        let result = failed_run("go test ./...", output);
        assert_eq!(
            context(&result, &repo, 4000),
            "\
Failing test TestAdd (calc/calc_test.go:5):
  5 | func TestAdd(t *testing.T) {
  6 | \tif got := Add(2, 3); got != 5 {
> 7 | \t\tt.Errorf(\"Add(2, 3) = %d; want 5\", got)
  8 | \t}
  9 | }
"
        );
    }

    #[test]
    fn a_small_budget_keeps_the_first_test_and_the_frames_that_fit() {
        let result = failed_run("python3 -m unittest", UNITTEST_OUTPUT);
        let whole = context(&result, &shop(), 4000);
        for budget in [0, 50, 200, 300, whole.len()] {
            let cut = context(&result, &shop(), budget);
            assert!(cut.len() <= budget, "{budget}: {} bytes", cut.len());
        }
        // The test's section, then the header and the first frame, then the second frame.
        let test_len = whole.find("\n\nWhere").unwrap() + 1;
        let first_frame_end = whole.find("\n\nshop/pricing.py").unwrap();
        let test_only = context(&result, &shop(), test_len + 1);
        assert_eq!(test_only, whole[..test_len]);
        let with_one_frame = context(&result, &shop(), first_frame_end + 4);
        assert_eq!(with_one_frame, whole[..first_frame_end + 1]);
        assert_eq!(context(&result, &shop(), 0), "");
    }

    #[test]
    fn nothing_of_the_repository_gives_nothing() {
        let output = "FAILED test_gone.py::test_x - ImportError: No module named calc\n\
                      Traceback (most recent call last):\n  File \"/usr/lib/python3.12/importlib/__init__.py\", line 90, in import_module\n\
                      1 failed\n";
        let result = failed_run("pytest", output);
        assert_eq!(context(&result, &shop(), 4000), "");
        let passed = failed_run("pytest", "3 passed\n");
        assert_eq!(context(&passed, &shop(), 4000), "");
    }
}
