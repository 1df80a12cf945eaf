//! Real project layouts: the inventory is held by name, by count or by exit code as each
//! runner's output allows; a src layout and tox.ini are read as their users have them; tests
//! that cannot run stop before any model call, saying why and how to fix it.

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const UNIT_ADD: &str = "import unittest\nfrom calc import add\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n";
const UNIT_MUL: &str = "import unittest\nfrom calc import multiply\n\n\nclass TestMul(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(multiply(4, 5), 20)\n";

/// calc.py whose add() subtracts, with unittest tests: add's alone, or multiply's too (which
/// passes before any change).
fn unittest_calc(env: &TestEnv, name: &str, with_passing: bool) -> PathBuf {
    let mut files = vec![("calc.py", CALC), ("test_calc.py", UNIT_ADD)];
    if with_passing {
        files.push(("test_mul.py", UNIT_MUL));
    }
    env.repo(name, &files)
}

/// One reply that replaces calc.py with `content`, then the end of the turn.
fn rewrite_calc(content: &str) -> Value {
    json!([
        calls(
            "Rewrite.",
            vec![tool(
                "w",
                "write_file",
                json!({"path": "calc.py", "content": content})
            )]
        ),
        end_turn("Done.")
    ])
}

/// A "fix" that makes every test that calls add() skip itself instead of failing.
const CALC_SKIPS: &str = "import unittest\n\n\ndef add(a, b):\n    raise unittest.SkipTest('later')\n\n\ndef multiply(a, b):\n    return a * b\n";

/// `fix --json` with `replies`; the exit code and the JSON report.
fn fix_json(
    env: &TestEnv,
    repo: &Path,
    branch: &str,
    replies: Value,
    extra: &[&str],
) -> (i32, Value) {
    let script = env.script(&format!("{}.json", branch.replace('/', "-")), replies);
    let mut args = vec!["--json", "--max-turns", "2"];
    args.extend_from_slice(extra);
    let out = env.fix(repo, &script, branch, &args);
    let json: Value = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)));
    (code(&out), json)
}

#[test]
fn unittest_passes_a_correct_fix_and_catches_a_skip_whatever_its_verbosity() {
    let env = TestEnv::new();
    let commands = [
        ("python3 -m unittest", "by count"),
        ("python3 -m unittest -q", "by count"),
        ("python3 -m unittest -v", "by name"),
        ("python3 -m unittest -q test_calc", "by count"),
        ("python3 -m unittest test_calc test_mul", "by count"),
    ];
    for (i, (command, how)) in commands.into_iter().enumerate() {
        for with_passing in [false, true] {
            if command.ends_with("test_mul") && !with_passing {
                continue;
            }
            let story = format!("{command} (a passing test too: {with_passing})");
            let repo = unittest_calc(&env, &format!("u{i}{with_passing}"), with_passing);
            let flags = ["--test-cmd", command];
            let (code, fixed) =
                fix_json(&env, &repo, "agent/fix", rewrite_calc(CALC_FIXED), &flags);
            assert_eq!(code, 0, "{story}: a correct fix passes: {}", fixed["tests"]);
            let checked = fixed["tests"]["inventory_checked"].as_str().unwrap();
            let expected = if with_passing || how == "by name" {
                how
            } else {
                checked
            };
            assert_eq!(checked, expected, "{story}");
            let (code, dodged) =
                fix_json(&env, &repo, "agent/skip", rewrite_calc(CALC_SKIPS), &flags);
            assert_eq!(
                code, 1,
                "{story}: a test skipped by the code is no pass: {}",
                dodged["tests"]
            );
            assert!(
                dodged["tests"]["summary"]
                    .as_str()
                    .unwrap()
                    .ends_with("1 vanished"),
                "{story}: {}",
                dodged["tests"]
            );
        }
    }
}

