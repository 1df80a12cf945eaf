//! A map of the repository: source files with their definitions, one line each, the files a
//! failure is about first, cut to a token budget.
//!
//! ```text
//! pkg/calc.py
//!   12 def add(a, b)
//!   20 class Calculator
//!   25   def total(self)
//! ```

use super::frames::RepoFiles;
use super::outline::{outline, Def};
use super::rank::{Candidate, Focus, Ranking};

/// Bytes per token: the usual estimate for code and English.
const BYTES_PER_TOKEN: usize = 4;

/// The map of `files` (tracked paths, relative, `/`-separated; `read` gives a file's text),
/// ranked by `focus`, in at most `max_tokens` (estimated as bytes / 4); "" when it is 0.
pub fn repo_map(
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
    focus: &Focus,
    max_tokens: usize,
) -> String {
    map_in(&RepoFiles::new(files), read, focus, max_tokens, None)
}

/// `repo_map`, with the files' index (`RepoFiles`) made once for the whole brief; where
/// `beside` makes readers, the search for the failure's names reads in two threads.
pub(crate) fn map_in(
    repo: &RepoFiles,
    read: &dyn Fn(&str) -> Option<String>,
    focus: &Focus,
    max_tokens: usize,
    beside: Option<&super::Readers>,
) -> String {
    if max_tokens == 0 {
        return String::new();
    }
    let budget = max_tokens.saturating_mul(BYTES_PER_TOKEN);
    let mut ranking = Ranking::new(repo, read, focus);
    let total = ranking.len();
    let focused = ranking.focused();
    // The rest is ranked only if the map gets past the focused files.
    let rest = std::iter::once_with(|| ranking.rest(&focus.names, read, beside)).flatten();
    assemble(focused.into_iter().chain(rest), total, read, budget)
}

/// Whole files in rank order while they fit, then a line saying how many were left out.
/// Files are read and parsed only as they are reached.
fn assemble<'f>(
    ranked: impl Iterator<Item = Candidate<'f>>,
    total: usize,
    read: &dyn Fn(&str) -> Option<String>,
    budget: usize,
) -> String {
    // Room is kept for the last line at its longest.
    let room = budget.saturating_sub(left_out(total).len());
    let mut map = String::new();
    let mut reached = total;
    for (i, candidate) in ranked.enumerate() {
        let Some(text) = candidate.text.or_else(|| read(candidate.path)) else {
            continue;
        };
        let defs = outline(candidate.lang, &text);
        if defs.is_empty() {
            continue;
        }
        let block = render(candidate.path, &defs);
        if map.len() + block.len() > room {
            if map.is_empty() {
                // The best file alone is too long: its first lines still say the most.
                map = cut_to_lines(&block, room);
            }
            reached = i;
            break;
        }
        map.push_str(&block);
    }
    let not_shown = total - reached;
    if not_shown > 0 {
        let last = left_out(not_shown);
        if map.len() + last.len() <= budget {
            map.push_str(&last);
        }
    }
    map
}

fn left_out(files: usize) -> String {
    format!("(... {files} more files not shown)\n")
}

/// A file's path, then its definitions as `  12 def add(a, b)`, nested ones indented.
fn render(path: &str, defs: &[Def]) -> String {
    let width = defs
        .iter()
        .map(|d| d.line)
        .max()
        .unwrap_or(0)
        .to_string()
        .len();
    let mut block = format!("{path}\n");
    for def in defs {
        let indent = "  ".repeat(def.depth);
        block.push_str(&format!(
            "  {:>width$} {indent}{}\n",
            def.line, def.signature
        ));
    }
    block
}

