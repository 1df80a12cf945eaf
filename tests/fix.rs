//! The fix loop end to end: the real binary, real repositories, scripted models.

use crate::common::*;
use serde_json::{json, Value};

#[test]
fn fixes_the_calc_example_on_its_own_branch() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let script = env.script(
        "r.json",
        json!([
            calls(
                "Look at the code.",
                vec![tool("r", "read_file", json!({"path": "calc.py"}))]
            ),
            calls("add() subtracts; make it add.", vec![fix_add()]),
            end_turn("Fixed add()."),
        ]),
    );
    let out = env.fix(&repo, &script, "agent/calc", &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    assert_eq!(
        env.subjects(&repo, "agent/calc"),
        vec![
            "add() subtracts; make it add",
            "agent-git: tests pass: Fix the adder"
        ]
    );
    assert_eq!(env.show(&repo, "agent/calc:calc.py"), CALC_FIXED);
    let edit = env.message(&repo, "agent/calc~1");
    assert!(edit.starts_with("add() subtracts; make it add\n"), "{edit}");
    let run_id = env.trailer(&repo, "agent/calc~1", "Agent-Run");
    assert_eq!(run_id.len(), 8);
    let author = env.git(
        &repo,
        &["log", "-1", "--format=%an <%ae> / %cn", "agent/calc~1"],
    );
    assert_eq!(author.trim(), "agent-git <agent-git@localhost> / Test User");

    // The report is an empty commit whose trailers git itself can read.
    let diff = env.git(&repo, &["diff", "--stat", "agent/calc~1", "agent/calc"]);
    assert_eq!(diff, "");
    assert_eq!(env.trailer(&repo, "agent/calc", "Agent-Run"), run_id);
    assert_eq!(env.trailer(&repo, "agent/calc", "Agent-Outcome"), "passed");
    assert_eq!(
        env.trailer(&repo, "agent/calc", "Agent-Tests"),
        "2 passed, 0 failed"
    );
    assert_eq!(env.trailer(&repo, "agent/calc", "Agent-Turns"), "3");
    let report = env.message(&repo, "agent/calc");
    assert!(report.contains("[2] edit calc.py -> commit "), "{report}");
    assert!(report.contains("calc.py +1 -1"), "{report}");
    assert!(report.contains("agent-git apply agent/calc"), "{report}");
    assert_eq!(
        stdout(&out).trim(),
        report.trim(),
        "stdout carries the same report"
    );
    assert!(
        stderr(&out).contains("turn 2: edit calc.py -> commit"),
        "progress goes to stderr"
    );

    // The work tree is gone, the branch stays, the user's main is as it was.
    assert_eq!(env.worktrees_but_the_pool(&repo), 1);
    assert_eq!(std::fs::read_to_string(repo.join("calc.py")).unwrap(), CALC);
}

#[test]
fn a_wrong_edit_is_rejected_by_the_tests_then_the_right_one_passes() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let wrong = tool(
        "w",
        "edit_file",
        json!({"path": "calc.py", "old_text": "return a - b", "new_text": "return b - a"}),
    );
    let right = tool(
        "r",
        "edit_file",
        json!({"path": "calc.py", "old_text": "return b - a", "new_text": "return a + b"}),
    );
    let run = env.fix_scripted(
        &repo,
        "agent/two",
        json!([
            calls("Swap the operands.", vec![wrong]),
            end_turn("Done."),
            calls("It must add.", vec![right]),
            end_turn("Done now."),
        ]),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        env.subjects(&repo, "agent/two"),
        vec![
            "Swap the operands",
            "It must add",
            "agent-git: tests pass: Fix the adder"
        ]
    );
    let report = env.message(&repo, "agent/two");
    assert!(
        report.contains("[2] end of turn: tests -> 1 passed, 1 failed"),
        "{report}"
    );
    assert!(
        report.contains("[4] end of turn: tests -> 2 passed, 0 failed"),
        "{report}"
    );

    // The transcript holds the whole conversation, the failures fed back included.
    assert!(run.transcript["system"]
        .as_str()
        .unwrap()
        .contains("read-only"));
    let tools: Vec<&str> = run.transcript["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        vec![
            "list_files",
            "read_file",
            "search",
            "write_file",
            "edit_file",
            "delete_file",
            "run_tests",
            "run_command",
            "ask_user"
        ]
    );
    let messages = run.transcript["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 8, "first message, 4 replies, 3 answers");
    let feedback = messages[4]["content"][0]["text"].as_str().unwrap();
    assert!(feedback.contains("They still fail"), "{feedback}");
    assert!(feedback.contains("test_calc.py::test_add"), "{feedback}");
}

