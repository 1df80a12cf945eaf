//! Honest ends: a run whose tests cannot run stops before any token is spent; the subject, the
//! outcome and the exit code never disagree; an install step runs in the clean room only when
//! its inputs change.

use crate::common::*;
use serde_json::{json, Value};

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_str(stdout(out).trim()).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

#[test]
fn a_test_command_that_cannot_run_stops_before_the_model_is_called() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let empty = env.repo(
        "empty",
        &[("calc.py", CALC), ("test_calc.py", "import calc\n")],
    );
    let before = UserState::capture(&env, &repo);
    let cases = [
        (
            &repo,
            "no-such-runner --all",
            "the test command was not found (exit 127)",
        ),
        (
            &repo,
            "python3 -c 'import pytest_not_here'; exit 126",
            "not executable (exit 126)",
        ),
        (&empty, "", "collected no tests"),
    ];
    for (i, (dir, command, why)) in cases.into_iter().enumerate() {
        let branch = format!("agent/unusable-{i}");
        let mut extra = vec!["--json"];
        if !command.is_empty() {
            extra.extend(["--test-cmd", command]);
        }
        // A script that would fix the code at once: it must never be asked.
        let replies = json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]);
        let run = env.fix_scripted(dir, &branch, replies, &extra);
        assert_eq!(run.code(), 4, "{command}: {}", run.stderr());
        let v = json_of(&run.out);
        assert_eq!(v["outcome"], "tests-cannot-run", "{v}");
        assert_eq!(v["branch"], Value::Null);
        assert_eq!(v["turns"], 0);
        assert!(
            run.messages().is_empty(),
            "the model was asked: {:?}",
            run.messages()
        );
        assert_eq!(
            env.git(dir, &["branch", "--list", "agent/*"]),
            "",
            "no branch kept"
        );
        assert_eq!(env.worktrees_but_the_pool(dir), 1);

        // Without --json, the report says what to fix.
        let script = env.script("never.json", json!([end_turn("Never asked.")]));
        let mut args = vec![];
        if !command.is_empty() {
            args.extend(["--test-cmd", command]);
        }
        let out = env.fix(dir, &script, &format!("{branch}-text"), &args);
        assert_eq!(code(&out), 4);
        let text = stdout(&out);
        assert!(
            text.starts_with("agent-git: the tests cannot run: Fix the adder"),
            "{text}"
        );
        assert!(text.contains(why), "{command}: {text}");
        // No branch is kept, and none is named as if it were.
        assert!(!text.contains("Agent-Branch"), "{text}");
        assert!(
            stderr(&out).contains("no branch kept: ") && stderr(&out).contains("is deleted"),
            "{}",
            stderr(&out)
        );
        for hint in ["--test-cmd", "--setup-cmd", "--allow-write"] {
            assert!(text.contains(hint), "{hint}: {text}");
        }
        assert!(!text.contains("Review:"), "no branch to review: {text}");
    }
    assert_eq!(UserState::capture(&env, &repo), before);
}