#[test]
fn node_and_make_and_a_silent_script_are_held_as_far_as_their_output_allows() {
    let env = TestEnv::new();
    let test = "const { test } = require('node:test');\nconst assert = require('node:assert');\n\
        const { add } = require('./calc');\ntest('adds', () => assert.strictEqual(add(2, 3), 5));\n\
        test('adds zero', () => assert.strictEqual(add(0, 0), 0));\n";
    let js = env.repo(
        "js",
        &[
            ("calc.js", "exports.add = (a, b) => a - b;\n"),
            ("calc.test.js", test),
        ],
    );
    let fixed = "exports.add = (a, b) => a + b;\n";
    // The code ends the process before any test ran: nothing is counted.
    let quits = "process.exit(0);\nexports.add = (a, b) => a + b;\n";
    let write = |content: &str| {
        json!([
            calls(
                "Rewrite.",
                vec![tool(
                    "w",
                    "write_file",
                    json!({"path": "calc.js", "content": content})
                )]
            ),
            end_turn("Done.")
        ])
    };
    for (command, how) in [
        ("node --test", "by name"),
        ("node --test --test-reporter=dot", "by count"),
    ] {
        let flags = ["--test-cmd", command];
        let branch = |name: &str| format!("agent/{name}-{}", how.replace(' ', "-"));
        let (code, json) = fix_json(&env, &js, &branch("node"), write(fixed), &flags);
        assert_eq!(code, 0, "{command}: {}", json["tests"]);
        assert_eq!(json["tests"]["inventory_checked"], how, "{command}");
        let (code, json) = fix_json(&env, &js, &branch("quit"), write(quits), &flags);
        assert_eq!(
            code, 1,
            "{command}: a run that ran no test is no pass: {}",
            json["tests"]
        );
    }

    let make = env.repo(
        "make",
        &[
            ("calc.py", CALC),
            ("test_calc.py", UNIT_ADD),
            ("test_mul.py", UNIT_MUL),
            ("Makefile", "test:\n\tpython3 -m unittest\n"),
        ],
    );
    let (code, json) = fix_json(
        &env,
        &make,
        "agent/make",
        rewrite_calc(CALC_FIXED),
        &["--test-cmd", "make test"],
    );
    assert_eq!(code, 0, "{}", json["tests"]);
    let (code, json) = fix_json(
        &env,
        &make,
        "agent/make-skip",
        rewrite_calc(CALC_SKIPS),
        &["--test-cmd", "make test"],
    );
    assert_eq!(
        code, 1,
        "make test: the skip shows in unittest's counts: {}",
        json["tests"]
    );

    // A script that prints nothing: its exit code is all there is, and the report says so.
    let silent = env.repo(
        "silent",
        &[
            ("calc.py", CALC),
            (
                "check.sh",
                "python3 -c 'import calc; assert calc.add(2, 3) == 5' 2>/dev/null\n",
            ),
        ],
    );
    let (code, json) = fix_json(
        &env,
        &silent,
        "agent/sh",
        rewrite_calc(CALC_FIXED),
        &["--test-cmd", "sh check.sh"],
    );
    assert_eq!(code, 0, "{}", json["tests"]);
    assert_eq!(json["tests"]["inventory_checked"], "by exit code");
}

#[test]
fn a_src_layout_with_tox_ini_is_tested_as_an_editable_install_would_have_it() {
    let env = TestEnv::new();
    let tox = "[tox]\nenvlist = py\n\n[testenv]\ndeps =\n    pytest\n    pytest-agentgit-absent-plugin\n\
        setenv =\n    CALC_MODE = strict\ncommands =\n    pytest --basetemp={envtmpdir} -p no:agentgit {posargs}\n";
    let repo = env.repo(
        "srclayout",
        &[
            ("pyproject.toml", "[project]\nname = \"calc\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n"),
            ("tox.ini", tox),
            ("src/calc/__init__.py", CALC),
            ("tests/test_calc.py", "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"),
        ],
    );
    let write = json!([
        calls(
            "Fix.",
            vec![tool(
                "e",
                "edit_file",
                json!({"path": "src/calc/__init__.py", "old_text": "a - b", "new_text": "a + b"})
            )]
        ),
        end_turn("Done.")
    ]);
    let script = env.script("src.json", write);
    let out = env
        .fix_cmd(&repo, &script, "agent/src", &["--json"])
        .env("PATH", pytest_path())
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let rules = json["tests"]["rules"].to_string();
    assert!(
        rules.contains("src layout: the tests import `calc`"),
        "{rules}"
    );
    assert!(
        rules.contains(
            "not tox.ini's commands: tox.ini's commands need pytest-agentgit-absent-plugin"
        ),
        "{rules}"
    );
    assert!(
        stderr(&out).contains("agent-git: tests: `python3 -m pytest -q`"),
        "{}",
        stderr(&out)
    );
    let (passed, output) = export_and_test(
        &env,
        &repo,
        "agent/src",
        "PYTHONPATH=src python3 -m pytest -q",
        &pytest_path(),
    );
    assert!(
        passed,
        "the exported branch passes for whoever runs it: {output}"
    );
}

