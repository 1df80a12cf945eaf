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

/// A test the code under test rewrites while the tests run never makes the run pass: the
/// protected entries are mounted read-only, and what the run wrote through its overlay is
/// looked at again from the protection's patterns. Here the list those mounts are made from,
/// kept between runs in the repository's git dir, was planted without the rewritten test
/// (as a run without the sandbox could): the write goes through, and the run still fails.
#[test]
fn a_test_rewritten_while_the_tests_run_never_passes_whatever_the_kept_list_says() {
    let env = TestEnv::new();
    let repo = env.repo(
        "calc",
        &[
            ("calc.py", "def add(a, b):\n    return a - b\n\n\ndef multiply(a, b):\n    return a * b\n"),
            ("test_a.py", "from calc import multiply\n\n\ndef test_multiply():\n    assert multiply(4, 5) == 20\n"),
            ("zpkg/test_b.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"),
            ("zpkg/util.py", "x = 1\n"),
        ],
    );
    let path = pytest_path();
    let with_pytest = |cmd: &mut std::process::Command| {
        cmd.env("PATH", &path);
    };
    let first = env.fix_scripted_with(
        &repo,
        "agent/first",
        json!([end_turn("Done.")]),
        &[],
        with_pytest,
    );
    assert_eq!(first.code(), 3, "{}", first.stderr());

    // The kept list, planted: zpkg/test_b.py taken out of every folder's entries.
    let kept = repo.join(".git/agent-git/derived/protected");
    let bytes = std::fs::read(&kept).unwrap();
    let mut lines = bytes.splitn(3, |b| *b == b'\n');
    let (magic, key, body) = (
        lines.next().unwrap(),
        lines.next().unwrap(),
        lines.next().unwrap(),
    );
    let parts: Vec<&[u8]> = body[..body.len() - 1].split(|b| *b == 0).collect();
    let mut planted: Vec<Vec<u8>> = Vec::new();
    let mut at = 0;
    while at < parts.len() {
        let count: usize = std::str::from_utf8(parts[at + 2]).unwrap().parse().unwrap();
        let entries: Vec<&[u8]> = parts[at + 3..at + 3 + count]
            .iter()
            .copied()
            .filter(|e| !e.ends_with(b"test_b.py"))
            .collect();
        planted.extend([parts[at].to_vec(), parts[at + 1].to_vec()]);
        planted.push(entries.len().to_string().into_bytes());
        planted.extend(entries.iter().map(|e| e.to_vec()));
        at += 3 + count;
    }
    let mut forged = [magic, b"\n", key, b"\n"].concat();
    for part in planted {
        forged.extend(part);
        forged.push(0);
    }
    assert_ne!(forged, bytes, "the list held zpkg/test_b.py");
    std::fs::write(&kept, forged).unwrap();

    // Code that rewrites the failing test when it runs in the clean room.
    let hostile = "import os\n\n\ndef add(a, b):\n    return a - b\n\n\ndef multiply(a, b):\n    return a * b\n\n\nif \"agent-git-room\" in os.environ.get(\"TMPDIR\", \"\"):\n    try:\n        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), \"zpkg\", \"test_b.py\"), \"w\") as f:\n            f.write(\"def test_add():\\n    pass\\n\")\n    except OSError:\n        pass\n";
    let run = env.fix_scripted_with(
        &repo,
        "agent/hostile",
        json!([
            calls(
                "Fix.",
                vec![tool(
                    "w",
                    "write_file",
                    json!({"path": "calc.py", "content": hostile})
                )]
            ),
            end_turn("Done.")
        ]),
        &["--json"],
        with_pytest,
    );
    let report: Value = serde_json::from_str(stdout(&run.out).trim()).unwrap();
    assert_ne!(report["outcome"], "passed", "{report}");
    assert_eq!(
        report["tests"]["summary"],
        "failed (the run changed 1 protected entry, e.g. zpkg/test_b.py)",
        "{report}"
    );
    let (passed, output) =
        export_and_test(&env, &repo, "agent/hostile", "python3 -m pytest -q", &path);
    assert!(!passed, "{output}");
}

/// With the sandbox off, a command can write the work tree's index: a protected file it only
/// marks as to be added (`git add -N`, the tree summary written again), after a command that
/// changed nothing, is found, put back and not committed.
#[test]
fn a_protected_entry_a_command_only_marks_in_the_index_is_put_back() {
    let env = TestEnv::new();
    let repo = env.repo("calc", &[("calc.py", CALC), ("test_calc.py", TEST_CALC)]);
    let command = |id: &str, line: &str| tool(id, "run_command", json!({ "command": line }));
    let run = env.fix_scripted(
        &repo,
        "agent/marked",
        json!([
            calls("Look.", vec![command("a", "true")]),
            calls(
                "Mark a runner config.",
                vec![command(
                    "b",
                    ": > pytest.ini && git add -N pytest.ini && git write-tree"
                )]
            ),
            end_turn("Done."),
        ]),
        &["--sandbox", "off"],
    );
    let said = run.stderr();
    let results = results(&run, 4);
    let marked = results[0]["content"].as_str().unwrap();
    assert!(
        marked.contains("changed protected test files (pytest.ini); they were put back"),
        "{marked}\n{said}"
    );
    let files = env.git(&repo, &["ls-tree", "-r", "--name-only", "agent/marked"]);
    assert!(!files.contains("pytest.ini"), "{files}");
}

/// On a repository large enough for a command's status to be taken in two parts (10,000 index
/// entries), after a command that changed nothing: a protected file changed deep in one part, a
/// folder gone from the other and a new file are all seen, the first put back, the rest
/// committed.
#[test]
fn a_status_taken_in_parts_sees_every_change_a_command_made() {
    let env = TestEnv::new();
    let mut files: Vec<(String, String)> = vec![
        ("calc.py".into(), CALC.into()),
        ("test_calc.py".into(), TEST_CALC.into()),
        (
            "pkg/tests/test_core.py".into(),
            "def test_core():\n    pass\n".into(),
        ),
    ];
    files.extend((0..10_000).map(|i| {
        (
            format!("pkg/m{:02}/f{i:05}.py", i / 200),
            format!("x = {i}\n"),
        )
    }));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let repo = env.repo("large", &refs);
    let command = |id: &str, line: &str| tool(id, "run_command", json!({ "command": line }));
    let run = env.fix_scripted(
        &repo,
        "agent/parts",
        json!([
            calls("Look.", vec![command("a", "true")]),
            calls(
                "Change things.",
                vec![command(
                    "b",
                    "echo 'assert True' >> pkg/tests/test_core.py && rm -r pkg/m49 \
                     && echo 'y = 1' > pkg/m00/new.py"
                )]
            ),
            end_turn("Done."),
        ]),
        &[],
    );
    let said = run.stderr();
    let results = results(&run, 4);
    let changed = results[0]["content"].as_str().unwrap();
    assert!(
        changed
            .contains("changed protected test files (pkg/tests/test_core.py); they were put back"),
        "{changed}\n{said}"
    );
    let files = env.git(&repo, &["ls-tree", "-r", "--name-only", "agent/parts"]);
    assert!(files.contains("pkg/m00/new.py"), "{said}");
    assert!(!files.contains("pkg/m49/"), "{said}");
    let test = env.git(&repo, &["show", "agent/parts:pkg/tests/test_core.py"]);
    assert!(!test.contains("assert True"), "{test}");
}
