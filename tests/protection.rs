//! Test files are protected by code: refused at the tool layer, nothing committed.

use crate::common::*;
use serde_json::{json, Value};

/// The content blocks of one message of a run's conversation.
fn results(run: &Run, message: usize) -> Vec<Value> {
    run.messages()[message]["content"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn writes_edits_and_deletes_of_test_files_are_refused_and_nothing_is_committed() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("tests/test_calc.py", TEST_CALC),
            ("tests/__init__.py", ""),
        ],
    );
    let run = env.fix_scripted(
        &repo,
        "agent/sneaky",
        json!([calls(
            "Make the test agree with the code.",
            vec![
                tool(
                    "a",
                    "write_file",
                    json!({"path": "tests/test_calc.py", "content": "def test_add():\n    pass\n"})
                ),
                tool(
                    "b",
                    "edit_file",
                    json!({"path": "tests/test_calc.py", "old_text": "== 5", "new_text": "== -1"})
                ),
                tool("c", "delete_file", json!({"path": "tests/test_calc.py"})),
                tool(
                    "d",
                    "write_file",
                    json!({"path": "tests/test_extra.py", "content": "def test_ok():\n    pass\n"})
                ),
                tool(
                    "e",
                    "write_file",
                    json!({"path": "conftest.py", "content": "collect_ignore = ['tests']\n"})
                ),
                tool(
                    "f",
                    "write_file",
                    json!({"path": "./src/../tests/new_helper.py", "content": "x = 1\n"})
                ),
            ]
        ),]),
        &[],
    );
    assert_eq!(run.code(), 3, "the script ends: {}", run.stderr());

    let results = results(&run, 2);
    assert_eq!(results.len(), 6);
    for result in &results {
        assert_eq!(result["is_error"], true, "{result}");
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .contains("is a protected test file"),
            "{result}"
        );
    }
    assert!(results[0]["content"].as_str().unwrap().starts_with(
        "refused: tests/test_calc.py is a protected test file; change the code under test instead"
    ));

    // Only the report commit; the branch's tree is the base's tree.
    assert_eq!(env.subjects(&repo, "agent/sneaky").len(), 1);
    assert_eq!(env.git(&repo, &["diff", "main", "agent/sneaky"]), "");
    let report = env.message(&repo, "agent/sneaky");
    assert!(
        report.contains("write tests/test_calc.py -> refused: protected"),
        "{report}"
    );
    assert!(
        report.contains("delete tests/test_calc.py -> refused: protected"),
        "{report}"
    );
    assert!(
        report.contains("write tests/test_extra.py -> refused: protected"),
        "{report}"
    );
}

#[test]
fn a_symlink_to_a_test_file_does_not_open_a_way_in() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    std::os::unix::fs::symlink("test_calc.py", repo.join("helpers.py")).unwrap();
    std::os::unix::fs::symlink("/tmp", repo.join("tmp_link")).unwrap();
    env.git(&repo, &["add", "-A"]);
    env.git(&repo, &["commit", "-q", "-m", "links"]);
    let run = env.fix_scripted(
        &repo,
        "agent/link",
        json!([
            calls(
                "Through the link.",
                vec![
                    tool(
                        "a",
                        "edit_file",
                        json!({"path": "helpers.py", "old_text": "== 5", "new_text": "== -1"})
                    ),
                    tool(
                        "b",
                        "write_file",
                        json!({"path": "tmp_link/agent-git-escape.txt", "content": "x"})
                    ),
                ]
            ),
            calls("Fix.", vec![fix_add()]),
            end_turn("Done."),
        ]),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let results = results(&run, 2);
    assert!(results[0]["content"]
        .as_str()
        .unwrap()
        .contains("refused: helpers.py is a protected test file"));
    assert!(results[1]["content"]
        .as_str()
        .unwrap()
        .contains("leads outside the repository"));
    assert!(!std::path::Path::new("/tmp/agent-git-escape.txt").exists());
    assert_eq!(env.show(&repo, "agent/link:test_calc.py"), TEST_CALC);
}

#[test]
fn more_protected_patterns_come_from_flags_git_config_and_agentgit() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", CALC),
            ("test_calc.py", TEST_CALC),
            (".agentgit", "[agent-git]\n\tprotect = team/\n"),
            ("golden/out.txt", "1\n"),
            ("fixtures/a.txt", "1\n"),
            ("team/a.txt", "1\n"),
        ],
    );
    env.git(&repo, &["config", "agent-git.protect", "fixtures/"]);
    let write =
        |id: &str, path: &str| tool(id, "write_file", json!({"path": path, "content": "2\n"}));
    let run = env.fix_scripted(
        &repo,
        "agent/patterns",
        json!([
            calls(
                "Try them all.",
                vec![
                    write("a", "golden/out.txt"),
                    write("b", "fixtures/a.txt"),
                    write("c", "team/a.txt"),
                    write("d", ".agentgit"),
                    write("e", "free.txt"),
                ]
            ),
            end_turn("Done."),
        ]),
        &["--protect", "golden/", "--max-turns", "2"],
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let flags: Vec<bool> = results(&run, 2)
        .iter()
        .map(|r| r["is_error"] == true)
        .collect();
    assert_eq!(flags, vec![true, true, true, true, false]);
    assert_eq!(env.show(&repo, "agent/patterns:free.txt"), "2\n");
    assert_eq!(env.show(&repo, "agent/patterns:team/a.txt"), "1\n");
}

#[test]
fn a_tree_nested_deeper_than_git_goes_is_dropped_and_the_run_goes_on() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    let before = UserState::capture(&env, &repo);
    let deep = "mkdir deep && cd deep && for i in $(seq 1 120); do mkdir d && cd d; done && echo hi > f.py && echo made";
    let replies = json!([
        calls(
            "Nest.",
            vec![
                tool("deep", "run_command", json!({"command": deep})),
                fix_add()
            ]
        ),
        end_turn("Done."),
    ]);
    let run = env.fix_scripted(&repo, "agent/deep", replies, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let (_, text) = &run.results()["deep"];
    assert!(text.contains("deeper than git goes"), "{text}");
    assert_eq!(
        env.git(&repo, &["ls-tree", "-r", "--name-only", "agent/deep"]),
        "calc.py\ntest_calc.py\n"
    );
    assert_eq!(env.worktrees_but_the_pool(&repo), 1);
    assert_eq!(UserState::capture(&env, &repo), before);
}