/// `fix --json` on `repo` with a script that has no reply at all: any model call would end the
/// run as a model error.
fn stops_before_the_model(env: &TestEnv, repo: &Path, extra: &[&str], says: &str) {
    stops_before_the_model_with(env, repo, extra, says, |_| {});
}

fn stops_before_the_model_with(
    env: &TestEnv,
    repo: &Path,
    extra: &[&str],
    says: &str,
    adjust: impl FnOnce(&mut std::process::Command),
) {
    let script = env.script("none.json", json!([]));
    let mut args = vec!["--json"];
    args.extend_from_slice(extra);
    let mut cmd = env.fix_cmd(repo, &script, "agent/never", &args);
    cmd.env("PATH", pytest_path());
    adjust(&mut cmd);
    let out = cmd.output().unwrap();
    let story = format!("{extra:?}: {}\n{}", stdout(&out), stderr(&out));
    assert_eq!(code(&out), 4, "{story}");
    let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(json["outcome"], "tests-cannot-run", "{story}");
    assert_eq!(json["branch"], Value::Null, "{story}");
    let reason = json["reason"].as_str().unwrap();
    assert!(reason.contains(says), "{story}");
    assert!(
        stderr(&out).contains(&format!(
            "the tests cannot run, so no model is called: {reason}"
        )),
        "{story}"
    );
    assert_eq!(
        env.git(repo, &["branch", "--list", "agent/*"]),
        "",
        "no branch is kept"
    );
}

#[test]
fn tests_that_cannot_run_stop_before_any_model_call_with_the_fix() {
    let env = TestEnv::new();
    let missing_dependency = env.repo(
        "dep",
        &[
            ("requirements.txt", "agentgit-absent-dependency>=1.0\n"),
            ("calc.py", "import agentgit_absent_dependency\n"),
            ("tests/test_a.py", "import unittest\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n"),
            ("tests/test_b.py", "import unittest\nimport calc\n\n\nclass U(unittest.TestCase):\n    def test_b(self):\n        pass\n"),
        ],
    );
    stops_before_the_model(
        &env,
        &missing_dependency,
        &[],
        "a dependency the project declares",
    );
    stops_before_the_model(
        &env,
        &missing_dependency,
        &["--test-cmd", "python3 -m pytest -q"],
        "ModuleNotFoundError: No module named 'agentgit_absent_dependency'",
    );

    let calc = env.calc_repo();
    stops_before_the_model(
        &env,
        &calc,
        &["--test-cmd", "sh ../run-tests.sh"],
        "names `../run-tests.sh`",
    );
    stops_before_the_model(
        &env,
        &calc,
        &["--test-cmd", "env PATH=/usr/bin:/bin python3 -m pytest -q"],
        "pytest is not installed",
    );

    let broken_test = env.repo(
        "syntax",
        &[
            ("calc.py", CALC),
            (
                "test_calc.py",
                "from calc import add\n\ndef test_add(:\n    assert add(2, 3) == 5\n",
            ),
        ],
    );
    stops_before_the_model(
        &env,
        &broken_test,
        &["--test-cmd", "python3 -m pytest -q"],
        "in test_calc.py: a protected file",
    );

    let node = env.repo(
        "mocha",
        &[
            (
                "package.json",
                r#"{"name": "calc", "private": true, "scripts": {"test": "mocha"}}"#,
            ),
            ("calc.js", "exports.add = (a, b) => a - b;\n"),
        ],
    );
    stops_before_the_model(&env, &node, &[], "`mocha`, which is not installed");

    let crate_dir = env.repo(
        "crate",
        &[
            ("Cargo.toml", "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dev-dependencies]\nagent-git-absent-crate = \"1\"\n"),
            ("src/lib.rs", "pub fn add(a: i32, b: i32) -> i32 { a - b }\n"),
        ],
    );
    // The user's own toolchain and registry cache, where the crate is not.
    let home = std::env::var("HOME").unwrap();
    stops_before_the_model_with(&env, &crate_dir, &[], "Run `cargo fetch`", |cmd| {
        cmd.env("HOME", &home);
    });
}