/// The whole lines of `block` that fit in `room` bytes; "" when the path and one line don't.
fn cut_to_lines(block: &str, room: usize) -> String {
    let mut kept = String::new();
    for line in block.split_inclusive('\n') {
        if kept.len() + line.len() > room {
            break;
        }
        kept.push_str(line);
    }
    if kept.lines().count() < 2 {
        return String::new();
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testrun::{Ended, TestPlan};
    use std::collections::HashMap;
    use std::time::Duration;

    const CART: &str = "from shop import pricing
from shop.models import Item


class Cart:
    def __init__(self):
        self.items = []

    def add(self, name, price, qty=1):
        self.items.append(Item(name, price, qty))

    def total(self, code=None):
        subtotal = sum(i.price * i.qty for i in self.items)
        return pricing.apply_discount(subtotal, code)
";
    const PRICING: &str = "RATES = {\"SAVE10\": 0.10}


def rate_for(code):
    return RATES[code]


def apply_discount(total, code):
    rate = rate_for(code)
    return round(total * (1 - rate), 2)
";
    const MODELS: &str = "from dataclasses import dataclass


@dataclass
class Item:
    name: str
    price: float
    qty: int = 1
";
    const TEST_CART: &str = "import unittest

from shop.cart import Cart


class TestCart(unittest.TestCase):
    def test_total_plain(self):
        cart = Cart()
        cart.add(\"pen\", 2.0, 5)
        self.assertEqual(cart.total(), 10.0)
";
    const OUTPUT: &str = r#"E
======================================================================
ERROR: test_total_plain (tests.test_cart.TestCart.test_total_plain)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/tmp/agent-git-clean-x81/repo/tests/test_cart.py", line 10, in test_total_plain
    self.assertEqual(cart.total(), 10.0)
                     ^^^^^^^^^^^^
  File "/tmp/agent-git-clean-x81/repo/shop/cart.py", line 14, in total
    return pricing.apply_discount(subtotal, code)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tmp/agent-git-clean-x81/repo/shop/pricing.py", line 9, in apply_discount
    rate = rate_for(code)
           ^^^^^^^^^^^^^^
  File "/tmp/agent-git-clean-x81/repo/shop/pricing.py", line 5, in rate_for
    return RATES[code]
           ~~~~~^^^^^^
KeyError: None

----------------------------------------------------------------------
Ran 1 test in 0.001s

FAILED (errors=1)
"#;

    /// The shop package: cart, pricing (the bug), models, 33 unrelated modules, and tests.
    fn shop() -> HashMap<String, String> {
        let mut repo: HashMap<String, String> = [
            ("shop/__init__.py", ""),
            ("shop/cart.py", CART),
            ("shop/pricing.py", PRICING),
            ("shop/models.py", MODELS),
            // Neither traced nor imported, but it defines a name the failure printed.
            (
                "shop/legacy/rates.py",
                "def rate_for(code):\n    return 0\n",
            ),
            ("tests/__init__.py", ""),
            ("tests/test_cart.py", TEST_CART),
            ("README.md", "# shop\n"),
        ]
        .into_iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
        for area in ["accounts", "catalog", "shipping", "billing"] {
            for (i, part) in [
                "api", "store", "views", "forms", "jobs", "admin", "emails", "search",
            ]
            .iter()
            .enumerate()
            {
                let text = format!(
                    "import logging\n\n\nclass {part}{i}Service:\n    def fetch_{part}(self, key):\n        return key\n\n    def save_{part}(self, key, value):\n        pass\n\n\ndef {area}_{part}_report(rows):\n    return len(rows)\n"
                );
                repo.insert(format!("shop/{area}/{part}.py"), text);
            }
            repo.insert(
                format!("tests/{area}/test_{area}.py"),
                format!("def test_{area}():\n    pass\n"),
            );
        }
        repo
    }

    fn map_of(repo: &HashMap<String, String>, focus: &Focus, max_tokens: usize) -> String {
        let mut files: Vec<String> = repo.keys().cloned().collect();
        files.sort();
        let read = |p: &str| repo.get(p).cloned();
        repo_map(&files, &read, focus, max_tokens)
    }

    fn focus_of(repo: &HashMap<String, String>) -> Focus {
        let plan = TestPlan::shell("python3 -m unittest".into(), Duration::from_secs(60));
        let ended = Ended {
            exit_code: Some(1),
            timed_out: false,
            interrupted: false,
        };
        let result = crate::testrun::TestResult::read(&plan, OUTPUT, ended, None);
        let mut files: Vec<String> = repo.keys().cloned().collect();
        files.sort();
        Focus::from_result(&result, &files)
    }

    fn paths(map: &str) -> Vec<&str> {
        map.lines()
            .filter(|l| !l.starts_with(' ') && !l.starts_with("(..."))
            .collect()
    }

    #[test]
    fn the_focus_of_a_failure_names_its_files_and_words() {
        let focus = focus_of(&shop());
        assert_eq!(
            focus.traced,
            ["tests/test_cart.py", "shop/cart.py", "shop/pricing.py"]
        );
        assert_eq!(focus.tests, ["tests/test_cart.py"]);
        assert_eq!(
            focus.names[..8],
            [
                "KeyError",
                "total",
                "apply_discount",
                "rate_for",
                "assertEqual",
                "cart",
                "pricing",
                "subtotal"
            ]
        );
    }

    #[test]
    fn the_module_with_the_bug_comes_first_then_what_the_test_imports() {
        let repo = shop();
        let map = map_of(&repo, &focus_of(&repo), 10_000);
        assert!(
            map.starts_with(
                "\
shop/cart.py
   5 class Cart
   6   def __init__(self)
   9   def add(self, name, price, qty=1)
  12   def total(self, code=None)
shop/pricing.py
  4 def rate_for(code)
  8 def apply_discount(total, code)
shop/models.py
  5 class Item
shop/legacy/rates.py
  1 def rate_for(code)
shop/accounts/admin.py
"
            ),
            "{map}"
        );
        let shown = paths(&map);
        assert_eq!(
            shown.len(),
            32 + 4 + 5,
            "every source file with definitions: {shown:?}"
        );
        assert_eq!(
            shown[shown.len() - 5..],
            [
                "tests/test_cart.py",
                "tests/accounts/test_accounts.py",
                "tests/billing/test_billing.py",
                "tests/catalog/test_catalog.py",
                "tests/shipping/test_shipping.py",
            ]
        );
        assert!(!map.contains("more files not shown"), "{map}");
    }

    #[test]
    fn a_large_repository_is_searched_for_the_failures_names_nearest_first_and_only_so_far() {
        let mut repo = shop();
        // More unrelated modules than the search reads, all before the shop in path order,
        // and one past them that defines a name the failure printed.
        let far = super::super::rank::DEFINING_FILES + 500;
        for i in 0..far {
            repo.insert(
                format!("aaa/m{i:05}.py"),
                format!("def unrelated_{i}():\n    pass\n"),
            );
        }
        repo.insert(
            "zzz/far.py".into(),
            "def apply_discount(total, code):\n    pass\n".into(),
        );
        let reads = std::cell::Cell::new(0);
        let mut files: Vec<String> = repo.keys().cloned().collect();
        files.sort();
        let read = |p: &str| {
            reads.set(reads.get() + 1);
            repo.get(p).cloned()
        };
        let map = repo_map(&files, &read, &focus_of(&repo), 200);
        assert!(
            reads.get() < super::super::rank::DEFINING_FILES + 100,
            "{} files read of {}",
            reads.get(),
            files.len()
        );
        // rates.py shares the shop's folder with the failure's files: read first, and found.
        assert_eq!(
            paths(&map)[..4],
            [
                "shop/cart.py",
                "shop/pricing.py",
                "shop/models.py",
                "shop/legacy/rates.py"
            ],
            "{map}"
        );
        assert!(!map.contains("zzz/far.py"), "{map}");
    }

    #[test]
    fn a_small_budget_cuts_files_and_says_how_many() {
        let repo = shop();
        let focus = focus_of(&repo);
        for max_tokens in [40, 60, 100, 250] {
            let map = map_of(&repo, &focus, max_tokens);
            assert!(
                map.len() <= max_tokens * 4,
                "{max_tokens}: {} bytes\n{map}",
                map.len()
            );
        }
        let map = map_of(&repo, &focus, 60);
        assert_eq!(paths(&map), ["shop/cart.py", "shop/pricing.py"]);
        // models.py, rates.py, 32 unrelated modules, tests/__init__.py and 5 test files;
        // shop/__init__.py was reached but, empty, has no entry.
        assert!(map.ends_with("\n(... 40 more files not shown)\n"), "{map}");
        assert_eq!(map_of(&repo, &focus, 0), "");
    }

    #[test]
    fn without_a_focus_files_come_by_depth_then_path_tests_last() {
        let repo: HashMap<String, String> = [
            ("z.py", "def z():\n    pass\n"),
            ("a/deep/b.rs", "pub fn b() {}\n"),
            ("a/c.go", "package a\n\nfunc C() {}\n"),
            ("tests/test_z.py", "def test_z():\n    pass\n"),
            ("notes.txt", "def not_code():\n"),
        ]
        .into_iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
        assert_eq!(
            map_of(&repo, &Focus::default(), 1000),
            "\
z.py
  1 def z()
a/c.go
  3 func C()
a/deep/b.rs
  1 pub fn b()
tests/test_z.py
  1 def test_z()
"
        );
        assert_eq!(
            map_of(&repo, &Focus::default(), 12),
            "z.py\n  1 def z()\n(... 3 more files not shown)\n"
        );
    }
}
