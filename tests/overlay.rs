//! Test runs see the clean room's tree through an overlay of their own: what one writes,
//! changes or removes there lands in a layer thrown away after it, so the next run finds the
//! tree as committed without a walk of it. The setup command writes for real.

use crate::common::*;
use serde_json::{json, Value};

const UNITTEST_CALC: &str = concat!(
    "import unittest\n",
    "from calc import add, multiply\n",
    "\n\n",
    "class T(unittest.TestCase):\n",
    "    def test_add(self):\n",
    "        self.assertEqual(add(2, 3), 5)\n",
    "\n",
    "    def test_multiply(self):\n",
    "        self.assertEqual(multiply(4, 5), 20)\n",
);

/// Appends `overlay` or `plain` to `log`: whether the working directory is an overlay mount.
fn note_mount(log: &str) -> String {
    format!(
        "if awk -v d=\"$PWD\" '$5 == d && / - overlay /' /proc/self/mountinfo | grep -q .; \
         then echo overlay >> {log}; else echo plain >> {log}; fi"
    )
}

#[test]
fn test_runs_change_the_tree_only_through_an_overlay_and_the_setup_for_real() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", UNITTEST_CALC),
            ("data.txt", "committed\n"),
            (".gitignore", "__pycache__/\nmade_by_setup\n"),
        ],
    );
    let log = env.path().join("log");
    std::fs::create_dir(&log).unwrap();
    let dir = log.display();
    let setup = format!(
        "echo made > made_by_setup; {}",
        note_mount(&format!("{dir}/setup"))
    );
    // Each test run finds the tree and the setup's output as they were made, then changes
    // them all: a tracked file, a new file, the setup's output; and tries to write the note
    // that says an overlay held, beside the tree.
    let test = [
        note_mount(&format!("{dir}/runs")),
        "grep -q 'a test run was here' data.txt && exit 5".to_string(),
        "test -e planted && exit 4".to_string(),
        "test \"$(cat made_by_setup)\" = made || exit 6".to_string(),
        "echo 'a test run was here' >> data.txt".to_string(),
        "echo planted > planted; echo more >> made_by_setup".to_string(),
        format!(
            "if touch \"$(dirname \"$PWD\")/overlay/held\" 2>/dev/null; \
             then echo forged >> {dir}/forged; fi"
        ),
        "python3 -m unittest -v".to_string(),
    ]
    .join("; ");
    let log_arg = log.display().to_string();
    let run = env.fix_scripted(
        &repo,
        "agent/overlay",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
        &[
            "--test-cmd",
            &test,
            "--setup-cmd",
            &setup,
            "--allow-write",
            &log_arg,
            "--json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let json: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    assert_eq!(json["outcome"], "passed", "{json}");

    let lines = |name: &str| -> Vec<String> {
        std::fs::read_to_string(log.join(name))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    // Before any change (fails), after the fix (passes), and that pass again from a fresh
    // setup (the one it stood on was made from the base's tree).
    let runs = lines("runs");
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(runs.iter().all(|m| m == "overlay"), "{runs:?}");
    let setups = lines("setup");
    assert!(!setups.is_empty());
    assert!(setups.iter().all(|m| m == "plain"), "{setups:?}");
    assert!(
        !log.join("forged").exists(),
        "a test run wrote the overlay's note"
    );
    // What the tests changed is in no commit either.
    let data = env.git(&repo, &["show", "agent/overlay:data.txt"]);
    assert_eq!(data, "committed\n");
}
