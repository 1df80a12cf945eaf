//! The reading tools on a repository with big directories, through the real binary: the
//! listing never hides a top-level entry, pages on with an offset, and search answers in path
//! order with its cap, skipping what .gitignore leaves out.

use crate::common::*;
use serde_json::json;

/// calc.py and its test at the root, beside `data/` (1200 files) and `pkg/` (600 files).
fn crowded_repo(env: &TestEnv) -> std::path::PathBuf {
    let mut files: Vec<(String, String)> = vec![
        ("calc.py".into(), CALC.into()),
        ("test_calc.py".into(), TEST_CALC.into()),
        (".gitignore".into(), "build/\n__pycache__/\n".into()),
    ];
    files.extend((0..1200).map(|i| {
        (
            format!("data/d{:02}/f{i:04}.txt", i / 100),
            format!("{i}\n"),
        )
    }));
    files.extend((0..600).map(|i| (format!("pkg/m{i:04}.py"), format!("x = {i}\n"))));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    env.repo("crowded", &refs)
}

#[test]
fn a_crowded_repository_is_listed_and_searched_whole_and_in_order() {
    let env = TestEnv::new();
    let repo = crowded_repo(&env);
    let before = UserState::capture(&env, &repo);
    let generate = "mkdir -p build && echo 'def add(a, b): pass' > build/gen.py";
    let replies = json!([
        calls(
            "Look around.",
            vec![
                tool("gen", "run_command", json!({"command": generate})),
                tool("root", "list_files", json!({})),
                tool("pkg", "list_files", json!({"path": "pkg"})),
                tool("pkg2", "list_files", json!({"path": "pkg", "offset": 500})),
            ]
        ),
        calls(
            "Search.",
            vec![
                tool("defs", "search", json!({"pattern": "def (test_)?add"})),
                tool("many", "search", json!({"pattern": "^x = ", "path": "pkg"})),
            ]
        ),
        calls("add() subtracts; make it add.", vec![fix_add()]),
        end_turn("Fixed add()."),
    ]);
    let run = env.fix_scripted(&repo, "agent/crowded", replies, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let results = run.results();
    let ok = |id: &str| {
        let (is_error, text) = &results[id];
        assert!(!is_error, "{id}: {text}");
        text.clone()
    };

    assert_eq!(
        ok("root"),
        "data/ (1200 files)\npkg/ (600 files)\n.gitignore\ncalc.py\ntest_calc.py\n",
        "every top-level entry, and nothing .gitignore leaves out"
    );
    let pkg = ok("pkg");
    assert!(pkg.starts_with("pkg/m0000.py\npkg/m0001.py\n"), "{pkg}");
    assert!(
        pkg.ends_with("[entries 1-500 of 600; for the next page call list_files with path \"pkg\" and offset 500]\n"),
        "{pkg}"
    );
    let pkg2 = ok("pkg2");
    assert!(pkg2.starts_with("pkg/m0500.py\n"), "{pkg2}");
    assert!(
        pkg2.ends_with("pkg/m0599.py\n[entries 501-600 of 600: the last page]\n"),
        "{pkg2}"
    );

    assert_eq!(
        ok("defs"),
        "calc.py:1: def add(a, b):\ntest_calc.py:4: def test_add():",
        "the protected test is searched; build/ is ignored"
    );
    let many = ok("many");
    let lines: Vec<&str> = many.lines().collect();
    assert_eq!(lines.len(), 201, "{many}");
    assert_eq!(lines[0], "pkg/m0000.py:1: x = 0");
    assert_eq!(lines[199], "pkg/m0199.py:1: x = 199");
    assert_eq!(
        lines[200],
        "[400 more matches not shown; narrow the pattern or the path]"
    );

    assert_eq!(UserState::capture(&env, &repo), before);
}
