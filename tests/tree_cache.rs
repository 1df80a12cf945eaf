//! A tree is tested once per run: asking again, or ending the turn on a tree already tested,
//! answers from that test run, and says so.

use crate::common::*;
use serde_json::{json, Value};

/// The test command, counting its runs in `log/runs`.
fn counting(log: &std::path::Path) -> String {
    format!("echo ran >> {}/runs; python3 -m unittest -v", log.display())
}

fn run_tests(id: &str) -> Value {
    calls("Check.", vec![tool(id, "run_tests", json!({}))])
}

#[test]
fn a_tree_already_tested_is_not_tested_again() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", UNITTEST_CALC),
            (".gitignore", "__pycache__/\n"),
        ],
    );
    let mut runs = Vec::new();
    for (branch, asks_first) in [("agent/plain", false), ("agent/asks", true)] {
        let log = env.path().join(branch.replace('/', "-"));
        std::fs::create_dir(&log).unwrap();
        let mut replies = Vec::new();
        if asks_first {
            // The base again, twice: the run before any change already tested it.
            replies.extend([run_tests("t1"), run_tests("t2")]);
        }
        replies.extend([calls("Fix.", vec![fix_add()])]);
        if asks_first {
            // The fixed tree, then the end of the turn on it: one test run between them.
            replies.extend([run_tests("t3"), run_tests("t4")]);
        }
        replies.push(end_turn("Done."));
        let log_arg = log.display().to_string();
        let run = env.fix_scripted(
            &repo,
            branch,
            Value::Array(replies),
            &[
                "--test-cmd",
                &counting(&log),
                "--allow-write",
                &log_arg,
                "--json",
            ],
        );
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let count = std::fs::read_to_string(log.join("runs")).unwrap();
        runs.push((run, count.lines().count()));
    }
    let (plain, plain_count) = &runs[0];
    let (asks, asks_count) = &runs[1];
    assert_eq!(
        asks_count, plain_count,
        "asking four more times ran the tests no more often"
    );
    let results = asks.results();
    let note = "[nothing changed since these files were last tested: this is that result]";
    for id in ["t1", "t2", "t4"] {
        assert!(results[id].1.contains(note), "{id}: {}", results[id].1);
    }
    assert!(!results["t3"].1.contains(note), "{}", results["t3"].1);
    assert!(results["t3"].1.contains("2 passed"), "{}", results["t3"].1);
    assert!(*plain_count > 0);

    // The run ended on a result from the cache, and its report and JSON say so.
    let json: Value = serde_json::from_str(stdout(&asks.out).trim()).unwrap();
    assert_eq!(json["outcome"], "passed");
    assert_eq!(json["tests"]["cached"], true);
    let report = env.message(&repo, "agent/asks");
    assert!(
        report.contains("tested earlier in the run: that result stands"),
        "{report}"
    );
    let json: Value = serde_json::from_str(stdout(&plain.out).trim()).unwrap();
    assert_eq!(json["tests"]["cached"], false);
}
