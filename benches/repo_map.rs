//! What the brief costs on a large repository: the repository map (rank, read, parse, cut to
//! the budget) and the failing tests' context, on a generated 10,000-file tree in five
//! languages with a failing Python test whose traceback runs through two modules. Files are
//! read from disk through the same kind of reader the agent gives. Target: the map in under
//! 1 s on 2 cores.
//!
//!     cargo bench --bench repo_map
// A benchmark, like a test, stops at the first thing that goes wrong.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use agent_git::brief::{failing_context, repo_map, Focus};
use agent_git::testrun::{Ended, TestPlan, TestResult};
use std::path::Path;
use std::time::{Duration, Instant};

const RUNS: usize = 7;
const FILES: usize = 10_000;
/// Methods per generated class or type: sets files near 4 KB, as real source files are.
const METHODS: usize = 16;

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = tree(dir.path());
    let root = dir.path().to_path_buf();
    let read = move |p: &str| std::fs::read_to_string(root.join(p)).ok();
    let result = failed_run(dir.path());
    let bytes: u64 = files
        .iter()
        .map(|f| dir.path().join(f).metadata().expect("stat").len())
        .sum();
    println!(
        "{} files, {:.1} MB; {RUNS} runs each, median (min-max)",
        files.len(),
        bytes as f64 / 1e6
    );

    let focus = Focus::from_result(&result, &files);
    let map = repo_map(&files, &read, &focus, 4096);
    assert!(map.starts_with("app/shop/cart.py\n"), "{map}");
    assert!(map.contains("\napp/shop/pricing.py\n"), "{map}");

    report("floor: read every file", &mut || {
        for file in &files {
            read(file);
        }
    });
    report("Focus::from_result", &mut || {
        Focus::from_result(&result, &files);
    });
    for tokens in [1024, 4096, 16_384] {
        report(
            &format!("repo_map, failure focus, {tokens} tokens"),
            &mut || {
                let focus = Focus::from_result(&result, &files);
                repo_map(&files, &read, &focus, tokens);
            },
        );
    }
    report("repo_map, no focus, 4096 tokens", &mut || {
        repo_map(&files, &read, &Focus::default(), 4096);
    });
    report("failing_context, 8000 bytes", &mut || {
        failing_context(&result, &files, &read, 8000);
    });
}

fn report(label: &str, f: &mut dyn FnMut()) {
    let mut samples: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "  {label:<40} {:>7.1} ms ({:.1}-{:.1})",
        ms(samples[RUNS / 2]),
        ms(samples[0]),
        ms(samples[RUNS - 1])
    );
}

/// Writes the tree and returns its paths: the shop package with the failure, then generated
/// modules in five languages (with a few non-source files among them).
fn tree(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut write = |path: String, text: String| {
        let full = root.join(&path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, text).expect("write");
        files.push(path);
    };
    write("app/shop/__init__.py".into(), String::new());
    write("app/shop/cart.py".into(), CART.into());
    write("app/shop/pricing.py".into(), PRICING.into());
    write("tests/test_cart.py".into(), TEST_CART.into());
    for i in 0..FILES - 4 {
        let (path, text) = generated(i);
        write(path, text);
    }
    files
}

/// File `i` of the generated part: 100 per folder, folders three deep.
fn generated(i: usize) -> (String, String) {
    let dir = format!("pkg{:02}/mod{:02}/part{}", i / 1000, (i / 100) % 10, i % 3);
    let name = format!("unit{i:05}");
    match i % 20 {
        0..=7 => (format!("{dir}/{name}.py"), python(i)),
        8..=10 => (format!("{dir}/{name}.ts"), typescript(i)),
        11..=13 => (format!("{dir}/{name}.js"), javascript(i)),
        14..=16 => (format!("{dir}/{name}.go"), go(i)),
        17..=18 => (format!("{dir}/{name}.rs"), rust(i)),
        _ => (
            format!("{dir}/{name}.md"),
            format!("# Unit {i}\n\nNotes.\n"),
        ),
    }
}