#[test]
fn a_budget_stop_whose_final_run_passes_is_passed_and_says_so() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let look = || calls("Look again.", vec![tool("l", "list_files", json!({}))]);
    // Fixed at once, then stuck repeating a call: the final clean-room run passes.
    let stuck = json!([
        calls("Fix.", vec![fix_add()]),
        look(),
        look(),
        look(),
        look(),
        look()
    ]);
    let run = env.fix_scripted(&repo, "agent/stuck-pass", stuck, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let report = env.message(&repo, "agent/stuck-pass");
    assert!(
        report.starts_with("agent-git: tests pass: Fix the adder"),
        "{report}"
    );
    assert!(
        report.contains("Outcome: passed (the final test run passes; the conversation ended early: the model repeated itself)"),
        "{report}"
    );
    assert_eq!(
        env.trailer(&repo, "agent/stuck-pass", "Agent-Outcome"),
        "passed"
    );

    // The same for the cost budget.
    let priced = |text: &str, tools: Vec<Value>| {
        let mut reply = calls(text, tools);
        reply["usage"] = json!({"input_tokens": 1_000_000, "output_tokens": 0});
        reply
    };
    let costly = json!([
        priced("Fix.", vec![fix_add()]),
        priced("More.", vec![tool("l", "list_files", json!({}))])
    ]);
    env.git(&repo, &["config", "agent-git.price", "1 1"]);
    let run = env.fix_scripted(
        &repo,
        "agent/cost-pass",
        costly,
        &["--max-cost", "1", "--json"],
    );
    env.git(&repo, &["config", "--unset", "agent-git.price"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(json_of(&run.out)["outcome"], "passed");
    assert!(env
        .message(&repo, "agent/cost-pass")
        .contains("the conversation ended early: the cost budget was spent"));

    // And a budget stop whose tests still fail keeps its name, its subject and exit 1.
    let run = env.fix_scripted(
        &repo,
        "agent/turns-fail",
        json!([look(), look()]),
        &["--max-turns", "2"],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(
        env.trailer(&repo, "agent/turns-fail", "Agent-Outcome"),
        "turn-limit"
    );
    assert!(env
        .message(&repo, "agent/turns-fail")
        .starts_with("agent-git: tests still fail after 2 turns"));
}

#[test]
fn an_install_step_runs_in_the_clean_room_and_again_only_when_its_inputs_change() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("requirements.txt", "six\n"),
            (".gitignore", "deps/\n"),
        ],
    );
    let log = env.path().join("setup-log");
    std::fs::create_dir(&log).unwrap();
    let setup = format!(
        "mkdir -p deps && cp requirements.txt deps/installed && echo ran >> '{}/count'",
        log.display()
    );
    // The tests need what the install step made.
    let test_cmd = "test -f deps/installed && python3 -c 'import calc; assert calc.add(2, 3) == 5'";
    let replies = json!([
        calls(
            "A new dependency, then a check.",
            vec![
                tool(
                    "req",
                    "write_file",
                    json!({"path": "requirements.txt", "content": "six\nattrs\n"})
                ),
                tool("t1", "run_tests", json!({})),
            ]
        ),
        calls("Fix.", vec![fix_add()]),
        end_turn("Done."),
    ]);
    let log_arg = log.display().to_string();
    let run = env.fix_scripted(
        &repo,
        "agent/setup",
        replies,
        &[
            "--setup-cmd",
            &setup,
            "--test-cmd",
            test_cmd,
            "--allow-write",
            &log_arg,
            // Proving each change would test (and set up) more trees: counted here are a
            // run's own test runs.
            "--no-prove-hunks",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let count = std::fs::read_to_string(log.join("count")).unwrap();
    assert_eq!(
        count, "ran\nran\nran\n",
        "before any change, after requirements.txt changed, and from scratch to confirm the \
         pass (what it made came from another tree)"
    );
    assert_eq!(
        env.git(&repo, &["ls-tree", "-r", "--name-only", "agent/setup"]),
        ".gitignore\ncalc.py\nrequirements.txt\n",
        "what the install step made stays out of the branch"
    );
    let report = env.message(&repo, "agent/setup");
    assert!(
        report.contains(&format!("also writable on request: {log_arg}")),
        "{report}"
    );
}

#[test]
fn a_harness_failure_before_the_model_still_ends_in_a_report() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let inside = repo.join("scratch");
    std::fs::create_dir(&inside).unwrap();
    let before = UserState::capture(&env, &repo);
    // A temp dir inside the repository cannot hold the clean room.
    let run = env.fix_scripted_with(
        &repo,
        "agent/no-room",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
        &["--json"],
        |cmd| {
            cmd.env("TMPDIR", &inside);
        },
    );
    assert_eq!(run.code(), 4, "{}", run.stderr());
    let v = json_of(&run.out);
    assert_eq!(v["outcome"], "harness-error");
    assert_eq!(v["branch"], "agent/no-room");
    assert_eq!(
        env.git(&repo, &["rev-parse", "agent/no-room"]).trim(),
        v["report_commit"]
    );
    let report = env.message(&repo, "agent/no-room");
    assert!(
        report.starts_with("agent-git: harness error after 0 turns: Fix the adder"),
        "{report}"
    );
    assert!(
        report.contains("set TMPDIR to a directory outside it"),
        "{report}"
    );
    assert!(run.messages().is_empty(), "the model was not asked");
    assert_eq!(UserState::capture(&env, &repo), before);
}