#[test]
fn ending_the_turn_while_tests_fail_gets_the_failures_back() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let run = env.fix_scripted(
        &repo,
        "agent/claims",
        json!([
            end_turn("All good, I think."),
            calls("Fine, fixing.", vec![fix_add()]),
            end_turn("Fixed.")
        ]),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let first = run.transcript["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(first.starts_with("Task: Fix the adder"), "{first}");
    assert!(
        first.contains("1 passed, 1 failed"),
        "the first message carries the test result: {first}"
    );
    let feedback = run.transcript["messages"][2]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        feedback.contains("- test_calc.py::test_add: AssertionError"),
        "{feedback}"
    );
    assert_eq!(env.trailer(&repo, "agent/claims", "Agent-Turns"), "3");
}

#[test]
fn the_turn_budget_ends_the_run_with_an_honest_report() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let look = || calls("Looking.", vec![tool("l", "list_files", json!({}))]);
    let script = env.script("r.json", json!([look(), look(), look(), look()]));
    let out = env.fix(&repo, &script, "agent/budget", &["--max-turns", "2"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(
        env.subjects(&repo, "agent/budget"),
        vec!["agent-git: tests still fail after 2 turns: Fix the adder"]
    );
    let report = env.message(&repo, "agent/budget");
    assert!(
        report.contains("Outcome: turn-limit (the turn budget of 2 was spent)"),
        "{report}"
    );
    assert!(
        report.contains("Still failing:\n  test_calc.py::test_add: AssertionError"),
        "{report}"
    );
    assert!(
        report.contains("Files changed since base:\n  none"),
        "{report}"
    );
    assert_eq!(
        env.trailer(&repo, "agent/budget", "Agent-Outcome"),
        "turn-limit"
    );
    assert_eq!(
        env.trailer(&repo, "agent/budget", "Agent-Tests"),
        "1 passed, 1 failed"
    );
}

#[test]
fn an_exhausted_script_is_a_model_error_with_a_report() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let script = env.script(
        "r.json",
        json!([calls(
            "Half a fix.",
            vec![tool("l", "list_files", json!({}))]
        )]),
    );
    let out = env.fix(&repo, &script, "agent/exhausted", &[]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let report = env.message(&repo, "agent/exhausted");
    assert!(
        report.contains("Outcome: model-error (the model failed: script exhausted"),
        "{report}"
    );
    assert_eq!(
        env.trailer(&repo, "agent/exhausted", "Agent-Outcome"),
        "model-error"
    );
    assert!(stdout(&out).contains("test_calc.py::test_add"));
}

#[test]
fn json_output_has_the_documented_shape() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let script = env.script(
        "r.json",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
    );
    let out = env.fix(&repo, &script, "agent/json", &["--json", "--keep-worktree"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let head = env.git(&repo, &["rev-parse", "agent/json"]);
    let edit = env.git(&repo, &["rev-parse", "agent/json~1"]);
    let base = env.git(&repo, &["rev-parse", "main"]);
    assert_eq!(v["branch"], "agent/json");
    assert_eq!(v["base"], base.trim());
    assert_eq!(v["outcome"], "passed");
    assert_eq!(v["turns"], 2);
    assert_eq!(
        v["tests"],
        json!({
            "command": "built-in Python runner",
            "rules": ["test command from Python test files, and no pytest"],
            "passed": true,
            "summary": "2 passed, 0 failed",
            "failing": [],
            "passing": ["test_calc.py::test_add", "test_calc.py::test_multiply"],
            "vanished": [],
            "vanished_uncounted": 0,
            "matched_by_count": [],
            "exit_code_only": false,
            "inventory_checked": "by name",
            "cached": false
        })
    );
    assert_eq!(v["commits"], json!([edit.trim()]));
    assert_eq!(v["report_commit"], head.trim());
    assert_eq!(v["run_id"].as_str().unwrap().len(), 8);
    let worktree = std::path::PathBuf::from(v["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("calc.py")).unwrap(),
        CALC_FIXED
    );
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        vec![
            "attempt",
            "base",
            "branch",
            "changes",
            "commits",
            "cost_usd",
            "harness_secs",
            "model",
            "notes",
            "outcome",
            "reason",
            "reasoning",
            "report_commit",
            "run_id",
            "sandbox",
            "tests",
            "timing",
            "turns",
            "usage",
            "worktree"
        ]
    );
    // Where the time went: the model, the confined processes (two test runs at least), the rest.
    let secs = |key: &str| v["timing"][key].as_f64().unwrap();
    let harness = v["harness_secs"].as_f64().unwrap();
    assert!(secs("processes_secs") > 0.0, "{}", v["timing"]);
    assert!(secs("model_secs") >= 0.0, "{}", v["timing"]);
    let sum = secs("model_secs") + secs("processes_secs") + harness;
    assert!(
        (sum - secs("wall_secs")).abs() < 0.01,
        "{} + {harness}",
        v["timing"]
    );
}

/// The test run before any change goes beside the work tree's checkout, in a sandbox of its
/// own: its time is the processes' time all the same.
#[test]
fn the_test_run_before_any_change_counts_in_the_processes_time() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[("calc.py", CALC), ("test_calc.py", UNITTEST_CALC)],
    );
    let run = env.fix_scripted(
        &repo,
        "agent/timed",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
        &["--test-cmd", "sleep 0.6; python3 -m unittest -v", "--json"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let v: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    // Two test runs of 0.6 s at least: the one before any change and the one after the fix.
    let processes = v["timing"]["processes_secs"].as_f64().unwrap();
    assert!(processes >= 1.2, "{}", v["timing"]);
}

#[test]
fn bad_tool_calls_are_errors_for_the_model_and_the_run_goes_on() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let outside = env.path().join("outside.txt");
    let run = env.fix_scripted(
        &repo,
        "agent/bad",
        json!([
            calls(
                "Try things.",
                vec![
                    tool("a", "launch_rockets", json!({})),
                    tool("b", "read_file", json!({})),
                    tool("c", "read_file", json!({"path": 42})),
                    tool(
                        "d",
                        "write_file",
                        json!({"path": "../outside.txt", "content": "x"})
                    ),
                    tool(
                        "e",
                        "write_file",
                        json!({"path": ".git/hooks/pre-commit", "content": "x"})
                    ),
                    tool("f", "read_file", json!({"path": outside.to_str().unwrap()})),
                    tool(
                        "g",
                        "edit_file",
                        json!({"path": "calc.py", "old_text": "return a-b", "new_text": "x"})
                    ),
                    tool("h", "search", json!({"pattern": "("})),
                ]
            ),
            calls("Now properly.", vec![fix_add()]),
            end_turn("Done."),
        ]),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!outside.exists());
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    let results = run.transcript["messages"][2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 8, "one tool_result per tool_use, in order");
    let expect = [
        ("a", "unknown tool `launch_rockets`"),
        ("b", "invalid input for read_file: missing field `path`"),
        ("c", "invalid input for read_file: invalid type"),
        ("d", "refused: ../outside.txt leads outside the repository"),
        ("e", "refused: .git/hooks/pre-commit is inside .git"),
        ("f", "is absolute"),
        ("g", "old_text was not found in calc.py"),
        ("h", "invalid regular expression"),
    ];
    for (result, (id, text)) in results.iter().zip(expect) {
        assert_eq!(result["type"], "tool_result");
        assert_eq!(result["tool_use_id"], id);
        assert_eq!(result["is_error"], true, "{result}");
        assert!(
            result["content"].as_str().unwrap().contains(text),
            "{id}: {result}"
        );
    }
    assert_eq!(
        env.subjects(&repo, "agent/bad"),
        vec!["Now properly", "agent-git: tests pass: Fix the adder"]
    );
}

#[test]
fn the_users_dirty_checkout_is_untouched() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    env.git(&repo, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(repo.join("calc.py"), "# work in progress\n").unwrap();
    std::fs::write(repo.join("notes.txt"), "untracked\n").unwrap();
    std::fs::write(repo.join("staged.py"), "x = 1\n").unwrap();
    env.git(&repo, &["add", "staged.py"]);
    std::fs::write(repo.join("stashed.py"), "y = 2\n").unwrap();
    env.git(&repo, &["stash", "push", "-q", "-u", "--", "stashed.py"]);
    let before = UserState::capture(&env, &repo);

    // The base is main's commit: the run works there, not in the user's changes.
    let script = env.script(
        "r.json",
        json!([
            calls(
                "Fix.",
                vec![
                    fix_add(),
                    tool(
                        "w",
                        "write_file",
                        json!({"path": "notes.txt", "content": "agent"})
                    )
                ]
            ),
            end_turn("Done.")
        ]),
    );
    let out = env.fix(&repo, &script, "agent/dirty", &["--base", "main"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(UserState::capture(&env, &repo), before);
    assert_eq!(env.show(&repo, "agent/dirty:notes.txt"), "agent");
}

#[test]
fn two_runs_at_once_on_one_repository_both_succeed() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let script = env.script(
        "r.json",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
    );
    let model = format!("script:{}", script.display());
    let spawn = |branch: &str| {
        env.agent_cmd(&repo, &["fix", "--model", &model, "--branch", branch])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("agent/one"), spawn("agent/two"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(code(&a), 0, "{}", stderr(&a));
    assert_eq!(code(&b), 0, "{}", stderr(&b));
    for branch in ["agent/one", "agent/two"] {
        assert_eq!(env.show(&repo, &format!("{branch}:calc.py")), CALC_FIXED);
        assert_eq!(env.trailer(&repo, branch, "Agent-Outcome"), "passed");
    }
    assert_ne!(
        env.trailer(&repo, "agent/one", "Agent-Run"),
        env.trailer(&repo, "agent/two", "Agent-Run")
    );
    assert_eq!(env.worktrees_but_the_pool(&repo), 1);
}

#[test]
fn the_default_branch_name_comes_from_the_task_and_run_id() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let script = env.script(
        "r.json",
        json!([calls("Fix.", vec![fix_add()]), end_turn("Done.")]),
    );
    let model = format!("script:{}", script.display());
    let out = env.agent(&repo, &["fix", "--model", &model, "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let expected = format!(
        "agent/make-the-failing-tests-pass-{}",
        v["run_id"].as_str().unwrap()
    );
    assert_eq!(v["branch"], expected.as_str());
    assert!(env
        .git(&repo, &["branch", "--list", &expected])
        .contains(&expected));
}

#[test]
fn the_demo_runs_the_real_flow_without_a_key_or_network() {
    let env = TestEnv::new();
    let out = env.agent(env.path(), &["demo"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("agent-git: tests pass: "), "{text}");
    assert!(text.contains("edit calc.py -> commit"), "{text}");
    assert!(
        text.contains("end of turn: tests -> 1 passed, 2 failed"),
        "the wrong edit is rejected: {text}"
    );
    assert!(
        text.contains("run `python3 -c 'from calc import add; print(add(2, 3))'` -> exit code 0"),
        "{text}"
    );
    assert!(
        text.contains("edit test_calc.py -> refused: protected"),
        "{text}"
    );
    assert!(text.contains("=== git log --stat"), "{text}");
    assert!(text.contains(" calc.py | 2 +-"), "{text}");
}

#[test]
fn ctrl_c_ends_the_run_with_a_report_and_leaves_the_checkout_alone() {
    use std::io::BufRead;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    std::fs::write(repo.join("calc.py"), "# uncommitted work\n").unwrap();
    let before = UserState::capture(&env, &repo);
    // The marker goes where the sandboxed command may write: the kept work tree.
    let test_cmd = "sleep 2; touch survived.txt".to_string();
    let script = env.script("r.json", json!([end_turn("Done.")]));
    let model = format!("script:{}", script.display());
    let mut child = env
        .agent_cmd(
            &repo,
            &[
                "fix",
                "--model",
                &model,
                "--branch",
                "agent/int",
                "--test-cmd",
                &test_cmd,
                "--keep-worktree",
                "--json",
            ],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    // The notice is said once its look is done, beside the start: before the start's line or
    // after it, and never later than the report.
    let mut said = Vec::new();
    while !said
        .iter()
        .any(|l: &String| l.contains("on branch agent/int"))
    {
        said.push(lines.next().unwrap().unwrap());
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    interrupt(&child);
    said.extend(lines.map(Result::unwrap));
    let out = child.wait_with_output().unwrap();
    assert!(
        said.iter()
            .any(|l| l.contains("your uncommitted changes are not part of this run")),
        "{said:#?}"
    );
    assert_eq!(code(&out), 130);
    assert_eq!(
        env.trailer(&repo, "agent/int", "Agent-Outcome"),
        "interrupted"
    );
    let report = env.message(&repo, "agent/int");
    assert!(
        report.contains("Outcome: interrupted (interrupted by the user)"),
        "{report}"
    );
    assert!(report.contains("touch"), "{report}");
    assert_eq!(UserState::capture(&env, &repo), before);
    assert_eq!(
        env.git(&repo, &["worktree", "list"]).lines().count(),
        2,
        "kept, as asked"
    );
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let worktree = std::path::PathBuf::from(v["worktree"].as_str().unwrap());
    assert!(worktree.join("calc.py").exists());
    // Had the test command survived, it would have touched the marker by now.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert!(
        !worktree.join("survived.txt").exists(),
        "the test command was killed with the run"
    );
}

#[test]
fn a_cut_off_reply_is_continued_and_ignored_paths_are_not_written() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            (".gitignore", "build/\n"),
        ],
    );
    let run = env.fix_scripted(&repo, "agent/cut", json!([
            {"stop_reason": "max_tokens", "content": [{"type": "text", "text": "Let me think about this at len"}]},
            calls("Stash a copy.", vec![tool("b", "write_file", json!({"path": "build/calc.py", "content": "x"}))]),
            calls("Fix.", vec![fix_add()]),
            end_turn("Done."),
        ]), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let nudge = run.transcript["messages"][2]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(nudge.contains("cut off at the token limit"), "{nudge}");
    let ignored = &run.transcript["messages"][4]["content"][0];
    assert_eq!(ignored["is_error"], true);
    assert!(
        ignored["content"]
            .as_str()
            .unwrap()
            .contains("git ignores build/calc.py"),
        "{ignored}"
    );
    let report = env.message(&repo, "agent/cut");
    assert!(
        report.contains("[1] reply cut off (max_tokens) -> asked to continue"),
        "{report}"
    );
    assert!(
        report.contains("write build/calc.py -> refused: ignored by git"),
        "{report}"
    );
}

#[test]
fn a_tool_call_in_a_reply_cut_off_at_the_token_limit_does_not_run() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    // The reply ran out of tokens while writing calc.py: its content is half there.
    let cut = tool(
        "half",
        "write_file",
        json!({"path": "calc.py", "content": "def add(a, b):\n    return a +"}),
    );
    let run = env.fix_scripted(
        &repo,
        "agent/half",
        json!([
            {"stop_reason": "max_tokens", "content": [{"type": "text", "text": "Rewrite."}, cut]},
            calls("Fix, smaller.", vec![fix_add()]),
            end_turn("Done."),
        ]),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run.assert_refused("half", "not run: your reply was cut off at the token limit");
    let tools = env.tool_trailers(&repo, "agent/half");
    assert_eq!(
        tools,
        vec!["edit calc.py"],
        "the half-written file was never committed"
    );
    assert!(
        env.message(&repo, "agent/half")
            .contains("[1] reply cut off (max_tokens) -> its tool calls did not run"),
        "{}",
        env.message(&repo, "agent/half")
    );
}

/// `fix` started with its test command sleeping, once it says its branch: the child, with
/// stderr read line by line until then.
fn start_sleeping_run(env: &TestEnv, repo: &std::path::Path, branch: &str) -> std::process::Child {
    use std::io::BufRead;
    let script = env.script(
        &format!("{}.json", branch.replace('/', "-")),
        json!([end_turn("Done.")]),
    );
    let model = format!("script:{}", script.display());
    let mut child = env
        .agent_cmd(
            repo,
            &[
                "fix",
                "--model",
                &model,
                "--branch",
                branch,
                "--test-cmd",
                "sleep 20",
            ],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    while let Some(Ok(line)) = lines.next() {
        if line.contains("tests:") {
            break;
        }
    }
    // The rest of stderr is drained so that the run never blocks on it.
    std::thread::spawn(move || lines.for_each(drop));
    std::thread::sleep(std::time::Duration::from_millis(300));
    child
}

/// GNU `timeout -s INT` signals the command and then its process group, and a key held down
/// repeats: two signals close together are one interrupt, and the run still writes its report.
#[test]
fn two_interrupts_close_together_still_leave_a_report() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let before = UserState::capture(&env, &repo);
    let child = start_sleeping_run(&env, &repo, "agent/twice");
    interrupt(&child);
    std::thread::sleep(std::time::Duration::from_millis(20));
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 130);
    assert_eq!(
        env.trailer(&repo, "agent/twice", "Agent-Outcome"),
        "interrupted"
    );
    assert_eq!(UserState::capture(&env, &repo), before);
}

/// A run that ended without its report (killed outright) is still a run: `runs` lists it as
/// `no-report`, `gc --failed` deletes it, and its branch name can be had again.
#[test]
fn a_run_killed_before_its_report_is_listed_and_collected() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let mut child = start_sleeping_run(&env, &repo, "agent/killed");
    child.kill().unwrap();
    child.wait().unwrap();
    let out = env.agent(&repo, &["runs", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let runs: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let killed: Vec<&Value> = runs
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["branch"] == "agent/killed")
        .collect();
    assert_eq!(killed.len(), 1, "{runs}");
    assert_eq!(killed[0]["outcome"], "no-report", "{runs}");
    let show = env.agent(&repo, &["show", "agent/killed"]);
    assert!(
        stdout(&show).contains("ended without a report"),
        "{}",
        stdout(&show)
    );

    let gc = env.agent(&repo, &["gc", "--failed"]);
    assert_eq!(code(&gc), 0, "{}", stderr(&gc));
    assert!(env
        .git(&repo, &["branch", "--list", "agent/killed"])
        .trim()
        .is_empty());
    let script = env.script("again.json", json!([end_turn("Done.")]));
    let model = format!("script:{}", script.display());
    let again = env.agent(
        &repo,
        &[
            "fix",
            "--model",
            &model,
            "--branch",
            "agent/killed",
            "--max-turns",
            "1",
        ],
    );
    assert_eq!(code(&again), 1, "{}", stderr(&again));
    assert_eq!(
        env.trailer(&repo, "agent/killed", "Agent-Outcome"),
        "turn-limit"
    );
}

/// git allows folder names that are not UTF-8 (one named in Latin-1 here): `check` and `fix`
/// work on such a tree, and a change inside it is committed like any other.
#[test]
fn a_folder_named_in_latin_1_is_a_folder_like_any_other() {
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let latin = repo.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&latin).unwrap();
    std::fs::write(latin.join("notes.txt"), "x\n").unwrap();
    env.git(&repo, &["add", "-A"]);
    env.git(&repo, &["commit", "-q", "-m", "a folder in Latin-1"]);
    let out = env.agent(&repo, &["check"]);
    assert_eq!(
        code(&out),
        1,
        "the tests fail, and say so: {}",
        stderr(&out)
    );
    let touch = tool(
        "touch",
        "run_command",
        json!({"command": "for d in caf*; do echo y >> \"$d/notes.txt\"; done"}),
    );
    let run = env.fix_scripted(
        &repo,
        "agent/latin",
        json!([calls("Fix.", vec![touch, fix_add()]), end_turn("Done.")]),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let changed = env.git(&repo, &["diff", "--name-only", "main", "agent/latin"]);
    assert!(changed.contains("\"caf\\351/notes.txt\""), "{changed}");
}

/// `--json-events`: each step is a line of JSON on stdout as it happens, and the last one is
/// the object `--json` prints; a tool following the run reads them while it goes on.
#[test]
fn json_events_come_while_the_run_goes_on() {
    use std::io::BufRead;
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let replies = json!([
        calls("Fix.", vec![fix_add()]),
        calls(
            "Wait.",
            vec![tool("w", "run_command", json!({"command": "sleep 3"}))]
        ),
        end_turn("Done.")
    ]);
    let script = env.script("events.json", replies);
    let mut child = env
        .fix_cmd(&repo, &script, "agent/events", &["--json-events"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut events: Vec<Value> = Vec::new();
    while !events.iter().any(|e| e["type"] == "commit") {
        events.push(serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap());
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the commit of turn 1 is read while turn 2's command still runs"
    );
    events.extend(lines.map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap()));
    assert!(child.wait().unwrap().success());
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "start",
            "test_run",
            "turn",
            "tool_call",
            "commit",
            "turn",
            "tool_call",
            "turn",
            "test_run",
            "end"
        ]
    );
    let edit = env.git(&repo, &["rev-parse", "agent/events~1"]);
    assert_eq!(events[0]["branch"], "agent/events");
    assert_eq!(events[1]["passed"], false, "the tests before any change");
    assert_eq!(events[3]["label"], "edit calc.py");
    assert_eq!(events[4]["commit"], edit.trim());
    assert_eq!(events[8]["summary"], "2 passed, 0 failed");
    let end = &events[9];
    assert_eq!(end["outcome"], "passed");
    assert_eq!(
        end["report_commit"],
        env.git(&repo, &["rev-parse", "agent/events"]).trim()
    );
}
