//! What the model is told first: the task, the repository's instructions for agents, the first
//! test result, and what helps it find the bug.

use crate::common::*;
use serde_json::json;

#[test]
fn the_repositorys_agents_md_is_in_the_first_message_and_in_the_printed_prompt() {
    let env = TestEnv::new();
    let agents = "# Notes for agents\n\nNumbers are added with `add`; never edit `vendor/`.\n";
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            ("AGENTS.md", agents),
            ("CLAUDE.md", "Ignored: AGENTS.md comes first."),
        ],
    );
    let run = env.fix_scripted(
        &repo,
        "agent/told",
        json!([end_turn("Looked.")]),
        &["--max-turns", "1"],
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let first = run.messages()[0]["content"][0]["text"].as_str().unwrap();
    let section = "The repository's instructions for agents (AGENTS.md), from its base commit. \
                   Follow them where they do not conflict with the harness's rules:\n\n\
                   # Notes for agents\n\nNumbers are added with `add`; never edit `vendor/`.\n\n\
                   Before any change, the harness ran the tests.";
    assert!(
        first.starts_with(&format!("Task: Fix the adder\n\n{section}")),
        "{first}"
    );
    assert!(!first.contains("Ignored"), "{first}");

    let printed = stdout(&env.agent(&repo, &["fix", "--print-system-prompt"]));
    assert!(printed.starts_with("You are agent-git"), "{printed}");
    assert!(
        printed.contains("never edit `vendor/`"),
        "the printed prompt shows the instructions: {printed}"
    );

    // CLAUDE.md when there is no AGENTS.md; nothing when there is neither.
    env.git(&repo, &["rm", "-q", "AGENTS.md"]);
    env.git(&repo, &["commit", "-q", "-m", "no AGENTS.md"]);
    let printed = stdout(&env.agent(&repo, &["fix", "--print-system-prompt"]));
    assert!(printed.contains("(CLAUDE.md)"), "{printed}");
    let outside = env.path().join("home");
    let printed = stdout(&env.agent(&outside, &["fix", "--print-system-prompt"]));
    assert!(!printed.contains("instructions for agents"), "{printed}");
}

/// A shop package: the cart asks pricing for discounts, and pricing gets one wrong; thirty
/// other modules around them, as a real package has.
fn shop_repo(env: &TestEnv) -> std::path::PathBuf {
    let mut files: Vec<(String, String)> = vec![
        ("shop/__init__.py".into(), "".into()),
        (
            "shop/cart.py".into(),
            "from shop.pricing import discount\n\n\nclass Cart:\n    def __init__(self):\n        \
             self.items = []\n\n    def add(self, price, quantity=1):\n        \
             self.items.append((price, quantity))\n\n    def total(self):\n        \
             gross = sum(p * q for p, q in self.items)\n        return gross - discount(gross)\n"
                .into(),
        ),
        (
            "shop/pricing.py".into(),
            "RATE = 10\n\n\ndef discount(gross):\n    \"\"\"Ten percent off orders of 100 or \
             more.\"\"\"\n    if gross > 100:\n        return gross * RATE / 100\n    return 0\n\n\n\
             def tax(net):\n    return net * 0.2\n"
                .into(),
        ),
        (
            "tests/test_cart.py".into(),
            "import unittest\n\nfrom shop.cart import Cart\n\n\nclass CartTest(unittest.TestCase):\n    \
             def test_discount_starts_at_100(self):\n        cart = Cart()\n        cart.add(50, 2)\n        \
             self.assertEqual(cart.total(), 90)\n\n    def test_small_orders_pay_in_full(self):\n        \
             cart = Cart()\n        cart.add(30)\n        self.assertEqual(cart.total(), 30)\n"
                .into(),
        ),
        ("tests/__init__.py".into(), "".into()),
    ];
    for i in 0..30 {
        let area = ["catalog", "shipping", "accounts"][i % 3];
        files.push((
            format!("shop/{area}/module_{i:02}.py"),
            format!(
                "class Record{i}:\n    def load(self, key):\n        return key\n\n    \
                 def save(self, key, value):\n        return value\n\n\n\
                 def helper_{i}(value):\n    return value * {i}\n"
            ),
        ));
        files.push((format!("shop/{area}/__init__.py"), String::new()));
    }
    files.sort();
    files.dedup();
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    env.repo("shop", &borrowed)
}

/// The map section of a first message: from its header to the end.
fn map_of(first: &str) -> String {
    let start = first
        .find("A map of the repository's source files")
        .unwrap_or_else(|| panic!("no map in the first message:\n{first}"));
    first[start..]
        .lines()
        .skip(2)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_map_puts_the_module_with_the_bug_near_the_top_within_its_budget() {
    let env = TestEnv::new();
    let repo = shop_repo(&env);
    let run = env.fix_scripted(
        &repo,
        "agent/map",
        json!([end_turn("Looked.")]),
        &["--max-turns", "1"],
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let first = run.messages()[0]["content"][0]["text"].as_str().unwrap();
    let map = map_of(first);
    let files: Vec<&str> = map
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with("(..."))
        .collect();
    let pricing = files.iter().position(|f| *f == "shop/pricing.py");
    assert!(
        pricing.is_some_and(|p| p < 3),
        "pricing.py should be among the first files of the map:\n{map}"
    );
    assert!(
        map.contains("shop/pricing.py\n   4 def discount(gross)\n  11 def tax(net)"),
        "{map}"
    );
    assert!(map.len() <= 2_000 * 4, "within the default budget");
    // The failing test and the lines it fails on come first.
    assert!(
        first.contains("Failing test ") && first.contains("self.assertEqual(cart.total(), 90)"),
        "{first}"
    );

    let run = env.fix_scripted(
        &repo,
        "agent/small-map",
        json!([end_turn("Looked.")]),
        &["--max-turns", "1", "--map-tokens", "60"],
    );
    let first = run.messages()[0]["content"][0]["text"].as_str().unwrap();
    let small = map_of(first);
    assert!(small.len() <= 60 * 4, "{small}");
    assert!(small.contains("more files not shown"), "{small}");

    let run = env.fix_scripted(
        &repo,
        "agent/no-map",
        json!([end_turn("Looked.")]),
        &["--max-turns", "1", "--map-tokens", "0"],
    );
    let first = run.messages()[0]["content"][0]["text"].as_str().unwrap();
    assert!(!first.contains("A map of the repository"), "{first}");
}
