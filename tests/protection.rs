//! Test files are protected by code: refused at the tool layer, nothing committed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{json, Value};

fn results(transcript: &std::path::Path, message: usize) -> Vec<Value> {
    let t: Value = serde_json::from_str(&std::fs::read_to_string(transcript).unwrap()).unwrap();
    t["messages"][message]["content"]
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
    let script = env.script(
        "r.json",
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
    );
    let transcript = env.path().join("t.json");
    let out = env.fix(
        &repo,
        &script,
        "agent/sneaky",
        &["--transcript", transcript.to_str().unwrap()],
    );
    assert_eq!(code(&out), 3, "the script ends: {}", stderr(&out));

    let results = results(&transcript, 2);
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
    let script = env.script(
        "r.json",
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
    );
    let transcript = env.path().join("t.json");
    let out = env.fix(
        &repo,
        &script,
        "agent/link",
        &["--transcript", transcript.to_str().unwrap()],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let results = results(&transcript, 2);
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
    let script = env.script(
        "r.json",
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
    );
    let transcript = env.path().join("t.json");
    let out = env.fix(
        &repo,
        &script,
        "agent/patterns",
        &[
            "--protect",
            "golden/",
            "--max-turns",
            "2",
            "--transcript",
            transcript.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let flags: Vec<bool> = results(&transcript, 2)
        .iter()
        .map(|r| r["is_error"] == true)
        .collect();
    assert_eq!(flags, vec![true, true, true, true, false]);
    assert_eq!(env.show(&repo, "agent/patterns:free.txt"), "2\n");
    assert_eq!(env.show(&repo, "agent/patterns:team/a.txt"), "1\n");
}