fn python(i: usize) -> String {
    let mut text = format!(
        "import os\nfrom pkg00.mod00.part0 import unit{:05}\n\n",
        i / 2
    );
    text.push_str(&format!("LIMIT_{i} = {i}\n\n\nclass Record{i}:\n"));
    for m in 0..METHODS {
        text.push_str(&format!(
            "    def method_{m}(self, value, *, scale=1):\n        total = value * scale\n        if total > LIMIT_{i}:\n            return LIMIT_{i}\n        return total\n\n"
        ));
    }
    for f in 0..METHODS / 2 {
        text.push_str(&format!(
            "\ndef helper_{i}_{f}(rows):\n    out = []\n    for row in rows:\n        out.append(row)\n    return out\n\n"
        ));
    }
    text
}

fn typescript(i: usize) -> String {
    let mut text = format!("import {{ x }} from './unit{:05}';\n\nexport interface Shape{i} {{\n  area(): number;\n}}\n\n", i + 1);
    text.push_str(&format!("export class Box{i} implements Shape{i} {{\n"));
    for m in 0..METHODS {
        text.push_str(&format!(
            "  size{m}(scale: number): number {{\n    const v = scale * {m};\n    return v + 1;\n  }}\n\n"
        ));
    }
    text.push_str("  area(): number {\n    return 1;\n  }\n}\n\n");
    text.push_str(&format!(
        "export const make{i} = (n: number): Box{i} => new Box{i}();\n"
    ));
    text
}

fn javascript(i: usize) -> String {
    let mut text = format!("const x = require('./unit{:05}');\n\n", i + 1);
    for f in 0..METHODS {
        text.push_str(&format!(
            "function handle{i}_{f}(req, res) {{\n  const body = req.body || {{}};\n  if (!body.id) {{\n    return res.status(400);\n  }}\n  return res.json(body);\n}}\n\n"
        ));
    }
    text.push_str(&format!("module.exports = {{ handle{i}_0 }};\n"));
    text
}

fn go(i: usize) -> String {
    let mut text = format!("package part{}\n\nimport (\n\t\"fmt\"\n)\n\n", i % 3);
    text.push_str(&format!(
        "type Store{i} struct {{\n\titems map[string]int\n}}\n\n"
    ));
    for m in 0..METHODS {
        text.push_str(&format!(
            "func (s *Store{i}) Get{m}(key string) (int, error) {{\n\tv, ok := s.items[key]\n\tif !ok {{\n\t\treturn 0, fmt.Errorf(\"missing %s\", key)\n\t}}\n\treturn v, nil\n}}\n\n"
        ));
    }
    text
}

fn rust(i: usize) -> String {
    let mut text = format!("use std::collections::HashMap;\n\n#[derive(Debug, Default)]\npub struct Index{i} {{\n    map: HashMap<String, u32>,\n}}\n\nimpl Index{i} {{\n");
    for m in 0..METHODS {
        text.push_str(&format!(
            "    pub fn lookup_{m}(&self, key: &str) -> Option<u32> {{\n        self.map.get(key).copied()\n    }}\n\n"
        ));
    }
    text.push_str("}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn works() {}\n}\n");
    text
}

const CART: &str = "from app.shop import pricing


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

from app.shop.cart import Cart


class TestCart(unittest.TestCase):
    def test_total_plain(self):
        cart = Cart()
        cart.add(\"pen\", 2.0, 5)
        self.assertEqual(cart.total(), 10.0)
";

/// The unittest run that fails in `pricing.py`, as printed in a copy of the tree at `root`.
fn failed_run(root: &Path) -> TestResult {
    let at = root.display();
    let output = format!(
        "E
======================================================================
ERROR: test_total_plain (tests.test_cart.TestCart.test_total_plain)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"{at}/tests/test_cart.py\", line 10, in test_total_plain
    self.assertEqual(cart.total(), 10.0)
  File \"{at}/app/shop/cart.py\", line 13, in total
    return pricing.apply_discount(subtotal, code)
  File \"{at}/app/shop/pricing.py\", line 5, in apply_discount
    rate = RATES[code]
KeyError: None

----------------------------------------------------------------------
Ran 1 test in 0.001s

FAILED (errors=1)
"
    );
    let plan = TestPlan::shell("python3 -m unittest".into(), Duration::from_secs(60));
    let ended = Ended {
        exit_code: Some(1),
        timed_out: false,
        interrupted: false,
    };
    TestResult::read(&plan, &output, ended, None)
}