#[test]
fn a_test_file_the_command_does_not_run_is_named_in_the_report() {
    let env = TestEnv::new();
    let repo = env.repo(
        "unrun",
        &[
            ("calc.py", CALC),
            ("test_calc.py", UNIT_ADD),
            ("mul_test.py", UNIT_MUL),
        ],
    );
    let script = env.script("unrun.json", rewrite_calc(CALC_FIXED));
    let out = env.fix(
        &repo,
        &script,
        "agent/unrun",
        &["--test-cmd", "python3 -m unittest"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let note = "protected, not run by `python3 -m unittest`: mul_test.py";
    assert!(env.message(&repo, "agent/unrun").contains(note));
    // Detected, the command runs it.
    let script = env.script("detected.json", rewrite_calc(CALC_FIXED));
    let out = env.fix(&repo, &script, "agent/detected", &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report = env.message(&repo, "agent/detected");
    assert!(!report.contains("not run by"), "{report}");
    assert!(report.contains("2 passed, 0 failed"), "{report}");
}

#[test]
fn the_packages_installed_in_the_checkout_are_what_the_node_tests_use() {
    let env = TestEnv::new();
    let test = "const { test } = require('node:test');\nconst assert = require('node:assert');\n\
        const { twice } = require('twice-lib');\nconst { add } = require('./calc');\n\
        test('adds', () => assert.strictEqual(add(2, 3), twice(2.5)));\n";
    let repo = env.repo(
        "installed",
        &[
            (".gitignore", "node_modules/\n"),
            (
                "package.json",
                r#"{"name": "calc", "private": true, "scripts": {"test": "run-node-tests"}}"#,
            ),
            ("calc.js", "exports.add = (a, b) => a - b;\n"),
            ("calc.test.js", test),
        ],
    );
    // What `npm install` would have left: a library and a tool on node_modules/.bin.
    let modules = repo.join("node_modules");
    std::fs::create_dir_all(modules.join("twice-lib")).unwrap();
    std::fs::create_dir_all(modules.join(".bin")).unwrap();
    std::fs::write(
        modules.join("twice-lib/index.js"),
        "exports.twice = (x) => 2 * x;\n",
    )
    .unwrap();
    let tool = modules.join(".bin/run-node-tests");
    std::fs::write(&tool, "#!/bin/sh\nexec node --test\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let before = UserState::capture(&env, &repo);
    let fix = json!([
        calls("Fix.", vec![tool_call_edit("calc.js", "a - b", "a + b")]),
        end_turn("Done.")
    ]);
    let (code, json) = fix_json(&env, &repo, "agent/installed", fix, &[]);
    assert_eq!(code, 0, "{json}");
    assert!(
        json["tests"]["rules"]
            .to_string()
            .contains("node_modules: the packages installed in your checkout"),
        "{}",
        json["tests"]["rules"]
    );
    assert_eq!(
        UserState::capture(&env, &repo),
        before,
        "the checkout is untouched"
    );
}

fn tool_call_edit(path: &str, old: &str, new: &str) -> Value {
    tool(
        "e",
        "edit_file",
        json!({"path": path, "old_text": old, "new_text": new}),
    )
}

#[test]
fn a_venv_in_the_checkout_with_an_editable_install_is_used_but_imports_the_branchs_code() {
    let env = TestEnv::new();
    let test = "import unittest\n\nimport venv_only_helper\nfrom calc import add\n\n\n\
        class TestAdd(unittest.TestCase):\n    def test_add(self):\n        \
        self.assertEqual(add(2, 3), venv_only_helper.FIVE)\n";
    let repo = env.repo(
        "venvproject",
        &[
            (".gitignore", ".venv/\n"),
            ("requirements.txt", "venv-only-helper\n"),
            ("src/calc/__init__.py", CALC),
            ("tests/__init__.py", ""),
            ("tests/test_calc.py", test),
        ],
    );
    // What `python3 -m venv .venv && pip install -e . venv-only-helper` leaves: a dependency
    // in site-packages and a path entry that points at the checkout's own src/.
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip", ".venv"])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(made.success());
    let site = site_packages(&repo.join(".venv"));
    std::fs::write(site.join("venv_only_helper.py"), "FIVE = 5\n").unwrap();
    let src = repo.canonicalize().unwrap().join("src");
    std::fs::write(
        site.join("__editable__.calc.pth"),
        format!("{}\n", src.display()),
    )
    .unwrap();
    let fix = json!([
        calls(
            "Fix.",
            vec![tool_call_edit("src/calc/__init__.py", "a - b", "a + b")]
        ),
        end_turn("Done.")
    ]);
    let (code, json) = fix_json(&env, &repo, "agent/venv", fix, &[]);
    assert_eq!(code, 0, "{json}");
    let rules = json["tests"]["rules"].to_string();
    assert!(rules.contains("venv: .venv in your checkout"), "{rules}");
    assert!(rules.contains("src layout"), "{rules}");
    // The checkout's own src/ still subtracts: the pass is the branch's code.
    assert_eq!(
        std::fs::read_to_string(repo.join("src/calc/__init__.py")).unwrap(),
        CALC
    );
}

#[test]
fn the_dry_run_says_what_a_fix_would_find_and_answers_again_from_its_record() {
    let env = TestEnv::new();
    let repo = unittest_calc(&env, "dry", true);
    let tests = |extra: &[&str]| {
        let mut args = vec!["tests", "--json"];
        args.extend_from_slice(extra);
        let out = env.agent(&repo, &args);
        let json: Value = serde_json::from_str(stdout(&out).trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        (code(&out), json, stderr(&out))
    };
    let before = UserState::capture(&env, &repo);
    let (code, first, said) = tests(&[]);
    assert_eq!(code, 0, "some tests fail, so a fix would start: {first}");
    assert_eq!(first["verdict"], "fails");
    assert_eq!(first["inventory"], json!({"checked": "by name", "size": 2}));
    assert_eq!(first["tests"]["summary"], "1 passed, 1 failed");
    assert_eq!(first["cached"], false);
    assert!(
        said.contains("agent-git: tests: `python3 -m unittest discover"),
        "{said}"
    );
    let (_, again, said) = tests(&[]);
    assert_eq!(again["cached"], true, "{said}");
    assert_eq!(again["tests"], first["tests"]);
    let (_, fresh, _) = tests(&["--fresh"]);
    assert_eq!(fresh["cached"], false);

    let (code, counted, _) = tests(&["--test-cmd", "python3 -m unittest"]);
    assert_eq!(code, 0);
    assert_eq!(
        counted["inventory"],
        json!({"checked": "by count", "size": 2})
    );
    let (code, passes, _) = tests(&["--test-cmd", "true"]);
    assert_eq!((code, passes["verdict"].as_str()), (1, Some("passes")));
    let (code, cannot, _) = tests(&["--test-cmd", "sh ./no-such-script.sh"]);
    assert_eq!(code, 4, "{cannot}");
    assert!(cannot["reason"]
        .as_str()
        .unwrap()
        .contains("names `./no-such-script.sh`"));
    let (_, still, _) = tests(&["--test-cmd", "sh ./no-such-script.sh"]);
    assert_eq!(
        still["cached"], false,
        "a stop for the environment is never kept"
    );
    assert_eq!(UserState::capture(&env, &repo), before);

    let text = stdout(&env.agent(&repo, &["tests"]));
    assert!(
        text.contains("Inventory: 2 tests, checked by name"),
        "{text}"
    );
    assert!(text.contains("A fix run would start"), "{text}");
}

#[test]
fn tests_only_pytest_can_run_stop_with_install_pytest_when_it_is_missing() {
    let env = TestEnv::new();
    let repo = env.repo(
        "fixtures",
        &[
            ("calc.py", CALC),
            (
                "test_calc.py",
                "from calc import add\n\n\ndef test_add(tmp_path):\n    assert add(2, 3) == 5\n",
            ),
        ],
    );
    let path = python_without_pytest(&env);
    stops_before_the_model_with(&env, &repo, &[], "Install pytest", |cmd| {
        cmd.env("PATH", &path);
    });
}

#[test]
fn a_module_under_a_src_layouts_src_may_not_shadow_one_from_outside() {
    let env = TestEnv::new();
    let repo = env.repo(
        "shadow",
        &[
            ("src/calc/__init__.py", CALC),
            ("tests/test_calc.py", "import json\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"),
        ],
    );
    // src/ is first on PYTHONPATH: a json package there would be what every test imports.
    let write = json!([
        calls(
            "Shadow.",
            vec![tool(
                "w",
                "write_file",
                json!({"path": "src/json/__init__.py", "content": "import os\nos._exit(0)\n"})
            )]
        ),
        end_turn("Done.")
    ]);
    let run = env.fix_scripted(&repo, "agent/shadow", write, &["--max-turns", "2"]);
    run.assert_refused("w", "protected");
    assert_eq!(run.code(), 1, "{}", run.stderr());
}

#[test]
fn a_parameter_id_made_from_the_time_is_the_same_test_in_every_run() {
    let env = TestEnv::new();
    let test = "import time\n\nimport pytest\n\nfrom calc import add\n\n\n\
        @pytest.mark.parametrize('stamp', [time.time_ns(), time.time_ns() + 1])\n\
        def test_add(stamp):\n    assert add(2, 3) == 5\n";
    let repo = env.repo("stamps", &[("calc.py", CALC), ("test_calc.py", test)]);
    let script = env.script("stamps.json", rewrite_calc(CALC_FIXED));
    let out = env
        .fix_cmd(&repo, &script, "agent/stamps", &["--json"])
        .env("PATH", pytest_path())
        .output()
        .unwrap();
    let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(code(&out), 0, "a correct fix passes: {}", json["tests"]);
    assert_eq!(
        json["tests"]["matched_by_count"],
        json!(["test_calc.py::test_add"])
    );
    assert!(env
        .message(&repo, "agent/stamps")
        .contains("ids that change from run to run, matched by count: test_calc.py::test_add"));
}

#[test]
fn every_member_of_a_cargo_workspace_is_tested_and_quiet_output_is_counted() {
    let env = TestEnv::new();
    let repo = env.repo(
        "workspace",
        &[
            (".gitignore", "target/\n"),
            ("Cargo.toml", "[package]\nname = \"root\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\nmembers = [\"member\"]\n"),
            ("src/lib.rs", "#[test]\nfn root_works() {}\n"),
            ("member/Cargo.toml", "[package]\nname = \"member\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
            ("member/src/lib.rs", "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n}\n"),
        ],
    );
    let home = std::env::var("HOME").unwrap();
    let fix = || {
        json!([
            calls(
                "Fix.",
                vec![tool_call_edit("member/src/lib.rs", "a - b", "a + b")]
            ),
            end_turn("Done.")
        ])
    };
    let json_of = |branch: &str, extra: &[&str]| {
        let script = env.script(&format!("{}.json", branch.replace('/', "-")), fix());
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        let out = env
            .fix_cmd(&repo, &script, branch, &args)
            .env("HOME", &home)
            .output()
            .unwrap();
        let json: Value = serde_json::from_str(stdout(&out).trim())
            .unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        (code(&out), json, stderr(&out))
    };
    let (code, json, said) = json_of("agent/ws", &[]);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("tests: `cargo test --workspace --no-fail-fast`"),
        "{said}"
    );
    assert!(
        said.contains("1 passed, 1 failed (2 tests in the inventory)"),
        "the root's test and the member's: {said}"
    );
    assert_eq!(json["tests"]["inventory_checked"], "by name");
    let (code, json, said) = json_of("agent/quiet", &["--test-cmd", "cargo test -q --workspace"]);
    assert_eq!(code, 0, "{said}");
    assert_eq!(json["tests"]["inventory_checked"], "by count", "{said}");
}

#[test]
fn parameter_ids_the_code_renames_are_not_matched_by_count() {
    let env = TestEnv::new();
    let calc =
        "def add(a, b):\n    return a - b\n\n\nEXAMPLES = {'zero': (0, 0, 0), 'five': (2, 3, 5)}\n";
    let test = "import pytest\n\nimport calc\n\n\n@pytest.mark.parametrize('name', sorted(calc.EXAMPLES))\n\
        def test_add(name):\n    a, b, total = calc.EXAMPLES[name]\n    assert calc.add(a, b) == total\n";
    let repo = env.repo("renamed", &[("calc.py", calc), ("test_calc.py", test)]);
    // The failing case is swapped for one that passes: the ids change, their number does not.
    let swapped = "def add(a, b):\n    return a - b\n\n\nEXAMPLES = {'zero': (0, 0, 0), 'zero2': (0, 0, 0)}\n";
    let dodge =
        "def add(a, b):\n    return a - b\n\n\nEXAMPLES = {'nil': (0, 0, 0), 'nil2': (1, 1, 0)}\n";
    for (name, content) in [("swap", swapped), ("all", dodge)] {
        let script = env.script(&format!("{name}.json"), rewrite_calc(content));
        let out = env
            .fix_cmd(
                &repo,
                &script,
                &format!("agent/{name}"),
                &["--json", "--max-turns", "2"],
            )
            .env("PATH", pytest_path())
            .output()
            .unwrap();
        let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(code(&out), 1, "{name}: {}", json["tests"]);
        assert_eq!(json["tests"]["matched_by_count"], json!([]), "{name}");
    }
}

#[test]
fn a_report_the_code_wrote_itself_before_ending_the_process_is_no_pass() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    // Writes a passing JUnit report where the harness asked for one, then ends the process:
    // run as anyone runs it, it exits 0 too, but no test ran.
    let forger = "import os, re, sys\n\
        m = re.search(r'--junitxml=(\\S+)', os.environ.get('PYTEST_ADDOPTS', ''))\n\
        if m:\n    open(m.group(1), 'w').write('<testsuite><testcase classname=\"test_calc\" \
        name=\"test_add\" file=\"test_calc.py\"/><testcase classname=\"test_calc\" \
        name=\"test_multiply\" file=\"test_calc.py\"/></testsuite>')\n\
        os._exit(0)\n";
    let script = env.script("forge.json", rewrite_calc(forger));
    let out = env
        .fix_cmd(
            &repo,
            &script,
            "agent/forge",
            &["--json", "--max-turns", "2"],
        )
        .env("PATH", pytest_path())
        .output()
        .unwrap();
    let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(code(&out), 1, "{}", json["tests"]);
}

#[test]
fn a_venv_the_repository_commits_is_never_run() {
    let env = TestEnv::new();
    let marker = env.path().join("ran-the-committed-python");
    let python = format!(
        "#!/bin/sh\ntouch '{}'\nexec python3 \"$@\"\n",
        marker.display()
    );
    let repo = env.repo(
        "hostile",
        &[
            (".venv/pyvenv.cfg", "home = /usr/bin\n"),
            (".venv/bin/python3", &python),
            ("calc.py", CALC),
            ("test_calc.py", UNIT_ADD),
        ],
    );
    let tool = repo.join(".venv/bin/python3");
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.git(&repo, &["add", "--chmod=+x", ".venv/bin/python3"]);
    env.git(&repo, &["commit", "-q", "-m", "executable"]);
    let out = env.agent(&repo, &["tests", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert!(
        !json["rules"].to_string().contains("venv"),
        "{}",
        json["rules"]
    );
    assert!(!marker.exists(), "the committed .venv/bin/python3 ran");
}

#[test]
fn a_correct_fix_passes_whatever_pytest_prints_and_whatever_prints_after_it() {
    let env = TestEnv::new();
    let repo = env.calc_repo();
    for (i, command) in [
        "python3 -m pytest -p no:terminal",
        "python3 -m pytest -qq",
        "python3 -m pytest -q && echo 'pyright: 0 errors, 0 warnings, 0 informations'",
    ]
    .into_iter()
    .enumerate()
    {
        let script = env.script(&format!("quiet{i}.json"), rewrite_calc(CALC_FIXED));
        let out = env
            .fix_cmd(
                &repo,
                &script,
                &format!("agent/quiet{i}"),
                &["--json", "--test-cmd", command],
            )
            .env("PATH", pytest_path())
            .output()
            .unwrap();
        let json: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(code(&out), 0, "{command}: {}", json["tests"]);
    }
}

#[test]
fn a_module_in_the_checkout_named_like_one_the_probe_imports_is_never_run() {
    let env = TestEnv::new();
    let marker = env.path().join("ran-the-checkouts-module");
    let planted = format!("open('{}', 'w').write('ran')\n", marker.display());
    let repo = env.repo(
        "planted",
        &[
            ("calc.py", CALC),
            ("test_calc.py", UNIT_ADD),
            ("csv.py", &planted),
            ("textwrap.py", &planted),
            ("pytest.py", &planted),
        ],
    );
    // Asking python3 what it has (pytest? which modules?) runs outside the sandbox.
    let out = env.agent(&repo, &["tests", "--json"]);
    assert!(matches!(code(&out), 0 | 4), "{}", stderr(&out));
    assert!(
        !marker.exists(),
        "a module of the checkout ran outside the sandbox"
    );
}
