//! Proven changes: after a passed run each change is left out alone and the tests run again,
//! so that the report tells the changes the tests require from those they do not.

use crate::common::*;
use serde_json::{json, Value};

/// A calculator whose add() subtracts, with a comment block far from it.
fn long_calc() -> String {
    let mut text = String::from("# The calculator.\n");
    text.push_str(&"#\n".repeat(12));
    text.push_str(CALC);
    text
}

#[test]
fn a_change_no_test_needs_is_told_apart_from_the_fix() {
    let env = TestEnv::new();
    let calc = long_calc();
    let repo = env.repo("calc", &[("calc.py", &calc), ("test_calc.py", TEST_CALC)]);
    let replies = json!([
        calls(
            "Fix add(), and say so at the top; also leave notes.",
            vec![
                fix_add(),
                tool(
                    "header",
                    "edit_file",
                    json!({"path": "calc.py", "old_text": "# The calculator.\n",
                           "new_text": "# The calculator, whose add() adds.\n"}),
                ),
                tool(
                    "notes",
                    "write_file",
                    json!({"path": "NOTES.md", "content": "add() was fixed.\n"}),
                ),
            ],
        ),
        end_turn("Done.")
    ]);
    let run = env.fix_scripted(&repo, "agent/proven", replies, &["--json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let report = env.message(&repo, "agent/proven");
    assert!(
        report.contains("Changes the tests require (each left out alone"),
        "{report}"
    );
    let verdict = |line_part: &str| -> String {
        report
            .lines()
            .find(|line| line.contains(line_part))
            .map(|line| line.rsplit(": ").next().unwrap_or("").to_string())
            .unwrap_or_else(|| panic!("no line with {line_part}: {report}"))
    };
    assert_eq!(verdict("calc.py @@ -1,"), "not required by the tests");
    assert_eq!(verdict("(+1 -1): required"), "required");
    assert_eq!(
        verdict("NOTES.md the whole file"),
        "not required by the tests"
    );
    // Diff order, from 0: NOTES.md, then calc.py's two hunks.
    assert_eq!(
        env.trailer(&repo, "agent/proven", "Agent-Unrequired"),
        "0,1"
    );

    let json: Value = serde_json::from_str(&stdout(&run.out)).unwrap();
    assert_eq!(json["changes"]["status"], "proven");
    let required: Vec<bool> = json["changes"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["required"].as_bool().unwrap())
        .collect();
    assert_eq!(required, vec![false, false, true]);
    let secs = json["changes"]["secs"].as_f64().unwrap();
    assert!(json["changes"]["one_test_run_secs"].as_f64().unwrap() > 0.0);
    assert!(secs > 0.0, "{}", json["changes"]);

    // Turned off, nothing is proven and the report says so.
    let replies = json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]);
    let run = env.fix_scripted(&repo, "agent/unproven", replies, &["--no-prove-hunks"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(env
        .message(&repo, "agent/unproven")
        .contains("Changes the tests require: not proven (turned off (--no-prove-hunks))"));

    // Only what the tests require lands, tested first; a run without a proof is refused.
    let out = env.agent(&repo, &["apply", "agent/unproven", "--required-only"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("has no proof"), "{}", stderr(&out));
    let out = env.agent(&repo, &["apply", "agent/proven", "--required-only"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("in a clean room"), "{}", stderr(&out));
    assert!(stdout(&out).contains("(2 left out)"), "{}", stdout(&out));
    let landed = std::fs::read_to_string(repo.join("calc.py")).unwrap();
    assert_eq!(landed, long_calc().replace("return a - b", "return a + b"));
    assert!(!repo.join("NOTES.md").exists());
    let message = env.git(&repo, &["log", "-1", "--format=%B"]);
    assert!(
        message.contains("2 that they do not are left out"),
        "{message}"
    );
    assert_eq!(env.git(&repo, &["status", "--porcelain"]), "");
}
